"""The stages page of Hoogland et al. (``notebooks/icl_stages.ipynb``): the run's configuration, its stages
against the paper's, the figure of λ̂ and the markers, the checkpoint widget, verdicts and provenance.

A shorter run than the paper's 500k steps is compared **at the same fraction of the schedule**: the one-cycle
triangle (0 → lr at half-way → 0) is the paper's stretched, so step s of an N-step run is put beside the
paper's step s × 500k / N (``to_paper_step``). That comparison is a convention of this page, not a claim that
development runs at the same pace in a shorter run; the page says so wherever it uses it.
"""
from __future__ import annotations

import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from plateau_lib.book import summaries as report
from plateau_lib.book.benchmarks import load_benchmarks
from plateau_lib.book.pages import verdicts
from plateau_lib.book.plots import PAGE_WIDTH, PAPER_COLOUR
from plateau_lib.engine import cache
from plateau_lib.engine.presets import log_linear_steps
from plateau_lib.engine.stages import gp_stage_boundaries, slope_sign_changes
from plateau_lib.icl import development, long_run
from plateau_lib.icl.claims import claims_of
from plateau_lib.icl.development import (PAPER_BOUNDARIES, PAPER_DELTA_RIDGE, PAPER_EVAL_LOSS, PAPER_LLC, PAPER_LLC_SEEDS,
                                         PAPER_POINTS, PAPER_STEPS, PAPER_WEIGHT_NORM)
from plateau_lib.icl.presets import ICL_CHECKPOINTS, ICL_LLC_PAPER, ICL_LLC_REDUCED, ICL_PAPER, ICL_STAGES, icl_stages
from plateau_lib.llc import LLCWarning

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


def settings_table(cfg, llc: dict) -> pd.DataFrame:
    """This run's training and SGLD settings beside the paper preset's (which follow the reference)."""
    ours, ref = cfg.to_dict(), ICL_PAPER.to_dict()
    rows = [{"setting": f"training {k}", "this run": ours[k], "paper": ref[k]} for k in SETTINGS]
    rows.append({"setting": "checkpoints (LLC at each)", "this run": len(cfg.checkpoint_steps),
                 "paper": len(ICL_PAPER.checkpoint_steps)})
    rows += [{"setting": f"SGLD {k}", "this run": llc.get(k), "paper": ICL_LLC_PAPER.get(k)} for k in SGLD]
    table = pd.DataFrame(rows).set_index("setting").astype(str)
    table["changed"] = np.where(table["this run"] != table["paper"], "≠", "")
    return table


# Wall times measured for the presets (training + LLC at every checkpoint, one thread).
EXPECTED = {"cpu": "about 2.5 minutes with a core to itself (55 s training, 96 s LLC), 4-5 minutes when the 2 cores "
                   "are shared",
            "cpu_long": "about 2 hours on 2 CPU cores (the issue's budget; run it in the background with "
                        "`python -m plateau_lib.icl.development --preset cpu_long`)",
            "paper": "many hours on a CPU: produce it on a GPU through the `make paper` queue"}


def expected_time_note(preset: str, cfg, llc: dict, use_cache: bool) -> str:
    """A sentence with the expected time when this build is about to compute the run, else ''."""
    k = development.key(cfg, llc)
    stored = any((base / f"{development.KIND}-{k}" / "meta.json").exists() for base in (cache.COMMITTED, cache.LOCAL))
    if use_cache and stored:
        return ""
    return (f"Computing the `{preset}` run now: expect {EXPECTED.get(preset, 'a while')} (for the preset's "
            "settings; other knobs scale it). " + (paper_cost() if preset == "paper" else "")).strip()


def other_runs(live_preset: str) -> dict:
    """``{preset: Development}`` of the stored long runs ("cpu_long", "paper") other than the live one; a
    preset with no stored result is left out (``missing_note`` says so). Without a run at the paper's SGLD
    budget, "paper" is the paper's training run made on a CPU with λ̂ at a reduced budget, once it is finished."""
    found = {}
    for preset in ("cpu_long", "paper"):
        if preset != live_preset:
            dev = development.load(*icl_stages(preset))
            if dev is None and preset == "paper":
                dev = long_run.finished_run(ICL_PAPER, ICL_LLC_REDUCED)
            if dev is not None:
                found[preset] = dev
    return found


def made_on_cpu(dev) -> bool:
    """Whether ``dev`` is the paper's run made on a CPU across work sessions (``icl.long_run``)."""
    return dev is not None and dev.meta.get("made_by") == "plateau_lib.icl.long_run"


def missing_note(preset: str) -> str:
    """The sentence shown in place of a run that has no stored result."""
    if preset == "cpu_long":
        return ("**The long CPU run is not committed yet.** It (the paper's model, 20k steps, LLC at 27 checkpoints) "
                "is being computed in the background; its figures appear here once it is in `results/`.")
    return ("**No `paper`-preset run yet.** The 500k-step run with the reference's SGLD settings is produced on a "
            "GPU by the `make paper` queue; until it is committed, this page shows only CPU runs. " + paper_cost())


def _duration(seconds: float) -> str:
    for limit, unit, size in ((120, "s", 1), (7_200, "min", 60), (259_200, "h", 3_600)):
        if seconds < limit:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds / 86_400:,.0f} days"


def paper_cost(folder=None) -> str:
    """What the benchmark record ``icl.json`` (``benchmarks/icl_bench.py``) says the ``paper`` preset costs on
    each device it was measured on, extrapolated from short timed runs; '' without a record."""
    _, _, ratios = load_benchmarks(folder)
    values = ratios[ratios["benchmark"] == "icl"].set_index("ratio")["value"]
    parts = []
    for prefix, device in (("gpu", "a GPU"), ("cpu", "one CPU core")):
        train = values.filter(regex=f"^{prefix}_paper_training_.*_extrapolated_s$")
        every = values.filter(regex=f"^{prefix}_paper_llc_\\d+_checkpoints_extrapolated_s$")
        one = values.get(f"{prefix}_paper_llc_one_checkpoint_extrapolated_s")
        if len(train) and len(every) and one is not None:
            parts.append(f"on {device}, the training takes about {_duration(train.iloc[0])} and λ̂ about "
                         f"{_duration(one)} per checkpoint ({_duration(every.iloc[0])} for all of them)")
    if not parts:
        return ""
    gpu = "" if parts[0].startswith("on a GPU") else " No GPU has been timed yet."
    return ("Timed on short runs and multiplied out (`benchmarks/icl_bench.py`, on the Performance page): "
            + "; ".join(parts) + "." + gpu)


