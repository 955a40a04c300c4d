"""The language-model chapter's steps for the paper queue (``plateau_lib.paper_queue``) and the ``collapse``
command: each Pythia/OLMo-2 miniature trained (``engine.train``) and its collapse measured at every checkpoint.
A miniature's checkpoints are too large to carry between commands, so it must finish within one; one stopped at a
deadline resumes only on the same machine."""
from __future__ import annotations

from functools import partial

from plateau_lib.engine.analysis import Analysis
from plateau_lib.llm import collapse, presets
from plateau_lib.llm.miniature import MiniatureConfig


def _collapse(cfg: MiniatureConfig, n_prompts: int, device: str, stack: int, deadline: float | None) -> None:
    collapse.miniature_collapse(cfg.replace(device=device), n_prompts, cfg.prompt_seed(0), progress=False,
                                deadline=deadline)


def miniature(cfg: MiniatureConfig, n_prompts: int = 100) -> Analysis:
    """The miniature ``cfg`` trained, then its collapse and generations on ``n_prompts`` prompts (the page's)."""
    return Analysis("llm_collapse", f"{cfg.arch} miniature, seed {cfg.seed} ({cfg.steps} steps of {cfg.batch_size} "
                    f"x {cfg.context} tokens)", (), (collapse.miniature_table(cfg, n_prompts, cfg.prompt_seed(0)),),
                    partial(_collapse, cfg, n_prompts))


def analyses(preset: str = "paper") -> list[Analysis]:
    """The collapse page's miniatures for ``preset``."""
    return [miniature(cfg) for cfg in presets.llm_miniatures(preset).values()]
