"""The one online training loop, for every task, one run or many at once.

``train(cfg)`` samples a fresh batch each step from a seeded generator, takes an optimizer step, and
every ``eval_every`` steps evaluates the task's metrics (``task.evaluate``) on a fixed held-out batch.
Loss, evaluation and tables belong to the task (``engine.tasks`` names them), so this loop knows no task; the
config and the result are ``engine.runs``. It returns a
:class:`TrainResult` with tidy pandas tables. Given a ``run_dir`` it saves a resume state atomically
every ``save_every`` evaluations, resumes from it after an interruption, and writes checkpoints at
``checkpoint_steps``.

``train_many(configs)`` runs the same loop for S runs of one architecture, stacked into one computation
(``torch.func.vmap`` over the runs' stacked parameters, and an elementwise Adam/SGD with per-run
learning rates, masks for frozen groups and for runs that have finished). Each run keeps its own data
generator, seed, attention bias, switch step, schedule and step budget, and gets the table ``train``
would give it, to float tolerance. Small models are launch-bound on a GPU, so S stacked runs cost little
more than one; on a CPU ``backend="auto"`` runs them one after another (see ``benchmarks/train_bench.py``).
"""
from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import torch
from tqdm.auto import tqdm

from torch.func import functional_call, grad_and_value, vmap
from torch.utils._pytree import tree_map

from plateau_lib.engine.precision import matmul_operands
from plateau_lib.engine.runs import TrainConfig, TrainResult
from plateau_lib.engine.utils import resolve_device, seed_everything, torch_save

def _optimizer(cfg: TrainConfig, model):
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "adam":
        return [torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)]
    if cfg.optimizer == "sgd":
        return [torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)]
    named = dict(model.named_parameters())
    matrices, others = muon_groups(model)
    return [torch.optim.Muon([named[n] for n in matrices], lr=cfg.muon_lr, weight_decay=cfg.weight_decay),
            torch.optim.Adam([named[n] for n in others], lr=cfg.lr, weight_decay=cfg.weight_decay)]


def muon_groups(model) -> tuple[list, list]:
    """Names of the trainable parameters Muon updates (the 2-D weights of the transformer blocks, as the paper's
    ``train_mws_muon.py``) and of those Adam updates (embeddings, head, gains and biases, and ``ln_f``, which
    the paper's script left in neither group, so never trained)."""
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    matrices = [n for n, p in trainable if p.ndim == 2 and n.startswith("blocks.")]
    return matrices, [n for n, _ in trainable if n not in matrices]


def lr_factor(cfg: TrainConfig, step: int) -> float:
    """Multiplier of the base learning rates at ``step``: "warmup_cosine" is a linear warm-up then a cosine
    decay to 0; "warmup_constant" the same warm-up, then constant (the temporal-task-diversity runs' schedule);
    "one_cycle" the triangle 0 -> 1 at the half-way step -> 0 (Hoogland et al.'s schedule)."""
    if cfg.schedule == "constant":
        return 1.0
    if cfg.schedule == "one_cycle":
        half = cfg.steps / 2
        return step / half if step < half else max(0.0, (cfg.steps - step) / half)
    if step < cfg.warmup_steps:
        return step / cfg.warmup_steps
    if cfg.schedule == "warmup_constant":
        return 1.0
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * progress))


SCHEDULES_CODE = {"constant": 0, "warmup_cosine": 1, "warmup_constant": 2, "one_cycle": 3}


def lr_factor_tensor(step, schedule, steps, warmup):
    """``lr_factor`` per run as device arithmetic (float64): ``step`` a scalar tensor, ``schedule`` the runs'
    ``SCHEDULES_CODE``, ``steps`` and ``warmup`` their step counts. What a captured CUDA graph computes."""
    half = steps / 2
    one_cycle = torch.where(step < half, step / half, ((steps - step) / half).clamp(min=0.0))
    warming = step < warmup
    ramp = step / warmup.clamp(min=1.0)
    progress = (step - warmup) / (steps - warmup).clamp(min=1.0)
    cosine = torch.where(warming, ramp, 0.5 * (1 + torch.cos(math.pi * progress)))
    constant_after = torch.where(warming, ramp, torch.ones_like(ramp))
    by_code = torch.stack([torch.ones_like(ramp), cosine, constant_after, one_cycle])
    return by_code.gather(0, schedule.view(1, -1)).squeeze(0)


