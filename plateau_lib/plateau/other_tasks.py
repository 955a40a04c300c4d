"""The other-tasks page (Gopalani et al. Figs. 6-7, 9-19, 21-22): every task's runs as tidy frames, what each
task measures (its cosine exclusions, its Ω, its repetition measure), and the paper-style summary table with
the numbers its verdicts judge.

Every number comes from ``stages.plateau_summary`` with the task's own partial-solution outputs
(``Task.partial_positions``), so a task is summarised by the same rule as MWS.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from plateau_lib.book import pages
from plateau_lib.engine import stages
from plateau_lib.plateau import milestones, presets as plateau_presets

# Tasks without adjacent repeats in their answers (prefix sums, sum digits): the paper measures their
# repetition bias as low sequence entropy instead of ρ (reference §4.4).
ENTROPY_TASKS = ("prefix_sum", "addition")

# A plateau measured on the accuracy curve itself: evaluations within one accuracy point of the stretch's first, before
# the run is solved (``stages.longest_flat_stretch``). REPEAT1's partial solution is every output, so the span from
# partial solution to jump says nothing there.
FLAT_TOL = 0.01

# The paper's per-task collapse exclusions (reference §4.5), in words; ``Task.cosine_pairs`` implements them.
EXCLUSIONS = {
    "prefix_sum": "all pairs of positions 17–31 (the position predicting y₁ is left out), as for MWS",
    "repeat/1": "all pairs of positions 17–31 (the position predicting y₁ is left out), as for MWS",
    "repeat/2": "within each half, leaving out each half's first predicting position",
    "repeat/4": "within each quarter, leaving out each quarter's first predicting position",
    "addition": "pairs of the 4 positions from '=' on; the 5th (predicting the final carry) is left out",
    "permutation": "all pairs (no exclusion)",
    "histogram": "all pairs (no exclusion)",
    "copy": "all pairs (no exclusion)",
    "reverse": "all pairs (no exclusion)",
    "concat_mws": "three means, by the segment of the earlier position (copies, pair sums, triple sums)",
}

# Ω per task (reference §4.6), in words; ``Task.omega`` implements it.
OMEGAS = {
    "prefix_sum": "y₁ reads x₁; yᵢ₊₁ reads xᵢ₊₁ and the previous output yᵢ",
    "repeat": "every output reads x₁ (ours: the paper logs no APM for repeat)",
    "addition": "each sum digit reads its two operand digits and the two below (the carry); '=' reads the units",
    "permutation": "layer 2: yⱼ reads its source, the x at position π(j) (layer 1: its pointer token π(j)+1)",
    "histogram": "layer 1: yᵢ reads its own xᵢ",
    "copy": "yᵢ reads xᵢ",
    "reverse": "yᵢ reads xₙ₊₁₋ᵢ",
    "concat_mws": "each output reads its window (1, 2 or 3 inputs)",
}


def task_key(cfg) -> str:
    """The task of a config as the tables name it (repeat with its k: "repeat/2")."""
    return f"repeat/{cfg.task_kwargs.get('k', 1)}" if cfg.task == "repeat" else cfg.task


def frames(results: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tidy (metrics, positions) over ``{task label: TrainResult}``, with a ``task`` column in run order."""
    return (_ordered(pages.tidy(results, "task"), results),
            _ordered(pages.tidy(results, "task", "positions"), results))


def _outputs(partial) -> str:
    """1-based outputs in words: "y1", or a range "y1–y8"."""
    partial = sorted(partial)
    return f"y{partial[0]}–y{partial[-1]}" if len(partial) > 1 else f"y{partial[0]}"


def task_table(configs: dict) -> pd.DataFrame:
    """What each task measures: its model, partial solution, repetition measure, collapse pairs and Ω."""
    rows = []
    for label, cfg in configs.items():
        task = cfg.make_task()
        rows.append({"task": label, "layers": cfg.n_layer, "steps": cfg.steps,
                     "partial solution": _outputs(task.partial_positions),
                     "repetition measure": "sequence entropy" if cfg.task in ENTROPY_TASKS else "ρ",
                     "collapse pairs": len(task.cosine_pairs), "exclusions": EXCLUSIONS[task_key(cfg)],
                     "Ω (APM)": OMEGAS[cfg.task]})
    return pd.DataFrame(rows).set_index("task")


def chance_accuracy(cfg, n: int = 8192, seed: int = 0) -> pd.Series:
    """Per output (1-based), the accuracy of always answering its most frequent value in ``n`` of the task's
    sequences: what a model that learned nothing but the answers' frequencies gets (0.5 for addition's final carry,
    about 0.1 for its other digits)."""
    import torch

    task = cfg.make_task()
    outputs = task.sample(n, torch.Generator().manual_seed(seed), "cpu")[:, task.prompt_len:].numpy()
    return pd.Series([np.bincount(col).max() / n for col in outputs.T], index=range(1, outputs.shape[1] + 1))


LEAD_DIGITS = 12  # a lead is rounded to these decimals: equal accuracies read 0, not a float sum's 4e-16


