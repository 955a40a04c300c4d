"""Page helpers of the collapse chapter (``notebooks/llm_collapse.ipynb``): which checkpoints to analyse (the real
ones when present, else the offline miniature), the paper's figure, heat-maps, generations, verdict values."""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from functools import cached_property

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from plateau_lib.book import pages, plots
from plateau_lib.book.pages import PAGE_WIDTH_IN, Verbatim
from plateau_lib.book.params import int_list, one_number, overrides_dict, parsed
from plateau_lib.book.verdicts import BySeed
from plateau_lib.engine import presets as engine_presets
from plateau_lib.llm import checkpoints as llm_checkpoints, collapse as llm, miniature as llm_miniature, presets
from plateau_lib.llm.claims import claims_of
from plateau_lib.llm.corpus import prompts

SOURCES = ("miniature", "hf")
FIGURE = "Fig. 8 (Pythia/OLMo collapse and repetition)"
OLMO_FIGURE = "Figs. 23–25 (OLMo-2 7B, steps 150 and 600)"
ARCH_NAMES = {"pythia": "Pythia", "olmo2": "OLMo-2"}  # a miniature's architecture, in its panel's title
COS_COLOUR, REP_COLOUR, DISTINCT_COLOUR = "#440154", "tab:red", "0.55"


@dataclass
class Panel:
    """One model's analysed checkpoints: ``rows`` per (step, prompt) (``llm.analyse_checkpoints``)."""
    label: str
    kind: str                      # "trained here" or "trained on a GPU" (a miniature), or "real checkpoints"
    arch: str                      # "pythia" or "olmo2"
    rows: pd.DataFrame
    meta: dict
    losses: pd.DataFrame | None = None

    def __post_init__(self):
        self.rows = self.rows.assign(text=llm.generated_text(self.rows))

    @cached_property
    def summary(self) -> pd.DataFrame:
        return llm.summary(self.rows)


def check_source(source: str) -> str:
    if source not in SOURCES:
        raise ValueError(f"parameter 'source' must be one of {SOURCES}, got {source!r}")
    return source


def check_models(models) -> list[str]:
    """The real models asked for (None: the paper's four Pythia sizes and OLMo-2 7B), each checked."""
    models = parsed(models, "models")
    if models is None:
        return list(llm_checkpoints.REAL_MODELS)
    models = [models] if isinstance(models, str) else models
    bad = [m for m in models or [None] if m not in llm_checkpoints.REAL_MODELS]
    if bad:
        raise ValueError(f"parameter 'models' must list names from {list(llm_checkpoints.REAL_MODELS)}, got {models!r}")
    return list(models)


def load(preset: str = "cpu", source: str = "miniature", models=None, weights_dir=None, hf_cache=None, seeds=None,
         n_prompts=100, prompt_seed=0, overrides=None, use_cache: bool = True, device: str = "auto",
         fallback: bool = True, progress: bool = True, olmo: bool = True) -> list[Panel]:
    """The page's panels. Every parameter is checked before any compute; ``source="hf"`` with absent files falls
    back to the miniature when ``fallback`` (with a warning that says what to place where) and raises otherwise.
    Each panel's ``kind`` says what it shows."""
    engine_presets.check_preset(preset)
    check_source(source)
    models = check_models(models)
    n_prompts = one_number(n_prompts, "n_prompts", 100, int)
    seeds = int_list(seeds, "seeds", presets.LLM_SEEDS[preset])
    configs = presets.llm_miniatures(preset, seeds, {**overrides_dict(overrides), "device": device}, olmo)
    if source == "hf":
        try:
            found = llm_checkpoints.real_checkpoints(models, weights_dir, hf_cache)
        except FileNotFoundError as err:
            if not fallback:
                raise
            warnings.warn(f"the real checkpoints are not on this machine, so the page shows the miniature. {err}",
                          stacklevel=2)
        else:
            return _real_panels(found, n_prompts, prompt_seed, use_cache, device, progress)
    panels = []
    for (arch, seed), cfg in configs.items():
        tables, meta = llm.miniature_collapse(cfg, n_prompts, cfg.prompt_seed(prompt_seed), use_cache, progress)
        kind = "trained on a GPU" if str(meta.get("device", "cpu")).startswith("cuda") else "trained here"
        panels.append(Panel(f"{ARCH_NAMES[arch]} miniature, seed {seed}", kind, arch, tables["prompts"],
                            meta, tables["losses"]))
    return panels


