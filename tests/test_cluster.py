"""The paper queue on a cluster: a real dask scheduler and two workers on loopback (``paper --scheduler``), a worker
killed mid-run, submitit's LocalExecutor running the Slurm jobs (requeued at their time limit, results packed), and
bad cluster options refused in one line before any compute."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from plateau_lib import chapters, commands, paper_queue
from plateau_lib.engine import cache, costs as run_costs
from plateau_lib.engine.runs import TrainConfig

distributed = pytest.importorskip("distributed")

TINY = TrainConfig(task_kwargs={"n": 4, "p": 5}, d_model=8, steps=300, batch_size=8, eval_every=50, eval_batch=8)
SMALL_QUEUE = {"page_a": {seed: TINY.replace(seed=seed) for seed in range(3)},
               "page_b": {seed: TINY.replace(seed=seed, d_model=16) for seed in range(2)}}  # no CPU cost: a GPU group
LONG = TINY.replace(seed=7, steps=2000, eval_every=20)  # a resume state every 100 steps (every 5th evaluation)


@pytest.fixture
def queue_home(tmp_path, monkeypatch, use_store):
    """The queue's store under ``tmp_path`` as the command lays it out (results/ and .cache/queue/), with hand-set
    CPU costs (each run well within the CPU limit) and no analyses."""
    store = use_store(committed=tmp_path / "results", local=tmp_path / ".cache" / "queue")
    monkeypatch.setattr(cache, "ROOT", tmp_path)
    monkeypatch.setattr(cache, "QUEUE", store)
    monkeypatch.setattr(chapters, "analyses", lambda preset="paper": [])
    costs = {run_costs.architecture(TINY): {"step_s": 0.003, "eval_s": 0.01}}
    monkeypatch.setattr(paper_queue, "cpu_costs", lambda configs, measure=True, record=None: costs)
    return tmp_path


def queue_of(monkeypatch, runs):
    monkeypatch.setattr(chapters, "page_runs", lambda preset="paper": runs)


def assert_same_results(store: cache.Store, reference: cache.Store, configs):
    """Every run of ``configs`` committed in ``store`` equals ``reference``'s, bit for bit."""
    for cfg in configs:
        ours, theirs = store.committed_result(cfg), reference.committed_result(cfg)
        pd.testing.assert_frame_equal(ours.metrics, theirs.metrics, check_exact=True)
        for name, value in theirs.arrays.items():
            np.testing.assert_array_equal(ours.arrays[name], value)


def in_one_process(tmp_path, use_store, configs) -> tuple[cache.Store, float]:
    """The same queue in this process (one thread), into a store of its own; and its wall time."""
    reference = use_store(committed=tmp_path / "one" / "results", local=tmp_path / "one" / "queue")
    t0 = time.perf_counter()
    paper_queue.run_queue(allow_cpu=True, device="cpu")
    seconds = time.perf_counter() - t0
    assert all(reference.committed_meta(c) for c in configs)
    return reference, seconds


