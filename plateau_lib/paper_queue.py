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

**On a cluster** the same tasks (``plan_groups``: one run a CPU task, runs of one architecture stacked in a GPU
task) go to an existing dask cluster (``--scheduler``: ``run_cpu_queue`` with its client; GPU tasks ask for the
worker resource ``GPU``) or to Slurm through submitit (``--slurm``: ``run_slurm_queue``, one job a task, its time
and GPUs from the cost model; a job near its time limit saves its resume states, and a further job resumes them). ``--results
shared`` has the workers commit into this store (each is checked to see it before any compute); ``--results
packed`` has each task pack its results and resume states (``pack``'s format), unpacked here as they come.

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

import io
import os
import re
import shutil
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

from plateau_lib import chapters
from plateau_lib.engine import cache, carried, presets as engine_presets
from plateau_lib.engine.costs import CPU_RECORD, cpu_costs, estimate_cpu_s, estimate_gpu_s, resume_mib
from plateau_lib.engine.train import Stopped, stacks
from plateau_lib.engine.utils import cpu_threads, resolve_device, shown_path
from plateau_lib.icl import long_run

COMMITTED, ON_CPU, MISSING = "committed", "committed, computed on CPU", "missing"

PART_MIB, CARRY_MIB = 15, 64   # a lent GPU returns files of at most 16 MiB and is given at most 64 MiB
ANALYSIS_STACK = 8             # checkpoints per batched SGLD computation on a GPU
PARTIAL_MIN_S = 60             # seconds left that are worth starting a run which cannot finish (its state comes back)


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
                 estimate=estimate_gpu_s, state_mib=resume_mib,
                 done=lambda cfg: 0.0) -> tuple[list[list[Entry]], list[Entry]]:
    """``(groups to train, in order; runs left for a later command)`` of ``entries`` (runs with no copied groups)
    within ``budget_s`` seconds. Pages in ``LEASE_ORDER`` come first, the others in page order; each group is one
    architecture, stacked where its optimizer stacks. A group whose resume states fit ``carry_mib`` is started
    whole: a deadline stops it and the next command resumes it. A larger one (Carroll et al.'s 12 models: about
    360 MiB) takes as many runs as its estimate (``estimate(cfg, stacked)``, a run's share in seconds, less the
    share ``done(cfg)`` a resumed run has made) lets finish in the seconds left, M by M; then, where at least
    ``PARTIAL_MIN_S`` are left and its state fits ``carry_mib``, the next run alone, which the deadline stops and
    a later command resumes. The rest are left. Without a budget every run is started."""
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
            return sum(estimate(e.config, together if stacks(e.config) else 1) * (1 - done(e.config)) for e in first)

        n, spent = 0, 0.0
        while n < len(members):  # the cost only grows with n: stop at the first run that does not fit
            more = cost(n + 1)
            if more > seconds:
                break
            n, spent = n + 1, more
        if n:
            groups.append(members[:n])
            seconds -= spent
        if n < len(members) and seconds >= PARTIAL_MIN_S and state_mib(members[n].config) <= carry_mib:
            groups.append([members[n]])  # started alone after the others: its state comes back to be resumed
            n, seconds = n + 1, 0.0
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
    made = {e.key: max(carried.resume_step(store.working(e.config) / "resume.pt"), 0) / e.config.steps for e in todo
            if not e.config.copy_groups}  # the share of each run a stopped command made
    groups, left = lease_groups([e for e in todo if not e.config.copy_groups], budget_s, carry_mib, estimate_gpu_s,
                                resume_mib, done=lambda cfg: made.get(cache.cache_key(cfg), 0.0))
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


# ---- the queue on workers: a dask cluster (two local processes without a GPU, or any scheduler) or Slurm jobs ------

CPU_LIMIT_H = 3.0  # a run estimated above this many CPU-hours is left for a GPU
RESULTS_MODES = ("shared", "packed")  # where workers put results: the shared store, or packed back to the caller


