"""The stages page of Hoogland et al. (``notebooks/icl_stages.ipynb``): the run's configuration, its stages
against the paper's, the attention heads, verdicts and provenance. Its figures (λ̂ and the markers, the checkpoint
widget) are in ``stages_figures``; the paper's own run made on a CPU is in ``stages_paper_run``.

A shorter run than the paper's 500k steps is compared **at the same fraction of the schedule**: the one-cycle
triangle (0 → lr at half-way → 0) is the paper's stretched, so step s of an N-step run is put beside the
paper's step s × 500k / N (``to_paper_step``). That comparison is a convention of this page, not a claim that
development runs at the same pace in a shorter run; the page says so wherever it uses it.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from plateau_lib.book.benchmarks import load_benchmarks
from plateau_lib.book.pages import MISSING, setting_text, verdicts
from plateau_lib.book.verdicts import BySeed, listed, steps_listed
from plateau_lib.engine.presets import log_linear_steps
from plateau_lib.engine.stages import gp_stage_boundaries
from plateau_lib.icl import development, long_run
from plateau_lib.icl.claims import claims_of
from plateau_lib.icl.development import PAPER_BOUNDARIES, PAPER_LLC, PAPER_POINTS, PAPER_STEPS
from plateau_lib.icl.presets import ICL_CHECKPOINTS, ICL_LLC_PAPER, ICL_LLC_REDUCED, ICL_PAPER, ICL_STAGES, icl_stages
from plateau_lib.llc import LLCWarning, SGLDConfig

FIGURE = "Hoogland Fig. 1(b) (LR stages)"
MATCH_FACTOR = 2.0  # a found boundary "matches" a paper boundary when their (step + 1) differ by < this factor
# (log-spaced, linear-spaced) checkpoint counts of each preset; tests check they rebuild presets.py's steps.
LABELS = {"cpu": "cpu miniature", "cpu_long": "long CPU run", "paper": "paper preset"}



# ---- configuration and runs ------------------------------------------------------------------------

def live_config(preset: str, steps=None, d_model=None, seed=None, overrides=None, **llc_fields):
    """(TrainConfig, SGLD settings) of ``preset`` with the page's knobs. A new ``steps`` rebuilds the
    checkpoints (and the extra evaluations) with the preset's log + linear counts and scales ``eval_every``;
    None keeps a preset value. ``llc_fields``: SGLD settings (``num_chains``, ``num_draws``, ``batch_size``...)."""
    if preset not in ICL_STAGES:
        raise ValueError(f"preset must be one of {sorted(ICL_STAGES)}, got {preset!r}")
    base = ICL_STAGES[preset]
    changes = dict(overrides or {})
    if steps is not None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 10:
            raise ValueError(f"parameter 'steps' must be an integer >= 10, got {steps!r}")
        points = log_linear_steps(steps, *ICL_CHECKPOINTS[preset])
        changes.update(steps=steps, checkpoint_steps=points, eval_steps=points,
                       eval_every=max(1, round(base.eval_every * steps / base.steps)))
    for name, value in (("d_model", d_model), ("seed", seed)):
        if value is not None:
            changes[name] = value
    return icl_stages(preset, changes, **llc_fields)


SETTINGS = ["steps", "d_model", "n_head", "n_layer", "batch_size", "lr", "schedule", "eval_batch", "seed"]
SGLD = ["epsilon", "gamma", "nbeta", "batch_size", "num_chains", "num_draws", "num_burnin_steps", "n_data", "seed"]


def settings_table(cfg, llc: SGLDConfig) -> pd.DataFrame:
    """This run's training and SGLD settings beside the paper preset's (which follow the reference)."""
    ours, ref = cfg.to_dict(), ICL_PAPER.to_dict()
    rows = [{"setting": f"training {k}", "this run": ours[k], "paper": ref[k]} for k in SETTINGS]
    rows.append({"setting": "checkpoints (LLC at each)", "this run": len(cfg.checkpoint_steps),
                 "paper": len(ICL_PAPER.checkpoint_steps)})
    rows += [{"setting": f"SGLD {k}", "this run": getattr(llc, k), "paper": getattr(ICL_LLC_PAPER, k)} for k in SGLD]
    table = pd.DataFrame(rows).set_index("setting")
    table = table.map(setting_text)
    table["changed"] = np.where(table["this run"] != table["paper"], "≠", "")
    return table


def other_runs(live_preset: str | None) -> dict:
    """``{preset: Development}`` of the stored long runs ("cpu_long", "paper") other than the live one (None: both); a
    preset with no stored result is left out. Without a run at the paper's SGLD
    budget, "paper" is the paper's training run made on a CPU with λ̂ at a reduced budget, once it is finished."""
    found = {}
    for preset in ("cpu_long", "paper"):
        if preset != live_preset:
            dev = stored_run(preset)
            if dev is not None:
                found[preset] = dev
    return found