def lead_over_chance(positions: pd.DataFrame, step, partial, chance: pd.Series) -> float:
    """How far the ``partial`` outputs are ahead of the others at ``step``, each output's accuracy taken as its share
    of the way from chance to 1 (``chance``: :func:`chance_accuracy`; an output that never varies is left out); NaN
    without a step."""
    if step is None:
        return np.nan
    acc = positions[positions["step"] == step].set_index("position")["acc"]
    base = chance.reindex(acc.index)
    above = ((acc - base) / (1 - base))[base < 1]
    inside = above.index.isin(list(partial))
    return round(float(above[inside].mean() - above[~inside].mean()), LEAD_DIGITS)


def run_summary(result, cfg) -> dict:
    """One run's milestones (``stages.plateau_summary`` over the task's partial-solution outputs), how far the
    partial solution is ahead of the other outputs when it is learned (above chance, ``lead_over_chance``), the
    extremes of the repetition measures before the jump, and the cosine after the first step."""
    partial = cfg.make_task().partial_positions
    m = result.metrics.sort_values("step")
    s = stages.plateau_summary(m, positions=result.positions, partial=partial)
    before = stages.before_jump(m, s["jump_step"])
    lead = lead_over_chance(result.positions, s["partial_step"], partial, chance_accuracy(cfg))
    first_step = m[m["step"] == 1]
    row = {**s, "partial_lead": float(lead), "min_entropy": float(before["entropy"].min()),
           "entropy_data": float(m["entropy_data"].mean()), "rho_data": float(m["rho_data"].mean()),
           "cosine_step_1": float(first_step["cosine"].iloc[0]) if len(first_step) else np.nan}
    unsolved = m if s["solved_step"] is None else m[m["step"] < s["solved_step"]]
    row["flat_stretch"] = stages.longest_flat_stretch(unsolved["step"], unsolved["acc"], FLAT_TOL)
    if "alpha_1" in m:
        row["alpha_1_90_step"] = stages.first_crossing(m["step"], m["alpha_1"], 0.9)
        row["peak_alpha_1"] = float(before["alpha_1"].max())
    return row


def plateau_accuracy(result, cfg) -> pd.DataFrame:
    """The accuracy of the partial solution's outputs (``acc_first``) and of the others (``acc_rest``) at each
    evaluation after step 0 and before the jump (the whole run if it never jumps): where the plateau is."""
    summary = run_summary(result, cfg)
    acc = stages.partial_accuracy(result.positions, cfg.make_task().partial_positions)
    end = np.inf if summary["jump_step"] is None else summary["jump_step"]
    return acc[(acc["step"] > 0) & (acc["step"] < end)].reset_index(drop=True)


SUMMARY_COLUMNS = {"partial_step": "partial learned", "jump_step": "jump", "plateau_span": "plateau span",
                   "partial_lead": "partial − rest accuracy above chance",
                   "peak_cosine": "peak cosine", "apm_before_jump": "APM before jump", "final_acc": "final accuracy"}


def summary_table(results: dict, configs: dict) -> pd.DataFrame:
    """The paper's summary table filled from runs: per task, the partial solution and the step it is learned,
    the jump and the plateau between them, the repetition bias (peak ρ, or minimum sequence entropy, against the
    data's), the peak cosine before the jump, the APM just before the jump and the final accuracy."""
    rows = []
    for label, result in results.items():
        cfg, s = configs[label], run_summary(result, configs[label])
        repetition = (f"entropy min {s['min_entropy']:.2f} (data {s['entropy_data']:.2f})"
                      if cfg.task in ENTROPY_TASKS else f"ρ peak {s['peak_rho']:.2f} (data {s['rho_data']:.2f})")
        rows.append({"task": label, "partial solution": _outputs(cfg.make_task().partial_positions),
                     **{k: s[k] for k in SUMMARY_COLUMNS}, "repetition before the jump": repetition,
                     "steps": cfg.steps})
    table = pages.readable(pd.DataFrame(rows), steps="steps").rename(columns=SUMMARY_COLUMNS)
    return table.set_index("task")


SUMMARY_NUMBERS = ("final_acc", "peak_cosine", "partial_lead", "rho_ratio", "entropy_ratio")


def summary_numbers(shown: dict, columns=("cpu", "paper")) -> dict:
    """The numbers of each run of ``shown`` (``{preset: (results, configs)}``) that the page's prose pastes:
    ``{task}_{column}_{preset}`` (spaces as ``_``) for each of ``SUMMARY_NUMBERS`` (``run_summary``'s, the peak
    ρ and the minimum entropy before the jump over the data's as ``rho_ratio`` and ``entropy_ratio``) and
    ``lowest_peak_cosine_{preset}`` over the tasks, for each preset of ``columns`` and every task of
    ``presets.OTHER_TASKS``; None for a preset or task not shown."""
    labels = list(plateau_presets.OTHER_TASKS)
    out = {}
    for preset in columns:
        results, configs = shown.get(preset, ({}, {}))
        rows = {label: run_summary(results[label], configs[label]) for label in labels if label in results}
        for row in rows.values():
            for name, top in (("rho", "peak_rho"), ("entropy", "min_entropy")):
                known = row[top] is not None and row[f"{name}_data"]
                row[f"{name}_ratio"] = row[top] / row[f"{name}_data"] if known else None
        out |= {f"{label}_{column}_{preset}".replace(" ", "_"): rows[label][column] if label in rows else None
                for label in labels for column in SUMMARY_NUMBERS}
        out[f"lowest_peak_cosine_{preset}"] = min((r["peak_cosine"] for r in rows.values()), default=None)
    return out


