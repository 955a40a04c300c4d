"""Page helpers of the task-diversity chapters (``transient_ridge``, ``task_diversity``, ``low_task_diversity``):
the live sweep, the stored sweeps, their tables, verdict values and provenance (the figures are in
``diversity_figures``).

The live ``cpu`` sweep is the same on every page (same configs, so one build trains it once and the other
pages load it from the cache). The long CPU sweep and the ``paper`` sweep are loaded only if stored; they are
never trained by a page.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from plateau_lib.book.pages import (MISSING, float_texts, formatted, provenance_summary as summary, run_provenance,
    setting_text, verdicts)
from plateau_lib.book.params import int_list, parsed
from plateau_lib.book.verdicts import BySeed, listed
from plateau_lib.engine import cache, trajectory
from plateau_lib.engine.presets import log_linear_steps
from plateau_lib.engine.sweep import sweep
from plateau_lib.icl import diversity as div, presets as icl_presets
from plateau_lib.icl.claims import claims_of
from plateau_lib.llc import SGLDConfig
from plateau_lib.icl.presets import DIVERSITY, diversity, DIVERSITY_LLC, DIVERSITY_MS, DIVERSITY_PAPER

LABELS = {"cpu": "live cpu sweep", "cpu_long": "long CPU sweep", "cpu_d8": "CPU transient sweep (D = 8, width 64)",
          "cpu_d8_50k": "CPU transient sweep (D = 8, width 64, 50k steps)", "paper": "paper preset"}


@dataclass
class Sweep:
    """One sweep as a page shows it: its configs and SGLD settings, the training results, their curves, the
    final evaluations, and the LLC table (None where it was not computed); t_crit comes from ``transients``."""
    preset: str
    configs: dict
    llc: SGLDConfig
    results: dict
    curves: pd.DataFrame
    final: pd.DataFrame
    llc_table: pd.DataFrame | None
    llc_meta: dict | None
    memo: dict = field(default_factory=dict)  # the joint PCA and the ideal predictors' losses, computed once

    def ideal(self) -> pd.DataFrame:
        """``diversity.ideal_losses`` of this sweep's task and M grid, indexed by M (computed once)."""
        if "ideal" not in self.memo:
            kwargs = next(iter(self.configs.values())).task_kwargs
            self.memo["ideal"] = div.ideal_losses(kwargs, sorted({M for M, _ in self.configs})).set_index("M")
        return self.memo["ideal"]


def assemble(preset, configs, llc, results, llc_found) -> Sweep:
    curves = div.curves(results)
    table, meta = llc_found if llc_found is not None else (None, None)
    return Sweep(preset, configs, llc, results, curves, div.final(curves), table, meta)


def sweep_settings(preset: str, Ms=None, seeds=None, steps=None, overrides=None,
                   **llc_fields) -> tuple[dict, SGLDConfig]:
    """``presets.diversity`` with the pages' knobs: ``steps`` (None: the preset's) rebuilds the log + linear
    evaluation steps for the new length; ``seeds`` None is [0]."""
    Ms, seeds = parsed(Ms, "Ms"), int_list(seeds, "seeds", [0])
    changes = dict(overrides or {})
    if steps is not None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 10:
            raise ValueError(f"parameter 'steps' must be an integer >= 10, got {steps!r}")
        base = DIVERSITY.get(preset)  # an unknown preset is refused by ``diversity`` below
        if base is not None:
            changes.update(steps=steps, eval_steps=log_linear_steps(steps, 12, 6),
                           eval_every=max(1, round(base.eval_every * steps / base.steps)))
    return diversity(preset, Ms, seeds, changes, **llc_fields)


def live(preset: str = "cpu", Ms=None, seeds=None, steps=None, overrides=None, use_cache: bool = True,
         with_llc: bool = True, executor=None, progress: bool = True, **llc_fields) -> Sweep:
    """Train (or load) the page's sweep, and the LLC at the end of every run (``with_llc``)."""
    configs, llc = sweep_settings(preset, Ms, seeds, steps, overrides, **llc_fields)
    results = sweep(configs, use_cache=use_cache, executor=executor, progress=progress)
    found = div.llc_vs_M(configs, llc, use_cache=use_cache, progress=False) if with_llc else None
    return assemble(preset, configs, llc, results, found)


