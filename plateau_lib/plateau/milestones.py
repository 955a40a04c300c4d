"""The MWS pages' milestone tables and their paper-vs-ours numbers (the metrics named in ``plateau.claims``).

Each function takes the tidy frames a page already has and returns a table or ``{claim metric: value}``,
so a page computes every reported number the same way for its live runs and for committed ones.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from plateau_lib.book.verdicts import AtLeast, BySeed
from plateau_lib.engine import stages


def milestones(metrics: pd.DataFrame, by=("seed",), order: dict | None = None) -> pd.DataFrame:
    """``stages.summarize_runs`` per run, with each run's length (``steps``), sorted by ``by`` (``order`` gives
    a category order for a column, e.g. the c values as shown)."""
    by = list(by)
    table = stages.summarize_runs(metrics, by=by)
    table["steps"] = [int(g["step"].max()) for _, g in metrics.groupby(by)]
    for column, categories in (order or {}).items():
        table[column] = pd.Categorical(table[column], categories=categories, ordered=True)
    return table.sort_values(by).reset_index(drop=True)


def _matching(table: pd.DataFrame, where: dict) -> pd.DataFrame:
    """The rows of ``table`` whose columns equal ``where``'s values (compared as text: c = 10 and "10" match)."""
    rows = table
    for name, value in where.items():
        rows = rows[rows[name].astype(str) == str(value)]
    return rows


def mean_of(table: pd.DataFrame, column: str, **where) -> float:
    """Mean of ``column`` over the rows matching ``where`` (NaN when a run never got there: one missing
    milestone makes the mean missing, rather than averaging only the runs that reached it)."""
    values = _matching(table, where)[column].astype(float)
    return float("nan") if values.empty or values.isna().any() else float(values.mean())


def _seed_values(table: pd.DataFrame, column: str, where: dict) -> dict:
    """``{seed: column}`` over the rows matching ``where``; a missing milestone is NaN."""
    rows = _matching(table, where)
    return {int(seed): float(v) if pd.notna(v) else np.nan for seed, v in zip(rows["seed"], rows[column])}


def by_seed(table: pd.DataFrame, column: str, **where) -> BySeed:
    """``column`` at each seed of the rows matching ``where``, judged seed by seed (``verdicts.BySeed``; NaN: that
    seed never got there)."""
    return BySeed(_seed_values(table, column, where))


def seed_ratio(table: pd.DataFrame, column: str, numerator: dict, denominator: dict, later: bool = False) -> BySeed:
    """Each seed's ``column`` in the ``numerator`` rows over the same seed's in the ``denominator`` rows (the same
    initial weights under two conditions). ``later``: for a claim that the numerator's milestone comes later, a
    numerator run that never got there got there after its last step, so the ratio is at least its length over the
    denominator's (``AtLeast``); NaN where the denominator's never got there."""
    top, bottom = _seed_values(table, column, numerator), _seed_values(table, column, denominator)
    ratios = {}
    for seed in sorted(set(top) & set(bottom)):
        if np.isnan(bottom[seed]):
            ratios[seed] = np.nan
        elif np.isnan(top[seed]):
            ratios[seed] = AtLeast(_seed_values(table, "steps", numerator)[seed] / bottom[seed]) if later else np.nan
        else:
            ratios[seed] = top[seed] / bottom[seed]
    return BySeed(ratios)


def plateau_values(summary: pd.DataFrame, metrics: pd.DataFrame) -> dict:
    """Fig. 2's reported numbers, seed by seed (the data's ρ: one number, the generator's)."""
    return {"peak cosine before the jump": by_seed(summary, "peak_cosine"),
            "peak ρ before the jump": by_seed(summary, "peak_rho"),
            "data ρ": float(metrics["rho_data"].mean()),
            "APM at step 0": by_seed(summary, "apm_start"),
            "APM at the end of the plateau (the last evaluation before the jump)": by_seed(summary, "apm_before_jump"),
            "APM's rank correlation with the step, up to the jump": by_seed(summary, "apm_rank_corr"),
            "step of the jump": by_seed(summary, "jump_step"),
            "final accuracy": by_seed(summary, "final_acc")}


def value_at(metrics: pd.DataFrame, step: float, column: str) -> float:
    """``column`` at the evaluation nearest ``step``."""
    return float(metrics.iloc[(metrics["step"] - step).abs().argmin()][column])


def switch_milestones(results: dict, switched_at: dict) -> pd.DataFrame:
    """Fig. 43 per run ``{(label, seed): TrainResult}``: jump step, steps from the switch to the jump and the
    cosine at the switch (``switched_at``: label -> step, NaN for a run never switched)."""
    rows = []
    for (label, seed), r in results.items():
        row = {"switch": label, "seed": seed, **stages.plateau_summary(r.metrics)}
        at = switched_at[label]
        row.update(switched_at=at, steps=int(r.metrics["step"].max()),
                   steps_to_jump=(row["jump_step"] - at) if row["jump_step"] is not None else np.nan,
                   cosine_at_switch=value_at(r.metrics, at, "cosine") if np.isfinite(at) else np.nan)
        rows.append(row)
    table = pd.DataFrame(rows)
    table["switch"] = pd.Categorical(table["switch"], categories=list(dict.fromkeys(switched_at)), ordered=True)
    return table.sort_values(["switch", "seed"]).reset_index(drop=True)


