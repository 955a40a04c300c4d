"""The stages page's differential diagnosis (why λ̂ barely falls in LR3–LR4 at our seed 1; the page
``notebooks/icl_stages_diagnosis.ipynb``): its figure, its hypotheses with their tests and costs, and the numbers
and tables of their results, computed from the committed runs (``icl.diagnosis``); the page's Markdown says them.
λ̂ at every seed."""
from __future__ import annotations

import numpy as np
import pandas as pd

from plateau_lib.book import pages, plots
from plateau_lib.book.verdicts import listed
from plateau_lib.icl import development as dev, diagnosis, long_run, stages_page
from plateau_lib.icl.claims import claims_of
from plateau_lib.icl.diagnosis import STEP_40K
from plateau_lib.icl.presets import ICL_LLC_REDUCED, ICL_PAPER
from plateau_lib.icl.stages_page import llc_at_paper_step

STEP_126K = 126_262  # the kept checkpoint nearest the paper's 126k (end of LR3)
LATE_STEP = 318_181  # the kept checkpoint nearest the paper's 320k (end of LR4)
LR4_STEP = 202_019  # a kept checkpoint inside LR4
PANELS = [("llc", "λ̂ (4 chains × 800 draws)"), ("loss", "evaluation loss"), ("delta_ridge", "Δ to ridge"),
          ("weight_norm", "weight norm"), ("loss_ood_inputs_authors", "OOD-input loss, g = 5"),
          ("ln_f", "final LN, mean |w|"), ("ln_attn_1", "1st attention's LN, mean |w|")]
PAPER = {"llc": dev.PAPER_LLC, "loss": dev.PAPER_EVAL_LOSS, "delta_ridge": dev.PAPER_DELTA_RIDGE,
         "weight_norm": dev.PAPER_WEIGHT_NORM, "loss_ood_inputs_authors": dev.PAPER_OOD_INPUTS_STD_NOISE}
FALL_CLAIM = "λ̂ at the end ÷ λ̂ at 40k"
PAPER_OOD_40K, PAPER_OOD_LATE = (dev.PAPER_OOD_INPUTS_STD_NOISE[s] for s in (40_000, 323_000))


def load() -> tuple[pd.DataFrame, pd.DataFrame, list]:
    """(markers at every kept checkpoint, λ̂ rows, the runs) of every diagnosis run committed."""
    runs = diagnosis.runs_present()
    return diagnosis.markers(runs), diagnosis.llc_rows(runs), runs


def with_llc(markers: pd.DataFrame, llc: pd.DataFrame, stages_run=None) -> pd.DataFrame:
    """``markers`` with a column "llc": λ̂ at the stages run's SGLD setting where it was estimated (``llc``: the
    diagnosis runs' rows; ``stages_run``: the committed seed-1 run, whose weights the CPU retrain's are, bit for
    bit, so its λ̂ goes on the retrain's rows)."""
    budget = diagnosis.budget_label(ICL_LLC_REDUCED)
    rows = (llc[llc["budget"] == budget][["seed", "operands", "data", "step", "llc_mean"]] if not llc.empty
            else pd.DataFrame(columns=["seed", "operands", "data", "step", "llc_mean"]))
    if stages_run is not None:
        committed = stages_run.llc.dropna(subset=["llc_mean"])[["step", "llc_mean"]]
        rows = pd.concat([rows, committed.assign(seed=1, operands="float32", data="CPU")], ignore_index=True)
    rows = rows.drop_duplicates(["seed", "operands", "data", "step"], keep="last").rename(columns={"llc_mean": "llc"})
    return markers.merge(rows, on=["seed", "operands", "data", "step"], how="left")


def figure(markers: pd.DataFrame, llc: pd.DataFrame, stages_run=None):
    """Every marker of every diagnosis run against step, λ̂ first (``with_llc``), the paper's seed 1 as crosses."""
    markers = with_llc(markers, llc, stages_run)
    shown = markers.assign(seed=markers["seed"].map(lambda s: f"seed {s}"),
                           run=markers["operands"] + ", " + markers["data"] + " data")
    last = int(markers["step"].max())
    return plots.markers_vs_step(shown, PANELS, PAPER, hue="seed", style="run", ranges={"llc": dev.PAPER_LLC_SEEDS},
                                 title=f"The paper's configuration at five model seeds, to step {last:,}")