def param_groups(model: torch.nn.Module) -> dict[str, list[str]]:
    """Parameter names by the paper's functional groups (``COPY_GROUPS``, copied and frozen in Fig. 5), read from
    the module names both chapters' models share (``attn.Q/K/V/c_proj``, ``mlp``, ``wte``/``wpe``, ``ln_1``,
    ``ln_2``, ``ln_f``): each layer norm goes with what it feeds, as the authors' code copies them (``ln_attn``:
    the norms before attention, ``ln_mlp``: before the MLP, ``ln_f``: before the readout)."""
    groups = {"kq": [], "ov": [], "mlp": [], "embed": [], "ln_attn": [], "ln_mlp": [], "ln_f": [], "head": []}
    for name, _ in model.named_parameters():
        if ".attn.Q." in name or ".attn.K." in name:
            groups["kq"].append(name)
        elif ".attn.V." in name or ".attn.c_proj." in name:
            groups["ov"].append(name)
        elif ".mlp." in name:
            groups["mlp"].append(name)
        elif name.startswith(("wte", "wpe")):
            groups["embed"].append(name)
        elif ".ln_1." in name:
            groups["ln_attn"].append(name)
        elif ".ln_2." in name:
            groups["ln_mlp"].append(name)
        elif name.startswith("ln_f."):
            groups["ln_f"].append(name)
        else:
            groups["head"].append(name)
    return groups


def build_model(cfg: TrainConfig, device, init_state: dict | None = None) -> torch.nn.Module:
    """Seeded model of ``cfg``'s task; ``copy_groups`` are copied from ``init_state`` and frozen."""
    seed_everything(cfg.seed)
    model = cfg.make_task().build_model(cfg).to(device)
    if cfg.copy_groups:
        if init_state is None:
            raise ValueError("copy_groups needs init_state (the trained model's state dict)")
        groups = param_groups(model)
        names = [n for g in cfg.copy_groups for n in groups[g]]
        params = dict(model.named_parameters())
        with torch.no_grad():
            for n in names:
                params[n].copy_(init_state[n].to(device))
                params[n].requires_grad_(False)
    return model


def _resume_state(run_dir, cfg):
    path = Path(run_dir) / "resume.pt" if run_dir else None
    if path is None or not path.exists():
        return None
    state = torch.load(path, weights_only=True, map_location="cpu")  # a GPU run's state resumes on a CPU too
    saved, wanted = dict(state["config"]), cfg.to_dict()
    saved.pop("device", None), wanted.pop("device", None)  # provenance, not part of the run: "cpu" resumes "auto"
    return state if saved == wanted else None


def _to_host(out: dict) -> dict:
    """A dict of device tensors copied to the host in one transfer (float32, shapes kept)."""
    values = [v.detach().float() for v in out.values()]
    flat = torch.cat([v.reshape(-1) for v in values]).cpu().split([v.numel() for v in values])
    return {k: part.reshape(v.shape) for k, v, part in zip(out, values, flat)}


class _Run:
    """One run's own state in the loop: config, task, data generator, held-out batch, bias, evaluations."""

    def __init__(self, cfg: TrainConfig, device, run_dir):
        self.cfg, self.task, self.run_dir = cfg, cfg.make_task(), Path(run_dir) if run_dir else None
        self.gen = torch.Generator(device=device).manual_seed(cfg.seed)
        self.eval_batch = self.task.sample(cfg.eval_batch, torch.Generator(device=device).manual_seed(cfg.seed + 1_000_003))
        self.bias = self.task.attention_bias(cfg.attn_bias_c, device)
        self.evals, self.start, self.elapsed, self.reseeded_at = [], 0, 0.0, None
        self.earlier_devices = {}  # seconds spent on each device before this process resumed the run

    def bias_at(self, step: int):
        """The attention bias in force at ``step`` (None before ``attn_bias_from`` or without one)."""
        return self.bias if (self.bias is not None and step >= self.cfg.attn_bias_from) else None


