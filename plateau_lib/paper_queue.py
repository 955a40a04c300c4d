"""The ``paper`` queue: produce every ``paper``-preset result the pages show, through library code (no
notebooks, no papermill: a lent GPU machine needs only torch, numpy and pandas), and copy each finished
result into ``results/`` for committing. ``--preset cpu`` does the same for the miniature's runs, whose
committed results keep the book build short.

The queue has two parts, in this order:
1. **Training runs.** ``chapters.page_runs(preset)`` declares them. Each is *committed*, *committed, computed
   on CPU* (a ``paper`` run made without a GPU; ``--replace-cpu`` recomputes it) or *missing*. Missing runs of
   one architecture are trained together (``train_many``: stacked on a GPU) through the result cache; with a
   budget, ``lease_groups`` says which fit (Carroll et al.'s sweep first, M by M, since its states cannot come
   back).
2. **Analyses** (``engine.analysis.Analysis``: each chapter's ``analyses`` module declares its own, gathered in
   book order by ``chapters.analyses``): λ̂ across the MWS plateau and the probe with the collapse locations, the
   collapse page's miniature language models (each trained and analysed in one step: their checkpoints are too
   large to carry, so a miniature must finish within one command), λ̂ at every checkpoint of the stages run and
   λ̂ against M of the task-diversity sweep. Each starts once the training runs it reads exist, and commits its
   tables (``Analysis.commit``).

**Without a GPU** the command line does the CPU-feasible part instead (``run_cpu_queue``): the missing runs
whose cost, multiplied out from their architecture's measured step and evaluation times (``measure_cpu``,
recorded in ``results/cpu_costs.json``), fits ``--cpu-limit-h`` CPU-hours, on two one-thread dask workers,
each committed as it finishes. The rest, and the analyses, are left for a GPU (``--force-cpu`` runs them here).

The command line keeps the queue's working files (resume states, row-by-row tables, the weights and
checkpoints an analysis still needs) in ``.cache/queue/``, apart from the book's ``.cache/results/``, so that
this one folder is what a time-limited GPU command needs to be given. ``--budget-s`` stops the queue at
that many seconds: training saves every unfinished run's resume state, an analysis keeps the rows it has.
``--tar`` packs the new results and the queue's working files (at most ``--carry-mib``, the most useful
first) into .tar.gz parts of at most ``PART_MIB`` each. On the machine with the repository, ``--unpack``
puts the results under ``results/`` and replaces ``.cache/queue/`` with the packed one, so the next command,
given that folder, resumes where the last one stopped. Results carry their provenance: config, commit
(``$PLATEAU_COMMIT`` where the copy has no ``.git``), device, date and wall time.

    python -m plateau_lib paper --list                 # every result, its status and estimated GPU and CPU time
    python -m plateau_lib paper --budget-s 480 --tar $OUT/paper.tar.gz
    python -m plateau_lib paper --unpack paper*.tar.gz # back home: results/ and .cache/queue/ to carry next
"""
from __future__ import annotations

import re
import shutil
import tarfile
import time
from pathlib import Path
from typing import NamedTuple

from plateau_lib import chapters
from plateau_lib.engine import cache, presets as engine_presets
from plateau_lib.engine.costs import CPU_RECORD, cpu_costs, estimate_cpu_s, estimate_gpu_s, resume_mib
from plateau_lib.engine.train import Stopped, stacks
from plateau_lib.engine.utils import cpu_threads, resolve_device, shown_path
from plateau_lib.icl import long_run

COMMITTED, ON_CPU, MISSING = "committed", "committed, computed on CPU", "missing"

PART_MIB, CARRY_MIB = 15, 64   # a lent GPU returns files of at most 16 MiB and is given at most 64 MiB
ANALYSIS_STACK = 8             # checkpoints per batched SGLD computation on a GPU


class Entry(NamedTuple):
    """One declared run: its page and label, config, extra key input (Fig. 5's reference) and status."""
    page: str
    label: object
    config: object
    extra: dict | None
    status: str
    device: str | None
    key: str            # the run's cache key: its folder is ``train-<key>``
    meta: dict | None   # the committed result's provenance, None while missing

    @property
    def folder(self) -> str:
        """The name of its result's folder (under ``results/`` once committed)."""
        return cache.run_name(self.key)


