"""The mistakes of an LLC estimated by hand, computed so they can be compared with the SGLD estimate.

- :func:`naive_scores`: perturbing w* afresh each draw (no chain), comparing perturbed losses with each
  other, and inverting the formula ("higher stability, higher LLC").
- :func:`burn_in_table`: short runs with and without burn-in (the first draws sit at w*).
- :func:`plateau_lib.llc.failure_modes.finite_draw_mean`: averaging a diverged chain's finite draws in.
- Fresh noise and batches at every checkpoint: ``LLCCallback(..., fresh_seed=True)`` (callbacks.py).
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from plateau_lib.llc.config import SGLDConfig
from plateau_lib.llc.estimator import estimate_llc

SIGMAS = (1e-3, 3e-3, 1e-2)
FRESH = "fresh perturbation: nβ·mean(L − L0)"
PAIRWISE = "perturbed vs perturbed: mean ΔL"
INVERTED = "inverted: 1/mean((L − L0)²)"


def naive_scores(model, loss_fn: Callable, batch, nbeta: float, sigmas: Sequence[float] = SIGMAS,
                 draws: int = 20, seed: int = 0) -> list[dict]:
    """Three hand-made "LLCs" of ``model`` on one fixed ``batch``, for each noise scale σ.

    Each draw perturbs every parameter of w* by N(0, σ²) afresh (no chain) and records the loss L; L0 is the
    loss at w*. Per σ: ``nβ·mean(L − L0)`` (fresh perturbation), the mean difference of consecutive perturbed
    losses (it telescopes to (L_last − L_first)/(draws − 1), about 0), and ``1/mean((L − L0)²)`` (the
    inverted formula). ``model`` is not modified.
    """
    if draws < 2:
        raise ValueError(f"draws must be at least 2, got {draws!r}")
    work = copy.deepcopy(model)
    base = [p.detach().clone() for p in work.parameters()]
    gen = torch.Generator().manual_seed(seed)
    rows = []
    with torch.no_grad():
        l0 = float(loss_fn(work, batch))
        for sigma in sigmas:
            losses = []
            for _ in range(draws):
                for p, p0 in zip(work.parameters(), base):
                    p.copy_(p0 + sigma * torch.randn(p.shape, generator=gen))
                losses.append(float(loss_fn(work, batch)))
            losses = np.array(losses)
            rows.append({"σ": sigma, FRESH: nbeta * (losses.mean() - l0), PAIRWISE: np.diff(losses).mean(),
                         INVERTED: 1.0 / np.mean((losses - l0) ** 2)})
    return rows


def naive_table(models: dict, loss_fn: Callable, batch, nbeta: float, **kwargs) -> pd.DataFrame:
    """:func:`naive_scores` for every model of ``{name: model}``, one row per (model, σ)."""
    return pd.DataFrame([{"model": name, **row} for name, model in models.items()
                         for row in naive_scores(model, loss_fn, batch, nbeta, **kwargs)])


def burn_in_table(model, loss_fn: Callable, data, draws: Sequence[int], sgld: SGLDConfig, **run) -> pd.DataFrame:
    """λ̂ ± SE for each number of draws, with no burn-in and with ``draws // 2`` burn-in steps.

    sgld: the settings of every row, but for ``num_draws`` and ``num_burnin_steps`` (each row sets them);
    run: the estimator's run options.
    """
    rows = []
    for d in sorted({int(d) for d in draws}):
        for burn in sorted({0, d // 2}):
            r = estimate_llc(model, loss_fn, data, dataclasses.replace(sgld, num_draws=d, num_burnin_steps=burn), **run)
            rows.append({"draws": d, "burn-in": burn, "λ̂": r.llc_mean, "SE": r.llc_se})
    return pd.DataFrame(rows)
