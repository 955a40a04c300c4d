"""The ``paper`` queue: produce every ``paper``-preset run the pages show, through library code (no
notebooks, no papermill: a lent GPU machine needs only torch, numpy and pandas), and copy each finished
run into ``results/`` for committing. ``--preset cpu`` does the same for the miniature's runs, whose
committed results keep the book build short.

``presets.page_runs(preset)`` declares the runs. Each is *committed*, *committed, computed on CPU* (a
``paper`` run made without a GPU; ``--replace-cpu`` recomputes it) or *missing*. Missing runs of one
architecture are trained together (``train_many``: stacked on a GPU) through the result cache.

A GPU command is limited in time. ``--budget-s`` stops training at that many seconds, saving every
unfinished run's resume state in ``.cache/results/train-<key>.partial``; ``--tar`` packs the new results
*and* those partial states into one file. On the machine with the repository, ``--unpack FILE`` puts the
results under ``results/`` and the partial states back under ``.cache/results/``, so the next command
(given those folders) resumes where the last one stopped. Results carry their provenance: config,
commit (``$PLATEAU_COMMIT`` where the copy has no ``.git``), device, date and wall time.

The collapse page's miniature language models (``plateau_lib.llm``) are in the same queue, after the training
runs: each is trained, analysed and its tables committed (``results/llm_collapse-<key>/``). Their checkpoints are
too large to pack, so a miniature must finish within one command; one stopped at the budget resumes only on the
same machine.

    python -m plateau_lib.paper --list                 # every run, its status and estimated GPU time
    python -m plateau_lib.paper --budget-s 500 --tar $OUT/paper.tar.gz
    python -m plateau_lib.paper --unpack paper.tar.gz  # back home: results/ and resumable partial states
"""
from __future__ import annotations

import argparse
import tarfile
import time
from pathlib import Path
from typing import NamedTuple

from . import cache, presets
from .train import Stopped
from .utils import cpu_threads, resolve_device

COMMITTED, ON_CPU, MISSING = "committed", "committed, computed on CPU", "missing"

# Rough GPU cost model for --list (an H100, fp32): a step costs the larger of a launch-bound floor and the
# model FLOPs (6 x parameters x tokens) at an effective 20 TFLOP/s; an evaluation (teacher-forced pass and
# greedy generation) about 40 launch-bound steps. Stacking S runs divides the launch-bound part by about S.
LAUNCH_FLOOR_S, EFFECTIVE_FLOPS, EVAL_STEPS = 4e-3, 20e12, 40


class Entry(NamedTuple):
    """One declared run: its page and label, config, extra key input (Fig. 5's reference) and status."""
    page: str
    label: object
    config: object
    extra: dict | None
    status: str
    device: str | None


def _entries(pages=None, preset: str = "paper") -> list[Entry]:
    runs = presets.page_runs(presets.check_preset(preset))
    unknown = sorted(set(pages or ()) - set(runs))
    if unknown:
        raise ValueError(f"unknown page(s) {unknown}; pages that declare {preset} runs: {sorted(runs)}")
    out = []
    for page, configs in runs.items():
        if pages and page not in pages:
            continue
        reference = configs.get("reference")
        for label, cfg in configs.items():
            extra = {"reference": cache.cache_key(reference)} if cfg.copy_groups else None
            result = cache.load_committed(cfg, extra)
            device = None if result is None else str(result.meta.get("device"))
            status = MISSING if result is None else ON_CPU if device == "cpu" and preset == "paper" else COMMITTED
            out.append(Entry(page, label, cfg, extra, status, device))
    return out


def status(pages=None, preset: str = "paper") -> list[Entry]:
    """Every run ``preset``'s pages declare, in page order, with its status."""
    return _entries(pages, preset)


def pending(pages=None, preset: str = "paper", replace_cpu: bool = False) -> list[Entry]:
    """The declared runs still to compute: missing ones, and with ``replace_cpu`` those made on a CPU."""
    todo = (MISSING, ON_CPU) if replace_cpu else (MISSING,)
    return [e for e in _entries(pages, preset) if e.status in todo]


