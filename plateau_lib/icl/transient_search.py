"""Finding a CPU-sized transient ridge (Carroll et al., issue 23): a recorded search over small models on the
paper's data (D = 8, K = 16, σ² = 0.125, nested task sets), one configuration changed at a time.

The paper's 2-layer model (about 2.6 M parameters) costs about 2.7 s a step on one core, about 77 hours a run. Whether
the transient (the OOD loss falls toward ridge's, then rises to dMMSE_M's; t_crit grows with M) survives in a
model of width 64 or 128 at 20k-50k steps is the open question; each trial answers it for one (setting, M):

- ``TRIALS``: the settings tried, each a label, what it changes against the one before, and TrainConfig fields;
- ``diversity.transient(curve)``: the rule a trial is judged by (the OOD loss dips to t_crit and rises by more than
  5% after it, and Δ to ridge on Gaussian tasks falls, then grows by more than 5%), on curves smoothed by a running
  median;
- ``run_trials(label, Ms)``: train its M values together (cached, resumable, stopped at a deadline; stacked into
  one computation on a GPU, one after another on a CPU), judge each, and keep one row per M in the committed
  table ``results/icl_transient_search.csv`` (replacing an older row of the same trial and M);
- ``record_stopped(label, Ms)``: a trial stopped at its deadline keeps rows too, judged by the same rule on its
  evaluations so far and marked by ``steps_done`` < ``steps``, with its curves in
  ``results/icl_transient_search_stopped.csv``: how far it got, never a finished result. Its resume state (about
  3 MB a run) is committed under ``results/in_progress/`` (``engine.carried``), and the same command continues it
  on another machine or day.

    OMP_NUM_THREADS=1 python -m plateau_lib transient-search w64 --Ms 32 64 --budget-s 5400
    python -m plateau_lib transient-search w64-50k --Ms 4 8 16 32 64 128 256 inf --record-stopped
    python -m plateau_lib transient-search --table
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from plateau_lib.book.pages import MISSING, formatted
from plateau_lib.book.plots import PAGE_WIDTH
from plateau_lib.engine import cache, carried
from plateau_lib.engine.costs import parameters
from plateau_lib.engine.presets import log_linear_steps
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.train import Stopped
from plateau_lib.engine.utils import atomic_path
from plateau_lib.icl import diversity
from plateau_lib.icl.diversity_figures import palette
from plateau_lib.icl.presets import DIVERSITY_CPU_D8, DIVERSITY_MORE_SEEDS, check_Ms, configs, diversity as diversity_sweep

TABLE = "icl_transient_search.csv"  # in the store's committed folder
STOPPED_CURVES = "icl_transient_search_stopped.csv"
CURVE_COLUMNS = ["trial", "M", "seed", "step", "ood_loss", "ood_ridge", "ood_dmmse", "delta_ridge_ood"]
def _steps(total: int) -> dict:
    return {"steps": total, "eval_every": total, "eval_steps": log_linear_steps(total, 30, 30)}


# The search's first setting, the CPU transient sweep's (presets.DIVERSITY_CPU_D8): Carroll's data with a 2-layer,
# 4-head model of width 64 and MLP 256, Adam at 1e-3 with a 1k-step warm-up and then constant, batch 128.
BASE = DIVERSITY_CPU_D8

# label -> (what changes against the setting it builds on, TrainConfig fields over BASE)
TRIALS = {
    "w64": ("first setting: width 64, MLP 256, batch 128, Adam 1e-3 (1k warm-up, then constant), 20k steps", {}),
    "w128": ("width 128, MLP 512 (against w64)",
             {"d_model": 128, "task_kwargs": {**BASE.task_kwargs, "d_mlp": 512}}),
    "w64-50k": ("50k steps (against w64)", _steps(50_000)),
    "w128-50k": ("width 128, MLP 512, 50k steps (against w64-50k)",
                 {"d_model": 128, "task_kwargs": {**BASE.task_kwargs, "d_mlp": 512}, **_steps(50_000)}),
    "w64-lr3e-3": ("Adam at 3e-3 (against w64)", {"lr": 3e-3}),
    "w64-b256": ("batch 256 (against w64)", {"batch_size": 256}),
    "w64-D4": ("D = 4, K = 8 (against w64): a smaller problem",
               {"task_kwargs": {**BASE.task_kwargs, "D": 4, "K": 8}}),
    # More model seeds of w64-50k (t_crit on the seed mean); their checkpoints, which do not change training,
    # are kept for λ̂ over training.
    "w64-50k-seeds": ("w64-50k at more model seeds, with checkpoints for λ̂ over training",
                      {**_steps(50_000), "checkpoint_steps": DIVERSITY_MORE_SEEDS["cpu_d8_50k"]["checkpoint_steps"]}),
    # The GPU issue's check: may Carroll's paper-scale runs take bfloat16 products (about twice as fast on a GPU)?
    # Only if, at the CPU scale, their markers stay inside the float32 seeds' spread (w64-50k and w64-50k-seeds).
    "w64-50k-bf16": ("bfloat16 matrix products, float32 sums (against w64-50k)",
                     {**_steps(50_000), "matmul_operands": "bfloat16"}),
}


# The setting the search chose: w64-50k, the page's CPU transient sweep (presets "cpu_d8_50k", the same runs), and
# the runs whose checkpoints give λ̂ over training (with that sweep's SGLD setting).
SWEEP = "cpu_d8_50k"
LLC_TRAINING = {"trial": "w64-50k-seeds", "Ms": [8, 16, 32], "seeds": [1]}  # the M with a transient


def trial_config(label: str, M, seed: int = 0) -> TrainConfig:
    """The TrainConfig of trial ``label`` at task count ``M`` (an int; ``math.inf`` for Gaussian tasks) and model
    seed ``seed``."""
    if label not in TRIALS:
        raise ValueError(f"unknown trial {label!r}; allowed: {sorted(TRIALS)}")
    (M,) = check_Ms([M])
    return next(iter(configs(BASE.replace(**TRIALS[label][1]), [M], [seed]).values()))


def judge(result, M) -> dict:
    """``transient`` of a finished run's curves, with its final Δ to dMMSE_M and to ridge on q_M."""
    curve = diversity.curves({(M, 0): result})
    last = curve.iloc[-1]
    return {**diversity.transient(curve["step"], curve["ood_loss"], curve["delta_ridge_ood"]),
            "final_delta_dmmse": float(last["delta_dmmse"]), "final_delta_ridge": float(last["delta_ridge"])}


