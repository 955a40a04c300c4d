"""Task diversity (Raventós et al.) and the transient ridge (Carroll et al.): runs over the number of
pretraining tasks M, read as tidy tables.

- ``configs(base, Ms, seeds)``: one training config per (M, seed), with nested task sets (the sweep is run by
  ``plateau_lib.engine.sweep.sweep``, in this process or on an executor);
- ``curves(results)``: per evaluation, the OOD loss (on Gaussian tasks, Carroll's q_∞), the
  in-distribution loss (on q_M), Δ to dMMSE_M and to ridge on both, and the baselines' losses;
- ``critical_steps(curves)``: t_M^crit, the step of minimal OOD loss (Carroll App. B.2);
- ``transient(steps, ood_loss, delta_ridge)``: the rule for a transient (a dip of the OOD loss to t_crit, a rise
  after it and Δ to ridge regrowing, each beyond 5% and three noise levels), used by every page and the search;
- ``switch_M(final)``: the smallest M whose final model is nearer ridge than dMMSE_M (the behavioural
  switch, *not* Raventós's data-scaling crossover M*, which needs two batch sizes);
- ``trajectory_rows(results)`` and ``predictor_rows(...)``: the rows of the joint trajectory PCA
  (``plateau_lib.engine.trajectory``), the models' predictions at each checkpoint and the ideal predictors', on
  the same fixed root-task sequences.

Δ here is per token and not divided by D (Hoogland's convention); the task-diversity page divides by D
(Raventós et al.'s Eq. 4).
M = ∞ is written ``math.inf`` in every table (the task's ``M=None``).
"""
from __future__ import annotations


import numpy as np
import pandas as pd
import torch

from plateau_lib.engine import cache
from plateau_lib.engine.tasks import make_task
from plateau_lib.engine.utils import resolve_device
from plateau_lib.icl import baselines, data

from plateau_lib.icl.development import llc_data
from plateau_lib.icl.presets import check_Ms, INF
from plateau_lib.llc import SGLDConfig, calibration_sweep, estimate_llc
from plateau_lib.llc.calibration import FLAT_TOL, chosen_setting, mark_choice
from plateau_lib.llc.callbacks import llc_at_run_checkpoints, llc_row
from plateau_lib.llc.result import traces_table


def curves(results: dict) -> pd.DataFrame:
    """Tidy curves of ``{(M, seed): TrainResult}``: step, M, seed, ``ood_loss`` (Gaussian tasks) and
    ``id_loss`` (q_M) with the baselines' ``*_ridge``/``*_dmmse`` losses, and Δ of the model to dMMSE_M and
    to ridge on q_M (``delta_*``) and on Gaussian tasks (``delta_*_ood``). For M = ∞ dMMSE is ridge."""
    frames = []
    for (M, seed), result in results.items():
        m = result.metrics
        if M == INF:
            f = pd.DataFrame({"ood_loss": m["loss"], "ood_ridge": m["loss_ridge"], "ood_dmmse": m["loss_ridge"],
                              "id_loss": m["loss"], "id_ridge": m["loss_ridge"], "id_dmmse": m["loss_ridge"],
                              "delta_dmmse": m["delta_ridge"], "delta_ridge": m["delta_ridge"],
                              "delta_dmmse_ood": m["delta_ridge"], "delta_ridge_ood": m["delta_ridge"]})
        else:
            f = pd.DataFrame({"ood_loss": m["loss_true"], "ood_ridge": m["loss_ridge_true"],
                              "ood_dmmse": m["loss_dmmse_true"], "id_loss": m["loss"], "id_ridge": m["loss_ridge"],
                              "id_dmmse": m["loss_dmmse"], "delta_dmmse": m["delta_dmmse"],
                              "delta_ridge": m["delta_ridge"], "delta_dmmse_ood": m["delta_dmmse_true"],
                              "delta_ridge_ood": m["delta_ridge_true"]})
        f.insert(0, "seed", seed)
        f.insert(0, "M", M)
        f.insert(0, "step", m["step"].to_numpy())
        frames.append(f)
    return pd.concat(frames, ignore_index=True).sort_values(["M", "seed", "step"], ignore_index=True)