def stored_run(preset: str):
    """The stored ``Development`` of ``preset`` ("cpu_long" or "paper"; for "paper" without a run at the paper's
    SGLD budget, the paper's training run made on a CPU with λ̂ at a reduced budget), or None; never computes."""
    dev = development.load(*icl_stages(preset))
    if dev is None and preset == "paper":
        dev = long_run.finished_run(ICL_PAPER, ICL_LLC_REDUCED)
    return dev


def made_on_cpu(dev) -> bool:
    """Whether ``dev`` is the paper's run made on a CPU across work sessions (``icl.long_run``)."""
    return dev is not None and dev.meta.get("made_by") == "plateau_lib.icl.long_run"


def _duration(seconds: float) -> str:
    for limit, unit, size in ((120, "s", 1), (7_200, "min", 60), (259_200, "h", 3_600)):
        if seconds < limit:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds / 86_400:,.0f} days"


def paper_cost(folder=None) -> dict[str, str]:
    """What the benchmark record ``icl.json`` (``benchmarks/icl_bench.py``) says the ``paper`` preset costs, as the
    page glues it: ``paper_{device}_{train, llc_one, llc_all}`` for ``cpu`` (one core) and ``gpu``, the training,
    λ̂ at one checkpoint and λ̂ at all of them, extrapolated from short timed runs (``MISSING`` where not timed)."""
    cost = {}
    _, _, ratios = load_benchmarks(folder)
    values = ratios[ratios["benchmark"] == "icl"].set_index("ratio")["value"]
    for device in ("cpu", "gpu"):
        found = {"train": values.filter(regex=f"^{device}_paper_training_.*_extrapolated_s$"),
                 "llc_one": values.filter(regex=f"^{device}_paper_llc_one_checkpoint_extrapolated_s$"),
                 "llc_all": values.filter(regex=f"^{device}_paper_llc_\\d+_checkpoints_extrapolated_s$")}
        cost |= {f"paper_{device}_{k}": _duration(v.iloc[0]) if len(v) else MISSING for k, v in found.items()}
    return cost


def paper_llc_hours(folder=None) -> float | None:
    """One CPU core's hours for λ̂ at one checkpoint at the ``paper`` preset's SGLD budget, as the benchmark record
    ``icl.json`` extrapolates it (``paper_cost``); None without a record."""
    _, _, ratios = load_benchmarks(folder)
    values = ratios[ratios["benchmark"] == "icl"].set_index("ratio")["value"]
    one = values.get("cpu_paper_llc_one_checkpoint_extrapolated_s")
    return None if one is None else float(one) / 3600


def richest(shown: dict) -> str:
    """The preset of the longest run in ``{preset: Development}`` (the widget shows it)."""
    return max(shown, key=lambda p: run_steps(shown[p]))