def richest(shown: dict) -> str:
    """The preset of the longest run in ``{preset: Development}`` (the widget shows it)."""
    return max(shown, key=lambda p: run_steps(shown[p]))


def develop(cfg, llc: dict, use_cache: bool = True, progress: bool = True):
    """``development.run`` with the estimator's negative-λ̂ warnings kept off the page (λ̂ < 0 near
    initialisation is expected; ``negative_note`` reports it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LLCWarning)
        return development.run(cfg, llc, use_cache=use_cache, progress=progress)


def negative_note(dev) -> str:
    """A sentence on the checkpoints with λ̂ < 0, or ''."""
    neg = dev.llc.loc[dev.llc["llc_mean"] < 0, "step"].astype(int).tolist()
    if not neg:
        return ""
    return (f"λ̂ is negative at step(s) {neg}: there the chains found a lower loss than at the checkpoint, which "
            "is not a local minimum (the paper's seed 1 also reads −0.7 at step 0).")


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


def boundaries_by_budget(dev, curves: dict) -> pd.DataFrame:
    """The stages found on each λ̂ curve of ``curves`` (``{budget: λ̂ rows}``, ``long_run.budget_curves``) of run
    ``dev``, by the page's one rule: the boundaries, the number of stages and the paper boundaries matched."""
    import dataclasses
    rows = []
    for budget, llc in curves.items():
        found = detect_stages(dataclasses.replace(dev, llc=llc))
        table = boundary_table(found.boundaries, run_steps(dev))
        rows.append({"λ̂ curve": budget, "checkpoints": int(llc["llc_mean"].notna().sum()),
                     "boundaries found": ", ".join(f"{b:,}" for b in found.boundaries) or "none",
                     "stages": len(found.boundaries) + 1, "paper boundaries matched": int((table["match"] == "yes").sum())})
    return pd.DataFrame(rows)


def budget_stages(dev):
    """For the paper's run made on a CPU (whose λ̂ curve mixes the reduced budget with 4x longer chains where the
    budget check failed): (Markdown, ``boundaries_by_budget`` table) of the stages found on each budget; else None."""
    if not made_on_cpu(dev):
        return None
    curves = long_run.budget_curves(ICL_PAPER, ICL_LLC_REDUCED)
    table = boundaries_by_budget(dev, curves)
    mixed = curves["as shown (4x longer chains where the check failed)"]
    replaced = mixed.loc[mixed["budget"] != "reduced", "step"]
    shown, reduced = table.iloc[0], table.iloc[1]
    same = shown["boundaries found"] == reduced["boundaries found"]
    text = (f"**The same rule on each SGLD budget.** The curve shown mixes two budgets: at {len(replaced)} checkpoints "
            f"({', '.join(f'{int(s):,}' for s in replaced)}) the reduced budget failed its check and the 4x longer "
            "chains' λ̂ is shown. The verdicts on the stages use the curve as shown. "
            + ("On the reduced budget everywhere the rule finds the same boundaries." if same else
               f"On the reduced budget everywhere it finds {reduced['stages']} stages ({reduced['boundaries found']}) "
               f"where the curve as shown gives {shown['stages']} ({shown['boundaries found']}): a boundary found on "
               "one curve only may come from the change of budget rather than from the model."))
    return text, table


def boundary_table(boundaries, steps: int) -> pd.DataFrame:
    """The paper's four boundaries against ``boundaries`` found in an ``steps``-step run, compared at the same
    fraction of the schedule. Each found boundary is paired with the paper boundary nearest it in log(step + 1)
    (each paper boundary keeps the nearest of those paired with it); a pair matches when the steps + 1 are
    within a factor ``MATCH_FACTOR``. Found boundaries left over are listed last, as "extra"."""
    names = ["LR1 → LR2", "LR2 → LR3", "LR3 → LR4", "LR4 → LR5"]
    expected = [float(from_paper_step(p, steps)) for p in PAPER_BOUNDARIES]
    paired = {}
    for b in sorted({int(b) for b in boundaries}):
        i = int(np.abs(np.log1p(expected) - math.log1p(b)).argmin())
        if i not in paired or abs(math.log1p(b) - math.log1p(expected[i])) < abs(
                math.log1p(paired[i]) - math.log1p(expected[i])):
            paired[i] = b
    rows = []
    for i, (name, paper, target) in enumerate(zip(names, PAPER_BOUNDARIES, expected)):
        found = paired.get(i)
        ratio = None if found is None else (found + 1) / (target + 1)
        match = ratio is not None and 1 / MATCH_FACTOR < ratio < MATCH_FACTOR
        rows.append({"boundary": name, "paper step": paper, "same fraction of this run": round(target),
                     "found": found, "found ÷ expected (step + 1)": ratio,
                     "match": "yes" if match else ("no" if found is not None else "none found near")})
    for extra in sorted({int(b) for b in boundaries} - set(paired.values())):
        rows.append({"boundary": "extra", "paper step": None, "same fraction of this run": None, "found": extra,
                     "found ÷ expected (step + 1)": None, "match": "extra"})
    table = pd.DataFrame(rows)
    for column in ("paper step", "same fraction of this run", "found"):
        table[column] = table[column].astype("Int64")
    table["found ÷ expected (step + 1)"] = table["found ÷ expected (step + 1)"].astype(float)
    return table