def _float32(markers: pd.DataFrame, step: int, data: str = "GPU") -> pd.DataFrame:
    return markers[(markers["step"] == step) & (markers["data"] == data) & (markers["operands"] == "float32")]


def seed_values(markers: pd.DataFrame, runs) -> dict:
    """Result 2's numbers: loss and Δ to ridge at ``STEP_40K``, the paper's, the other seeds' range (``others_*``:
    low, high), seed 1's with the GPU's data and the CPU retrain's (the committed run's data); the held-out
    sequences every checkpoint is scored on; the GPU runs (how many, their seconds on the GPU, the steps they have
    reached)."""
    loss, delta = (diagnosis.seed_spread(markers, STEP_40K, c) for c in ("loss", "delta_ridge"))
    retrain = _float32(markers, STEP_40K, "CPU").set_index("seed")
    gpu = diagnosis.progress_table(runs)
    gpu = gpu[gpu["run"].str.contains("GPU")]
    return {"step": STEP_40K, "paper_loss": dev.PAPER_EVAL_LOSS[40_000], "paper_delta": dev.PAPER_DELTA_RIDGE[40_000],
            "other_seeds": [s for s in loss["seeds"] if s != 1],
            "others_loss": [loss["others low"], loss["others high"]],
            "others_delta": [delta["others low"], delta["others high"]],
            "seed1_loss": loss["seed 1"], "seed1_delta": delta["seed 1"],
            "retrain_loss": retrain["loss"].get(1, float("nan")),
            "retrain_delta": retrain["delta_ridge"].get(1, float("nan")),
            "held_out": int(markers["n"].iloc[0]), "gpu_runs": len(gpu),
            "gpu_seconds": max((diagnosis.progress(c, s) or {}).get("seconds_by_device", {}).get("cuda", 0.0)
                               for c, s in runs if s == "cuda"),
            "gpu_steps": gpu["step reached"].tolist()}


def precision_values(markers: pd.DataFrame, llc: pd.DataFrame, step: int = STEP_126K) -> dict:
    """Result 3's numbers: over the matched (seed, step) checkpoints of bfloat16 and float32 runs (``pairs``, to
    ``last_step``), the largest gap in loss and Δ to ridge and its largest share of the float32 seeds' sd; then λ̂
    at ``step`` (the stages run's SGLD budget) of seed 1's two GPU-begun runs, float32 and bfloat16 (the same start,
    each carried on from 85k with a CPU's data), and the other seeds' float32 λ̂ there (``llc_others``)."""
    loss, delta = (diagnosis.precision_gap(markers, c) for c in ("loss", "delta_ridge"))
    at = llc[(llc["step"] == step) & (llc["budget"] == diagnosis.budget_label(ICL_LLC_REDUCED))
             & (llc["data"] == "GPU")]
    seed1 = at[at["seed"] == 1].set_index("operands")["llc_mean"]
    return {"pairs": loss["pairs"], "last_step": loss["last step"], "loss_gap": loss["max gap"],
            "delta_gap": delta["max gap"], "loss_share": loss["max share of seed sd"],
            "delta_share": delta["max share of seed sd"], "llc_step": step,
            "llc_float32": seed1.get("float32", float("nan")), "llc_bfloat16": seed1.get("bfloat16", float("nan")),
            "llc_others": at[(at["seed"] != 1) & (at["operands"] == "float32")]["llc_mean"].tolist()}


def _at(markers: pd.DataFrame, step: int, column: str, data: str = "CPU", seed: int = 1) -> float:
    row = _float32(markers, step, data)
    row = row[row["seed"] == seed]
    return float(row[column].iloc[0]) if len(row) else float("nan")


OOD = "loss_ood_inputs_authors"