def develop(cfg, llc: dict, use_cache: bool = True, progress: bool = True):
    """``development.run`` with the estimator's negative-λ̂ warnings kept off the page (λ̂ < 0 near
    initialisation is expected; ``live_run`` reports it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        return development.run(cfg, llc, use_cache=use_cache, progress=progress)


def live_run(dev, stages) -> dict[str, str]:
    """The live run as the page glues it: its wall times of training and λ̂ and their device, the checkpoints where
    λ̂ < 0 (the chains found a lower loss there: not a local minimum) and the GP fit of its stages."""
    negative = dev.llc.loc[dev.llc["llc_mean"] < 0, "step"]
    return {"live_train_s": f"{float(dev.meta.get('train_wall_s') or 0):,.0f}",
            "live_llc_s": f"{float(dev.meta.get('llc_wall_s') or 0):,.0f}", "live_device": str(dev.meta.get("device")),
            "live_negative_steps": steps_listed(negative, "none"), "live_fit": stages.fit_note}


def run_steps(dev) -> int:
    """The length of the run in steps."""
    return int(dev.train.config["steps"])


# ---- steps of a shorter run against the paper's ------------------------------------------------------

def to_paper_step(step, steps: int):
    """Step ``step`` of an ``steps``-step run at the same fraction of the one-cycle schedule of the paper."""
    return np.asarray(step, dtype=float) * PAPER_STEPS / steps


def from_paper_step(paper_step, steps: int):
    """The paper's step ``paper_step`` at the same fraction of an ``steps``-step run."""
    return np.asarray(paper_step, dtype=float) * steps / PAPER_STEPS


def nearest_log(candidates, target: float):
    """The candidate nearest ``target`` in log(step + 1), or None when there is none."""
    candidates = np.asarray(list(candidates), dtype=float)
    if candidates.size == 0:
        return None
    return int(candidates[np.abs(np.log1p(candidates) - math.log1p(target)).argmin()])


PAPER_MIN_STEP = 100  # the pruning rule drops candidates before this step of the 500k-step run


def min_step(steps: int) -> int:
    """The pruning rule's first step for an ``steps``-step run: the paper's step 100 at the same fraction of
    the schedule (100 for the paper's run, 4 for 20k steps, 0 for 1,500)."""
    return int(round(float(from_paper_step(PAPER_MIN_STEP, steps))))


def detect_stages(dev, **kwargs):
    """``stages.gp_stage_boundaries`` of λ̂ (mean over chains) over the run's checkpoints; unless given,
    ``min_step`` is ``min_step(steps)`` of the run."""
    llc = dev.llc.dropna(subset=["llc_mean"]).sort_values("step")
    kwargs.setdefault("min_step", min_step(run_steps(dev)))
    return gp_stage_boundaries(llc["step"].to_numpy(), llc["llc_mean"].to_numpy(), **kwargs)


def curve_stages(llc: pd.DataFrame, steps: int, **kwargs) -> dict:
    """The page's one rule (``gp_stage_boundaries``, from ``min_step(steps)``) on one λ̂ curve (``step``,
    ``llc_mean`` rows) of a ``steps``-step run: its checkpoints, the boundaries found, the stages and the paper
    boundaries matched (``boundary_table``)."""
    llc = llc.dropna(subset=["llc_mean"]).sort_values("step").reset_index(drop=True)
    kwargs.setdefault("min_step", min_step(steps))
    found = gp_stage_boundaries(llc["step"].to_numpy(), llc["llc_mean"].to_numpy(), **kwargs)
    table = boundary_table(found.boundaries, steps, llc)
    return {"checkpoints": len(llc), "boundaries found": ", ".join(f"{b:,}" for b in found.boundaries) or "none",
            "stages": len(found.boundaries) + 1, "paper boundaries matched": int((table["match"] == "yes").sum())}


def boundaries_by_budget(dev, curves: dict) -> pd.DataFrame:
    """The stages found on each λ̂ curve of ``curves`` (``{budget: λ̂ rows}``, ``long_run.budget_curves``) of run
    ``dev``, by the page's one rule: the boundaries, the number of stages and the paper boundaries matched."""
    return pd.DataFrame([{"λ̂ curve": budget, **curve_stages(llc, run_steps(dev))} for budget, llc in curves.items()])


def seed_stages(curves: dict, **kwargs) -> pd.DataFrame:
    """``curve_stages`` of each model seed's λ̂ curve of the paper's configuration (``{seed: λ̂ by step}``,
    ``diagnosis_page.seed_curves``), one row per seed."""
    return pd.DataFrame([{"seed": seed, **curve_stages(llc_frame(c),
                                                       PAPER_STEPS, **kwargs)}
                         for seed, c in sorted(curves.items())]).set_index("seed")


