"""Print sha256 hashes of phaseaware's observable outputs, for structure-only refactors.

Run: ``python scripts/invariant_hashes.py``. A refactor that claims "behaviour does not
change" prints the same lines before and after. Covered:

- ``phaseaware assemble --json examples/request.json``;
- every assembly case of ``benchmarks/assembly.py`` (prompt and placement report);
- the calibration probes, 12 base prompts x every sweep, on the reference and cl100k tokenizers;
- ``phaseaware profile show NAME --json`` for every built-in profile.

Only public names (``phaseaware.__all__``) and the CLI are used, except the probe
builder, which is looked up under its current or its former module path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import phaseaware

ROOT = Path(__file__).resolve().parent.parent


def _sha(data: bytes | str) -> str:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def _cli(*args: str) -> bytes:
    done = subprocess.run(
        [sys.executable, "-m", "phaseaware", *args], cwd=ROOT, capture_output=True, check=True
    )
    return done.stdout


def _benchmark_module():
    spec = importlib.util.spec_from_file_location(
        "_bench_assembly", ROOT / "benchmarks/assembly.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result_doc(result) -> str:
    return json.dumps({"prompt": result.prompt, **result.to_dict()}, sort_keys=True, default=str)


def benchmark_hashes() -> list[tuple[str, str]]:
    bench = _benchmark_module()
    out = []
    options = phaseaware.AssemblyOptions(allow_tokenizer_mismatch=True)
    cases = (("a", 20, 300, 8_000), ("b", 400, 320, 140_000))
    for spec, layout_name in (("tiktoken:cl100k_base", "chatml"), ("deepseek-v4", "deepseek-v4")):
        tok = phaseaware.load_tokenizer(spec)
        layout = phaseaware.get_layout(layout_name, tok)
        names = ["deepseek-v4-flash-base"]
        if spec == "deepseek-v4":
            names = sorted(
                {e.name for e in phaseaware.list_profiles() if e.name.startswith("deepseek")}
            )
        for name in names:
            profile = phaseaware.get_profile(name)
            for label, n, size, budget in cases:
                result = phaseaware.assemble(
                    bench.make_chunks(n, size, seed=n), tokenizer=tok, layout=layout,
                    question=bench.QUESTION, profile=profile, budget_tokens=budget, options=options,
                )  # fmt: skip
                out.append((f"bench {spec} {name} ({label})", _sha(_result_doc(result))))
    return out


def suite_hashes() -> list[tuple[str, str]]:
    """Every timed case of ``benchmarks/assembly.py`` (a)-(f) on each of its tokenizers,
    cache off, cold and warm (the three must agree), and with period-128 and offset
    variants of the profile on o200k."""
    bench = _benchmark_module()
    out = []
    options = phaseaware.AssemblyOptions(allow_tokenizer_mismatch=True)
    profile = phaseaware.get_profile("deepseek-v4-flash-base")
    from phaseaware.assembly.retokenize.windowed import ChunkTokenCache

    for spec, layout_name in bench.TOKENIZERS:
        tok = phaseaware.load_tokenizer(spec)
        layout = phaseaware.get_layout(layout_name, tok)
        variants = [("p8", profile, options)]
        if spec == "tiktoken:o200k_base":
            variants += [
                ("p128", bench.synthetic_profile(128), options),
                ("offsets", profile, dataclasses.replace(options, offsets=(0, 1, 3))),
            ]
        for label, make, budget in bench.suite(False):
            chunks = make()
            for name, prof, opts in variants:
                cache = ChunkTokenCache()
                docs = {
                    _result_doc(
                        phaseaware.assemble(
                            chunks,
                            tokenizer=tok,
                            layout=layout,
                            question=bench.QUESTION,
                            profile=prof,
                            budget_tokens=budget,
                            options=opts,
                            cache=c,
                        )
                    )
                    for c in (None, cache, cache)
                }
                assert len(docs) == 1, f"cache changed {spec} {label} {name}"
                out.append((f"suite {spec} {label} {name}", _sha(docs.pop())))
    return out


def _probes_module():
    for path in ("phaseaware.calibration.probes", "phaseaware.calibrate.probes"):
        try:
            return importlib.import_module(path)
        except ImportError:
            continue
    raise SystemExit("cannot find the probe builder module")


def probe_hashes() -> list[tuple[str, str]]:
    probes = _probes_module()
    out = []
    for spec, layout_name in (("reference", "hf"), ("tiktoken:cl100k_base", "chatml")):
        tok = phaseaware.load_tokenizer(spec)
        layout = phaseaware.get_layout(layout_name, tok)
        settings = probes.ProbeSettings(
            context_tokens=300, n_offsets=8, base_prompts=12, sweeps=tuple(probes.SWEEPS),
            distractors=4, depth=(0.0, 0.9),
        )  # fmt: skip
        h = hashlib.sha256()
        for group in probes.iter_groups(tokenizer=tok, layout=layout, settings=settings):
            for probe in group.probes:
                h.update(json.dumps(dataclasses.asdict(probe), sort_keys=True).encode())
        out.append((f"probes {spec} 12 bases x {','.join(probes.SWEEPS)}", h.hexdigest()))
    return out


def cli_hashes() -> list[tuple[str, str]]:
    out = [
        (
            "assemble --json examples/request.json",
            _sha(_cli("assemble", "--json", "examples/request.json")),
        )
    ]
    for entry in sorted(phaseaware.list_profiles(), key=lambda e: e.name):
        out.append(
            (
                f"profile show {entry.name} --json",
                _sha(_cli("profile", "show", entry.name, "--json")),
            )
        )
    return out


def main() -> None:
    extra = suite_hashes() if "--suite" in sys.argv[1:] else []
    for label, digest in cli_hashes() + benchmark_hashes() + probe_hashes() + extra:
        print(f"{digest}  {label}")


if __name__ == "__main__":
    main()
