"""One online training loop for every plateau experiment.

``train(cfg)`` samples a fresh batch each step from a seeded generator, takes an optimizer step, and
every ``eval_every`` steps evaluates all metrics (``plateau_lib.metrics.evaluate``) on a fixed held-out
batch. It returns a :class:`TrainResult` with tidy pandas tables. Given a ``run_dir`` it saves a resume
state atomically every ``save_every`` evaluations, resumes from it after an interruption, and writes
checkpoints at ``checkpoint_steps``.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from . import metrics as M
from .model import GPT, GPTConfig, param_groups
from .tasks import make_task
from .utils import resolve_device, seed_everything, torch_save

OPTIMIZERS = ("adam", "sgd", "muon")
SCHEDULES = ("constant", "warmup_cosine")
COPY_GROUPS = ("kq", "ov", "mlp", "embed", "ln", "head")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a run; the defaults are the paper's MWS config (``mws.yaml``)."""
    task: str = "mws"
    task_kwargs: dict = field(default_factory=dict)
    n_layer: int = 1
    n_head: int = 1
    d_model: int = 256
    softmax: bool = False
    optimizer: str = "adam"
    lr: float = 1e-4
    momentum: float = 0.0            # SGD only
    weight_decay: float = 0.0
    muon_lr: float = 0.02            # Muon: lr of the 2-D block weights; the rest use Adam at ``lr``
    schedule: str = "constant"
    warmup_steps: int = 0
    grad_clip: float = 0.0           # 0 = off
    steps: int = 400
    batch_size: int = 256
    eval_every: int = 10
    eval_batch: int = 256
    seed: int = 0
    device: str = "auto"
    attn_bias_c: float = 1.0         # multiply Ω entries of the attention map by c (1 = off)
    attn_bias_from: int = 0          # ... from this step on (training and generation)
    copy_groups: tuple = ()          # parameter groups copied from ``init_state`` and frozen (Fig. 5)
    checkpoint_steps: tuple = ()

    # The cache key hashes only the fields whose value differs from this frozen table (see ``key_dict``).
    # It records the defaults the key scheme started from; it is never edited to follow a changed default,
    # and a new field enters it with the value that keeps the old behaviour. ``device`` is provenance only.
    KEY_NEUTRAL: ClassVar[dict] = {
        "task": "mws", "task_kwargs": {}, "n_layer": 1, "n_head": 1, "d_model": 256, "softmax": False,
        "optimizer": "adam", "lr": 1e-4, "momentum": 0.0, "weight_decay": 0.0, "muon_lr": 0.02,
        "schedule": "constant", "warmup_steps": 0, "grad_clip": 0.0, "steps": 400, "batch_size": 256,
        "eval_every": 10, "eval_batch": 256, "seed": 0, "attn_bias_c": 1.0, "attn_bias_from": 0,
        "copy_groups": [], "checkpoint_steps": []}
    PROVENANCE_FIELDS: ClassVar[tuple] = ("device",)

    def __post_init__(self):
        positive = ("n_layer", "n_head", "d_model", "steps", "batch_size", "eval_every", "eval_batch")
        for name in positive:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("lr", "muon_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("momentum", "weight_decay", "grad_clip", "warmup_steps", "attn_bias_from"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not self.attn_bias_c > 0:
            raise ValueError(f"attn_bias_c must be > 0, got {self.attn_bias_c!r}")
        bad = [g for g in self.copy_groups if g not in COPY_GROUPS]
        if bad:
            raise ValueError(f"copy_groups must be drawn from {COPY_GROUPS}, got {bad}")
        bad = [s for s in self.checkpoint_steps if not (isinstance(s, int) and 0 <= s <= self.steps)]
        if bad:
            raise ValueError(f"checkpoint_steps must be integers in [0, steps={self.steps}], got {bad}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")
        task = self.make_task()  # validates task and task_kwargs
        if self.attn_bias_c != 1.0 and not task.omega_is_fixed:
            raise ValueError(f"attn_bias_c needs a task with a fixed Ω; {self.task!r}'s Ω depends on the sequence")
        resolve_device(self.device) if self.device != "auto" else None

    def make_task(self):
        return make_task(self.task, **self.task_kwargs)

    def model_config(self) -> GPTConfig:
        task = self.make_task()
        return GPTConfig(vocab_size=task.vocab_size, block_size=task.block_size, n_layer=self.n_layer,
                         n_head=self.n_head, d_model=self.d_model, softmax=self.softmax)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["copy_groups"], d["checkpoint_steps"] = list(self.copy_groups), list(self.checkpoint_steps)
        return d

    def key_dict(self) -> dict:
        """The fields that define the result: those differing from ``KEY_NEUTRAL``, without provenance."""
        d = self.to_dict()
        missing = sorted(set(d) - set(self.KEY_NEUTRAL) - set(self.PROVENANCE_FIELDS))
        if missing:
            raise ValueError(f"TrainConfig.KEY_NEUTRAL has no entry for {missing}: add the value that keeps "
                             "the old behaviour, so existing cache keys stay valid")
        return {k: v for k, v in d.items() if k not in self.PROVENANCE_FIELDS and v != self.KEY_NEUTRAL[k]}

    def replace(self, **changes) -> "TrainConfig":
        """A copy with ``changes``; unknown field names raise a ValueError listing the allowed ones."""
        return replace_fields(self, changes)


def replace_fields(cfg, changes: dict):
    """dataclasses.replace with a clear error for unknown names (used for presets and overrides)."""
    names = {f.name for f in dataclasses.fields(cfg)}
    unknown = sorted(set(changes) - names)
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for {type(cfg).__name__}; allowed: {sorted(names)}")
    changes = {k: tuple(v) if isinstance(v, list) and k in ("copy_groups", "checkpoint_steps") else v
               for k, v in changes.items()}
    return dataclasses.replace(cfg, **changes)


@dataclass
class TrainResult:
    """Tidy tables of one run: ``metrics`` (step x scalar metrics), ``positions`` (step x position
    accuracies), ``arrays`` (per-eval arrays: ``cos`` (E, G, G), ``attn`` (E, T, T)), ``meta``."""
    config: dict
    metrics: pd.DataFrame
    positions: pd.DataFrame
    arrays: dict
    meta: dict
    final_state: dict | None = None

    def save(self, path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.metrics.to_csv(path / "metrics.csv", index=False)
        self.positions.to_csv(path / "positions.csv", index=False)
        np.savez_compressed(path / "arrays.npz", **self.arrays)
        (path / "meta.json").write_text(json.dumps({"config": self.config, **self.meta}, indent=1, default=str))
        if self.final_state is not None:
            torch.save(self.final_state, path / "final_state.pt")

    @classmethod
    def load(cls, path) -> "TrainResult":
        path = Path(path)
        meta = json.loads((path / "meta.json").read_text())
        config = meta.pop("config")
        with np.load(path / "arrays.npz") as z:
            arrays = {k: z[k] for k in z.files}
        state = path / "final_state.pt"
        return cls(config, pd.read_csv(path / "metrics.csv"), pd.read_csv(path / "positions.csv"), arrays, meta,
                   torch.load(state, weights_only=True) if state.exists() else None)


def _optimizer(cfg: TrainConfig, model: GPT):
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "adam":
        return [torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)]
    if cfg.optimizer == "sgd":
        return [torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)]
    matrices = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim == 2 and n.startswith("blocks.")]
    others = [p for n, p in model.named_parameters() if p.requires_grad and not (p.ndim == 2 and n.startswith("blocks."))]
    return [torch.optim.Muon(matrices, lr=cfg.muon_lr, weight_decay=cfg.weight_decay),
            torch.optim.Adam(others, lr=cfg.lr, weight_decay=cfg.weight_decay)]