def budget_stages(dev) -> tuple[pd.DataFrame, dict[str, str]]:
    """For the paper's run made on a CPU (whose λ̂ curve mixes the reduced budget with 4x longer chains where the
    budget check failed): the ``boundaries_by_budget`` table of the stages found on each curve, and what the page
    glues beside it (``budget_replaced``: the checkpoints where the longer chains' λ̂ is shown, and how many); an
    empty table and dashes for any other run."""
    if dev is None or not made_on_cpu(dev):
        return pd.DataFrame(), {"budget_replaced": MISSING, "budget_replaced_count": MISSING}
    curves = long_run.budget_curves(ICL_PAPER, ICL_LLC_REDUCED)
    mixed = curves["as shown (4x longer chains where the check failed)"]
    replaced = mixed.loc[mixed["budget"] != "reduced", "step"]
    return (boundaries_by_budget(dev, curves).set_index("λ̂ curve"),
            {"budget_replaced": listed(replaced, "{:,.0f}", "none"), "budget_replaced_count": f"{len(replaced)}"})


def by_run(tables: dict, shown: dict) -> pd.DataFrame:
    """One table per run shown (``{preset: table}``) as one, each run's rows under its label and length (a table
    without an index of its own is indexed by its first column)."""
    return pd.concat({f"{LABELS.get(p, p)} ({run_steps(shown[p]):,} steps)":
                      t.set_index(t.columns[0]) if isinstance(t.index, pd.RangeIndex) else t for p, t in tables.items()},
                     names=["run"])


# λ̂ over each of the paper's stages LR1-LR5 (reference icl_regression.md §4.2): a boundary is where the trend turns
# (or, LR3 → LR4, where the fall's slope flattens and steepens again); "roughly flat" is a change under TREND_TOLERANCE.
PAPER_TRENDS = ("rises", "rises", "falls", "falls", "roughly flat")
TREND_TOLERANCE = 0.05  # a stage's λ̂ changing by less than this fraction of its larger end is "roughly flat"


def llc_trend(llc: pd.DataFrame, start: float, end: float) -> str:
    """λ̂'s trend from step ``start`` to step ``end``: "rises", "falls" or "roughly flat" (a change under
    ``TREND_TOLERANCE`` of the larger end), from the λ̂ rows (``step``, ``llc_mean``) nearest each in log step."""
    llc = llc.dropna(subset=["llc_mean"])
    a, b = (float(llc.loc[llc["step"] == nearest_log(llc["step"], s), "llc_mean"].iloc[0]) for s in (start, end))
    scale = max(abs(a), abs(b))
    return "roughly flat" if scale == 0 or abs(b - a) < TREND_TOLERANCE * scale else "rises" if b > a else "falls"


