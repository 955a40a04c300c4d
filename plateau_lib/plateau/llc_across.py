"""λ̂ across the MWS plateau: the LLC at checkpoints of the moving-window-sum run, beside its loss, accuracy,
cosine and APM, the SGLD settings calibrated on the same model, and the λ̂ before, during and after the plateau.

SGLD runs on a fixed set of task sequences with the LLC page's loss (cross-entropy over every next-token position,
``transformer.sequence_loss``), with the same seed at every checkpoint. Each checkpoint's row is kept as soon as it
is estimated, so an interrupted run resumes at the next checkpoint. The finished tables (λ̂, metrics, calibration)
are stored tables (``cache.StoredTable``), committed with ``--commit``.

    OMP_NUM_THREADS=1 python -m plateau_lib plateau-llc --preset cpu_long --commit   # the committed CPU run
    python -m plateau_lib plateau-llc --preset paper --device cuda                   # the paper's model, on a GPU
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from plateau_lib.book.verdicts import listed
from plateau_lib.engine import cache, stages
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.utils import resolve_device
from plateau_lib.llc.calibration import calibration_sweep, mark_choice
from plateau_lib.llc.callbacks import llc_at_run_checkpoints
from plateau_lib.llc.config import SGLDConfig
from plateau_lib.plateau.llc_transformer import sequence_loss, sgld_sequences
from plateau_lib.plateau.milestones import milestones as run_milestones, value_at
from plateau_lib.plateau.model import GPT
from plateau_lib.plateau.presets import plateau_llc as preset_runs, PLATEAU_LLC_CALIBRATION

KIND = "plateau_llc"
CALIBRATION_KIND = "plateau_llc_calibration"
VERSION = 1
METRIC_COLUMNS = ["step", "loss", "acc", "acc_first", "acc_rest", "cosine", "rho", "apm"]
SLOPE_FRACTION = 0.5    # GP stages: |dλ̂/d ln(step + 1)| below this fraction of λ̂'s range is a candidate
GP_MIN_STEP, GP_MERGE_RATIO = 10, 1.5


# ---- λ̂ at the checkpoints of one run ------------------------------------------------------------------------

def llc_curve(cfg: TrainConfig, sgld: SGLDConfig, use_cache: bool = True, progress: bool = False, device: str = "cpu",
              stack: int = 1, deadline: float | None = None):
    """λ̂ at every checkpoint of ``cfg`` (one SGLD seed for all, chains on ``device``), resumable row by row (past
    ``deadline`` it stops once its rows are kept); ``stack`` checkpoints per batched computation
    (``llc_over_checkpoints``; worth it on a GPU only).
    Returns ``(llc table, TrainResult)``."""
    rows = curve_rows(cfg, sgld)
    if not use_cache:
        rows.drop_rows()
    llc, run, _ = llc_at_run_checkpoints(cfg, sequence_loss, sgld_sequences(cfg, sgld.n_data), rows, sgld,
                                         use_cache=use_cache, progress=progress, stack=stack, deadline=deadline,
                                         warn=False, device=device)
    return llc, run


def curve_rows(cfg: TrainConfig, sgld: SGLDConfig) -> cache.StoredTable:
    """One run's λ̂ rows while they are being built."""
    return cache.StoredTable(KIND, {"train": cfg, "sgld": sgld, "version": VERSION})


def llc_table(runs: dict, sgld: SGLDConfig) -> cache.StoredTable:
    """The stored λ̂ and metrics of a set of runs ``{seed: TrainConfig}`` at the SGLD settings ``sgld``."""
    return cache.StoredTable(KIND, {"runs": {str(s): cfg for s, cfg in runs.items()}, "sgld": sgld, "version": VERSION})


def plateau_llc(runs: dict, sgld: SGLDConfig, use_cache: bool = True, progress: bool = False, device: str = "cpu",
                stack: int = 1, deadline: float | None = None) -> tuple[dict, dict]:
    """λ̂ and the training metrics of every run ``{seed: TrainConfig}``: ``({"llc": ..., "metrics": ...}, meta)``,
    both tidy with a ``seed`` column. Loaded when stored (committed first), else computed (SGLD on ``device``,
    which is provenance, not part of the key) and stored locally; past ``deadline`` the λ̂ rows stop once kept."""
    def compute():
        llc, metrics, train_s = [], [], 0.0
        for seed, cfg in runs.items():
            curve, run = llc_curve(cfg, sgld, use_cache, progress, device, stack, deadline)
            llc.append(curve.assign(seed=seed))
            metrics.append(run.metrics[METRIC_COLUMNS].assign(seed=seed))
            train_s += float(run.meta.get("wall_time_s", 0.0))
        tables = {"llc": pd.concat(llc, ignore_index=True), "metrics": pd.concat(metrics, ignore_index=True)}
        first = next(iter(runs.values()))
        return tables, {"config": first.to_dict(), "seeds": list(runs), "device": str(resolve_device(device)),
                        "train_wall_s": round(train_s, 1),
                        "llc_wall_s": round(float(tables["llc"]["elapsed_s"].sum()), 1), "torch": torch.__version__}

    found = llc_table(runs, sgld).get(compute, use_cache)
    for cfg in runs.values():
        curve_rows(cfg, sgld).drop_rows()
    return found


