"""Sweeps: the in-process sweep equals separate runs, real executors (a dask LocalCluster with two workers,
submitit's LocalExecutor) give the same numbers into the same cache, and a sweep killed on its workers resumes."""
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
from pathlib import Path
import pytest

from plateau_lib.engine import cache
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.sweep import sweep
from plateau_lib.engine.train import train
from plateau_lib.icl import presets as icl_presets

TINY = TrainConfig(task="icl_regression", task_kwargs={"D": 2, "K": 4, "noise_var": 0.125, "n_root": 4,
                                                       "doubled_residual": False},
                   n_layer=1, n_head=1, d_model=8, lr=3e-3, schedule="one_cycle", steps=30, batch_size=16,
                   eval_every=10, eval_batch=32, device="cpu")


@pytest.fixture
def isolated(tmp_path, use_store):
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    return tmp_path


def same(a: dict, b: dict):
    assert list(a) == list(b)
    for label in a:
        pd.testing.assert_frame_equal(a[label].metrics, b[label].metrics, check_exact=True)
        for name, value in a[label].arrays.items():
            np.testing.assert_array_equal(value, b[label].arrays[name])


def test_sweep_over_two_M_equals_two_separate_runs(isolated):
    configs = icl_presets.configs(TINY, [1, math.inf])
    swept = sweep(configs, use_cache=False, progress=False)
    for label, cfg in configs.items():
        alone = train(cfg, progress=False)
        pd.testing.assert_frame_equal(swept[label].metrics, alone.metrics, check_exact=True)
    assert len(list((isolated / "local").glob("train-*/meta.json"))) == 2  # each run cached
    again = sweep(configs, progress=False)  # hits
    same(swept, again)


def test_dask_local_cluster_equals_in_process(isolated):
    distributed = pytest.importorskip("distributed")
    configs = icl_presets.configs(TINY, [1, 2, math.inf])
    here = sweep(configs, use_cache=False, progress=False)
    for folder in (isolated / "local").glob("train-*"):  # the workers must recompute, not load
        folder.rename(folder.with_name("old-" + folder.name))
    t0 = time.perf_counter()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, \
            distributed.Client(lc) as client:
        remote = sweep(configs, use_cache=True, executor=client.get_executor(), progress=False)
    print(f"dask LocalCluster sweep (2 workers, 3 runs, with cluster start): {time.perf_counter() - t0:.1f} s")
    same(here, remote)
    assert len(list((isolated / "local").glob("train-*/meta.json"))) == 3  # written by the workers


def test_a_sweep_killed_on_its_dask_workers_resumes_to_the_uninterrupted_sweep(isolated):
    """SIGKILL of a 2-worker sweep (driver and workers) once one run has finished and another has saved a resume
    state: the next sweep loads the finished run without retraining it, resumes the other from its state, and
    gives the numbers of a sweep that was never stopped."""
    pytest.importorskip("distributed")
    cfg = TINY.replace(steps=400, eval_every=10)
    configs = icl_presets.configs(cfg, [1, 2, math.inf])
    whole = sweep(configs, use_cache=False, progress=False)
    for folder in (isolated / "local").glob("train-*"):
        folder.rename(folder.with_name("old-" + folder.name))
    fields = {k: getattr(cfg, k) for k in ("steps", "eval_every")}
    script = ("import math; from pathlib import Path\n"
              "from distributed import Client, LocalCluster\n"
              "from plateau_lib.engine import cache; from plateau_lib.engine.sweep import sweep\n"
              "from plateau_lib.icl import presets\n"
              f"from tests.test_sweep import TINY\n"
              f"cache.use(cache.Store({str(cache.current().committed)!r}, {str(cache.current().local)!r}))\n"
              "if __name__ == '__main__':\n"
              f"    configs = presets.configs(TINY.replace(**{fields!r}), [1, 2, math.inf])\n"
              "    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=':0') as lc, Client(lc) as c:\n"
              "        sweep(configs, executor=c.get_executor(), progress=False)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "OMP_NUM_THREADS": "1"},
                            cwd=Path(__file__).parent.parent, start_new_session=True)
    local, t0 = isolated / "local", time.time()
    while time.time() - t0 < 180 and proc.poll() is None and not (
            any(local.glob("train-*[!l]/meta.json")) and any(local.glob("train-*.partial/resume.pt"))):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = [p for p in local.glob("train-*/meta.json") if not p.parent.name.startswith("old-")]
    assert finished and any(local.glob("train-*.partial/resume.pt")), "not killed between a finished and a resumable run"
    stamps = {p: p.stat().st_mtime_ns for p in finished}
    resumed = sweep(configs, progress=False)
    same(whole, resumed)
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # loaded, not retrained


def test_submitit_local_executor_equals_in_process(isolated):
    submitit = pytest.importorskip("submitit")
    configs = icl_presets.configs(TINY, [1])
    here = sweep(configs, use_cache=False, progress=False)
    for folder in (isolated / "local").glob("train-*"):
        folder.rename(folder.with_name("old-" + folder.name))
    executor = submitit.LocalExecutor(folder=isolated / "submitit")
    executor.update_parameters(timeout_min=10)
    same(here, sweep(configs, executor=executor, progress=False))


def test_bad_executor_and_configs(isolated):
    with pytest.raises(ValueError, match="executor"):
        sweep(icl_presets.configs(TINY, [1]), executor=object())
    with pytest.raises(ValueError, match="configs"):
        sweep({})
    with pytest.raises(ValueError, match="configs"):
        sweep({"a": "not a config"})