def _committed(name: str) -> Path:
    """The search's committed file ``name`` (``TABLE``, ``STOPPED_CURVES``) in the current store."""
    return cache.current().committed / name


def table() -> pd.DataFrame:
    """The committed search table (empty before the first trial); ``steps_done`` is ``steps`` for a finished run."""
    path = _committed(TABLE)
    return _completed(pd.read_csv(path)) if path.exists() else pd.DataFrame()


def _completed(search: pd.DataFrame) -> pd.DataFrame:
    """``search`` with the columns rows made before them lack: ``steps_done`` (= ``steps``: finished),
    ``device`` ("cpu"), ``seed`` (0) and ``gpu_s`` (before it, ``cpu_s`` held a run's whole wall time, on the
    device of ``device``, where it is moved to ``gpu_s`` for a GPU)."""
    if search.empty or "steps" not in search:
        return search
    done = search["steps_done"].fillna(search["steps"]) if "steps_done" in search else search["steps"]
    device = search["device"].fillna("cpu") if "device" in search else "cpu"
    seed = search["seed"].fillna(0).astype(int) if "seed" in search else 0
    search = search.assign(steps_done=done.astype(int), device=device, seed=seed)
    gpu = search["gpu_s"] if "gpu_s" in search else pd.Series(np.nan, index=search.index)
    older_gpu_row = gpu.isna() & ~search["device"].astype(str).str.startswith("cpu")
    return search.assign(gpu_s=gpu.fillna(0.0).mask(older_gpu_row, search["cpu_s"]),
                         cpu_s=search["cpu_s"].mask(older_gpu_row, 0.0))


def _same_run(frame: pd.DataFrame, label: str, M, seed: int) -> pd.Series:
    """Rows of ``frame`` (table or curves; no ``seed`` column means seed 0) of trial ``label`` at ``M`` and ``seed``."""
    seeds = frame["seed"].fillna(0).astype(int) if "seed" in frame else 0
    return (frame["trial"] == label) & (frame["M"].astype(float) == float(M)) & (seeds == int(seed))


def stopped_curves() -> pd.DataFrame:
    """The committed curves of stopped trials (tidy: ``CURVE_COLUMNS``)."""
    path = _committed(STOPPED_CURVES)
    return pd.read_csv(path) if path.exists() else pd.DataFrame(columns=CURVE_COLUMNS)


