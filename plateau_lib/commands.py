"""Every command of the project, in one place: ``python -m plateau_lib COMMAND [options]``.

    python -m plateau_lib notebook NOTEBOOK OUT [-p NAME VALUE]... [-y YAML]...   # one page, its parameters checked
    python -m plateau_lib paper [--list] [--budget-s S] [--tar OUT.tar.gz]       # the paper queue (``make paper``)
    python -m plateau_lib paper --scheduler tcp://HOST:PORT --results shared     # its runs on a dask cluster
    python -m plateau_lib paper --slurm --partition P --results shared           # its runs as Slurm jobs
    python -m plateau_lib stages --preset cpu_long --commit                      # λ̂ and structure over training
    python -m plateau_lib stages-run {train,llc,check,save,status}               # the paper's stages run, on a CPU
    python -m plateau_lib diversity --preset cpu_long --commit                   # a task-diversity sweep and its λ̂
    python -m plateau_lib transient-search TRIAL --Ms 16 32                      # the transient-ridge search
    python -m plateau_lib plateau-llc --preset cpu_long --commit                 # λ̂ across the MWS plateau
    python -m plateau_lib probe --preset cpu --commit                            # the probe at every checkpoint
    python -m plateau_lib collapse --preset cpu --commit                         # the LLM miniatures' collapse
    python -m plateau_lib rerun --preset cpu --commit                            # re-runs, weights nudged

Library modules hold the work as plain functions; this module only reads the options, refuses bad ones before any
compute (exit status 2 and one line naming the option and what is allowed), calls the functions and prints what
they return.
``python -m plateau_lib.paper`` is ``python -m plateau_lib paper``.
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path

from plateau_lib import paper_queue
from plateau_lib.book import pages as book_pages, run as notebook_run
from plateau_lib.engine import cache
from plateau_lib.engine.costs import cpu_costs
from plateau_lib.engine.presets import PRESETS
from plateau_lib.engine.sweep import sweep
from plateau_lib.engine.utils import REPO_ROOT, cpu_threads, resolve_device, shown_path
from plateau_lib.icl import analyses as icl_analyses, development, diversity, long_run, rerun as icl_rerun, transient_search
from plateau_lib.icl.presets import (DIVERSITY, DIVERSITY_CALIBRATION, ICL_LLC_REDUCED, ICL_PAPER,
                                     ICL_PAPER_SEEDS, ICL_STAGES, diversity as sweep_preset, icl_stages)
from plateau_lib.llc.calibration import chosen_setting
from plateau_lib.llm import analyses as llm_analyses, collapse, presets as llm_presets
from plateau_lib.llm.corpus import TOKENIZER_FILES
from plateau_lib.plateau import analyses as plateau_analyses, llc_across, presets as plateau_presets, probe, rerun

PROG = "python -m plateau_lib"


def refuse(parser, message: str) -> int:
    """Say what is wrong with an option in one line, before any compute; exit status 2."""
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return 2


# ---- notebook: one page through papermill ----------------------------------------------------------------------

def _notebook_options(parser):
    parser.add_argument("notebook", metavar="NOTEBOOK", help="the notebook to run")
    parser.add_argument("output", metavar="OUT", help="where the executed notebook is written")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a parameter, typed like papermill's -p (0.1 float, 3 int, False bool, "
                             "None, else str); repeatable")
    parser.add_argument("-y", "--yaml", action="append", default=[], metavar="YAML",
                        help="parameters as a YAML (or JSON) mapping, e.g. '{seeds: [0, 1]}'; repeatable, "
                             "applied before -p")
    parser.add_argument("--cwd", default=str(REPO_ROOT), metavar="DIR",
                        help="working directory of the notebook (default: the repository root, %(default)s)")


def _notebook(args, parser) -> int:
    if not Path(args.notebook).is_file():
        return refuse(parser, f"no notebook {args.notebook}")
    if not Path(args.cwd).is_dir():
        return refuse(parser, f"--cwd {args.cwd} is not a folder")
    parameters = {}
    try:
        for text in args.yaml:
            parameters.update(notebook_run.parse_mapping(text))
        parameters.update({name: notebook_run.parse_value(value) for name, value in args.parameter})
        notebook_run.check_parameters(args.notebook, parameters)
    except ValueError as err:
        return refuse(parser, str(err))
    from papermill.exceptions import PapermillExecutionError  # lazy: papermill loads Jupyter's machinery
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        notebook_run.run_notebook(args.notebook, args.output, parameters, cwd=args.cwd, check=False)  # checked above
    except PapermillExecutionError as err:
        print(f"{parser.prog}: {args.notebook} failed:{err}", file=sys.stderr)
        return 1
    return 0


# ---- paper: the queue of paper-preset results ------------------------------------------------------------------

def _paper_options(parser):
    parser.add_argument("--page", action="append", help="only this page's runs and analyses (repeatable)")
    parser.add_argument("--preset", default="paper", choices=PRESETS, help="paper (default) or cpu")
    parser.add_argument("--list", action="store_true", help="print every result with its status and exit")
    parser.add_argument("--replace-cpu", action="store_true", help="also recompute paper runs made on a CPU")
    parser.add_argument("--force-cpu", action="store_true", help="allow paper runs on a machine without a GPU")
    parser.add_argument("--budget-s", type=float, help="stop the queue after this many seconds (resumable)")
    parser.add_argument("--device", default="auto", help="auto (default), cpu or cuda")
    parser.add_argument("--backend", default="auto", choices=("auto", "stacked", "sequential"),
                        help="train_many's backend (auto: stacked on CUDA)")
    parser.add_argument("--tar", type=Path, help="pack the new results and the queue's working files into this "
                                                 ".tar.gz (and NAME.2.tar.gz, ... past PART_MIB)")
    parser.add_argument("--carry-mib", type=float, default=paper_queue.CARRY_MIB,
                        help=f"pack at most this much working state (default {paper_queue.CARRY_MIB}: what a command "
                             "is given)")
    parser.add_argument("--unpack", type=Path, nargs="+", help="unpack the parts of a --tar: results/ and .cache/queue/")
    parser.add_argument("--workers", type=int, default=2,
                        help="without a GPU: worker processes, one thread each (default 2: this machine's cores)")
    parser.add_argument("--cpu-limit-h", type=float, default=paper_queue.CPU_LIMIT_H,
                        help=f"without a GPU: leave runs estimated above this many CPU-hours for a GPU "
                             f"(default {paper_queue.CPU_LIMIT_H:g})")
    cluster = parser.add_argument_group("on a cluster (README: On a cluster)")
    cluster.add_argument("--scheduler", metavar="ADDRESS",
                         help="run the queue's training runs on this dask scheduler's workers (tcp://HOST:PORT; GPU "
                              "groups go to workers started with --resources GPU=1)")
    cluster.add_argument("--slurm", action="store_true", help="run them as Slurm jobs through submitit, one a group")
    cluster.add_argument("--partition", help="with --slurm: the Slurm partition (checked with sinfo)")
    cluster.add_argument("--gpus-per-job", type=int,
                         help="with --slurm: GPUs of a job that trains a stacked group (default 1; 0: CPU jobs only)")
    cluster.add_argument("--time", type=int, metavar="MINUTES",
                         help="with --slurm: the most time a job asks for (default 240); a longer group takes further jobs")
    cluster.add_argument("--results", choices=paper_queue.RESULTS_MODES,
                         help="with --scheduler or --slurm (required): shared (workers see this repository at the "
                              "same path and write into it) or packed (each task's results come back packed)")


def _paper(args, parser) -> int:
    if args.workers < 1 or args.cpu_limit_h <= 0 or (args.budget_s is not None and args.budget_s < 0):
        return refuse(parser, f"--workers must be >= 1, --cpu-limit-h > 0 and --budget-s >= 0; got {args.workers}, "
                              f"{args.cpu_limit_h} and {args.budget_s}")
    cluster_problem = _cluster_problem(args)
    if cluster_problem:
        return refuse(parser, cluster_problem)
    cpu_threads()
    if args.unpack:
        for folder in paper_queue.unpack(args.unpack):
            print(f"unpacked {folder}")
        print(f"indexed the committed runs in {paper_queue.write_index()}")
        queue = cache.QUEUE.local
        if queue.exists():
            print(f"give the next command {shown_path(queue)}/ ({paper_queue.folder_mib(queue):.1f} MiB) "
                  "to resume")
        return 0
    with cache.using(cache.QUEUE):  # the queue's working files, in one folder a next command can be given
        return _paper_queue(args, parser)


def _paper_queue(args, parser) -> int:
    pages = args.page or None
    try:
        entries = paper_queue.status(pages, args.preset)
    except ValueError as err:
        return refuse(parser, f"--page: {err}")
    if args.list:
        missing = [e.config for e in entries if e.status == paper_queue.MISSING]
        costs = cpu_costs(missing) if args.preset == "paper" else None
        paper_queue.print_status(entries, args.preset, costs, args.cpu_limit_h)
        paper_queue.print_analyses(args.preset, pages)
        return 0
    if args.scheduler or args.slurm:
        return _paper_on_cluster(args, parser, pages)
    if args.preset == "paper" and resolve_device(args.device).type != "cuda" and not args.force_cpu:
        # no GPU: the CPU-feasible part of the queue, on two workers; the rest (and the analyses) wait for a GPU
        written = paper_queue.run_cpu_queue(pages, args.budget_s, args.workers, args.cpu_limit_h)
        print(f"{len(written)} paper run(s) computed on this CPU and committed to results/; the runs over "
              f"{args.cpu_limit_h:g} CPU-hours and the analyses wait for a GPU (--list shows which; --force-cpu runs "
              "them here anyway)", flush=True)
        print(f"indexed the committed runs in {paper_queue.write_index()}")
        if args.tar:
            paper_queue.pack(args.tar, written, args.preset, args.carry_mib)
        return 0
    try:
        dev = paper_queue.check_device(args.device, args.preset, args.force_cpu)
    except ValueError as err:
        return refuse(parser, str(err))
    todo = paper_queue.pending(pages, args.preset, args.replace_cpu)
    print(f"{len(todo)} {args.preset} run(s) to compute on {dev}", flush=True)
    deadline = None if args.budget_s is None else time.time() + args.budget_s
    written = []
    try:
        if todo:
            written += paper_queue.run_queue(pages, args.budget_s, args.device, args.preset, args.replace_cpu,
                                       args.force_cpu, args.backend, args.carry_mib)
        written += paper_queue.run_analyses(pages, args.preset, args.device, deadline)
    finally:  # whatever happened, bring back what was made and the state to resume from
        print(f"indexed the committed runs in {paper_queue.write_index()}")
        if args.tar:
            parts = paper_queue.pack(args.tar, list(dict.fromkeys(written)), args.preset, args.carry_mib)
            print(f"packed {len(written)} result(s) and the working state into {', '.join(map(str, parts))}")
    return 0


def _cluster_problem(args) -> str | None:
    """What is wrong with the cluster options, in one line (None: nothing), from what is known before connecting;
    a partition is checked against ``sinfo``."""
    slurm_only = _given(args, "partition", "gpus_per_job", "time")
    if not (args.scheduler or args.slurm):
        stray = _given(args, "results") + slurm_only
        return f"{', '.join(stray)} go(es) with --scheduler or --slurm, and neither is given" if stray else None
    if args.scheduler and args.slurm:
        return "--scheduler and --slurm exclude each other: a dask cluster, or Slurm jobs"
    if args.tar or args.replace_cpu:
        return "--tar and --replace-cpu do not go with --scheduler or --slurm: each result comes back as it finishes"
    if args.results is None:
        return ("--results is required with --scheduler and --slurm: shared (the workers see this repository at the "
                "same path) or packed (each task's results come back packed)")
    if not args.slurm:
        return f"{', '.join(slurm_only)} go(es) with --slurm, not with --scheduler" if slurm_only else None
    if args.budget_s is not None:
        return "--budget-s does not go with --slurm: a job's time is --time, and a longer group takes further jobs"
    if (args.gpus_per_job or 0) < 0 or (args.time or 1) < 1:
        return f"--gpus-per-job must be >= 0 and --time >= 1 (minutes); got {args.gpus_per_job} and {args.time}"
    if shutil.which("sinfo") is None:
        return "--slurm: Slurm is not available here (no sinfo on the PATH)"
    listed = subprocess.run(["sinfo", "--noheader", "--format=%P"], capture_output=True, text=True)
    if listed.returncode:
        return f"--slurm: Slurm does not answer here (sinfo: {(listed.stderr.strip().splitlines() or ['failed'])[0]})"
    partitions = sorted({line.strip().rstrip("*") for line in listed.stdout.split()} - {""})
    if args.partition is None or args.partition not in partitions:
        problem = "is required with --slurm" if args.partition is None else f"{args.partition!r} is not one here"
        return f"--partition {problem}; sinfo lists: {', '.join(partitions) or 'none'}"
    return None


def _given(args, *names) -> list[str]:
    """The command-line spellings (``--gpus-per-job``) of those of ``names`` that were given."""
    return [f"--{name.replace('_', '-')}" for name in names if getattr(args, name) is not None]


def _paper_on_cluster(args, parser, pages) -> int:
    """The queue's training runs on a dask cluster (``--scheduler``) or as Slurm jobs (``--slurm``)."""
    if args.scheduler:
        from distributed import Client
        try:
            client = Client(args.scheduler, timeout=10)
        except (OSError, ValueError, TypeError) as err:  # unreachable (OSError, TimeoutError) or malformed
            reason = (str(err).splitlines() or [type(err).__name__])[0]
            return refuse(parser, f"--scheduler: no dask scheduler answers at {args.scheduler!r} ({reason})")
        with client:
            try:
                written = paper_queue.run_cpu_queue(pages, args.budget_s, limit_h=args.cpu_limit_h,
                                                    preset=args.preset, client=client, results=args.results)
            except paper_queue.StoreNotVisible as err:
                return refuse(parser, str(err))
    else:
        import submitit
        executor = submitit.AutoExecutor(folder=cache.ROOT / ".cache" / "slurm" / "%j", cluster="slurm")
        executor.update_parameters(slurm_partition=args.partition)
        try:
            written = paper_queue.run_slurm_queue(executor, pages, 1 if args.gpus_per_job is None else args.gpus_per_job,
                                                  args.time or 240, args.cpu_limit_h, args.preset, args.results)
        except paper_queue.StoreNotVisible as err:
            return refuse(parser, str(err))
    print(f"{len(written)} {args.preset} run(s) committed to results/; the analyses run with plain `make paper` on a "
          "GPU", flush=True)
    print(f"indexed the committed runs in {paper_queue.write_index()}")
    return 0