class _ModuleEngine:
    """One run as a plain module with torch's optimizers: ``train``'s arithmetic, and any optimizer."""

    def __init__(self, runs, init_states, device):
        (self.run,) = runs
        self.model = build_model(self.run.cfg, device, init_states[0])
        self.opts = _optimizer(self.run.cfg, self.model)
        self.base_lrs = [[g["lr"] for g in o.param_groups] for o in self.opts]

    def module(self, i):
        return self.model

    def step(self, step, batches, active):
        cfg = self.run.cfg
        for o, lrs in zip(self.opts, self.base_lrs):
            for g, lr in zip(o.param_groups, lrs):
                g["lr"] = lr * lr_factor(cfg, step)
        with matmul_operands(cfg.matmul_operands):
            loss = self.run.task.loss(self.model, batches[0], attn_bias=self.run.bias_at(step))
        for o in self.opts:
            o.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        for o in self.opts:
            o.step()

    def state(self, i):
        return self.model.state_dict(), [o.state_dict() for o in self.opts]

    def load(self, i, model_state, opt_states):
        self.model.load_state_dict(model_state)
        for o, s in zip(self.opts, opt_states):
            o.load_state_dict(s)


class _Bound:
    """A module called with other parameters (``functional_call``): what a task's ``loss`` sees under vmap."""

    def __init__(self, module, params):
        self.module, self.params = module, params

    def __call__(self, *args, **kwargs):
        return functional_call(self.module, self.params, args, kwargs)


class _StackedEngine:
    """S runs of one architecture as stacked parameters (S, ...): per-run gradients by ``vmap`` over
    ``grad_and_value`` of the task's loss, then Adam or SGD written elementwise with per-run learning rates,
    weight decay and momentum. Frozen groups are masked; runs not yet started or already finished are
    left untouched (parameters and optimizer state). Optimizer states convert to and from torch's own
    ``state_dict`` format, so a run resumes under either engine."""

    BETAS, EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults, which ``_optimizer`` uses

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
            self.schedule = torch.tensor([SCHEDULES_CODE[r.cfg.schedule] for r in runs], device=device)
            self.step_now = torch.zeros((), device=device, dtype=torch.float64)  # the loop's step (0-based)
            self.update_now = torch.zeros((), device=device, dtype=torch.float64)  # Adam's count, after this step
            self.static_batch, self.graph = None, None

    def _run_loss(self, params, batch, bias):
        return self.loss(_Bound(self.skeleton, params), batch, attn_bias=bias)

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
            factor = lr_factor_tensor(self.step_now, self.schedule, self.total_steps, self.warmup)
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
        opt = _optimizer(self.runs[i].cfg, model)[0]
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


class Stopped(KeyboardInterrupt):
    """Training stopped early on purpose (``stop_after`` or ``deadline``); the resume state is saved."""