def _entries(pages=None, preset: str = "paper") -> list[Entry]:
    runs = chapters.page_runs(engine_presets.check_preset(preset))
    known = {*runs, *(a.page for a in chapters.analyses(preset))}
    unknown = sorted(set(pages or ()) - known)
    if unknown:
        raise ValueError(f"unknown page(s) {unknown}; pages that declare {preset} runs or analyses: {sorted(known)}")
    out, store = [], cache.current()
    for page, configs in runs.items():
        if pages and page not in pages:
            continue
        reference = configs.get("reference")
        for label, cfg in configs.items():
            extra = {"reference": cache.cache_key(reference)} if cfg.copy_groups else None
            meta = store.committed_meta(cfg, extra)
            device = None if meta is None else str(meta.get("device"))
            status = MISSING if meta is None else ON_CPU if device == "cpu" and preset == "paper" else COMMITTED
            out.append(Entry(page, label, cfg, extra, status, device, cache.cache_key(cfg, extra), meta))
    return out


def status(pages=None, preset: str = "paper") -> list[Entry]:
    """Every run ``preset``'s pages declare, in page order, with its status."""
    return _entries(pages, preset)


def pending(pages=None, preset: str = "paper", replace_cpu: bool = False) -> list[Entry]:
    """The declared runs still to compute: missing ones, and with ``replace_cpu`` those made on a CPU."""
    todo = (MISSING, ON_CPU) if replace_cpu else (MISSING,)
    return [e for e in _entries(pages, preset) if e.status in todo]


def check_device(device, preset: str, allow_cpu: bool):
    dev = resolve_device(device)
    if preset == "paper" and dev.type != "cuda" and not allow_cpu:
        raise ValueError(f"the paper queue is meant for a GPU and this machine has {dev.type} only; pass "
                         "--force-cpu (make paper FORCE_CPU=1) to compute paper runs on it anyway")
    return dev


LEASE_ORDER = ("transient_ridge", "mws_training_setups")  # Carroll et al.'s paper sweep first, then Muon's runs


def lease_groups(entries: list[Entry], budget_s: float | None, carry_mib: float = CARRY_MIB,
                 estimate=estimate_gpu_s, state_mib=resume_mib) -> tuple[list[list[Entry]], list[Entry]]:
    """``(groups to train, in order; runs left for a later command)`` of ``entries`` (runs with no copied groups)
    within ``budget_s`` seconds. Pages in ``LEASE_ORDER`` come first, the others in page order; each group is one
    architecture, stacked where its optimizer stacks. A group whose resume states fit ``carry_mib`` is started
    whole: a deadline stops it and the next command resumes it. A larger one (Carroll et al.'s 12 models: about
    360 MiB) takes only as many runs as its estimate (``estimate(cfg, stacked)``, a run's share in seconds) lets
    finish in the seconds left, M by M, since its stopped state could not come back; the rest are left. Without a
    budget every run is started."""
    rank = {page: i for i, page in enumerate(LEASE_ORDER)}
    ordered = sorted(entries, key=lambda e: rank.get(e.page, len(rank)))  # stable: page order among the rest
    by_arch = {}
    for e in ordered:
        by_arch.setdefault(e.config.model_config(), []).append(e)
    groups, left, seconds = [], [], budget_s
    for members in by_arch.values():  # one architecture: the same parameters, so the same state size
        if seconds is None or len(members) * state_mib(members[0].config) <= carry_mib:
            groups.append(members)
            continue

        def cost(n):  # seconds for the first n runs: those whose optimizer stacks together, the others in turn
            first = members[:n]
            together = sum(stacks(e.config) for e in first)
            return sum(estimate(e.config, together if stacks(e.config) else 1) for e in first)

        n, spent = 0, 0.0
        while n < len(members):  # the cost only grows with n: stop at the first run that does not fit
            more = cost(n + 1)
            if more > seconds:
                break
            n, spent = n + 1, more
        if n:
            groups.append(members[:n])
            seconds -= spent
        left += members[n:]
    return groups, left