# ---- in-context regression: the stages runs, the diversity sweeps, the transient search ------------------------

def _stages_options(parser):
    parser.add_argument("--preset", default="cpu_long", choices=sorted(ICL_STAGES))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--commit", action="store_true", help="copy the finished run into results/")


def _stages(args, parser) -> int:
    cpu_threads()
    cfg, llc = icl_stages(args.preset, {"device": args.device})
    result = development.run(cfg, llc)
    print(result.llc[["step", "llc_mean", "llc_se"]].to_string(index=False))
    print(f"training {result.meta['train_wall_s']} s, LLC {result.meta['llc_wall_s']} s on {result.meta['device']}")
    if args.commit:
        for path in icl_analyses.stages(cfg, llc).commit():
            print(f"committed {path}")
    return 0


def _stages_run_options(parser):
    parser.add_argument("action", choices=("train", "llc", "check", "save", "status"))
    parser.add_argument("--budget-s", type=float, default=3600.0, help="stop after this many seconds (default 3600)")
    parser.add_argument("--wait", action="store_true", help="llc: wait for checkpoints still to come until the budget")
    parser.add_argument("--shard", default="0/1", metavar="K/N",
                        help="llc, check: take every N-th step from the K-th (one process a core: 0/2 and 1/2)")
    parser.add_argument("--seed", type=int, default=ICL_PAPER.seed,
                        help=f"the model seed, one of the paper's {list(ICL_PAPER_SEEDS)} (default {ICL_PAPER.seed}, "
                             "the stages page's run)")


