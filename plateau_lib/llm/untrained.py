"""The collapse chapter's claims measured on models that have learned nothing: the page's miniatures at the
``paper`` preset (Pythia-14m's and OLMo-2's shapes), freshly initialised and never trained, analysed as the page
analyses a checkpoint (greedy continuations of the same ARC-Easy prompts) at each step the claims read. A finding
must fail here (``book.verdicts``)."""
from __future__ import annotations

from plateau_lib.llm import collapse, page
from plateau_lib.llm.corpus import prompts, tokenizer
from plateau_lib.llm.miniature import build_model
from plateau_lib.llm.presets import llm_miniatures


def panel(cfg, n_prompts: int = 100, prompt_seed: int | None = 0) -> page.Panel:
    """The untrained model of miniature ``cfg`` as a page panel: the same weights at step 0, OLMo's steps 150 and
    600 (for OLMo-2) and the last step."""
    model, tok = build_model(cfg), tokenizer(cfg.arch)
    steps = {0, cfg.steps, *((150, 600) if cfg.arch == "olmo2" else ())}
    rows = collapse.analyse_checkpoints({s: (model, tok) for s in steps if s <= cfg.steps},
                                        prompts(n_prompts, cfg.prompt_seed(prompt_seed)), "cpu", progress=False)
    return page.Panel(f"{cfg.arch} seed {cfg.seed}, untrained", "untrained", cfg.arch, rows, {"untrained": True})


def values() -> dict:
    """``{figure: {claim metric: value}}`` of the paper preset's miniatures, untrained."""
    return page.verdict_values([panel(cfg) for cfg in llm_miniatures("paper").values()])