def _keep_stopped_curves(label: str, M, seed: int, curves: pd.DataFrame | None) -> None:
    """Replace the stopped curves of (``label``, ``M``, ``seed``) by ``curves`` (None: drop them, the run has
    finished)."""
    old = stopped_curves()
    old = old[~_same_run(old, label, M, seed)]
    new = old if curves is None else pd.concat([old, curves[CURVE_COLUMNS]], ignore_index=True)
    path = _committed(STOPPED_CURVES)
    if new.empty and not path.exists():
        return
    with atomic_path(path) as tmp:
        new.to_csv(tmp, index=False, float_format="%.5g")


def keep_row(row: dict) -> pd.DataFrame:
    """Add ``row`` to the committed table, replacing an older row of the same trial, M and seed; written
    atomically."""
    old = table()
    if not old.empty:
        old = old[~_same_run(old, row["trial"], row["M"], row.get("seed", 0))]
    new = pd.concat([old, pd.DataFrame([row])], ignore_index=True)
    with atomic_path(_committed(TABLE)) as tmp:
        new.to_csv(tmp, index=False)
    return new


def _row(label: str, M, cfg: TrainConfig, result) -> dict:
    kw = cfg.task_kwargs
    return {"trial": label, "change": TRIALS[label][0], "M": M, "seed": cfg.seed, "D": kw["D"], "K": kw["K"], "d_model": cfg.d_model,
            "d_mlp": kw["d_mlp"], "n_layer": cfg.n_layer, "n_head": cfg.n_head,
            "params": parameters(cfg), "batch_size": cfg.batch_size, "lr": cfg.lr,
            "schedule": cfg.schedule, "warmup_steps": cfg.warmup_steps, "steps": cfg.steps,
            "steps_done": int(result.meta.get("stopped_at", cfg.steps)),
            **_device_seconds(result.meta, cfg), "device": result.meta.get("device", cfg.device), "key": cache.cache_key(cfg), **judge(result, M)}


def _device_seconds(meta: dict, cfg: TrainConfig) -> dict:
    """``cpu_s`` and ``gpu_s``: a run's wall time on a CPU and on a GPU (a run resumed on another device has both)."""
    times = meta.get("wall_time_s_by_device") or {str(meta.get("device", cfg.device)): meta.get("wall_time_s", 0.0)}
    on_cpu = sum(float(v) for k, v in times.items() if k.startswith("cpu"))
    return {"cpu_s": round(on_cpu, 1), "gpu_s": round(sum(float(v) for v in times.values()) - on_cpu, 1)}


def run_trials(label: str, Ms, deadline: float | None = None, progress: bool = True, seeds=(0,)) -> list[dict] | None:
    """Train trial ``label`` at every M of ``Ms`` and seed of ``seeds`` together (resuming stopped runs), and judge,
    commit and keep the row of each run the moment it finishes; None if stopped at ``deadline`` (the others keep
    their resume state in the local cache, and ``record_stopped`` their rows so far)."""
    runs = [(M, s) for M in check_Ms(Ms) for s in _check_seeds(seeds)]
    cfgs = [trial_config(label, M, s) for M, s in runs]
    rows = {}

    def keep(i, result):
        rows[i] = _keep_finished(label, runs[i][0], cfgs[i], result)

    store = cache.current()
    for cfg in cfgs:
        carried.restore(carried.folder(_carried_name(cfg)), store.working(cfg), files=None)
    try:
        store.train_many(cfgs, progress=progress, deadline=deadline, on_done=keep)
    except Stopped as stop:
        print(stop, flush=True)
        record_stopped(label, Ms, seeds)
        return None
    return [rows[i] for i in range(len(runs))]


def _check_seeds(seeds) -> list[int]:
    seeds = list(seeds)
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise ValueError(f"parameter 'seeds' must be a non-empty list of integers >= 0, got {seeds!r}")
    if len(set(seeds)) < len(seeds):
        raise ValueError(f"parameter 'seeds' lists a seed twice: {seeds!r}")
    return seeds


def _carried_name(cfg: TrainConfig) -> str:
    """The committed in-progress folder of a trial's run (``engine.carried``)."""
    return f"transient_search-{cache.cache_key(cfg)}"


def _keep_finished(label: str, M, cfg: TrainConfig, result) -> dict:
    """Commit a finished run of the trial, keep its row and drop its stopped curves and carried resume state."""
    cache.current().commit(cfg)
    shutil.rmtree(carried.folder(_carried_name(cfg)), ignore_errors=True)
    row = _row(label, M, cfg, result)
    keep_row(row)
    _keep_stopped_curves(label, M, cfg.seed, None)
    return row


