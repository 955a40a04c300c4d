"""The ``paper`` queue: produce every ``paper``-preset run the pages show, through library code (no
notebooks), and copy each finished run into ``results/`` for committing. ``--preset cpu`` does the same
for the miniature's runs, whose committed results keep the book build short.

``presets.page_runs(preset)`` declares the runs; those already committed are skipped. Runs go one at a time
through the result cache, so an interrupted queue resumes where it stopped. A GPU command is limited
in time: ``--budget-s`` stops starting new runs after that many seconds, and ``--tar`` packs the new
results into one file to bring back.

    python -m plateau_lib.paper --list                 # what is missing
    python -m plateau_lib.paper --budget-s 500 --tar $OUT/paper.tar.gz
"""
from __future__ import annotations

import argparse
import tarfile
import time
from pathlib import Path

from . import cache, presets
from .utils import cpu_threads, resolve_device


def pending(pages=None, preset: str = "paper") -> list[tuple[str, object, object, dict | None]]:
    """``(page, label, config, extra)`` of every declared run of ``preset`` with no committed result, in
    page order; Fig. 5's copied runs carry the reference's key as ``extra``."""
    runs = presets.page_runs(preset)
    unknown = sorted(set(pages or ()) - set(runs))
    if unknown:
        raise ValueError(f"unknown page(s) {unknown}; pages with paper runs: {sorted(runs)}")
    out = []
    for page, configs in runs.items():
        if pages and page not in pages:
            continue
        reference = configs.get("reference")
        for label, cfg in configs.items():
            extra = {"reference": cache.cache_key(reference)} if cfg.copy_groups else None
            if cache.load_committed(cfg, extra) is None:
                out.append((page, label, cfg, extra))
    return out


def run_queue(pages=None, budget_s: float | None = None, device: str = "auto", preset: str = "paper") -> list[Path]:
    """Train the pending runs (on ``device``) and copy each into ``results/``; returns the folders written."""
    written, start, references = [], time.perf_counter(), {}
    for page, label, cfg, extra in pending(pages, preset):
        if budget_s is not None and time.perf_counter() - start > budget_s:
            print(f"budget of {budget_s:.0f} s spent; stopping before {page} {label}", flush=True)
            break
        if cache.load_committed(cfg, extra) is not None:  # declared twice (e.g. a page's reference)
            continue
        cfg = cfg.replace(device=device)  # the device is provenance, not part of the key
        init_state = None
        if cfg.copy_groups:
            ref_cfg = presets.page_runs(preset)[page]["reference"].replace(device=device)
            if page not in references:
                references[page] = cache.cached_train(ref_cfg, progress=False, need_state=True).final_state
            init_state = references[page]
        result = cache.cached_train(cfg, progress=False, init_state=init_state, extra=extra)
        written.append(cache.commit_result(cfg, extra))
        print(f"{page} {label}: {result.meta.get('wall_time_s')} s on {result.meta.get('device')} "
              f"-> {written[-1].name}", flush=True)
    return written


def write_index(path: Path | None = None) -> Path:
    """``results/runs.csv``: every committed run the pages declare, with its page, preset and provenance."""
    import pandas as pd
    rows = []
    for preset in presets.PRESETS:
        for page, configs in presets.page_runs(preset).items():
            reference = configs.get("reference")
            for label, cfg in configs.items():
                extra = {"reference": cache.cache_key(reference)} if cfg.copy_groups else None
                result = cache.load_committed(cfg, extra)
                if result is not None:
                    rows.append({"folder": Path(result.meta["cache"]).name, "page": page, "preset": preset,
                                 "run": label, "d_model": cfg.d_model, "steps": cfg.steps,
                                 "device": result.meta.get("device"), "wall_time_s": result.meta.get("wall_time_s"),
                                 "commit": result.meta.get("commit"), "date": str(result.meta.get("date", ""))[:10]})
    path = cache.COMMITTED / "runs.csv" if path is None else path
    pd.DataFrame(rows).drop_duplicates("folder").to_csv(path, index=False)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page", action="append", help="only this page's runs (repeatable)")
    parser.add_argument("--preset", default="paper", choices=presets.PRESETS, help="paper (default) or cpu")
    parser.add_argument("--list", action="store_true", help="list the pending runs and exit")
    parser.add_argument("--budget-s", type=float, help="start no new run after this many seconds")
    parser.add_argument("--device", default="auto", help="auto (default), cpu or cuda")
    parser.add_argument("--tar", type=Path, help="pack the results written into this .tar.gz")
    args = parser.parse_args(argv)
    cpu_threads()
    todo = pending(args.page, args.preset)
    print(f"{len(todo)} {args.preset} run(s) pending on {resolve_device(args.device)}", flush=True)
    if args.list:
        for page, label, cfg, _ in todo:
            print(f"  {page:<20} {label}  ({cfg.steps} steps, d_model {cfg.d_model})")
        return 0
    written = run_queue(args.page, args.budget_s, args.device, args.preset)
    print(f"indexed the committed runs in {write_index()}")
    if args.tar and written:
        with tarfile.open(args.tar, "w:gz") as tar:
            for folder in written:
                tar.add(folder, arcname=f"results/{folder.name}")
        print(f"packed {len(written)} result(s) into {args.tar}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