# Sweeps made run by run across work sessions: shown with the runs committed so far (the page names the rest).
SHOWN_WHEN_PARTIAL = ("cpu_d8", "cpu_d8_50k")


def stored(preset: str, so_far: bool = False) -> Sweep | None:
    """The committed (or locally finished) sweep of ``preset`` with its LLC table, or None; never trains. A
    preset of ``SHOWN_WHEN_PARTIAL`` comes with the runs found so far (at least three M); with ``so_far``, any
    preset does, from one M on (a sweep made M by M on lent GPUs: shown run by run, never judged). The preset's
    more seeds (``presets.more_seeds``) join it where found, so its curves and t_crit are seed means there; its
    LLC table is the preset's own runs'."""
    configs, llc = sweep_settings(preset)
    results, store = {}, cache.current()
    for label, cfg in configs.items():
        result = store.result(cfg)
        if result is None:
            if so_far or preset in SHOWN_WHEN_PARTIAL:
                continue
            return None
        results[label] = result
    if len({M for M, _ in results}) < (1 if so_far else 3):
        return None
    found = {label: configs[label] for label in results}
    llc_found = div.load_llc(found, llc) if found == configs else None
    for label, cfg in icl_presets.more_seeds(preset).items():
        if (result := store.result(cfg)) is not None:
            results[label], found[label] = result, cfg
    return assemble(preset, found, llc, results, llc_found)


def paper_so_far(shown: dict) -> Sweep | None:
    """The ``paper`` sweep's runs committed so far while the whole sweep is not (None once it is shown, or while
    no run is committed): Carroll et al.'s sweep is trained M by M on lent GPUs, and each M is shown as it comes,
    its claims judged only once every M is in."""
    return None if "paper" in shown else stored("paper", so_far=True)


def so_far_texts(s: Sweep | None) -> dict[str, str]:
    """The runs of a sweep made M by M (``paper_so_far``, or the whole sweep) as the page glues them: ``runs``,
    each M with its training seconds ("M = 64 in 521 s"; a run not made on a GPU names its device; "none");
    ``left``, the M still to train ("none")."""
    done = {} if s is None else {M: r.meta for (M, _), r in sorted(s.results.items())}
    left = not_yet_committed(s) if s is not None else sorted({M for M, _ in sweep_settings("paper")[0]})
    runs = [f"M = {div.label_M(M)} in {m['wall_time_s']:,.0f} s"
            + ("" if str(m["device"]).startswith("cuda") else f" (on {m['device']})") for M, m in done.items()]
    return {"runs": listed(runs, empty="none"), "left": ", ".join(div.label_M(M) for M in left) or "none"}


def not_yet_committed(s: Sweep) -> list:
    """The M of ``s``'s preset whose runs are not committed yet (empty for a whole sweep)."""
    configs, _ = sweep_settings(s.preset)
    return sorted({M for M, _ in configs} - {M for M, _ in s.configs})


ORDER_LABELS = {"resolved": "resolved", "tie": "a tie or a reversal", "unresolved": "not resolved at this grid"}