def record_stopped(label: str, Ms, seeds=(0,)) -> list[dict]:
    """Rows and curves, judged so far, of the runs of trial ``label`` at ``Ms`` and ``seeds`` that have a local
    resume state (stopped at a deadline) and no committed result; kept in the committed table, marked
    ``steps_done``, and the resume state committed in progress (``engine.carried``), for the next session."""
    rows, store = [], cache.current()
    for M in check_Ms(Ms):
        for seed in _check_seeds(seeds):
            cfg = trial_config(label, M, seed)
            result = store.stopped(cfg)
            if result is None or store.committed_result(cfg) is not None:
                continue
            curves = diversity.curves({(M, seed): result}).assign(trial=label)
            if len(curves) < 2 * diversity.WINDOW:
                continue
            rows.append(_row(label, M, cfg, result))
            keep_row(rows[-1])
            _keep_stopped_curves(label, M, seed, curves)
            carried.keep(store.working(cfg) / "resume.pt", carried.folder(_carried_name(cfg)))
    return rows


def llc_training_runs() -> dict:
    """``{(M, seed): TrainConfig}`` of the runs whose λ̂ over training is estimated (``LLC_TRAINING``)."""
    return {(M, s): trial_config(LLC_TRAINING["trial"], M, s) for M in check_Ms(LLC_TRAINING["Ms"])
            for s in LLC_TRAINING["seeds"]}


def search_llc_over_training(commit: bool = False, progress: bool = True, Ms=None):
    """λ̂ at the checkpoints and final weights of ``llc_training_runs()``, with the chosen sweep's SGLD setting
    (``diversity.llc_over_training``; loaded when stored); ``Ms``: estimate only these M's runs (another process
    does the rest; None until all are done); ``commit`` copies the finished table into ``results/``."""
    runs, sgld = llc_training_runs(), diversity_sweep(SWEEP)[1]
    only = None if Ms is None else [(M, s) for (M, s) in runs if M in check_Ms(Ms)]
    found = diversity.llc_over_training(runs, sgld, progress=progress, only=only)
    if commit and found is not None:
        print(f"committed {diversity.llc_over_training_table(runs, sgld).commit()}")
    return found


def stored_llc_over_training():
    """(the committed or local λ̂-over-training table, its meta), or None; never computes."""
    return diversity.load_llc_over_training(llc_training_runs(), diversity_sweep(SWEEP)[1])



def llc_over_training_texts(table: pd.DataFrame | None, final: pd.DataFrame | None) -> dict[str, str]:
    """The numbers the transient-ridge page says about λ̂ over training (``MISSING`` throughout without the table):
    per M of ``table`` (``stored_llc_over_training``), ``peak_{M}``, the step of the highest λ̂, and ``fall_{M}``,
    how far λ̂ falls from it to the last checkpoint ("75%"); ``final_gap``, the range over M of |final λ̂ − the
    sweep's λ̂ at seed 0| ÷ the sweep's (``final``: the sweep's LLC table, with M, seed and llc_mean)."""
    Ms = [] if table is None else sorted(table["M"].unique())
    texts = {"final_gap": MISSING} | {f"{k}_{M:g}": MISSING for M in LLC_TRAINING["Ms"] for k in ("peak", "fall")}
    gaps = []
    for M in Ms:
        rows = table[table["M"] == M].sort_values("step")
        peak = rows.loc[rows["llc_mean"].idxmax()]
        fall = 1 - rows["llc_mean"].iloc[-1] / peak["llc_mean"]
        texts |= {f"peak_{M:g}": f"{int(peak['step']):,}", f"fall_{M:g}": f"{fall:.0%}"}
        seed0 = None if final is None else final[(final["M"] == M) & (final["seed"] == 0)]["llc_mean"]
        if seed0 is not None and len(seed0):
            gaps.append(abs(rows["llc_mean"].iloc[-1] - seed0.iloc[0]) / seed0.iloc[0])
    if gaps:
        low, high = f"{min(gaps):.0%}", f"{max(gaps):.0%}"
        texts["final_gap"] = low if low == high else f"{low}–{high}"
    return texts

# ---- the page's section: "Finding a CPU-sized transient" ---------------------------------------------------------