def ood_values(markers: pd.DataFrame) -> dict:
    """Result 4's numbers, the OOD-input loss the authors' way (g = 5, noise of std 0.125): the largest change from
    our way, seed 1's (the CPU retrain) at ``STEP_40K`` and ``LATE_STEP`` beside the paper's at 40k and 320k, and
    the other float32 seeds' (GPU-begun) at both steps (``late_seeds``: which seeds have the later value)."""
    late = _float32(markers, LATE_STEP)
    late = late[late["seed"] != 1].sort_values("seed")
    others = diagnosis.seed_spread(markers, STEP_40K, OOD)
    return {"gap": float((markers[OOD] - markers["loss_ood_inputs"]).abs().max()), "step": STEP_40K,
            "late_step": LATE_STEP, "seed1": _at(markers, STEP_40K, OOD), "seed1_late": _at(markers, LATE_STEP, OOD),
            "paper": PAPER_OOD_40K, "paper_late": PAPER_OOD_LATE,
            "others": [others["others low"], others["others high"]], "others_late": late[OOD].tolist(),
            "late_seeds": late["seed"].tolist()}


def layer_norm_values(markers: pd.DataFrame, steps=(STEP_40K, STEP_126K, LATE_STEP)) -> pd.DataFrame:
    """Result 5's numbers: each layer norm's mean |weight| (rows, ``diagnosis.LAYER_NORMS``' keys) at ``steps``
    (columns) in seed 1's CPU retrain."""
    return pd.DataFrame({s: [_at(markers, s, c) for c in diagnosis.LAYER_NORMS] for s in steps},
                        index=list(diagnosis.LAYER_NORMS))


def peak_llc_values(llc: pd.DataFrame, stages_run=None) -> dict:
    """Result 6's numbers: λ̂ at ``STEP_40K`` at the stages run's SGLD setting, one ``(seed, operands, λ̂)`` per
    run estimated there (``values``); how many of them lie ``inside`` the paper's seeds' range at 40k (``paper``:
    low, high); and the committed seed-1 run's λ̂ at the paper's 40k (``stages_run``; NaN without it)."""
    at = llc[(llc["step"] == STEP_40K) & (llc["budget"] == diagnosis.budget_label(ICL_LLC_REDUCED))]
    low, high = dev.PAPER_LLC_SEEDS[40_000]
    ours = (float("nan") if stages_run is None else
            llc_at_paper_step(stages_run.llc.dropna(subset=["llc_mean"]), 40_000, dev.PAPER_STEPS))
    return {"step": STEP_40K, "values": [(r.seed, r.operands, r.llc_mean) for r in at.itertuples()],
            "inside": int(at["llc_mean"].between(low, high).sum()), "estimated": len(at), "paper": [low, high],
            "stages_run": ours}


def later_seeds(llc: pd.DataFrame, runs) -> pd.DataFrame:
    """Result 7's table: one row per other float32 GPU-begun seed: the step it has reached, the step from which it
    went on on a CPU (its data drawn there), how many of its kept checkpoints have λ̂ (the stages run's SGLD
    setting) and the step of the highest, its λ̂ at ``STEP_40K`` and ``LATE_STEP`` with their ratio, and at the end
    (NaN where a row is still to come)."""
    budget, rows = diagnosis.budget_label(ICL_LLC_REDUCED), []
    for cfg, stream in runs:
        if stream != "cuda" or cfg.seed == 1 or cfg.matmul_operands != "float32":
            continue
        record = diagnosis.progress(cfg, stream) or {}
        at = llc[(llc["seed"] == cfg.seed) & (llc["data"] == "GPU") & (llc["operands"] == "float32")
                 & (llc["budget"] == budget)].set_index("step")["llc_mean"]
        peak, late, end = (float(at.get(s, float("nan"))) for s in (STEP_40K, LATE_STEP, diagnosis.END_STEP))
        rows.append({"seed": cfg.seed, "step reached": record.get("step", 0),
                     "on a CPU from": record.get("meta", {}).get("data_stream_reseeded_at"),
                     "checkpoints with λ̂": len(at), "λ̂ highest at": at.idxmax() if len(at) else None,
                     f"λ̂ at {STEP_40K:,}": peak, f"λ̂ at {LATE_STEP:,}": late, "ratio": late / peak,
                     f"λ̂ at {diagnosis.END_STEP:,}": end})
    return pd.DataFrame(rows).set_index("seed")