def llc_at_points(dev) -> pd.DataFrame:
    """λ̂ at the paper's points (1k, 40k, 126k, 320k, end), at the same fraction of this run's schedule
    (the nearest checkpoint in log-step), beside the paper's seed-1 λ̂."""
    steps = run_steps(dev)
    llc = dev.llc.sort_values("step")
    rows = []
    for paper, label in PAPER_POINTS.items():
        target = float(from_paper_step(paper, steps))
        at = nearest_log(llc["step"], target) if paper < PAPER_STEPS else int(llc["step"].max())
        row = llc[llc["step"] == at].iloc[0]
        rows.append({"paper point": label, "same fraction of this run": round(target), "checkpoint": at,
                     "λ̂": float(row["llc_mean"]), "± se": float(row["llc_se"]), "paper λ̂ (seed 1)": PAPER_LLC[paper]})
    return pd.DataFrame(rows)


# ---- verdict numbers -----------------------------------------------------------------------------------

def stage_values(dev, stages) -> dict:
    """The page's numbers for the claims of ``FIGURE`` (``icl.claims``)."""
    steps = run_steps(dev)
    llc = dev.llc.dropna(subset=["llc_mean"]).sort_values("step").reset_index(drop=True)
    peak = llc.loc[llc["llc_mean"].idxmax()]
    at_40k = llc_at_paper_step(llc, 40_000, steps)
    metrics = dev.train.metrics.sort_values("step")
    matched = (boundary_table(stages.boundaries, steps)["match"] == "yes").sum()
    return {"stages found": len(stages.boundaries) + 1,
            "paper boundaries matched (at the same fraction of the schedule)": int(matched),
            "step of the λ̂ peak (× 500k ÷ steps)": float(to_paper_step(peak["step"], steps)),
            "λ̂ at 40k, the paper's peak (× steps ÷ 500k)": at_40k,
            "λ̂ at the end ÷ λ̂ at 40k": float(llc["llc_mean"].iloc[-1] / at_40k),
            **training_values(metrics)}


def llc_at_paper_step(llc: pd.DataFrame, paper_step: int, steps: int, tolerance: float = 1.25) -> float:
    """λ̂ of the row nearest the paper's ``paper_step`` at the same fraction of this run (NaN when the nearest row
    is more than ``tolerance`` times away from it in step)."""
    distance = (np.log(llc["step"].clip(lower=1)) - np.log(float(from_paper_step(paper_step, steps)))).abs()
    nearest = distance.idxmin()
    return float(llc.loc[nearest, "llc_mean"]) if distance[nearest] <= np.log(tolerance) else float("nan")


def verdict_table(values: dict, page: str, provenance: dict, status: dict | None = None) -> pd.DataFrame:
    """``book.pages.verdicts`` of this figure: "cpu" and "paper" recorded for the Reproducibility page, the long CPU
    run in its own columns, judged by the miniature's rule; ``status``: why a preset's other claims wait."""
    return verdicts(claims_of(FIGURE), values, page, provenance, LABELS, status)


TRAINING_CLAIMS = ("minimum mean-square prediction (LR1 marker)", "final evaluation loss", "final Δ to ridge")


def training_values(metrics: pd.DataFrame) -> dict:
    """The claims a finished training decides without λ̂ (``TRAINING_CLAIMS``), from its evaluations."""
    metrics = metrics.sort_values("step")
    return dict(zip(TRAINING_CLAIMS, (float(metrics["pred_sq"].min()), float(metrics["loss"].iloc[-1]),
                                      float(metrics["delta_ridge"].iloc[-1]))))


# ---- figures -------------------------------------------------------------------------------------------

STAGE_SHADES = ("#ffffff", "#e3ebf4")  # stage 1 unshaded, then alternating


def shade_stages(ax, boundaries, last_step: int, paper_lines=None, label: bool = False) -> None:
    """Shade alternate stages (x = step + 1) between ``boundaries``; ``paper_lines``: the paper's boundaries
    at the same fraction of this run, drawn dotted; ``label`` numbers the stages at the top of ``ax``."""
    edges = [0, *sorted(boundaries), last_step]
    for i, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
        ax.axvspan(a + 1, b + 1, color=STAGE_SHADES[i % 2], lw=0, zorder=0)
        if label:
            ax.text(math.sqrt((a + 1) * (b + 1)), 0.97, str(i + 1), transform=ax.get_xaxis_transform(),
                    ha="center", va="top", fontsize=9, color="#33475b")
    for s in boundaries:
        ax.axvline(s + 1, color="#33475b", lw=0.8, zorder=1)
    for s in paper_lines if paper_lines is not None else ():
        ax.axvline(s + 1, color=PAPER_COLOUR, lw=1.0, ls=":", zorder=1)


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


MARKERS = (  # (key, title, y label, log y)
    ("pred_sq", "mean-square prediction (LR1)", "mean ŷ²", True),
    ("icl", "ICL scores (LR2)", "loss difference", False),
    ("delta_ridge", "Δ to ridge", "mean squared distance", False),
    ("ood", "loss on scaled inputs / tasks (g = 5)", "MSE", False),
    ("weight_norm", "weight norm", "L2 norm", False),
    ("ln", "layer-norm weights (LR3–LR4)", "mean |weight|", False),
    ("sv", "embedding singular values", "singular value", False),
    ("heads", "attention-head types", "attention weight", False),
)