def _stages_run(args, parser) -> int:
    if args.seed not in ICL_PAPER_SEEDS:
        return refuse(parser, f"--seed must be one of the paper's seeds {list(ICL_PAPER_SEEDS)}, got {args.seed}")
    if args.budget_s <= 0:
        return refuse(parser, f"--budget-s must be positive, got {args.budget_s}")
    try:
        shard = tuple(int(part) for part in args.shard.split("/"))
    except ValueError:
        return refuse(parser, f"--shard must be K/N with integers 0 <= K < N, got {args.shard!r}")
    cpu_threads()
    with cache.using(cache.QUEUE):
        _stages_run_action(args, shard)
    return 0


def _stages_run_action(args, shard: tuple[int, int]) -> None:
    cfg, llc = ICL_PAPER.replace(seed=args.seed), ICL_LLC_REDUCED
    if args.action == "train":
        long_run.train(cfg, llc, args.budget_s)
    elif args.action in ("llc", "check"):
        table = (long_run.estimate(cfg, llc, args.budget_s, wait=args.wait, shard=shard) if args.action == "llc"
                 else long_run.budget_check(cfg, llc, shard=shard))
        print(table.to_string(index=False))
    elif args.action == "save":
        print(long_run.save(cfg, llc))
    print(json.dumps(long_run.progress(cfg), indent=1))