def larger_miniature_panels(preset: str, n_prompts: int = 100, prompt_seed: int | None = 0) -> list[Panel]:
    """The ``paper``-preset miniatures (16 x 1,024 tokens per step; made by ``make paper`` on a GPU), loaded from
    their committed analyses for a page built at another preset; [] at ``preset="paper"`` (they are the page's own
    panels then) or while any of them is not committed (nothing is trained here)."""
    if engine_presets.check_preset(preset) == "paper":
        return []
    configs = presets.llm_miniatures("paper")
    if any(llm.stored(cfg, n_prompts, cfg.prompt_seed(prompt_seed), committed_only=True) is None
           for cfg in configs.values()):
        return []
    return load("paper", n_prompts=n_prompts, prompt_seed=prompt_seed, progress=False)


def nudged_panels(panels: list[Panel], n_prompts: int = 100, prompt_seed: int | None = 0) -> list[Panel]:
    """The miniatures of ``panels`` re-run with every initial weight one float step up (``python -m plateau_lib
    collapse --nudged --commit``), read from their committed analyses only; [] for real checkpoints, or while any
    of them is not committed (a page trains nothing for them)."""
    if not panels or panels[0].kind == "real checkpoints":
        return []
    configs = [llm_miniature.MiniatureConfig.from_meta(p.meta["config"]).replace(init_nudge=True) for p in panels]
    if any(llm.stored(cfg, n_prompts, cfg.prompt_seed(prompt_seed), committed_only=True) is None for cfg in configs):
        return []
    nudged = []
    for panel, cfg in zip(panels, configs):
        tables, meta = llm.miniature_collapse(cfg, n_prompts, cfg.prompt_seed(prompt_seed), True, False)
        nudged.append(dataclasses.replace(panel, rows=tables["prompts"], meta=meta, losses=tables["losses"]))
    return nudged


def _real_panels(found: dict, n_prompts: int, prompt_seed, use_cache: bool, device: str, progress: bool) -> list:
    panels = []
    for model, checkpoints in found.items():
        seed = None if model == "olmo-2-7b" else prompt_seed  # OLMo's script took test[:100]
        tables, meta = llm.real_collapse(model, checkpoints, n_prompts, seed, use_cache, device, progress)
        panels.append(Panel(model, "real checkpoints", "olmo2" if model == "olmo-2-7b" else "pythia",
                            tables["prompts"], meta))
    return panels


# ---- figures -----------------------------------------------------------------------------------------------------

def _step_axis(ax, steps) -> None:
    """Log steps with step 0 shown: symlog, linear below 1 (the paper's log axis silently drops step 0)."""
    ax.set_xscale("symlog", linthresh=1, linscale=0.4)
    ticks = [s for s in (0, 1, 10, 100, 1000, 10_000) if s <= max(steps)]
    ax.set_xticks(ticks, [f"{s:,}" for s in ticks])
    ax.set_xlim(-0.1, max(steps) * 1.15)


# The paper's cosines (the summary's Fig. 8 table), drawn as levels on each architecture's panels: its models' values,
# at their own steps, which a miniature's step axis does not share.
PAPER_COSINES = {"pythia": ((0.9, "paper, Pythia: > 0.9 early"),),
                 "olmo2": ((0.93, "paper, OLMo-2 7B: 0.93 (step 150)"), (0.43, "0.43 (step 600)"))}


def evolution_figure(panels: list[Panel]):
    """The paper's figure: per model, the mean cosine (left axis) and the repetition (right axis, with the
    distinct-token fraction) against the pretraining step, with the paper's cosines for the architecture
    (``PAPER_COSINES``) as dash-dotted levels; below, the miniature's training loss."""
    with_loss = any(p.losses is not None for p in panels)
    fig, axes = plt.subplots(2 if with_loss else 1, len(panels), figsize=(PAGE_WIDTH_IN, 5.4 if with_loss else 3.3),
                             squeeze=False, sharex="col", height_ratios=[1.6, 1] if with_loss else None)
    for col, panel in enumerate(panels):
        s = panel.summary
        ax = axes[0, col]
        ax.plot(s["step"], s["cosine"], "o-", color=COS_COLOUR, label="cosine", ms=4)
        for level, text in PAPER_COSINES.get(panel.arch, ()):
            ax.axhline(level, ls="-.", lw=1, color=COS_COLOUR, alpha=0.7)
            ax.annotate(text, (0.01, level), xycoords=("axes fraction", "data"), xytext=(0, 2),
                        textcoords="offset points", fontsize=7, color=COS_COLOUR, va="bottom")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{panel.label}\n({panel.kind})")
        twin = ax.twinx()
        twin.plot(s["step"], s["repetition"], "^--", color=REP_COLOUR, label="repetition", ms=4)
        twin.plot(s["step"], s["distinct"], ":", color=DISTINCT_COLOUR, label="distinct tokens ÷ 8")
        twin.set_ylim(0, 1.02)
        twin.grid(False)
        if col == 0:
            ax.set_ylabel("mean pairwise cosine", color=COS_COLOUR)
        if col == len(panels) - 1:
            twin.set_ylabel("repeat frequency", color=REP_COLOUR)
            handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
            fig.legend(handles, [h.get_label() for h in handles], loc="outside lower center", ncols=3)
        else:
            twin.set_yticklabels([])
        _step_axis(ax, s["step"])
        if with_loss:
            lax = axes[1, col]
            if panel.losses is not None:
                loss = panel.losses
                lax.plot(loss["step"] + 1, loss["loss"].rolling(8, min_periods=1).mean(), color="0.3")
                lax.set_ylabel("training loss" if col == 0 else "")
            else:
                lax.set_axis_off()
            lax.set_xlabel("pretraining step")
            _step_axis(lax, s["step"])
        else:
            ax.set_xlabel("pretraining step")
    return fig


