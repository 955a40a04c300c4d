"""Next-token prediction on the offline corpus as a task of the one training loop (``engine.train``).

``TrainConfig(task="next_token", task_kwargs={"arch": "pythia", ...}, n_layer=6, n_head=4, d_model=128)`` is
Pythia-14m's architecture (or OLMo-2's) as a Hugging Face model. A batch is ``batch`` random windows of
``context + 1`` tokens of the token stream; the loss is the mean cross-entropy of every next token. The
evaluation reports that loss on the run's fixed held-out windows (drawn from the same stream).
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from plateau_lib.llm.corpus import TOKENIZER_FILES, TOKENIZER_SIZES, check_corpus, corpus_tokens, tokenizer


def hf_model(arch: str, n_layer: int, d_model: int, n_head: int, d_ff: int, vocab_size: int):
    """A freshly initialised model (seed first): GPT-NeoX with Pythia's init (``small_init`` N(0, sqrt(2/(5d)))
    everywhere, ``wang_init`` N(0, 2/(L sqrt d)) for each block's two output projections; HF's own init is
    N(0, 0.02)), or OLMo-2 (RMSNorm, QK-norm) with HF's init."""
    if arch == "pythia":
        from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
        config = GPTNeoXConfig(vocab_size=vocab_size, hidden_size=d_model, num_hidden_layers=n_layer,
                               num_attention_heads=n_head, intermediate_size=d_ff, hidden_act="gelu",
                               rotary_pct=0.25, rotary_emb_base=10000, max_position_embeddings=2048,
                               use_parallel_residual=True, tie_word_embeddings=False, layer_norm_eps=1e-5,
                               bos_token_id=0, eos_token_id=0)
        model = GPTNeoXForCausalLM(config)
        small, wang = math.sqrt(2 / (5 * d_model)), 2 / (n_layer * math.sqrt(d_model))
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
    config = Olmo2Config(vocab_size=vocab_size, hidden_size=d_model, num_hidden_layers=n_layer,
                         num_attention_heads=n_head, intermediate_size=d_ff, max_position_embeddings=4096,
                         rope_theta=500_000, rms_norm_eps=1e-6, tie_word_embeddings=False,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    return Olmo2ForCausalLM(config).float()


def next_token_loss(model, batch: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of every next token of (B, T + 1) windows."""
    logits = model(input_ids=batch[:, :-1], use_cache=False).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), batch[:, 1:].reshape(-1))


class NextToken:
    """Windows of the offline corpus (``corpus``, tokenized for ``arch``); the model's width, depth and heads come
    from the TrainConfig, ``d_ff`` and ``vocab_size`` from here. The token stream is read on first use."""

    name = "next_token"
    omega_is_fixed = False  # no attention-biasing intervention here
    samples_on_cpu = True   # windows drawn by a CPU generator (as the miniature always was): the same batches on any device

    def __init__(self, arch="pythia", d_ff=512, vocab_size=50304, context=128, corpus=("boolq", "hellaswag")):
        if arch not in TOKENIZER_FILES:
            raise ValueError(f"task parameter 'arch' must be one of {list(TOKENIZER_FILES)}, got {arch!r}")
        for name, value in (("d_ff", d_ff), ("vocab_size", vocab_size), ("context", context)):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
                raise ValueError(f"task parameter {name!r} must be a positive integer, got {value!r}")
        if vocab_size < TOKENIZER_SIZES[arch]:
            raise ValueError(f"task parameter 'vocab_size' must cover the {arch} tokenizer ({TOKENIZER_SIZES[arch]} "
                             f"ids), got {vocab_size}")
        check_corpus(corpus)
        self.arch, self.d_ff, self.vocab_size, self.context = arch, int(d_ff), int(vocab_size), int(context)
        self.corpus = tuple(corpus)
        self._stream = None  # the token stream, read on first use

    def stream(self) -> torch.Tensor:
        """The corpus as one int64 token stream (on the CPU)."""
        if self._stream is None:
            self._stream = torch.from_numpy(corpus_tokens(self.arch, self.corpus).astype(np.int64))
        return self._stream

    def sample(self, batch: int, generator: torch.Generator, device=None) -> torch.Tensor:
        """``batch`` random windows of ``context + 1`` tokens (inputs and next tokens), drawn by the CPU
        ``generator`` and moved to ``device``."""
        if generator.device.type != "cpu":
            raise ValueError(f"next_token draws its windows with a CPU generator, got one on {generator.device}")
        stream = self.stream()
        starts = torch.randint(0, len(stream) - self.context - 1, (batch,), generator=generator)
        return stream[starts[:, None] + torch.arange(self.context + 1)].to("cpu" if device is None else device)

    def model_config(self, cfg) -> tuple:
        return (self.arch, cfg.n_layer, cfg.d_model, cfg.n_head, self.d_ff, self.vocab_size)

    def build_model(self, cfg):
        return hf_model(*self.model_config(cfg))

    def attention_bias(self, c: float, device):
        return None

    def loss(self, model, batch, attn_bias=None) -> torch.Tensor:
        return next_token_loss(model, batch)

    def evaluate(self, model, batch, attn_bias=None) -> dict:
        """The next-token loss on the held-out windows."""
        with torch.no_grad():
            return {"loss": next_token_loss(model, batch)}

    def tables(self, evals: list, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
        """``evals`` [(step, host dict)] -> (held-out loss by step, no per-position table, the evaluated steps)."""
        metrics = pd.DataFrame([{"step": s, "seed": seed, "loss": float(out["loss"])} for s, out in evals])
        return metrics, pd.DataFrame(columns=["step", "seed"]), {"step": np.array([s for s, _ in evals])}