def boundary_table(boundaries, steps: int, llc: pd.DataFrame) -> pd.DataFrame:
    """The paper's four boundaries against ``boundaries`` found in an ``steps``-step run, compared at the same
    fraction of the schedule and by what λ̂ (``llc``, the curve the boundaries were found on) does on either side.
    Each found boundary is paired with the paper boundary nearest it in log(step + 1) (each paper boundary keeps
    the nearest of those paired with it). A pair matches when the steps + 1 are within a factor ``MATCH_FACTOR``
    *and* λ̂'s trend from the paper's previous boundary to it, and from it to the paper's next (at the same
    fraction of the schedule; the run's first and last checkpoints at the ends), is the paper's (``PAPER_TRENDS``):
    a boundary at the right step inside a rise is not the end of the paper's fall. Found boundaries left over are
    "extra"."""
    names = ["LR1 → LR2", "LR2 → LR3", "LR3 → LR4", "LR4 → LR5"]
    expected = [float(from_paper_step(p, steps)) for p in PAPER_BOUNDARIES]
    found_sorted = sorted({int(b) for b in boundaries})
    edges = [float(llc["step"].min()), *expected, float(llc["step"].max())]
    paired = {}
    for b in found_sorted:
        i = int(np.abs(np.log1p(expected) - math.log1p(b)).argmin())
        if i not in paired or abs(math.log1p(b) - math.log1p(expected[i])) < abs(
                math.log1p(paired[i]) - math.log1p(expected[i])):
            paired[i] = b
    rows = []
    for i, (name, paper, target) in enumerate(zip(names, PAPER_BOUNDARIES, expected)):
        found = paired.get(i)
        ratio = None if found is None else (found + 1) / (target + 1)
        at_step = ratio is not None and 1 / MATCH_FACTOR < ratio < MATCH_FACTOR
        paper_trend = (PAPER_TRENDS[i], PAPER_TRENDS[i + 1])
        # over the paper's stages either side: from its previous boundary to the found one, and on to its next
        ours = None if found is None else (llc_trend(llc, edges[i], found), llc_trend(llc, found, edges[i + 2]))
        match = ("none found near" if found is None else "no" if not at_step
                 else "yes" if ours == paper_trend else "at the step, not the trend")
        rows.append({"boundary": name, "paper step": paper, "same fraction of this run": round(target),
                     "found": found, "found ÷ expected (step + 1)": ratio,
                     "λ̂ before → after (paper)": " → ".join(paper_trend),
                     "λ̂ before → after (found)": " → ".join(ours) if ours else None, "match": match})
    for extra in sorted(set(found_sorted) - set(paired.values())):
        rows.append({"boundary": "extra", "paper step": None, "same fraction of this run": None, "found": extra,
                     "found ÷ expected (step + 1)": None, "λ̂ before → after (paper)": None,
                     "λ̂ before → after (found)": None, "match": "extra"})
    table = pd.DataFrame(rows)
    for column in ("paper step", "same fraction of this run", "found"):
        table[column] = table[column].astype("Int64")
    table["found ÷ expected (step + 1)"] = table["found ÷ expected (step + 1)"].astype(float)
    return table


def llc_at_points(dev) -> pd.DataFrame:
    """λ̂ at the paper's points (1k, 40k, 126k, 320k, end), at the same fraction of this run's schedule
    (``nearest_checkpoint``, as the claims read it), beside the paper's seed-1 λ̂."""
    steps = run_steps(dev)
    llc = dev.llc.sort_values("step")
    rows = []
    for paper, label in PAPER_POINTS.items():
        target = float(from_paper_step(paper, steps))
        at = nearest_checkpoint(llc["step"], target) if paper < PAPER_STEPS else int(llc["step"].max())
        row = llc[llc["step"] == at].iloc[0]
        rows.append({"paper point": label, "same fraction of this run": target, "checkpoint": at,
                     "λ̂": float(row["llc_mean"]), "± se": float(row["llc_se"]), "paper λ̂ (seed 1)": PAPER_LLC[paper]})
    return pd.DataFrame(rows)


# ---- verdict numbers -----------------------------------------------------------------------------------

# λ̂ at the paper's boundaries, each a claim (``icl.claims``): the paper's step and the claim it is read for.
MARKER_CLAIMS = {1_000: "λ̂ at 1k, the end of LR1 (× steps ÷ 500k)",
                 40_000: "λ̂ at 40k, the paper's peak (× steps ÷ 500k)",
                 126_000: "λ̂ at 126k, the end of LR3 (× steps ÷ 500k)",
                 320_000: "λ̂ at 320k, the end of LR4 (× steps ÷ 500k)"}


def llc_frame(curve: pd.Series) -> pd.DataFrame:
    """A ``{step: λ̂}`` series as the ``step``, ``llc_mean`` rows the page's readers take."""
    return pd.DataFrame({"step": curve.index, "llc_mean": curve.to_numpy()})


def curve_points(llc: pd.DataFrame, steps: int) -> dict:
    """λ̂ of one curve (``step``, ``llc_mean`` rows) where the claims read it: at each of ``MARKER_CLAIMS``' paper
    steps at the same fraction of a ``steps``-step run (NaN with no checkpoint near it), its last row ÷ its
    40k value (``"fall"``) and the paper step of its largest value (``"peak"``)."""
    llc = llc.dropna(subset=["llc_mean"]).sort_values("step").reset_index(drop=True)
    points = {paper: llc_at_paper_step(llc, paper, steps) for paper in MARKER_CLAIMS}
    return points | {"fall": float(llc["llc_mean"].iloc[-1]) / points[40_000],
                     "peak": float(to_paper_step(llc.loc[llc["llc_mean"].idxmax(), "step"], steps))}