def transient_summary(s: Sweep | None) -> dict:
    """What the sweep shows by the page's rule, as the page's prose pastes it (``MISSING`` throughout for a sweep
    not shown): ``Ms``, the M with a transient ("none"); ``t_crit``, theirs ("8: 1,200, 16: 1,500"); ``order``, the
    smallest step up of t_crit between consecutive M in evaluations of the grid (``t_crit_order``), and
    ``order_label``, whether that resolves their order (``ORDER_LABELS``); for the smallest (``low_``) and largest
    (``high_``) finite M: ``M``, which predictor it ends ``nearer``, and its final Δ to ``dmmse`` and to ``ridge``;
    ``not_committed``, the M of the preset not committed yet ("none")."""
    keys = ["Ms", "t_crit", "order", "order_label", "not_committed"] + [
        f"{end}_{k}" for end in ("low", "high") for k in ("M", "nearer", "dmmse", "ridge")]
    if s is None:
        return dict.fromkeys(keys, MISSING)
    t, f = transients(s), s.final.groupby("M")[["delta_dmmse", "delta_ridge"]].mean()
    Ms, order = transient_Ms(s), t_crit_order(s)
    finite = [M for M in f.index if M != icl_presets.INF]
    label = None if order is None else "resolved" if order >= 3 else "tie" if order <= 0 else "unresolved"
    texts = {"Ms": ", ".join(div.label_M(M) for M in Ms) or "none",
             "t_crit": ", ".join(f"{div.label_M(M)}: {int(t.loc[M, 't_crit']):,}" for M in Ms) or MISSING,
             "order": MISSING if order is None else f"{order:.0f}",
             "order_label": MISSING if label is None else ORDER_LABELS[label],
             "not_committed": ", ".join(div.label_M(M) for M in not_yet_committed(s)) or "none"}
    for end, M in (("low", min(finite)), ("high", max(finite))):
        texts |= {f"{end}_M": div.label_M(M),
                  f"{end}_nearer": "dMMSE_M" if f.loc[M, "delta_dmmse"] < f.loc[M, "delta_ridge"] else "ridge",
                  f"{end}_dmmse": f"{f.loc[M, 'delta_dmmse']:.3f}", f"{end}_ridge": f"{f.loc[M, 'delta_ridge']:.3f}"}
    return texts


def shown_sweeps(live_sweep: Sweep, also: tuple = (), without: tuple = ()) -> dict:
    """``{preset: Sweep}``: the live sweep, then every stored sweep of ``also`` (e.g. the transient page's
    ``cpu_d8_50k``), the long CPU sweep and the paper preset, less those of ``without``."""
    wanted = [p for p in (*also, "cpu_long", "paper") if p != live_sweep.preset and p not in without]
    return {live_sweep.preset: live_sweep} | committed_sweeps(wanted)


def committed_sweeps(presets) -> dict:
    """``{preset: Sweep}`` of the stored sweeps of ``presets`` (``stored``; one not stored is left out)."""
    found = {preset: stored(preset) for preset in presets}
    return {preset: s for preset, s in found.items() if s is not None}


def how_to_make(preset: str) -> str:
    """The command that makes the stored sweep ``preset``, with its cost (markdown)."""
    return {"cpu_long": "`python -m plateau_lib diversity --preset cpu_long --workers 2 --commit` (about an hour on 2 cores)",
            "cpu_d8": "`python -m plateau_lib transient-search w64 --Ms 4 8 16 32 64 128 256 inf` (20-45 min a run "
                      "on one core)",
            "cpu_d8_50k": "`python -m plateau_lib transient-search w64-50k --Ms 4 8 16 32 64 128 256 inf` (about "
                          "an hour a run on one core)"}.get(preset, "a GPU through `make paper`")


def committed_label(stored) -> str:
    """Whether a stored result the page looked up (a sweep of ``shown_sweeps``, a calibration, …; None when absent)
    is committed, as the page's prose pastes it: "committed" or "not among the committed results"."""
    return "not among the committed results" if stored is None else "committed"


def switch_text(s: Sweep | None) -> str:
    """The M at which the sweep's final models switch from dMMSE to ridge (``switch_M``) as the page writes it:
    "M = 8", "none in this grid", or ``MISSING`` for a sweep not shown."""
    if s is None:
        return MISSING
    switch = div.switch_M(s.final)
    return "none in this grid" if switch is None else f"M = {switch}"


def pca_of(s: Sweep, n_components: int = 2):
    """(the fitted joint PCA, the runs' projections (label, step, PC…, M, ood_loss), the predictors'
    projections indexed by (kind, M)), fitted once per sweep and number of components."""
    if ("pca", n_components) not in s.memo:
        s.memo[("pca", n_components)] = _fit_pca(s, n_components)
    return s.memo[("pca", n_components)]