def _loop(runs, engine, save_every, callbacks, progress, stop_after, on_result, device, deadline=None) -> list:
    """The training loop over the runs of one engine; returns each run's TrainResult."""
    for i, r in enumerate(runs):
        resume = _resume_state(r.run_dir, r.cfg)
        if resume is not None:
            engine.load(i, resume["model"], resume["opts"])
            r.evals, r.start, r.elapsed = resume["evals"], resume["step"], resume["elapsed"]
            r.reseeded_at = resume.get("reseeded_at")
            r.earlier_devices = resume.get("by_device") or {resume.get("device", "unknown"): resume["elapsed"]}
            if len(resume["gen"]) == len(r.gen.get_state()):
                r.gen.set_state(resume["gen"])
            else:  # another device type's generator (a GPU run continued on a CPU): a new stream, seeded by the step
                r.gen.manual_seed(r.cfg.seed + 7_919 * r.start)
                r.reseeded_at = r.start

    def record(i, step):
        r = runs[i]
        r.evals.append((step, _to_host(r.task.evaluate(engine.module(i), r.eval_batch, attn_bias=r.bias_at(step)))))

    def checkpoint(i, step):
        r = runs[i]
        if step in r.cfg.checkpoint_steps and r.run_dir:
            torch_save(engine.module(i).state_dict(), r.run_dir / f"ckpt_{step:06d}.pt")

    def by_device(i) -> dict:
        """Seconds of run i on each device (more than one key when a run was resumed on another device)."""
        r, times = runs[i], dict(runs[i].earlier_devices)
        times[str(device)] = round(times.get(str(device), 0.0) + r.elapsed - elapsed0[i], 2)
        return times

    def save_resume(i, step):
        r = runs[i]
        if r.run_dir:
            model_state, opt_states = engine.state(i)
            torch_save({"config": r.cfg.to_dict(), "model": model_state, "opts": opt_states, "gen": r.gen.get_state(),
                        "evals": r.evals, "step": step, "elapsed": r.elapsed, "device": str(device),
                        "reseeded_at": r.reseeded_at, "by_device": by_device(i)},
                       r.run_dir / "resume.pt")

    results = [None] * len(runs)

    def finish(i):
        r = runs[i]
        meta = {}
        if len(runs) > 1:
            meta["stacked_runs"] = len(runs)
        if r.reseeded_at is not None:
            meta["data_stream_reseeded_at"] = r.reseeded_at
        if len(by_device(i)) > 1:
            meta["wall_time_s_by_device"] = by_device(i)
        results[i] = _result(r, device, engine.module(i), round(r.elapsed, 2), **meta)
        if r.run_dir and (r.run_dir / "resume.pt").exists():
            (r.run_dir / "resume.pt").unlink()
        if on_result is not None:
            on_result(i, results[i])

    for i, r in enumerate(runs):
        if r.start == 0:
            record(i, 0)
            checkpoint(i, 0)
    t_start, elapsed0 = time.perf_counter(), [r.elapsed for r in runs]
    first, last = min(r.start for r in runs), max(r.cfg.steps for r in runs)
    desc = f"{runs[0].cfg.task} seed {runs[0].cfg.seed}" if len(runs) == 1 else f"{len(runs)} stacked runs"
    bar = tqdm(total=sum(r.cfg.steps for r in runs), initial=sum(r.start for r in runs), desc=desc,
               disable=not progress, leave=False)
    for i, r in enumerate(runs):
        if r.start >= r.cfg.steps:
            finish(i)
    for step in range(first, last):
        active = [r.start <= step < r.cfg.steps for r in runs]
        batches = [r.task.sample(r.cfg.batch_size, r.gen) if a else None for r, a in zip(runs, active)]
        filler = next(b for b in batches if b is not None)  # inactive runs compute on it; their update is masked
        engine.step(step, [filler if b is None else b for b in batches], active)
        done = step + 1
        for i, (r, a) in enumerate(zip(runs, active)):
            if not a:
                continue
            for cb in callbacks:
                cb(done, engine.module(i))
            checkpoint(i, done)
            if done % r.cfg.eval_every == 0 or done == r.cfg.steps or done in r.cfg.eval_steps:
                record(i, done)
                r.elapsed = elapsed0[i] + time.perf_counter() - t_start
                if (len(r.evals) - 1) % save_every == 0:
                    save_resume(i, done)
                if i == 0:
                    bar.set_postfix({k: f"{float(r.evals[-1][1][k]):.3f}" for k in ("loss", "acc") if k in r.evals[-1][1]})
            if done == r.cfg.steps:
                r.elapsed = elapsed0[i] + time.perf_counter() - t_start
                finish(i)
        bar.update(sum(active))
        stop = (stop_after is not None and done >= stop_after) or (deadline is not None and time.time() >= deadline)
        if stop and done < last:
            for i, r in enumerate(runs):
                if results[i] is None:
                    r.elapsed = elapsed0[i] + time.perf_counter() - t_start
                    save_resume(i, min(max(done, r.start), r.cfg.steps))
            raise Stopped(f"stopped after {done} steps ({'stop_after' if stop_after else 'deadline'}); resume "
                          "states saved in each run's run_dir")
    bar.close()
    return results