class Group(NamedTuple):
    """One task of the queue on workers: runs of one architecture stacked on a GPU, or one run on a CPU core."""
    entries: list[Entry]
    gpu: bool
    estimate_s: float  # GPU seconds for the whole group, or one CPU core's seconds for its run


def plan_groups(pages=None, preset: str = "paper", limit_h: float = CPU_LIMIT_H,
                gpus: bool = False) -> tuple[list[Group], list[Entry]]:
    """``(tasks, runs left)`` of the pending runs: each run within ``limit_h`` CPU-hours (measured costs,
    ``cpu_costs``) is a CPU task of its own, cheapest first; with ``gpus`` the others follow stacked by
    architecture (``lease_groups``), one GPU task a group. Left: Fig. 5's copied runs (they need their
    reference's weights: plain ``make paper`` on a GPU) and, without ``gpus``, the runs over the limit."""
    todo = pending(pages, preset)
    costs = cpu_costs([e.config for e in todo])
    cpu_s = {e.key: estimate_cpu_s(e.config, costs) or float("inf") for e in todo}
    own = [e for e in todo if not e.config.copy_groups]
    cheap = sorted((e for e in own if cpu_s[e.key] <= limit_h * 3600), key=lambda e: cpu_s[e.key])
    groups = [Group([e], False, cpu_s[e.key]) for e in cheap]
    over = [e for e in own if e not in cheap]
    if gpus and over:
        for entries in lease_groups(over, None)[0]:
            together = sum(stacks(e.config) for e in entries)
            groups.append(Group(entries, True, sum(estimate_gpu_s(e.config, together if stacks(e.config) else 1)
                                                   for e in entries)))
        over = []
    return groups, [e for e in todo if e.config.copy_groups] + over


def train_group(configs, extras, store: cache.Store | None, state: bytes = b"", deadline: float | None = None,
                workdir: Path | None = None, carry_mib: float = CARRY_MIB) -> tuple[list[str], bytes]:
    """A worker's task: train one group (stacked on the worker's GPU, else on one CPU thread) and commit each run
    the moment it finishes; a deadline stops it with the resume states saved. Returns the folder names committed
    and, without a shared ``store`` (None), the packed results and resume states (``pack``'s format, b"" else).

    Without a shared store the group trains in a store of its own under ``workdir`` (a temporary folder if
    None), which starts from ``state`` (the caller's packed resume states of these runs) unless it holds newer
    ones (a Slurm job requeued on the same ``workdir``). A task rerun elsewhere (its worker died) starts again
    from ``state``."""
    dev = resolve_device("auto")
    cpu_threads()
    configs = [c.replace(device=str(dev)) for c in configs]  # the device is provenance only

    def trained(here: cache.Store) -> list[str]:
        written = []
        try:  # no file locks: they are unreliable on network file systems; each result lands by atomic rename
            here.train_many(configs, extras=extras, progress=False, lock=False, deadline=deadline,
                            cuda_graphs=dev.type == "cuda",
                            on_done=lambda i, result: written.append(here.commit(configs[i], extras[i]).name))
        except Stopped:  # a KeyboardInterrupt, which a worker must not see
            pass
        return written

    if store is not None:
        return trained(store), b""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(workdir or tmp)
        here = cache.Store(root / "results", root / ".cache" / "queue")
        if state and not here.local.exists():
            with tarfile.open(fileobj=io.BytesIO(state)) as tar:
                tar.extractall(root, filter="data")
        written = trained(here)
        finished = [here.local / name for name in written if (here.local / name).exists()]
        with cache.using(here):
            part, = pack(Path(tmp) / "group.tar.gz", [here.committed / name for name in written],
                         carry_mib=carry_mib, part_mib=float("inf"), state=here.stopped_runs() + finished)
        return written, part.read_bytes()