def stage_values(dev, stages, other_seeds: dict | None = None, as_run: dict | None = None) -> dict:
    """The page's numbers for the claims of ``FIGURE`` (``icl.claims``). ``other_seeds``: ``{seed: SeedPoints}``
    of other model seeds of the same configuration (``diagnosis.seed_llc_points``): the λ̂ claims about the
    configuration (λ̂ at the paper's boundaries, its fall to the end, the step of its peak) are then judged seed by
    seed (``verdicts.BySeed``), ``dev``'s seed among them; the stages and their boundaries, which need ``dev``'s
    denser λ̂ curve, stay ``dev``'s. ``as_run``: ``{seed: λ̂ by step}`` by the authors' estimator
    (``diagnosis.llc_by_seed`` at ``LLC_AS_RUN``), which λ̂ at the boundaries and its fall are judged on at the seeds
    that have it, as the paper's values were made; the others keep the stages page's budget. The peak's step needs
    a dense curve, so it stays at that budget."""
    steps = run_steps(dev)
    own = curve_points(dev.llc, steps)
    markers = {paper: own[paper] for paper in MARKER_CLAIMS}
    fall, peak_step = own["fall"], own["peak"]
    if other_seeds:
        seed = int(dev.train.config.get("seed", 1))
        authors = {s: curve_points(llc_frame(c), PAPER_STEPS)
                   for s, c in (as_run or {}).items() if (s == seed or s in other_seeds) and c.index.max() == steps - 1}
        reduced = {seed: own} | {s: {40_000: p.at_40k, "fall": p.at_end / p.at_40k} for s, p in other_seeds.items()}
        judged = {key: {s: point[key] for s, point in (reduced | authors).items()
                        if not math.isnan(point.get(key, math.nan))} or {seed: own[key]}
                  for key in (*MARKER_CLAIMS, "fall")}
        markers = {paper: BySeed(judged[paper]) for paper in MARKER_CLAIMS}
        fall = BySeed(judged["fall"])
        peak_step = BySeed({seed: peak_step} | {s: float(p.peak_step) for s, p in other_seeds.items()})
    metrics = dev.train.metrics.sort_values("step")
    matched = (boundary_table(stages.boundaries, steps, dev.llc.dropna(subset=["llc_mean"]).sort_values("step")
                              .reset_index(drop=True))["match"] == "yes").sum()
    return {"stages found": len(stages.boundaries) + 1,
            "paper boundaries matched (at the same fraction of the schedule)": int(matched),
            "step of the λ̂ peak (× 500k ÷ steps)": peak_step,
            **{MARKER_CLAIMS[paper]: value for paper, value in markers.items()},
            "λ̂ at the end ÷ λ̂ at 40k": fall,
            **training_values(metrics)}


def marker_counts(values: dict) -> dict[str, str]:
    """How many seeds fall inside the paper's seeds' range at each of ``MARKER_CLAIMS``' boundaries, from the
    paper preset's ``stage_values`` (each a ``BySeed``, or one number for a single seed), glued as
    ``marker_counts`` ("4 of 5 at 1k, …")."""
    claims = {c.metric: c for c in claims_of(FIGURE)}
    counts = []
    for paper, metric in MARKER_CLAIMS.items():
        low, high = claims[metric].reproduced
        found = values.get(metric)
        seeds = found.values if isinstance(found, BySeed) else {} if found is None else {None: found}
        reached = [float(v) for v in seeds.values() if not math.isnan(float(v))]
        counts.append(f"{sum(low <= v <= high for v in reached)} of {len(reached)} at {paper // 1000:,}k")
    return {"marker_counts": listed(counts, empty="–")}


NEAR_FACTOR = 1.25  # a checkpoint is "near" a step at the same fraction of the schedule within this factor in step