def key_steps(panel: Panel) -> dict:
    """``{"first": 0, "peak": step of the highest cosine, "last": last step}`` of one panel, and for an OLMo-2
    panel OLMo's two steps (150, 600) where it has them."""
    s = panel.summary
    steps = {"first": int(s["step"].min()), "peak": int(s.loc[s["cosine"].idxmax(), "step"]),
             "last": int(s["step"].max())}
    if panel.arch == "olmo2":
        steps.update({f"OLMo step {k}": k for k in llm_checkpoints.OLMO_REVISIONS if k in set(s["step"])})
    return steps


def step_heatmap(ax, panel: Panel, step: int, cbar: bool = True, prompt: int | None = None) -> None:
    """One step's 8x8 cosine (lower triangle), the mean over prompts or one ``prompt``'s (counted from 0), in the
    book's cosine colours (those of the MWS pages)."""
    rows = panel.rows if prompt is None else panel.rows[panel.rows["prompt"] == prompt]
    mean = (panel.summary.set_index("step").loc[step, "cosine"] if prompt is None
            else float(rows.loc[rows["step"] == step, "mean_cos"].iloc[0]))
    plots.cosine_heatmap(llm.cosine_matrix(rows, step), ax=ax, title=f"step {step}: mean {mean:.2f}",
                         labels=range(llm_checkpoints.N_NEW), axis_label="generation step", cbar=cbar)


def heatmap_figure(panel: Panel, steps: list[int]):
    """The paper's 8x8 heat-maps: cosine between the hidden states of generation steps i > j, mean over prompts."""
    fig, axes = plt.subplots(1, len(steps), figsize=(PAGE_WIDTH_IN, PAGE_WIDTH_IN / len(steps) * 0.95 + 0.4),
                             squeeze=False)
    for i, (ax, step) in enumerate(zip(axes[0], steps)):
        step_heatmap(ax, panel, step, cbar=i == len(steps) - 1)
        if i:
            ax.set_ylabel("")
    fig.suptitle(f"{panel.label}: cosine of the last-position states")
    return fig


def summaries(panels: list[Panel]) -> pd.DataFrame:
    """Every panel's per-step summary (cosine, repetition, ...) in one table, with a ``model`` column."""
    return pd.concat([panel.summary.assign(model=panel.label) for panel in panels], ignore_index=True)


def shown_text(text: str) -> str:
    """A generation on one line: newlines as ⏎, tabs as ⇥."""
    return text.replace("\n", "⏎").replace("\t", "⇥")


def generations(panel: Panel, steps: list[int], n: int = 4) -> pd.DataFrame:
    """The first ``n`` prompts and their 8 greedy tokens at each of ``steps`` (newlines shown as ⏎), the
    generations as ``Verbatim`` text."""
    questions = prompts(int(panel.rows["prompt"].max()) + 1, panel.meta.get("spec", {}).get("prompt_seed", 0))
    table = panel.rows[panel.rows["step"].isin(steps) & (panel.rows["prompt"] < n)]
    wide = table.pivot(index="prompt", columns="step", values="text").map(lambda t: Verbatim(repr(shown_text(t))[1:-1]))
    wide.columns = [f"step {c}" for c in wide.columns]
    wide.insert(0, "prompt (ARC-Easy)", [questions[i][:70] + ("…" * (len(questions[i]) > 70)) for i in wide.index])
    return wide.reset_index(drop=True)