# ---- calibration on this model ----------------------------------------------------------------------------

def calibration_steps(cfg: TrainConfig, metrics: pd.DataFrame) -> list[int]:
    """The checkpoints of ``cfg`` nearest the middle of its plateau (from ``metrics``) and its last one."""
    summary = stages.plateau_summary(metrics)
    middle = (summary["partial_step"] + summary["jump_step"]) / 2 if summary["jump_step"] else cfg.steps / 2
    ckpts = np.asarray(sorted(cfg.checkpoint_steps))
    return sorted({int(ckpts[np.abs(ckpts - middle).argmin()]), int(ckpts[-1])})


def calibration_table(cfg: TrainConfig, grid: dict, sgld: SGLDConfig) -> cache.StoredTable:
    """The stored calibration of run ``cfg`` over ``grid`` (the other SGLD settings from ``sgld``)."""
    unswept = {k: v for k, v in sgld.key_dict().items() if k not in ("epsilon", "nbeta", "gamma", "n_data")}
    return cache.StoredTable(CALIBRATION_KIND, {"run": cfg, "grid": grid, "sgld": unswept, "n_data": sgld.n_data,
                                                "version": VERSION})


def calibrate(cfg: TrainConfig, grid: dict, sgld: SGLDConfig, use_cache: bool = True, progress: bool = False,
              device: str = "cpu"):
    """The (ε, nβ, γ) sweep of ``calibration_sweep`` at ``calibration_steps`` of run ``cfg`` (the other SGLD
    settings from ``sgld``, chains on ``device``): ``(table, meta)``, one row per (checkpoint, cell), with
    ``chosen`` marking the setting of the one step-size rule (``llc.calibration.mark_choice``). Stored and loaded like ``plateau_llc``."""
    def compute():
        run, ckpts = cache.current().trained_checkpoints(cfg, use_cache, progress)
        data, model = sgld_sequences(cfg, sgld.n_data), GPT(cfg.model_config())
        tables = []
        for step in calibration_steps(cfg, run.metrics):
            model.load_state_dict(torch.load(ckpts[step], map_location="cpu", weights_only=True))
            table, _ = calibration_sweep(model, sequence_loss, data, sgld, progress=progress, device=device, **grid)
            tables.append(table.assign(step=step))
        table = mark_choice(pd.concat(tables, ignore_index=True), over="step")
        return {"calibration": table}, {"config": cfg.to_dict(), "device": device,
                                        "wall_s": round(float(table["elapsed_s"].sum()), 1), "torch": torch.__version__}

    found, meta = calibration_table(cfg, grid, sgld).get(compute, use_cache)
    return found["calibration"], meta


# ---- λ̂ before, during and after the plateau; stages on λ̂ ---------------------------------------------------

def nearest(llc: pd.DataFrame, step: float) -> pd.Series:
    """The row of ``llc`` at the checkpoint nearest ``step``."""
    return llc.iloc[int((llc["step"] - step).abs().argmin())]


def llc_at(llc: pd.DataFrame, seed: int, step: float) -> float:
    """Seed ``seed``'s λ̂ at its checkpoint nearest ``step`` (NaN without that seed)."""
    curve = llc[llc["seed"] == seed]
    return float(nearest(curve, step)["llc_mean"]) if len(curve) else float("nan")


def calibration_llc(calibration: pd.DataFrame, step: int, nbeta: float) -> list[float]:
    """The calibration grid's λ̂ at checkpoint ``step`` and ``nbeta``, one per ε from the smallest up."""
    rows = calibration[(calibration["step"] == step) & (calibration["nbeta"] == nbeta)].sort_values("epsilon")
    return [float(v) for v in rows["llc_final"]]