def attention_bias_values(bias: pd.DataFrame) -> dict:
    """Figs. 3-4's reported numbers from the per-(c, seed) milestones, seed by seed (a ratio: each seed's c
    against the same seed's c = 1)."""
    values, cs = {}, set(bias["c"].astype(str))
    if "10" in cs:  # c = 1's peak cosine is Fig. 2's claim (the same runs)
        values["peak cosine, c = 10"] = by_seed(bias, "peak_cosine", c="10")
    if {"0.2", "1"} <= cs:  # collapse worsens: the gap to full collapse shrinks against the same seed's c = 1
        values["1 − peak cosine, c = 0.2 ÷ c = 1"] = seed_ratio(bias.assign(gap=1 - bias["peak_cosine"].astype(float)),
                                                               "gap", {"c": "0.2"}, {"c": "1"})
    if {"10", "1"} <= cs:
        values["jump step, c = 10 ÷ c = 1"] = seed_ratio(bias, "jump_step", {"c": "10"}, {"c": "1"})
    if {"0.2", "1"} <= set(bias["c"].astype(str)):
        values["jump step, c = 0.2 ÷ c = 1"] = seed_ratio(bias, "jump_step", {"c": "0.2"}, {"c": "1"}, later=True)
    return values


def switch_values(switch: pd.DataFrame) -> dict:
    """Fig. 43's reported number: the longest wait from a mid-run switch to the jump (NaN if one never jumped)."""
    waits = switch.loc[switch["switched_at"] > 0, "steps_to_jump"].astype(float)
    return {"steps from switch to jump, c = 10 at step 25–100 (max)":
            float("nan") if waits.empty or waits.isna().any() else float(waits.max())}


def learned(table: pd.DataFrame) -> pd.Series:
    """Per run: True when it reaches the partial solution (y₁ learned). A run that never does has no plateau to
    collapse or repeat in: an untrained model's constant output has cosine and ρ near 1, or near 0, by chance."""
    return table["partial_step"].astype(float).notna()


def where_learned(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """``table`` with ``column`` missing (NaN) for the runs that never learned their partial solution
    (:func:`learned`)."""
    return table.assign(**{column: table[column].astype(float).where(learned(table))})


def optimal_init_values(table: pd.DataFrame) -> dict:
    """Fig. 5's reported numbers, seed by seed (a span: each seed's over the same seed's baseline span; a peak
    cosine only where the run learned y₁, ``where_learned``, but KQ+OV's sanity check, met by learning nothing)."""
    names, learned = set(table["condition"].astype(str)), where_learned(table, "peak_cosine")
    values = {f"peak cosine, {n} copied" if n != "baseline" else "peak cosine, baseline":
              by_seed(table if n == "KQ+OV" else learned, "peak_cosine", condition=n)
              for n in ("KQ", "KQ+OV", "MLP", "baseline") if n in names}
    if "baseline" in names:
        for n in ("KQ", "MLP", "embeddings"):
            if n in names:
                values[f"plateau span, {n} copied ÷ baseline"] = seed_ratio(
                    table, "plateau_span", {"condition": n}, {"condition": "baseline"})
    return values


def plateau_middle(table: pd.DataFrame, default: float, from_start: bool = False, **where) -> float:
    """The step halfway through the plateau of the runs matching ``where``: between the mean partial
    step (or step 0 with ``from_start``) and the mean jump step; ``default`` if they never jumped."""
    jump = mean_of(table, "jump_step", **where)
    start = 0.0 if from_start else mean_of(table, "partial_step", **where)
    return default if np.isnan(jump) or np.isnan(start) else (start + jump) / 2


def switch_comparison(switch: dict, bias: dict, switch_c: float) -> tuple[dict, dict]:
    """Fig. 43's runs ``{(label, seed): TrainResult}`` and each label's switch step, in the order shown:
    the bias-from-step-0 runs of ``switch_c``, the mid-run switches, then the unbiased (c = 1) runs; the
    runs taken from ``bias`` only when they are as long as the switch runs."""
    length = {int(r.metrics["step"].max()) for r in switch.values()}
    same = {c: {s: r for (bc, s), r in bias.items() if bc == c and int(r.metrics["step"].max()) in length}
            for c in (switch_c, 1.0)}
    groups = [("from step 0", 0.0, same[switch_c])]
    groups += [(f"from step {t}", float(t), {s: r for (tt, s), r in switch.items() if tt == t})
               for t in dict.fromkeys(t for t, _ in switch)]
    groups += [("never (c = 1)", np.nan, same[1.0])]
    groups = [g for g in groups if g[2]]
    runs = {(label, s): r for label, _, by_seed in groups for s, r in sorted(by_seed.items())}
    return runs, {label: at for label, at, _ in groups}