def estimate_gpu_s(cfg, stacked: int = 1) -> float:
    """Rough seconds one run of ``cfg`` takes on one H100 (see the cost model above)."""
    model = cfg.make_task().build_model(cfg)
    params = sum(p.numel() for p in model.parameters())
    tokens = cfg.batch_size * getattr(model.cfg, "block_size", 2 * getattr(model.cfg, "K", 1))
    step = max(LAUNCH_FLOOR_S / stacked, 6 * params * tokens / EFFECTIVE_FLOPS)
    evals = cfg.steps // cfg.eval_every + 2
    return cfg.steps * step + evals * EVAL_STEPS * LAUNCH_FLOOR_S / stacked


def _check_device(device, preset: str, allow_cpu: bool):
    dev = resolve_device(device)
    if preset == "paper" and dev.type != "cuda" and not allow_cpu:
        raise ValueError(f"the paper queue is meant for a GPU and this machine has {dev.type} only; pass "
                         "--force-cpu (make paper FORCE_CPU=1) to compute paper runs on it anyway")
    return dev


def run_queue(pages=None, budget_s: float | None = None, device: str = "auto", preset: str = "paper",
              replace_cpu: bool = False, allow_cpu: bool = False, backend: str = "auto") -> list[Path]:
    """Train the pending runs (on ``device``) and copy each into ``results/``; returns the folders written.

    Runs with no copied groups go first, stacked by architecture; Fig. 5's copied runs follow, once their
    reference's weights exist. With ``budget_s`` training stops at that many seconds (``train.Stopped``
    is caught; the unfinished runs' resume states stay in ``.cache/results``).
    """
    dev = _check_device(device, preset, allow_cpu)
    todo = pending(pages, preset, replace_cpu)
    started = time.time()
    deadline = None if budget_s is None else started + budget_s
    written, done = [], set()
    fresh = not replace_cpu  # replacing CPU results means recomputing what the committed lookup would find

    def commit(entries, results):
        for e, result in zip(entries, results):
            key = cache.cache_key(e.config, e.extra)
            if key in done:
                continue
            done.add(key)
            written.append(cache.commit_result(e.config, e.extra))
            print(f"{e.page} {e.label}: {result.meta.get('wall_time_s')} s on {result.meta.get('device')} "
                  f"-> {written[-1].name}", flush=True)

    plain = [e for e in todo if not e.config.copy_groups]
    copied = [e for e in todo if e.config.copy_groups]
    groups = {}
    for e in plain:
        groups.setdefault(e.config.model_config(), []).append(e)
    try:
        for entries in groups.values():
            configs = [e.config.replace(device=str(dev)) for e in entries]  # the device is provenance only
            commit(entries, cache.cached_train_many(configs, use_cache=fresh, progress=False, backend=backend,
                                                    deadline=deadline))
        for page in dict.fromkeys(e.page for e in copied):
            entries = [e for e in copied if e.page == page]
            reference = presets.page_runs(preset)[page]["reference"].replace(device=str(dev))
            state = cache.cached_train(reference, progress=False, need_state=True).final_state
            configs = [e.config.replace(device=str(dev)) for e in entries]
            commit(entries, cache.cached_train_many(configs, use_cache=fresh, init_states=[state] * len(configs),
                                                    extras=[e.extra for e in entries], progress=False,
                                                    backend=backend, deadline=deadline))
    except Stopped:
        local = [(e, cache.LOCAL / f"train-{cache.cache_key(e.config, e.extra)}") for e in todo]
        finished = [(e, path) for e, path in local  # stored by this queue before the deadline, not yet committed
                    if (path / "meta.json").exists() and (path / "meta.json").stat().st_mtime >= started]
        commit([e for e, _ in finished], [cache.TrainResult.load(path) for _, path in finished])
        print(f"budget of {budget_s:.0f} s spent: {len(written)} run(s) committed; the unfinished ones resume "
              "from .cache/results/*.partial", flush=True)
    return written


