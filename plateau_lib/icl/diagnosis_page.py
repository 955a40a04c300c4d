"""The stages page's differential diagnosis (why λ̂ barely falls in LR3–LR4 at our seed 1; the page
``notebooks/icl_stages_diagnosis.ipynb``): its figure and its hypotheses, each with its test, its cost and its
result, the results computed from the committed runs (``icl.diagnosis``), none typed; λ̂ at every seed."""
from __future__ import annotations

import pandas as pd

from plateau_lib.book import plots
from plateau_lib.icl import development as dev, diagnosis, long_run, stages_page
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


def _range(d: dict, fmt: str) -> str:
    return f"{d['others low']:{fmt}}–{d['others high']:{fmt}}"


def hypotheses(markers: pd.DataFrame, llc: pd.DataFrame, runs, stages_run=None) -> pd.DataFrame:
    """The diagnosis so far: one row per hypothesis (cheapest and most likely first), its result computed;
    ``stages_run``: the committed seed-1 run (``long_run.finished_run``), None where it is not committed."""
    loss, delta = (diagnosis.seed_spread(markers, STEP_40K, c) for c in ("loss", "delta_ridge"))
    gaps = {c: diagnosis.precision_gap(markers, c) for c in ("loss", "delta_ridge")}
    check = diagnosis.retrain_check()
    progress = diagnosis.progress_table(runs)
    gpu = progress[progress["run"].str.contains("GPU")]
    gpu_seconds = max(diagnosis.progress(c, s).get("seconds_by_device", {}).get("cuda", 0.0)
                      for c, s in runs if s == "cuda")
    retrain = markers[(markers["data"] == "CPU") & (markers["seed"] == 1) & (markers["step"] == STEP_40K)]
    cpu_run = (diagnosis.committed_evals(STEP_40K) if retrain.empty else
               {"loss": float(retrain["loss"].iloc[0]), "delta_ridge": float(retrain["delta_ridge"].iloc[0])})
    cpu_where = ("the committed CPU run (its own data and held-out set)" if retrain.empty else
                 "the CPU retrain (the committed run's data, the same held-out set)")
    at_40k = (llc[(llc["step"] == STEP_40K) & (llc["budget"] == diagnosis.budget_label(ICL_LLC_REDUCED))]
              if not llc.empty else llc)  # the stages run's setting; the estimator-as-run rows have their own row
    paper_low, paper_high = dev.PAPER_LLC_SEEDS[40_000]
    if at_40k.empty:
        llc_result = "Not estimated yet (4 chains × 800 draws, about 9 CPU-minutes a seed)."
    else:
        values = ", ".join(f"{r.llc_mean:.1f} (seed {r.seed}, {r.operands})" for r in at_40k.itertuples())
        inside = sum(paper_low <= v <= paper_high for v in at_40k["llc_mean"])
        ours = ("" if stages_run is None else f"; the committed seed-1 run (CPU data): "
                f"{llc_at_paper_step(stages_run.llc.dropna(subset=['llc_mean']), 40_000, dev.PAPER_STEPS):.1f}")
        llc_result = (f"λ̂ at step {STEP_40K:,}: {values}; {inside} of {len(at_40k)} inside the paper's seeds "
                      f"({paper_low}–{paper_high}){ours}.")
    retrain_note = ("In progress: no state saved yet." if not check["steps compared"] else
               f"{check['steps compared']} evaluations compared up to step {check['last step']:,}: largest "
               f"difference {check['max |Δ loss|']:.1g} in loss, {check['max |Δ weight norm|']:.1g} in weight norm.")
    rows = [
        ("The retrain is the committed run", "Retrain seed 1 with the same code and seed, keeping a dozen "
         "checkpoints; compare its evaluations with the committed run's", "about 5 CPU-hours (one core)",
         retrain_note),
        ("Our seed 1 is a slow initialisation (PyTorch's seed 1 is not the authors' seed 1)",
         "Train seeds 0–4 and score every kept checkpoint on one common held-out set of "
         f"{int(markers['n'].iloc[0]):,} sequences",
         f"{gpu_seconds:,.0f} s of one H100 GPU: {len(gpu)} runs stacked, to step "
         f"{int(gpu['step reached'].min()):,}–{int(gpu['step reached'].max()):,}",
         f"At step {STEP_40K:,} (the paper: loss {dev.PAPER_EVAL_LOSS[40_000]:.2f}, Δ to ridge "
         f"{dev.PAPER_DELTA_RIDGE[40_000]:.3f}) seeds {', '.join(str(s) for s in loss['seeds'] if s != 1)} give loss "
         f"{_range(loss, '.3f')} and Δ to ridge {_range(delta, '.3f')}; seed 1 gives {loss['seed 1']:.3f} and "
         f"{delta['seed 1']:.3f} with the GPU's data, and {cpu_where} "
         f"{cpu_run['loss']:.3f} and {cpu_run['delta_ridge']:.3f}. The lag is our seed 1's, not the setup's."),
        ("The TPU's bfloat16 matrix products", "Seeds 0–2 again with every product's operands rounded to bfloat16 "
         "(forward and backward, float32 sums: XLA's default on a TPU)", "the same GPU run; then seed 1's float32 "
         "and bfloat16 runs past 126k on a CPU core (about 2 CPU-hours with their λ̂)",
         f"Over {gaps['loss']['pairs']} matched checkpoints to step {gaps['loss']['last step']:,} bfloat16 moves the "
         f"loss by at most {gaps['loss']['max gap']:.4f} and Δ to ridge by at most "
         f"{gaps['delta_ridge']['max gap']:.4f}: never more than {gaps['loss']['max share of seed sd']:.0%} and "
         f"{gaps['delta_ridge']['max share of seed sd']:.0%} of the float32 seeds' sd at the same step. "
         f"{precision_llc_result(llc)}"),
        ("Our OOD-input loss is not the authors' measure",
         "Score every kept checkpoint again as the authors' notebook did: g = 5, noise of std 0.125 (not variance)",
         "seconds a checkpoint", ood_result(markers)),
        ("The layer norms do not collapse in our run", "Each layer norm's mean |weight| at every kept checkpoint",
         "seconds a checkpoint", layer_norm_result(markers)),
        ("λ̂ at the peak depends on the seed", "λ̂ at the 40k checkpoint of every seed, the stages run's SGLD "
         "setting", "about 9 CPU-minutes a run", llc_result),
        ("λ̂ falls in LR3–LR4 at the other seeds", "Seeds 0 and 2 go on from their GPU states on a CPU core (data "
         "drawn there from then on), seeds 3 and 4 wait for a GPU; λ̂ at every kept checkpoint",
         "5.4 CPU-hours a seed from 85k to 500k (one core, measured), 9 CPU-minutes a λ̂, 32 with chains 4× longer",
         later_seeds_result(llc, runs, stages_run)),
        ("The estimator as the authors ran it", "No burn-in, losses from the SGLD minibatches, n = 2²⁰, 5,000 "
         "draws, at 40k, 320k and 500k: 2 chains on a CPU (the full 10 in a GPU lease); the same chains read "
         "over the stages page's window too", "about 22 CPU-minutes a checkpoint (one core, measured at 40k)", estimator_result()),
    ]
    return pd.DataFrame(rows, columns=["hypothesis", "test", "cost", "result"])