def _fit_pca(s: Sweep, n_components: int):
    rows, steps = div.trajectory_rows(s.results)
    pca = trajectory.fit_joint_pca(rows, n_components)
    proj = trajectory.projections(pca, rows, steps)
    proj["M"] = [label[0] for label in proj["label"]]
    ood = s.curves.set_index(["M", "seed", "step"])["ood_loss"]
    proj["ood_loss"] = [ood[(M, seed, step)] for (M, seed), step in zip(proj["label"], proj["step"])]
    kwargs = next(iter(s.configs.values())).task_kwargs
    predictors = div.predictor_rows(kwargs, sorted({M for M, _ in s.configs}))
    pred = pd.DataFrame(trajectory.project(pca, np.stack(list(predictors.values()))),
                        index=pd.MultiIndex.from_tuples(list(predictors), names=["kind", "M"]),
                        columns=[f"PC{i + 1}" for i in range(n_components)])
    return pca, proj, pred


# ---- tables, verdict values and provenance --------------------------------------------------------------

def per_M_table(s: Sweep) -> pd.DataFrame:
    """Per M (seed-mean), formatted for the page: final Δ to dMMSE_M and to ridge (on q_M, per token), the
    final losses, t_crit and how much the OOD loss rose after it (both by the page's rule, ``transients``),
    λ̂ ± SE, and what the final model is nearer."""
    f = s.final.groupby("M")[["delta_dmmse", "delta_ridge", "id_loss", "ood_loss"]].mean()
    rule = transients(s).reindex(f.index)
    t = f.join(rule[["t_crit", "ood_rise"]].astype(float))
    table = pd.DataFrame({"Δ to dMMSE_M": float_texts(t["delta_dmmse"]),
                          "Δ to ridge": formatted(t["delta_ridge"], "{:.3f}"),
                          "loss on q_M": formatted(t["id_loss"], "{:.3f}"),
                          "OOD loss": formatted(t["ood_loss"], "{:.3f}"),
                          "t_crit": formatted(t["t_crit"], "{:,.0f}"),
                          "OOD rise after tᶜʳⁱᵗ": formatted(t["ood_rise"], "{:.1%}")},
                         index=t.index)
    if s.llc_table is not None:
        llc = s.llc_table.groupby("M")[["llc_mean", "llc_se"]].mean().reindex(t.index)
        table["λ̂"] = [f"{m:.1f} ± {e:.1f}" for m, e in zip(llc["llc_mean"], llc["llc_se"])]
    table["transient (the rule)"] = np.where(t.index == icl_presets.INF, "–", np.where(rule["transient"], "yes", "no"))
    table["nearer to"] = np.where(t.index == icl_presets.INF, "ridge (= dMMSE at M = ∞)",
                                  np.where(t["delta_ridge"] < t["delta_dmmse"], "ridge", "dMMSE_M"))
    table.index = [div.label_M(M) for M in t.index]
    table.index.name = "M"
    return table


def transients(s: Sweep) -> pd.DataFrame:
    """Per M, ``transient_search.transient`` of its seed-mean curves: the page's one rule for a transient (a dip of
    the OOD loss to t_crit, a rise after it, and Δ to ridge on Gaussian tasks regrowing; each > 5% and > three
    noise levels). Computed once per sweep."""
    if "transients" not in s.memo:
        mean = s.curves.groupby(["M", "step"])[["ood_loss", "delta_ridge_ood"]].mean().reset_index()
        s.memo["transients"] = pd.DataFrame(
            {M: div.transient(g["step"], g["ood_loss"].to_numpy(), g["delta_ridge_ood"].to_numpy())
             for M, g in mean.groupby("M", sort=True)}).T
    return s.memo["transients"]


