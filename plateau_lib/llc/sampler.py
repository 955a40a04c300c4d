"""SGLD chains from w*: one after another (``sequential``) or all together (``vmap``), with the same numbers.

The model is never modified. Its trainable parameters (``requires_grad=True``) are sampled, in the
order of ``named_parameters`` (D numbers in all); parameters with ``requires_grad=False`` and buffers
are held fixed (this is the "weight-restricted" LLC of devinterp's ``optimize_over_per_model_param``,
by freezing).

The update is devinterp v1's ``SGLD.step`` (Lau et al. 2023)::

    w <- w - (eps/2) * (nbeta * grad L_m(w) + gamma * (w - w*) + weight_decay * w) + N(0, eps I)

where ``L_m`` is the *mean* loss on the step's minibatch, applied with fused ``torch._foreach_*`` ops.
The loss recorded at a step is the minibatch loss at the pre-update point (as devinterp records it).

``sampler="rmsprop_sgld"`` preconditions that step with RMSProp's running second moment of the loss gradient
g = grad L_m(w) (pSGLD, Li et al. 2016; the sampler Hitchcock & Hoogland 2025, arXiv 2507.21449, found most
faithful to the local posterior), per weight, without pSGLD's small Γ correction term::

    V <- alpha V + (1 - alpha) g^2   (V = 0 at w*),    P = 1 / (sqrt(V) + delta)
    w <- w - (eps/2) P (nbeta g + gamma (w - w*) + weight_decay w) + sqrt(eps P) N(0, I)

with devinterp 2's constants alpha = 0.99 and delta = 0.1 (``RMSPROP_ALPHA``, ``RMSPROP_DELTA``).

Backends:

- ``sequential``: each chain runs alone on a working copy of the model, a plain forward and
  ``autograd.grad`` per step, at the cost of the model's own forward+backward. The fast choice on a CPU,
  where one chain already keeps the cores busy.
- ``vmap``: the K checkpoints x C chains are one (K, C, D) tensor and their gradients one
  ``vmap(grad_and_value(...))`` over ``torch.func.functional_call``: the fast choice on a GPU, where
  one small model leaves it idle. On a CPU it costs about 2x (batched matmuls, layer norm in pieces).

Seeding (same seed -> same noise and batch sequence, at every checkpoint, on either backend): chain ``c``
draws its Gaussian noise (one (D,) vector per step) from its own generator seeded by
``chain_seed(seed, c, "noise")``; batches come from a shared stream (``share_batches=True``, re-played for
each chain by the sequential backend) or from chain ``c``'s own one (``chain_seed(seed, c, "batch")``).
So chain ``c`` gives the same numbers whether it runs alone or with other chains or checkpoints, and the
same seed at every checkpoint gives every checkpoint the same noise and batches (the trick of Hoogland
et al. that makes LLC-over-time curves smooth). Nothing in the loop calls ``.item()`` or moves data to
the host: losses go into a preallocated tensor that is read once at the end.
"""
from __future__ import annotations

import copy
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

BACKENDS = ("auto", "sequential", "vmap")
SAMPLERS = ("sgld", "rmsprop_sgld")
RMSPROP_ALPHA, RMSPROP_DELTA = 0.99, 0.1  # devinterp 2's RMSpropPreconditioner defaults