def fall_values(later: pd.DataFrame, stages_run=None) -> dict:
    """Result 7's numbers beside ``later`` (``later_seeds``): the seeds with λ̂ at both ``STEP_40K`` and ``LATE_STEP``
    and their ratios; the paper's seeds' ranges at 40k and 320k and the ratio they allow (low, high); our seed 1's
    λ̂ at the paper's 40k and 320k in the stages run (NaN without it); the seeds ``finished`` and the steps they
    went on on a CPU from; the seeds with λ̂ at the end, and those with it at every one of the ``kept`` checkpoints
    (``complete``) with the step of their highest; the paper's seeds' ranges later (``paper_{k}k``)."""
    fell = later.dropna(subset=["ratio"])
    complete = later[later["checkpoints with λ̂"] == len(diagnosis.KEPT_STEPS)]
    (low40, high40), (low320, high320) = dev.PAPER_LLC_SEEDS[40_000], dev.PAPER_LLC_SEEDS[320_000]
    ours = [float("nan")] * 2
    if stages_run is not None:
        curve = stages_run.llc.dropna(subset=["llc_mean"])
        ours = [llc_at_paper_step(curve, step, dev.PAPER_STEPS) for step in (40_000, 320_000)]
    return {"seeds": fell.index.tolist(), "ratios": fell["ratio"].tolist(), "paper": [low40, high40],
            "paper_late": [low320, high320], "paper_ratio": [low320 / high40, high320 / low40],
            "stages_run": ours[0], "stages_run_late": ours[1], "stages_run_ratio": ours[1] / ours[0],
            "finished": later.index[later["step reached"] >= ICL_PAPER.steps].tolist(),
            "cpu_from": later["on a CPU from"].dropna().tolist(),
            "end_seeds": later.index[later[f"λ̂ at {diagnosis.END_STEP:,}"].notna()].tolist(),
            "kept": len(diagnosis.KEPT_STEPS), "complete": complete.index.tolist(),
            "complete_highest": complete["λ̂ highest at"].tolist()} | {
        f"paper_{s // 1000}k": list(dev.PAPER_LLC_SEEDS[s]) for s in (126_000, 200_000, 320_000, 500_000)}


LONGER_LAST = 800  # the last quarter of the longer chains' draws


def settling(seeds) -> pd.DataFrame:
    """Whether the ``seeds``' chains were still rising over the stages page's window in LR4 (``diagnosis.
    last_draws``): λ̂ over the window and over its last 200 draws at ``LR4_STEP`` and ``LATE_STEP``, then over chains
    4× longer and their last ``LONGER_LAST`` draws at ``LATE_STEP`` and the end; one row per seed with both
    steps, columns (step, reading), NaN where not estimated."""
    short = (("window", "window"), ("last 200 draws", "last draws"))
    longer = (("chains 4× longer", "window"), (f"their last {LONGER_LAST:,} draws", "last draws"))
    columns = [(step, reading, column) for steps, readings in (((LR4_STEP, LATE_STEP), short),
                                                               ((LATE_STEP, diagnosis.END_STEP), longer))
               for step in steps for reading, column in readings]
    rows = {}
    for seed in sorted(seeds):
        reduced = diagnosis.last_draws(diagnosis.variant(seed), "cuda").set_index("step")
        if not {LR4_STEP, LATE_STEP} <= set(reduced.index):
            continue
        longer_chains = diagnosis.last_draws(diagnosis.variant(seed), "cuda", diagnosis.LLC_LONGER,
                                             draws=LONGER_LAST).set_index("step")
        rows[seed] = [(reduced if (reading, column) in short else longer_chains)[column].get(step, float("nan"))
                      for step, reading, column in columns]
    index = pd.MultiIndex.from_tuples([(f"{step:,}", reading) for step, reading, _ in columns],
                                      names=["step", "λ̂ over"])
    return pd.DataFrame(list(rows.values()), index=pd.Index(list(rows), name="seed"), columns=index)


def settling_values(table: pd.DataFrame) -> dict:
    """``settling`` read across its seeds: the seeds, the two steps of the window's check, and each reading's values
    over the seeds (``{reading}_lr4``, ``{reading}_late``, ``{reading}_end``: window, last, longer, longer_last)."""
    steps = {"lr4": LR4_STEP, "late": LATE_STEP, "end": diagnosis.END_STEP}
    readings = {"window": "window", "last": "last 200 draws", "longer": "chains 4× longer",
                "longer_last": f"their last {LONGER_LAST:,} draws"}
    return {"seeds": table.index.tolist(), "lr4_step": LR4_STEP, "late_step": LATE_STEP} | {
        f"{key}_{at}": table[(f"{step:,}", reading)].tolist() for key, reading in readings.items()
        for at, step in steps.items() if (f"{step:,}", reading) in table.columns}