def phase_table(llc: pd.DataFrame, milestones: pd.DataFrame) -> pd.DataFrame:
    """λ̂ ± SE per seed before the plateau (the checkpoint nearest half the partial step), during it (nearest
    the middle between the partial and the jump step) and after the jump (the last checkpoint). A run without
    a partial solution or a jump has NaN there."""
    rows = []
    for _, m in milestones.iterrows():
        curve = llc[llc["seed"] == m["seed"]]
        partial, jump = m["partial_step"], m["jump_step"]
        known = pd.notna(partial) and pd.notna(jump)
        targets = {"before": partial / 2 if pd.notna(partial) else np.nan,
                   "during": (partial + jump) / 2 if known else np.nan, "after": float(curve["step"].max())}
        for phase, target in targets.items():
            row = nearest(curve, target) if np.isfinite(target) else None
            rows.append({"seed": int(m["seed"]), "phase": phase,
                         "step": int(row["step"]) if row is not None else np.nan,
                         "llc_mean": float(row["llc_mean"]) if row is not None else np.nan,
                         "llc_se": float(row["llc_se"]) if row is not None else np.nan})
    return pd.DataFrame(rows)


def phase_wide(phases: pd.DataFrame) -> pd.DataFrame:
    """``phase_table`` as one row per seed: "λ̂ ± SE (step)" before, during and after."""
    text = phases.apply(lambda r: "—" if pd.isna(r["llc_mean"]) else
                        f"{r['llc_mean']:.1f} ± {r['llc_se']:.1f} (step {int(r['step'])})", axis=1)
    return phases.assign(value=text).pivot(index="seed", columns="phase", values="value")[["before", "during",
                                                                                          "after"]]


def plateau_changes(llc: pd.DataFrame, metrics: pd.DataFrame, milestones: pd.DataFrame) -> pd.DataFrame:
    """Per seed, what moves across the plateau and what moves at the jump: between the first checkpoint at or
    after the partial step and the last one before the jump, and from there to the last checkpoint, the change of
    λ̂ (in its combined standard errors too), of the APM and of the loss (at the evaluation nearest each
    checkpoint). NaN for a run without a partial solution or a jump."""
    rows = []
    for _, m in milestones.iterrows():
        curve, run = llc[llc["seed"] == m["seed"]], metrics[metrics["seed"] == m["seed"]]
        row = {"seed": int(m["seed"])}
        inside = curve[(curve["step"] >= m["partial_step"]) & (curve["step"] < m["jump_step"])]
        if len(inside) >= 2:
            points = {"start": inside.iloc[0], "end": inside.iloc[-1], "final": curve.iloc[-1]}
            for a, b, label in (("start", "end", "plateau"), ("end", "final", "jump")):
                lo, hi = points[a], points[b]
                row[f"{label}: steps"] = f"{int(lo['step'])} → {int(hi['step'])}"
                row[f"{label}: Δλ̂"] = hi["llc_mean"] - lo["llc_mean"]
                row[f"{label}: Δλ̂ / SE"] = row[f"{label}: Δλ̂"] / np.hypot(lo["llc_se"], hi["llc_se"])
                for col in ("apm", "loss"):
                    row[f"{label}: Δ{col.upper() if col == 'apm' else col}"] = (
                        value_at(run, hi["step"], col) - value_at(run, lo["step"], col))
        rows.append(row)
    return pd.DataFrame(rows)


def llc_stages(llc: pd.DataFrame) -> dict:
    """``stages.gp_stage_boundaries`` on each seed's λ̂ curve, with the slope tolerance a fraction
    ``SLOPE_FRACTION`` of that curve's range (λ̂'s scale depends on nβ, so a fixed tolerance would not carry)."""
    out = {}
    for seed, curve in llc.groupby("seed"):
        values = curve["llc_mean"].to_numpy(dtype=float)
        tol = max(SLOPE_FRACTION * float(np.ptp(values)), 1e-9)
        out[seed] = stages.gp_stage_boundaries(curve["step"].to_numpy(), values, slope_tol=tol,
                                               min_step=GP_MIN_STEP, merge_ratio=GP_MERGE_RATIO)
    return out