def run_queue(pages=None, budget_s: float | None = None, device: str = "auto", preset: str = "paper",
              replace_cpu: bool = False, allow_cpu: bool = False, backend: str = "auto",
              carry_mib: float = CARRY_MIB) -> list[Path]:
    """Train the pending runs (on ``device``) and copy each into ``results/`` as it finishes; returns the folders
    written.

    Runs with no copied groups go first, stacked by architecture, as ``lease_groups`` plans them for
    ``budget_s`` (a group whose resume states cannot come back, ``carry_mib``, only as far as it can finish);
    Fig. 5's copied runs follow, once their reference's weights exist. With ``budget_s`` training stops at that
    many seconds (``train.Stopped`` is caught; the unfinished runs' resume states stay in the current store's
    local folder).
    """
    dev = check_device(device, preset, allow_cpu)
    todo, store = pending(pages, preset, replace_cpu), cache.current()
    deadline = None if budget_s is None else time.time() + budget_s
    written, done = [], set()
    fresh = not replace_cpu  # replacing CPU results means recomputing what the committed lookup would find

    def committing(entries):
        """``Store.train_many``'s ``on_done``: commit each run of ``entries`` the moment it is trained (or found)."""
        def commit(i, result):
            e = entries[i]
            if e.key in done:
                return
            done.add(e.key)
            written.append(store.commit(e.config, e.extra))
            print(f"{e.page} {e.label}: {result.meta.get('wall_time_s')} s on {result.meta.get('device')} "
                  f"-> {written[-1].name}", flush=True)
        return commit

    copied = [e for e in todo if e.config.copy_groups]
    groups, left = lease_groups([e for e in todo if not e.config.copy_groups], budget_s, carry_mib, estimate_gpu_s,
                                resume_mib)
    for e in left:
        print(f"{e.page} {e.label}: left for a later command (it cannot finish in {budget_s:.0f} s, and its group's "
              f"resume states, {resume_mib(e.config):.0f} MiB each, could not all come back)", flush=True)
    try:
        for entries in groups:
            configs = [e.config.replace(device=str(dev)) for e in entries]  # the device is provenance only
            store.train_many(configs, use_cache=fresh, progress=False, backend=backend, deadline=deadline,
                             on_done=committing(entries), cuda_graphs=dev.type == "cuda")
        for page in dict.fromkeys(e.page for e in copied):
            entries = [e for e in copied if e.page == page]
            reference = chapters.page_runs(preset)[page]["reference"].replace(device=str(dev))
            state = store.train(reference, progress=False, need_state=True).final_state
            configs = [e.config.replace(device=str(dev)) for e in entries]
            store.train_many(configs, use_cache=fresh, init_states=[state] * len(configs),
                             extras=[e.extra for e in entries], progress=False, backend=backend, deadline=deadline,
                             on_done=committing(entries))
    except Stopped:
        print(f"budget of {budget_s:.0f} s spent: {len(written)} run(s) committed; the unfinished ones resume "
              f"from {store.local}/{cache.RUN_KIND}-*.partial", flush=True)
    return written


# ---- the CPU part of the queue: runs that fit one core, on two worker processes --------------------------------

CPU_LIMIT_H = 3.0  # a run estimated above this many CPU-hours is left for a GPU
def _train_on_worker(cfg, extra, store: cache.Store, deadline: float | None):
    """A worker's job: train ``cfg`` through the caller's ``store`` (one thread); None if the deadline stopped it
    (its resume state is kept in the store's local folder). Stopped is caught here: it is a KeyboardInterrupt,
    which a worker must not see."""
    cpu_threads()
    try:
        return store.train_many([cfg], extras=[extra], progress=False, lock=False, deadline=deadline)[0]
    except Stopped:
        return None