def _diversity_options(parser):
    parser.add_argument("--preset", default="cpu_long", choices=sorted(DIVERSITY))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--workers", type=int, default=1, help="> 1: train on a dask LocalCluster of this many workers")
    parser.add_argument("--commit", action="store_true", help="copy the finished results into results/")


def _diversity(args, parser) -> int:
    if args.workers < 1:
        return refuse(parser, f"--workers must be a positive integer, got {args.workers}")
    cpu_threads()
    configs, llc = sweep_preset(args.preset, overrides={"device": args.device})
    t0 = time.perf_counter()
    if args.workers > 1:
        from distributed import Client, LocalCluster  # lazy: dask only for a cluster
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=":0") as lc, Client(lc) as client:
            results = sweep(configs, executor=client.get_executor())
    else:
        results = sweep(configs)
    print(f"training: {time.perf_counter() - t0:.0f} s wall for {len(results)} runs", flush=True)
    print(diversity.critical_steps(diversity.curves(results)).to_string(index=False), flush=True)
    table, _, meta = diversity.llc_calibration(diversity.calibration_runs(configs), llc, DIVERSITY_CALIBRATION)
    print(table[["M", "epsilon", "llc_final", "llc_mean", "llc_se", "num_diverged", "mala_mean", "converged"]]
          .to_string(index=False), f"\ncalibration {meta['wall_s']} s", flush=True)
    llcs, meta = diversity.llc_vs_M(configs, llc)
    print(llcs[["M", "seed", "llc_mean", "llc_se", "init_loss"]].to_string(index=False), f"\nLLC {meta['llc_wall_s']} s")
    if args.commit:
        for path in icl_analyses.transient_ridge(configs, llc, DIVERSITY_CALIBRATION).commit():
            print(f"committed {path}")
    return 0


