"""In-context linear regression data (Raventós et al.; Hoogland et al.; Carroll et al.).

A sequence holds K pairs (x_k, y_k) with x_k ~ N(0, I_D) and y_k = wᵀx_k + ε_k, ε_k ~ N(0, σ²), one task
w per sequence. The task is either Gaussian, w ~ N(0, I_D) (M = ∞), or uniform over a finite set T_M of M
tasks. The sets are **nested**: T_M is the first M rows of one fixed seeded i.i.d. sequence t_1, t_2, ...
~ N(0, I_D), so T_1 ⊂ T_2 ⊂ ... share the root task t_1 (Carroll et al.). Batches are sampled online on
the generator's device; a batch is ``(xs (B, K, D), ys (B, K), ws (B, D))``: the tasks travel with the
data so the evaluation can rebuild targets for the out-of-distribution probes.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch
import torch.nn.functional as F


def check_params(D, K, noise_var, M) -> int | None:
    """ValueError naming the parameter for bad values; returns M normalised (None for ∞)."""
    for name, value in (("D", D), ("K", K)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise ValueError(f"task parameter {name!r} must be an integer >= 1, got {value!r}")
    if isinstance(noise_var, bool) or not isinstance(noise_var, numbers.Real) or not 0 < noise_var < math.inf:
        raise ValueError(f"task parameter 'noise_var' (σ²) must be a finite number > 0, got {noise_var!r}")
    if M is None or (isinstance(M, float) and M == math.inf):
        return None
    if not isinstance(M, numbers.Integral) or isinstance(M, bool) or M < 1:
        raise ValueError(f"task parameter 'M' (number of tasks) must be a positive integer, or None or "
                         f"float('inf') for Gaussian tasks, got {M!r}")
    return int(M)


def task_set(M: int, D: int, seed: int = 0) -> torch.Tensor:
    """T_M (M, D) float32 on the CPU: the first M tasks of the i.i.d. N(0, I_D) sequence fixed by ``seed``.

    numpy's generator fills values one after another, so the first M rows never depend on how many are
    drawn: the sets are nested across M, and the same on every device."""
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((M, D))).float()


def targets(xs, ws, noise):
    """y = wᵀx + ε per pair: (B, K)."""
    return torch.einsum("bkd,bd->bk", xs, ws) + noise


def sample(batch: int, K: int, D: int, noise_var: float, generator: torch.Generator, tasks=None, device=None):
    """A batch (xs, ys, ws) on ``device`` (default: the generator's). ``tasks`` (M, D): draw each
    sequence's task uniformly from them; None: Gaussian tasks. Draw order: tasks, inputs, noise."""
    device = generator.device if device is None else torch.device(device)
    if tasks is None:
        ws = torch.randn(batch, D, generator=generator, device=device)
    else:
        ws = tasks[torch.randint(0, tasks.shape[0], (batch,), generator=generator, device=device)]
    xs = torch.randn(batch, K, D, generator=generator, device=device)
    noise = torch.randn(batch, K, generator=generator, device=device) * math.sqrt(noise_var)
    return xs, targets(xs, ws, noise), ws


ROOT_PROBE_SEED = 3_000_017  # seeds the root-task probe sequences (offset by the task seed)


def root_probe(n: int, K: int, D: int, noise_var: float, task_seed: int = 0, device="cpu"):
    """Carroll et al.'s fixed PCA inputs: ``n`` sequences of the root task t_1 (the task every nested set
    shares), drawn on the CPU from their own seed so every run, M and device sees the same ones."""
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
        raise ValueError(f"parameter 'n' (number of root-task sequences, B) must be an integer >= 1, got {n!r}")
    g = torch.Generator().manual_seed(ROOT_PROBE_SEED + task_seed)
    batch = sample(int(n), K, D, noise_var, g, task_set(1, D, task_seed))
    return tuple(t.to(device) for t in batch)


def ood_batch(batch, g: float, kind: str):
    """Hoogland et al.'s OOD probes, on the same draws scaled by ``g``: "inputs" feeds x' = g x, "tasks"
    uses w' = g w (both x ~ N(0, g²I) or w ~ N(0, g²I)); targets wᵀ(g x) + ε keep the batch's noise ε."""
    xs, ys, ws = batch
    noise = ys - targets(xs, ws, 0.0)
    if kind == "inputs":
        xs = xs * g
    elif kind == "tasks":
        ws = ws * g
    else:
        raise ValueError(f"kind must be 'inputs' or 'tasks', got {kind!r}")
    return xs, targets(xs, ws, noise), ws


def to_tokens(xs, ys):
    """The 2K tokens of dimension D+1: x-token k = [0, x_k], y-token k = [y_k, 0 … 0], interleaved."""
    B, K, D = xs.shape
    x_tok = F.pad(xs, (1, 0))
    y_tok = F.pad(ys.unsqueeze(-1), (0, D))
    return torch.stack([x_tok, y_tok], dim=2).reshape(B, 2 * K, D + 1)