def llc_at_paper_step(llc: pd.DataFrame, paper_step: int, steps: int, tolerance: float = NEAR_FACTOR) -> float:
    """λ̂ of the row nearest the paper's ``paper_step`` at the same fraction of this run (NaN when the nearest row
    is more than ``tolerance`` times away from it in step)."""
    target = float(from_paper_step(paper_step, steps))
    at = nearest_checkpoint(llc["step"], target)
    return float(llc.loc[llc["step"] == at, "llc_mean"].iloc[0]) if near(at, target, tolerance) else float("nan")


def _log_step(step) -> np.ndarray:
    return np.log(np.maximum(np.asarray(step, dtype=float), 1.0))  # step 0 read as 1


def nearest_checkpoint(steps, target: float) -> int:
    """The checkpoint of ``steps`` nearest ``target`` in log(step) (a step or target below 1 read as 1): where a marker
    claim reads λ̂."""
    steps = np.asarray(list(steps), dtype=float)
    return int(steps[np.abs(_log_step(steps) - _log_step(target)).argmin()])


def near(step: float, target: float, tolerance: float = NEAR_FACTOR) -> bool:
    """Whether checkpoint ``step`` is within ``tolerance`` times of ``target`` in step (either read as 1 below 1)."""
    return bool(abs(_log_step(step) - _log_step(target)) <= math.log(tolerance))


def verdict_table(values: dict, page: str, provenance: dict, status: dict | None = None,
                  rerun: dict | None = None) -> pd.DataFrame:
    """``book.pages.verdicts`` of this figure: "cpu" and "paper" recorded for the Reproducibility page, the long CPU
    run in its own columns, judged by the miniature's rule; ``status``: why a preset's other claims wait;
    ``rerun``: ``{preset: values}`` of a nudged re-run (``icl.rerun.stages_rerun``)."""
    return verdicts(claims_of(FIGURE), values, page, provenance, LABELS, status, rerun=rerun)


TRAINING_CLAIMS = ("minimum mean-square prediction (LR1 marker)", "final evaluation loss", "final Δ to ridge")


def training_values(metrics: pd.DataFrame) -> dict:
    """The claims a finished training decides without λ̂ (``TRAINING_CLAIMS``), from its evaluations."""
    metrics = metrics.sort_values("step")
    return dict(zip(TRAINING_CLAIMS, (float(metrics["pred_sq"].min()), float(metrics["loss"].iloc[-1]),
                                      float(metrics["delta_ridge"].iloc[-1]))))


# ---- attention heads and the widget's frames --------------------------------------------------------

def layer_head_scores(train) -> pd.DataFrame:
    """Per evaluation step, layer and head type: the largest score over the layer's heads and query kinds
    (``development.head_scores``; long format), the markers panel's curves."""
    scores = development.head_scores(np.asarray(train.arrays["attn"]))
    scores["step"] = np.asarray(train.arrays["step"])[scores["evaluation"]]
    best = scores.groupby(["step", "layer"])[["previous token", "previous x", "previous y"]].max().reset_index()
    long = best.melt(id_vars=["step", "layer"], var_name="type", value_name="weight")
    long["layer"] = "layer " + (long["layer"] + 1).astype(str)
    return long


def head_table(dev, stages) -> pd.DataFrame:
    """Every head half's type at the end of the run (``development.head_types``): the step from which it kept
    it, that step at the same fraction of the paper's schedule, and the λ̂ stage (between ``stages``'
    boundaries) it falls in. Typed halves first, by weight."""
    steps = np.asarray(dev.train.arrays["step"])
    table = development.head_types(development.head_scores(np.asarray(dev.train.arrays["attn"])), steps)
    table = table.sort_values(["typed", "weight"], ascending=False, kind="stable")
    edges, since = sorted(stages.boundaries), table.pop("typed_from")
    table["type from step"] = ["–" if pd.isna(s) else f"{int(s):,}" for s in since]
    table["× 500k ÷ steps"] = ["–" if pd.isna(s) else f"{int(round(float(to_paper_step(s, run_steps(dev))))):,}"
                               for s in since]
    table["λ̂ stage"] = ["–" if pd.isna(s) else str(1 + int(np.searchsorted(edges, s, side="right"))) for s in since]
    table["type"] = np.where(table.pop("typed"), table["type"], "none (" + table["type"] + ")")
    return table.rename(columns={"weight": "weight at the end"}).set_index("head")


