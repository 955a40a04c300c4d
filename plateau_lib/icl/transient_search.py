"""Finding a CPU-sized transient ridge (Carroll et al., issue 23): a recorded search over small models on the
paper's data (D = 8, K = 16, σ² = 0.125, nested task sets), one configuration changed at a time.

The paper's 2-layer model (about 2.6 M parameters) costs about 2.6 s a step on one core, 72 hours a run. Whether
the transient (the OOD loss falls toward ridge's, then rises to dMMSE_M's; t_crit grows with M) survives in a
model of width 64 or 128 at 20k-50k steps is the open question; each trial answers it for one (setting, M):

- ``TRIALS``: the settings tried, each a label, what it changes against the one before, and TrainConfig fields;
- ``transient(curve)``: the rule a trial is judged by (the OOD loss rises by more than 5% after t_crit and Δ to
  ridge on Gaussian tasks falls, then grows by more than 5%), on curves smoothed by a running median;
- ``run_trial(label, M)``: train (cached, resumable, stops at a deadline), judge, and keep one row in the
  committed table ``results/icl_transient_search.csv`` (replacing an older row of the same trial and M).

    OMP_NUM_THREADS=1 python -m plateau_lib.icl.transient_search w64 --Ms 32 64 --budget-s 5400
    python -m plateau_lib.icl.transient_search --table
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from plateau_lib.engine import cache
from plateau_lib.engine.presets import log_linear_steps
from plateau_lib.engine.train import Stopped, TrainConfig
from plateau_lib.engine.utils import atomic_path, cpu_threads
from plateau_lib.icl import diversity
from plateau_lib.icl.presets import DIVERSITY_PAPER, check_Ms, configs

TABLE = cache.COMMITTED / "icl_transient_search.csv"
RISE = 0.05     # the OOD loss's rise after t_crit, and Δ to ridge's regrowth after its minimum (relative)
WINDOW = 5      # running-median window (evaluations) before the rule is applied: noise is not a transient


def _steps(total: int) -> dict:
    return {"steps": total, "eval_every": total, "eval_steps": log_linear_steps(total, 30, 30)}


# The search's first setting: Carroll's data with a 2-layer, 4-head model of width 64 and MLP 256, Adam at 1e-3
# with a 1k-step warm-up and then constant (a decay to 0 could freeze the late return to dMMSE_M), batch 128.
BASE = DIVERSITY_PAPER.replace(
    task_kwargs={"D": 8, "K": 16, "noise_var": 0.125, "d_mlp": 256, "doubled_residual": False, "n_root": 64},
    d_model=64, lr=1e-3, schedule="warmup_constant", warmup_steps=1_000, batch_size=128, eval_batch=1024,
    **_steps(20_000))

# label -> (what changes against the setting it builds on, TrainConfig fields over BASE)
TRIALS = {
    "w64": ("first setting: width 64, MLP 256, batch 128, Adam 1e-3 (1k warm-up, then constant), 20k steps", {}),
    "w128": ("width 128, MLP 512 (against w64)",
             {"d_model": 128, "task_kwargs": {**BASE.task_kwargs, "d_mlp": 512}}),
    "w64-50k": ("50k steps (against w64)", _steps(50_000)),
    "w64-lr3e-3": ("Adam at 3e-3 (against w64)", {"lr": 3e-3}),
    "w64-b256": ("batch 256 (against w64)", {"batch_size": 256}),
    "w64-D4": ("D = 4, K = 8 (against w64): a smaller problem",
               {"task_kwargs": {**BASE.task_kwargs, "D": 4, "K": 8}}),
}


def trial_config(label: str, M) -> TrainConfig:
    """The TrainConfig of trial ``label`` at task count ``M`` (an int; ``math.inf`` for Gaussian tasks)."""
    if label not in TRIALS:
        raise ValueError(f"unknown trial {label!r}; allowed: {sorted(TRIALS)}")
    (M,) = check_Ms([M])
    return next(iter(configs(BASE.replace(**TRIALS[label][1]), [M]).values()))


def _smooth(values, window: int = WINDOW) -> np.ndarray:
    return pd.Series(np.asarray(values, float)).rolling(window, center=True, min_periods=1).median().to_numpy()


def transient(steps, ood_loss, delta_ridge, rise: float = RISE, window: int = WINDOW) -> dict:
    """Judge one curve. After a running median over ``window`` evaluations: t_crit is the step of least OOD
    loss; the OOD loss *rises* if every evaluation of the last fifth lies more than ``rise`` (relative) above
    that minimum; Δ to ridge (Gaussian tasks) *regrows* likewise after its own minimum. A transient is both,
    with t_crit before the last fifth. Returns the numbers and the verdict ``transient`` (bool)."""
    steps = np.asarray(steps)
    if not len(steps) == len(ood_loss) == len(delta_ridge) or len(steps) < 2 * window:
        raise ValueError(f"parameter 'steps', 'ood_loss' and 'delta_ridge' must have one equal length >= {2 * window}, "
                         f"got {len(steps)}, {len(ood_loss)}, {len(delta_ridge)}")
    ood, ridge = _smooth(ood_loss, window), _smooth(delta_ridge, window)
    tail = max(1, len(steps) // 5)
    i, j = int(np.argmin(ood)), int(np.argmin(ridge))
    ood_rise = float(ood[-tail:].min() / ood[i] - 1)
    ridge_regrowth = float(ridge[-tail:].min() / ridge[j] - 1)
    return {"t_crit": int(steps[i]), "min_ood_loss": float(ood[i]), "final_ood_loss": float(ood[-1]),
            "ood_rise": ood_rise, "ridge_min_step": int(steps[j]), "ridge_regrowth": ridge_regrowth,
            "transient": bool(i < len(steps) - tail and ood_rise > rise and ridge_regrowth > rise)}


def judge(result, M) -> dict:
    """``transient`` of a finished run's curves, with its final Δ to dMMSE_M and to ridge on q_M."""
    curve = diversity.curves({(M, 0): result})
    last = curve.iloc[-1]
    return {**transient(curve["step"], curve["ood_loss"], curve["delta_ridge_ood"]),
            "final_delta_dmmse": float(last["delta_dmmse"]), "final_delta_ridge": float(last["delta_ridge"])}


