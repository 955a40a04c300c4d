"""S training runs of one architecture as one computation (``train_many``'s stacked backend): stacked
parameters, per-run gradients by ``torch.func.vmap``, and Adam or SGD written elementwise with per-run learning
rates, masks for frozen groups and for runs that have finished; optionally captured in a CUDA graph."""
from __future__ import annotations

import math
import warnings

import torch
from torch.func import functional_call, grad_and_value, vmap
from torch.utils._pytree import tree_map

from plateau_lib.engine.precision import matmul_operands
from plateau_lib.engine.setup import SCHEDULES_CODE, build_model, lr_factor, lr_factor_tensor, make_optimizers


class Bound:
    """A module called with other parameters (``functional_call``): what a task's ``loss`` sees under vmap."""

    def __init__(self, module, params):
        self.module, self.params = module, params

    def __call__(self, *args, **kwargs):
        return functional_call(self.module, self.params, args, kwargs)


class StackedEngine:
    """S runs of one architecture as stacked parameters (S, ...): per-run gradients by ``vmap`` over
    ``grad_and_value`` of the task's loss, then Adam or SGD written elementwise with per-run learning rates,
    weight decay and momentum. Frozen groups are masked; runs not yet started or already finished are
    left untouched (parameters and optimizer state). Optimizer states convert to and from torch's own
    ``state_dict`` format, so a run resumes under either engine."""

    BETAS, EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults, which ``make_optimizers`` uses

    def __init__(self, runs, init_states, device, capturable: bool = False, compiled: bool = False):
        self.runs, self.device, S = runs, device, len(runs)
        self.models = [build_model(r.cfg, device, s) for r, s in zip(runs, init_states)]
        named = [dict(m.named_parameters()) for m in self.models]
        self.params = {n: torch.stack([p[n].detach() for p in named]) for n in named[0]}
        self.skeleton = self.models[0]
        shape = lambda n: (S,) + (1,) * (self.params[n].ndim - 1)  # noqa: E731
        self.trainable = {n: torch.tensor([float(p[n].requires_grad) for p in named], device=device).view(shape(n))
                          for n in self.params}
        self.any_frozen = any(bool((t == 0).any()) for t in self.trainable.values())
        self.shape = {n: shape(n) for n in self.params}
        per_run = lambda name: torch.tensor([float(getattr(r.cfg, name)) for r in runs], device=device)  # noqa: E731
        self.weight_decay, self.momentum, self.clip = per_run("weight_decay"), per_run("momentum"), per_run("grad_clip")
        self.any_decay = any(r.cfg.weight_decay > 0 for r in runs)
        self.any_momentum = any(r.cfg.momentum > 0 for r in runs)
        self.any_clip = any(r.cfg.grad_clip > 0 for r in runs)
        self.adam = runs[0].cfg.optimizer == "adam"
        self.updates = [0] * S  # Adam's per-run step count
        if self.adam:
            self.exp_avg = {n: torch.zeros_like(p) for n, p in self.params.items()}
            self.exp_avg_sq = {n: torch.zeros_like(p) for n, p in self.params.items()}
        else:
            self.momentum_buffer = {n: torch.zeros_like(p) for n, p in self.params.items()}
        self.loss = runs[0].task.loss
        self.ones = None
        self.operands = runs[0].cfg.matmul_operands
        self.capturable, self.compiled = capturable or compiled, compiled
        self.step_fn = None  # the capturable step as run: ``_device_step``, or its torch.compile'd form
        if self.capturable:
            as_f64 = lambda name: torch.tensor([float(getattr(r.cfg, name)) for r in runs], device=device,  # noqa: E731
                                               dtype=torch.float64)
            self.base_lr, self.total_steps, self.warmup = as_f64("lr"), as_f64("steps"), as_f64("warmup_steps")
            self.lr_floor = as_f64("lr_floor")
            self.decay_end = torch.tensor([float(r.cfg.decay_steps or r.cfg.steps) for r in runs], device=device,
                                          dtype=torch.float64)
            self.schedule = torch.tensor([SCHEDULES_CODE[r.cfg.schedule] for r in runs], device=device)
            self.step_now = torch.zeros((), device=device, dtype=torch.float64)  # the loop's step (0-based)
            self.update_now = torch.zeros((), device=device, dtype=torch.float64)  # Adam's count, after this step
            self.static_batch, self.graph = None, None

    def _run_loss(self, params, batch, bias):
        return self.loss(Bound(self.skeleton, params), batch, attn_bias=bias)

    def _biases(self, step):
        biases = [r.bias_at(step) for r in self.runs]
        if all(b is None for b in biases):
            return None
        if self.ones is None:
            self.ones = torch.ones_like(next(b for b in biases if b is not None))
        return torch.stack([self.ones if b is None else b for b in biases])

    def _gradients(self, batch, bias):
        """Per-run gradients of the loss, frozen groups masked and clipped per run."""
        with matmul_operands(self.operands):
            grads, _ = vmap(grad_and_value(self._run_loss), in_dims=(0, 0, None if bias is None else 0))(
                self.params, batch, bias)
        with torch.no_grad():
            if self.any_frozen:
                grads = {n: g * self.trainable[n] for n, g in grads.items()}
            if self.any_clip:  # torch.nn.utils.clip_grad_norm_, per run
                norm = torch.stack([g.reshape(len(self.runs), -1).square().sum(1) for g in grads.values()]).sum(0).sqrt()
                coef = torch.where(self.clip > 0, (self.clip / (norm + 1e-6)).clamp(max=1.0), 1.0)
                grads = {n: g * coef.view(self.shape[n]) for n, g in grads.items()}
        return grads

    def step(self, step, batches, active):
        batch = tree_map(lambda *xs: torch.stack(xs), *batches) if len(batches) > 1 else tree_map(
            lambda x: x.unsqueeze(0), batches[0])
        bias = self._biases(step)
        if self.capturable and all(active) and bias is None and len(set(self.updates)) == 1:
            self._captured_step(step, batch)
            return
        grads = self._gradients(batch, bias)
        with torch.no_grad():
            self._update(step, grads, active)

    # --- the step in a form a CUDA graph captures: no host values, the per-step scalars computed on the device ---
    def _device_step(self):
        grads = self._gradients(self.static_batch, None)
        with torch.no_grad():
            t = self.update_now
            factor = lr_factor_tensor(self.step_now, self.schedule, self.total_steps, self.warmup, self.lr_floor,
                                      self.decay_end)
            lr = self.base_lr * factor
            if self.adam:
                b1, b2 = self.BETAS
                self._apply(grads, None, (lr / (1 - b1 ** t)).float(), torch.sqrt(1 - b2 ** t).float().expand_as(lr), None)
            else:
                self._apply(grads, lr.float(), None, None, None)

    def _captured_step(self, step, batch):
        """One step of runs that all advance together, from device-side scalars; on CUDA replayed from a graph
        captured at the first such step (elsewhere run as is: the same arithmetic, testable on a CPU)."""
        if self.static_batch is None:
            self.static_batch = tree_map(torch.empty_like, batch)
        tree_map(lambda dst, src: dst.copy_(src), self.static_batch, batch)
        self.step_now.fill_(step)
        self.update_now.fill_(self.updates[0] + 1)
        if self.step_fn is None:
            self.step_fn = self._compiled_step() if self.compiled else self._device_step
        if self.device.type == "cuda" and self.graph is None:
            try:
                self.graph = self._capture()
            except Exception as error:  # noqa: BLE001 (a step that cannot be captured still computes the same)
                warnings.warn(f"CUDA graph capture of the stacked step failed ({type(error).__name__}: {error}); "
                              "running it without a graph", stacklevel=2)
                self.graph = False
        if self.graph:
            self.graph.replay()
        else:
            self.step_fn()
        self.updates = [u + 1 for u in self.updates]

    def _compiled_step(self):
        """``torch.compile`` of the capturable step (fused kernels: fewer launches per step), compiled and run once
        on a copy of the state, which is then restored; the plain step, with a warning, if compilation fails."""
        state = [t.clone() for t in self._tensors()]
        try:
            fn = torch.compile(self._device_step)
            fn()
            return fn
        except Exception as error:  # noqa: BLE001 (any compiler failure: the eager step computes the same)
            warnings.warn(f"torch.compile of the stacked step failed ({type(error).__name__}: {error}); "
                          "running it uncompiled", stacklevel=2)
            return self._device_step
        finally:
            with torch.no_grad():
                for t, saved in zip(self._tensors(), state):
                    t.copy_(saved)

    def _capture(self):
        """Warm up on a side stream (the state restored afterwards), then capture the step (``step_fn``)."""
        state = [t.clone() for t in self._tensors()]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.step_fn()
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():
            for t, saved in zip(self._tensors(), state):
                t.copy_(saved)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.step_fn()
        return graph

    def _tensors(self):
        """Every tensor a step changes (parameters and optimizer state)."""
        buffers = (self.exp_avg, self.exp_avg_sq) if self.adam else (self.momentum_buffer,)
        return [t for d in (self.params, *buffers) for t in d.values()]

    def _update(self, step, grads, active):
        lrs = [r.cfg.lr * lr_factor(r.cfg, step) if a else 0.0 for r, a in zip(self.runs, active)]
        for i, a in enumerate(active):
            self.updates[i] += int(a)
        keep = None if all(active) else torch.tensor(active, device=self.device)
        if self.adam:
            b1, b2 = self.BETAS
            t = [max(u, 1) for u in self.updates]
            step_size = torch.tensor([lr / (1 - b1 ** k) for lr, k in zip(lrs, t)], device=self.device)
            bc2_sqrt = torch.tensor([math.sqrt(1 - b2 ** k) for k in t], device=self.device)
            self._apply(grads, None, step_size, bc2_sqrt, keep)
        else:
            self._apply(grads, torch.tensor(lrs, device=self.device), None, None, keep)

    def _apply(self, grads, lr, step_size, bc2_sqrt, keep):
        """The elementwise update of every stacked parameter: Adam (``step_size`` = lr / (1 - β₁ᵗ), ``bc2_sqrt``
        = √(1 - β₂ᵗ), per run) or SGD (``lr`` per run); ``keep`` masks the runs that do not move (None: all move)."""
        for n, p in self.params.items():
            g, shape = grads[n], self.shape[n]
            if self.any_decay:
                g = g + self.weight_decay.view(shape) * p
                if self.any_frozen:
                    g = g * self.trainable[n]
            if self.adam:
                b1, b2 = self.BETAS
                m, v = self.exp_avg[n], self.exp_avg_sq[n]
                m_new, v_new = m.lerp(g, 1 - b1), (v * b2).addcmul_(g, g, value=1 - b2)
                new_p = p - step_size.view(shape) * m_new / (v_new.sqrt() / bc2_sqrt.view(shape) + self.EPS)
                updated = {m: m_new, v: v_new, p: new_p}
            else:
                direction = g
                if self.any_momentum:
                    buf = self.momentum_buffer[n]
                    buf_new = self.momentum.view(shape) * buf + g
                    direction = torch.where(self.momentum.view(shape) > 0, buf_new, g)
                    updated = {buf: buf_new}
                else:
                    updated = {}
                updated[p] = p - lr.view(shape) * direction
            for old, new in updated.items():
                old.copy_(new if keep is None else torch.where(keep.view(shape), new, old))

    def module(self, i):
        """Run i's parameters in a module (a copy, for evaluation, callbacks and checkpoints)."""
        model = self.models[i]
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(self.params[n][i])
        return model

    def _trainable_names(self, i):
        return [n for n, p in self.models[i].named_parameters() if p.requires_grad]

    def state(self, i):
        """Run i's model and optimizer state in torch's own format (``train``'s resume state)."""
        model = self.module(i)
        opt = make_optimizers(self.runs[i].cfg, model)[0]
        sd = opt.state_dict()
        if self.updates[i]:
            for j, n in enumerate(self._trainable_names(i)):
                sd["state"][j] = ({"step": torch.tensor(float(self.updates[i])), "exp_avg": self.exp_avg[n][i].clone(),
                                   "exp_avg_sq": self.exp_avg_sq[n][i].clone()} if self.adam
                                  else {"momentum_buffer": self.momentum_buffer[n][i].clone()
                                        if self.runs[i].cfg.momentum > 0 else None})
        return {k: v.clone() for k, v in model.state_dict().items()}, [sd]

    def load(self, i, model_state, opt_states):
        with torch.no_grad():
            for n in self.params:
                self.params[n][i].copy_(model_state[n])
            (sd,) = opt_states
            for j, n in enumerate(self._trainable_names(i)):
                s = sd["state"].get(j, {})
                if self.adam and s:
                    self.exp_avg[n][i].copy_(s["exp_avg"])
                    self.exp_avg_sq[n][i].copy_(s["exp_avg_sq"])
                    self.updates[i] = int(s["step"])
                elif not self.adam and s.get("momentum_buffer") is not None:
                    self.momentum_buffer[n][i].copy_(s["momentum_buffer"])