def frame_indices(steps, n: int = 8) -> list[int]:
    """About ``n`` evaluation indices spread evenly in log(step + 1), first and last included."""
    steps = np.asarray(steps, dtype=float)
    if steps.size == 0:
        raise ValueError("no evaluations to pick frames from")
    targets = np.geomspace(steps.min() + 1, steps.max() + 1, max(1, n))
    return sorted({int(np.abs(np.log1p(steps) - np.log(t)).argmin()) for t in targets})


# ---- provenance and every run in numbers ----------------------------------------------------------------

def source(dev) -> str:
    return dev.meta["cache"] if dev.meta.get("cache") else "computed in this build"


def provenance_rows(devs: dict) -> list[dict]:
    """Two rows per run ``{preset: Development}``: its training and its LLC estimates."""
    rows = []
    for preset, dev in devs.items():
        cfg, llc = dev.train.config, dev.meta.get("llc", {})
        common = {"preset": preset, "device": dev.meta.get("device"), "source": source(dev),
                  "commit": dev.meta.get("commit"), "date": str(dev.meta.get("date", ""))[:10]}
        rows.append({**common, "run": f"training: {cfg['steps']} steps, d_model {cfg['d_model']}, seed {cfg['seed']}",
                     "wall time (s)": dev.meta.get("train_wall_s")})
        rows.append({**common, "run": (f"LLC at {len(dev.llc)} checkpoints: {llc.get('num_chains')} chains × "
                                       f"{llc.get('num_draws')} draws, SGLD batch {llc.get('batch_size')}, "
                                       f"n = {llc.get('n_data')}"),
                     "wall time (s)": dev.meta.get("llc_wall_s")})
    return rows


def provenance_summary(dev, other_seeds: dict | None = None) -> dict:
    """Device, seed, wall times and source of one run, for a recorded summary; ``other_seeds`` (as for
    ``stage_values``): the seeds its λ̂ claims are also judged on."""
    return {"device": dev.meta.get("device"), "runs": 1, "seeds": [dev.train.config.get("seed")],
            **({"λ̂ claims also at seeds": sorted(other_seeds),
                "their runs": "results/in_progress/icl_diagnosis-*, each seed's data stream named there"}
               if other_seeds else {}),
            "wall_time_s": round(float(dev.meta.get("train_wall_s") or 0) + float(dev.meta.get("llc_wall_s") or 0), 1),
            "source": "committed" if str(dev.meta.get("cache") or "").startswith("results") else "this build",
            "configs": [dev.train.config]}


def runs_table(devs: dict, found: dict) -> pd.DataFrame:
    """Every run shown in numbers, one row per run: its length, the boundaries found and the rule's candidates
    before pruning, λ̂ at the paper's points (a shorter run's at the same fraction of its schedule,
    ``llc_at_points``; marked where that checkpoint is not within ``NEAR_FACTOR`` of it, as the claims skip it),
    and the wall times of training and λ̂ with their device."""
    rows = []
    for preset, dev in devs.items():
        points = llc_at_points(dev)
        rows.append({"run": LABELS.get(preset, preset), "steps": f"{run_steps(dev):,}",
                     "boundaries": listed(found[preset].boundaries, "{:,.0f}", "none"),
                     "candidates": listed(found[preset].candidates, "{:,.0f}", "none"),
                     **{f"λ̂ at {p.split(' ')[0]}": f"{v:.1f} (step {c:,}".replace("-", "−") + (
                         ")" if near(c, t) else f"; not near {t:,.0f}, so not judged)")
                        for p, c, t, v in zip(points["paper point"], points["checkpoint"],
                                              points["same fraction of this run"], points["λ̂"])},
                     "training (s)": f"{float(dev.meta.get('train_wall_s') or 0):,.0f}",
                     "λ̂ (s)": f"{float(dev.meta.get('llc_wall_s') or 0):,.0f}", "device": dev.meta.get("device")})
    return pd.DataFrame(rows).set_index("run")