def run_cpu_queue(pages=None, budget_s: float | None = None, workers: int = 2, limit_h: float = CPU_LIMIT_H,
                  preset: str = "paper", client=None) -> list[Path]:
    """Train the pending runs that fit ``limit_h`` CPU-hours each on ``workers`` processes (a dask LocalCluster,
    one thread each; or ``client``, any dask client), and commit each into ``results/`` the moment it finishes,
    with ``device: cpu`` and its wall time in its provenance. At ``budget_s`` the running ones save their resume
    state and the next call resumes them. Runs over the limit, and Fig. 5's copied runs (they need their
    reference's weights), are left for a GPU; returns the folders written."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"parameter 'workers' must be a positive integer, got {workers!r}")
    costs = cpu_costs([e.config for e in pending(pages, preset)])
    todo = [e for e in pending(pages, preset) if not e.config.copy_groups
            and (estimate_cpu_s(e.config, costs) or float("inf")) <= limit_h * 3600]
    todo.sort(key=lambda e: estimate_cpu_s(e.config, costs))  # cheapest first: most results per hour
    deadline = None if budget_s is None else time.time() + budget_s
    if not todo:
        return []
    from distributed import Client, LocalCluster, as_completed
    cluster = None
    if client is None:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")
        client = Client(cluster)
    written, store = [], cache.current()
    try:
        futures = {client.submit(_train_on_worker, e.config.replace(device="cpu"), e.extra, store,
                                 deadline, pure=False): e for e in todo}
        for future in as_completed(futures):
            e, result = futures[future], future.result()
            if result is None:
                print(f"{e.page} {e.label}: stopped at the budget; it resumes from {store.local}", flush=True)
                continue
            written.append(store.commit(e.config, e.extra))
            print(f"{e.page} {e.label}: {result.meta.get('wall_time_s')} s on cpu -> {written[-1].name}", flush=True)
    finally:
        if cluster is not None:
            client.close()
            cluster.close()
    return written


# ---- analyses: the steps that read trained runs' weights or checkpoints ----------------------------------------

def run_analyses(pages=None, preset: str = "paper", device: str = "auto", deadline: float | None = None) -> list[Path]:
    """Compute and commit every analysis not yet committed whose training runs exist; returns the folders
    written. Past ``deadline`` the running one stops after its latest kept row (``StoredTable.build``), what it
    made is committed, and the rest wait for the next command; an SGLD calibration has no rows and is not stopped
    part-way."""
    dev = resolve_device(device)
    stack = ANALYSIS_STACK if dev.type == "cuda" else 1
    written = []
    for a in chapters.analyses(preset):
        if a.committed() or (pages is not None and a.page not in pages):
            continue
        if not a.trained():
            print(f"{a.page} {a.label}: waits for its training runs", flush=True)
            continue
        if deadline is not None and time.time() > deadline:
            print(f"budget spent before {a.page}'s analysis; it runs in the next command", flush=True)
            break
        t0 = time.time()
        try:
            a.compute(str(dev), stack, deadline)
        except Stopped as stop:  # what it made before the deadline (e.g. a calibration) is committed too
            written += [f for f in a.commit() if f not in written]
            print(f"{a.page} {a.label}: {stop}", flush=True)
            break
        folders = a.commit()
        written += [f for f in folders if f not in written]
        print(f"{a.page} {a.label}: {time.time() - t0:.0f} s on {dev} -> {', '.join(f.name for f in folders)}",
              flush=True)
    return written


def queue_state(preset: str = "paper") -> list[Path]:
    """The working folders a next command needs, most useful first: tables kept row by row, training resume
    states, then the finished local runs (weights, checkpoints) that analyses still to do will read."""
    store = cache.current()
    runs = [store.local_run(c) for a in chapters.analyses(preset) if not a.committed() for c in a.runs]
    return store.partial_tables() + store.stopped_runs() + [p for p in dict.fromkeys(runs) if (p / "final_state.pt").exists()]


def _files(folder: Path, arcname: str) -> list[tuple[Path, str]]:
    return [(f, f"{arcname}/{f.relative_to(folder)}") for f in sorted(folder.rglob("*")) if f.is_file()]


def pack(tar_path: Path, written: list[Path], preset: str = "paper", carry_mib: float = CARRY_MIB,
         part_mib: float = PART_MIB) -> list[Path]:
    """The new results (as ``results/<folder>``) and the queue's working folders (as ``.cache/queue/<folder>``,
    at most ``carry_mib`` MiB in ``queue_state``'s order: a folder that does not fit is left out, said, and
    recomputed by the next command) in .tar.gz parts of at most ``part_mib`` MiB of content each (a larger
    single file gets a part of its own): ``tar_path``, then ``<name>.2.tar.gz``, ... Returns the parts."""
    files = [m for folder in written for m in _files(folder, f"results/{folder.name}")]
    room = carry_mib * 2**20
    for folder in queue_state(preset):
        size = folder_mib(folder) * 2**20
        if size > room:
            print(f"not packed: {folder.name} ({size / 2**20:.1f} MiB) would pass the {carry_mib} MiB a next command "
                  "is given; that command recomputes it", flush=True)
            continue
        room -= size
        files += _files(folder, f".cache/queue/{folder.name}")
    parts, sizes = [[]], [0]
    for f, arcname in files:
        size = f.stat().st_size
        if parts[-1] and sizes[-1] + size > part_mib * 2**20:
            parts.append([])
            sizes.append(0)
        parts[-1].append((f, arcname))
        sizes[-1] += size
    stem = tar_path.name.removesuffix(".tar.gz")
    paths = [tar_path if i == 1 else tar_path.with_name(f"{stem}.{i}.tar.gz") for i in range(1, len(parts) + 1)]
    for path, members in zip(paths, parts):
        with tarfile.open(path, "w:gz") as tar:
            for f, arcname in members:
                tar.add(f, arcname=arcname)
    return paths


def declared_names() -> set[str]:
    """The folder name of every result any page declares, in any preset: training runs and the analyses' tables
    (the miniatures' included)."""
    names = {e.folder for preset in engine_presets.PRESETS for e in _entries(None, preset)}
    return names | {name for preset in engine_presets.PRESETS for a in chapters.analyses(preset) for name in a.outputs}


STATE_FOLDER = re.compile(r"^[a-z_]+-[0-9a-f]{16}(\.partial)?$")  # a working folder: <kind>-<key>[.partial]


def unpack(tar_paths, root: Path | None = None) -> list[str]:
    """Put packed results under ``results/`` and replace ``.cache/queue/`` with the packed working folders.

    ``tar_paths``: one path or the parts of one pack. Every member of every part is checked before anything
    is written: only ``results/<folder>/`` of results some page still declares (``declared_names``) and
    ``.cache/queue/<kind>-<key>[.partial]/`` (a training run's only if declared) are accepted.
    """
    root = cache.ROOT if root is None else Path(root)
    paths = [Path(tar_paths)] if isinstance(tar_paths, (str, Path)) else [Path(p) for p in tar_paths]
    names, folders = declared_names(), set()
    for path in paths:
        with tarfile.open(path) as tar:
            for m in tar.getmembers():
                parts = Path(m.name).parts
                state = parts[:2] == (".cache", "queue") and len(parts) > 2
                folder = parts[2] if state else parts[1] if parts[:1] == ("results",) and len(parts) > 1 else ""
                if ".." in parts or not (m.isfile() or m.isdir()) or not folder or (
                        state and not STATE_FOLDER.match(folder)):
                    raise ValueError(f"unexpected member {m.name!r} in {path}: only results/<folder>/ and "
                                     ".cache/queue/<kind>-<key>[.partial]/ are unpacked; nothing was unpacked")
                run = folder.removesuffix(".partial") if state else folder
                if (not state or run.startswith(f"{cache.RUN_KIND}-")) and run not in names:
                    raise ValueError(f"{path} holds {folder!r}, a result no page declares any more "
                                     "(chapters.page_runs, chapters.analyses); nothing was unpacked")
                folders.add("/".join(parts[:3] if state else parts[:2]))
    shutil.rmtree(root / ".cache" / "queue", ignore_errors=True)  # the packed state is the newest
    for path in paths:
        with tarfile.open(path) as tar:
            tar.extractall(root, filter="data")
    return sorted(folders)


def folder_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def write_index(path: Path | None = None) -> Path:
    """``results/runs.csv``: every committed run the pages declare, with its page, preset and provenance."""
    import pandas as pd
    rows = []
    for preset in engine_presets.PRESETS:
        for e in _entries(None, preset):
            if e.status == MISSING:
                continue
            meta = e.meta
            rows.append({"folder": e.folder, "page": e.page, "preset": preset,
                         "run": e.label, "d_model": e.config.d_model, "steps": e.config.steps,
                         "device": meta.get("device"), "wall_time_s": meta.get("wall_time_s"),
                         "commit": meta.get("commit"), "date": str(meta.get("date", ""))[:10]})
    path = cache.current().committed / "runs.csv" if path is None else path
    pd.DataFrame(rows).drop_duplicates("folder").to_csv(path, index=False)
    return path


def made_across_sessions(cfg) -> str | None:
    """"in progress on a CPU: step N of M" for a run made across work sessions (the stages page's paper run,
    ``icl.long_run``), "made on a CPU: ..." once it is finished, else None."""
    state = long_run.progress(cfg)
    if state is None:
        return None
    if state["status"] == "finished":
        return (f"made on a CPU: λ̂ at {state['llc_rows']} checkpoints at a reduced budget ({state['cpu_hours']:.1f} "
                "CPU-h); the paper's budget is left for a GPU")
    return f"in progress on a CPU: {long_run.progress_line(state)} ({state['cpu_hours']:.1f} CPU-h)"


def print_status(entries: list[Entry], preset: str, costs: dict | None = None, limit_h: float = CPU_LIMIT_H) -> None:
    """Each run: status, length, width, GPU estimate and (``costs``: measured CPU costs) the CPU estimate, with
    the runs over ``limit_h`` CPU-hours marked as left for a GPU."""
    todo = [e.config.model_config() for e in entries if e.status != COMMITTED]
    total, over = 0.0, []
    for e in entries:  # runs of one architecture are stacked by train_many, where their optimizer stacks
        stacked = todo.count(e.config.model_config()) if stacks(e.config) else 1
        est = estimate_gpu_s(e.config, max(1, stacked))
        total += est if e.status != COMMITTED else 0.0
        status = (e.status == MISSING and made_across_sessions(e.config)) or e.status
        cpu_s = None if costs is None else estimate_cpu_s(e.config, costs)
        cpu = "" if cpu_s is None else f"  ~{cpu_s / 3600:6.2f} CPU-h"
        if status != e.status:
            cpu += "  (made across work sessions: python -m plateau_lib stages-run)"
        elif cpu_s is not None and e.status == MISSING and (cpu_s > limit_h * 3600 or e.config.copy_groups):
            cpu += "  (left for a GPU)"
            over.append(e)
        print(f"  {e.page:<20} {str(e.label):<28} {status:<27} {e.config.steps:>5} steps  d_model "
              f"{e.config.d_model:<4} ~{est:5.1f} s GPU{cpu}")
    counts = {s: sum(e.status == s for e in entries) for s in (COMMITTED, ON_CPU, MISSING)}
    print(f"{preset}: {counts[COMMITTED]} committed, {counts[ON_CPU]} committed but computed on CPU, "
          f"{counts[MISSING]} missing; about {total:.0f} s of GPU time for the missing and CPU-made ones "
          "(a rough estimate; see paper_queue.py)")
    if costs is not None:
        feasible = [e for e in entries if e.status == MISSING and e not in over and not made_across_sessions(e.config)]
        hours = sum(estimate_cpu_s(e.config, costs) or 0.0 for e in feasible) / 3600
        print(f"on this CPU (one core a run, measured step times in {shown_path(CPU_RECORD)}): "
              f"{len(feasible)} missing run(s) fit the limit of {limit_h:g} CPU-hours a run, about {hours:.1f} "
              f"CPU-hours in all; {len(over)} are left for a GPU (over the limit, or Fig. 5's copied runs)")


def print_analyses(preset: str, pages=None) -> None:
    for a in chapters.analyses(preset):
        if pages is None or a.page in pages:
            made_here = next(filter(None, (made_across_sessions(c) for c in a.runs)), None)  # the stages run's λ̂, across sessions
            state = (COMMITTED if a.committed() else made_here or (MISSING if a.trained() else "missing, waits for training"))
            print(f"  {a.page:<24} {a.label:<44} {state}")