def stages_run():
    """The committed seed-1 run of the paper's configuration that the stages page draws (None before it is)."""
    return stages_page.stored_run("paper")


def provenance_rows(runs, stages_run=None) -> list[dict]:
    """One row per diagnosis run (``diagnosis.progress_table``: step reached, status, seconds per device), then the
    stages run's training and LLC rows (``stages_page.provenance_rows``)."""
    rows = diagnosis.progress_table(runs).to_dict("records")
    return rows + (stages_page.provenance_rows({"paper": stages_run}) if stages_run is not None else [])


def paper_points() -> dict[int, int]:
    """``{kept step: the paper's step}``: each kept checkpoint (``diagnosis.KEPT_STEPS``) within 5% of a step at
    which the paper gives its seeds' λ̂ (``development.PAPER_LLC_SEEDS``)."""
    points = {}
    for paper in dev.PAPER_LLC_SEEDS:
        kept = min(diagnosis.KEPT_STEPS, key=lambda k: abs(k + 1 - paper))
        if abs(kept + 1 - paper) <= 0.05 * paper:
            points[kept] = paper
    return points


def reduced_by_seed(llc: pd.DataFrame) -> dict:
    """``{seed: λ̂ by step}`` at the stages page's reduced budget for every float32 seed (``diagnosis.llc_by_seed``),
    seed 1's from its long run where it has the step (before chains 4x longer replaced those that failed their
    check), else from the retrain's kept checkpoints: the same weights, bit for bit."""
    reduced = diagnosis.llc_by_seed(llc)
    own = long_run.llc_table(ICL_PAPER, ICL_LLC_REDUCED)
    if len(own):
        own = own.set_index(own["step"].astype(int))["llc_mean"]
        reduced[1] = own.combine_first(reduced.get(1, pd.Series(dtype=float)))
    return reduced


def late_llc(llc: pd.DataFrame) -> dict:
    """λ̂ at the reduced budget at the last step seed 1's bfloat16 run has one: ``step``, ``bfloat16`` (that run's)
    and ``seed_{s}`` for each float32 seed with a value there (``reduced_by_seed``); {} without that run."""
    bfloat16 = diagnosis.llc_by_seed(llc, operands="bfloat16").get(1)
    if bfloat16 is None or bfloat16.empty:
        return {}
    step = int(bfloat16.index.max())
    return {"step": step, "bfloat16": float(bfloat16.iloc[-1])} | {
        f"seed_{seed}": float(by_step.loc[step])
        for seed, by_step in reduced_by_seed(llc).items() if step in by_step.index}


PAPER_MIDDLE = "the paper's seeds 0–4, the middle of their range"


def seed_stages(llc: pd.DataFrame, stages_run) -> pd.DataFrame:
    """The stages page's rule (``stages_page.boundaries_by_budget``) on each float32 seed's λ̂ at the kept
    checkpoints where the paper gives its seeds' range (``paper_points``, the reduced budget; a seed without all of
    them is left out), with the step of its highest λ̂; then, as the control of so coarse a grid, the same rule on
    the middle of the paper's seed range at the same steps; then seed 1's whole curve (the stages run's
    checkpoints). ``stages_run``: the committed seed-1 run. One row per curve, indexed by ``(λ̂ of, checkpoints)``:
    "seed N" or ``PAPER_MIDDLE``, and which checkpoints (the grid of the paper's steps, first, or the stages run's
    all); empty where no seed has every step."""
    points = paper_points()
    grid = f"{len(points)}, at the paper's steps"
    curves = {}
    for seed, at in reduced_by_seed(llc).items():
        if set(points) <= set(at.index):
            curves[(f"seed {seed}", grid)] = pd.DataFrame(
                {"step": list(points), "llc_mean": at[list(points)].to_numpy()})
    if not curves or stages_run is None:
        return pd.DataFrame()
    curves[(PAPER_MIDDLE, grid)] = pd.DataFrame({"step": list(points), "llc_mean": [
        sum(dev.PAPER_LLC_SEEDS[paper]) / 2 for paper in points.values()]})
    whole = stages_run.llc.dropna(subset=["llc_mean"])[["step", "llc_mean"]]
    curves[("seed 1", f"all {len(whole)} of the stages run")] = whole
    table = stages_page.boundaries_by_budget(stages_run, dict(enumerate(curves.values())))
    peaks = [int(c.loc[c["llc_mean"].idxmax(), "step"]) for c in curves.values()]
    table.insert(2, "λ̂ highest at", [f"{p:,}" for p in peaks])
    index = pd.MultiIndex.from_tuples(list(curves), names=["λ̂ of", "checkpoints"])
    return table.drop(columns=["λ̂ curve", "checkpoints"]).set_index(index)


