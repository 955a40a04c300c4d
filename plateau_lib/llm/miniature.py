"""The offline miniature: Pythia-14m's architecture and initialisation (or OLMo-2's) trained from scratch here on
the offline corpus by the one training loop (``engine.train``, task ``next_token``), checkpoints saved with
``save_pretrained`` at Pythia's log-spaced steps so the real-path loader reads them unchanged."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.setup import lr_factor
from plateau_lib.engine.train import train
from plateau_lib.engine.utils import atomic_path, seed_everything
from plateau_lib.llm.checkpoints import OLMO_REVISIONS, PYTHIA_STEPS
from plateau_lib.llm.corpus import LLM_VERSION, LOCAL, TOKENIZER_FILES, TOKENIZER_SIZES, check_corpus
from plateau_lib.llm.task import hf_model

@dataclass(frozen=True)
class MiniatureConfig:
    """A Pythia-architecture model trained from scratch on the offline corpus. Defaults are Pythia-14m's
    architecture and optimiser (reference §3); the batch is ~1000x smaller than Pythia's 1024 x 2048."""
    arch: str = "pythia"          # "pythia" (GPT-NeoX) or "olmo2"
    n_layer: int = 6
    d_model: int = 128
    n_head: int = 4
    d_ff: int = 512
    vocab_size: int = 50304       # Pythia's padded vocabulary (the tokenizer uses ids 0..50279)
    context: int = 128            # training window (Pythia: 2048)
    batch_size: int = 16          # sequences per step (Pythia: 1024)
    steps: int = 512
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 1430      # Pythia's 1% of 143k: every step up to 1000 is inside the warm-up
    schedule_steps: int = 143_000  # the cosine decay's length (Pythia's run)
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    corpus: tuple = ("boolq", "hellaswag")
    seed: int = 0
    device: str = "auto"
    init_nudge: bool = False      # every initial weight one float step up: the re-run that marks fragile verdicts

    def __post_init__(self):
        if self.arch not in TOKENIZER_FILES:
            raise ValueError(f"arch must be one of {list(TOKENIZER_FILES)}, got {self.arch!r}")
        for name in ("n_layer", "d_model", "n_head", "d_ff", "vocab_size", "context", "batch_size", "steps",
                     "schedule_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")
        if not (0 < self.min_lr <= self.lr) or self.warmup_steps < 0:
            raise ValueError(f"need 0 < min_lr <= lr and warmup_steps >= 0, got lr={self.lr}, min_lr={self.min_lr}, "
                             f"warmup_steps={self.warmup_steps}")
        if self.vocab_size < TOKENIZER_SIZES[self.arch]:
            raise ValueError(f"vocab_size must cover the {self.arch} tokenizer ({TOKENIZER_SIZES[self.arch]} ids), "
                             f"got {self.vocab_size}")
        check_corpus(self.corpus)
        if not isinstance(self.init_nudge, bool):
            raise ValueError(f"init_nudge must be True or False, got {self.init_nudge!r}")

    @classmethod
    def from_meta(cls, config: dict) -> "MiniatureConfig":
        """The config a stored result's meta wrote (``meta["config"]``: JSON, so its corpus is a list)."""
        return cls(**{**config, "corpus": tuple(config["corpus"])})

    def replace(self, **fields) -> "MiniatureConfig":
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ValueError(f"unknown MiniatureConfig field(s) {unknown}; fields: "
                             f"{[f.name for f in dataclasses.fields(self)]}")
        return dataclasses.replace(self, **fields)

    def key(self) -> str:
        """16 hex digits naming this run's checkpoints and results (the device is provenance, not key; an
        ``init_nudge`` left False is not in it, so the keys made before it existed hold)."""
        fields = {k: v for k, v in dataclasses.asdict(self).items()
                  if k != "device" and not (k == "init_nudge" and not v)}
        return hashlib.sha256(json.dumps({"config": fields, "version": LLM_VERSION}, sort_keys=True,
                                         default=list).encode()).hexdigest()[:16]

    def checkpoint_steps(self) -> list[int]:
        """The steps the paper analysed up to ``steps``: Pythia's (0, 1, 2, 4, ..., 512, 1000, 2000, 4000, 8000,
        10000), and for an OLMo-2 miniature also OLMo's two (150, 600)."""
        olmo = set(OLMO_REVISIONS) if self.arch == "olmo2" else set()
        return sorted({s for s in (*PYTHIA_STEPS, *olmo) if s <= self.steps} | {self.steps})

    def prompt_seed(self, seed: int | None) -> int | None:
        """The prompts' sample: OLMo's script took the first 100 questions (None), Pythia's a shuffled sample."""
        return None if self.arch == "olmo2" else seed