def resolve_backend(backend: str, device: torch.device) -> str:
    """'auto' -> 'vmap' on CUDA (chains in parallel), 'sequential' elsewhere (a CPU is busy with one chain)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "vmap" if device.type == "cuda" else "sequential"
    return backend


@dataclass
class SGLDStep:
    """The update ``w <- w - (eps/2) P drift + sqrt(eps P) noise``, ``drift = nbeta grad + gamma (w - w*) + wd w``,
    with P = 1 (``rmsprop=False``) or RMSProp's diagonal preconditioner (module docstring), whose running second
    moment ``square_avg`` is the chain's state: :meth:`start` resets it at w*."""
    epsilon: float
    nbeta: float
    gamma: float
    weight_decay: float
    rmsprop: bool = False
    square_avg: list | None = None

    def start(self, w) -> None:
        """A new chain from w* (lists of tensors): RMSProp's second moment starts at zero."""
        self.square_avg = [torch.zeros_like(p) for p in w] if self.rmsprop else None

    def drift(self, w, grads, w_star):
        """grad U(w), from lists of tensors (fused ``torch._foreach_*``; autograd may return expanded grads,
        so they are not written to)."""
        drift = torch._foreach_mul(grads, self.nbeta)
        if self.gamma:
            torch._foreach_add_(drift, torch._foreach_sub(w, w_star), alpha=self.gamma)
        if self.weight_decay:
            torch._foreach_add_(drift, w, alpha=self.weight_decay)
        return drift

    def move(self, w, drift, noise, grads=None):
        """One step from ``w`` (in place); RMSProp first updates its second moment with the loss ``grads``."""
        if self.rmsprop:
            torch._foreach_mul_(self.square_avg, RMSPROP_ALPHA)
            torch._foreach_addcmul_(self.square_avg, grads, grads, value=1 - RMSPROP_ALPHA)
            precond = torch._foreach_add(torch._foreach_sqrt(self.square_avg), RMSPROP_DELTA)
            torch._foreach_reciprocal_(precond)
            drift = torch._foreach_mul(drift, precond)
            noise = torch._foreach_mul(noise, torch._foreach_sqrt(precond))
        torch._foreach_add_(w, drift, alpha=-0.5 * self.epsilon)
        torch._foreach_add_(w, noise, alpha=math.sqrt(self.epsilon))

    def potential(self, w64, loss, w_star64):
        """U(w) = nbeta L + gamma/2 ||w - w*||^2 + wd/2 ||w||^2 in float64 (rows of ``w64`` are chains)."""
        U = self.nbeta * loss.double()
        if self.gamma:
            U = U + 0.5 * self.gamma * ((w64 - w_star64) ** 2).sum(-1)
        if self.weight_decay:
            U = U + 0.5 * self.weight_decay * (w64 ** 2).sum(-1)
        return U


def sgld_sample(models: Sequence[nn.Module], loss_fn: Callable, batches, *, epsilon: float, nbeta: float,
                gamma: float, weight_decay: float, num_steps: int, chain_ids: Sequence[int], seed: int,
                share_batches: bool, device, backend: str = "sequential", mala: bool = False, progress=None,
                compile: bool = False, cuda_graphs: bool = False, sampler: str = "sgld") -> dict:
    """Run ``len(chain_ids)`` SGLD chains for ``num_steps`` steps from the weights w* of each of ``models``
    (K checkpoints of one architecture; every checkpoint gets the same seeds).

    ``batches`` comes from :func:`make_batches`. Returns CPU tensors: ``loss`` (K, C, num_steps), the
    minibatch loss at the pre-update point of every step, ``mala`` (K, C, num_steps - 1) hypothetical
    MALA acceptance probabilities of each transition (or None), and ``final`` (K, C, D) weights.
    Inputs are validated by :func:`plateau_lib.llc.estimate_llc`. ``backend``: 'sequential' or 'vmap'
    (module docstring). ``compile``: ``torch.compile`` the model (sequential) or the batched gradient
    step (vmap), a one-off compilation of tens of seconds on a CPU; ``cuda_graphs`` compiles the batched
    step with ``mode="reduce-overhead"`` (CUDA only, not validated against the golden tests). ``sampler``: 'sgld' or
    'rmsprop_sgld' (module docstring).
    """
    step = SGLDStep(epsilon, nbeta, gamma, weight_decay, rmsprop=sampler == "rmsprop_sgld")
    compile_mode = "reduce-overhead" if cuda_graphs else "default" if compile else None
    run = _sample_vmap if backend == "vmap" else _sample_sequential
    return run(list(models), loss_fn, batches, step, num_steps, list(chain_ids), seed,
               share_batches or batches.full, device, mala, progress, compile_mode)