def seed_stages_values(table: pd.DataFrame) -> dict:
    """``seed_stages`` read against its control: the stages, boundaries and step of the highest λ̂ the rule finds
    on the middle of the paper's seed range at the paper's steps, and which seeds on the same grid give the same
    boundaries (``same``) or others (``other``)."""
    grid = table.index[0][1]  # the paper's steps, the grid of the seeds and the control
    control = table.loc[(PAPER_MIDDLE, grid)]
    seeds = table.xs(grid, level="checkpoints").drop(PAPER_MIDDLE)
    same = seeds["boundaries found"] == control["boundaries found"]
    return {"stages": int(control["stages"]), "boundaries": control["boundaries found"],
            "highest": control["λ̂ highest at"], "same": seeds.index[same].tolist(),
            "other": seeds.index[~same].tolist()}


def seed_llc_table(llc: pd.DataFrame) -> pd.DataFrame:
    """λ̂ at the kept checkpoints nearest the steps where the paper gives its seeds' λ̂ (``paper_points``), at every
    float32 seed of the paper's configuration with rows, all at the stages page's reduced budget (seed 1's from its
    long run where it has the step, before chains 4x longer replaced those that failed their check, else from the
    retrain's kept checkpoints, the same weights), then each seed's chains 4x longer where they were run
    (``diagnosis.LLC_LONGER``; seed 1's from its budget check), the paper's seed 1 and its seeds 0-4 (reference
    §4.2). Text cells; "–": not estimated."""
    reduced, longer = reduced_by_seed(llc), diagnosis.llc_by_seed(llc, diagnosis.LLC_LONGER)
    check = long_run.budget_table(ICL_PAPER, ICL_LLC_REDUCED)
    if len(check):
        longer[1] = check.set_index(check["step"].astype(int))["longer"]

    def cell(series, step):
        return f"{series[step]:.1f}" if step in series.index else "–"
    rows = []
    for step, paper in paper_points().items():
        low, high = dev.PAPER_LLC_SEEDS[paper]
        label = f"{paper // 1000}k" if paper >= 1000 else f"{paper}"
        rows.append({"step (the paper's)": f"{step:,} ({label})",
                     **{f"seed {s}": cell(reduced[s], step) for s in sorted(reduced)},
                     **{f"seed {s}, chains 4× longer": cell(longer[s], step) for s in sorted(longer)},
                     "paper: seed 1": f"{dev.PAPER_LLC[paper]:.1f}" if paper in dev.PAPER_LLC else "–",
                     "paper: seeds 0–4": f"{low}–{high}"})
    return pd.DataFrame(rows)



def authors_estimator_table(llc: pd.DataFrame) -> pd.DataFrame:
    """λ̂ as the authors' code ran the estimator (``diagnosis.LLC_AS_RUN``: every draw from the first, n = 2²⁰) at
    every float32 seed with such rows, at the kept checkpoints nearest the paper's steps where any seed has one: the
    mean over chains ± their standard deviation, then each seed's λ̂ at the end ÷ at 40k where it has both; beside
    the paper's seeds 0–4. Text cells; "–": not estimated. Empty without such rows."""
    rows = llc[(llc["budget"] == diagnosis.budget_label(diagnosis.LLC_AS_RUN)) & (llc["operands"] == "float32")] \
        if not llc.empty else llc
    if rows.empty:
        return pd.DataFrame()
    at = {int(seed): t.set_index(t["step"].astype(int)) for seed, t in rows.groupby("seed")}
    points = {step: paper for step, paper in paper_points().items() if any(step in t.index for t in at.values())}
    table = []
    for step, paper in points.items():
        low, high = dev.PAPER_LLC_SEEDS[paper]
        label = f"{paper // 1000}k" if paper >= 1000 else f"{paper}"
        table.append({"step (the paper's)": f"{step:,} ({label})",
                      **{f"seed {s}": f"{t.loc[step, 'llc_mean']:.1f} ± {t.loc[step, 'llc_std']:.1f}"
                         if step in t.index else "–" for s, t in sorted(at.items())},
                      "paper: seeds 0–4": f"{low}–{high}"})
    end, peak = diagnosis.END_STEP, diagnosis.STEP_40K
    fall = fall_claim()  # its band: the paper's seeds
    table.append({"step (the paper's)": "end ÷ 40k",
                  **{f"seed {s}": f"{t.loc[end, 'llc_mean'] / t.loc[peak, 'llc_mean']:.2f}"
                     if {end, peak} <= set(t.index) else "–" for s, t in sorted(at.items())},
                  "paper: seeds 0–4": "–".join(f"{v:.2f}" for v in fall.reproduced)})
    return pd.DataFrame(table)