def overview(table: pd.DataFrame) -> pd.DataFrame:
    """The ``hypotheses`` table without its results (they are ``findings``), numbered as ``findings`` numbers
    them."""
    shown = table[["hypothesis", "test", "cost"]].copy()
    shown.insert(0, "#", range(1, len(shown) + 1))
    return shown


def findings(table: pd.DataFrame) -> str:
    """The ``hypotheses`` table's results, one numbered paragraph each under its hypothesis (markdown)."""
    return "\n\n".join(f"**{i}. {r.hypothesis}.** {r.result}" for i, r in enumerate(table.itertuples(), start=1))


def stages_run():
    """The committed seed-1 run of the paper's configuration that the stages page draws (None before it is)."""
    return stages_page.stored_run("paper")


def provenance_rows(runs, stages_run=None) -> list[dict]:
    """One row per diagnosis run (``diagnosis.progress_table``: step reached, status, seconds per device), then the
    stages run's training and LLC rows (``stages_page.provenance_rows``)."""
    rows = diagnosis.progress_table(runs).to_dict("records")
    return rows + (stages_page.provenance_rows({"paper": stages_run}) if stages_run is not None else [])


def _at(markers: pd.DataFrame, step: int, column: str, data: str = "CPU", seed: int = 1) -> float:
    row = markers[(markers["data"] == data) & (markers["seed"] == seed) & (markers["operands"] == "float32")
                  & (markers["step"] == step)]
    return float(row[column].iloc[0]) if len(row) else float("nan")