def _packed_state(group: Group, store: cache.Store) -> bytes:
    """The resume states of ``group``'s runs in ``store``, packed for a worker without the shared store."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for e in group.entries:
            folder = store.working(e.config, e.extra)
            if (folder / "resume.pt").exists():
                tar.add(folder, arcname=f".cache/queue/{folder.name}")
    return buffer.getvalue()


def _task_args(group: Group, store: cache.Store, shared: bool) -> tuple:
    """``train_group``'s first arguments for ``group``: its configs and extras, and ``store`` if ``shared``, else
    None and the group's resume states, packed."""
    return ([e.config for e in group.entries], [e.extra for e in group.entries],
            *((store, b"") if shared else (None, _packed_state(group, store))))


def _received(group: Group, outcome: tuple[list[str], bytes], store: cache.Store) -> list[Path]:
    """Take one finished task's outcome: unpack what it packed (beside the other tasks' state) and say, run by
    run, what was committed and what resumes later; returns the committed folders."""
    names, packed = outcome
    if packed:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "group.tar.gz").write_bytes(packed)
            unpack(Path(tmp) / "group.tar.gz", merge=True)
    written = []
    for e in group.entries:
        if e.folder not in names:
            print(f"{e.page} {e.label}: stopped before the end; it resumes from its saved state", flush=True)
            continue
        meta = store.committed_meta(e.config, e.extra)
        written.append(store.committed / e.folder)
        print(f"{e.page} {e.label}: {meta.get('wall_time_s')} s on {meta.get('device')} -> {e.folder}", flush=True)
    return written


def _say_left(left: list[Entry], why: str) -> None:
    for e in left:
        print(f"{e.page} {e.label}: left ({'needs its reference run' if e.config.copy_groups else why})", flush=True)


def _sees(paths: list[str], token: str) -> bool:
    """On a worker: whether every one of ``paths`` holds ``token`` (the caller's store is visible here)."""
    return all(Path(p).exists() and Path(p).read_text() == token for p in paths)


class StoreNotVisible(ValueError):
    """A worker does not see this process's store where this process does (``--results shared``)."""


def check_store_visible(store: cache.Store, ask) -> None:
    """Refuse (``StoreNotVisible``, naming the workers) unless ``ask(_sees, paths, token)`` (``{worker: answer}``, run on
    every worker) finds ``store``'s two folders where this process sees them: a shared file system."""
    token = uuid.uuid4().hex
    paths = [folder / f".cluster-check-{token}" for folder in (store.committed, store.local)]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(token)
    try:
        answers = ask(_sees, [str(p) for p in paths], token)
    finally:
        for path in paths:
            path.unlink()
    blind = sorted(worker for worker, seen in answers.items() if not seen)
    if not answers or blind:
        raise StoreNotVisible(f"--results shared: {', '.join(blind) or 'no worker answered'} cannot see this repository's "
                         f"store ({store.committed} and {store.local}); mount it at the same path on every worker "
                         "or pass --results packed")