def fall_claim():
    """The stages claim on λ̂'s fall from 40k to the end (``FALL_CLAIM``); its band is the paper's seeds' range."""
    return next(c for c in claims_of(stages_page.FIGURE) if c.metric == FALL_CLAIM)


def seed_curves(llc: pd.DataFrame, stages_run) -> dict:
    """``{seed: λ̂ by step}`` of the paper's configuration at the stages page's budget: seed 1's from the stages run
    (``stages_run``, every checkpoint it estimated), the other seeds' at their kept checkpoints (``llc``:
    ``diagnosis.llc_rows``)."""
    curves = diagnosis.llc_by_seed(llc)
    if stages_run is not None:
        curves[1] = stages_run.llc.dropna(subset=["llc_mean"]).set_index("step")["llc_mean"].sort_index()
    return curves


def fall_texts(falls: dict[int, float]) -> dict[str, str]:
    """The fall of λ̂ by the authors' estimator (``diagnosis.as_run_falls``) as the stages page glues it:
    ``fall_seeds`` ("0, 1 and 2"), ``fall_values`` ("0.71 at seed 0, …") and ``fall_band``, the paper's seeds'
    range ("0.68–0.83")."""
    claim = fall_claim()
    return {"fall_seeds": listed(sorted(falls), empty="none"),
            "fall_values": listed([f"{falls[s]:.2f} at seed {s}" for s in sorted(falls)], empty="–"),
            "fall_band": "–".join(f"{v:.2f}" for v in claim.reproduced)}


def estimator_values() -> tuple[pd.DataFrame, dict]:
    """Result 8's numbers: seed 1's λ̂ (the CPU retrain) as the authors ran the estimator, one row per step with
    the chains read over every draw, the stages page's window and the draws after the first 1,000 steps
    (``diagnosis.estimator_windows``); and each reading's ratio from ``STEP_40K`` to ``LATE_STEP`` beside the
    paper's seed 1's from 40k to 320k: ``all`` (every draw), ``window``, ``after`` and ``paper``."""
    windows = diagnosis.estimator_windows(diagnosis.variant(1)).set_index("step")
    at = windows.reindex([STEP_40K, LATE_STEP])
    falls = at.iloc[1] / at.iloc[0]
    return windows, {"all": falls["authors' window"], "window": falls["stages page's window"],
                     "after": falls["after 1,000 steps"], "paper": dev.PAPER_LLC[320_000] / dev.PAPER_LLC[40_000]}