def critical_steps(curves: pd.DataFrame) -> pd.DataFrame:
    """t_M^crit per (M, seed): the evaluated step of minimal OOD loss, with that loss and the final one
    (a t_crit before the last step with a higher final loss is the transient's signature)."""
    rows = []
    for (M, seed), g in curves.groupby(["M", "seed"], sort=True):
        g = g.sort_values("step")
        i = int(np.argmin(g["ood_loss"].to_numpy()))
        rows.append({"M": M, "seed": seed, "t_crit": int(g["step"].iloc[i]), "min_ood_loss": g["ood_loss"].iloc[i],
                     "final_ood_loss": g["ood_loss"].iloc[-1], "last_step": int(g["step"].iloc[-1]),
                     "rise_after_min": g["ood_loss"].iloc[-1] - g["ood_loss"].iloc[i]})
    return pd.DataFrame(rows)


# The rule for a transient (Carroll's dip toward ridge and return to dMMSE_M), one for every sweep and the search.
RISE = 0.05     # the OOD loss's rise after t_crit, and Δ to ridge's regrowth after its minimum (relative)
WINDOW = 5      # running-median window (evaluations) before the rule is applied
NOISE_SIGMAS = 3  # a rise must also exceed this many noise levels of the raw curve: noise is not a transient


def _smooth(values, window: int = WINDOW) -> np.ndarray:
    return pd.Series(np.asarray(values, float)).rolling(window, center=True, min_periods=1).median().to_numpy()


def noise_level(values) -> float:
    """A robust standard deviation of a curve's evaluation noise: the scaled median absolute deviation of its
    successive differences (a smooth trend barely moves it; i.i.d. noise of sd σ gives about σ)."""
    d = np.diff(np.asarray(values, float))
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2))


