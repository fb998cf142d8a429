"""``phaseaware profile``: list, show, validate and build profiles (parse, call, print)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from phaseaware.cli.flags import add_trust_flag

if TYPE_CHECKING:
    from phaseaware.profiles.model import Profile

NAME = "profile"
HELP = "List, show, validate or build per-residue accuracy profiles."


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="profile_command", metavar="SUBCOMMAND")
    sub.required = True

    sub.add_parser(
        "list",
        help="list registered profiles (env path, user folder, built-ins)",
        description="List registered profiles, highest precedence first within each name: "
        "$PHASEAWARE_PROFILE_PATH folders, then the user folder, then the built-ins.",
    )

    show = sub.add_parser("show", help="show one profile by model name or file path")
    show.add_argument("name", metavar="NAME", help="model name (prefix match) or .json path")
    show.add_argument(
        "--json", action="store_true", help="print the profile document exactly as stored"
    )
    add_trust_flag(show)

    validate = sub.add_parser("validate", help="check a profile file; exit 1 if invalid")
    validate.add_argument("file", metavar="FILE", help="profile .json file")

    build = sub.add_parser("build", help="rebuild a profile from a calibration log")
    build.add_argument(
        "log", metavar="LOG", help="calibration log written by `phaseaware calibrate`"
    )
    build.add_argument(
        "-o", "--output", metavar="OUT", help="write the profile here (default: print to stdout)"
    )


def run(args: argparse.Namespace) -> int:
    handlers = {"list": _list, "show": _show, "validate": _validate, "build": _build}
    return handlers[args.profile_command](args)


def _list(args: argparse.Namespace) -> int:
    from phaseaware.errors import ProfileError
    from phaseaware.profiles.registry import get_profile, list_profiles

    rows = [("NAME", "ORIGIN", "MODEL", "PERIOD", "SOURCE")]
    for entry in list_profiles():
        try:
            profile = get_profile(entry.path)
        except ProfileError as exc:
            rows.append((entry.name, entry.origin, "INVALID", "-", str(exc)[:60]))
            continue
        source = profile.provenance.source
        rows.append(
            (entry.name, entry.origin, profile.model, str(profile.period), _clip(source, 60))
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        print("  ".join([*cells, row[4]]).rstrip())
    return 0


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(args: argparse.Namespace) -> int:
    from phaseaware.errors import ProfileError
    from phaseaware.profiles.registry import get_profile, profile_path
    from phaseaware.userfiles import read_user_text

    path = profile_path(args.name)
    profile = get_profile(path)  # validates, also for --json
    if args.json:
        sys.stdout.write(read_user_text(path, what="profile file", error=ProfileError))
        return 0
    print(_describe(profile))
    return 0


def _describe(profile: Profile) -> str:
    """Human-readable report: provenance header, per-residue table, chart, summary."""
    from phaseaware.charts import bar_chart

    labels = [f"r={r}" for r in range(profile.period)]
    chart = bar_chart(labels, profile.residue_accuracy, lows=profile.ci_low, highs=profile.ci_high)
    return "\n".join([*_header(profile), "", *_table(profile), "", chart, "", *_summary(profile)])


def _header(profile: Profile) -> list[str]:
    prov = profile.provenance
    return [
        f"model:     {profile.model}",
        f"period:    {profile.period} (residue r = key-token position mod {profile.period})",
        f"stride:    {_or_unknown(profile.compression_stride)} tokens per compressed entry",
        f"window:    {_or_unknown(profile.local_window)} raw tokens before the query"
        + _window_accuracy(profile),
        f"tokenizer: {_or_unknown(profile.tokenizer.spec)} "
        f"(fingerprint {_or_unknown(profile.tokenizer.fingerprint, 'not recorded')})",
        f"source:    {prov.kind}: {prov.source}",
        f"protocol:  {prov.protocol}",
        f"created:   {prov.created} (phaseaware {prov.tool_version})",
    ]


def _window_accuracy(profile: Profile) -> str:
    effect = profile.local_window_accuracy
    if effect is None:
        return "" if profile.local_window is None else " (accuracy there not measured)"
    return (
        f"; {_pct(effect.accuracy)} there [{_pct(effect.ci_low)}–{_pct(effect.ci_high)}], "
        f"n = {effect.n}, key {effect.min_distance}-{effect.max_distance} tokens from the end"
    )


def _table(profile: Profile) -> list[str]:
    reliability = profile.reliability
    head = f"{'r':>3}  {'accuracy':>8}  {'95% CI':>15}  {'n':>6}"
    lines = [head + ("  reliability" if reliability is not None else "")]
    for r in range(profile.period):
        low, high, n = profile.ci_low[r], profile.ci_high[r], profile.n[r]
        ci = f"{_pct(low)}–{_pct(high)}" if low is not None and high is not None else "n/a"
        row = f"{r:>3}  {_pct(profile.residue_accuracy[r]):>8}  {ci:>15}  {_or_unknown(n, '?'):>6}"
        if reliability is not None:
            row += f"  {_pct(reliability[r]):>11}"
        lines.append(row)
    return lines


def _summary(profile: Profile) -> list[str]:
    acc = profile.residue_accuracy
    worst = min(range(profile.period), key=acc.__getitem__)
    best = max(range(profile.period), key=acc.__getitem__)
    lines = [
        f"worst: r={worst} {_pct(acc[worst])}   best: r={best} {_pct(acc[best])}   "
        f"gap: {(acc[best] - acc[worst]) * 100:.1f} points"
    ]
    effect = profile.length_residue_accuracy
    if effect is not None:
        known = ", ".join(
            f"length ≡ {r} (mod {effect.period}): {_pct(a)}"
            for r, a in enumerate(effect.accuracy)
            if a is not None
        )
        lines.append(f"length effect ({effect.kind}, {effect.source}): {known or 'none known'}")
        if effect.note:
            lines.append(f"  {effect.note}")
    return lines


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _or_unknown(value: object, unknown: str = "unknown") -> str:
    return unknown if value is None else str(value)


def _validate(args: argparse.Namespace) -> int:
    from phaseaware.profiles.io import load_profile, validate_profile_file

    errors = validate_profile_file(args.file)
    if errors:
        print(f"invalid: {args.file} ({len(errors)} problem{'s' if len(errors) > 1 else ''})")
        for error in errors:
            print(f"  - {error}")
        return 1
    profile = load_profile(args.file)
    print(
        f"ok: {args.file}: model {profile.model}, period {profile.period}, "
        f"{profile.provenance.kind} ({profile.provenance.source})"
    )
    return 0


def _build(args: argparse.Namespace) -> int:
    from phaseaware.errors import CalibrationError
    from phaseaware.profiles.io import dumps_profile, save_profile

    try:
        from phaseaware.calibration.runner import build_profile_from_log
    except ImportError as exc:
        raise CalibrationError(
            f"cannot build profiles from logs: phaseaware.calibration.runner is unavailable ({exc}); "
            "install a phaseaware version with calibration support"
        ) from exc
    if args.output:  # before reading: the profile must never replace the log
        from phaseaware.atomic import check_output_path, refuse_same_file

        check_output_path(args.output)
        refuse_same_file(args.output, {"the calibration log": args.log}, output_name="-o")
    profile = build_profile_from_log(args.log)
    if args.output:
        path = save_profile(profile, args.output)
        print(f"wrote {path} (model {profile.model}, period {profile.period})")
    else:
        sys.stdout.write(dumps_profile(profile))
    return 0