def ood_result(markers: pd.DataFrame) -> str:
    """The hypotheses table's result for the OOD-input loss computed the authors' way (seed 1, the CPU retrain;
    the other seeds at 40k)."""
    column = "loss_ood_inputs_authors"
    ours, theirs = (_at(markers, s, column) for s in (STEP_40K, LATE_STEP)), (PAPER_OOD_40K, PAPER_OOD_LATE)
    ours = tuple(ours)
    if any(pd.isna(v) for v in ours):
        return "Open: the CPU retrain's checkpoints are not scored yet."
    gap = max(abs(markers[column] - markers["loss_ood_inputs"]))
    others = diagnosis.seed_spread(markers, STEP_40K, column)
    others_at = {step: markers[(markers["step"] == step) & (markers["data"] == "GPU") & (markers["seed"] != 1)
                               & (markers["operands"] == "float32")] for step in (LATE_STEP, LR4_STEP)}
    step, later = next(((k, v) for k, v in others_at.items() if not v.empty), (LR4_STEP, others_at[LR4_STEP]))
    rise = ("" if later.empty else f" By step {step:,} the other seeds' loss rises to "
            f"{later[column].min():.1f}–{later[column].max():.1f} (seeds {', '.join(map(str, sorted(later['seed'])))}), "
            f"where seed 1's falls to {_at(markers, step, column):.1f}: the paper's loss of robustness appears "
            f"at the other seeds.")
    return (f"Their way moves our values by at most {gap:.2f}. Seed 1's loss goes from {ours[0]:.1f} at step "
            f"{STEP_40K:,} to {ours[1]:.1f} at {LATE_STEP:,}, where the paper's rises from {theirs[0]:.1f} to "
            f"{theirs[1]:.1f}: the direction differs on the same measure. At {STEP_40K:,} the other seeds give "
            f"{_range(others, '.1f')}, at the paper's {theirs[0]:.1f}; seed 1 does not.{rise}")


def layer_norm_result(markers: pd.DataFrame) -> str:
    """The hypotheses table's result for the layer-norm collapse (seed 1, the CPU retrain)."""
    steps = (STEP_40K, STEP_126K, LATE_STEP)
    values = {c: [_at(markers, s, c) for s in steps] for c in diagnosis.LAYER_NORMS}
    if any(pd.isna(v) for vs in values.values() for v in vs):
        return "Open: the CPU retrain's checkpoints are not scored yet."
    shown = "; ".join(f"{name} {' → '.join(f'{v:.2f}' for v in values[c])}" for c, name in
                      (("ln_f", "final LN"), ("ln_attn_1", "first attention's"), ("ln_mlp_1", "first MLP's"),
                       ("ln_attn_2", "second attention's"), ("ln_mlp_2", "second MLP's")))
    return (f"Mean |weight| at steps {', '.join(f'{s:,}' for s in steps)}: {shown}. The final LN collapses in "
            f"LR3 and the others follow in LR4, most the first attention's, the second MLP's not at all: the "
            f"paper's description (App. D). The structure develops; λ̂ does not follow it.")


def precision_llc_result(llc: pd.DataFrame, step: int = STEP_126K) -> str:
    """The precision hypothesis's λ̂ part: seed 1's two GPU-begun runs, float32 and bfloat16 (the same
    initialisation and data to 85k, each carried on with a CPU's data), at ``step`` at the stages run's SGLD
    budget, against the other seeds' spread there."""
    budget = diagnosis.budget_label(ICL_LLC_REDUCED)
    at = (llc[(llc["step"] == step) & (llc["budget"] == budget) & (llc["data"] == "GPU")] if not llc.empty
          else llc)
    pair = {r.operands: r.llc_mean for r in at[at["seed"] == 1].itertuples()}
    if set(pair) != {"float32", "bfloat16"}:
        return "Not the cause so far; λ̂ of the bfloat16 runs is still to come."
    others = at[(at["seed"] != 1) & (at["operands"] == "float32")]["llc_mean"]
    spread = (f"; the other seeds' float32 runs give {others.min():.1f}–{others.max():.1f}" if len(others) > 1
              else "")
    return (f"At step {step:,}, seed 1 gives λ̂ {pair['float32']:.1f} in float32 and {pair['bfloat16']:.1f} in "
            f"bfloat16 (the same start, each carried on from 85k with its own CPU-drawn data){spread}. Not the "
            "cause so far.")