def _sample_sequential(models, loss_fn, batches, step, num_steps, chain_ids, seed, shared, device, mala, progress,
                       compile_mode):
    """One chain after another, each a plain forward and backward of a working copy of the model."""
    K, C = len(models), len(chain_ids)
    layout = ParamLayout.from_model(models[0], device)
    D, dtype = layout.numel, layout.flatten(models[0], device).dtype
    loss_trace = torch.empty(K, C, num_steps, dtype=dtype, device=device)
    mala_trace = torch.empty(K, C, max(num_steps - 1, 0), dtype=torch.float64, device=device) if mala else None
    final = torch.empty(K, C, D, dtype=dtype, device=device)
    for k, model in enumerate(models):
        work = copy.deepcopy(model)
        w = [p for p in work.parameters() if p.requires_grad]  # the chain's state, updated in place
        w_star = [p.detach().clone() for p in w]
        w_star64 = torch.cat([p.reshape(-1) for p in w_star]).double()
        noise_flat = torch.empty(D, dtype=w[0].dtype, device=device)
        noise = [n.view_as(p) for n, p in zip(noise_flat.split([p.numel() for p in w]), w)]
        forward = torch.compile(work, mode=compile_mode) if compile_mode else work
        for i, c in enumerate(chain_ids):
            with torch.no_grad():
                torch._foreach_copy_(w, w_star)
            step.start(w)
            noise_gen = make_generator(seed, c, "noise", device)
            batches.start([make_generator(seed, SHARED if shared else c, "batch", device)], True)
            prev = None
            for t in range(num_steps):
                loss = loss_fn(forward, batches.next()).reshape(())
                grads = torch.autograd.grad(loss, w, materialize_grads=True)  # unused weights: zero
                loss_trace[k, i, t] = loss.detach()
                with torch.no_grad():
                    drift = step.drift(w, grads, w_star)
                    if mala:  # torch.cat copies: the saved state never aliases w or drift
                        w64 = torch.cat([p.reshape(-1) for p in w]).double()
                        d64 = torch.cat([d.reshape(-1) for d in drift]).double()
                        U = step.potential(w64, loss.detach(), w_star64)
                        if prev is not None:
                            mala_trace[k, i, t - 1] = mala_acceptance_prob(*prev, w64, d64, U, step.epsilon)
                        prev = (w64, d64, U)
                    noise_flat.normal_(generator=noise_gen)
                    step.move(w, drift, noise, grads)
                if progress is not None:
                    progress.update(1)
            final[k, i] = torch.cat([p.detach().reshape(-1) for p in w])
    return {"loss": loss_trace.cpu(), "mala": None if mala_trace is None else mala_trace.cpu(),
            "final": final.cpu(), "num_params": D}


def _sample_vmap(models, loss_fn, batches, step, num_steps, chain_ids, seed, shared, device, mala, progress,
                 compile_mode):
    """All K x C chains as one (K, C, D) tensor, their gradients by one ``vmap(grad_and_value(...))``."""
    K, C = len(models), len(chain_ids)
    layout = ParamLayout.from_model(models[0], device)
    w_star = torch.stack([layout.flatten(m, device) for m in models]).unsqueeze(1)  # (K, 1, D)
    w = w_star.repeat(1, C, 1)
    fixed = layout.fixed

    def chain_loss(flat, batch):
        return loss_fn(FunctionalModel(models[0], {**fixed, **layout.unflatten(flat)}), batch).reshape(())

    step_fn = vmap(grad_and_value(chain_loss), in_dims=(0, None if shared else 0), randomness="different")
    if compile_mode:
        step_fn = torch.compile(step_fn, mode=compile_mode)

    # chain c draws the same noise and batches at every checkpoint: C streams, broadcast over K
    noise_gens = [make_generator(seed, c, "noise", device) for c in chain_ids]
    batches.start([make_generator(seed, SHARED, "batch", device)] if shared else
                  [make_generator(seed, c, "batch", device) for c in chain_ids], shared)
    loss_trace = torch.empty(K, C, num_steps, dtype=w.dtype, device=device)
    mala_trace = torch.empty(K, C, max(num_steps - 1, 0), dtype=torch.float64, device=device) if mala else None
    noise = torch.empty(C, w.shape[-1], dtype=w.dtype, device=device)
    w_star64 = w_star.double()
    step.start([w])
    prev = None
    for t in range(num_steps):
        batch = batches.next()
        if not shared and K > 1:  # chain c's batch, at every checkpoint
            batch = tree_map(lambda x: x.repeat(K, *[1] * (x.dim() - 1)), batch)
        grads, losses = step_fn(w.view(K * C, -1), batch)
        grads, losses = grads.view_as(w), losses.view(K, C)
        loss_trace[..., t] = losses.detach()
        drift, = step.drift([w], [grads], [w_star])
        if mala:  # copies: the saved state never aliases w or drift, whatever their dtype
            w64, d64 = w.to(torch.float64, copy=True), drift.to(torch.float64, copy=True)
            U = step.potential(w64, losses.detach(), w_star64)
            if prev is not None:
                mala_trace[..., t - 1] = mala_acceptance_prob(*prev, w64, d64, U, step.epsilon)
            prev = (w64, d64, U)
        for row, g in zip(noise, noise_gens):
            row.normal_(generator=g)
        step.move([w], [drift], [noise.expand_as(w)], [grads])
        if progress is not None:
            progress.update(K * C)
    return {"loss": loss_trace.cpu(), "mala": None if mala_trace is None else mala_trace.cpu(),
            "final": w.detach().cpu(), "num_params": layout.numel}
