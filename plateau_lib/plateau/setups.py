"""The training-setups page (Gopalani et al. Figs. 26-40): one MWS run per setup and seed, summarised the way
Fig. 2 is (``milestones.milestones``), and the numbers the page's verdicts judge.

A setup is the MWS config with a few fields changed (``presets.TRAINING_SETUPS``); its ``family`` groups the
page's small multiples (width, learning rate, ..., optimizer).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from plateau_lib.book import pages
from plateau_lib.engine import stages
from plateau_lib.plateau import milestones

FIGURE = "Figs. 26–40 (training setups)"


def setup_metrics(results: dict, family: dict) -> pd.DataFrame:
    """Tidy metrics of ``{(setup, seed): TrainResult}`` with columns ``setup``, ``seed`` and ``family``
    (``family``: setup name -> family, in page order)."""
    metrics = pages.tidy(results, ("setup", "seed"))
    metrics["family"] = metrics["setup"].map(family)
    rank = {name: i for i, name in enumerate(family)}
    return metrics.sort_values(["setup", "seed", "step"], key=lambda c: c.map(rank) if c.name == "setup" else c,
                               ignore_index=True)


def setup_milestones(metrics: pd.DataFrame, family: dict) -> pd.DataFrame:
    """Fig. 2's milestones (partial step, jump, plateau span, peaks) per setup and seed, in page order, with how
    long each run's loss sits still between its partial solution and its jump (``stages.plateau_evaluations``)."""
    order = [name for name in family if name in set(metrics["setup"])]
    table = milestones.milestones(metrics, by=("setup", "seed"), order={"setup": order})
    table.insert(1, "family", table["setup"].astype(str).map(family))
    return with_plateau_evaluations(table, metrics)


def with_plateau_evaluations(table: pd.DataFrame, metrics: pd.DataFrame, tol: float = stages.PLATEAU_LOSS_TOL):
    """``table`` (a row per setup and seed) with each run's ``plateau_evaluations`` at loss tolerance ``tol``."""
    runs = dict(iter(metrics.groupby(["setup", "seed"], observed=True)))
    return table.assign(plateau_evaluations=[
        stages.plateau_evaluations(runs[(r.setup, r.seed)], r.partial_step, r.jump_step, tol) for r in table.itertuples()])


def plateaued(table: pd.DataFrame, min_evaluations: int = stages.PLATEAU_MIN_EVALUATIONS) -> pd.Series:
    """Per run: True when y₁ is learned first and the loss then sits still (``stages.plateau_evaluations``, at
    least ``min_evaluations``) before the other outputs jump (or to the end of a run that never jumps). A run
    whose loss keeps falling from y₁ to the jump learned y₁ first but has no plateau."""
    partial, jump = table["partial_step"].astype(float), table["jump_step"].astype(float)
    flat = table["plateau_evaluations"].astype(float) >= min_evaluations
    return partial.notna() & (jump.isna() | (jump > partial)) & flat


PLATEAU_NUMBERS = ("runs that learn y₁ first, then plateau (fraction)", "lowest peak cosine over the runs that plateau",
                   "lowest peak ρ over the runs that plateau")


def reading_sensitivity(metrics: pd.DataFrame, table: pd.DataFrame, tols=(0.01, 0.02, 0.03, 0.05),
                        min_evaluations=(2, 3, 4, 5)) -> pd.DataFrame:
    """The verdicts' three plateau numbers (``PLATEAU_NUMBERS``) under other readings of a plateau: one row per
    loss tolerance and least number of evaluations, so a page can show that its verdicts do not hang on the
    reading's two numbers (``setup_metrics``' metrics and ``setup_milestones``' table of the same runs)."""
    rows = []
    for tol in tols:
        read = with_plateau_evaluations(table, metrics, tol)
        for least in min_evaluations:
            plateaus = plateaued(read, least)
            kept = read[plateaus]
            rows.append({"tolerance": tol, "evaluations": least, PLATEAU_NUMBERS[0]: float(plateaus.mean()),
                         PLATEAU_NUMBERS[1]: float(kept["peak_cosine"].astype(float).min()),
                         PLATEAU_NUMBERS[2]: float(kept["peak_rho"].astype(float).min())})
    return pd.DataFrame(rows)


def reading_texts(reading: pd.DataFrame, claims: list, preset: str) -> dict:
    """For the page's prose, each of ``PLATEAU_NUMBERS`` over every reading of ``reading_sensitivity`` as the range
    of its values and the verdicts they get under its claim of ``claims`` at ``preset``: "0.61–0.73 (not
    reproduced under each)", keyed ``reading_0`` ... in ``PLATEAU_NUMBERS``' order; the readings tried as
    ``reading_tolerances`` ("1%–5%") and ``reading_evaluations`` ("2–5")."""
    by_metric = {c.metric: c for c in claims}
    texts = {"reading_tolerances": pages.value_range(100 * reading["tolerance"], "{:.0f}%"),
             "reading_evaluations": pages.value_range(reading["evaluations"], "{:.0f}")}
    for i, name in enumerate(PLATEAU_NUMBERS):
        verdicts = list(dict.fromkeys(by_metric[name].judge(v, preset) for v in reading[name]))
        told = f"{verdicts[0]} under each" if len(verdicts) == 1 else " or ".join(verdicts)
        texts[f"reading_{i}"] = f"{pages.value_range(reading[name])} ({told})"
    return texts


