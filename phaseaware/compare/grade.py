"""Grading a completion against a question's accepted answers.

* ``exact`` (default): normalised exact match, as SQuAD scores it: lower case,
  punctuation and the articles a/an/the removed, whitespace collapsed; right
  when the completion's first non-empty line equals any accepted answer so
  normalised (a model asked for a short answer gives it on the first line; what
  follows is the model going on until ``--max-tokens``, as lm-eval's
  ``until: ["\n"]`` stops it);
* ``contains``: the normalised answer occurs in the normalised completion as
  whole words;
* ``regex``: each accepted answer is a regular expression searched in the raw
  completion (case-insensitive), each search under a time limit
  (:data:`phaseaware.regexes.SEARCH_SECONDS`);
* ``module:function``: ``function(completion, answers) -> bool``, imported
  once; anything else it returns or raises is refused with the grader named.
"""

from __future__ import annotations

import importlib
import re
import string
from collections.abc import Callable, Sequence

from phaseaware.errors import InputError
from phaseaware.regexes import compile_untrusted

__all__ = ["Grader", "BUILTIN_GRADERS", "first_line", "normalize_answer", "load_grader"]

Grader = Callable[[str, Sequence[str]], bool]
BUILTIN_GRADERS = ("exact", "contains", "regex")

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (SQuAD's normalisation)."""
    lowered = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


def first_line(completion: str) -> str:
    """The completion's first non-empty line (the answer ``exact`` grades)."""
    return next((line for line in completion.splitlines() if line.strip()), "")


def _exact(completion: str, answers: Sequence[str]) -> bool:
    got = normalize_answer(first_line(completion))
    return any(got == normalize_answer(a) for a in answers)


def _contains(completion: str, answers: Sequence[str]) -> bool:
    got = f" {normalize_answer(completion)} "
    return any(f" {normalize_answer(a)} " in got for a in answers if normalize_answer(a))


def _regex(completion: str, answers: Sequence[str]) -> bool:
    # answers (the questions file) and completions (the model) are both untrusted: every
    # search is bounded in time and a pattern past the limit is an error naming it
    return any(
        compile_untrusted(a, source="--grader regex answer", ignore_case=True).search(completion)
        for a in answers
    )


def _external(spec: str) -> Grader:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(
            f"--grader {spec}: cannot import module {module_name!r} ({exc}); check the name "
            "and that it is on PYTHONPATH"
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise InputError(f"--grader {spec}: module {module_name!r} has no callable {attr!r}")

    def grade(completion: str, answers: Sequence[str]) -> bool:
        try:
            verdict = fn(completion, list(answers))
        except Exception as exc:
            raise InputError(
                f"--grader {spec} raised {type(exc).__name__}: {exc}; fix the grader"
            ) from None
        if not isinstance(verdict, bool):
            raise InputError(
                f"--grader {spec} returned {type(verdict).__name__}, not True/False; "
                "a grader returns a bool"
            )
        return verdict

    return grade


def load_grader(spec: str) -> Grader:
    """The grader named ``spec`` (a built-in name or ``module:function``)."""
    if spec == "exact":
        return _exact
    if spec == "contains":
        return _contains
    if spec == "regex":
        return _regex
    if ":" in spec:
        return _external(spec)
    raise InputError(
        f"unknown grader {spec!r}; use exact, contains, regex or module:function (--grader)"
    )


def check_regex_answers(answers: Sequence[str], *, where: str) -> None:
    """Refuse an accepted answer that is not a valid regular expression (``--grader regex``)."""
    for a in answers:
        try:
            compile_untrusted(a, source="answer", ignore_case=True)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