def step_frames(panel: Panel, n_prompts: int = 3) -> dict:
    """One image per analysed step for the slider: the heat-map beside the first prompts' generations."""
    frames = {}
    summary = panel.summary.set_index("step")
    for step in summary.index:
        fig, (ax, text) = plt.subplots(1, 2, figsize=(PAGE_WIDTH_IN, 3.2), width_ratios=[1, 1.5])
        step_heatmap(ax, panel, step)
        rows = panel.rows[(panel.rows["step"] == step) & (panel.rows["prompt"] < n_prompts)]
        lines = [f"repetition {summary.loc[step, 'repetition']:.2f}, distinct {summary.loc[step, 'distinct']:.2f}", ""]
        lines += [f"prompt {p + 1}: “{shown_text(t)}”" for p, t in zip(rows["prompt"], rows["text"])]
        text.text(0, 1, "\n".join(lines), va="top", ha="left", fontsize=9, family="monospace", wrap=True)
        text.set_axis_off()
        fig.suptitle(panel.label)
        frames[f"step {step}"] = fig
    return frames


# ---- numbers for the verdicts and the tables -------------------------------------------------------------------

def per_run_values(panel: Panel) -> dict:
    """The claims' numbers for one panel."""
    s = panel.summary.set_index("step")
    steps = key_steps(panel)
    peak, last = s.loc[steps["peak"]], s.loc[steps["last"]]
    return {"peak cosine of the generated tokens' states": peak["cosine"],
            "repetition at the step of peak cosine": peak["repetition"],
            "cosine at the last step ÷ its peak": last["cosine"] / peak["cosine"],
            "repetition at the last step ÷ at the step of peak cosine":
                float(last["repetition"] / peak["repetition"]) if peak["repetition"] > 0 else np.nan}


def olmo_values(panel: Panel) -> dict:
    """The OLMo claims' numbers: the cosine at step 150 and its fall by step 600."""
    s = panel.summary.set_index("step")["cosine"]
    return {"cosine at step 150": s.get(150, np.nan), "cosine at step 600 ÷ at step 150": s.get(600, np.nan) /
            s.get(150, np.nan)}


def verdict_values(panels: list[Panel]) -> dict:
    """``{figure: {claim: number}}``: Fig. 8's over the Pythia panels, each miniature's seed judged alone
    (``verdicts.BySeed``; real checkpoints of several sizes, which have no seed: their mean), the OLMo figure's from
    the OLMo panel."""
    out = {}
    pythia = [p for p in panels if p.arch == "pythia"]
    seeds = [p.meta.get("config", {}).get("seed") for p in pythia]
    if pythia and None not in seeds and len(set(seeds)) == len(seeds):
        values = {seed: per_run_values(p) for seed, p in zip(seeds, pythia)}
        out[FIGURE] = {claim: BySeed({seed: v[claim] for seed, v in values.items()}) for claim in values[seeds[0]]}
    elif pythia:
        out[FIGURE] = pd.DataFrame([per_run_values(p) for p in pythia]).mean().to_dict()
    for panel in panels:
        if panel.arch == "olmo2":
            out[OLMO_FIGURE] = olmo_values(panel)
    return out


def verdict_tables(panels: list[Panel], preset: str, nudged: list[Panel] | None = None) -> dict:
    """``{figure: verdict table}`` for each figure shown. Real checkpoints are the paper's models, so they fill the
    ``paper`` column; models trained here at the paper preset (Pythia's and OLMo-2's shapes, far smaller) fill their
    own column (``trained_shape``); the cpu miniature fills its preset's. ``nudged``: the same miniatures re-run
    with nudged initial weights (``nudged_panels``), whose verdicts mark the ones they turn *fragile*."""
    column = "paper" if panels[0].kind == "real checkpoints" else "trained_shape" if preset == "paper" else preset
    again = verdict_values(nudged) if nudged else {}
    tables = {}
    for figure, values in verdict_values(panels).items():
        shown = [p for p in panels if (p.arch == "olmo2") == (figure == OLMO_FIGURE)]
        provenance = {"runs": len(shown), "seeds": sorted({p.meta.get("config", {}).get("seed") for p in shown}),
                      "device": shown[0].meta.get("device"), "source": shown[0].meta.get("cache") or "this build"}
        rerun = {column: again[figure]} if figure in again else None
        tables[figure] = pages.verdicts(claims_of(figure), {column: values}, page="llm_collapse",
                                        provenance={column: provenance}, rerun=rerun)
    return tables


