"""The paper's small GPT: linear (or softmax) causal attention, pre-LN blocks, learned positions.

One readable file in the style of nanoGPT's ``model.py``. The default is the *linear* attention of
Gopalani et al.: raw causal scores ``q k^T / sqrt(d_head)`` with masked entries set to 0, no softmax
and no normalisation. ``GPTConfig(softmax=True)`` gives the usual softmax attention instead.

An optional multiplicative ``attn_bias`` (the paper's attention-biasing intervention) multiplies the
masked score matrix elementwise, in training and in generation alike.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

HIDDEN_SITES = ("embed", "attn_out", "post_attn", "post_mlp", "final_ln")


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int
    block_size: int
    n_layer: int = 1
    n_head: int = 1
    d_model: int = 256
    softmax: bool = False

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "d_model"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"GPTConfig.d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.softmax = cfg.n_head, cfg.softmax
        self.Q = nn.Linear(cfg.d_model, cfg.d_model)
        self.K = nn.Linear(cfg.d_model, cfg.d_model)
        self.V = nn.Linear(cfg.d_model, cfg.d_model)
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.register_buffer("causal", torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool)),
                             persistent=False)

    def _heads(self, x):
        B, T, C = x.shape
        return x.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, dh)

    def forward(self, x, attn_bias=None, cache=None):
        """x holds positions [t0, t0+T) where t0 = cached length. Returns (y, scores)."""
        B, T, C = x.shape
        q, k, v = self._heads(self.Q(x)), self._heads(self.K(x)), self._heads(self.V(x))
        if cache is not None:
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        t0, t1 = k.shape[2] - T, k.shape[2]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        causal = self.causal[t0:t1, :t1]
        if self.softmax:
            att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        else:
            att = att.masked_fill(~causal, 0.0)
        if attn_bias is not None:
            att = att * attn_bias[..., t0:t1, :t1]
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y), att


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.c_proj = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(cfg.d_model), CausalSelfAttention(cfg)
        self.ln_2, self.mlp = nn.LayerNorm(cfg.d_model), MLP(cfg)

    def forward(self, x, attn_bias=None, cache=None, record=None):
        a, att = self.attn(self.ln_1(x), attn_bias, cache)
        x = x + a
        h = x
        x = x + self.mlp(self.ln_2(x))
        if record is not None:
            record["attn"].append(att)
            record["attn_out"].append(a)
            record["post_attn"].append(h)
            record["post_mlp"].append(x)
        return x


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # residual projections, GPT-2 style
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, attn_bias=None, return_internals=False, caches=None):
        """Logits for every position of ``idx`` (B, T).

        attn_bias: optional multiplicative mask broadcastable to (B, n_head, block_size, block_size).
        return_internals: also return a dict with per-layer lists ``attn`` (B, H, T, T), ``attn_out``,
            ``post_attn``, ``post_mlp`` and the tensors ``embed`` and ``final_ln`` (B, T, d_model).
        caches: per-layer dicts for incremental decoding (see ``generate``).
        """
        B, T = idx.shape
        t0 = caches[0]["k"].shape[2] if caches and "k" in caches[0] else 0
        if t0 + T > self.cfg.block_size:
            raise ValueError(f"sequence length {t0 + T} exceeds block_size {self.cfg.block_size}")
        x = self.wte(idx) + self.wpe(torch.arange(t0, t0 + T, device=idx.device))
        record = {k: [] for k in ("attn", "attn_out", "post_attn", "post_mlp")} if return_internals else None
        embed = x
        for i, block in enumerate(self.blocks):
            x = block(x, attn_bias, caches[i] if caches else None, record)
        h = self.ln_f(x)
        logits = self.lm_head(h)
        if not return_internals:
            return logits
        record.update(embed=embed, final_ln=h)
        return logits, record

    @torch.no_grad()
    def generate(self, prompt, n_new, attn_bias=None, caches=None, logits=None):
        """Greedy continuation of ``prompt`` (B, T0) by ``n_new`` tokens, with a key/value cache.

        caches, logits: the per-layer caches and logits of an earlier forward (``self(seqs, caches=...)``)
        whose first T0 tokens are ``prompt``, e.g. evaluation's teacher-forced pass. Causal attention
        makes their first T0 positions the prompt's own, so the prompt is not run again.
        """
        T0 = prompt.shape[1]
        if caches is None:
            caches = [{} for _ in self.blocks]
            logits = self(prompt, attn_bias=attn_bias, caches=caches)
        else:
            caches = [{"k": c["k"][:, :, :T0], "v": c["v"][:, :, :T0]} for c in caches]
            logits = logits[:, :T0]
        out = [prompt]
        for i in range(n_new):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            out.append(nxt)
            if i + 1 < n_new:
                logits = self(nxt, attn_bias=attn_bias, caches=caches)
        return torch.cat(out, dim=1)