def lr_factor(cfg: TrainConfig, step: int) -> float:
    """Multiplier of the base learning rates at ``step`` (linear warm-up then cosine decay to 0)."""
    if cfg.schedule == "constant":
        return 1.0
    if step < cfg.warmup_steps:
        return step / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * progress))


def build_model(cfg: TrainConfig, device, init_state: dict | None = None) -> GPT:
    """Seeded model; ``copy_groups`` are copied from ``init_state`` and frozen."""
    seed_everything(cfg.seed)
    model = GPT(cfg.model_config()).to(device)
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
    state = torch.load(path, weights_only=True)
    return state if state["config"] == cfg.to_dict() else None


def train(cfg: TrainConfig, init_state: dict | None = None, run_dir=None, save_every: int = 5,
          callbacks=(), progress: bool = True, stop_after: int | None = None) -> TrainResult:
    """Train one model online and evaluate it every ``cfg.eval_every`` steps (and at 0 and the end).

    init_state: state dict to copy ``cfg.copy_groups`` from. run_dir: folder for the resume state and
    checkpoints. callbacks: callables ``f(step, model)`` run after each update. stop_after: stop
    (as if interrupted) after this many steps; used to test resuming.
    """
    device = resolve_device(cfg.device)
    task = cfg.make_task()
    model = build_model(cfg, device, init_state)
    opts = _optimizer(cfg, model)
    base_lrs = [[g["lr"] for g in o.param_groups] for o in opts]
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    eval_gen = torch.Generator(device=device).manual_seed(cfg.seed + 1_000_003)
    eval_seqs = task.sample(cfg.eval_batch, eval_gen)
    bias = M.bias_mask(task, cfg.attn_bias_c, device=device) if cfg.attn_bias_c != 1.0 else None
    evals, start, elapsed = [], 0, 0.0

    resume = _resume_state(run_dir, cfg)
    if resume is not None:
        model.load_state_dict(resume["model"])
        for o, s in zip(opts, resume["opts"]):
            o.load_state_dict(s)
        gen.set_state(resume["gen"])
        evals, start, elapsed = resume["evals"], resume["step"], resume["elapsed"]

    def record(step):
        active = bias if (bias is not None and step >= cfg.attn_bias_from) else None
        out = M.evaluate(model, eval_seqs, task, attn_bias=active)
        evals.append((step, {k: v.detach().float().cpu() for k, v in out.items()}))

    def save_resume(step):
        if run_dir:
            torch_save({"config": cfg.to_dict(), "model": model.state_dict(), "opts": [o.state_dict() for o in opts],
                        "gen": gen.get_state(), "evals": evals, "step": step, "elapsed": elapsed},
                       Path(run_dir) / "resume.pt")

    if start == 0:
        record(0)
        if 0 in cfg.checkpoint_steps and run_dir:
            torch_save(model.state_dict(), Path(run_dir) / "ckpt_000000.pt")
    t_start = time.perf_counter() - elapsed
    bar = tqdm(range(start, cfg.steps), desc=f"{cfg.task} seed {cfg.seed}", disable=not progress,
               initial=start, total=cfg.steps, leave=False)
    for step in bar:
        factor = lr_factor(cfg, step)
        for o, lrs in zip(opts, base_lrs):
            for g, lr in zip(o.param_groups, lrs):
                g["lr"] = lr * factor
        seqs = task.sample(cfg.batch_size, gen)
        active = bias if (bias is not None and step >= cfg.attn_bias_from) else None
        loss = M.loss_all(model(seqs[:, :-1], attn_bias=active), seqs)
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        for o in opts:
            o.step()
        done = step + 1
        for cb in callbacks:
            cb(done, model)
        if done in cfg.checkpoint_steps and run_dir:
            torch_save(model.state_dict(), Path(run_dir) / f"ckpt_{done:06d}.pt")
        if done % cfg.eval_every == 0 or done == cfg.steps:
            record(done)
            bar.set_postfix(loss=f"{evals[-1][1]['loss']:.3f}", acc=f"{evals[-1][1]['acc']:.2f}")
            elapsed = time.perf_counter() - t_start
            if (len(evals) - 1) % save_every == 0:
                save_resume(done)
        if stop_after is not None and done >= stop_after:
            elapsed = time.perf_counter() - t_start
            save_resume(done)
            raise KeyboardInterrupt(f"stopped after {done} steps (stop_after)")
    bar.close()
    wall = time.perf_counter() - t_start
    result = _tables(cfg, evals, task)
    result.meta.update(device=str(device), wall_time_s=round(wall, 2), torch=torch.__version__)
    result.final_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    if run_dir and (Path(run_dir) / "resume.pt").exists():
        (Path(run_dir) / "resume.pt").unlink()
    return result


def _tables(cfg, evals, task) -> TrainResult:
    steps = [s for s, _ in evals]
    metrics = pd.DataFrame([{"step": s, "seed": cfg.seed, **{k: float(out[k]) for k in M.SCALARS}}
                            for s, out in evals])
    positions = pd.DataFrame([{"step": s, "seed": cfg.seed, "position": j + 1, "acc": float(out["acc_pos"][j]),
                               "acc_tf": float(out["acc_tf_pos"][j])}
                              for s, out in evals for j in range(task.gen_len)])
    arrays = {"step": np.array(steps), "cos": np.stack([out["cos"].numpy() for _, out in evals]),
              "attn": np.stack([out["attn"].numpy() for _, out in evals])}
    return TrainResult(cfg.to_dict(), metrics, positions, arrays, {})