def train_config(cfg: MiniatureConfig) -> TrainConfig:
    """``cfg`` as a run of the one training loop: next-token prediction (``llm.task``), GPT-NeoX's AdamW, its warm-up
    and cosine to ``min_lr`` at ``schedule_steps``, clipping, every step's training loss kept, the held-out loss and
    a checkpoint at each of ``checkpoint_steps``."""
    steps = tuple(cfg.checkpoint_steps())
    return TrainConfig(task="next_token", task_kwargs={"arch": cfg.arch, "d_ff": cfg.d_ff, "vocab_size": cfg.vocab_size,
                                                       "context": cfg.context, "corpus": list(cfg.corpus)},
                       n_layer=cfg.n_layer, n_head=cfg.n_head, d_model=cfg.d_model, optimizer="adamw", lr=cfg.lr,
                       weight_decay=cfg.weight_decay, schedule="warmup_cosine", warmup_steps=cfg.warmup_steps,
                       lr_floor=cfg.min_lr / cfg.lr, decay_steps=cfg.schedule_steps, grad_clip=cfg.grad_clip,
                       steps=cfg.steps, batch_size=cfg.batch_size, eval_every=cfg.steps, eval_batch=cfg.batch_size,
                       seed=cfg.seed, device=cfg.device, checkpoint_steps=steps, eval_steps=steps,
                       record_train_loss=True, init_nudge=cfg.init_nudge)


def build_model(cfg: MiniatureConfig):
    """The freshly initialised model of ``cfg``, as training starts from it (seeded by ``cfg.seed``)."""
    seed_everything(cfg.seed)
    return hf_model(cfg.arch, cfg.n_layer, cfg.d_model, cfg.n_head, cfg.d_ff, cfg.vocab_size)


def run_dir(cfg: MiniatureConfig) -> Path:
    """Where a miniature's checkpoints live (``step{k}/``, Hugging Face folders; never committed)."""
    return LOCAL / f"miniature-{cfg.key()}"


def train_miniature(cfg: MiniatureConfig, progress: bool = True, deadline: float | None = None) -> Path:
    """Train ``cfg`` through ``engine.train`` and save ``step{k}/`` (``save_pretrained``, safetensors) at each
    checkpoint step; returns the run folder. An interrupted run resumes from its last resume state; ``deadline`` (a
    ``time.time()``) stops it cleanly there, raising ``Stopped``. ``losses.csv`` keeps every step's training loss
    and learning rate."""
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    folder = run_dir(cfg)
    if (folder / "done.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    run = train_config(cfg)
    result = train(run, run_dir=folder, save_every=1, progress=progress, deadline=deadline)
    task = run.make_task()
    model = task.build_model(run)  # each checkpoint's state loads into it
    for ckpt in sorted(folder.glob("ckpt_*.pt")):  # the engine's state dicts, as the real-checkpoint loader reads them
        model.load_state_dict(torch.load(ckpt, weights_only=True))
        with atomic_path(folder / f"step{int(ckpt.stem[5:])}") as tmp:
            model.save_pretrained(tmp)
        ckpt.unlink()
    losses = pd.DataFrame({"step": range(cfg.steps), "loss": result.arrays["train_loss"].astype(float),
                           "lr": [cfg.lr * lr_factor(run, s) for s in range(cfg.steps)]})
    with atomic_path(folder / "losses.csv") as tmp:
        losses.to_csv(tmp, index=False)
    meta = {"config": dataclasses.asdict(cfg), "key": cfg.key(), "device": result.meta["device"],
            "wall_time_s": result.meta["wall_time_s"], "corpus_tokens": len(task.stream()),
            "parameters": sum(p.numel() for p in model.parameters()),
            "held_out_loss": result.metrics[["step", "loss"]].to_dict("records")}
    (folder / "done.json").write_text(json.dumps(meta, indent=1, default=list))
    return folder