@pytest.fixture
def dask_cluster(tmp_path):
    """A dask scheduler and two one-thread workers (no nanny: killing one kills it), separate processes on
    loopback, the second offering the resource GPU=1 (on this CPU); yields (address, {worker pid: process})."""
    dask = Path(sys.executable).parent / "dask"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", file], env=env, stderr=subprocess.DEVNULL)]
    try:
        for resources in ([], ["--resources", "GPU=1"]):
            procs.append(subprocess.Popen([dask, "worker", "--scheduler-file", file, "--nthreads", "1", "--no-nanny",
                                           "--no-dashboard", "--local-directory", tmp_path / "dask", *resources],
                                          env=env, stderr=subprocess.DEVNULL))
        with distributed.Client(scheduler_file=str(file), timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
            address = client.scheduler.address
        yield address, {p.pid: p for p in procs[1:]}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_the_queue_on_a_dask_scheduler_equals_the_queue_in_one_process(queue_home, dask_cluster, monkeypatch,
                                                                        use_store, capsys):
    """Three CPU tasks (one run each) and page_b's two runs, whose architecture has no measured CPU cost, as one
    GPU group (it needs the worker resource GPU, which only the second worker offers)."""
    address, _ = dask_cluster
    queue_of(monkeypatch, SMALL_QUEUE)
    configs = [cfg for runs in SMALL_QUEUE.values() for cfg in runs.values()]
    t0 = time.perf_counter()
    assert commands.main(["paper", "--scheduler", address, "--results", "shared"]) == 0
    on_cluster = time.perf_counter() - t0
    out = capsys.readouterr().out
    assert "5 paper run(s) committed" in out and "left" not in out
    store = cache.current()
    assert paper_queue.pending() == [] and all(store.committed_meta(c)["device"] == "cpu" for c in configs)
    reference, here = in_one_process(queue_home, use_store, configs)
    assert_same_results(store, reference, configs)
    with capsys.disabled():
        print(f"\nsmall queue (5 runs of {TINY.steps} steps): {here:.1f} s in one process, {on_cluster:.1f} s on "
              "two dask workers (with the command's start and the store check)")


def resume_step(folder: Path) -> int | None:
    try:
        return int(torch.load(folder / "resume.pt", weights_only=True)["step"])
    except (FileNotFoundError, EOFError, RuntimeError):  # not saved yet, or gone once the run finished
        return None


def test_a_worker_killed_mid_run_loses_nothing_the_run_resumes_on_the_other(queue_home, dask_cluster, monkeypatch):
    """SIGKILL of the worker training the run once it has a resume state: dask reruns the task on the other
    worker, which resumes from that state (the saved step never goes back) and gives the uninterrupted run."""
    address, workers = dask_cluster
    queue_of(monkeypatch, {"page_a": {"long": LONG}})
    outcome = {}
    command = threading.Thread(target=lambda: outcome.setdefault(
        "rc", commands.main(["paper", "--scheduler", address, "--results", "shared"])))
    command.start()
    working, t0 = cache.current().working(LONG), time.time()
    while (resume_step(working) or 0) < 300 and time.time() - t0 < 120:
        time.sleep(0.05)
    killed_at = resume_step(working)
    assert killed_at and killed_at < LONG.steps, "no resume state to kill the worker after"
    with distributed.Client(address) as watcher:
        busy, = [addr for addr, keys in watcher.processing().items() if keys]
        pid = watcher.run(os.getpid)[busy]
    workers[pid].send_signal(signal.SIGKILL)
    steps = []
    while command.is_alive():
        steps.append(resume_step(working))
        time.sleep(0.05)
    assert outcome["rc"] == 0
    assert any(s is not None and s > killed_at for s in steps), "no resume state seen after the kill"
    assert all(s >= killed_at for s in steps if s is not None), f"restarted from scratch: {steps}"
    resumed = cache.current().committed_result(LONG)
    from plateau_lib.engine.train import train
    pd.testing.assert_frame_equal(resumed.metrics, train(LONG, progress=False).metrics, check_exact=True)


def test_slurm_jobs_on_submitit_local_executor_resume_in_further_jobs_and_pack_results(queue_home, monkeypatch,
                                                                                        use_store, capsys):
    """The Slurm path's job specs on submitit's LocalExecutor, with packed results: each job trains at most 2 s,
    then saves its resume state and returns, and a further job resumes it; the results come back packed, are
    unpacked here, and equal the queue in one process. (At 6 s a job, an idle fast machine trained the 3,000-step
    run in one job, and no job resumed.)"""
    submitit = pytest.importorskip("submitit")
    runs = {"page_a": {0: TINY, "long": LONG.replace(steps=3000, eval_every=100)}}
    queue_of(monkeypatch, runs)
    executor = submitit.LocalExecutor(folder=queue_home / "submitit")
    t0 = time.perf_counter()
    written = paper_queue.run_slurm_queue(executor, gpus_per_job=0, time_min=5, results="packed",
                                          train_s=lambda minutes: 2.0)
    on_jobs = time.perf_counter() - t0
    store = cache.current()
    assert sorted(p.name for p in written) == sorted(e.folder for e in paper_queue.status())
    assert paper_queue.pending() == [] and not list(store.local.glob("*.partial"))
    assert ", round 2" in capsys.readouterr().out, "no group took a second job"
    reference, here = in_one_process(queue_home, use_store, runs["page_a"].values())
    assert_same_results(store, reference, runs["page_a"].values())
    print(f"\n2 runs: {here:.1f} s in one process, {on_jobs:.1f} s as LocalExecutor jobs (with requeues)")


def test_slurm_jobs_with_the_shared_store_check_it_in_a_job_first_then_commit_into_it(queue_home, monkeypatch):
    submitit = pytest.importorskip("submitit")
    queue_of(monkeypatch, {"page_a": {0: TINY}})
    executor = submitit.LocalExecutor(folder=queue_home / "submitit")
    written = paper_queue.run_slurm_queue(executor, gpus_per_job=0, time_min=5, results="shared")
    assert [p.name for p in written] == [cache.run_name(cache.cache_key(TINY))] and paper_queue.pending() == []
    assert len(list((queue_home / "submitit").glob("*_result.pkl"))) == 2  # the store check, then the run's job
    assert not list((queue_home / "submitit").glob("store-*"))  # a shared store needs no job store


class StuckJob:
    """A finished job that committed nothing and saved no state; the store check runs at once."""

    def __init__(self, fn, *args):
        self.job_id = "stuck"
        self.outcome = fn(*args) if not isinstance(fn, paper_queue.SlurmGroup) else ([], b"")

    def done(self):
        return True

    def result(self):
        return self.outcome


class StuckExecutor:
    def __init__(self):
        self.submitted = 0

    def update_parameters(self, **_):
        pass

    def submit(self, fn, *args):
        self.submitted += isinstance(fn, paper_queue.SlurmGroup)
        return StuckJob(fn, *args)


def test_a_slurm_group_whose_job_moves_nothing_on_is_not_submitted_again(queue_home, monkeypatch, capsys):
    queue_of(monkeypatch, SMALL_QUEUE)
    executor = StuckExecutor()
    assert paper_queue.run_slurm_queue(executor, gpus_per_job=0, time_min=5, results="shared") == []
    groups = len(paper_queue.plan_groups()[0])
    assert executor.submitted == groups > 0  # one job each, none again
    assert capsys.readouterr().out.count("stopped, its last job moved no run on") == groups


def slurm_partition() -> str | None:
    """The default partition of a Slurm that answers here, else None."""
    import shutil
    if shutil.which("sinfo") is None:
        return None
    listed = subprocess.run(["sinfo", "--noheader", "--format=%P %a"], capture_output=True, text=True).stdout
    listed = listed.split("\n")
    up = [line.split()[0] for line in listed if line.endswith(" up")]
    return next((p.rstrip("*") for p in up if p.endswith("*")), up[0] if up else None)


def test_a_real_slurm_runs_the_queue_as_jobs(queue_home, monkeypatch, capsys):
    """On a Slurm that answers here (a single node does: slurm-wlm with slurmctld and slurmd on this machine), the
    command's own jobs train the small queue into the shared store."""
    partition = slurm_partition()
    if partition is None:
        pytest.skip("no Slurm here: sinfo is missing or lists no partition that is up (apt-get install slurm-wlm "
                    "munge, then start munged, slurmctld and slurmd)")
    queue_of(monkeypatch, {"page_a": SMALL_QUEUE["page_a"]})
    assert commands.main(["paper", "--slurm", "--partition", partition, "--gpus-per-job", "0", "--time", "5",
                          "--results", "shared"]) == 0
    assert "3 paper run(s) committed" in capsys.readouterr().out and paper_queue.pending() == []


def test_a_worker_that_cannot_see_the_store_is_refused_by_name(queue_home):
    """A worker that mounts the repository elsewhere finds no marker at this process's paths."""
    elsewhere = lambda fn, paths, token: {  # noqa: E731
        "tcp://10.0.0.7:4242": fn([p.replace(str(queue_home), "/elsewhere") for p in paths], token),
        "tcp://10.0.0.8:4242": fn(paths, token)}
    with pytest.raises(paper_queue.StoreNotVisible, match=r"--results shared: tcp://10\.0\.0\.7:4242 cannot see"):
        paper_queue.check_store_visible(cache.current(), elsewhere)
    assert not list(queue_home.rglob(".cluster-check-*"))


def refused(capsys, *argv) -> str:
    """The one line a command refuses ``argv`` with (exit status 2), no training having started."""
    assert commands.main(["paper", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    return err


@pytest.mark.parametrize("address", ["not an address", "tcp://127.0.0.1:1"])
def test_a_bad_scheduler_address_is_refused_in_one_line(queue_home, monkeypatch, capsys, address):
    monkeypatch.setattr(paper_queue, "train_group", None)  # any training would fail loudly
    queue_of(monkeypatch, SMALL_QUEUE)
    assert f"--scheduler: no dask scheduler answers at {address!r}" in refused(
        capsys, "--scheduler", address, "--results", "shared")


def test_slurm_options_are_refused_in_one_line(queue_home, monkeypatch, capsys, tmp_path):
    queue_of(monkeypatch, SMALL_QUEUE)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert "--results is required" in refused(capsys, "--slurm", "--partition", "gpu")
    assert "--tar and --replace-cpu do not go" in refused(capsys, "--slurm", "--replace-cpu", "--results", "shared")
    assert "Slurm is not available" in refused(capsys, "--slurm", "--partition", "gpu", "--results", "packed")
    sinfo = tmp_path / "bin" / "sinfo"
    sinfo.parent.mkdir()
    sinfo.write_text("#!/bin/sh\necho 'Unable to contact slurm controller' >&2\nexit 1\n")
    sinfo.chmod(0o755)
    assert "Slurm does not answer here (sinfo: Unable to contact slurm controller)" in refused(
        capsys, "--slurm", "--partition", "gpu", "--results", "packed")
    sinfo.write_text("#!/bin/sh\nprintf 'debug*\\ngpu\\n'\n")
    assert "--partition is required with --slurm; sinfo lists: debug, gpu" in refused(
        capsys, "--slurm", "--results", "shared")
    assert "--partition 'a100' is not one here; sinfo lists: debug, gpu" in refused(
        capsys, "--slurm", "--partition", "a100", "--results", "shared")


def test_cluster_options_without_their_cluster_are_refused_not_ignored(queue_home, monkeypatch, capsys):
    monkeypatch.setattr(paper_queue, "train_group", None)  # any training would fail loudly
    queue_of(monkeypatch, SMALL_QUEUE)
    assert "--results, --partition go(es) with --scheduler or --slurm, and neither is given" in refused(
        capsys, "--results", "shared", "--partition", "gpu")
    assert "--time go(es) with --scheduler or --slurm" in refused(capsys, "--time", "30")
    assert "--gpus-per-job go(es) with --slurm, not with --scheduler" in refused(
        capsys, "--scheduler", "tcp://127.0.0.1:1", "--results", "shared", "--gpus-per-job", "0")


def test_a_cpu_queue_with_nothing_to_run_starts_no_cluster(queue_home, monkeypatch, capsys):
    import distributed
    monkeypatch.setattr(paper_queue, "plan_groups", lambda *a, **k: ([], []))
    monkeypatch.setattr(distributed, "LocalCluster", None)  # starting one would fail loudly
    assert paper_queue.run_cpu_queue() == []
