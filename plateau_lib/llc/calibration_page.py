"""What the LLC page shows about itself: its settings and the provenance of every run on it."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from plateau_lib.book.pages import MISSING, setting_text, value_range
from plateau_lib.book.panels import try_it
from plateau_lib.engine.utils import git_commit, resolve_device
from plateau_lib.llc import golden
from plateau_lib.llc.calibration import FLAT_TOL, MIN_MALA
from plateau_lib.llc.config import SGLDConfig
from plateau_lib.llc.estimator import estimate_llc
from plateau_lib.llc.plots import plot_traces

SETTING_NOTES = {
    "num_chains": "SGLD chains per estimate (transformer)", "num_draws": "draws per chain (transformer)",
    "sgld_batch": "SGLD minibatch size m", "train_steps": "training steps of the transformer",
    "d_model": "transformer width", "golden_draws": "draws per golden model",
    "golden_chains": "chains per polynomial golden model",
    "golden_train_steps": "full-batch Adam steps, reduced-rank regression",
    "epsilons": "sweep: SGLD step sizes ε", "nbetas": "sweep: nβ (default: m / ln m)",
    "gammas": "sweep: localization strengths γ", "n_data": "SGLD data set (sequences)"}


def settings_table(settings: dict, preset: str) -> pd.DataFrame:
    """The page's settings (``llc.presets.llc_page``) as a two-column table: value and meaning."""
    return pd.DataFrame({preset: {k: setting_text(v) for k, v in settings.items()},
                         "meaning": {k: SETTING_NOTES.get(k, "") for k in settings}}).rename_axis("setting")


def sgld_device() -> str:
    """The device the transformer's SGLD chains run on ('auto': cuda, then mps, then cpu)."""
    return str(resolve_device("auto"))


def golden_provenance_row(estimates, preset: str) -> dict:
    """A provenance row (the columns of ``book.pages.run_provenance``) for the golden estimates of this build."""
    return {"preset": preset, "run": f"golden models ({len(estimates)} SGLD estimates)", "device": "cpu",
            "wall time (s)": round(sum(e.wall_s for e in estimates), 1), "source": "computed in this build",
            "commit": git_commit(), "date": dt.date.today().isoformat()}


# ---- the live panel: SGLD on a golden model, where λ is known -------------------------------------------------

GOLDEN_CASES = {"polynomial w0·w1 (λ = 1/2)": (0, 1), "polynomial w1² (λ = 1/4)": (0, 2),
                "polynomial w1³ (λ = 1/6)": (0, 3), "polynomial w0·w1² (λ = 1/4, hard)": (1, 2)}


