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

import time
import warnings
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from plateau_lib.engine.precision import matmul_operands
from plateau_lib.engine.runs import TrainConfig, TrainResult
from plateau_lib.engine.setup import build_model, lr_factor, make_optimizers
from plateau_lib.engine.stacked import StackedEngine
from plateau_lib.engine.utils import resolve_device, torch_save


def _resume_state(run_dir, cfg):
    """The resume state in ``run_dir`` if it is ``cfg``'s run: the same fields as the cache key reads them, so a
    state saved before a field was added (at its old-behaviour default) resumes, and the device (provenance) is
    not compared: a GPU run's state resumes on a CPU too."""
    path = Path(run_dir) / "resume.pt" if run_dir else None
    if path is None or not path.exists():
        return None
    state = torch.load(path, weights_only=True, map_location="cpu")
    neutral, provenance = cfg.KEY_NEUTRAL, cfg.PROVENANCE_FIELDS
    saved = {k: v for k, v in state["config"].items() if k not in provenance and (k not in neutral or v != neutral[k])}
    return state if saved == cfg.key_dict() else None


def _to_host(out: dict) -> dict:
    """A dict of device tensors copied to the host in one transfer (float32, shapes kept)."""
    values = [v.detach().float() for v in out.values()]
    flat = torch.cat([v.reshape(-1) for v in values]).cpu().split([v.numel() for v in values])
    return {k: part.reshape(v.shape) for k, v, part in zip(out, values, flat)}


class _Run:
    """One run's own state in the loop: config, task, data generator, held-out batch, bias, evaluations."""

    def __init__(self, cfg: TrainConfig, device, run_dir):
        self.cfg, self.task, self.run_dir = cfg, cfg.make_task(), Path(run_dir) if run_dir else None
        self.device = device
        drawn_on = torch.device("cpu") if self.task.samples_on_cpu else device  # the data's random numbers
        self.gen = torch.Generator(device=drawn_on).manual_seed(cfg.seed)
        self.eval_batch = self.task.sample(cfg.eval_batch, torch.Generator(device=drawn_on).manual_seed(cfg.seed + 1_000_003),
                                           device)
        self.bias = self.task.attention_bias(cfg.attn_bias_c, device)
        self.evals, self.start, self.elapsed, self.reseeded_at = [], 0, 0.0, None
        self.train_losses, self.pending_losses = [], []  # with ``record_train_loss``: read on the host, and not yet
        self.earlier_devices = {}  # seconds spent on each device before this process resumed the run

    def read_losses(self) -> None:
        """Move the training losses kept on the device since the last read to the host (one sync)."""
        if self.pending_losses:
            self.train_losses += torch.stack(self.pending_losses).float().cpu().tolist()
            self.pending_losses.clear()

    def bias_at(self, step: int):
        """The attention bias in force at ``step`` (None before ``attn_bias_from`` or without one)."""
        return self.bias if (self.bias is not None and step >= self.cfg.attn_bias_from) else None


class _ModuleEngine:
    """One run as a plain module with torch's optimizers: ``train``'s arithmetic, and any optimizer."""

    def __init__(self, runs, init_states, device):
        (self.run,) = runs
        self.model = build_model(self.run.cfg, device, init_states[0])
        self.opts = make_optimizers(self.run.cfg, self.model)
        self.base_lrs = [[g["lr"] for g in o.param_groups] for o in self.opts]

    def module(self, i):
        return self.model

    def step(self, step, batches, active):
        """One update; returns the training loss (detached, on the device)."""
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
        return loss.detach()

    def state(self, i):
        return self.model.state_dict(), [o.state_dict() for o in self.opts]

    def load(self, i, model_state, opt_states):
        self.model.load_state_dict(model_state)
        for o, s in zip(self.opts, opt_states):
            o.load_state_dict(s)


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
            r.train_losses = list(resume.get("train_losses", []))
            r.earlier_devices = resume.get("by_device") or {resume.get("device", "unknown"): resume["elapsed"]}
            if len(resume["gen"]) == len(r.gen.get_state()):
                r.gen.set_state(resume["gen"])
            else:  # another device type's generator (a GPU run continued on a CPU): a new stream, seeded by the step
                r.gen.manual_seed(r.cfg.seed + 7_919 * r.start)
                r.reseeded_at = r.start

    def record(i, step):
        r = runs[i]
        r.read_losses()
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
            r.read_losses()
            model_state, opt_states = engine.state(i)
            torch_save({"config": r.cfg.to_dict(), "model": model_state, "opts": opt_states, "gen": r.gen.get_state(),
                        "evals": r.evals, "step": step, "elapsed": r.elapsed, "device": str(device),
                        "reseeded_at": r.reseeded_at, "by_device": by_device(i), "train_losses": r.train_losses},
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
        batches = [r.task.sample(r.cfg.batch_size, r.gen, r.device) if a else None for r, a in zip(runs, active)]
        filler = next(b for b in batches if b is not None)  # inactive runs compute on it; their update is masked
        loss = engine.step(step, [filler if b is None else b for b in batches], active)
        done = step + 1
        if runs[0].cfg.record_train_loss:  # such runs go one at a time (``train_many``)
            runs[0].pending_losses.append(loss)
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
    if run.cfg.record_train_loss:
        run.read_losses()
        arrays = {**arrays, "train_loss": np.asarray(run.train_losses, dtype=np.float32)}
    meta = {"device": str(device), "wall_time_s": wall_time_s, "torch": torch.__version__,
            "matmul_operands": run.cfg.matmul_operands, **meta}
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return TrainResult(run.cfg.to_dict(), metrics, positions, arrays, meta, state)


BACKENDS = ("auto", "stacked", "sequential")
STACKABLE_OPTIMIZERS = ("adam", "sgd")  # elementwise; Muon orthogonalises whole 2-D matrices, and AdamW's decay
# on the matrices only is not in the stacked update: neither stacks


def stacks(cfg: TrainConfig) -> bool:
    """Whether a run of ``cfg`` can join a stacked group (``train_many``): its optimizer is elementwise and it keeps
    no per-step training loss."""
    return cfg.optimizer in STACKABLE_OPTIMIZERS and not cfg.record_train_loss


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
        Muon, AdamW and ``record_train_loss`` do not stack: such runs go sequentially, with a warning.
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
        stackable = backend == "stacked" and stacks(c)
        groups.setdefault((c.optimizer, c.batch_size, c.matmul_operands) if stackable else ("sequential", i),
                          []).append(i)
    alone = [i for i, c in enumerate(configs) if not stacks(c)]
    if backend == "stacked" and alone:
        warnings.warn(f"train_many: {len(alone)} run(s) do not stack (optimizer Muon or AdamW, or "
                      "record_train_loss) and go one after another", stacklevel=2)
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
        engine = StackedEngine(runs, [init_states[i] for i in members], device, capturable=cuda_graphs,
                                compiled=compile)
        _loop(runs, engine, save_every, (), progress, stop_after, report, device, deadline)
    return results