def boundary_table(found: dict, milestones: pd.DataFrame) -> pd.DataFrame:
    """Per seed: the partial and jump steps, the GP boundaries on λ̂, the boundary nearest the jump with its
    distance in steps (boundary - jump), and the checkpoint interval where λ̂ rises fastest (per step) with
    whether the jump step falls inside it (ends included)."""
    rows = []
    for _, m in milestones.iterrows():
        seed, stages_found, jump = int(m["seed"]), found[m["seed"]], m["jump_step"]
        b = stages_found.boundaries
        near = min(b, key=lambda s: abs(s - jump)) if b and pd.notna(jump) else None
        i = int(np.argmax(np.diff(stages_found.values) / np.diff(stages_found.steps)))
        lo, hi = int(stages_found.steps[i]), int(stages_found.steps[i + 1])
        rows.append({"seed": seed, "partial step": m["partial_step"], "jump step": jump,
                     "GP boundaries on λ̂": ", ".join(map(str, b)) or "none",
                     "nearest to the jump": near if near is not None else np.nan,
                     "boundary − jump (steps)": near - jump if near is not None else np.nan,
                     "steepest λ̂ rise": f"{lo} → {hi}",
                     "jump inside it": bool(pd.notna(jump) and lo <= jump <= hi)})
    table = pd.DataFrame(rows)
    return table.astype({c: "Int64" for c in ("partial step", "jump step", "nearest to the jump",
                                               "boundary − jump (steps)")})


@dataclass
class PlateauLLC:
    """What the page reads from one set of tables: milestones per seed, the GP stages of λ̂, λ̂ per phase and the
    boundaries against the jump."""
    tables: dict
    meta: dict
    milestones: pd.DataFrame
    found: dict
    phases: pd.DataFrame
    boundaries: pd.DataFrame
    changes: pd.DataFrame


def analyse(tables: dict, meta: dict) -> PlateauLLC:
    """``milestones.milestones`` of the metrics, ``llc_stages``, ``phase_table``, ``boundary_table`` and
    ``plateau_changes``."""
    stones = run_milestones(tables["metrics"])
    found = llc_stages(tables["llc"])
    return PlateauLLC(tables, meta, stones, found, phase_table(tables["llc"], stones), boundary_table(found, stones),
                    plateau_changes(tables["llc"], tables["metrics"], stones))


def stored(preset: str = "cpu_long") -> tuple[PlateauLLC, pd.DataFrame, dict] | None:
    """The stored run of ``preset``, its calibration table and the calibration's meta (committed first, then
    local; never computed), or None."""
    runs, sgld = preset_runs(preset)
    found = llc_table(runs, sgld).load()
    calibration = calibration_table(runs[min(runs)], PLATEAU_LLC_CALIBRATION, sgld).load()
    if found is None or calibration is None:
        return None
    return analyse(*found), calibration[0]["calibration"], calibration[1]


RISE_SES = 3  # λ̂ moved across the plateau where its change exceeds this many standard errors


def answers(result: PlateauLLC) -> pd.DataFrame:
    """The page's four questions (columns question, answer), each judged seed by seed on ``result``: does λ̂ stay
    within ``RISE_SES`` standard errors on the plateau, does it rise beyond them with the APM, does its steepest
    rise (per step) hold the jump, and is a GP boundary of λ̂ inside the checkpoint interval that holds the jump."""
    changes, bounds, llc = result.changes.set_index("seed"), result.boundaries.set_index("seed"), result.tables["llc"]
    seeds = list(bounds.index)

    def at_jump(seed) -> bool:
        steps, jump = llc.loc[llc["seed"] == seed, "step"], bounds.loc[seed, "jump step"]
        near = bounds.loc[seed, "nearest to the jump"]
        if pd.isna(jump) or pd.isna(near):
            return False
        return bool(steps[steps <= jump].max() <= near <= steps[steps >= jump].min())

    held = {"Does λ̂ stay flat on the plateau, as the loss does?":
                [abs(changes.loc[s, "plateau: Δλ̂ / SE"]) <= RISE_SES for s in seeds],
            "Does λ̂ rise with the APM before the loss drops?":
                [changes.loc[s, "plateau: ΔAPM"] > 0 and changes.loc[s, "plateau: Δλ̂ / SE"] > RISE_SES for s in seeds],
            "Does λ̂ rise fastest where the loss jumps?": [bool(bounds.loc[s, "jump inside it"]) for s in seeds],
            "Is there a GP stage boundary of λ̂ at the jump?": [at_jump(s) for s in seeds]}
    return pd.DataFrame({"question": list(held), "answer": [seed_answer(sum(v), len(v)) for v in held.values()]})


def seed_answer(yes: int, seeds: int) -> str:
    """"yes, on all 3 seeds", "no, on all 3 seeds" or "yes on 2 of 3 seeds, no on 1"."""
    if yes in (0, seeds):
        return f"{'yes' if yes else 'no'}, on {'all ' if seeds > 1 else ''}{seeds} seed{'s' * (seeds > 1)}"
    return f"yes on {yes} of {seeds} seeds, no on {seeds - yes}"