def t_crit_order(s: Sweep) -> float | None:
    """How t_crit grows with M over the M with a transient (None below two of them): the smallest step up of t_crit
    between consecutive M, counted in evaluations of the grid (``resolved_steps``). 0 is a tie, negative a reversal;
    1-2 are not resolved at this evaluation grid."""
    Ms = transient_Ms(s)
    if len(Ms) < 2:
        return None
    grid = np.sort(s.curves["step"].unique())
    return float(resolved_steps(transients(s).loc[Ms, "t_crit"].astype(float).to_numpy(), grid).min())


def resolved_steps(t_crit, grid) -> np.ndarray:
    """For t_crit at consecutive M (in M's order), how many evaluations of ``grid`` each next t_crit lies after the
    previous one (signed: 0 for a tie, negative when it comes earlier)."""
    index = np.searchsorted(np.asarray(grid, dtype=float), np.asarray(t_crit, dtype=float))
    return np.diff(index)


PAPER_TRANSIENT_RANGE = (16, 128)  # Carroll et al.: the M whose OOD loss dips to ridge's, then rises (reference §4.3)
# The papers' M ranges at D = 8, drawn on the figures against M (the claims' sources): Carroll et al. §4.3, the final
# model is neither dMMSE_M nor ridge between M = 182 and 362 (their model); Raventós et al. §3.1, the PT tracks
# dMMSE up to M ≈ 2⁶ (their 8-layer model).
PAPER_SWITCH_RANGE = (182, 362)
PAPER_DMMSE_UP_TO = 64
PAPER_D = 8


def M_position(Ms, M: float) -> float:
    """Where ``M`` falls on a figure's categorical M axis (tick i at ``Ms[i]``): interpolated in log M between the
    finite M, at most half a tick past the largest finite one (∞'s tick comes after it)."""
    finite = [m for m in Ms if m != icl_presets.INF]
    position = float(np.interp(np.log2(M), np.log2(finite), np.arange(len(finite)), right=np.nan))
    return len(finite) - 0.5 if np.isnan(position) else position


def transient_share(finite, transient) -> float | None:
    """The share of the finite M inside the paper's transient range that show a transient (None: none inside)."""
    lo, hi = PAPER_TRANSIENT_RANGE
    inside = [M for M in finite if lo <= M <= hi]
    return sum(M in transient for M in inside) / len(inside) if inside else None


def transient_Ms(s: Sweep) -> list:
    """Finite M with a transient by the page's rule (``transients``): Carroll's signature, the OOD loss first
    falls toward ridge's, then rises toward dMMSE_M's."""
    t = transients(s)
    return [int(M) for M in t.index[(t.index != icl_presets.INF) & t["transient"].astype(bool)]]


def provenance_rows(shown: dict, tables: dict | None = None) -> list[dict]:
    """One row per training run and one per LLC table of every sweep shown, then one per other stored table of
    ``tables`` (``{(preset, what): meta}``)."""
    rows = []
    for preset, s in shown.items():
        rows += run_provenance({(div.label_M(M), seed): r for (M, seed), r in s.results.items()}, preset)
        if s.llc_meta is not None:
            rows.append(_table_row(preset, "LLC at the final weights, every M", s.llc_meta))
    return rows + [_table_row(preset, what, meta) for (preset, what), meta in (tables or {}).items()]


def _table_row(preset: str, what: str, meta: dict) -> dict:
    return {"preset": preset, "run": what, "device": meta.get("device"), "wall time (s)": meta.get("llc_wall_s"),
            "source": meta.get("cache") or "computed in this build", "commit": meta.get("commit"),
            "date": str(meta.get("date", ""))[:10]}


def provenance_summary(s: Sweep) -> dict:
    return summary(s.results)


def moving(s: Sweep) -> bool:
    """Whether any run's predictions change over its checkpoints (the trajectory PCA needs them to)."""
    rows, _ = div.trajectory_rows(s.results)
    return any(np.ptp(np.asarray(x, dtype=float), axis=0).max() > 0 for x in rows.values())


