"""Calibrating SGLD hyperparameters: a sweep over (epsilon, nbeta, gamma) (its figures are in plots.py).

The "final LLC" of a cell is the mean over chains of ``nbeta * (mean of the last ``last_draws`` draws
- init_loss)``: an average over the last draws, never a single draw (devinterp's EpsilonBetaAnalyzer
reads ``x[:, -N]``, one draw). What to look for: traces that flatten (converged), stay above 0 (no
escape to lower loss), no divergence, MALA acceptance near 0.9, and a final LLC that is flat in ε.
"""
from __future__ import annotations

import dataclasses
import itertools
import warnings
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from plateau_lib.engine.utils import in_book_build
from plateau_lib.llc.config import SGLDConfig
from plateau_lib.llc.estimator import estimate_llc
from plateau_lib.llc.result import LLCResult, LLCWarning, converged


def sweep_row(res: LLCResult, last_draws: int) -> dict:
    return {"epsilon": res.hyperparams["epsilon"], "nbeta": res.hyperparams["nbeta"],
            "gamma": res.hyperparams["gamma"], "llc_final": res.final_llc(last_draws), "llc_mean": res.llc_mean,
            "llc_se": res.llc_se, "num_diverged": int(res.diverged.sum()), "mala_mean": res.mala_mean,
            "negative": bool(res.final_llc(last_draws) < 0), "converged": converged(res),
            "elapsed_s": res.elapsed_s}