SHOWN = {"trial": "trial", "M": "M", "seed": "seed", "params": "parameters", "steps_shown": "steps",
         "minutes": "minutes", "t_crit": "tᶜʳⁱᵗ", "ood_rise": "OOD rise",
         "ridge_regrowth": "Δ-to-ridge rise", "final_delta_dmmse": "final Δ to dMMSE_M",
         "final_delta_ridge": "final Δ to ridge", "transient": "transient"}


def _stopped(search: pd.DataFrame) -> pd.Series:
    return search["steps_done"] < search["steps"]


def readable(search: pd.DataFrame) -> pd.DataFrame:
    """The search table as the page shows it: one row per (trial, M) in the order tried, its minutes on each device
    ("10.0 GPU + 60.0 CPU"), rises in percent, a stopped run's steps as "done of planned" and its verdict "so far"
    (what each trial changed is in ``trials_table``)."""
    if search.empty:
        return pd.DataFrame(columns=list(SHOWN.values()))
    search = _completed(search)
    stopped = _stopped(search)
    minutes = [" + ".join(f"{s / 60:.1f} {device}" for s, device in ((gpu, "GPU"), (cpu, "CPU")) if s > 0) or "0"
               for gpu, cpu in zip(search["gpu_s"], search["cpu_s"])]
    t = search.assign(minutes=minutes, M=search["M"].map(diversity.label_M),
                      steps_shown=[f"{d:,} of {n:,}" if d < n else f"{n:,}"
                                   for d, n in zip(search["steps_done"], search["steps"])],
                      ood_rise=(100 * search["ood_rise"]).round(1).astype(str) + "%",
                      ridge_regrowth=(100 * search["ridge_regrowth"]).round(1).astype(str) + "%",
                      transient=search["transient"].map({True: "yes", False: "no"}) + stopped.map(
                          {True: " (so far)", False: ""}))
    for c in ("final_delta_dmmse", "final_delta_ridge"):
        t[c] = formatted(t[c], "{:.3g}")
    return t[list(SHOWN)].rename(columns=SHOWN).set_index(["trial", "M", "seed"])


def provenance_rows(search: pd.DataFrame) -> list[dict]:
    """One provenance row per trial of the committed search table: its runs, M, seeds and steps, its minutes on
    each device and where the rows are kept."""
    if search.empty:
        return []
    search = _completed(search)
    rows = []
    for trial, runs in search.groupby("trial", sort=False):
        rows.append({"trial": trial, "runs": len(runs),
                     "M": ", ".join(diversity.label_M(M) for M in sorted(runs["M"].unique())),
                     "seeds": ", ".join(str(int(s)) for s in sorted(runs["seed"].unique())),
                     "steps": f"{int(runs['steps'].max()):,}",
                     "GPU minutes": f"{runs['gpu_s'].fillna(0).sum() / 60:.1f}",
                     "CPU minutes": f"{runs['cpu_s'].fillna(0).sum() / 60:.1f}",
                     "source": f"results/{TABLE}"})
    return rows


def search_totals(search: pd.DataFrame) -> dict:
    """The search so far: ``runs``, ``trials`` (settings tried), ``cpu_hours`` (core-hours, wall) and
    ``gpu_minutes`` (a trial's runs stacked on the GPU: its time counts once)."""
    if search.empty:
        return {"runs": 0, "trials": 0, "cpu_hours": 0.0, "gpu_minutes": 0.0}
    search = _completed(search)
    return {"runs": len(search), "trials": search["trial"].nunique(), "cpu_hours": search["cpu_s"].sum() / 3600,
            "gpu_minutes": search.groupby("trial")["gpu_s"].max().fillna(0).sum() / 60}


TRIAL_COLUMNS = ["trial", "what it changed", "M", "stopped", "transient", "tᶜʳⁱᵗ by M", "OOD rise after tᶜʳⁱᵗ"]