def transient_values(s: Sweep, n_components: int = 2) -> dict:
    """Our numbers for the transient-ridge claims (``icl.claims``, "Carroll Figs. 1, 3")."""
    f = s.final.groupby("M")[["delta_dmmse", "delta_ridge"]].mean()
    finite = [M for M in f.index if M != icl_presets.INF]
    lo, hi = min(finite), max(finite)
    transient = transient_Ms(s)
    values = {
        "final Δ to dMMSE ÷ Δ to ridge at the smallest M (on q_M)": f.loc[lo, "delta_dmmse"] / f.loc[lo, "delta_ridge"],
        "share of the M in 16–128 with a transient (the page's rule: a dip, then a rise > 5%; Δ to ridge regrows)":
            transient_share(finite, transient),
        "tᶜʳⁱᵗ's smallest step up between consecutive M with a transient (evaluations of the grid)": t_crit_order(s),
        "final Δ to ridge ÷ Δ to dMMSE at the largest finite M (on q_M)": f.loc[hi, "delta_ridge"] / f.loc[hi, "delta_dmmse"],
        "behavioural switch: smallest M whose final model is nearer ridge": div.switch_M(s.final),
    }
    if moving(s):  # runs that never move (untrained: the claims' baseline) have no trajectory for a PCA
        pca, proj, _ = pca_of(s, n_components)
        values["|correlation of PC2 with the OOD loss| over all checkpoints"] = abs(
            float(np.corrcoef(proj["PC2"], proj["ood_loss"])[0, 1]))
        values["variance explained by PC1 + PC2"] = float(pca.explained_variance_ratio[:2].sum())
    if s.llc_table is not None:
        llc = s.llc_table.groupby("M")["llc_mean"].mean()
        dmmse_like = [M for M in finite if f.loc[M, "delta_dmmse"] < f.loc[M, "delta_ridge"]]
        if icl_presets.INF in llc.index:
            values["λ̂ at the smallest M ÷ λ̂ at M = ∞"] = llc.loc[lo] / llc.loc[icl_presets.INF]
            values["λ̂ at the largest dMMSE-like M ÷ λ̂ at M = ∞"] = (
                llc.loc[max(dmmse_like)] / llc.loc[icl_presets.INF] if dmmse_like else None)
    return {k: (None if v is None else float(v)) for k, v in values.items()}


def diversity_values(s: Sweep) -> dict:
    """Our numbers for the task-diversity claims ("Raventós Fig. 2"), Δ divided by D as in their Eq. 4."""
    kwargs = next(iter(s.configs.values())).task_kwargs
    D = kwargs["D"]
    f = s.final.groupby("M").mean(numeric_only=True)
    finite = [M for M in f.index if M != icl_presets.INF]
    lo, hi = min(finite), max(finite)
    ideal = s.ideal()
    values = {"Δᴾʳᵉᵗʳᵃⁱⁿ(PT, dMMSE) ÷ D at the smallest M": f.loc[lo, "delta_dmmse"] / D,
              "Δᵀʳᵘᵉ(PT, ridge) ÷ Δᵀʳᵘᵉ(dMMSE_M, ridge) at the largest finite M":
                  f.loc[hi, "delta_ridge_ood"] / ideal.loc[hi, "delta_dmmse_ridge_ood"]}
    if icl_presets.INF in f.index:
        values["Δᵀʳᵘᵉ(PT, ridge) ÷ D at M = ∞"] = f.loc[icl_presets.INF, "delta_ridge_ood"] / D
    return {k: float(v) for k, v in values.items()}

TRANSIENT_FIGURE, DIVERSITY_FIGURE = "Carroll Figs. 1, 3 (transient ridge)", "Raventós Fig. 2 (task diversity)"


# The transient page's long-CPU column on the Reproducibility page is the D = 8 transient sweep; the D = 2 long
# sweep keeps its column on the page only.
RECORD_AS = {TRANSIENT_FIGURE: {"cpu_d8_50k": "paper_data", "cpu_long": None}}