def golden_run(case: str, epsilon: float, gamma: float, nbeta: float, draws: int, seed: int = 0):
    """λ̂ on the golden polynomial ``case`` (n = 1000, full batch, 8 chains) with these SGLD settings: the traces
    against the exact λ. Returns the figure and the estimate."""
    if case not in GOLDEN_CASES:
        raise ValueError(f"unknown golden case {case!r}; allowed: {list(GOLDEN_CASES)}")
    powers = GOLDEN_CASES[case]
    res = estimate_llc(golden.PolynomialModel(powers), golden.mse_loss, golden.polynomial_data(1000, seed=1),
                       SGLDConfig(epsilon=epsilon, gamma=gamma, nbeta=nbeta, num_chains=8, num_draws=draws,
                                  num_burnin_steps=draws // 6, seed=seed), warn=False, backend="vmap", device="cpu")
    lam = golden.polynomial_lambda(powers)
    fig = plot_traces(res, true_llc=lam, title=f"{case}: λ̂ = {res.llc_mean:.3g} ± {res.llc_se:.2g} "
                                               f"(÷ λ = {res.llc_mean / lam:.2f})")
    return fig, res


def golden_panel(static=None, live: bool | None = None):
    """The LLC page's panel: ε, γ, nβ and draws on a golden model; continuous (every change redraws)."""
    import ipywidgets as widgets
    style = {"description_width": "initial"}
    controls = {
        "case": widgets.Dropdown(options=list(GOLDEN_CASES), value=list(GOLDEN_CASES)[1], description="model",
                                 style=style),
        "epsilon": widgets.FloatLogSlider(value=1e-4, base=10, min=-6, max=-2, step=0.25, description="ε",
                                          readout_format=".1e", continuous_update=False, style=style),
        "gamma": widgets.Dropdown(options=[0.0, 1.0, 10.0, 100.0], value=0.0, description="γ", style=style),
        "nbeta": widgets.FloatLogSlider(value=144.8, base=10, min=1, max=3, step=0.1, description="nβ",
                                        readout_format=".3g", continuous_update=False, style=style),
        "draws": widgets.IntSlider(value=500, min=100, max=2000, step=100, description="draws",
                                   continuous_update=False, style=style)}
    return try_it(controls, golden_run, static=static, continuous=True, live=live)


def criteria_summary(checked: pd.DataFrame | None) -> dict:
    """The page's criteria on a sweep (``calibration.criteria``), as its prose pastes them: ``flat_tol`` (percent)
    and ``min_mala``, the thresholds; ``met_by``, the cells that meet every criterion ("ε = 0.001, nβ = 10; …", or
    "no cell of this sweep") and ``llc_met``, their final λ̂; ``mala_range``, the MALA acceptance over the cells;
    ``not_flat`` of ``cells`` cells not flat in ε; ``met_but_mala``, the cells that meet every criterion but MALA's
    ("no cell"). Without a sweep (None), each value is ``MISSING``."""
    if checked is None:
        return dict.fromkeys(["flat_tol", "min_mala", "met_by", "llc_met", "mala_range", "not_flat", "cells",
                              "met_but_mala"], MISSING)
    good = checked[checked["meets the criteria"]]
    but_mala = checked[checked["flat in ε"] & (checked["num_diverged"] == 0) & checked["converged"].astype(bool)]
    return {"flat_tol": f"{FLAT_TOL:.0%}", "min_mala": f"{MIN_MALA}",
            "met_by": cells_text(good) or "no cell of this sweep",
            "met_but_mala": cells_text(but_mala.sort_values(["nbeta", "epsilon"])) or "no cell",
            "llc_met": value_range(good["llc_final"], "{:.1f}"),
            "mala_range": value_range(checked["mala_mean"]), "not_flat": int((~checked["flat in ε"]).sum()),
            "cells": len(checked)}


def cells_text(cells: pd.DataFrame, gamma: bool = False) -> str:
    """Sweep cells as the page writes them: "ε = 0.001, nβ = 10; …" (with ``gamma``, each cell's γ too)."""
    return "; ".join(f"ε = {r.epsilon:g}, nβ = {r.nbeta:.3g}" + (f", γ = {r.gamma:g}" if gamma else "")
                     for r in cells.itertuples())


def missed_criteria(checked: pd.DataFrame, epsilon: float, nbeta: float, gamma: float) -> list[str] | None:
    """The criteria (``calibration.criteria``'s names) that the cell (ε, nβ, γ) of a checked sweep misses: [] where it
    meets them all, None where the sweep has no such cell."""
    cell = checked[np.isclose(checked["epsilon"], epsilon) & np.isclose(checked["nbeta"], nbeta)
                   & np.isclose(checked["gamma"], gamma)]
    if cell.empty:
        return None
    row = cell.iloc[0]
    return [name for name, met in (("flat in ε", row["flat in ε"]), (f"MALA acceptance ≥ {MIN_MALA}", row["MALA ok"]),
                                   ("no diverged chain", row["num_diverged"] == 0),
                                   ("converged traces", bool(row["converged"]))) if not met]


def missed_text(checked: pd.DataFrame | None, sgld: SGLDConfig) -> str:
    """``missed_criteria`` of the setting ``sgld`` (its ε, nβ, γ) as the pages paste it: "none", the criteria it
    misses joined by "; ", or ``MISSING`` without a sweep or where the sweep lacks that cell."""
    missed = None if checked is None else missed_criteria(checked, sgld.epsilon, sgld.nbeta, sgld.gamma)
    return MISSING if missed is None else "; ".join(missed) or "none"


def calibration_answers(sweeps: dict) -> pd.DataFrame:
    """The LLC page's own question of each calibration sweep (``{label: calibration.criteria table}``, e.g. the live
    sweep and the long one), for its verdict box: does any cell meet the page's four criteria, and which; where
    none does, the criteria no cell meets."""
    rows = []
    for label, checked in sweeps.items():
        good = checked[checked["meets the criteria"]]
        if len(good):
            answer = "yes: " + cells_text(good, gamma=True)
        else:
            failing = [name for name, met in (("flat in ε", checked["flat in ε"].any()),
                                              (f"MALA acceptance ≥ {MIN_MALA}", checked["MALA ok"].any()),
                                              ("converged traces", checked["converged"].astype(bool).any()))
                       if not met]
            answer = "no" + (f": no cell has {' or '.join(failing)}" if failing else
                             ": each cell misses at least one criterion")
        rows.append({"question": f"Does a cell of {label} meet the page's criteria?", "answer": answer})
    return pd.DataFrame(rows, columns=["question", "answer"])