def table() -> pd.DataFrame:
    """The committed search table (empty before the first trial)."""
    return pd.read_csv(TABLE) if TABLE.exists() else pd.DataFrame()


def keep_row(row: dict) -> pd.DataFrame:
    """Add ``row`` to the committed table, replacing an older row of the same trial and M; written atomically."""
    old = table()
    if not old.empty:
        old = old[~((old["trial"] == row["trial"]) & (old["M"].astype(float) == float(row["M"])))]
    new = pd.concat([old, pd.DataFrame([row])], ignore_index=True)
    with atomic_path(TABLE) as tmp:
        new.to_csv(tmp, index=False)
    return new


def run_trial(label: str, M, deadline: float | None = None, progress: bool = True) -> dict | None:
    """Train trial ``label`` at ``M`` (resuming a stopped run), judge it, commit the run and keep its row;
    None if stopped at ``deadline`` (the resume state stays in the local cache)."""
    cfg = trial_config(label, M)
    try:
        (result,) = cache.cached_train_many([cfg], progress=progress, deadline=deadline)
    except Stopped as stop:
        print(stop, flush=True)
        return None
    cache.commit_result(cfg)
    model = cfg.make_task().build_model(cfg)
    kw = cfg.task_kwargs
    row = {"trial": label, "change": TRIALS[label][0], "M": M, "D": kw["D"], "K": kw["K"], "d_model": cfg.d_model,
           "d_mlp": kw["d_mlp"], "n_layer": cfg.n_layer, "n_head": cfg.n_head, "params": sum(p.numel() for p in model.parameters()),
           "batch_size": cfg.batch_size, "lr": cfg.lr, "schedule": cfg.schedule, "warmup_steps": cfg.warmup_steps,
           "steps": cfg.steps, "cpu_s": round(float(result.meta.get("wall_time_s", 0.0)), 1),
           "device": result.meta.get("device", cfg.device), "key": cache.cache_key(cfg), **judge(result, M)}
    keep_row(row)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trial", nargs="?", choices=sorted(TRIALS), help="the setting to try")
    parser.add_argument("--Ms", type=float, nargs="+", default=[32, 64], help="task counts M (inf for Gaussian tasks)")
    parser.add_argument("--budget-s", type=float, default=None, help="stop cleanly after this many seconds")
    parser.add_argument("--table", action="store_true", help="print the committed search table")
    args = parser.parse_args(argv)
    if args.trial is None and not args.table:
        parser.error("give a trial to run or --table")
    if args.budget_s is not None and args.budget_s <= 0:
        parser.error(f"--budget-s must be positive, got {args.budget_s}")
    cpu_threads()
    deadline = None if args.budget_s is None else time.time() + args.budget_s
    if args.trial:
        for M in check_Ms(args.Ms):
            row = run_trial(args.trial, M, deadline)
            if row is None:
                break
            print({k: row[k] for k in ("trial", "M", "t_crit", "ood_rise", "ridge_regrowth", "transient", "cpu_s")},
                  flush=True)
    if args.table:
        print(table().to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