def complete_seeds(s: Sweep) -> list[int]:
    """The model seeds of ``s`` with a run at every M of its grid: the seeds its claims are judged at (a seed
    trained at some M only, as ``presets.more_seeds`` adds, cannot answer a claim about the smallest M)."""
    Ms = {M for M, _ in s.configs}
    return [seed for seed in sorted({seed for _, seed in s.configs}) if all((M, seed) in s.configs for M in Ms)]


def of_seed(s: Sweep, seed: int) -> Sweep:
    """``s`` with one model seed's runs only (its LLC table's rows of that seed)."""
    keep = [label for label in s.configs if label[1] == seed]
    table = None if s.llc_table is None else s.llc_table[s.llc_table["seed"] == seed]
    return Sweep(s.preset, {k: s.configs[k] for k in keep}, s.llc, {k: s.results[k] for k in keep if k in s.results},
                 s.curves[s.curves["seed"] == seed], s.final[s.final["seed"] == seed], table, s.llc_meta)


def seed_by_seed(values_of, s: Sweep) -> dict:
    """``values_of`` (``transient_values`` or ``diversity_values``) at each of ``complete_seeds(s)`` alone, as
    ``{claim metric: BySeed}`` (NaN where a seed has no value): every seed judged on its own curves, never on their
    mean."""
    per_seed = {seed: values_of(of_seed(s, seed)) for seed in complete_seeds(s)}
    metrics = dict.fromkeys(m for values in per_seed.values() for m in values)
    return {m: BySeed({seed: math.nan if values.get(m) is None else values[m] for seed, values in per_seed.items()})
            for m in metrics}


def seed_transients(s: Sweep | None) -> str:
    """The M with a transient by the page's rule at each model seed alone, with their tᶜʳⁱᵗ ("8 at 2,527 and 16 at
    1,724 (seed 0); none (seed 1)"), ``MISSING`` for a sweep not shown: the seed-mean curves checked seed by seed."""
    if s is None:
        return MISSING
    texts = []
    for seed in sorted({seed for _, seed in s.configs}):
        one = of_seed(s, seed)
        t_crit = transients(one)["t_crit"]
        found = [f"{div.label_M(M)} at {int(t_crit[M]):,}" for M in transient_Ms(one)]
        texts.append(f"{listed(found, empty='none')} (seed {seed})")
    return "; ".join(texts)


def verdict_table(figure: str, shown: dict, values_of, page: str, rerun: dict | None = None) -> pd.DataFrame:
    """``book.pages.verdicts`` of ``figure`` over the sweeps shown, each judged seed by seed (``seed_by_seed`` of
    ``values_of``), recorded for the Reproducibility page as ``RECORD_AS`` says; ``rerun``: ``{preset: values}``
    of a nudged re-run (``icl.rerun.sweep_rerun``)."""
    record_as = RECORD_AS.get(figure, {}) if "cpu_d8_50k" in shown else {}
    return verdicts(claims_of(figure), {p: seed_by_seed(values_of, s) for p, s in shown.items()}, page,
                    {p: provenance_summary(s) for p, s in shown.items()}, LABELS, record_as=record_as, rerun=rerun)


# ---- settings, closing note, calibration table ---------------------------------------------------------

SETTINGS = ["steps", "d_model", "n_head", "n_layer", "batch_size", "lr", "schedule", "warmup_steps", "eval_batch"]
TASK_SETTINGS = ["D", "K", "noise_var", "d_mlp", "doubled_residual", "n_root"]


def paper_cost() -> dict:
    """The paper preset's model as a CPU sees it: its parameter count, one core's measured seconds a training step
    and CPU-hours a run (``results/cpu_costs.json``; None where its architecture was not measured)."""
    from plateau_lib.engine import costs
    measured = costs.cpu_costs([DIVERSITY_PAPER], measure=False)
    run_s = costs.estimate_cpu_s(DIVERSITY_PAPER, measured)
    step = measured.get(costs.architecture(DIVERSITY_PAPER))
    return {"parameters": costs.parameters(DIVERSITY_PAPER), "step_s": step and step["step_s"],
            "cpu_hours": run_s and run_s / 3600}