def train(cfg: TrainConfig, init_state: dict | None = None, run_dir=None, save_every: int = 5,
          callbacks=(), progress: bool = True, stop_after: int | None = None,
          deadline: float | None = None) -> TrainResult:
    """Train one model online and evaluate it every ``cfg.eval_every`` steps (and at 0 and the end).

    init_state: state dict to copy ``cfg.copy_groups`` from. run_dir: folder for the resume state and
    checkpoints. callbacks: callables ``f(step, model)`` run after each update. stop_after, deadline:
    save the resume state and raise :class:`Stopped` after this many steps, or once ``time.time()``
    passes ``deadline`` (a command with a time limit stops cleanly and the next one resumes).
    """
    device = resolve_device(cfg.device)
    runs = [_Run(cfg, device, run_dir)]
    engine = _ModuleEngine(runs, [init_state], device)
    return _loop(runs, engine, save_every, callbacks, progress, stop_after, None, device, deadline)[0]



def evaluation_steps(cfg: TrainConfig) -> list[int]:
    """The steps at which ``train`` evaluates ``cfg``: 0, every ``eval_every``, ``eval_steps`` and the last."""
    steps = {0, cfg.steps, *range(cfg.eval_every, cfg.steps + 1, cfg.eval_every)}
    return sorted(steps | set(cfg.eval_steps))


def untrained(cfg: TrainConfig, init_state: dict | None = None) -> TrainResult:
    """The run of ``cfg`` that learns nothing: its seeded initial model (``copy_groups`` copied from
    ``init_state``), never updated, evaluated as ``train`` evaluates, at every evaluation step of the run, on the
    run's held-out batch with the attention bias in force at each step. A claim's measure on it is the
    baseline a finding must fail (``book.verdicts``); ``meta["untrained"]`` marks it, and its final state is
    the initial one."""
    device = resolve_device(cfg.device)
    run = _Run(cfg, device, None)
    model = build_model(cfg, device, init_state)
    outputs = {}
    for step in evaluation_steps(cfg):
        biased = run.bias_at(step) is not None
        if biased not in outputs:
            outputs[biased] = _to_host(run.task.evaluate(model, run.eval_batch, attn_bias=run.bias_at(step)))
        run.evals.append((step, outputs[biased]))
    return _result(run, device, model, 0.0, untrained=True)


def _result(run: _Run, device, model, wall_time_s: float, **meta) -> TrainResult:
    """A finished run's TrainResult: its tables from the evaluations it recorded, its meta (device, wall time,
    torch, matmul operands, then ``meta``) and the model's state on the CPU."""
    metrics, positions, arrays = run.task.tables(run.evals, run.cfg.seed)
    meta = {"device": str(device), "wall_time_s": wall_time_s, "torch": torch.__version__,
            "matmul_operands": run.cfg.matmul_operands, **meta}
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return TrainResult(run.cfg.to_dict(), metrics, positions, arrays, meta, state)


BACKENDS = ("auto", "stacked", "sequential")
STACKABLE_OPTIMIZERS = ("adam", "sgd")  # elementwise; Muon orthogonalises whole 2-D matrices and does not stack


