"""Sweeps: many training configs through the result cache, in this process or on any executor.

``sweep(configs)`` trains every config that is not cached yet and returns ``{label: TrainResult}``.

- ``executor=None`` runs here, through the current store's ``train_many``: runs of one architecture are stacked
  on a GPU (``train_many``), each stored the moment it finishes.
- Otherwise ``executor`` is anything with ``submit(fn, *args)`` returning an object with ``.result()``,
  and nothing more is used: a ``dask.distributed`` client's ``client.get_executor()``, submitit's
  ``AutoExecutor`` (Slurm) or ``LocalExecutor``, or ``concurrent.futures``. Each worker trains one config
  and writes it into the shared cache folders by atomic rename (no file locks: they are unreliable on
  network file systems), so the workers must see this repository's ``results/`` and ``.cache/`` (a shared
  file system on a cluster).

Either way an interrupted sweep resumes: finished runs are cache hits and unfinished ones resume from
their partial folders.
"""
from __future__ import annotations

from tqdm.auto import tqdm

from plateau_lib.engine import cache
from plateau_lib.engine.runs import TrainConfig, TrainResult
from plateau_lib.engine.utils import cpu_threads


def check_configs(configs) -> dict:
    """``configs`` must be a non-empty dict of TrainConfig (ValueError naming what is wrong)."""
    if not isinstance(configs, dict) or not configs:
        raise ValueError(f"parameter 'configs' must be a non-empty dict {{label: TrainConfig}}, got {configs!r}")
    bad = [label for label, c in configs.items() if not isinstance(c, TrainConfig)]
    if bad:
        raise ValueError(f"parameter 'configs' must map labels to TrainConfig objects; not a TrainConfig: {bad}")
    return configs


def train_one(cfg: TrainConfig, use_cache: bool, store: cache.Store) -> TrainResult:
    """A worker's job: ``cfg`` through the caller's ``store`` (its paths as the caller sees them; a shared file
    system on a cluster), without file locks, on one CPU thread unless $OMP_NUM_THREADS says otherwise."""
    cpu_threads()
    return store.train_many([cfg], use_cache, progress=False, lock=False)[0]


def sweep(configs: dict, use_cache: bool = True, executor=None, progress: bool = True, backend: str = "auto",
          desc: str = "sweep") -> dict:
    """Train (or load) every config of ``{label: TrainConfig}``; returns ``{label: TrainResult}``.

    executor: None (this process; ``backend`` as in ``train.train_many``) or any object with ``submit(fn,
        *args)`` whose return value has ``.result()`` (see the module docstring).
    progress: one bar for the sweep, counting finished runs.
    """
    configs = check_configs(configs)
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise ValueError(f"parameter 'executor' must be None or have a submit(fn, *args) method (e.g. "
                         f"client.get_executor() of dask.distributed, or a submitit executor), got {executor!r}")
    labels = list(configs)
    keys = {label: cache.cache_key(configs[label]) for label in labels}
    unique = {}  # one job per key, even if two labels share a config
    for label in labels:
        unique.setdefault(keys[label], configs[label])
    bar, store = tqdm(total=len(unique), desc=desc, disable=not progress), cache.current()
    if executor is None:
        order = list(unique)
        done = store.train_many([unique[k] for k in order], use_cache, progress=False, backend=backend,
                                on_done=lambda i, r: bar.update(1))
        by_key = dict(zip(order, done))
    else:
        jobs = {k: executor.submit(train_one, c, use_cache, store) for k, c in unique.items()}
        by_key = {}
        for k, job in jobs.items():
            by_key[k] = job.result()
            bar.update(1)
    bar.close()
    return {label: by_key[keys[label]] for label in labels}