def paper_cost_texts() -> dict[str, str]:
    """``paper_cost`` as the pages glue it: ``paper_parameters`` (millions), ``paper_step_s`` and
    ``paper_cpu_hours``."""
    cost = paper_cost()
    return {"paper_parameters": f"{cost['parameters'] / 1e6:.2f}", "paper_step_s": f"{cost['step_s']:.1f}",
            "paper_cpu_hours": f"{cost['cpu_hours']:.0f}"}


def settings_table(s: Sweep) -> pd.DataFrame:
    """The sweep's task, model, training and SGLD settings beside the ``paper`` preset's (≠ marks a change)."""
    cfg = next(iter(s.configs.values())).to_dict()
    ref = DIVERSITY_PAPER.to_dict()
    rows = [{"setting": "M grid", "this sweep": ", ".join(div.label_M(M) for M in sorted({M for M, _ in s.configs})),
             "paper preset": ", ".join(div.label_M(icl_presets.INF if M is None else M) for M in DIVERSITY_MS["paper"])},
            {"setting": "seeds", "this sweep": str(sorted({seed for _, seed in s.configs})), "paper preset": "[0]"}]
    rows += [{"setting": f"task {k}", "this sweep": cfg["task_kwargs"].get(k), "paper preset": ref["task_kwargs"].get(k)}
             for k in TASK_SETTINGS]
    rows += [{"setting": f"training {k}", "this sweep": cfg[k], "paper preset": ref[k]} for k in SETTINGS]
    rows += [{"setting": f"SGLD {k}", "this sweep": setting_text(v), "paper preset": setting_text(getattr(DIVERSITY_LLC["paper"], k))}
             for k, v in s.llc.key_dict().items()]
    table = pd.DataFrame(rows).set_index("setting").map(setting_text)
    table["changed"] = np.where(table["this sweep"] != table["paper preset"], "≠", "")
    return table


def sweeps_table(shown: dict) -> pd.DataFrame:
    """One row per sweep shown: its steps, the training wall time of all its runs and its LLC table's (s), the M at
    which its final models switch from dMMSE to ridge (``switch_M``) and the M with a transient."""
    rows = []
    for preset, s in shown.items():
        rows.append({"sweep": LABELS.get(preset, preset), "steps": f"{int(s.curves['step'].max()):,}",
                     "training (s)": f"{sum(r.meta.get('wall_time_s') or 0 for r in s.results.values()):,.0f}",
                     "LLC (s)": MISSING if not s.llc_meta or s.llc_meta.get("llc_wall_s") is None
                     else f"{s.llc_meta['llc_wall_s']:,}",
                     "behavioural switch": switch_text(s),
                     "M with a transient": ", ".join(div.label_M(M) for M in transient_Ms(s)) or "none"})
    return pd.DataFrame(rows).set_index("sweep")


EVERY_M_COLUMNS = ["Δ to dMMSE_M", "Δ to ridge", "nearer to", "t_crit", "λ̂"]


def every_M_table(shown: dict) -> pd.DataFrame:
    """Per sweep shown and M (``per_M_table``): the final Δ to dMMSE_M and to ridge, which is nearer, t_crit and
    λ̂ (``MISSING`` for a sweep without an LLC table)."""
    frames = {LABELS.get(p, p): per_M_table(s).reindex(columns=EVERY_M_COLUMNS).astype(object).fillna(MISSING)
              for p, s in shown.items()}
    return pd.concat(frames, names=["sweep", "M"])


def calibration_table(table: pd.DataFrame) -> pd.DataFrame:
    """The calibration cells by M and ε: λ̂ (last quarter of draws) ± SE, diverged chains, converged."""
    shown = table[["M", "epsilon", "nbeta", "gamma", "llc_final", "llc_se", "num_diverged", "converged"]].copy()
    shown["M"] = shown["M"].map(div.label_M)
    return shown.set_index(["M", "epsilon"])