def _marker(ax, key: str, dev) -> None:
    m = dev.train.metrics.sort_values("step").assign(x=lambda f: f["step"] + 1)
    s = dev.structure.sort_values("step").assign(x=lambda f: f["step"] + 1)
    if key == "pred_sq":
        ax.plot(m["x"], m["pred_sq"], color="C0")
        noise = dev.train.config["task_kwargs"].get("noise_var")
        if noise:
            ax.axhline(noise, color="grey", ls="--", lw=1, label="σ²")
            ax.legend(loc="upper right")
    elif key == "icl":
        for column, label in (("icl_score", "ℓ_K − ℓ_1"), ("icl_1_D", "ℓ_D − ℓ_1"), ("icl_D_K", "ℓ_K − ℓ_D")):
            ax.plot(m["x"], m[column], label=label)
        ax.legend(loc="lower left", ncols=1)
    elif key == "delta_ridge":
        ax.plot(m["x"], m["delta_ridge"], color="C0")
    elif key == "ood":
        ax.plot(m["x"], m["loss_ood_inputs"], label="inputs × g")
        ax.plot(m["x"], m["loss_ood_tasks"], label="tasks × g")
        ax.legend(loc="lower left")
    elif key == "weight_norm":
        ax.plot(m["x"], m["weight_norm"], color="C0")
    elif key == "ln":
        for i, column in enumerate(c for c in s.columns if c.startswith("ln ")):
            ax.plot(s["x"], s[column], label=column.removeprefix("ln ").replace("blocks.", "block "), color=f"C{i}")
        ax.legend(loc="best", ncols=2, handlelength=1.2, columnspacing=0.8)
    elif key == "sv":
        for kind, colour in (("token", "Blues_r"), ("position", "Oranges_r")):
            columns = [c for c in s.columns if c.startswith(f"{kind} sv")]
            shades = sns.color_palette(colour, len(columns) + 2)
            for i, column in enumerate(columns):
                ax.plot(s["x"], s[column], color=shades[i], label=f"{kind} sv1–{len(columns)}" if i == 0 else None)
        ax.legend(loc="upper left")
    elif key == "heads":
        kinds, styles = ["previous token", "previous x", "previous y"], ["-", "--", ":", "-."]
        heads = layer_head_scores(dev.train)
        for (layer, kind), group in heads.groupby(["layer", "type"]):
            ax.plot(group["step"] + 1, group["weight"], color=f"C{kinds.index(kind)}",
                    ls=styles[(int(layer.split()[-1]) - 1) % len(styles)])
        layers = sorted(heads["layer"].unique())
        handles = [plt.Line2D([], [], color=f"C{i}", label=k) for i, k in enumerate(kinds)]
        handles += [plt.Line2D([], [], color="black", ls=styles[i % len(styles)], label=name)
                    for i, name in enumerate(layers)]
        ax.legend(handles=handles, loc="upper left", ncols=2, handlelength=1.5, columnspacing=0.8)
        ax.set_ylim(0, 1.02)


def show_stored_run(shown: dict, found: dict, which: str, live: str) -> None:
    """The stages figure of a stored run (``which``: "cpu_long" or "paper") under its own heading: drawn if
    it is shown and not this build's live run, else a line saying where it is or why it is missing."""
    from IPython.display import Markdown, display
    if which in shown and live != which:
        cpu = ", computed on a CPU, λ̂ at a reduced budget" if made_on_cpu(shown[which]) else ""
        stages_figure(shown[which], found[which],
                      title=f"{LABELS[which]}: {run_steps(shown[which]):,} steps (committed{cpu})")
    elif live == which:
        display(Markdown(f"This build's live run is the {LABELS[which]}: its figure is in the live run's section."))
    else:
        display(Markdown(missing_note(which)))


PAPER_MARKERS = {"delta_ridge": PAPER_DELTA_RIDGE, "weight_norm": PAPER_WEIGHT_NORM}  # the authors' logged seed 1


def _paper_points(ax, values: dict, label: str | None = None) -> None:
    """The published run's values ``{step: value}`` as crosses on ``ax`` (x: step + 1, as our curves)."""
    ax.plot(np.array(list(values)) + 1, list(values.values()), "x", color=PAPER_COLOUR, ms=7, mew=2, label=label)