def calibration_sweep(model, loss_fn: Callable, data, sgld: SGLDConfig, *, epsilons: Sequence[float],
                      nbetas: Sequence[float | None], gammas: Sequence[float], last_draws: int | None = None,
                      progress: bool = True, **run) -> tuple[pd.DataFrame, dict]:
    """Run :func:`estimate_llc` on every (epsilon, nbeta, gamma) cell, the rest of ``sgld`` (seed included) fixed.

    last_draws: draws averaged into ``llc_final`` (default: the last quarter of ``num_draws``).
    run: the estimator's run options (device, mala, ...).
    Returns ``(table, results)``: a tidy DataFrame with one row per cell (epsilon, nbeta, gamma,
    llc_final, llc_mean, llc_se, num_diverged, mala_mean, negative, converged, elapsed_s) and
    ``{(epsilon, nbeta, gamma): LLCResult}``. Warnings of individual cells are collected in the results
    (``res.warnings``), not printed.
    """
    cells = list(itertools.product(epsilons, nbetas, gammas))
    if not cells:
        raise ValueError("epsilons, nbetas and gammas must each hold at least one value")
    last = max(1, sgld.num_draws // 4) if last_draws is None else int(last_draws)
    rows, results = [], {}
    for eps, nb, gam in tqdm(cells, desc="calibration sweep", disable=not progress or in_book_build()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LLCWarning)
            res = estimate_llc(model, loss_fn, data, dataclasses.replace(sgld, epsilon=eps, nbeta=nb, gamma=gam), **run)
        results[(eps, nb, gam)] = res
        rows.append(sweep_row(res, last))
    return pd.DataFrame(rows), results


def stored_sweep(stored, cells: Sequence[tuple], point: Callable, sgld: SGLDConfig, what: str,
                 compute: bool = False, deadline: float | None = None, progress: bool = True):
    """``(table, meta)`` of a calibration sweep kept in ``stored`` (an ``engine.cache.StoredTable``): loaded; else,
    with ``compute``, :func:`calibration_sweep` run cell by cell over ``cells`` ((ε, nβ, γ), numbered in order, on
    ``point()``'s ``(model, loss, data)``, on the CPU with MALA's acceptance), kept row by row so that an
    interrupted run resumes, and saved (``what`` in its meta) once every cell is in; else None."""
    if (found := stored.load()) is not None or not compute:
        return None if found is None else (found[0]["sweep"], found[1])
    model, loss, data = point()

    def rows(chunk):
        (i,) = chunk
        eps, nbeta, gamma = cells[i]
        table, _ = calibration_sweep(model, loss, data, sgld, epsilons=[eps], nbetas=[nbeta], gammas=[gamma],
                                     progress=False, device="cpu", mala=True)
        return table.assign(cell=i)

    table = stored.build(range(len(cells)), rows, on="cell", desc="calibration", progress=progress, deadline=deadline)
    if len(table) < len(cells):
        return None
    stored.save({"sweep": table}, {"what": what, "device": "cpu", "wall_s": round(float(table["elapsed_s"].sum()), 1)})
    stored.drop_rows()
    return table, stored.load()[1]


def batch_losses(model, loss_fn: Callable, data, batch_size: int, batches: int = 64, seed: int = 0) -> np.ndarray:
    """The loss of ``model`` (at w*) on ``batches`` minibatches of ``batch_size`` rows drawn at random from ``data``
    (a tensor or a tuple of tensors of equal length), under ``no_grad``."""
    rows = len(data[0] if isinstance(data, (tuple, list)) else data)
    g = torch.Generator().manual_seed(seed)
    out = []
    with torch.no_grad():
        for _ in range(batches):
            idx = torch.randint(0, rows, (batch_size,), generator=g)
            out.append(float(loss_fn(model, tuple(t[idx] for t in data) if isinstance(data, (tuple, list))
                                     else data[idx])))
    return np.array(out)


def mala_ceiling(losses: Sequence[float], nbeta: float) -> float:
    """The highest MALA acceptance a minibatch estimate can show, at any ε: its acceptance compares the potential
    nβ·L on two different batches, so even as ε → 0 it is E[min(1, exp(nβ (L_b − L_b')))] over pairs of batches,
    here the mean over every ordered pair (b ≠ b') of ``losses`` (``batch_losses`` at w*)."""
    losses = np.asarray(losses, dtype=float)
    if losses.ndim != 1 or len(losses) < 2:
        raise ValueError(f"losses must hold at least two batch losses, got shape {losses.shape}")
    gaps = nbeta * (losses[:, None] - losses[None, :])
    off = ~np.eye(len(losses), dtype=bool)
    return float(np.minimum(1.0, np.exp(np.minimum(gaps[off], 0.0))).mean())


def normal_mala_ceiling(spread: float) -> float:
    """``mala_ceiling`` when the potential's difference between two batches, nβ (L_b − L_b'), is normal with mean 0
    and standard deviation ``spread``: 1/2 + E[exp(−|D|)]/2 = 1/2 + exp(s²/2) Φ(−s)."""
    from scipy.special import erfcx
    if not spread >= 0:
        raise ValueError(f"spread must be a number >= 0, got {spread!r}")
    return float(0.5 + 0.5 * erfcx(spread / np.sqrt(2)))


def batch_for_mala(loss_std: float, batch_size: int, nbeta: float, target: float = None) -> float:
    """The batch size at which the MALA ceiling would reach ``target`` (default ``MIN_MALA``), if the batch losses'
    standard deviation at w*, ``loss_std`` at ``batch_size``, falls as 1/√batch (``normal_mala_ceiling``)."""
    target = MIN_MALA if target is None else target
    if not 0.5 < target < 1:
        raise ValueError(f"target must be between 0.5 and 1, got {target!r}")
    low, high = 0.0, 50.0  # the spread s at which the ceiling is target: it falls from 1 at s = 0 towards 1/2
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if normal_mala_ceiling(mid) > target else (low, mid)
    spread_now = np.sqrt(2) * nbeta * loss_std
    return float(batch_size * (spread_now / low) ** 2)


def middle_epsilon(epsilons: Sequence[float]) -> float:
    """The middle of the distinct step sizes of a sweep grid (the upper middle for an even count)."""
    values = sorted({float(e) for e in epsilons})
    if not values:
        raise ValueError("epsilons is empty")
    return values[len(values) // 2]


MIN_MALA = 0.8   # devinterp's guidance is an acceptance of about 0.9; below this the step size is too large
FLAT_TOL = 0.10  # λ̂ within 10 % of the next smaller ε's (same nβ, γ and ``over``): flat in ε


def flat_in_epsilon(table: pd.DataFrame, over: Sequence[str] = (), tolerance: float = FLAT_TOL) -> pd.Series:
    """The book's one definition of *flat in ε*, row by row of a ``calibration_sweep`` table (index kept): True
    where ``llc_final`` is within ``tolerance`` (relative) of the next smaller ε's at the same nβ, γ and columns
    ``over``; <NA> at the smallest ε, which has no neighbour."""
    keys = [*over, "nbeta", "gamma"]
    t = table.sort_values([*keys, "epsilon"])
    previous = t.groupby(keys, dropna=False)["llc_final"].shift(1)
    close = ((t["llc_final"] - previous).abs() <= tolerance * previous.abs()).astype("boolean")
    return close.mask(previous.isna()).reindex(table.index)


def criteria(sweep: pd.DataFrame, min_mala: float = MIN_MALA, flat_tol: float = FLAT_TOL) -> pd.DataFrame:
    """The calibration page's criteria, cell by cell of ``calibration_sweep``'s table: ``flat in ε``
    (``flat_in_epsilon``; the smallest ε has no neighbour and is not flat), ``MALA ok`` (acceptance >=
    ``min_mala``; NaN when not recorded: not ok), no diverged chain, converged, and ``meets the criteria``
    (all four)."""
    out = sweep.sort_values(["nbeta", "gamma", "epsilon"]).copy()
    out["flat in ε"] = flat_in_epsilon(out, tolerance=flat_tol).fillna(False).astype(bool)
    out["MALA ok"] = out["mala_mean"].astype(float) >= min_mala
    out["meets the criteria"] = (out["flat in ε"] & out["MALA ok"] & (out["num_diverged"] == 0)
                                 & out["converged"].astype(bool))
    return out.sort_index()


def mark_choice(table: pd.DataFrame, over: str | Sequence[str] = (), flat_tolerance: float = FLAT_TOL) -> pd.DataFrame:
    """The book's one step-size rule. ``table``: a ``calibration_sweep`` table, one row per cell and per value of the
    columns ``over`` (e.g. the checkpoint ``step``, or the number of tasks ``M``). Adds ``healthy`` (no diverged
    chain, λ̂ > 0, traces converged), ``flat`` (healthy and ``flat_in_epsilon`` at ``flat_tolerance``; the smallest
    ε is flat when healthy) and ``chosen``.

    A setting (ε, nβ, γ) qualifies when it is flat at every value of ``over``; of those, the largest nβ (the
    colder posterior), then the largest ε (the fastest mixing). None qualifies -> nothing chosen."""
    over = [over] if isinstance(over, str) else list(over)
    t = table.copy()
    t["healthy"] = (t["num_diverged"] == 0) & ~t["negative"].astype(bool) & t["converged"].astype(bool)
    t = t.sort_values([*over, "nbeta", "gamma", "epsilon"]).reset_index(drop=True)
    t["flat"] = t["healthy"] & flat_in_epsilon(t, over, flat_tolerance).fillna(True).astype(bool)
    ok = t.groupby(["nbeta", "gamma", "epsilon"])["flat"].all()
    ok = ok[ok]
    t["chosen"] = False
    if not ok.empty:
        nbeta, gamma, epsilon = max(ok.index, key=lambda cell: (cell[0], cell[2]))
        t["chosen"] = (t["nbeta"] == nbeta) & (t["gamma"] == gamma) & (t["epsilon"] == epsilon)
    return t


def chosen_setting(table: pd.DataFrame) -> dict | None:
    """The (epsilon, nbeta, gamma) marked ``chosen`` by ``mark_choice``, or None."""
    rows = table[table["chosen"]]
    return None if rows.empty else {k: float(rows[k].iloc[0]) for k in ("epsilon", "nbeta", "gamma")}