def later_seeds_result(llc: pd.DataFrame, runs, stages_run=None) -> str:
    """The hypotheses' result for λ̂ through LR3–LR4 at the other seeds (markdown, in paragraphs once it falls):
    where each float32 GPU-begun run stands, its λ̂ rows (the stages run's SGLD setting), and, where a seed has λ̂ at both 40,292 and ``LATE_STEP``,
    its fall against the paper's seeds' and our seed 1's (``stages_run``: the committed stages run)."""
    parts, falls = [], {}
    for cfg, stream in runs:
        if stream != "cuda" or cfg.seed == 1 or cfg.matmul_operands != "float32":
            continue
        record = diagnosis.progress(cfg, stream) or {}
        # a run in progress keeps the step its data were reseeded at on top; a finished one in its meta
        reseeded = record.get("data_stream_reseeded_at") or record.get("meta", {}).get("data_stream_reseeded_at")
        where = f"step {record.get('step', 0):,}" + (f", on a CPU from {reseeded:,}" if reseeded else "")
        rows = llc[(llc["seed"] == cfg.seed) & (llc["data"] == "GPU") & (llc["operands"] == "float32")
                   & (llc["budget"] == diagnosis.budget_label(ICL_LLC_REDUCED))].set_index("step")["llc_mean"]
        values = ", ".join(f"{v:.1f} at {step:,}" for step, v in rows[rows.index > STEP_40K].sort_index().items())
        parts.append(f"seed {cfg.seed}: {where}" + (f"; λ̂ {values}" if values else ""))
        if {STEP_40K, LATE_STEP} <= set(rows.index):
            falls[cfg.seed] = (rows[STEP_40K], rows[LATE_STEP])
    paper = "; ".join(f"{dev.PAPER_LLC_SEEDS[s][0]}–{dev.PAPER_LLC_SEEDS[s][1]} at {s // 1000}k"
                      for s in (126_000, 200_000, 320_000, 500_000))
    if not falls:
        return f"Open. {'; '.join(parts) or 'No run yet'}. The paper's seeds: {paper}."
    (low40, high40), (low320, high320) = dev.PAPER_LLC_SEEDS[40_000], dev.PAPER_LLC_SEEDS[320_000]
    shown = "; ".join(f"seed {seed} {a:.1f} → {b:.1f} (× {b / a:.2f})" for seed, (a, b) in sorted(falls.items()))
    ours = ""
    if stages_run is not None:
        curve = stages_run.llc.dropna(subset=["llc_mean"])
        a, b = (llc_at_paper_step(curve, step, dev.PAPER_STEPS) for step in (40_000, 320_000))
        ours = f"; our seed 1 (the stages run) {a:.1f} → {b:.1f} (× {b / a:.2f})"
    settling = settling_note(falls).strip()
    return (f"Falls at the other seeds. λ̂ from step {STEP_40K:,} to {LATE_STEP:,}: {shown}; the paper's seeds "
            f"{low40}–{high40} → {low320}–{high320} (× {low320 / high40:.2f}–{high320 / low40:.2f}){ours}. "
            f"The fall in LR3–LR4 is the configuration's; our seed 1 misses it."
            + (f"\n\n{settling}" if settling else "")
            + f"\n\nWhere the runs stand: {'; '.join(parts)}. The paper's seeds later: {paper}.")


LONGER_LAST = 800  # the last quarter of the longer chains' draws


