"""Typed errors. Every message says what went wrong and how to fix it.

The command line turns these into a one-line message and exit code 1; usage
errors (bad flags) exit with code 2.
"""

from __future__ import annotations

__all__ = [
    "PhaseawareError",
    "InputError",
    "ControlTokenError",
    "TokenizerError",
    "TemplateError",
    "TemplateLimitError",
    "ProfileError",
    "ProfileNotFoundError",
    "FingerprintMismatchError",
    "PeriodMismatchError",
    "BudgetError",
    "VerificationError",
    "CalibrationError",
    "BackendError",
    "LogError",
    "EndpointError",
    "PromptTokenDriftError",
    "MissingExtraError",
    "PhaseawareWarning",
    "UnsupportedRequestError",
    "FilePathError",
    "FileBusyError",
]


class PhaseawareError(Exception):
    """Base class of every error phaseaware raises on purpose."""


class InputError(PhaseawareError, ValueError):
    """The caller's input (chunks, request file, evidence) cannot be used as given."""


class ControlTokenError(InputError):
    """A user string holds a special/chat-control token and the policy is ``"refuse"``.

    ``suggests_neutralize``: the message already names ``control_tokens='neutralize'`` as
    the fix (set where it is raised), so a caller that would add that fix does not.
    """

    def __init__(self, message: str, *, suggests_neutralize: bool = False) -> None:
        super().__init__(message)
        self.suggests_neutralize = suggests_neutralize


class TokenizerError(PhaseawareError):
    """A tokenizer spec cannot be resolved or loaded."""


class TemplateError(PhaseawareError):
    """A prompt template/layout cannot be rendered."""


class TemplateLimitError(TemplateError):
    """A chat template went over the time or size limit of a render."""


class ProfileError(PhaseawareError, ValueError):
    """A profile document is malformed or invalid."""


class ProfileNotFoundError(ProfileError, LookupError):
    """No profile is registered under the requested model name."""


class FingerprintMismatchError(ProfileError):
    """The profile was measured with a different tokenizer than the one in use."""


class PeriodMismatchError(ProfileError):
    """The profile's period differs from the period the caller requires."""


class BudgetError(InputError):
    """The token budget cannot hold the fixed parts of the prompt."""


class VerificationError(PhaseawareError):
    """Re-tokenization did not confirm a planned placement and repair failed."""


class CalibrationError(PhaseawareError):
    """A calibration run cannot proceed (bad settings, mismatched tokenizer, ...)."""


class BackendError(CalibrationError):
    """A model backend failed (unreachable server, auth error, bad response)."""


class LogError(CalibrationError):
    """A calibration log is corrupt or belongs to a different run."""


class UnsupportedRequestError(InputError):
    """A model request holds what the chosen chat format cannot render (tools, settings)."""


class EndpointError(PhaseawareError):
    """A serving endpoint does not tokenize the prompt the way phaseaware rendered it."""


class PromptTokenDriftError(EndpointError):
    """The server's ``usage.prompt_tokens`` disagrees with the plan plus the known offset."""


class MissingExtraError(PhaseawareError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class FilePathError(PhaseawareError, OSError):
    """A file cannot be read or written at that path (missing folder, a device, the input)."""


class FileBusyError(FilePathError):
    """Another process holds the lock of a file this run must own (a calibration log)."""


class PhaseawareWarning(UserWarning):
    """A placement phaseaware cannot vouch for (e.g. the server counted other tokens)."""