def run_cpu_queue(pages=None, budget_s: float | None = None, workers: int = 2, limit_h: float = CPU_LIMIT_H,
                  preset: str = "paper", client=None, results: str = "shared") -> list[Path]:
    """The queue on dask workers: ``workers`` local processes of one thread (a LocalCluster: what ``make paper``
    does without a GPU) or ``client``, any dask client. Each ``plan_groups`` task is one dask task; GPU groups
    ask for the worker resource ``GPU`` (``dask worker --resources GPU=1``), and only a cluster with such workers
    gets them. ``results``: "shared" (the workers commit into this store, which they must see: checked first) or
    "packed" (each task's results come back packed and are unpacked here). Each run is committed the moment its
    group reports it, with its device and wall time in its provenance; at ``budget_s`` the running ones save their
    resume state and the next call resumes them; a task whose worker dies is rerun on another, from that state.
    Returns the folders written."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"parameter 'workers' must be a positive integer, got {workers!r}")
    if results not in RESULTS_MODES:
        raise ValueError(f"parameter 'results' must be one of {RESULTS_MODES}, got {results!r}")
    from distributed import Client, LocalCluster, as_completed
    cluster, planned = None, None
    if client is None:  # local workers have no GPU; with nothing for them to run, none is started
        planned = plan_groups(pages, preset, limit_h, gpus=False)
        if not planned[0]:
            _say_left(planned[1], f"over {limit_h:g} CPU-hours")
            return []
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")
        client = Client(cluster)
    store, shared = cache.current(), results == "shared"
    try:
        if shared:
            check_store_visible(store, client.run)
        gpus = any(w.get("resources", {}).get("GPU") for w in client.scheduler_info()["workers"].values())
        groups, left = planned or plan_groups(pages, preset, limit_h, gpus)
        _say_left(left, f"over {limit_h:g} CPU-hours and no worker has the resource GPU")
        deadline = None if budget_s is None else time.time() + budget_s
        futures = {client.submit(train_group, *_task_args(g, store, shared), deadline, pure=False,
                                 resources={"GPU": 1} if g.gpu else None): g for g in groups}
        return [path for done in as_completed(futures) for path in _received(futures[done], done.result(), store)]
    finally:
        if cluster is not None:
            client.close()
            cluster.close()


class SlurmGroup:
    """A Slurm job of one group, checkpointable as submitit's ``helpers.Checkpointable`` (its ``checkpoint``
    resubmits the same call if Slurm preempts the job or stops it at its limit; submitit is imported only where
    jobs are made). It trains for at most ``train_s`` seconds, a little less than the job's time limit, and
    returns with the resume states of the runs left saved: ``run_slurm_queue`` submits them again."""

    def __init__(self, train_s: float):
        self.train_s = train_s

    def __call__(self, configs, extras, store, state: bytes = b"") -> tuple[list[str], bytes]:
        import submitit
        env = submitit.JobEnvironment()
        workdir = None if store is not None else env.paths.folder / f"store-{env.job_id}"  # kept if Slurm requeues
        outcome = train_group(configs, extras, store, state, time.time() + self.train_s, workdir)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        return outcome

    def checkpoint(self, *args, **kwargs):
        """The same call again (``helpers.Checkpointable.checkpoint``): training resumes from the saved states."""
        from submitit.helpers import DelayedSubmission
        return DelayedSubmission(self, *args, **kwargs)


SLURM_MARGIN_S = 120  # a job stops training this long before its time limit, to save its states and return
SLURM_ROUNDS = 50  # the most jobs one group may take, one after another, each resuming the last one's states


def slurm_minutes(group: Group, time_min: int) -> int:
    """A job's time request: twice its group's estimate plus 5 minutes, at most ``time_min`` (the partition's
    limit, say); a group that needs longer takes further jobs, each resuming from the last one's states."""
    return max(1, min(time_min, int(2 * group.estimate_s / 60) + 5))


def _steps_reached(entries: list[Entry], store: cache.Store) -> list[int]:
    """The step each run's resume state in ``store`` reached (-1: none)."""
    return [carried.resume_step(store.working(e.config, e.extra) / "resume.pt") for e in entries]


