"""The Bayes predictors of in-context regression and distances to them, batched and exact.

For every prefix, ŷ_k = ŵ_kᵀ x_k where ŵ_k is the posterior mean of the task given the k-1 earlier pairs:

- **dMMSE** (uniform prior on the M tasks T_M, Bayes-optimal for finite M):
  ŵ_k = Σ_m softmax_m(−Σ_{j<k} (y_j − t_mᵀx_j)² / (2σ²)) t_m; at the first token ŵ_1 = mean(T_M).
- **Ridge** (prior N(0, I_D), Bayes-optimal for M = ∞): ŵ_k = (X_{<k}ᵀX_{<k} + σ²I)⁻¹ X_{<k}ᵀ y_{<k}
  (λ = σ²/τ² with task variance τ² = 1); at the first token ŵ_1 = 0.

These first-token conventions are the papers' (Raventós et al.; Hoogland et al.). dMMSE streams over the
tasks in chunks with a running log-sum-exp, so its memory is O(B·K·chunk) for any M.
"""
from __future__ import annotations

import torch

CHUNK_ELEMENTS = 2 ** 24  # B·K·chunk floats per dMMSE chunk (64 MiB in float32)


def _before(t):
    """Σ_{j<k} t_j along dim 1 (the sum over the pairs a prediction has seen; 0 at the first token)."""
    return torch.cat([torch.zeros_like(t[:, :1]), t[:, :-1].cumsum(1)], dim=1)


def dmmse_predict(xs, ys, tasks, noise_var: float, chunk_elements: int = CHUNK_ELEMENTS):
    """dMMSE predictions (B, K) under the uniform prior on ``tasks`` (M, D)."""
    B, K, D = xs.shape
    tasks = tasks.to(device=xs.device, dtype=xs.dtype)
    chunk = max(1, chunk_elements // (B * K))
    run_max = torch.full((B, K, 1), -torch.inf, dtype=xs.dtype, device=xs.device)
    run_sum = torch.zeros(B, K, 1, dtype=xs.dtype, device=xs.device)
    run_w = torch.zeros(B, K, D, dtype=xs.dtype, device=xs.device)
    for t in tasks.split(chunk):
        sq = (ys.unsqueeze(-1) - xs @ t.T).square()          # (B, K, m): error of each task on each pair
        logp = -_before(sq) / (2 * noise_var)
        new_max = torch.maximum(run_max, logp.amax(-1, keepdim=True))
        scale, p = torch.exp(run_max - new_max), torch.exp(logp - new_max)
        run_sum = run_sum * scale + p.sum(-1, keepdim=True)
        run_w = run_w * scale + p @ t
        run_max = new_max
    return ((run_w / run_sum) * xs).sum(-1)


def ridge_predict(xs, ys, noise_var: float):
    """Ridge predictions (B, K) with λ = σ², solved exactly per prefix (Cholesky, no host sync)."""
    B, K, D = xs.shape
    xtx = _before(xs.unsqueeze(-1) * xs.unsqueeze(-2))       # Σ_{j<k} x_j x_jᵀ (B, K, D, D)
    xty = _before(xs * ys.unsqueeze(-1)).unsqueeze(-1)       # Σ_{j<k} y_j x_j (B, K, D, 1)
    eye = torch.eye(D, dtype=xs.dtype, device=xs.device)
    chol = torch.linalg.cholesky_ex(xtx + noise_var * eye).L
    w = torch.cholesky_solve(xty, chol).squeeze(-1)
    return (w * xs).sum(-1)


def bayes_predict(xs, ys, noise_var: float, tasks=None):
    """The Bayes-optimal predictor of the training distribution: dMMSE on ``tasks``, or ridge if None."""
    return ridge_predict(xs, ys, noise_var) if tasks is None else dmmse_predict(xs, ys, tasks, noise_var)


def delta(pred, other, D: int | None = None, by_token: bool = False):
    """Δ between two predictors on the same batch (B, K): the mean over sequences and over the K
    predictions (*per token*, Hoogland et al.'s ``delta_*``) of (pred − other)². ``D`` divides by the task
    dimension, as in Raventós et al.'s Eq. 4 (use it only when comparing with them). ``by_token``: the
    (K,) vector before the mean over tokens."""
    sq = (pred - other).square().mean(0)
    sq = sq / D if D is not None else sq
    return sq if by_token else sq.mean()