def _transient_search_options(parser):
    parser.add_argument("trial", nargs="?", choices=sorted(transient_search.TRIALS), help="the setting to try")
    parser.add_argument("--Ms", type=float, nargs="+", default=None,
                        help="task counts M (inf for Gaussian tasks; a trial's default: 32 64; with --llc-over-training: "
                             "estimate only these M's runs, another process doing the rest)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="model seeds (each M at each seed)")
    parser.add_argument("--budget-s", type=float, default=None, help="stop cleanly after this many seconds")
    parser.add_argument("--table", action="store_true", help="print the committed search table")
    parser.add_argument("--llc-over-training", action="store_true",
                        help="estimate λ̂ over training of the chosen setting's checkpointed runs and commit it")
    parser.add_argument("--record-stopped", action="store_true",
                        help="train nothing: keep the rows so far of the trial's runs stopped here (resume states)")


def _transient_search(args, parser) -> int:
    if args.trial is None and not (args.table or args.llc_over_training):
        return refuse(parser, "give a trial to run, --table or --llc-over-training")
    if args.budget_s is not None and args.budget_s <= 0:
        return refuse(parser, f"--budget-s must be positive, got {args.budget_s}")
    cpu_threads()
    deadline = None if args.budget_s is None else time.time() + args.budget_s
    Ms = args.Ms or [32, 64]
    if args.trial and args.record_stopped:
        for row in transient_search.record_stopped(args.trial, Ms, args.seeds):
            print({k: row[k] for k in ("trial", "M", "steps_done", "t_crit", "ood_rise", "transient")}, flush=True)
    elif args.trial:
        for row in transient_search.run_trials(args.trial, Ms, deadline, seeds=args.seeds) or []:
            print({k: row[k] for k in ("trial", "M", "t_crit", "ood_rise", "ridge_regrowth", "transient", "cpu_s")},
                  flush=True)
    if args.llc_over_training:
        found = transient_search.search_llc_over_training(commit=True, Ms=args.Ms)
        if found is None:
            print("λ̂ over training: these M are done; the other runs' rows are still being made", flush=True)
            return 0
        rows, meta = found
        print(rows[["M", "seed", "step", "llc_mean", "llc_se", "init_loss"]].to_string(index=False),
              f"\nλ̂ over training: {meta['llc_wall_s']} s", flush=True)
    if args.table:
        print(transient_search.table().to_string(index=False))
    return 0


# ---- the loss plateau: λ̂ across it, the probe ------------------------------------------------------------------

def _plateau_llc_options(parser):
    parser.add_argument("--preset", default="cpu_long", choices=sorted(plateau_presets.PLATEAU_LLC_SGLD))
    parser.add_argument("--device", default=None, help="the SGLD device (default: cpu for cpu presets, else auto)")
    parser.add_argument("--commit", action="store_true", help="copy the finished tables into results/")
    parser.add_argument("--calibrate-only", action="store_true", help="stop after the calibration")
    parser.add_argument("--stack", type=int, default=1, help="checkpoints per batched SGLD computation (GPU: 8)")


def _plateau_llc(args, parser) -> int:
    if args.stack < 1:
        return refuse(parser, f"--stack must be a positive integer, got {args.stack}")
    cpu_threads()
    device = args.device or ("auto" if args.preset == "paper" else "cpu")
    runs, sgld = llc_across.preset_runs(args.preset)
    runs = {s: cfg.replace(device=device) for s, cfg in runs.items()}
    grid, first = plateau_presets.PLATEAU_LLC_CALIBRATION, min(runs)
    t0 = time.perf_counter()
    calibration, _ = llc_across.calibrate(runs[first], grid, sgld, progress=True, device=device)
    print(calibration[["step", "epsilon", "nbeta", "llc_final", "llc_se", "num_diverged", "converged", "flat",
                       "chosen"]].to_string(index=False), flush=True)
    chosen = chosen_setting(calibration)
    used = {k: float(getattr(sgld, k)) for k in ("epsilon", "nbeta", "gamma")}
    print(f"calibration: chose {chosen}, the preset uses {used} ({time.perf_counter() - t0:.0f} s)", flush=True)
    if args.calibrate_only:
        return 0
    if chosen != used:
        print("the calibration chose another setting than the preset's: update PLATEAU_LLC_SGLD", file=sys.stderr)
        return 1
    tables, _ = llc_across.plateau_llc(runs, sgld, progress=True, device=device, stack=args.stack)
    print(tables["llc"][["seed", "step", "llc_mean", "llc_se"]].to_string(index=False))
    print(f"done in {time.perf_counter() - t0:.0f} s")
    if args.commit:
        print(*plateau_analyses.plateau_llc(runs, sgld).commit(), sep="\n")
    return 0


def _probe_options(parser):
    parser.add_argument("--preset", choices=PRESETS, default="cpu")
    parser.add_argument("--commit", action="store_true", help="copy the tables and training results to results/")
    parser.add_argument("--cpu-budget", action="store_true",
                        help="with --preset paper: the probe at the stated CPU budget (presets.PROBE_PAPER_ON_CPU)")


def _probe(args, parser) -> int:
    if args.cpu_budget and args.preset != "paper":
        return refuse(parser, "--cpu-budget goes with --preset paper only")
    configs = plateau_presets.probe_runs(args.preset)
    settings = plateau_presets.PROBE_PAPER_ON_CPU if args.cpu_budget else plateau_presets.probe_settings(args.preset)
    tables, meta = probe.measure_runs(configs, settings)
    print(tables["scalars"].drop(columns="seconds").to_string(index=False))
    print(f"{meta['probe_fits']} probe fits, {meta['probe_not_converged']} stopped at max_iter; "
          f"{meta['measure_wall_s']} s measuring")
    if args.commit:
        print(*plateau_analyses.probe_and_locations(configs, settings).commit(), sep="\n")
    return 0


# ---- the language models: the miniatures' collapse ------------------------------------------------------------

def _collapse_options(parser):
    parser.add_argument("--preset", default="cpu", choices=PRESETS)
    parser.add_argument("--seeds", type=int, nargs="*", help="Pythia miniature seeds (default: the preset's)")
    parser.add_argument("--arch", choices=tuple(TOKENIZER_FILES), help="only this architecture's miniature(s)")
    parser.add_argument("--n-prompts", type=int, default=100)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--commit", action="store_true", help="copy each finished analysis into results/")
    parser.add_argument("--nudged", action="store_true",
                        help="the re-run with every initial weight one float step up (which verdicts are fragile)")


def _collapse(args, parser) -> int:
    if args.n_prompts < 1:
        return refuse(parser, f"--n-prompts must be a positive integer, got {args.n_prompts}")
    cpu_threads()
    overrides = {"device": args.device} | ({"init_nudge": True} if args.nudged else {})
    for (arch, seed), cfg in llm_presets.llm_miniatures(args.preset, args.seeds, overrides).items():
        if args.arch not in (None, arch):
            continue
        tables, meta = collapse.miniature_collapse(cfg, args.n_prompts, cfg.prompt_seed(0))
        s = collapse.summary(tables["prompts"])
        print(f"{arch} seed {seed}: trained in {meta.get('wall_time_s')} s on {meta.get('device')}; cosine "
              f"{s['cosine'].iloc[0]:.2f} at step 0, peak {s['cosine'].max():.2f}, "
              f"{s['cosine'].iloc[-1]:.2f} at the end", flush=True)
        if args.commit:
            print(*llm_analyses.miniature(cfg, args.n_prompts).commit(), sep="\n")
    return 0


# ---- a perturbed re-run: which verdicts are fragile --------------------------------------------------------------

def _rerun_options(parser):
    parser.add_argument("--preset", choices=("cpu", "paper"), default="cpu")
    parser.add_argument("--figure", action="append", metavar="FIGURE",
                        help="only this figure (repeatable; default: every figure re-run at the preset)")
    parser.add_argument("--commit", action="store_true",
                        help="copy the re-run's results to results/ (a loss-plateau figure's runs one by one, as each "
                             "finishes)")


def _rerun(args, parser) -> int:
    cpu_threads()
    chosen = {(chapter, figure) for chapter in (rerun, icl_rerun) for figure in chapter.PRESETS[args.preset]
              if not args.figure or figure in args.figure}
    unknown = sorted(set(args.figure or ()) - {figure for _, figure in chosen})
    if unknown:
        parser.error(f"--figure {unknown[0]!r} has no re-run at preset {args.preset!r}; one of "
                     f"{[f for chapter in (rerun, icl_rerun) for f in chapter.PRESETS[args.preset]]}")
    for chapter in (rerun, icl_rerun):
        for figure in chapter.PRESETS[args.preset]:
            if (chapter, figure) not in chosen:
                continue
            if args.commit and chapter is rerun:
                print(*rerun.train_and_commit(figure, args.preset), sep="\n", flush=True)
            values = chapter.run(figure, args.preset)  # trained through the store (loaded where committed above)
            print(figure, *(f"  {metric}: {value}" for metric, value in values.items()), sep="\n", flush=True)
            if args.commit and chapter is not rerun:
                print(*chapter.commit(figure, args.preset), sep="\n", flush=True)
    return 0


# ---- the table of commands -------------------------------------------------------------------------------------

COMMANDS = {  # name: (what it does, its options, what runs it)
    "notebook": ("run one notebook with papermill, refusing parameters its parameters cell does not declare",
                 _notebook_options, _notebook),
    "paper": ("the queue of paper-preset results: train, analyse, commit (make paper)", _paper_options, _paper),
    "stages": ("a stages preset's run: λ̂ and structure at every checkpoint", _stages_options, _stages),
    "stages-run": ("the paper's 500k-step stages run on a CPU, across work sessions", _stages_run_options,
                   _stages_run),
    "diversity": ("a task-diversity sweep, its SGLD calibration and λ̂ against M", _diversity_options, _diversity),
    "transient-search": ("the search for a transient ridge at a CPU's scale", _transient_search_options,
                         _transient_search),
    "plateau-llc": ("λ̂ across the MWS plateau, its SGLD calibration first", _plateau_llc_options, _plateau_llc),
    "probe": ("the probe and the collapse locations at every checkpoint", _probe_options, _probe),
    "collapse": ("train and analyse the LLM miniatures' collapse", _collapse_options, _collapse),
    "rerun": ("the plateau and regression pages re-run with every initial weight one float step up: which verdicts are fragile",
              _rerun_options, _rerun),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     help=", ".join(COMMANDS))
    for name, (text, options, _) in COMMANDS.items():
        command = commands.add_parser(name, help=text, description=text)
        options(command)
        command.set_defaults(command_parser=command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command (``argv``: the command line after ``python -m plateau_lib``); its exit status."""
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command][2](args, args.command_parser)