def check_stackable(configs) -> torch.device:
    """The common device of ``configs``; a ValueError before compute if they are empty, differ in
    architecture, or ask for different devices."""
    if not configs:
        raise ValueError("train_many needs at least one config, got an empty list")
    bad = [type(c).__name__ for c in configs if not isinstance(c, TrainConfig)]
    if bad:
        raise ValueError(f"train_many takes TrainConfig objects, got {bad}")
    arch = configs[0].model_config()
    for i, c in enumerate(configs[1:], 1):
        other = c.model_config()
        if other != arch:
            diff = {k: (getattr(arch, k), getattr(other, k)) for k in vars(arch) if getattr(arch, k) != getattr(other, k)}
            raise ValueError(f"configs passed to train_many must share one architecture; config {i} differs from "
                             f"config 0 in {diff} (config 0's value, config {i}'s value)")
    devices = {resolve_device(c.device) for c in configs}
    if len(devices) > 1:
        raise ValueError(f"configs passed to train_many must run on one device, got {sorted(map(str, devices))}")
    return devices.pop()


def train_many(configs, init_states=None, run_dirs=None, save_every: int = 5, progress: bool = True,
               backend: str = "auto", stop_after: int | None = None, on_result=None,
               deadline: float | None = None, cuda_graphs: bool = False, compile: bool = False) -> list[TrainResult]:
    """Train S runs of one architecture; returns their results in order, each as ``train`` gives it.

    backend: "stacked" (one vmapped computation; runs grouped by optimizer, batch size and matmul operands), "sequential"
        (``train`` once per config) or "auto" (stacked on CUDA, sequential elsewhere: on a CPU the batched
        matmuls of vmap cost more than running the runs in turn; ``benchmarks/train_bench.py`` measures it).
        Muon does not stack: such runs go sequentially, with a warning.
    init_states, run_dirs: per config, as ``train``'s ``init_state`` and ``run_dir`` (None for all).
    on_result: ``f(index, result)`` called as each run finishes (e.g. to cache it at once).
    stop_after, deadline: as in ``train`` (every unfinished run saves its resume state).
    cuda_graphs: stacked runs that advance together take each step from one CUDA graph (captured at the first
        such step; the per-step learning rates and Adam's corrections computed on the device), which removes the
        launch cost that bounds small models on a GPU. Off CUDA the same step runs eagerly (the arithmetic the
        tests check). Steps where runs differ in progress, or with an attention bias, run as without it.
    compile: the same step through ``torch.compile`` (fused kernels; a one-off compilation of about a minute),
        with or without ``cuda_graphs``; if compilation fails the step runs uncompiled, with a warning.
    """
    configs = list(configs)
    device = check_stackable(configs)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    S = len(configs)
    init_states = [None] * S if init_states is None else list(init_states)
    run_dirs = [None] * S if run_dirs is None else list(run_dirs)
    if len(init_states) != S or len(run_dirs) != S:
        raise ValueError(f"init_states and run_dirs need one entry per config ({S}), "
                         f"got {len(init_states)} and {len(run_dirs)}")
    if backend == "auto":
        backend = "stacked" if device.type == "cuda" else "sequential"
    results = [None] * S
    groups = {}
    for i, c in enumerate(configs):
        stackable = backend == "stacked" and c.optimizer in STACKABLE_OPTIMIZERS
        groups.setdefault((c.optimizer, c.batch_size, c.matmul_operands) if stackable else ("sequential", i),
                          []).append(i)
    muon = [i for i, c in enumerate(configs) if c.optimizer not in STACKABLE_OPTIMIZERS]
    if backend == "stacked" and muon:
        warnings.warn(f"train_many: optimizer(s) {sorted({configs[i].optimizer for i in muon})} do not stack "
                      f"(Muon takes whole 2-D matrices); {len(muon)} run(s) go one after another", stacklevel=2)
    for key, members in groups.items():
        def report(j, result, members=members):
            results[members[j]] = result
            if on_result is not None:
                on_result(members[j], result)
        if key[0] == "sequential":
            (i,) = members
            report(0, train(configs[i], init_states[i], run_dirs[i], save_every, progress=progress,
                            stop_after=stop_after, deadline=deadline))
            continue
        runs = [_Run(configs[i], device, run_dirs[i]) for i in members]
        engine = _StackedEngine(runs, [init_states[i] for i in members], device, capturable=cuda_graphs,
                                compiled=compile)
        _loop(runs, engine, save_every, (), progress, stop_after, report, device, deadline)
    return results