PROSE_FORMATS = {"loss_drop": "{:.2f}", "apm_rise": "{:.2f}", "plateau_se": "{:.0f}", "during": "{:.0f}",
                 "jump_rise": "{:.0f}", "jump_se": "{:.0f}", "after": "{:.0f}", "seed0_after_jump": "{:.0f}",
                 "seed0_end": "{:.0f}"}  # the others: "{:.1f}"


def prose_numbers(stored: tuple | None, early: tuple = (75, 150)) -> dict:
    """The numbers the page's prose gives from the long run (``stored``: what ``stored`` returns; empty lists
    without it), per seed: the loss's fall, λ̂'s rise (and in standard errors) and the APM's rise across the plateau
    (``plateau_changes``), λ̂ before, during and after it (``phase_table``), λ̂'s rise at the jump (and in standard
    errors), seeds 1 and 2's λ̂ at the ``early`` steps, seed 0's just after its jump and at the end, and the
    calibration grid's λ̂ at its first and last checkpoint at its largest nβ, one per ε."""
    if stored is None:
        return {k: [] for k in ("loss_drop", "before", "during", "plateau_rise", "plateau_se", "apm_rise", "jump_rise",
                                "jump_se", "after", "seed1_early", "seed1_later", "seed2_early", "seed2_later",
                                "seed0_after_jump", "seed0_end", "calibration_middle", "calibration_end")}
    found, calibration = stored[0], stored[1]
    changes, phases, llc = found.changes, found.phases.set_index("phase"), found.tables["llc"]
    jump_0 = found.milestones.set_index("seed")["jump_step"].get(0, float("nan"))
    after_jump = llc[(llc["seed"] == 0) & (llc["step"] >= jump_0)]["step"].min()
    steps, nbeta = sorted(calibration["step"].unique()), calibration["nbeta"].max()
    return {"loss_drop": list(-changes["plateau: Δloss"]), "before": list(phases.loc["before", "llc_mean"]),
            "during": list(phases.loc["during", "llc_mean"]), "plateau_rise": list(changes["plateau: Δλ̂"]),
            "plateau_se": list(changes["plateau: Δλ̂ / SE"]), "apm_rise": list(changes["plateau: ΔAPM"]),
            "jump_rise": list(changes["jump: Δλ̂"]), "jump_se": list(changes["jump: Δλ̂ / SE"]),
            "after": list(phases.loc["after", "llc_mean"]),
            **{f"seed{seed}_{when}": [llc_at(llc, seed, step)] for seed in (1, 2)
               for when, step in zip(("early", "later"), early)},
            "seed0_after_jump": [llc_at(llc, 0, after_jump)], "seed0_end": [llc_at(llc, 0, llc["step"].max())],
            "calibration_middle": calibration_llc(calibration, steps[0], nbeta),
            "calibration_end": calibration_llc(calibration, steps[-1], nbeta)}


def settings_table(sgld_by_preset: dict) -> pd.DataFrame:
    """The SGLD settings of each preset shown (columns), one row per setting."""
    return pd.DataFrame({p: {k: str(v) for k, v in s.key_dict().items()}
                         for p, s in sgld_by_preset.items()}).rename_axis("SGLD setting")


def provenance_rows(analyses: dict, calibration: dict | None = None) -> list[dict]:
    """Two provenance rows (training, λ̂) per shown run set ``{label: PlateauLLC}``, then one for the meta of the
    long run's ``calibration``, in ``book.pages.run_provenance``'s columns."""
    rows = []
    if calibration is not None:
        rows.append({"preset": "cpu_long", "run": "calibration sweep, seed 0", "device": calibration.get("device"),
                     "wall time (s)": calibration.get("wall_s"), "source": calibration.get("cache"),
                     "commit": calibration.get("commit"), "date": str(calibration.get("date", ""))[:10]})
    for label, a in analyses.items():
        source = a.meta.get("cache") or "computed in this build"
        for part, wall in (("training", a.meta["train_wall_s"]), ("λ̂ at checkpoints", a.meta["llc_wall_s"])):
            rows.append({"preset": label, "run": f"{part}, seeds {listed(a.meta.get('seeds') or [])}",
                         "device": a.meta.get("device"), "wall time (s)": wall, "source": source,
                         "commit": a.meta.get("commit"), "date": str(a.meta.get("date", ""))[:10]})
    return rows


# ---- the CLI ---------------------------------------------------------------------------------------------------