def key_table(panels: list[Panel]) -> pd.DataFrame:
    """Per panel: the cosine, repetition and distinct fraction at the first, peak-cosine and last step, at the last
    step of the stretch after the peak where the cosine stays above 0.9, and where it collapses again (above 0.9
    after it fell below 0.8), where it does."""
    rows = []
    for panel in panels:
        s = panel.summary.set_index("step")
        names = {}
        for name, step in {**key_steps(panel), **_after_peak(panel)}.items():
            names.setdefault(step, []).append(name)
        for step, when in sorted(names.items()):
            rows.append({"model": panel.label, "when": " = ".join(when), "step": step,
                         **s.loc[step, ["cosine", "repetition", "distinct"]].to_dict()})
    return pd.DataFrame(rows)


def _after_peak(panel: Panel) -> dict:
    """``{"still above 0.9 after the peak": step, "collapses again": step}`` of one panel, those it has."""
    s = panel.summary.set_index("step")
    peak = key_steps(panel)["peak"]
    after = s.loc[s.index > peak, "cosine"]
    stays = after[(after > 0.9).cummin()]  # the checkpoints right after the peak still above 0.9
    rest = after[after.index > (stays.index[-1] if len(stays) else peak)]
    recovered = rest[rest < 0.8]
    again = rest[(rest.index > recovered.index[0]) & (rest > 0.9)] if len(recovered) else rest.iloc[:0]
    return ({"still above 0.9 after the peak": int(stays.index[-1])} if len(stays) else {}) | (
        {"collapses again": int(again.index[0])} if len(again) else {})


def settings_table(panels: list[Panel]) -> pd.DataFrame:
    """The miniature's configuration beside Pythia-14m's pretraining (reference pythia_olmo.md §3)."""
    pythia = {"arch": "pythia", "n_layer": 6, "d_model": 128, "n_head": 4, "d_ff": 512, "vocab_size": 50304,
              "context": 2048, "batch_size": 1024, "steps": 143_000, "lr": 0.001, "min_lr": 0.0001,
              "warmup_steps": 1430, "schedule_steps": 143_000, "weight_decay": 0.1, "grad_clip": 1.0,
              "corpus": "the Pile (300 B tokens)"}
    fields = [f.name for f in dataclasses.fields(llm_miniature.MiniatureConfig)
              if f.name not in ("seed", "device", "init_nudge")]  # init_nudge: a re-run's perturbation, not a setting
    columns = {}
    for panel in panels:
        cfg = {k: ", ".join(v) if isinstance(v, list) else v for k, v in panel.meta.get("config", {}).items()}
        if cfg:
            columns.setdefault(f"{panel.arch} miniature", {k: str(cfg.get(k, "")) for k in fields})
    table = pd.DataFrame({**columns, "Pythia-14m": {k: str(pythia[k]) for k in fields}})
    if "pythia miniature" in table:
        table["≠ Pythia-14m"] = np.where(table["pythia miniature"] == table["Pythia-14m"], "", "≠")
    return table


def sizes_in_millions(panels: list[Panel]) -> dict:
    """From the first miniature of each architecture's run record, in millions: ``{arch}_parameters``,
    ``{arch}_embedding`` (its untied token embedding and unembedding, 2 x vocabulary x width) and
    ``{arch}_corpus_tokens``; None where no panel of that architecture, or its record, has it."""
    out = {}
    for arch in ARCH_NAMES:
        meta = next((p.meta for p in panels if p.arch == arch), {})
        cfg = meta.get("config") or {}
        found = {"parameters": meta.get("parameters"), "corpus_tokens": meta.get("corpus_tokens"),
                 "embedding": 2 * cfg["vocab_size"] * cfg["d_model"] if {"vocab_size", "d_model"} <= set(cfg) else None}
        out |= {f"{arch}_{k}": None if v is None else v / 1e6 for k, v in found.items()}
    return out


def provenance_rows(panels: list[Panel]) -> list[dict]:
    rows = []
    for p in panels:
        rows.append({"panel": p.label, "source": p.meta.get("cache") or "computed in this build",
                     "checkpoints": p.kind, "device": p.meta.get("device", p.meta.get("analysis_device")),
                     "training wall time (s)": p.meta.get("wall_time_s"), "parameters": p.meta.get("parameters"),
                     "corpus tokens": p.meta.get("corpus_tokens"), "commit": p.meta.get("commit"),
                     "date": str(p.meta.get("date", ""))[:10]})
    return rows
