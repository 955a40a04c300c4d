"""What the paper analysed (Pythia's sizes and steps, OLMo-2 7B's two stage-1 revisions) and the checkpoints:
real ones read from a local Hugging Face cache or a plain folder per checkpoint (never downloaded), and the
miniature's, saved in the same format."""
from __future__ import annotations

import os
from pathlib import Path

import torch

from plateau_lib.llm.corpus import tokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # this module never downloads; set before transformers is imported


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
