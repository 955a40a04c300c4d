"""The offline miniature: Pythia-14m's architecture and initialisation (or OLMo-2's) trained from scratch here on
the offline corpus, checkpoints saved with ``save_pretrained`` at Pythia's log-spaced steps so the real-path
loader reads them unchanged."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from plateau_lib.engine.utils import atomic_path, resolve_device, seed_everything, torch_save
from plateau_lib.llm.checkpoints import OLMO_REVISIONS, PYTHIA_STEPS, load_model
from plateau_lib.llm.corpus import LLM_VERSION, LOCAL, TOKENIZER_FILES, TOKENIZER_SIZES, check_corpus

from plateau_lib.llm.corpus import corpus_tokens, tokenizer

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

    def replace(self, **fields) -> "MiniatureConfig":
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ValueError(f"unknown MiniatureConfig field(s) {unknown}; fields: "
                             f"{[f.name for f in dataclasses.fields(self)]}")
        return dataclasses.replace(self, **fields)

    def key(self) -> str:
        """16 hex digits naming this run's checkpoints and results (the device is provenance, not key)."""
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k != "device"}
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


def build_model(cfg: MiniatureConfig):
    """A freshly initialised model of ``cfg``: GPT-NeoX with Pythia's init (``small_init`` N(0, sqrt(2/(5d)))
    everywhere, ``wang_init`` N(0, 2/(L sqrt d)) for each block's two output projections; HF's own init is
    N(0, 0.02)), or OLMo-2 (RMSNorm, QK-norm) with HF's init."""
    seed_everything(cfg.seed)
    if cfg.arch == "pythia":
        from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
        config = GPTNeoXConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layer,
                               num_attention_heads=cfg.n_head, intermediate_size=cfg.d_ff, hidden_act="gelu",
                               rotary_pct=0.25, rotary_emb_base=10000, max_position_embeddings=2048,
                               use_parallel_residual=True, tie_word_embeddings=False, layer_norm_eps=1e-5,
                               bos_token_id=0, eos_token_id=0)
        model = GPTNeoXForCausalLM(config)
        small, wang = math.sqrt(2 / (5 * cfg.d_model)), 2 / (cfg.n_layer * math.sqrt(cfg.d_model))
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() == 1:
                    continue  # biases stay 0, LayerNorm weights 1
                std = wang if name.endswith(("attention.dense.weight", "dense_4h_to_h.weight")) else small
                p.normal_(0.0, std)
        for module in model.modules():
            if hasattr(module, "bias") and isinstance(module.bias, torch.nn.Parameter):
                torch.nn.init.zeros_(module.bias)
        return model.float()
    from transformers import Olmo2Config, Olmo2ForCausalLM
    tok = tokenizer("olmo2")
    config = Olmo2Config(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layer,
                         num_attention_heads=cfg.n_head, intermediate_size=cfg.d_ff, max_position_embeddings=4096,
                         rope_theta=500_000, rms_norm_eps=1e-6, tie_word_embeddings=False,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    return Olmo2ForCausalLM(config).float()


def learning_rate(cfg: MiniatureConfig, step: int) -> float:
    """GPT-NeoX's schedule: linear warm-up from 0 to ``lr`` over ``warmup_steps``, then cosine to ``min_lr`` at
    ``schedule_steps``."""
    if step < cfg.warmup_steps:
        return cfg.lr * step / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.schedule_steps - cfg.warmup_steps))
    return cfg.min_lr + (cfg.lr - cfg.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


def sample_batch(stream: torch.Tensor, cfg: MiniatureConfig, gen: torch.Generator, device) -> torch.Tensor:
    """``batch_size`` random windows of ``context + 1`` tokens from the token stream (inputs and next tokens)."""
    starts = torch.randint(0, len(stream) - cfg.context - 1, (cfg.batch_size,), generator=gen)
    return stream[starts[:, None] + torch.arange(cfg.context + 1)].to(device)


def next_token_loss(model, batch: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of every next token of (B, T + 1) windows."""
    logits = model(input_ids=batch[:, :-1], use_cache=False).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), batch[:, 1:].reshape(-1))


def train_step(model, opt, batch: torch.Tensor, cfg: MiniatureConfig, lr: float) -> torch.Tensor:
    """One step: next-token cross-entropy, backward, gradient clipping at ``grad_clip``, AdamW at ``lr``. Returns
    the loss as a detached tensor on the device (read at checkpoints, so a GPU never waits for it)."""
    for group in opt.param_groups:
        group["lr"] = lr
    loss = next_token_loss(model, batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    return loss.detach()


def optimizer(model, cfg: MiniatureConfig) -> torch.optim.AdamW:
    """GPT-NeoX's AdamW: betas (0.9, 0.95), eps 1e-8, weight decay on the matrices only."""
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=0.0, betas=(0.9, 0.95), eps=1e-8)


def run_dir(cfg: MiniatureConfig) -> Path:
    """Where a miniature's checkpoints live (``step{k}/``, Hugging Face folders; never committed)."""
    return LOCAL / f"miniature-{cfg.key()}"


def train_miniature(cfg: MiniatureConfig, progress: bool = True, deadline: float | None = None) -> Path:
    """Train ``cfg`` and save ``step{k}/`` (``save_pretrained``, safetensors) at each checkpoint step; returns
    the run folder. Resumes from the last saved step (weights, optimiser, data and RNG state in ``resume.pt``);
    ``deadline`` (a ``time.time()``) stops cleanly after the next checkpoint past it. ``losses.csv`` keeps the
    training loss of every step."""
    from tqdm.auto import tqdm
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # one bar (ours), not one per save
    folder = run_dir(cfg)
    if (folder / "done.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    device = resolve_device(cfg.device)
    stream = torch.from_numpy(corpus_tokens(cfg.arch, cfg.corpus).astype(np.int64))
    saved = sorted(int(p.name[4:]) for p in folder.glob("step*") if (p / "config.json").exists())
    resume = folder / "resume.pt"
    if saved and resume.exists():
        state = torch.load(resume, weights_only=True)
        start = state["step"]
        model = load_model(folder / f"step{start}")[0].to(device)
        losses = pd.read_csv(folder / "losses.csv").query("step < @start").to_dict("records")
    else:
        state, start, losses = None, 0, []
        model = build_model(cfg).to(device)
    opt = optimizer(model, cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        gen.set_state(state["generator"])
    checkpoints = cfg.checkpoint_steps()
    started = time.time()
    wall = 0.0 if state is None else state["wall_time_s"]

    pending = []  # (step, loss on the device, lr) since the last checkpoint, read there in one sync

    def save(step):
        if pending:
            values = torch.stack([loss for _, loss, _ in pending]).tolist()
            losses.extend({"step": s, "loss": v, "lr": lr} for (s, _, lr), v in zip(pending, values))
            bar.set_postfix(loss=f"{values[-1]:.3f}")
            pending.clear()
        with atomic_path(folder / f"step{step}") as tmp:
            model.save_pretrained(tmp)
        torch_save({"step": step, "optimizer": opt.state_dict(), "generator": gen.get_state(),
                    "wall_time_s": wall + time.time() - started}, resume)
        with atomic_path(folder / "losses.csv") as tmp:
            pd.DataFrame(losses, columns=["step", "loss", "lr"]).to_csv(tmp, index=False)

    if start == 0 and 0 in checkpoints and not saved:
        save(0)
    model.train()
    bar = tqdm(range(start, cfg.steps), desc=f"miniature {cfg.key()[:8]}", disable=not progress, initial=start,
               total=cfg.steps)
    for step in bar:
        lr = learning_rate(cfg, step)
        pending.append((step, train_step(model, opt, sample_batch(stream, cfg, gen, device), cfg, lr), lr))
        if step + 1 in checkpoints:
            save(step + 1)
            if deadline is not None and time.time() > deadline and step + 1 < cfg.steps:
                raise TimeoutError(f"stopped at step {step + 1} of {cfg.steps} at the deadline; call again to resume")
    meta = {"config": dataclasses.asdict(cfg), "key": cfg.key(), "device": str(device),
            "wall_time_s": round(wall + time.time() - started, 1), "corpus_tokens": int(len(stream)),
            "parameters": sum(p.numel() for p in model.parameters())}
    (folder / "done.json").write_text(json.dumps(meta, indent=1, default=list))
    resume.unlink(missing_ok=True)
    return folder
