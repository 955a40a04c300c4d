"""Batched SGLD over stacked parameters: every chain advances in one vectorised computation.

The model is never modified. Its trainable parameters (``requires_grad=True``) are flattened into
one vector of length D; ``num_chains`` copies are stacked into a (C, D) tensor and the loss gradient
of all chains is computed at once with ``torch.func.vmap(grad_and_value(...))`` over
``torch.func.functional_call``. Parameters with ``requires_grad=False`` and buffers are held fixed
(this is the "weight-restricted" LLC of devinterp's ``optimize_over_per_model_param``, by freezing).

The update is devinterp v1's ``SGLD.step`` (Lau et al. 2023), applied to the (C, D) tensor::

    w <- w - (eps/2) * (nbeta * grad L_m(w) + gamma * (w - w*) + weight_decay * w) + N(0, eps I)

where ``L_m`` is the *mean* loss on the step's minibatch. The loss recorded at a step is the minibatch
loss at the pre-update point (as devinterp records it). Nothing in the loop calls ``.item()`` or moves
data to the host: losses go into a preallocated (C, steps) tensor that is read once at the end.

Seeding (same seed -> same noise and batch sequence, at every checkpoint): chain ``c`` draws its
Gaussian noise from its own generator seeded by ``chain_seed(seed, c, "noise")``; batches come from a
shared generator (``share_batches=True``) or from chain ``c``'s own one (``chain_seed(seed, c,
"batch")``). So chain ``c`` gives the same numbers whether it runs alone or with others
(``chain_ids``), and the same seed re-used at every checkpoint gives every checkpoint the same noise
and the same batches (the trick of Hoogland et al. that makes LLC-over-time curves smooth).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn as nn
from torch.func import functional_call, grad_and_value, vmap
from torch.utils._pytree import tree_map

STREAMS = {"noise": 1, "batch": 2, "init": 3}
SHARED = -1  # pseudo chain index of the shared batch stream


def chain_seed(seed: int, chain: int, stream: str) -> int:
    """The torch seed of ``stream`` ('noise', 'batch', 'init') for chain ``chain`` (-1: shared).

    Derived with NumPy's SeedSequence from (seed, stream, chain), so (seed, chain+1) and (seed+1,
    chain) never collide (devinterp issue #40).
    """
    state = np.random.SeedSequence([int(seed), STREAMS[stream], int(chain) + 1]).generate_state(2, np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


def make_generator(seed: int, chain: int, stream: str, device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(chain_seed(seed, chain, stream))
    return g


class FunctionalModel:
    """Calls ``model`` with substituted parameters (``functional_call``); other attributes forward to it.

    This is what ``loss_fn(model, batch)`` receives during sampling, so a loss written for the real
    ``nn.Module`` works unchanged.
    """

    def __init__(self, model: nn.Module, tensors: dict):
        self._model, self._tensors = model, tensors

    def __call__(self, *args, **kwargs):
        return functional_call(self._model, self._tensors, args, kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)


@dataclass
class ParamLayout:
    """Where each trainable parameter lives in the flat vector."""
    names: list
    shapes: list
    offsets: list
    numel: int
    fixed: dict  # frozen parameters and buffers (on the sampling device)

    @classmethod
    def from_model(cls, model: nn.Module, device) -> "ParamLayout":
        names, shapes, offsets, fixed, off = [], [], [], {}, 0
        for name, p in model.named_parameters():
            if p.requires_grad:
                names.append(name)
                shapes.append(tuple(p.shape))
                offsets.append(off)
                off += p.numel()
            else:
                fixed[name] = p.detach().to(device)
        for name, b in model.named_buffers():
            fixed[name] = b.detach().to(device)
        return cls(names, shapes, offsets, off, fixed)

    def flatten(self, model: nn.Module, device, dtype=None) -> torch.Tensor:
        params = dict(model.named_parameters())
        flat = torch.cat([params[n].detach().reshape(-1) for n in self.names]).to(device)
        return flat if dtype is None else flat.to(dtype)

    def unflatten(self, flat: torch.Tensor) -> dict:
        return {n: flat[o:o + math.prod(s)].view(s) for n, s, o in zip(self.names, self.shapes, self.offsets)}


# ----------------------------------------------------------------------------------------------
# batches

def _is_tensor_data(data) -> bool:
    return isinstance(data, torch.Tensor) or (
        isinstance(data, (tuple, list)) and len(data) > 0 and all(isinstance(t, torch.Tensor) for t in data))


class TensorBatches:
    """Batches of a fixed in-memory dataset by one fancy-index per step (no DataLoader collation).

    Sampling is without replacement within an epoch (a fresh ``randperm`` per epoch, like a shuffling
    DataLoader), each chain (or the shared stream) from its own generator. ``batch_size >= n`` means
    full batch: every step sees the whole dataset.
    """

    def __init__(self, data, batch_size: int, device):
        self.single = isinstance(data, torch.Tensor)
        self.tensors = tuple(t.to(device) for t in ((data,) if self.single else data))
        self.n = self.tensors[0].shape[0]
        self.batch_size = min(batch_size, self.n)
        self.full = self.batch_size >= self.n
        self.device = device

    def _pack(self, tensors):
        return tensors[0] if self.single else tuple(tensors)

    def full_batch(self):
        return self._pack(self.tensors)

    def start(self, gens: list, shared: bool):
        """Begin a batch stream; ``gens`` are one generator (shared) or one per chain."""
        self.gens, self.shared = gens, shared
        self.buffer = torch.empty(len(gens), 0, dtype=torch.long, device=self.device)

    def next(self):
        """Next batch: shared -> tensors (B, ...); per chain -> tensors (C, B, ...)."""
        if self.full:
            return self.full_batch()
        B = self.batch_size
        if self.buffer.shape[1] < B:
            perms = torch.stack([torch.randperm(self.n, generator=g, device=self.device) for g in self.gens])
            self.buffer = torch.cat([self.buffer, perms], dim=1)
        idx, self.buffer = self.buffer[:, :B], self.buffer[:, B:]
        if self.shared:
            idx = idx[0]
        return self._pack([t[idx] for t in self.tensors])

    def init_batches(self, num: int | None, gen):
        """Batches for the loss at w*: None -> the whole dataset in order; k -> k seeded random batches."""
        if num is None:
            for i in range(0, self.n, self.batch_size):
                yield self._pack([t[i:i + self.batch_size] for t in self.tensors])
            return
        self.start([gen], True)
        for _ in range(num):
            yield self.next()


class CallableBatches:
    """Batches from ``sample_batch(generator) -> batch`` (online tasks)."""

    def __init__(self, fn: Callable):
        self.fn, self.full = fn, False

    def start(self, gens, shared):
        self.gens, self.shared = gens, shared

    def next(self):
        if self.shared:
            return self.fn(self.gens[0])
        batches = [self.fn(g) for g in self.gens]
        return tree_map(lambda *xs: torch.stack(xs), *batches) if len(batches) > 1 else \
            tree_map(lambda x: x.unsqueeze(0), batches[0])

    def init_batches(self, num: int | None, gen):
        for _ in range(16 if num is None else num):
            yield self.fn(gen)


def make_batches(data, batch_size: int | None, device):
    if callable(data) and not isinstance(data, torch.Tensor):
        return CallableBatches(data)
    if _is_tensor_data(data):
        sizes = {t.shape[0] for t in ((data,) if isinstance(data, torch.Tensor) else data)}
        if len(sizes) != 1:
            raise ValueError(f"data tensors must share their first dimension, got sizes {sorted(sizes)}")
        n = sizes.pop()
        if n < 1:
            raise ValueError("data must hold at least one example")
        return TensorBatches(data, n if batch_size is None else batch_size, device)
    raise ValueError("data must be a tensor, a tuple/list of tensors with the same first dimension, "
                     f"or a callable sample_batch(generator) -> batch; got {type(data).__name__}")


# ----------------------------------------------------------------------------------------------
# MALA

def mala_acceptance_prob(prev_w, prev_grad, prev_U, cur_w, cur_grad, cur_U, epsilon):
    """Metropolis-adjusted Langevin acceptance probability of the move prev -> cur.

    ``U`` is the potential (nbeta * L + gamma/2 ||w - w*||^2 [+ wd/2 ||w||^2]) and ``grad`` its gradient;
    the Langevin proposal is ``N(w - (eps/2) grad U(w), eps I)``, so
    ``log q(x'|x) = -||x' - x + (eps/2) grad U(x)||^2 / (2 eps)`` and
    ``a = min(1, exp(U(x) - U(x') + log q(x|x') - log q(x'|x)))``. Works on (D,) or batched (C, D).
    """
    prev_w, prev_grad, cur_w, cur_grad = (torch.as_tensor(t, dtype=torch.float64) if not isinstance(t, torch.Tensor)
                                          else t for t in (prev_w, prev_grad, cur_w, cur_grad))
    log_q_fwd = -((cur_w - prev_w + 0.5 * epsilon * prev_grad) ** 2).sum(-1) / (2 * epsilon)
    log_q_bwd = -((prev_w - cur_w + 0.5 * epsilon * cur_grad) ** 2).sum(-1) / (2 * epsilon)
    log_ratio = torch.as_tensor(prev_U) - torch.as_tensor(cur_U) + log_q_bwd - log_q_fwd
    return torch.exp(torch.clamp(log_ratio, max=0.0))


# ----------------------------------------------------------------------------------------------
# the sampler

def sgld_sample(model: nn.Module, loss_fn: Callable, batches, *, epsilon: float, nbeta: float, gamma: float,
                weight_decay: float, num_steps: int, chain_ids: Sequence[int], seed: int,
                share_batches: bool, device, mala: bool = False, progress=None, compile: bool = False) -> dict:
    """Run ``len(chain_ids)`` SGLD chains together for ``num_steps`` steps from the model's weights w*.

    ``batches`` comes from :func:`make_batches`. Returns CPU tensors: ``loss`` (C, num_steps), the
    minibatch loss at the pre-update point of every step, and ``mala`` (C, num_steps - 1) hypothetical
    MALA acceptance probabilities of each transition (or None), plus ``final`` (C, D) weights.
    Inputs are validated by :func:`plateau_lib.llc.estimate_llc`. ``compile`` wraps the batched
    gradient step in ``torch.compile`` (a one-off compilation of tens of seconds per call on a CPU).
    """
    layout = ParamLayout.from_model(model, device)
    C = len(chain_ids)
    w_star = layout.flatten(model, device)
    w = w_star.unsqueeze(0).repeat(C, 1)
    fixed = layout.fixed

    def chain_loss(flat, batch):
        return loss_fn(FunctionalModel(model, {**fixed, **layout.unflatten(flat)}), batch).reshape(())

    shared = share_batches or batches.full
    step_fn = vmap(grad_and_value(chain_loss), in_dims=(0, None if shared else 0), randomness="different")
    if compile:
        step_fn = torch.compile(step_fn)

    noise_gens = [make_generator(seed, c, "noise", device) for c in chain_ids]
    batch_gens = [make_generator(seed, SHARED, "batch", device)] if shared else \
        [make_generator(seed, c, "batch", device) for c in chain_ids]
    batches.start(batch_gens, shared)

    loss_trace = torch.empty(C, num_steps, dtype=w.dtype, device=device)
    mala_trace = torch.empty(C, max(num_steps - 1, 0), dtype=torch.float64, device=device) if mala else None
    noise = torch.empty_like(w)
    drift = torch.empty_like(w)
    half_eps, sqrt_eps = 0.5 * epsilon, math.sqrt(epsilon)
    prev = None
    for t in range(num_steps):
        grads, losses = step_fn(w, batches.next())
        loss_trace[:, t] = losses.detach()
        # drift = grad U(w) = nbeta * grad L_m + gamma (w - w*) + wd * w
        torch.mul(grads, nbeta, out=drift)
        if gamma:
            drift.add_(w - w_star, alpha=gamma)
        if weight_decay:
            drift.add_(w, alpha=weight_decay)
        if mala:
            U = nbeta * losses.detach().double()
            if gamma:
                U = U + 0.5 * gamma * ((w - w_star).double() ** 2).sum(1)
            if weight_decay:
                U = U + 0.5 * weight_decay * (w.double() ** 2).sum(1)
            if prev is not None:
                mala_trace[:, t - 1] = mala_acceptance_prob(prev[0], prev[1], prev[2], w.double(), drift.double(),
                                                            U, epsilon)
            prev = (w.double(), drift.double(), U)
        for row, g in zip(noise, noise_gens):
            row.normal_(generator=g)
        w.add_(drift, alpha=-half_eps)
        w.add_(noise, alpha=sqrt_eps)
        if progress is not None:
            progress.update(1)
    return {"loss": loss_trace.cpu(), "mala": None if mala_trace is None else mala_trace.cpu(),
            "final": w.detach().cpu(), "num_params": layout.numel}