def llm_status(preset: str = "paper") -> list[tuple]:
    """``(label, config, status)`` of the collapse page's miniatures for ``preset`` (committed or missing)."""
    from . import llm
    return [(f"{arch} miniature, seed {seed}", cfg,
             COMMITTED if llm.stored(cfg, prompt_seed=cfg.prompt_seed(0), committed_only=True) else MISSING)
            for (arch, seed), cfg in presets.llm_miniatures(preset).items()]


def run_llm(preset: str = "paper", device: str = "auto", deadline: float | None = None) -> list[Path]:
    """Train, analyse and commit the missing miniatures of the collapse page; returns the folders written."""
    from . import llm
    written = []
    for label, cfg, state in llm_status(preset):
        if state == COMMITTED:
            continue
        try:
            llm.miniature_collapse(cfg.replace(device=str(resolve_device(device))), prompt_seed=cfg.prompt_seed(0),
                                   progress=False, deadline=deadline)
        except TimeoutError as err:
            print(f"llm_collapse {label}: {err}", flush=True)
            break
        written.append(llm.commit(cfg, prompt_seed=cfg.prompt_seed(0)))
        print(f"llm_collapse {label} -> {written[-1].name}", flush=True)
    return written


def partial_folders() -> list[Path]:
    """Resume states of runs stopped part-way (carried to the next command to continue them)."""
    return sorted(p for p in cache.LOCAL.glob("train-*.partial") if (p / "resume.pt").exists())


def pack(tar_path: Path, written: list[Path]) -> Path:
    """One .tar.gz with the new results (as ``results/...``) and the partial states (``.cache/results/...``)."""
    with tarfile.open(tar_path, "w:gz") as tar:
        for folder in written:
            tar.add(folder, arcname=f"results/{folder.name}")
        for folder in partial_folders():
            tar.add(folder, arcname=f".cache/results/{folder.name}")
    return tar_path


def declared_keys() -> set[str]:
    """The result key of every run any page declares, in any preset (training runs and the miniatures' tables)."""
    from . import llm
    runs = {f"train-{cache.cache_key(e.config, e.extra)}" for preset in presets.PRESETS for e in _entries(None, preset)}
    tables = {llm.stored_name(cfg, prompt_seed=cfg.prompt_seed(0)) for preset in presets.PRESETS
              for _, cfg, _ in llm_status(preset)}
    return runs | tables


def unpack(tar_path: Path, root: Path | None = None) -> list[str]:
    """Put a packed queue's results under ``results/`` and its partial states under ``.cache/results/``.

    Every member is checked before anything is written: only ``results/train-<key>/``,
    ``results/llm_collapse-<key>/`` and ``.cache/results/train-<key>.partial/`` of runs some page still declares
    are accepted.
    """
    root = cache.ROOT if root is None else Path(root)
    keys = declared_keys()
    with tarfile.open(tar_path) as tar:
        members = tar.getmembers()
        for m in members:
            parts = Path(m.name).parts
            top = parts[:2] if parts[:1] == (".cache",) else parts[:1]
            folder = parts[len(top)] if len(parts) > len(top) else ""
            key = folder.removesuffix(".partial") if top == (".cache", "results") else folder
            kinds = ("train-",) if top == (".cache", "results") else ("train-", "llm_collapse-")
            ok = (top in {("results",), (".cache", "results")} and folder.startswith(kinds) and ".." not in parts
                  and (m.isfile() or m.isdir()))
            if not ok:
                raise ValueError(f"unexpected member {m.name!r} in {tar_path}: only results/train-<key>/, "
                                 "results/llm_collapse-<key>/ and .cache/results/train-<key>.partial/ are unpacked")
            if key not in keys:
                raise ValueError(f"{tar_path} holds {folder!r}, a run no page declares any more (presets.page_runs); "
                                 "nothing was unpacked")
        tar.extractall(root, members=members, filter="data")
    return sorted({"/".join(Path(m.name).parts[:3 if m.name.startswith(".cache") else 2]) for m in members})