def run_slurm_queue(executor, pages=None, gpus_per_job: int = 1, time_min: int = 240, limit_h: float = CPU_LIMIT_H,
                    preset: str = "paper", results: str = "shared", train_s=None) -> list[Path]:
    """The queue as one submitit job per ``plan_groups`` task (``executor``: an AutoExecutor for Slurm, or a
    LocalExecutor), each asking for its GPUs (``gpus_per_job`` for a GPU group, none for a CPU one) and its time
    (``slurm_minutes``); ``train_s(minutes)``: how long a job trains before it returns (default: its time limit
    less ``SLURM_MARGIN_S``). A group with runs left after its job is submitted again, from the states that job
    saved, up to ``SLURM_ROUNDS`` jobs, and only while each job moves a run on: one that finished no run and
    advanced no resume state stops its group, with a line saying so. ``results`` as in ``run_cpu_queue``
    ("shared" is checked by a small job first). Each run is committed when its job reports; returns the folders
    written."""
    if results not in RESULTS_MODES:
        raise ValueError(f"parameter 'results' must be one of {RESULTS_MODES}, got {results!r}")
    store, shared = cache.current(), results == "shared"
    train_s = train_s or (lambda minutes: max(60, minutes * 60 - SLURM_MARGIN_S))
    if shared:
        executor.update_parameters(timeout_min=5, gpus_per_node=0)
        check_store_visible(store, lambda fn, *args: {"a Slurm job": executor.submit(fn, *args).result()})
    groups, left = plan_groups(pages, preset, limit_h, gpus_per_job > 0)
    _say_left(left, f"over {limit_h:g} CPU-hours and --gpus-per-job is 0")
    jobs = {}

    def submit(g: Group, round_: int) -> None:
        minutes = slurm_minutes(g, time_min)
        executor.update_parameters(timeout_min=minutes, gpus_per_node=gpus_per_job if g.gpu else 0)
        job = executor.submit(SlurmGroup(train_s(minutes)), *_task_args(g, store, shared))
        print(f"job {job.job_id}: {len(g.entries)} run(s) of {g.entries[0].page}, {minutes} min"
              f"{f', {gpus_per_job} GPU(s)' if g.gpu else ''}{f', round {round_ + 1}' if round_ else ''}", flush=True)
        jobs[job] = (g, round_, _steps_reached(g.entries, store))

    for g in groups:
        submit(g, 0)
    written = []
    while jobs:
        done = [job for job in jobs if job.done()]
        if not done:
            time.sleep(2)
            continue
        for job in done:
            g, round_, before = jobs.pop(job)
            outcome = job.result()
            names = outcome[0]
            written += _received(g, outcome, store)
            rest = [e for e in g.entries if e.folder not in names]
            if not rest:
                continue
            moved = len(rest) < len(g.entries) or any(
                after > was for after, was in zip(_steps_reached(rest, store), before) if after >= 0)
            if not moved or round_ + 1 >= SLURM_ROUNDS:
                why = "its last job moved no run on" if not moved else f"{SLURM_ROUNDS} jobs did not finish it"
                print(f"{g.entries[0].page}: {len(rest)} run(s) stopped, {why}; their states are kept for the "
                      "next command", flush=True)
                continue
            submit(g._replace(entries=rest), round_ + 1)
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
         part_mib: float = PART_MIB, state: list[Path] | None = None) -> list[Path]:
    """The new results (as ``results/<folder>``) and the queue's working folders (as ``.cache/queue/<folder>``,
    at most ``carry_mib`` MiB in ``queue_state``'s order, or ``state``'s: a folder that does not fit is left out,
    said, and recomputed by the next command) in .tar.gz parts of at most ``part_mib`` MiB of content each (a larger
    single file gets a part of its own): ``tar_path``, then ``<name>.2.tar.gz``, ... Returns the parts."""
    files = [m for folder in written for m in _files(folder, f"results/{folder.name}")]
    room = carry_mib * 2**20
    for folder in queue_state(preset) if state is None else state:
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


def unpack(tar_paths, root: Path | None = None, merge: bool = False) -> list[str]:
    """Put packed results under ``results/`` and replace ``.cache/queue/`` with the packed working folders
    (``merge``: replace only the packed folders and the working folders of the runs it brings, as a cluster's
    tasks each bring back their own group's).

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
    queue = root / ".cache" / "queue"
    if not merge:
        shutil.rmtree(queue, ignore_errors=True)  # the packed state is the newest
    for name in folders if merge else ():  # one task's runs: their working folders are replaced, others kept
        run = name.rsplit("/", 1)[1].removesuffix(".partial")
        for old in (queue / run, queue / f"{run}.partial"):
            shutil.rmtree(old, ignore_errors=True)
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