def transient(steps, ood_loss, delta_ridge, rise: float = RISE, window: int = WINDOW) -> dict:
    """Judge one curve. After a running median over ``window`` evaluations: t_crit is the step of least OOD
    loss, reached by a *fall* (before it the loss was more than ``rise`` above it: a model that goes straight to
    dMMSE_M has its least OOD loss at the start and no dip); the OOD loss *rises* if every evaluation of the last fifth lies more than ``rise`` (relative) and more
    than ``NOISE_SIGMAS`` noise levels (``noise_level``) above that minimum; Δ to ridge (Gaussian tasks)
    *regrows* likewise after its own minimum. A transient is all three, with t_crit before the last fifth. Returns
    the numbers and the verdict ``transient`` (bool)."""
    steps = np.asarray(steps)
    if not len(steps) == len(ood_loss) == len(delta_ridge) or len(steps) < 2 * window:
        raise ValueError(f"parameter 'steps', 'ood_loss' and 'delta_ridge' must have one equal length >= {2 * window}, "
                         f"got {len(steps)}, {len(ood_loss)}, {len(delta_ridge)}")
    ood, ridge = _smooth(ood_loss, window), _smooth(delta_ridge, window)
    tail = max(1, len(steps) // 5)
    i, j = int(np.argmin(ood)), int(np.argmin(ridge))

    def grows(curve, k, raw):
        above = curve[-tail:].min() - curve[k]
        return float(above / curve[k]), bool(above / curve[k] > rise and above > NOISE_SIGMAS * noise_level(raw))
    ood_rise, ood_rises = grows(ood, i, ood_loss)
    ridge_regrowth, ridge_regrows = grows(ridge, j, delta_ridge)
    fell = ood[: i + 1].max() - ood[i]  # a dip: the OOD loss first fell to its minimum (low M go straight to dMMSE_M)
    dipped = bool(fell / ood[i] > rise and fell > NOISE_SIGMAS * noise_level(ood_loss))
    return {"t_crit": int(steps[i]), "min_ood_loss": float(ood[i]), "final_ood_loss": float(ood[-1]),
            "ood_rise": ood_rise, "ridge_min_step": int(steps[j]), "ridge_regrowth": ridge_regrowth,
            "ood_fall": float(fell / ood[i]), "transient": bool(dipped and i < len(steps) - tail and ood_rises and ridge_regrows)}


def final(curves: pd.DataFrame) -> pd.DataFrame:
    """The last evaluation of every (M, seed)."""
    return curves.sort_values("step").groupby(["M", "seed"], sort=True).tail(1).sort_values(["M", "seed"],
                                                                                           ignore_index=True)


def switch_M(final_table: pd.DataFrame):
    """The behavioural switch: the smallest finite M from which on every final model (seed-mean) is nearer
    ridge than dMMSE_M in function space on q_M (Δ_ridge < Δ_dMMSE); None if no M switches."""
    mean = final_table[final_table["M"] != INF].groupby("M")[["delta_dmmse", "delta_ridge"]].mean().sort_index()
    nearer_ridge = (mean["delta_ridge"] < mean["delta_dmmse"]).to_numpy()
    for i, M in enumerate(mean.index):
        if nearer_ridge[i:].all():
            return int(M)
    return None


def trajectory_rows(results: dict) -> tuple[dict, dict]:
    """``({label: (T, B·K) predictions on the root-task probe}, {label: (T,) steps})`` for the joint PCA."""
    rows, steps = {}, {}
    for label, result in results.items():
        if "pred_root" not in result.arrays:
            raise ValueError(f"run {label!r} kept no root-task predictions: train it with task_kwargs n_root > 0")
        pred = np.asarray(result.arrays["pred_root"], dtype=np.float64)
        rows[label], steps[label] = pred.reshape(pred.shape[0], -1), np.asarray(result.arrays["step"])
    return rows, steps


def predictor_rows(task_kwargs: dict, Ms) -> dict:
    """The ideal predictors on the same root-task probe as the runs (one row each): ``("dMMSE", M)`` for every
    finite M, and ``("ridge", inf)``. Built from the probe's seed, never fitted."""
    D, K, noise_var = task_kwargs["D"], task_kwargs["K"], task_kwargs["noise_var"]
    task_seed, n = task_kwargs.get("task_seed", 0), task_kwargs.get("n_root", 0)
    xs, ys, _ = data.root_probe(n, K, D, noise_var, task_seed)
    rows = {("ridge", INF): baselines.ridge_predict(xs, ys, noise_var).reshape(-1).double().numpy()}
    for M in check_Ms(Ms):
        if M != INF:
            tasks = data.task_set(M, D, task_seed)
            rows[("dMMSE", M)] = baselines.dmmse_predict(xs, ys, tasks, noise_var).reshape(-1).double().numpy()
    return rows


def label_M(M) -> str:
    """M for legends and tables: '∞' or the integer."""
    return "∞" if M == INF else str(int(M))


# ---- LLC against M (Carroll et al. Fig. 3), at the end of training --------------------------------------

LLC_KIND, CALIBRATION_KIND = "icl_llc_vs_M", "icl_llc_calibration"
LLC_VERSION = 1


def table_spec(configs: dict, **settings) -> dict:
    """What a stored LLC table depends on: each run (its cache key) and the SGLD settings."""
    return {"runs": {f"{label_M(M)}/{s}": c for (M, s), c in configs.items()}, **settings, "version": LLC_VERSION}


def final_model(cfg):
    """(model of ``cfg`` with its trained final weights, its task, the device): trained if not cached locally."""
    model, _ = cache.current().trained_model(cfg)
    return model, cfg.make_task(), resolve_device(cfg.device)


def llc_table(configs: dict, llc: SGLDConfig) -> cache.StoredTable:
    """The stored λ̂-against-M table of ``configs`` at the SGLD setting ``llc``."""
    return cache.StoredTable(LLC_KIND, table_spec(configs, llc=llc))


def load_llc(configs: dict, llc: SGLDConfig):
    """The stored LLC-vs-M table and its meta (committed first, then local), or None; never computes."""
    found = llc_table(configs, llc).load()
    return None if found is None else (found[0]["llc"], found[1])


def llc_vs_M(configs: dict, llc: SGLDConfig, use_cache: bool = True, progress: bool = True,
             deadline: float | None = None) -> tuple[pd.DataFrame, dict]:
    """λ̂ of every run's final weights on data from its own training distribution q_M, one SGLD setting ``llc``
    for every M (its ``n_data`` fixed sequences, ``development.llc_data``).
    Returns (one row per (M, seed) with ``init_loss``, the model's loss on q_M; meta). Each row is kept as
    soon as it is estimated, so an interrupted table resumes (past ``deadline`` it stops there). Trains what is not
    cached locally."""
    def row(runs):
        (M, seed), = runs
        cfg = configs[(M, seed)]
        model, task, device = final_model(cfg)
        res = estimate_llc(model, task.loss, llc_data(cfg, llc.n_data, llc.seed, device), llc, device=str(device))
        return pd.DataFrame([{"M": M, "seed": seed, **llc_row(cfg.steps, res)}])

    def compute():
        done = stored.build(configs, row, on=("M", "seed"), progress=progress, desc="λ̂ per M", deadline=deadline)
        return {"llc": done}, {"llc_wall_s": round(float(done["elapsed_s"].sum()), 1), "torch": torch.__version__,
                               "device": str(resolve_device(next(iter(configs.values())).device))}

    stored = llc_table(configs, llc)
    tables, meta = stored.get(compute, use_cache)
    return tables["llc"], meta


def calibration_table(configs: dict, llc: SGLDConfig, grid: dict) -> cache.StoredTable:
    """The stored SGLD calibration on the calibrated runs of ``configs`` (``calibration_runs``)."""
    return cache.StoredTable(CALIBRATION_KIND, table_spec(calibration_runs(configs), llc=llc, grid=grid))


def load_calibration(configs: dict, llc: SGLDConfig, grid: dict):
    """The stored calibration (table, traces, meta) of these runs, or None; never computes."""
    found = calibration_table(configs, llc, grid).load()
    return None if found is None else (found[0]["table"], found[0]["traces"], found[1])


LLC_TRAINING_KIND = "icl_llc_over_training"


def llc_over_training_table(runs: dict, llc: SGLDConfig) -> cache.StoredTable:
    """The stored λ̂-over-training table of ``runs`` at the SGLD setting ``llc``."""
    return cache.StoredTable(LLC_TRAINING_KIND, table_spec(runs, llc=llc))


def load_llc_over_training(runs: dict, llc: SGLDConfig):
    """The stored λ̂-over-training table of ``runs`` and its meta (committed first, then local), or None."""
    found = llc_over_training_table(runs, llc).load()
    return None if found is None else (found[0]["llc"], found[1])


def llc_training_rows(cfg, llc: SGLDConfig) -> cache.StoredTable:
    """One run's λ̂-over-training rows, kept as they are estimated (keyed by the run and the SGLD setting only,
    so processes that share the runs out fill the same rows)."""
    return cache.StoredTable(LLC_TRAINING_KIND, {"run": cfg, "llc": llc, "version": LLC_VERSION})


def llc_over_training(runs: dict, llc: SGLDConfig, use_cache: bool = True, progress: bool = True, only=None):
    """λ̂ over training: for each run ``{(M, seed): cfg}`` (with ``checkpoint_steps``), λ̂ at every checkpoint
    and at the final weights, on data from its own q_M, one SGLD setting ``llc`` for all (the sweep's, so the
    points compare with λ̂ against M). Returns (tidy rows: M, seed, step, llc_mean, llc_se, init_loss, ...;
    meta), stored; each run's rows are kept as they are estimated, so an interrupted table resumes. ``only``:
    estimate just these (M, seed) (e.g. half the runs in each of two processes) and take the others' kept rows;
    returns None while any run's rows are incomplete."""
    if only is not None and not set(map(tuple, only)) <= set(runs):
        raise ValueError(f"parameter 'only' names runs not in 'runs': {sorted(set(map(tuple, only)) - set(runs))}; "
                         f"allowed: {sorted(runs)}")
    for (M, seed), cfg in runs.items():
        if not cfg.checkpoint_steps:
            raise ValueError(f"run M = {label_M(M)}, seed {seed} has no checkpoint_steps: λ̂ over training needs "
                             "checkpoints")
    stored = llc_over_training_table(runs, llc)
    if use_cache and (found := stored.load()) is not None:
        return found[0]["llc"], found[1]
    frames, parts, complete = [], [], True
    for (M, seed), cfg in runs.items():
        parts.append(llc_training_rows(cfg, llc))
        if only is not None and (M, seed) not in only:
            rows = parts[-1].rows()
            complete &= not rows.empty and {*cfg.checkpoint_steps, cfg.steps} <= set(rows["step"].astype(int))
            frames.append(rows.assign(M=M, seed=seed))
            continue
        device = resolve_device(cfg.device)
        data_ = llc_data(cfg, llc.n_data, llc.seed, device)
        rows, _, _ = llc_at_run_checkpoints(cfg, cfg.make_task().loss, data_, parts[-1], llc, with_final=True,
                                            progress=progress, desc=f"λ̂ over training, M = {label_M(M)}, seed {seed}",
                                            device=str(device))
        frames.append(rows.assign(M=M, seed=seed))
    if not complete:
        return None
    table = pd.concat(frames, ignore_index=True)
    meta = {"llc_wall_s": round(float(table["elapsed_s"].sum()), 1), "torch": torch.__version__,
            "device": str(resolve_device(next(iter(runs.values())).device))}
    stored.save({"llc": table}, meta)
    for part in parts:
        part.drop_rows()
    return load_llc_over_training(runs, llc)


def llc_calibration(configs: dict, llc: SGLDConfig, grid: dict, use_cache: bool = True, progress: bool = True):
    """The SGLD calibration on these models (``llc.calibration.calibration_sweep`` over ``grid``'s epsilons,
    nbetas and gammas, the rest of ``llc`` fixed) for each run of ``configs`` (pick a few M). Returns
    (table: one row per (M, seed, cell); traces: λ̂ running mean per draw, tidy; meta), stored."""
    def compute():
        tables, traces = [], []
        for (M, seed), cfg in configs.items():
            model, task, device = final_model(cfg)
            table, results = calibration_sweep(model, task.loss, llc_data(cfg, llc.n_data, llc.seed, device), llc,
                                               progress=progress, device=str(device), **grid)
            tables.append(table.assign(M=M, seed=seed))
            traces.append(traces_table(results).assign(M=M, seed=seed))
        table, trace = pd.concat(tables, ignore_index=True), pd.concat(traces, ignore_index=True)
        return {"table": table, "traces": trace}, {"wall_s": round(float(table["elapsed_s"].sum()), 1),
                                                    "torch": torch.__version__}

    found, meta = cache.StoredTable(CALIBRATION_KIND, table_spec(configs, llc=llc, grid=grid)).get(compute, use_cache)
    return found["table"], found["traces"], meta


def ideal_losses(task_kwargs: dict, Ms, n: int = 8192, seed: int = 0) -> pd.DataFrame:
    """The two ideal predictors of every M (Carroll Fig. 3; Raventós Fig. 2): the loss of dMMSE_M and of ridge
    on q_M (``loss_*``) and on Gaussian tasks (``ood_*``), and Δ(dMMSE_M, ridge) on each (``delta_dmmse_ridge``,
    ``delta_dmmse_ridge_ood``), on n seeded sequences of each distribution (per token, not divided by D)."""
    rows = []
    gaussian = make_task("icl_regression", **{**task_kwargs, "M": None})
    g_xs, g_ys, _ = gaussian.sample(n, torch.Generator().manual_seed(seed + 1))
    g_ridge = baselines.ridge_predict(g_xs, g_ys, gaussian.noise_var)
    for M in check_Ms(Ms):
        task = make_task("icl_regression", **{**task_kwargs, "M": None if M == INF else M})
        xs, ys, _ = task.sample(n, torch.Generator().manual_seed(seed))
        ridge = baselines.ridge_predict(xs, ys, task.noise_var)
        dmmse = ridge if M == INF else baselines.dmmse_predict(xs, ys, task.tasks(), task.noise_var)
        g_dmmse = g_ridge if M == INF else baselines.dmmse_predict(g_xs, g_ys, task.tasks(), task.noise_var)
        rows.append({"M": M, "loss_dmmse": float((dmmse - ys).square().mean()),
                     "loss_ridge": float((ridge - ys).square().mean()),
                     "ood_dmmse": float((g_dmmse - g_ys).square().mean()),
                     "ood_ridge": float((g_ridge - g_ys).square().mean()),
                     "delta_dmmse_ridge": float(baselines.delta(dmmse, ridge)),
                     "delta_dmmse_ridge_ood": float(baselines.delta(g_dmmse, g_ridge))})
    return pd.DataFrame(rows)


CALIBRATION_MS = (2, 8, INF)  # the runs the SGLD setting is calibrated on (low, intermediate, ∞); kept if present


def chosen_epsilon(table: pd.DataFrame, flat_tolerance: float = FLAT_TOL) -> float | None:
    """The step size ε the book's one step-size rule (``llc.calibration.mark_choice``, flat at every calibrated M)
    picks from the sweep's calibration ``table``; None if none qualifies. Past it, λ̂ grows with ε: the chains
    leave the local basin."""
    chosen = chosen_setting(mark_choice(table, over="M", flat_tolerance=flat_tolerance))
    return None if chosen is None else chosen["epsilon"]


def calibration_runs(configs: dict) -> dict:
    """The runs of ``configs`` at ``CALIBRATION_MS`` (first seed)."""
    first = min(s for _, s in configs)
    return {(M, s): c for (M, s), c in configs.items() if M in CALIBRATION_MS and s == first}
