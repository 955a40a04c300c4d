#!/usr/bin/env python3
"""Execute notebooks/*.ipynb with papermill into book/figures/ (the executed copies the book renders).

Usage: run_notebooks.py [--jobs 2] [--only NAME ...] [--params-json '{"steps": 20}']
                        [--notebook-params-json '{"mws_plateau": {"steps": 20}}']
Environment: PRESET=cpu|paper (default: paper if CUDA is available, else cpu); FRESH=1 passes use_cache=False.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
EXECUTED = ROOT / "book" / "figures"
HTML = ROOT / "book" / "_build" / "html"
PRESETS = ("cpu", "paper")
ORDER = ["mws_plateau", "mws_attention_bias", "mws_optimal_init", "llc_calibration"]
LAST = "reproducibility"  # summarises the others, so it runs alone after them


def ordered_names(only: list[str] | None) -> list[str]:
    """Notebook names: ORDER first, then the rest sorted, LAST at the end; restricted to `only`."""
    found = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    names = [n for n in ORDER if n in found] + [n for n in found if n not in ORDER and n != LAST]
    names += [LAST] if LAST in found else []
    if only:
        missing = sorted(set(only) - set(found))
        if missing:
            sys.exit(f"error: no notebook named {', '.join(missing)} in {NOTEBOOKS}")
        names = [n for n in names if n in only]
    return names


def missing_toc_notebooks() -> list[str]:
    """Chapters book/figures/NAME in _toc.yml with no notebooks/NAME.ipynb (the build would fail on them)."""
    import yaml
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text()) if (ROOT / "_toc.yml").exists() else {}
    files = [c["file"] for c in toc.get("chapters", []) if "file" in c]
    return [f for f in files if f.startswith("book/figures/") and not (NOTEBOOKS / f"{Path(f).name}.ipynb").exists()]


def choose_preset() -> str:
    """$PRESET if set (validated), otherwise 'paper' on a CUDA machine and 'cpu' elsewhere."""
    preset = os.environ.get("PRESET", "").strip()
    if preset:
        if preset not in PRESETS:
            sys.exit(f"error: PRESET must be one of {', '.join(PRESETS)}, got {preset!r}")
        return preset
    import torch
    return "paper" if torch.cuda.is_available() else "cpu"


def run_one(name: str, parameters: dict) -> tuple[str, bool, float, str]:
    """Run one notebook with papermill; on success atomically move it to book/figures/NAME.ipynb."""
    EXECUTED.mkdir(parents=True, exist_ok=True)
    tmp = EXECUTED / f".{name}.running.ipynb"
    log = EXECUTED / f"{name}.log"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "papermill", str(NOTEBOOKS / f"{name}.ipynb"), str(tmp),
           "-k", "python3", "--cwd", str(ROOT), "-y", json.dumps(parameters),
           "--log-output", "--no-progress-bar"]
    start = time.perf_counter()
    with open(log, "w") as out:
        ok = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode == 0
    wall = time.perf_counter() - start
    if ok:
        os.replace(tmp, EXECUTED / f"{name}.ipynb")
    elif tmp.exists():
        os.replace(tmp, EXECUTED / f"{name}.failed.ipynb")
    return name, ok, wall, log.read_text()


def papermill_error(log: str, lines: int = 25) -> str:
    """The end of a papermill log, where the exception and its traceback are."""
    return "\n".join(log.rstrip().splitlines()[-lines:])


def write_timings(results: list[tuple[str, bool, float, str]], preset: str) -> None:
    """Merge this run's wall times into book/figures/_timings.json (atomically)."""
    path = EXECUTED / "_timings.json"
    timings = json.loads(path.read_text()) if path.exists() else {}
    for name, ok, wall, _ in results:
        timings[name] = {"wall_s": round(wall, 1), "ok": ok, "preset": preset,
                         "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(timings, indent=1, sort_keys=True))
    os.replace(tmp, path)


def json_object(option: str, text: str) -> dict:
    """Parse an option's JSON object or exit with a clear message."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        sys.exit(f"error: {option} is not valid JSON: {err}")
    if not isinstance(value, dict):
        sys.exit(f"error: {option} must be a JSON object")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2, help="notebooks run at once (default 2, one per core)")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this notebook (repeatable)")
    parser.add_argument("--params-json", default="{}", help="extra parameters for every notebook, as JSON")
    parser.add_argument("--notebook-params-json", default="{}",
                        help="per-notebook parameters {name: {...}}, applied after --params-json")
    args = parser.parse_args()

    extra = json_object("--params-json", args.params_json)
    per_notebook = json_object("--notebook-params-json", args.notebook_params_json)
    preset = choose_preset()
    parameters = {"preset": preset}
    if os.environ.get("FRESH", "") not in ("", "0"):
        parameters["use_cache"] = False
    parameters.update(extra)

    missing = missing_toc_notebooks()
    if missing:
        sys.exit("error: _toc.yml lists pages with no notebook in notebooks/: " + ", ".join(missing))
    names = ordered_names(args.only)
    if not names:
        sys.exit(f"error: no notebooks found in {NOTEBOOKS}")
    parallel = [n for n in names if n != LAST]
    print(f"running {len(names)} notebook(s) with {parameters}, {args.jobs} at a time", flush=True)

    results = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for result in pool.map(lambda n: run_one(n, {**parameters, **per_notebook.get(n, {})}), parallel):
            results.append(result)
            print(f"  {'ok    ' if result[1] else 'FAILED'} {result[0]:<24} {result[2]:7.1f} s", flush=True)
    if LAST in names and all(ok for _, ok, _, _ in results):
        results.append(run_one(LAST, {**parameters, **per_notebook.get(LAST, {})}))
        print(f"  {'ok    ' if results[-1][1] else 'FAILED'} {LAST:<24} {results[-1][2]:7.1f} s", flush=True)
    write_timings(results, preset)

    failed = [r for r in results if not r[1]]
    for name, _, _, log in failed:
        print(f"\nFAILED: notebooks/{name}.ipynb (full log: book/figures/{name}.log)\n"
              f"{papermill_error(log)}", file=sys.stderr)
    if failed:
        shutil.rmtree(HTML, ignore_errors=True)
        print(f"\nremoved {HTML.relative_to(ROOT)} so no half-built book is left", file=sys.stderr)
        return 1
    print(f"all {len(results)} notebook(s) ran in {sum(r[2] for r in results):.1f} s of notebook time", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