def page_values(markers: pd.DataFrame, runs, llc: pd.DataFrame, stages_run=None) -> tuple[dict, dict]:
    """The results' numbers as the page's Markdown pastes them, ``{glue name: text}`` (a number or the range of
    several by its format, a list of seeds, a row of layer norms), and the tables the page shows under
    ``later``, ``settling``, ``windows`` and ``seed_stages``."""
    retrain, seeds = diagnosis.retrain_check(), seed_values(markers, runs)
    precision, ood = precision_values(markers, llc), ood_values(markers)
    peak, norms = peak_llc_values(llc, stages_run), layer_norm_values(markers)
    later = later_seeds(llc, runs)
    falls = fall_values(later, stages_run)
    settle_table = settling(falls["seeds"])
    settled = settling_values(settle_table)
    windows, estimator = estimator_values()
    stages_table = seed_stages(llc, stages_run)
    stages_found = seed_stages_values(stages_table)
    numbers = {  # {format: {glue name: a number, or the numbers whose range the page gives}}
        "{:,.0f}": {"r1_steps": retrain["steps compared"], "r1_last": retrain["last step"]}
        | {f"r2_{k}": seeds[k] for k in ("step", "held_out", "gpu_runs", "gpu_seconds", "gpu_steps")}
        | {f"r3_{k}": precision[k] for k in ("pairs", "last_step", "llc_step")}
        | {"r4_step": ood["step"], "r4_late_step": ood["late_step"], "r6_step": peak["step"],
           "r6_inside": peak["inside"], "r6_estimated": peak["estimated"], "r6_paper": peak["paper"],
           "r7_step": STEP_40K, "r7_late_step": LATE_STEP, "r7_cpu_from": falls["cpu_from"], "r7_kept": falls["kept"],
           "r7_complete_highest": falls["complete_highest"], "r7s_lr4_step": settled["lr4_step"],
           "r7s_late_step": settled["late_step"], "r8_step": STEP_40K, "r8_late_step": LATE_STEP}
        | {f"r7_{k}": falls[k]
           for k in ("paper", "paper_late", "paper_126k", "paper_200k", "paper_320k", "paper_500k")},
        "{:.1g}": {"r1_loss": retrain["max |Δ loss|"], "r1_norm": retrain["max |Δ weight norm|"]},
        "{:.2f}": {"r2_paper_loss": seeds["paper_loss"], "r4_gap": ood["gap"]}
        | {f"r7_{k}": falls[k] for k in ("ratios", "paper_ratio", "stages_run_ratio")}
        | {f"r8_{k}": v for k, v in estimator.items()},
        "{:.3f}": {"r2_paper_delta": seeds["paper_delta"]}
        | {f"r2_{k}": seeds[k] for k in ("others_loss", "others_delta", "seed1_loss", "seed1_delta", "retrain_loss",
                                        "retrain_delta")},
        "{:.4f}": {"r3_loss_gap": precision["loss_gap"], "r3_delta_gap": precision["delta_gap"]},
        "{:.0%}": {"r3_loss_share": precision["loss_share"], "r3_delta_share": precision["delta_share"]},
        "{:.1f}": {f"r3_{k}": precision[k] for k in ("llc_float32", "llc_bfloat16", "llc_others")}
        | {f"r4_{k}": ood[k] for k in ("seed1", "seed1_late", "paper", "paper_late", "others", "others_late")}
        | {"r6_stages_run": peak["stages_run"], "r7_stages_run": falls["stages_run"],
           "r7_stages_run_late": falls["stages_run_late"]}
        | {f"r7s_{k}": v for k, v in settled.items() if k not in ("seeds", "lr4_step", "late_step")},
    }
    seed_lists = {"r2_other_seeds": seeds["other_seeds"], "r4_late_seeds": ood["late_seeds"],
                  "r7_seeds": falls["seeds"], "r7_finished": falls["finished"], "r7_end_seeds": falls["end_seeds"],
                  "r7_complete": falls["complete"],
                  "r7s_seeds": settled["seeds"], "st_same": stages_found["same"], "st_other": stages_found["other"]}
    texts = {name: pages.value_range(np.ravel(value), fmt) for fmt, values in numbers.items()
             for name, value in values.items()}
    texts |= {name: listed(str(s).removeprefix("seed ") for s in value) for name, value in seed_lists.items()}
    texts |= {f"r5_{k}": " → ".join(pages.value_range([v]) for v in row) for k, row in norms.iterrows()}
    texts |= {"r5_steps": listed(norms.columns, "{:,}"),
              "r6_values": listed([f"{v:.1f} (seed {s}, {o})" for s, o, v in peak["values"]]),
              "st_stages": str(stages_found["stages"]), "st_boundaries": stages_found["boundaries"],
              "st_highest": stages_found["highest"]}
    return texts, {"later": later, "settling": settle_table, "windows": windows, "seed_stages": stages_table}


def styled(table: pd.DataFrame):
    """The hypotheses table as the page shows it: left-aligned text, no index."""
    left = [{"selector": "th", "props": [("text-align", "left")]}]
    return table.style.hide(axis="index").set_properties(**{"text-align": "left"}).set_table_styles(left)

