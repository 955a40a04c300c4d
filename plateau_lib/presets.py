"""Named presets: ``paper`` is the paper's config exactly; ``cpu`` is the smallest config that still
shows the phenomenon on a 2-core laptop. Every field can be overridden."""
from __future__ import annotations

from .train import TrainConfig

PRESETS = ("cpu", "paper")

# The paper's MWS config (tf-loss-plateau ``src/configs/mws.yaml``): 1 layer, 1 head, d_model 256,
# Adam lr 1e-4, batch 256, 400 steps, linear attention.
MWS_PAPER = TrainConfig(task="mws", task_kwargs={"n": 16, "p": 17, "k": 2}, d_model=256, lr=1e-4,
                        batch_size=256, steps=400, eval_every=10, eval_batch=256)

# CPU miniature: width 64 instead of 256 (16x fewer parameters), lr 1e-3 instead of 1e-4, batch 128
# instead of 256, and 600 steps instead of 400 (at this width some seeds jump only after step 400).
# It keeps the task, the architecture and the optimizer.
MWS_CPU = MWS_PAPER.replace(d_model=64, lr=1e-3, batch_size=128, steps=600)

WHAT_CPU_CHANGES = ("d_model 64 (paper 256), Adam lr 1e-3 (paper 1e-4), batch 128 (paper 256), 600 steps "
                    "(paper 400: at this width some seeds jump only after step 400); same task (n=16, p=17, k=2), "
                    "same 1-layer 1-head linear-attention model, same optimizer.")


def check_preset(preset: str) -> str:
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
    return preset


def mws_config(preset: str = "cpu", **overrides) -> TrainConfig:
    """The MWS training config for ``preset`` with ``overrides`` (None values are ignored)."""
    base = MWS_PAPER if check_preset(preset) == "paper" else MWS_CPU
    return base.replace(**{k: v for k, v in overrides.items() if v is not None})


CONFIG_FIELDS = ["task_kwargs", "n_layer", "n_head", "d_model", "softmax", "optimizer", "lr", "steps", "batch_size",
                 "eval_every", "eval_batch"]


def config_table(cfg, paper=MWS_PAPER):
    """The main fields of ``cfg`` next to the paper's config (a notebook's 'what this run changed')."""
    import pandas as pd
    ours, ref = cfg.to_dict(), paper.to_dict()
    return pd.DataFrame({"this run": {k: str(ours[k]) for k in CONFIG_FIELDS},
                         "paper": {k: str(ref[k]) for k in CONFIG_FIELDS}})


def preset_note(preset: str) -> str:
    """A markdown sentence saying what the preset is and whose numbers follow."""
    if check_preset(preset) == "cpu":
        return (f"**Preset `cpu`.** The `cpu` miniature changes: {WHAT_CPU_CHANGES} "
                "Every number below is a `cpu` number, not the paper's.")
    return "**Preset `paper`.** The paper's configuration (numbers below are this run's, measured with it)."
