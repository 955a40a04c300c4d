"""What defines a run and what a run gives back: ``TrainConfig`` (every field of a run, validated, with the cache
key's rules) and ``TrainResult`` (tidy tables of one run, saved and loaded as a folder). ``engine.train`` runs them.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from plateau_lib.engine.tasks import make_task
from plateau_lib.engine.utils import resolve_device

OPTIMIZERS = ("adam", "sgd", "muon", "adamw")
SCHEDULES = ("constant", "warmup_cosine", "warmup_constant", "one_cycle")
COPY_GROUPS = ("kq", "ov", "mlp", "embed", "ln_attn", "ln_mlp", "ln_f", "head")
from plateau_lib.engine.precision import MATMUL_OPERANDS


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
    lr_floor: float = 0.0            # "warmup_cosine": the cosine ends at lr * lr_floor (GPT-NeoX's min_lr / lr)
    decay_steps: int = 0             # "warmup_cosine": the step the cosine reaches its floor (0: the run's last)
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
    eval_steps: tuple = ()           # extra evaluation steps besides every ``eval_every`` (e.g. log-spaced)
    matmul_operands: str = "float32"  # "bfloat16": training's matrix products as a TPU's default (engine.precision)
    record_train_loss: bool = False  # keep every step's training loss (``arrays["train_loss"]``; runs one at a time)
    init_nudge: bool = False         # every initial weight one float step up (a re-run as another machine might round)

    # The cache key hashes only the fields whose value differs from this frozen table (see ``key_dict``).
    # It records the defaults the key scheme started from; it is never edited to follow a changed default,
    # and a new field enters it with the value that keeps the old behaviour. ``device`` is provenance only.
    KEY_NEUTRAL: ClassVar[dict] = {
        "task": "mws", "task_kwargs": {}, "n_layer": 1, "n_head": 1, "d_model": 256, "softmax": False,
        "optimizer": "adam", "lr": 1e-4, "momentum": 0.0, "weight_decay": 0.0, "muon_lr": 0.02,
        "schedule": "constant", "warmup_steps": 0, "lr_floor": 0.0, "decay_steps": 0, "grad_clip": 0.0, "steps": 400, "batch_size": 256,
        "eval_every": 10, "eval_batch": 256, "seed": 0, "attn_bias_c": 1.0, "attn_bias_from": 0,
        "copy_groups": [], "checkpoint_steps": [], "eval_steps": [], "matmul_operands": "float32",
        "record_train_loss": False, "init_nudge": False}
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
        if self.matmul_operands not in MATMUL_OPERANDS:
            raise ValueError(f"matmul_operands must be one of {MATMUL_OPERANDS}, got {self.matmul_operands!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not 0 <= self.lr_floor <= 1:
            raise ValueError(f"lr_floor must be in [0, 1] (a fraction of lr), got {self.lr_floor!r}")
        if not isinstance(self.decay_steps, int) or isinstance(self.decay_steps, bool) or self.decay_steps < 0:
            raise ValueError(f"decay_steps must be an integer >= 0 (0: the run's steps), got {self.decay_steps!r}")
        if (self.lr_floor or self.decay_steps) and self.schedule != "warmup_cosine":
            raise ValueError(f"lr_floor and decay_steps shape schedule='warmup_cosine', got schedule={self.schedule!r}")
        for name in ("record_train_loss", "init_nudge"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not self.attn_bias_c > 0:
            raise ValueError(f"attn_bias_c must be > 0, got {self.attn_bias_c!r}")
        bad = [g for g in self.copy_groups if g not in COPY_GROUPS]
        if bad:
            raise ValueError(f"copy_groups must be drawn from {COPY_GROUPS}, got {bad}")
        for name in ("checkpoint_steps", "eval_steps"):
            bad = [s for s in getattr(self, name) if not (isinstance(s, int) and 0 <= s <= self.steps)]
            if bad:
                raise ValueError(f"{name} must be integers in [0, steps={self.steps}], got {bad}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")
        task = self.make_task()  # validates task and task_kwargs
        if self.attn_bias_c != 1.0 and not task.omega_is_fixed:
            raise ValueError(f"attn_bias_c needs a task with a fixed Ω; {self.task!r}'s Ω depends on the sequence")
        resolve_device(self.device) if self.device != "auto" else None

    def make_task(self):
        return make_task(self.task, **self.task_kwargs)

    def model_config(self):
        """The architecture this config trains (the task decides; runs stack only if these agree)."""
        return self.make_task().model_config(self)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for name in ("copy_groups", "checkpoint_steps", "eval_steps"):
            d[name] = list(getattr(self, name))
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
    changes = {k: tuple(v) if isinstance(v, list) and k in ("copy_groups", "checkpoint_steps", "eval_steps") else v
               for k, v in changes.items()}
    return dataclasses.replace(cfg, **changes)


def nudged_config(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with every initial weight one float step up (``init_nudge``): a re-run as another machine, with its
    own order of sums, might make it."""
    return cfg.replace(init_nudge=True)


def nudged(configs: dict) -> dict:
    """``{label: nudged_config(cfg)}`` of ``{label: TrainConfig}``."""
    return {label: nudged_config(cfg) for label, cfg in configs.items()}


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