def setup_values(table: pd.DataFrame) -> dict:
    """The page's reported numbers: the share of runs that learn y₁ first and then plateau, the share that jump
    within their run, the lowest peak cosine and peak ρ before the jump over every run that plateaus (collapse and
    repetition during each run's plateau, not in a setup's mean: a run that never learns y₁, jumps with it, or whose
    loss keeps falling from y₁ to the jump (:func:`plateaued`) has no plateau to collapse in), and softmax's jump
    step over the linear baseline's, seed by seed (when both were run)."""
    kept = table[plateaued(table)]
    values = {PLATEAU_NUMBERS[0]: float(plateaued(table).mean()),
              "runs that jump within their run (fraction)": float(table["jump_step"].astype(float).notna().mean()),
              PLATEAU_NUMBERS[1]: float(kept["peak_cosine"].astype(float).min()),
              PLATEAU_NUMBERS[2]: float(kept["peak_rho"].astype(float).min())}
    names = set(table["setup"].astype(str))
    if {"softmax", "baseline"} <= names:
        values["softmax jump step ÷ linear baseline's"] = milestones.seed_ratio(
            table, "jump_step", {"setup": "softmax"}, {"setup": "baseline"}, later=True)
    return values


def weakest_runs(table: pd.DataFrame) -> pd.DataFrame:
    """The run with the lowest peak cosine and the one with the lowest peak ρ before the jump, among the runs that
    plateau (the numbers ``setup_values`` judges): one row each, measure, setup, seed and value."""
    rows, table = [], table[plateaued(table)]
    for measure, column in (("peak cosine", "peak_cosine"), ("peak ρ", "peak_rho")):
        if table.empty:  # no run plateaued: nothing to judge
            rows.append({"measure": measure, "setup": pages.MISSING, "seed": pages.MISSING, "value": np.nan})
            continue
        run = table.loc[table[column].astype(float).idxmin()]
        rows.append({"measure": measure, "setup": str(run["setup"]), "seed": int(run["seed"]),
                     "value": float(run[column])})
    return pd.DataFrame(rows).set_index("measure")


def unplateaued_runs(table: pd.DataFrame) -> str:
    """The runs that do not plateau (:func:`plateaued`), which the collapse and repetition verdicts leave out:
    "n 8 (seeds 1, 2); SGD (seeds 0, 1, 2)", setups joined by "; " ("none" when every run plateaus)."""
    runs = table[~plateaued(table)]
    if runs.empty:
        return "none"
    return "; ".join(f"{name} (seed{'s' if len(g) > 1 else ''} {', '.join(str(int(s)) for s in g['seed'])})"
                     for name, g in runs.groupby("setup", sort=False, observed=True))


def changed_fields(configs: dict, base) -> pd.DataFrame:
    """What each setup changes from ``base`` (a TrainConfig): one row per setup, fields as ``name = value``."""
    rows, reference = {}, base.to_dict()
    for (name, _seed), cfg in configs.items():
        ours = cfg.to_dict()
        changes = [f"{k} = {pages.setting_text(ours[k])}" for k in ours if k != "seed" and ours[k] != reference[k]]
        rows.setdefault(name, "; ".join(changes) or "none (the MWS config)")
    return pd.DataFrame({"setup": list(rows), "changes": list(rows.values())}).set_index("setup")


def per_setup(table: pd.DataFrame) -> pd.DataFrame:
    """The closing numbers per setup, as the lowest to the highest over its seeds (``pages.value_range``; never
    their mean): plateau span, peak cosine and peak ρ (span ``MISSING``: some seed never jumped)."""
    rows = []
    for name, runs in table.groupby("setup", sort=True, observed=True):
        spans = runs["plateau_span"].astype(float)
        rows.append({"setup": name, "family": runs["family"].iloc[0], "seeds": len(runs),
                     "plateau span (steps)": (pages.MISSING if spans.isna().any()
                                                  else pages.value_range(spans, "{:,.0f}")),
                     "peak cosine": pages.value_range(runs["peak_cosine"], "{:.2f}"),
                     "peak ρ": pages.value_range(runs["peak_rho"], "{:.2f}")})
    return pd.DataFrame(rows, columns=["setup", "family", "seeds", "plateau span (steps)", "peak cosine", "peak ρ"]
                        ).set_index("setup")


def lowest_setups(table: pd.DataFrame, column: str, n: int = 2) -> pd.Series:
    """The ``n`` setups whose seeds' mean of ``column`` (e.g. ``peak_rho``) is lowest, lowest first."""
    return table.groupby("setup", observed=True)[column].mean().astype(float).nsmallest(n)


def data_rho(metrics: pd.DataFrame, setup: str = "baseline") -> float:
    """ρ of the data's own outputs (the generator's repetition) in ``setup``'s runs (NaN without them)."""
    return float(metrics.loc[metrics["setup"] == setup, "rho_data"].mean())


def setup_value_at(metrics: pd.DataFrame, setup: str, column: str, step: float | None = None) -> float:
    """``column`` of ``setup``'s seed-mean curve at the evaluation nearest ``step`` (None: its last one); NaN
    without that setup."""
    curve = metrics[metrics["setup"] == setup].groupby("step", as_index=False)[column].mean()
    if curve.empty:
        return float("nan")
    return float(curve[column].iloc[-1]) if step is None else milestones.value_at(curve, step, column)


def cpu_cost(configs: dict, setup: str) -> dict:
    """One CPU core's measured seconds a step (``step_s``) and an evaluation (``eval_s``) of ``setup``'s
    architecture and the hours one of its runs takes (``hours``), from ``results/cpu_costs.json``; {} where it
    was not measured or ``configs`` lacks the setup."""
    from plateau_lib.engine import costs
    cfg = next((c for (name, _seed), c in configs.items() if name == setup), None)
    measured = costs.cpu_costs([], measure=False)
    found = None if cfg is None else measured.get(costs.architecture(cfg))
    return {} if found is None else {**found, "hours": costs.estimate_cpu_s(cfg, measured) / 3600}