def survey_values(results: dict, configs: dict) -> dict:
    """The numbers the page's claims judge (``verdicts``: "Figs. 6–22 (other tasks)"), from the runs present."""
    s = {label: run_summary(results[label], configs[label]) for label in results}
    learned = milestones.learned(pd.DataFrame.from_dict(s, orient="index")) if s else {}
    values = {}
    for label, part in (("prefix sum", "y1"), ("addition", "final carry")):
        if label in s:
            values[f"{label}: {part} − rest accuracy above chance when it is learned"] = s[label]["partial_lead"]
    # A peak "before the jump" only in a run that learned its partial solution: with no plateau, an output that
    # never changes has ρ 1 (and its states a high cosine) by construction.
    if "prefix sum" in s:
        p = s["prefix sum"]
        values.update({"prefix sum: minimum entropy before the jump ÷ data's": p["min_entropy"] / p["entropy_data"],
                       "prefix sum: peak cosine before the jump": p["peak_cosine"] if learned["prefix sum"] else None})
    for label in ("addition", "permutation", "histogram", "concat MWS"):
        if label in s:
            r = s[label]
            repetition = ((f"{label}: minimum entropy before the jump ÷ data's", r["min_entropy"] / r["entropy_data"])
                          if configs[label].task in ENTROPY_TASKS else
                          (f"{label}: peak ρ before the jump ÷ data's", r["peak_rho"] / r["rho_data"]))
            values.update({repetition[0]: repetition[1] if learned[label] else None,
                           f"{label}: peak cosine before the jump": r["peak_cosine"] if learned[label] else None})
    if "repeat_1" in s:
        r, steps = s["repeat_1"], configs["repeat_1"].steps
        values.update({"REPEAT1: cosine after one step": r["cosine_step_1"],
                       "REPEAT1: step at which α_1 reaches 0.9": r["alpha_1_90_step"],
                       "REPEAT1: longest flat accuracy before it is solved ÷ run length": r["flat_stretch"] / steps})
    return {k: np.nan if v is None else float(v) for k, v in values.items()}


def accuracy_curves(positions: pd.DataFrame, configs: dict) -> pd.DataFrame:
    """Long frame (task, step, curve, value): the accuracy of each task's partial solution and of its other
    outputs (``stages.partial_accuracy``), for ``plots.task_facets``."""
    frames = []
    for label, cfg in configs.items():
        part = stages.partial_accuracy(positions[positions["task"] == label], cfg.make_task().partial_positions)
        part = part.rename(columns={"acc_first": "partial solution", "acc_rest": "other outputs"})
        frames.append(part.melt(id_vars="step", var_name="curve").assign(task=label))
    return _ordered(pd.concat(frames, ignore_index=True), configs)


def metric_curves(metrics: pd.DataFrame, configs: dict, kind: str) -> pd.DataFrame:
    """Long frame (task, step, curve, value) of one ``kind`` of curve per task, for ``plots.task_facets``:
    "repetition" (ρ and the data's, or sequence entropy and the data's for ``ENTROPY_TASKS``, and α_1 where a
    task logs it), "cosine" (the pooled mean and any segment means) or "apm" (Ω of the task, and the
    permutation's other layer and alternative-strategy measures)."""
    names = {"repetition": {"rho": "model ρ", "rho_data": "data ρ", "alpha_1": "α₁"},
             "cosine": {"cosine": "mean cosine", "cosine_1": "segment 1 (copies)", "cosine_2": "segment 2 (pairs)",
                        "cosine_3": "segment 3 (triples)"},
             "apm": {"apm": "APM (Ω; permutation: layer 2)", "apm_layer1": "layer 1 (pointer)",
                     "apm_alt_layer1": "alternative, layer 1", "apm_alt_layer2": "alternative, layer 2"}}
    if kind not in names:
        raise ValueError(f"kind must be one of {sorted(names)}, got {kind!r}")
    frames = []
    for label, cfg in configs.items():
        columns = dict(names[kind])
        if kind == "repetition" and cfg.task in ENTROPY_TASKS:
            columns = {"entropy": "model entropy (nats)", "entropy_data": "data entropy (nats)"}
        m = metrics[metrics["task"] == label]
        present = [c for c in columns if c in m and m[c].notna().any()]
        long = m[["step", *present]].melt(id_vars="step", var_name="curve")
        frames.append(long.assign(task=label, curve=long["curve"].map(columns)))
    return _ordered(pd.concat(frames, ignore_index=True), configs)


def _ordered(frame: pd.DataFrame, labels) -> pd.DataFrame:
    """``frame`` with its ``task`` column categorical in the order of ``labels`` (the panels' order)."""
    return frame.assign(task=pd.Categorical(frame["task"], categories=list(labels), ordered=True))