def write_index(path: Path | None = None) -> Path:
    """``results/runs.csv``: every committed run the pages declare, with its page, preset and provenance."""
    import pandas as pd
    rows = []
    for preset in presets.PRESETS:
        for e in _entries(None, preset):
            if e.status == MISSING:
                continue
            result = cache.load_committed(e.config, e.extra)
            rows.append({"folder": Path(result.meta["cache"]).name, "page": e.page, "preset": preset,
                         "run": e.label, "d_model": e.config.d_model, "steps": e.config.steps,
                         "device": result.meta.get("device"), "wall_time_s": result.meta.get("wall_time_s"),
                         "commit": result.meta.get("commit"), "date": str(result.meta.get("date", ""))[:10]})
    path = cache.COMMITTED / "runs.csv" if path is None else path
    pd.DataFrame(rows).drop_duplicates("folder").to_csv(path, index=False)
    return path


def print_status(entries: list[Entry], preset: str) -> None:
    todo = [e.config.model_config() for e in entries if e.status != COMMITTED]
    total = 0.0
    for e in entries:  # runs of one architecture are stacked by train_many
        est = estimate_gpu_s(e.config, max(1, todo.count(e.config.model_config())))
        total += est if e.status != COMMITTED else 0.0
        print(f"  {e.page:<20} {str(e.label):<28} {e.status:<27} {e.config.steps:>5} steps  d_model "
              f"{e.config.d_model:<4} ~{est:5.1f} s GPU")
    counts = {s: sum(e.status == s for e in entries) for s in (COMMITTED, ON_CPU, MISSING)}
    print(f"{preset}: {counts[COMMITTED]} committed, {counts[ON_CPU]} committed but computed on CPU, "
          f"{counts[MISSING]} missing; about {total:.0f} s of GPU time for the missing and CPU-made ones "
          "(a rough estimate; see paper.py)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page", action="append", help="only this page's runs (repeatable)")
    parser.add_argument("--preset", default="paper", choices=presets.PRESETS, help="paper (default) or cpu")
    parser.add_argument("--list", action="store_true", help="print every run with its status and exit")
    parser.add_argument("--replace-cpu", action="store_true", help="also recompute paper runs made on a CPU")
    parser.add_argument("--force-cpu", action="store_true", help="allow paper runs on a machine without a GPU")
    parser.add_argument("--budget-s", type=float, help="stop training after this many seconds (resumable)")
    parser.add_argument("--device", default="auto", help="auto (default), cpu or cuda")
    parser.add_argument("--backend", default="auto", choices=("auto", "stacked", "sequential"),
                        help="train_many's backend (auto: stacked on CUDA)")
    parser.add_argument("--tar", type=Path, help="pack the new results and partial states into this .tar.gz")
    parser.add_argument("--unpack", type=Path, help="unpack a --tar file into results/ and .cache/results/")
    args = parser.parse_args(argv)
    cpu_threads()
    if args.unpack:
        for folder in unpack(args.unpack):
            print(f"unpacked {folder}")
        print(f"indexed the committed runs in {write_index()}")
        return 0
    with_llm = not args.page or "llm_collapse" in args.page
    pages = [p for p in args.page or () if p != "llm_collapse"] or (None if not args.page else [])
    if args.list:
        if pages != []:
            print_status(status(pages, args.preset), args.preset)
        for label, cfg, state in llm_status(args.preset) if with_llm else ():
            print(f"  {'llm_collapse':<20} {label:<28} {state:<27} {cfg.steps:>5} steps  "
                  f"{cfg.batch_size} x {cfg.context} tokens per step")
        return 0
    try:
        dev = _check_device(args.device, args.preset, args.force_cpu)
    except ValueError as err:
        parser.error(str(err))
    todo = pending(pages, args.preset, args.replace_cpu) if pages != [] else []
    print(f"{len(todo)} {args.preset} run(s) to compute on {dev}", flush=True)
    started = time.time()
    written = run_queue(pages, args.budget_s, args.device, args.preset, args.replace_cpu, args.force_cpu,
                        args.backend) if todo else []
    if with_llm:
        deadline = None if args.budget_s is None else started + args.budget_s
        written += run_llm(args.preset, args.device, deadline)
    print(f"indexed the committed runs in {write_index()}")
    if args.tar:
        pack(args.tar, written)
        print(f"packed {len(written)} result(s) and {len(partial_folders())} partial state(s) into {args.tar}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