def settling_note(seeds) -> str:
    """Whether the other ``seeds``' chains were still rising over the stages page's window in LR4 (``diagnosis.
    last_draws``): then the window reads λ̂ low there, and the last draws bound how much."""
    late = {s: diagnosis.last_draws(diagnosis.variant(s), "cuda").set_index("step") for s in sorted(seeds)}
    late = {s: t.loc[[LR4_STEP, LATE_STEP]] for s, t in late.items() if {LR4_STEP, LATE_STEP} <= set(t.index)}
    if not late:
        return ""
    shown = "; ".join(f"seed {s} " + " and ".join(f"{r['last draws']:.1f} (window {r['window']:.1f})"
                                                   for _, r in t.iterrows()) for s, t in late.items())
    low, high = dev.PAPER_LLC_SEEDS[320_000]
    last = " and ".join(f"{t.loc[LATE_STEP, 'last draws']:.1f}" for t in late.values())
    longer = {s: diagnosis.last_draws(diagnosis.variant(s), "cuda", diagnosis.LLC_LONGER, draws=LONGER_LAST)
              .set_index("step") for s in late}
    end = ""
    for step, where in ((LATE_STEP, f"At {LATE_STEP:,}"), (diagnosis.END_STEP, "At the end")):
        rows = {s: t.loc[step] for s, t in longer.items() if step in t.index}
        end += ("" if not rows else f" {where}, chains 4× longer read " + " and ".join(
            f"{r['window']:.1f} (seed {s}; their last {LONGER_LAST} draws {r['last draws']:.1f})"
            for s, r in rows.items()) + ": still rising, so λ̂ there is a lower bound.")
    return (f"The chains are still rising at the end of the window at {LR4_STEP:,} and {LATE_STEP:,}, as seed 1's "
            f"were at 320k: their last 200 draws alone read {shown}, so the window reads the fall somewhat deep. At "
            f"{LATE_STEP:,} the last draws give {last}; the paper's seeds {low}–{high}.{end} ")


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


def seed_stages_note(table: pd.DataFrame) -> str:
    """``seed_stages`` in words: what the rule finds on the paper's own values at the same steps, then at each
    seed on the same grid (markdown)."""
    if table.empty:
        return "No seed has λ̂ at every one of these steps yet."
    grid = table.index[0][1]  # the paper's steps, the grid of the seeds and the control
    control = table.loc[(PAPER_MIDDLE, grid)]

    def found(r):
        where = ("no boundary" if r["boundaries found"] == "none" else
                 f"boundar{'y' if r['stages'] == 2 else 'ies'} at {r['boundaries found']}")
        return f"{r['stages']} stages ({where}; λ̂ highest at {r['λ̂ highest at']})"
    seeds = table.xs(grid, level="checkpoints").drop(PAPER_MIDDLE)
    same = [name for name, r in seeds.iterrows() if r["boundaries found"] == control["boundaries found"]]
    return (f"On the middle of the paper's seed range at these steps the rule finds {found(control)}. "
            + " ".join(f"At {name}: {found(r)}." for name, r in seeds.iterrows())
            + (f" The same boundaries as the paper's values at this grid: {', '.join(same)}." if same else
               " No seed gives the paper's values' boundaries at this grid."))


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


def estimator_result() -> str:
    """The hypotheses table's result for the estimator as the authors ran it (seed 1, the CPU retrain)."""
    windows = diagnosis.estimator_windows(diagnosis.variant(1))
    if windows.empty:
        return "Open: not estimated yet."
    values = "; ".join(f"step {r[0]:,}: {r[1]:.1f} over every draw, {r[2]:.1f} over the stages page's window, "
                       f"{r[3]:.1f} after the first 1,000 steps" for r in windows.itertuples(index=False))
    at = windows.set_index("step")
    if {STEP_40K, LATE_STEP} <= set(at.index):
        falls = at.loc[LATE_STEP] / at.loc[STEP_40K]
        values += (f". From {STEP_40K:,} to {LATE_STEP:,} λ̂ falls to {falls.iloc[0]:.2f} of its value over every "
                   f"draw, {falls.iloc[1]:.2f} over the stages page's window and {falls.iloc[2]:.2f} after the first "
                   f"1,000 steps (the paper: {dev.PAPER_LLC[320_000] / dev.PAPER_LLC[40_000]:.2f}). Averaging from the "
                   f"first draw does not make the paper's fall")
    return values + "."


def styled(table: pd.DataFrame):
    """The hypotheses table as the page shows it: left-aligned text, no index."""
    left = [{"selector": "th", "props": [("text-align", "left")]}]
    return table.style.hide(axis="index").set_properties(**{"text-align": "left"}).set_table_styles(left)

