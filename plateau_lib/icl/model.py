"""Hoogland et al.'s in-context regression transformer (L2H4 at the defaults): 51,717 parameters at D=4, K=8.

One readable file in the style of ``plateau_lib/plateau/model.py`` (same module names, so ``param_groups`` sorts
its parameters too). Vector tokens of dimension D+1 (``data.to_tokens``) enter through a bias-free linear
embedding plus a learned positional table; pre-LN blocks of causal softmax attention (bias-free Q, K, V
and output projections) and a ReLU MLP with biases; then LayerNorm and a linear unembedding back to D+1
channels, of which channel 0 at each x-token is the prediction of y_k. Initialisation is PyTorch's default
(Kaiming-uniform linears, LayerNorm 1/0), as published; the positional table is initialised like the
published ``Linear(2K, d, bias=False)`` whose weight it is.

**Doubled residual** (``doubled_residual=True``, the default): the published model computes
``x = x + block(x)`` where the block already returns ``x + attn + mlp``, so each layer maps x to
2x + Δ. LayerNorm makes the forward function the same up to the scale of the stream, but Adam's dynamics
and the LLC are not invariant, so it is kept for fidelity; ``False`` gives the usual ``x = block(x)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from plateau_lib.icl.data import to_tokens


@dataclass(frozen=True)
class ICLConfig:
    D: int = 4
    K: int = 8
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    d_mlp: int = 64
    doubled_residual: bool = True

    def __post_init__(self):
        for name in ("D", "K", "n_layer", "n_head", "d_model", "d_mlp"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ICLConfig.{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"ICLConfig.d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ICLConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.Q = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.K = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.V = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        T = 2 * cfg.K
        self.register_buffer("causal", torch.tril(torch.ones(T, T, dtype=torch.bool)), persistent=False)

    def _heads(self, x):
        B, T, C = x.shape
        return x.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, dh)

    def forward(self, x):
        """Returns (output, attention probabilities (B, H, T, T))."""
        B, T, C = x.shape
        q, k, v = self._heads(self.Q(x)), self._heads(self.K(x)), self._heads(self.V(x))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        att = F.softmax(att.masked_fill(~self.causal[:T, :T], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y), att


class MLP(nn.Module):
    def __init__(self, cfg: ICLConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, cfg.d_mlp)
        self.c_proj = nn.Linear(cfg.d_mlp, cfg.d_model)

    def forward(self, x):
        return self.c_proj(F.relu(self.c_fc(x)))


class Block(nn.Module):
    """Pre-LN block returning x + attn(LN(x)) + mlp(LN(·)): the residual is already added here."""

    def __init__(self, cfg: ICLConfig):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(cfg.d_model), CausalSelfAttention(cfg)
        self.ln_2, self.mlp = nn.LayerNorm(cfg.d_model), MLP(cfg)

    def forward(self, x, record=None):
        a, att = self.attn(self.ln_1(x))
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        if record is not None:
            record["attn"].append(att)
        return x


class ICLTransformer(nn.Module):
    def __init__(self, cfg: ICLConfig):
        super().__init__()
        self.cfg = cfg
        T = 2 * cfg.K
        self.wte = nn.Linear(cfg.D + 1, cfg.d_model, bias=False)
        self.wpe = nn.Parameter(torch.empty(T, cfg.d_model).uniform_(-1 / math.sqrt(T), 1 / math.sqrt(T)))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.D + 1)

    def forward(self, xs, ys, return_internals=False):
        """Predictions (B, K) of y_k from the pairs before k and x_k: channel 0 of the output at each
        x-token. return_internals: also a dict with ``attn`` (per layer, (B, H, 2K, 2K)), ``embed`` and
        ``resid`` (per layer, the stream after it) (B, 2K, d_model)."""
        tokens = to_tokens(xs, ys)
        x = self.wte(tokens) + self.wpe[: tokens.shape[1]]
        record = {"attn": [], "resid": [], "embed": x} if return_internals else None
        for block in self.blocks:
            x = x + block(x, record) if self.cfg.doubled_residual else block(x, record)
            if record is not None:
                record["resid"].append(x)
        pred = self.lm_head(self.ln_f(x))[:, 0::2, 0]
        return (pred, record) if return_internals else pred