def stages_figure(dev, stages, title: str = ""):
    """Hoogland Fig. 1(b) for one run: λ̂ (± se at each checkpoint, GP mean) and the evaluation loss over
    log(step + 1), the detected stages shaded and numbered, the paper's boundaries at the same fraction of the
    schedule dotted; below, each marker of reference §4.2 on the same x-axis (two per row). A run of the paper's
    500k steps also shows the authors' logged seed 1 (λ̂, loss, Δ to ridge, weight norm) as crosses, and their
    seeds' range of λ̂."""
    steps = run_steps(dev)
    last = int(max(dev.llc["step"].max(), dev.train.metrics["step"].max()))
    paper_lines = from_paper_step(PAPER_BOUNDARIES, steps)
    rows = 2 + math.ceil(len(MARKERS) / 2)
    fig = plt.figure(figsize=(PAGE_WIDTH, 1.9 * 2 + 1.75 * (rows - 2)), constrained_layout=True)
    grid = fig.add_gridspec(rows, 2, height_ratios=[1.25, 1.0] + [1.0] * (rows - 2))
    top = fig.add_subplot(grid[0, :])
    loss_ax = fig.add_subplot(grid[1, :], sharex=top)
    marker_axes = [fig.add_subplot(grid[2 + i // 2, i % 2], sharex=top) for i in range(len(MARKERS))]
    llc = dev.llc.sort_values("step")
    top.errorbar(llc["step"] + 1, llc["llc_mean"], yerr=llc["llc_se"].fillna(0), fmt="o", ms=3.5, color="C0", lw=1,
                 label="λ̂ ± se (chains)")
    longer = llc[llc["budget"] != "reduced"] if "budget" in llc else llc.iloc[:0]
    if len(longer):
        top.plot(longer["step"] + 1, longer["llc_mean"], "D", ms=5, color="C2",
                 label=f"{longer['budget'].iloc[0]} (reduced budget failed)")
    top.plot(stages.steps + 1, stages.smooth, color="C1", lw=1.5, label="GP mean")
    paper_run = steps == PAPER_STEPS  # the paper's schedule: its published values sit at the same steps
    if paper_run:
        low, high = zip(*PAPER_LLC_SEEDS.values())
        top.vlines(np.array(list(PAPER_LLC_SEEDS)) + 1, low, high, color=PAPER_COLOUR, lw=2.5, alpha=0.35,
                   label="paper, seeds 0–4 (range)")
        _paper_points(top, PAPER_LLC, "paper, seed 1")
    top.plot([], [], color=PAPER_COLOUR, ls=":", label="paper's boundaries")
    top.set(ylabel="λ̂", title="local learning coefficient")
    # the legend goes above the curve, in the room the raised limit leaves, under the stage numbers
    top.set_ylim(top=1.9 * max(float(llc["llc_mean"].max()), max(PAPER_LLC.values()) if paper_run else 0))
    top.legend(loc="upper left", bbox_to_anchor=(0, 0.9), ncols=3, columnspacing=1.0, handlelength=1.5)
    m = dev.train.metrics.sort_values("step")
    loss_ax.plot(m["step"] + 1, m["loss"], color="C0", label="transformer")
    loss_ax.plot(m["step"] + 1, m["loss_ridge"], color="grey", ls="--", lw=1, label="ridge (Bayes)")
    if paper_run:
        _paper_points(loss_ax, PAPER_EVAL_LOSS, "paper, seed 1")
    loss_ax.set(ylabel="MSE", title="evaluation loss (held-out batch, per token)")
    loss_ax.legend(loc="upper right")
    shade_stages(top, stages.boundaries, last, paper_lines, label=True)
    shade_stages(loss_ax, stages.boundaries, last, paper_lines)
    for ax, (key, panel, ylabel, log) in zip(marker_axes, MARKERS):
        _marker(ax, key, dev)
        if paper_run and key in PAPER_MARKERS:
            _paper_points(ax, PAPER_MARKERS[key])
        shade_stages(ax, stages.boundaries, last, paper_lines)
        ax.set(title=panel, ylabel=ylabel)
        if log:
            ax.set_yscale("log")
    top.set_xscale("log")
    top.set_xlim(1, last + 1)
    for ax in [top, loss_ax, *marker_axes[:-2]]:
        ax.tick_params(labelbottom=False)
    for ax in marker_axes[-2:]:
        ax.set_xlabel("training step + 1 (log scale)")
    if title:
        fig.suptitle(title)
    return fig


def checkpoint_frame(train, index: int, sequences: int = 3, title: str = ""):
    """One widget frame at evaluation ``index``: every head's batch-mean attention (rows: layers), and for
    ``sequences`` held-out sequences the model's prediction at each token against ridge's and the target;
    last, the per-token loss and Δ to ridge on the whole evaluation batch. Fixed margins instead of the
    constrained layout: a frame renders in about half the time."""
    arrays = train.arrays
    step = int(arrays["step"][index])
    attn = np.asarray(arrays["attn"][index])  # (L, H, 2K, 2K)
    L, H, T, _ = attn.shape
    top_in, bottom_in = 1.6 * L, 2.2
    height = top_in + bottom_in + 1.5
    fig = plt.figure(figsize=(PAGE_WIDTH, height), layout="none")

    def y(inches):  # the figure fraction of a distance from the top
        return 1 - inches / height

    grid = fig.add_gridspec(L, H, left=0.08, right=0.86, top=y(0.55), bottom=y(0.55 + top_in), hspace=0.45,
                            wspace=0.08)
    names = [f"{'xy'[t % 2]}{t // 2 + 1}" for t in range(T)]
    ticks = list(range(0, T, 4))
    for layer in range(L):
        for h in range(H):
            ax = fig.add_subplot(grid[layer, h])
            image = ax.imshow(attn[layer, h], vmin=0, vmax=1, cmap="viridis", aspect="auto")
            ax.set_title(f"layer {layer + 1}, head {h + 1}", fontsize=9, pad=3)
            ax.set_xticks(ticks, [names[t] for t in ticks] if layer == L - 1 else [])
            ax.set_yticks(ticks, [names[t] for t in ticks] if h == 0 else [])
            ax.grid(False)
    fig.colorbar(image, cax=fig.add_axes((0.88, y(0.55 + top_in), 0.015, top_in / height)), label="attention")
    fig.text(0.01, y(0.55 + top_in / 2), "query", rotation=90, va="center", fontsize=9)
    fig.text(0.47, y(0.93 + top_in), "key", ha="center", va="bottom", fontsize=9)
    bottom = fig.add_gridspec(1, sequences + 1, left=0.08, right=0.98, top=y(1.65 + top_in), bottom=y(height - 0.45),
                              wspace=0.35)
    panels = [fig.add_subplot(bottom[0, j]) for j in range(sequences + 1)]
    K = np.asarray(arrays["pred"]).shape[-1]
    k = np.arange(1, K + 1)
    for j, ax in enumerate(panels[:-1]):
        ax.plot(k, arrays["y"][index][j], "o", color="black", ms=3.5, label="target y")
        ax.plot(k, arrays["pred"][index][j], color="C0", label="model")
        ax.plot(k, arrays["pred_ridge"][index][j], color="C1", ls="--", label="ridge")
        ax.set(title=f"sequence {j + 1}", xlabel="token k", xticks=k[::2])
    panels[0].set_ylabel("prediction")
    fig.legend(*panels[0].get_legend_handles_labels(), loc="center", bbox_to_anchor=(0.5, y(1.2 + top_in)), ncols=3)
    tokens = train.positions[train.positions["step"] == step].sort_values("token")
    ax = panels[-1]
    ax.plot(tokens["token"], tokens["loss"], color="C0", label="loss")
    ax.plot(tokens["token"], tokens["delta_ridge"], color="C2", label="Δ to ridge")
    ax.set(title="per token (batch)", xlabel="token k", xticks=k[::2])
    ax.legend(loc="best", handlelength=1.2)
    fig.suptitle(f"{title}step {step}" if title else f"step {step}", y=y(0.12), va="top")
    return fig


def frame_indices(steps, n: int = 8) -> list[int]:
    """About ``n`` evaluation indices spread evenly in log(step + 1), first and last included."""
    steps = np.asarray(steps, dtype=float)
    if steps.size == 0:
        raise ValueError("no evaluations to pick frames from")
    targets = np.geomspace(steps.min() + 1, steps.max() + 1, max(1, n))
    return sorted({int(np.abs(np.log1p(steps) - np.log(t)).argmin()) for t in targets})


def checkpoint_frames(train, n: int = 8, sequences: int = 3, title: str = "") -> dict:
    """``{"step s": figure}`` at about ``n`` evaluations for ``widgets.image_selector``."""
    steps = np.asarray(train.arrays["step"])
    return {f"step {int(steps[i])}": checkpoint_frame(train, i, sequences, title) for i in frame_indices(steps, n)}


# ---- provenance and the closing note --------------------------------------------------------------------

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


def provenance_summary(dev) -> dict:
    """Device, seed, wall times and source of one run, for a recorded summary."""
    return {"device": dev.meta.get("device"), "runs": 1, "seeds": [dev.train.config.get("seed")],
            "wall_time_s": round(float(dev.meta.get("train_wall_s") or 0) + float(dev.meta.get("llc_wall_s") or 0), 1),
            "source": "committed" if str(dev.meta.get("cache") or "").startswith("results") else "this build",
            "configs": [dev.train.config]}


def _steps(steps) -> str:
    """``[984, 40292]`` -> "984, 40,292"; none -> "none"."""
    return ", ".join(f"{int(s):,}" for s in steps) or "none"


def closing_note(devs: dict, found: dict) -> str:
    """Markdown: per run shown, the boundaries found (candidates and rule), λ̂ at the paper's points (or this
    run's matching fractions, labelled) and the wall times of training and LLC."""
    lines = []
    for preset, dev in devs.items():
        stages, steps = found[preset], run_steps(dev)
        points = llc_at_points(dev)
        at = "; ".join(f"{p.split(' ')[0]} → step {c}: {v:.1f}" for p, c, v in
                       zip(points["paper point"], points["checkpoint"], points["λ̂"]))
        scaled = ("" if steps == PAPER_STEPS
                  else f" (this run's steps at the same fraction of its {steps:,}-step schedule)")
        lines.append(
            f"- **{LABELS.get(preset, preset)}** ({steps:,} steps): boundaries {_steps(stages.boundaries)} "
            f"(the rule's candidates before pruning: {_steps(stages.candidates)}); λ̂ at the paper's "
            f"points{scaled}: {at}; wall time {dev.meta.get('train_wall_s')} s training, "
            f"{dev.meta.get('llc_wall_s')} s LLC on {dev.meta.get('device')}.")
    return "\n".join(lines)


# ---- the paper's own run, made on a CPU across work days (long_run) ---------------------------------------

def paper_in_progress_note(cfg, llc: dict) -> str:
    """A paragraph on the paper's run being made on a CPU: the step reached, CPU-hours, λ̂ rows; '' without one."""
    state = long_run.progress(cfg)
    if state is None or state["status"] != "in progress":
        return ""
    trained = state.get("training") == "finished"
    rows_done = state["llc_rows"] >= state["llc_checkpoints"]
    headline = (f"**In progress: training finished ({state['steps']:,} steps); λ̂ at {state['llc_rows']} of "
                f"{state['llc_checkpoints']} checkpoints" + (
                    f"; budget checks at {state.get('checks', 0)} of {state.get('check_steps', 0)} checkpoints.**"
                    if rows_done else ".**") if trained
                else f"**In progress: through step {state['step']:,} of {state['steps']:,}.**")
    burn = llc.get("num_burnin_steps", 0)
    return (f"{headline} The paper's own training run "
            f"(seed 1, one-cycle to 3e-3, batch 256, the 190 checkpoints), computed on one CPU core in several stretches "
            f"and committed with its resume state after each (`python -m plateau_lib.icl.long_run`; "
            f"{state['cpu_hours']:.1f} CPU-hours so far). λ̂ is estimated at {state['llc_checkpoints']} of its checkpoints "
            f"at a reduced SGLD budget (the paper's ε, γ, nβ and m = {llc['batch_size']:,}; {llc['num_chains']} chains × "
            f"{llc['num_draws']} draws{f' after {burn} burn-in steps' if burn else ''} from {llc['n_data']:,} fixed "
            "sequences instead of 10 × 5,000 from 2²⁰): "
            f"{state['llc_rows']} rows so far. "
            + (f"The budget is checked against chains {long_run.CHECK_FACTOR}× longer at the paper's five points and at "
               f"every row whose chains disagree (standard error over chains above {long_run.RECHECK_SE:g}), and next to "
               "every failed check until passing checks bound it; where the check fails, the longer chains' λ̂ is the "
               "one shown, so those rows are being re-estimated. "
               if rows_done else "")
            + ("The claims the training decides alone are judged below; those that need λ̂ read *in progress*, here and "
               "on the Reproducibility page, until its last row and budget check. " if trained else
               "Nothing of it is judged until the run is finished: its verdicts, here and on the Reproducibility page, "
               "read *in progress*. ")
            + "The paper's boundaries are at the paper's own steps here (dotted), as this run has the paper's schedule.")


def in_progress_figure(metrics: pd.DataFrame, llc: pd.DataFrame, steps: int, title: str = ""):
    """The paper run so far: λ̂ at the checkpoints estimated (± se) beside the paper's seed-1 values, and the
    evaluation loss against ridge's, over log(step + 1) up to the run's end, the paper's boundaries dotted."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(PAGE_WIDTH, 5.2), sharex=True, constrained_layout=True)
    for budget, own in (llc.groupby(llc.get("budget", pd.Series("reduced", index=llc.index)), sort=False)
                        if not llc.empty else ()):
        longer = budget != "reduced"
        top.errorbar(own["step"] + 1, own["llc_mean"], yerr=own["llc_se"].fillna(0), fmt="D" if longer else "o",
                     ms=4.5 if longer else 3.5, color="C2" if longer else "C0", lw=1,
                     label=f"λ̂ ± se, {budget} (the reduced\nbudget failed its check here)" if longer
                     else "λ̂ ± se, reduced budget")
    paper = pd.Series(PAPER_LLC)
    top.plot(paper.index + 1, paper.values, "s", color=PAPER_COLOUR, ms=4, mfc="none", label="paper's λ̂ (seed 1)")
    top.set(ylabel="λ̂", title="local learning coefficient")
    top.legend(loc="center left", fontsize=8)
    m = metrics.sort_values("step")
    bottom.plot(m["step"] + 1, m["loss"], color="C0", label="transformer")
    bottom.plot(m["step"] + 1, m["loss_ridge"], color="grey", ls="--", lw=1, label="ridge (Bayes)")
    bottom.set(ylabel="MSE", title="evaluation loss (held-out batch, per token)", xlabel="training step + 1 (log scale)")
    bottom.legend(loc="upper right")
    reached = int(m["step"].max()) if len(m) else 0
    for ax in (top, bottom):
        for b in PAPER_BOUNDARIES:
            ax.axvline(b + 1, color=PAPER_COLOUR, ls=":", lw=1)
        if reached < steps:
            ax.axvspan(reached + 1, steps + 1, color="0.92", zorder=0)
    top.set_xscale("log")
    top.set_xlim(1, steps + 1)
    if reached < steps:
        top.text((reached + 1) * 1.1, top.get_ylim()[1], " not reached yet", va="top", fontsize=9, color="0.4")
    if title:
        fig.suptitle(title)
    return fig


def in_progress_points(llc: pd.DataFrame) -> pd.DataFrame:
    """λ̂ at the paper's points that this run has estimated (the nearest selected checkpoint within 5%),
    beside the paper's seed-1 values; points not reached read '—'."""
    rows = []
    for paper, label in PAPER_POINTS.items():
        near = llc[(llc["step"] - paper).abs() <= 0.05 * paper] if not llc.empty else llc
        row = near.iloc[(near["step"] - paper).abs().argmin()] if len(near) else None
        rows.append({"paper point": label, "checkpoint": "—" if row is None else int(row["step"]),
                     "λ̂": "—" if row is None else round(float(row["llc_mean"]), 1),
                     "± se": "—" if row is None or pd.isna(row["llc_se"]) else round(float(row["llc_se"]), 1),
                     "budget": "—" if row is None else row.get("budget", "reduced"),
                     "paper λ̂ (seed 1)": PAPER_LLC[paper]})
    return pd.DataFrame(rows).set_index("paper point")


CHECK_SHOWN = ["reduced", "longer at half its draws", "longer", "relative difference", "draws", "longer draws", "passes"]


def _check_view(table: pd.DataFrame, index) -> pd.DataFrame:
    """A check table as shown: ``CHECK_SHOWN`` with its verdict, a column no row recorded left out, and "–" where
    an older row did not record it (the estimate at half the draws is recorded from the late checks on)."""
    shown = (table.assign(passes=table["relative difference"] < long_run.CHECK_TOLERANCE)
             .reindex(columns=[*index, *CHECK_SHOWN]).set_index(index).round(3).dropna(axis=1, how="all"))
    return shown.astype(object).where(shown.notna(), "–")


def show_budget_check() -> None:
    """The reduced SGLD budget's check against chains ``long_run.CHECK_FACTOR``× longer, and the budgets tried
    before it with the same check."""
    from IPython.display import Markdown, display
    check = long_run.budget_table(ICL_PAPER, ICL_LLC_REDUCED)
    earlier = long_run.earlier_budget_table(ICL_PAPER, ICL_LLC_REDUCED)
    if not earlier.empty:
        display(Markdown("Budgets tried before this one, with the same check (a failure sends the budget back):"),
                _check_view(earlier, ["budget", "step"]))
    if not check.empty:
        display(Markdown(f"The reduced budget against chains {long_run.CHECK_FACTOR}× longer (same seed; the "
                         f"reduced estimate is the same chains after their first {ICL_LLC_REDUCED['num_draws']} draws). "
                         f"Budget: {long_run.budget_label(ICL_LLC_REDUCED)}. "
                         f"It is made at the paper's five points, at every row whose chains disagree (standard "
                         f"error over chains above {long_run.RECHECK_SE:g}) and next to every failed check, until "
                         "passing checks bound the stretch where it fails. It passes where the two differ by less than "
                         f"{long_run.CHECK_TOLERANCE:.0%}; where it fails, the reduced budget had not converged there and "
                         "the λ̂ shown at that checkpoint is the longer chains'. The longer chains' estimate at half "
                         "their draws shows whether they were still drifting (recorded from the late checks on):"),
                _check_view(check, ["step"]))


def paper_cpu_note(dev) -> str:
    """What the paper's run made on a CPU is, and each of its deviations from the paper's configuration."""
    llc, hours = dev.meta["llc"], (float(dev.meta["train_wall_s"]) + float(dev.meta["llc_wall_s"])) / 3600
    burn = llc.get("num_burnin_steps", 0)
    longer = int((dev.llc["budget"] != "reduced").sum()) if "budget" in dev.llc else 0
    return (f"**Made on a CPU.** The paper's own training run, exactly (seed 1, one-cycle to 3e-3, batch 256, "
            f"{run_steps(dev):,} steps, evaluated at the paper's {len(ICL_PAPER.checkpoint_steps)} checkpoints), "
            "computed on one CPU core in several stretches and committed after each "
            f"(`python -m plateau_lib.icl.long_run`): {hours:.1f} CPU-hours, "
            f"{float(dev.meta['train_wall_s']) / 3600:.1f} of training and {float(dev.meta['llc_wall_s']) / 3600:.1f} "
            "of λ̂. Its deviations from the paper, all in the λ̂ estimates:\n\n"
            f"- λ̂ at {len(dev.llc)} of the {len(ICL_PAPER.checkpoint_steps)} checkpoints (log-spaced, evenly spaced, and "
            "the nearest to the paper's 1k, 40k, 126k, 320k and the end), so the GP fit of the stages has fewer points;\n"
            f"- {llc['num_chains']} chains × {llc['num_draws']} draws{f' after {burn} burn-in steps' if burn else ''} "
            f"instead of {ICL_LLC_PAPER['num_chains']} × {ICL_LLC_PAPER['num_draws']:,}, checked against chains "
            "4× longer at the paper's five points, at every row whose chains disagree and next to every failed "
            "check (the table below)"
            + (f"; where that check failed ({longer} checkpoints), the λ̂ shown is the longer chains'" if longer else "")
            + ";\n"
            f"- {llc['n_data']:,} fixed sequences for SGLD instead of {ICL_LLC_PAPER['n_data']:,}.\n\n"
            "The paper's ε, γ, nβ and SGLD batch are kept. Its verdicts are given in the paper column below.")


def paper_findings(dev, stages) -> str:
    """What the paper's own run shows that the miniature cannot, read from its λ̂ rows, stages and structure: where
    λ̂ peaks and how long it stays near the peak, its fall and what follows, the stages and boundaries found against
    the paper's (and the critical points the rule steps over between checkpoints), and the weight norm's growth."""
    llc = dev.llc.dropna(subset=["llc_mean"]).sort_values("step").reset_index(drop=True)
    at = llc.set_index("step")["llc_mean"]
    peak_step = int(at.idxmax())
    near = llc.loc[llc["llc_mean"] >= 0.98 * at.max(), "step"].astype(int)
    after = at[at.index >= peak_step]
    low_step, end_step = int(after.idxmin()), int(at.index[-1])
    fall = (f"It then falls, as in the paper's LR3–LR4, to {at[low_step]:.1f} at step {low_step:,} (the paper: 112.8 at "
            f"320k)" + (f", and rises again to {at[end_step]:.1f} at the end, where the paper's stays roughly flat "
                        f"(116.3 at 500k; seeds 0–4: 116–141)." if at[end_step] > 1.05 * at[low_step] else
                        f", and ends at {at[end_step]:.1f} (the paper: 116.3)."))
    table = boundary_table(stages.boundaries, run_steps(dev))
    matched = table.loc[table["match"] == "yes", "paper step"].tolist()
    first = min_step(run_steps(dev))
    stepped_over = [s for s in slope_sign_changes(stages.steps, stages.slope) if s >= first and s not in stages.boundaries]
    norms = dev.structure.set_index("step")["weight_norm"] if "weight_norm" in dev.structure else pd.Series(dtype=float)
    grown = [(p, norms.index[np.abs(np.log1p(norms.index) - np.log1p(p)).argmin()]) for p in PAPER_WEIGHT_NORM if p]
    return (f"**What this run shows that the miniature cannot.** λ̂ rises through LR1 and LR2 to its peak, "
            f"{at.max():.1f} at step {peak_step:,} (the paper: 169.3 at 40k)" + (
                f", and stays within 2% of it from step {near.min():,} to {near.max():,}" if near.min() < near.max()
                else "") + f". {fall} The GP rule finds {len(stages.boundaries) + 1} stages, with "
            f"boundaries at steps {', '.join(f'{b:,}' for b in stages.boundaries) or 'none'}; {len(matched)} of the "
            f"paper's four ({', '.join(f'{m // 1000}k' for m in matched) or 'none'}) are matched within a factor "
            f"{MATCH_FACTOR:g}." + (
                f" The GP's slope also changes sign next to step(s) {', '.join(f'{s:,}' for s in stepped_over)}: "
                "critical points of λ̂ that the rule steps over: with λ̂ at "
                f"{len(llc)} of the {len(dev.train.config.get('checkpoint_steps', ())) or len(llc)} checkpoints, no "
                "checkpoint there has |slope| below its tolerance." if stepped_over else "") + (
                " The weight norm grows as the paper's: " + ", ".join(
                    f"{norms[s]:.0f} at step {int(s):,} (paper {PAPER_WEIGHT_NORM[p]:.0f})" for p, s in grown) + "."
                if grown and not norms.empty else ""))


def show_paper_run(shown: dict, found: dict, live: str) -> None:
    """The `paper` section: the finished run's stages figure where one is stored, what it shows, then its deviations
    and budget check when it was made on a CPU; else, while the paper's run is being made on a CPU, its curves so far, λ̂ at
    the paper's points reached and the budget check, and the status "in progress" recorded for the
    Reproducibility page; else where the run will come from."""
    from IPython.display import Markdown, display
    note = paper_in_progress_note(ICL_PAPER, ICL_LLC_REDUCED)
    if "paper" in shown or live == "paper" or not note:
        cpu = made_on_cpu(shown.get("paper"))
        show_stored_run(shown, found, "paper", live)  # the figure first, then what it shows, then how it was made
        if "paper" in shown and live != "paper":
            display(Markdown(paper_findings(shown["paper"], found["paper"])))
        if cpu:
            display(Markdown(paper_cpu_note(shown["paper"])))
            show_budget_check()
        return
    state = long_run.progress(ICL_PAPER)
    llc = long_run.shown_table(ICL_PAPER, ICL_LLC_REDUCED)
    metrics = long_run.evaluations(ICL_PAPER)
    display(Markdown(note))
    fig = in_progress_figure(metrics, llc, ICL_PAPER.steps,
                             title="paper config, computed on a CPU: " + (
                                 f"{ICL_PAPER.steps:,} steps (λ̂ in progress)" if state.get("training") == "finished"
                                 else f"through step {state['step']:,} of {ICL_PAPER.steps:,}"))
    display(fig)
    plt.close(fig)
    display(Markdown("λ̂ at the paper's points this run has reached and estimated so far:"), in_progress_points(llc))
    show_budget_check()
    if state.get("training") != "finished":
        report.record_status(FIGURE, "paper", "icl_stages",
                             f"in progress: step {state['step'] // 1000}k of {ICL_PAPER.steps // 1000}k (CPU)")
        return
    display(Markdown("**What the finished training already decides.** The claims that need no λ̂, judged on the "
                     "whole 500k-step run; the λ̂ claims (stages, boundaries, peak, fall) read *in progress* until "
                     "every λ̂ row and budget check is made:"),
            verdict_table({"paper": training_values(metrics)}, "icl_stages",
                          {"paper": {"device": "cpu", "runs": 1, "seeds": [ICL_PAPER.seed],
                                     "wall_time_s": round(state["cpu_hours"] * 3600, 1), "source": "committed"}},
                          status={"paper": f"in progress: {long_run.progress_line(state)} (CPU)"}).loc[list(TRAINING_CLAIMS)])
