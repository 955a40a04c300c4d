#!/usr/bin/env python3
"""Execute notebooks/*.ipynb with papermill into book/figures/ (the executed copies the book renders).

Usage: run_notebooks.py [--jobs 2] [--only NAME ...] [--params-json '{"steps": 20}']
                        [--notebook-params-json '{"mws_plateau": {"steps": 20}}']
Environment: PRESET=cpu|paper (default: paper if CUDA is available, else cpu); FRESH=1 passes use_cache=False.

A full build runs the figure chapters of _toc.yml in book order (reproducibility last: it summarises the
others); notebooks not in the TOC run only with --only. Every notebook's parameters are checked against its
parameters cell (plateau_lib.book.run.check_parameters) before any runs. The notebooks run with
PLATEAU_BOOK_BUILD=1, TQDM_DISABLE=1 and PLATEAU_SUMMARIES=book/figures/_summaries (emptied by a full build, as is book/figures/_data).
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

from plateau_lib.book.pages import DATA_FOLDER
from plateau_lib.book.run import check_parameters

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
EXECUTED = ROOT / "book" / "figures"
HTML = ROOT / "book" / "_build" / "html"
SUMMARIES = EXECUTED / "_summaries"
DATA = ROOT / DATA_FOLDER  # the pages' CSV downloads (plateau_lib.book.pages.data_downloads)
TOC = ROOT / "_toc.yml"
PRESETS = ("cpu", "paper")
LAST = ("summary_plateau", "summary_icl", "performance", "reproducibility")  # read the others' summaries and timings,
# so they run alone after them


def toc_files() -> list[str] | None:
    """Every file of _toc.yml in book order (parts -> chapters -> sections, depth first); None without one."""
    import yaml
    if not TOC.exists():
        return None
    toc = yaml.safe_load(TOC.read_text()) or {}

    def walk(entries) -> list[str]:
        files = []
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            files += walk(entry.get("sections"))
        return files

    parts = toc.get("parts") or [toc]  # a TOC without parts lists its chapters at the top level
    return [f for part in parts for f in walk(part.get("chapters"))]


def toc_figures() -> list[str] | None:
    """Names of the executed-notebook chapters (book/figures/NAME) of _toc.yml, in book order."""
    files = toc_files()
    if files is None:
        return None
    return [Path(f).name for f in files if f.startswith("book/figures/")]


def missing_toc_notebooks() -> list[str]:
    """Chapters book/figures/NAME in _toc.yml with no notebooks/NAME.ipynb (the build would fail on them)."""
    return [f"book/figures/{n}" for n in toc_figures() or [] if not (NOTEBOOKS / f"{n}.ipynb").exists()]


def ordered_names(only: list[str] | None) -> list[str]:
    """Notebook names in book order (the TOC's figure chapters), the LAST pages at the end in their order.

    A full build runs only the notebooks in _toc.yml (and says which it leaves out); with `only`, any
    notebook named runs (TOC ones in book order, then the others sorted). Without a _toc.yml, every notebook.
    """
    found = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    toc = toc_figures()
    if toc is None:
        print(f"note: no {TOC.name}: running every notebook in {NOTEBOOKS.name}/", flush=True)
        in_book = found
    else:
        in_book = [n for n in dict.fromkeys(toc) if n in found]
    if only:
        missing = sorted(set(only) - set(found))
        if missing:
            sys.exit(f"error: no notebook named {', '.join(missing)} in {NOTEBOOKS}")
        names = [n for n in in_book if n in only] + [n for n in found if n in only and n not in in_book]
    else:
        left_out = [n for n in found if n not in in_book]
        if left_out:
            print(f"note: not in {TOC.name}, so not run: " + ", ".join(f"notebooks/{n}.ipynb" for n in left_out),
                  flush=True)
        names = in_book
    return [n for n in names if n not in LAST] + [n for n in LAST if n in names]


def check_all(names: list[str], parameters_of) -> None:
    """Every notebook's final parameters against its parameters cell, before any runs; exit on unknown ones."""
    problems = []
    for name in names:
        try:
            check_parameters(NOTEBOOKS / f"{name}.ipynb", parameters_of(name), label=f"notebooks/{name}.ipynb")
        except ValueError as err:
            problems.append(str(err))
    if problems:
        sys.exit("error: " + "\nerror: ".join(problems))


def choose_preset() -> str:
    """$PRESET if set (validated), otherwise 'paper' on a CUDA machine and 'cpu' elsewhere."""
    preset = os.environ.get("PRESET", "").strip()
    if preset:
        if preset not in PRESETS:
            sys.exit(f"error: PRESET must be one of {', '.join(PRESETS)}, got {preset!r}")
        return preset
    import torch
    return "paper" if torch.cuda.is_available() else "cpu"


def fold_parameters(path: Path) -> None:
    """In an executed notebook, collapse the parameters cell (``hide-input``: the page opens with its prose, the
    reader can unfold it) and remove papermill's injected copy (the page's settings tables say what ran)."""
    notebook = json.loads(path.read_text())
    cells = []
    for cell in notebook["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:
            continue
        if "parameters" in tags and "hide-input" not in tags:
            cell["metadata"]["tags"] = [*tags, "hide-input"]
        cells.append(cell)
    path.write_text(json.dumps({**notebook, "cells": cells}, indent=1, ensure_ascii=False) + "\n")


def run_one(name: str, parameters: dict) -> tuple[str, bool, float, str]:
    """Run one notebook with papermill; on success atomically move it to book/figures/NAME.ipynb."""
    EXECUTED.mkdir(parents=True, exist_ok=True)
    tmp = EXECUTED / f".{name}.running.ipynb"
    log = EXECUTED / f"{name}.log"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PLATEAU_BOOK_BUILD="1",
               TQDM_DISABLE="1", PLATEAU_SUMMARIES=str(SUMMARIES))
    # python -m plateau_lib notebook: papermill (kernel python3, output logged, no progress bar), parameters checked again
    cmd = [sys.executable, "-m", "plateau_lib", "notebook", str(NOTEBOOKS / f"{name}.ipynb"), str(tmp),
           "-y", json.dumps(parameters), "--cwd", str(ROOT)]
    start = time.perf_counter()
    with open(log, "w") as out:
        ok = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode == 0
    wall = time.perf_counter() - start
    if ok:
        fold_parameters(tmp)
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
    unknown = sorted(set(per_notebook) - {p.stem for p in NOTEBOOKS.glob("*.ipynb")})
    if unknown:
        sys.exit(f"error: --notebook-params-json names no notebook in {NOTEBOOKS.name}/: {', '.join(unknown)}")
    if not names:
        sys.exit(f"error: no notebooks to run in {NOTEBOOKS}")

    def parameters_of(name: str) -> dict:
        return {**parameters, **per_notebook.get(name, {})}

    check_all(names, parameters_of)
    if not args.only:  # a full build: the Reproducibility page shows exactly this build's summaries and data
        shutil.rmtree(SUMMARIES, ignore_errors=True)
        shutil.rmtree(DATA, ignore_errors=True)
    SUMMARIES.mkdir(parents=True, exist_ok=True)
    parallel = [n for n in names if n not in LAST]
    print(f"running {len(names)} notebook(s) with {parameters}, {args.jobs} at a time", flush=True)

    results = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for result in pool.map(lambda n: run_one(n, parameters_of(n)), parallel):
            results.append(result)
            print(f"  {'ok    ' if result[1] else 'FAILED'} {result[0]:<24} {result[2]:7.1f} s", flush=True)
    write_timings(results, preset)  # the Performance page shows them
    for last in [n for n in LAST if n in names]:
        if not all(ok for _, ok, _, _ in results):
            break
        results.append(run_one(last, parameters_of(last)))
        write_timings(results[-1:], preset)
        print(f"  {'ok    ' if results[-1][1] else 'FAILED'} {last:<24} {results[-1][2]:7.1f} s", flush=True)

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