def trials_table(search: pd.DataFrame) -> pd.DataFrame:
    """One row per trial, in the order tried: what it changed, its M, where a stopped trial stopped (it is judged
    on its evaluations so far), in how many of its runs the rule found a transient, their t_crit (by M, and seed
    where it has several) and how far the OOD loss stays above its minimum after it (a range over those runs)."""
    if search.empty:
        return pd.DataFrame(columns=TRIAL_COLUMNS).set_index("trial")
    rows = []
    for trial, g in _completed(search).groupby("trial", sort=False):
        found = g[g["transient"].astype(bool)].sort_values(["M", "seed"])
        stopped = _stopped(g).any()
        seeds = g["seed"].nunique() > 1
        lo, hi = (found["ood_rise"].min(), found["ood_rise"].max()) if len(found) else (None, None)
        rows.append({
            "trial": trial, "what it changed": TRIALS[trial][0] if trial in TRIALS else g["change"].iloc[0],
            "M": ", ".join(diversity.label_M(M) for M in sorted(g["M"].astype(float).unique())),
            "stopped": (f"at step {int(g['steps_done'].min()):,} of {int(g['steps'].max()):,} on "
                        f"{'a CPU' if str(g['device'].iloc[0]).startswith('cpu') else 'a GPU'}") if stopped else "",
            "transient": f"{len(found)} of {len(g)} runs" + (" so far" if stopped else ""),
            "tᶜʳⁱᵗ by M": ", ".join(f"{diversity.label_M(r.M)}{f' (seed {r.seed})' if seeds else ''}: {r.t_crit:,}"
                                    for r in found.itertuples()) or MISSING,
            "OOD rise after tᶜʳⁱᵗ": MISSING if lo is None else f"{lo:.0%}" if round(lo, 2) == round(hi, 2)
            else f"{lo:.0%}–{hi:.0%}"})
    return pd.DataFrame(rows, columns=TRIAL_COLUMNS).set_index("trial")


def search_curves(search: pd.DataFrame) -> pd.DataFrame:
    """The runs of the table's rows as tidy curves (``diversity.curves`` plus a ``trial`` column): a finished
    row's from its committed run, a stopped row's from the committed stopped curves; others are left out."""
    frames, stopped = [], stopped_curves()
    for _, row in _completed(search).iterrows():
        M, seed = check_Ms([row["M"]])[0], int(row["seed"])
        if row["steps_done"] < row["steps"]:
            g = stopped[_same_run(stopped, row["trial"], M, seed)]
            if len(g):
                frames.append(g.assign(M=M, seed=seed))
            continue
        result = cache.current().committed_result(trial_config(row["trial"], M, seed))
        if result is not None:
            frames.append(diversity.curves({(M, seed): result}).assign(trial=row["trial"]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def search_figure(search: pd.DataFrame, curves: pd.DataFrame):
    """One panel per trial: each M's OOD loss over training (t_crit circled when the rule found a transient,
    dMMSE_M's OOD loss dashed, ridge's dotted); below, Δ to ridge on Gaussian tasks."""
    import matplotlib.pyplot as plt
    trials = list(dict.fromkeys(search["trial"]))
    colours = palette(curves["M"])
    fig, axes = plt.subplots(2, len(trials), figsize=(PAGE_WIDTH, 5.2), squeeze=False, sharex="col")
    for k, trial in enumerate(trials):
        top, bottom = axes[0, k], axes[1, k]
        for (M, seed), g in curves[curves["trial"] == trial].groupby(["M", "seed"]):
            first = seed == curves.loc[(curves["trial"] == trial) & (curves["M"] == M), "seed"].min()
            top.plot(g["step"], g["ood_loss"], color=colours[M], lw=1.4, label=diversity.label_M(M) if first else None)
            bottom.plot(g["step"], g["delta_ridge_ood"], color=colours[M], lw=1.4)
            top.axhline(g["ood_dmmse"].iloc[-1], color=colours[M], ls="--", lw=0.8)
            row = search[_same_run(search, trial, M, seed)].iloc[0]
            if row["transient"]:
                top.plot(row["t_crit"], row["min_ood_loss"], "o", mfc="none", mec=colours[M], ms=9, mew=1.8)
        top.axhline(curves["ood_ridge"].iloc[-1], color="crimson", ls=":", lw=1.4, label="ridge")
        g = _completed(search[search["trial"] == trial])
        top.set_title(trial if not _stopped(g).any() else f"{trial} (to step {int(g['steps_done'].min()):,})")
        for ax in (top, bottom):
            ax.set_xscale("log")
        bottom.set_yscale("log")
        bottom.set_xlabel("step")
    axes[0, 0].set_ylabel("OOD loss (○ tᶜʳⁱᵗ)")
    axes[1, 0].set_ylabel("Δ to ridge (Gaussian tasks)")
    widest = max(range(len(trials)), key=lambda k: len(axes[0, k].get_lines()))  # the panel with every M
    axes[0, -1].legend(*axes[0, widest].get_legend_handles_labels(), title="M", loc="center left",
                       bbox_to_anchor=(1.01, 0.5))
    return fig
