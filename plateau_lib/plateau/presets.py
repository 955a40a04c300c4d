"""The loss-plateau chapter's configurations (Gopalani et al.): ``paper`` is the paper's config exactly; ``cpu``
the smallest config that still shows the phenomenon on a 2-core laptop. Every field can be overridden.

Each page builds its runs here (``seed_runs``, ``attention_bias_runs``, ``optimal_init_runs``, ``other_task_runs``,
``training_setup_runs``, ``probe_runs``, ``plateau_llc_runs``), and ``page_runs`` lists the runs its pages show by
default: ``make paper`` produces the ``paper``-preset ones.
"""
from __future__ import annotations

import pandas as pd

from plateau_lib.engine.presets import check_preset, preset_of, reserved
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.stages import GP_MIN_POINTS
from plateau_lib.llc.config import SGLDConfig

# The paper's MWS config (tf-loss-plateau ``src/configs/mws.yaml``): 1 layer, 1 head, d_model 256,
# Adam lr 1e-4, batch 256, 400 steps, linear attention.
MWS_PAPER = TrainConfig(task="mws", task_kwargs={"n": 16, "p": 17, "k": 2}, d_model=256, lr=1e-4,
                        batch_size=256, steps=400, eval_every=10, eval_batch=256)

# CPU miniature: width 64 instead of 256 (16x fewer parameters), lr 1e-3 instead of 1e-4, batch 128
# instead of 256, and 600 steps instead of 400 (at this width some seeds jump only after step 400).
# It keeps the task, the architecture and the optimizer.
MWS_CPU = MWS_PAPER.replace(d_model=64, lr=1e-3, batch_size=128, steps=600)

def mws_config(preset: str = "cpu", overrides: dict | None = None, **fields) -> TrainConfig:
    """The MWS training config for ``preset`` with ``fields`` (None values are ignored), then ``overrides``
    (the notebooks' free-form dict of any other TrainConfig field)."""
    base = MWS_PAPER if check_preset(preset) == "paper" else MWS_CPU
    return base.replace(**{k: v for k, v in fields.items() if v is not None}).replace(**(overrides or {}))


SEEDS = [0, 1, 2]


def seed_runs(preset: str, seeds=None, overrides=None, **fields) -> dict:
    """Fig. 2: ``{seed: config}``, seeds 0, 1, 2 by default."""
    reserved(overrides, ("seed",))
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
    reserved(overrides, ("seed", "attn_bias_c", "attn_bias_from"))
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


# Fig. 5: parameter groups copied from the trained reference and frozen (``engine.setup.param_groups``), as the
# authors' train_mws_optimal_init.py copies them (reference tf_loss_plateau.md §4.8): KQ with the embeddings and
# ln_1; the whole attention with the embeddings and ln_1; the MLP with ln_2, lm_head and ln_f; the embeddings with
# lm_head and ln_f.
OPTIMAL_INIT_CONDITIONS = {"baseline": (), "KQ": ("kq", "embed", "ln_attn"), "KQ+OV": ("kq", "ov", "embed", "ln_attn"),
                           "MLP": ("mlp", "ln_mlp", "head", "ln_f"), "embeddings": ("embed", "head", "ln_f")}


def optimal_init_runs(preset: str, seeds=None, reference_seed: int = 0, conditions=None, overrides=None,
                      **fields) -> tuple[TrainConfig, dict]:
    """Fig. 5: the reference config and ``{(condition, seed): config}`` (seeds 1, 2, 3 by default, so the
    parameters that are not copied start from a fresh initialisation)."""
    reserved(overrides, ("seed", "copy_groups"))
    conditions = OPTIMAL_INIT_CONDITIONS if conditions is None else conditions
    if not isinstance(conditions, dict) or not conditions or not all(
            isinstance(g, (list, tuple)) and all(isinstance(x, str) for x in g) for g in conditions.values()):
        raise ValueError(f"parameter 'conditions' must map names to lists of parameter groups, got {conditions!r}")
    base = mws_config(preset, overrides, **fields)
    runs = {(str(name), s): base.replace(seed=s, copy_groups=tuple(groups))  # validates the group names
            for name, groups in conditions.items() for s in ([1, 2, 3] if seeds is None else seeds)}
    return base.replace(seed=reference_seed), runs


def page_runs(preset: str = "paper") -> dict:
    """Every run this chapter's pages show by default for ``preset``, by page: ``{page: {label: config}}``. Fig. 5's
    copied runs also need the reference's weights (the page's entry labelled "reference"). The plateau-LLC page's
    entries are its training runs (the cpu queue's: the long CPU run's three seeds); its λ̂ comes from
    ``python -m plateau_lib plateau-llc``."""
    bias, switch = attention_bias_runs(preset)
    reference, init = optimal_init_runs(preset)
    return {"mws_plateau": seed_runs(preset),
            "mws_attention_bias": {**{("c", *k): v for k, v in bias.items()},
                                   **{("switch", *k): v for k, v in switch.items()}},
            "mws_optimal_init": {"reference": reference, **init},
            "other_tasks": other_task_runs(preset),
            "mws_training_setups": training_setup_runs(preset),
            "mws_probe_and_locations": probe_runs(preset),
            "plateau_llc": plateau_llc_runs("paper" if preset == "paper" else "cpu_long")}


# ---- The loss plateau beyond MWS (Gopalani et al. Figs. 6-42): one section per page, each ending in the
# function that lists the page's runs for ``page_runs`` (the ``make paper`` queue).

# == other tasks (Figs. 6-7, 9-19, 21-22) ==


# The paper's configs (tf-loss-plateau ``src/configs/*.yaml``): MWS's model and optimizer (1 head, width 256, Adam
# 1e-4, batch 256, linear attention); permutation and histogram on the 2-layer model, histogram with grad clip 1.0.
OTHER_TASKS = {  # label: (task, task_kwargs, layers, grad clip, paper steps)
    "prefix sum": ("prefix_sum", {"n": 16, "p": 17}, 1, 0.0, 1000),
    "repeat_1": ("repeat", {"n": 16, "k": 1}, 1, 0.0, 200),
    "repeat_2": ("repeat", {"n": 16, "k": 2}, 1, 0.0, 200),
    "repeat_4": ("repeat", {"n": 16, "k": 4}, 1, 0.0, 200),
    "addition": ("addition", {"n": 4, "reverse": True}, 1, 0.0, 10000),
    "permutation": ("permutation", {"n": 16, "low": 17, "high": 32}, 2, 0.0, 2000),
    "histogram": ("histogram", {"n": 16, "alphabet": 12}, 2, 1.0, 5000),
    "copy": ("copy", {"n": 16}, 1, 0.0, 100),
    "reverse": ("reverse", {"n": 16}, 1, 0.0, 100),
    "concat MWS": ("concat_mws", {"p": 17}, 1, 0.0, 5000),
}
# CPU miniature: MWS_CPU's width 64, lr 1e-3 and batch 128, and these step budgets (measured at this width and
# learning rate: addition, permutation and histogram stay on their plateau through them, and through 3,000 steps
# for addition and histogram, tried; the others jump inside them).
OTHER_TASK_CPU_STEPS = {"prefix sum": 500, "repeat_1": 60, "repeat_2": 100, "repeat_4": 100, "addition": 1000,
                        "permutation": 1000, "histogram": 1000, "copy": 80, "reverse": 120, "concat MWS": 1000}


def other_task_runs(preset: str, tasks=None, seed: int = 0, overrides: dict | None = None) -> dict:
    """``{label: TrainConfig}`` of the other-tasks page's runs for ``preset`` (``tasks``: labels of
    ``OTHER_TASKS``, all by default; ``overrides``: TrainConfig fields for every run). About 100 evaluations
    per run (50 for ``cpu``), plus one after the first step."""
    check_preset(preset)
    reserved(overrides, ("task", "task_kwargs", "seed"))
    labels = list(OTHER_TASKS) if tasks is None else list(tasks)
    unknown = [t for t in labels if t not in OTHER_TASKS]
    if unknown or not labels:
        raise ValueError(f"parameter 'tasks' must list labels from {list(OTHER_TASKS)}, got {labels!r}")
    base = MWS_PAPER if preset == "paper" else MWS_CPU.replace(eval_batch=128)
    evaluations = 100 if preset == "paper" else 50
    runs = {}
    for label in labels:
        task, kwargs, layers, clip, paper_steps = OTHER_TASKS[label]
        steps = paper_steps if preset == "paper" else OTHER_TASK_CPU_STEPS[label]
        runs[label] = base.replace(task=task, task_kwargs=dict(kwargs), n_layer=layers, grad_clip=clip, steps=steps,
                                   eval_every=max(1, steps // evaluations), eval_steps=(1,), seed=seed).replace(
                                       **(overrides or {}))
    return runs


# The fields every run of the other-tasks page shares (``config_table``'s ``fields``); each task's own budget is in
# ``task_budgets``.
OTHER_TASKS_SHARED_FIELDS = ["n_head", "d_model", "softmax", "optimizer", "lr", "batch_size", "eval_batch", "seed"]


def task_budgets(configs: dict, paper_configs: dict) -> pd.DataFrame:
    """Each task's layers, grad clip, steps and evaluation interval in ``configs`` next to ``paper_configs`` (the
    paper preset's runs of the same labels): the other-tasks page's per-task settings."""
    from plateau_lib.book.pages import setting_text
    rows = {}
    for label, cfg in configs.items():
        paper = paper_configs[label]
        rows[label] = {("this run", "layers"): cfg.n_layer, ("this run", "grad clip"): setting_text(cfg.grad_clip),
                       ("this run", "steps"): cfg.steps, ("this run", "eval every"): cfg.eval_every,
                       ("paper", "layers"): paper.n_layer, ("paper", "grad clip"): setting_text(paper.grad_clip),
                       ("paper", "steps"): paper.steps, ("paper", "eval every"): paper.eval_every}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("task")


# == MWS training setups (Figs. 26-40) ==
# Figs. 26-29 vary one hyperparameter of the MWS config at a time. Our copy of the paper states no values, so the
# grids are this book's choice: half and double the width, the learning rate and the batch, a shorter sequence
# (n 8, 12; the inputs are 1..n) and a larger modulus (p 23, 31). Figs. 30-35 follow the paper's code: softmax
# attention (2000 steps), plain SGD (no momentum), Muon (100k steps) and a linear warm-up over the first half then a
# cosine decay to 0. Figs. 36-40 ("other optimisation setups", unspecified) are our choice: Adam with (coupled, L2)
# weight decay, SGD with momentum 0.9, and gradient clipping at norm 1. SGD's learning rate is not in the paper's
# code either (its script reads mws.yaml's 1e-4, far too small for plain SGD): ours is 0.3 (0.03 with momentum
# 0.9, the same effective step), chosen on the miniature, where 1.0, and 0.3 with momentum 0.9, oscillate.
# Each setup lists exactly the fields it changes; ``family`` groups the page.
TRAINING_SETUPS = {
    "paper": {
        "baseline": ("baseline", {}),
        "width 128": ("width", {"d_model": 128}),
        "width 512": ("width", {"d_model": 512}),
        "lr 5e-5": ("learning rate", {"lr": 5e-5, "steps": 800}),
        "lr 2e-4": ("learning rate", {"lr": 2e-4}),
        "batch 128": ("batch", {"batch_size": 128}),
        "batch 512": ("batch", {"batch_size": 512}),
        "n 8": ("sequence length n", {"task_kwargs": {"n": 8, "p": 17, "k": 2}}),
        "n 12": ("sequence length n", {"task_kwargs": {"n": 12, "p": 17, "k": 2}}),
        "p 23": ("modulus p", {"task_kwargs": {"n": 16, "p": 23, "k": 2}}),
        "p 31": ("modulus p", {"task_kwargs": {"n": 16, "p": 31, "k": 2}}),
        "softmax": ("softmax attention", {"softmax": True, "steps": 2000, "eval_every": 25}),
        "SGD": ("optimizer", {"optimizer": "sgd", "lr": 0.3, "steps": 4000, "eval_every": 50}),
        "Muon": ("optimizer", {"optimizer": "muon", "steps": 100_000, "eval_every": 500}),  # muon_lr 0.02
        "warm-up + cosine": ("schedule", {"schedule": "warmup_cosine", "warmup_steps": 200}),
        "Adam, weight decay 1e-3": ("other", {"weight_decay": 1e-3}),
        "SGD, momentum 0.9": ("other", {"optimizer": "sgd", "lr": 0.03, "momentum": 0.9, "steps": 4000,
                                        "eval_every": 50}),
        "grad clip 1": ("other", {"grad_clip": 1.0}),
    },
    "cpu": {
        "baseline": ("baseline", {}),
        "width 32": ("width", {"d_model": 32}),
        "width 128": ("width", {"d_model": 128}),
        "lr 5e-4": ("learning rate", {"lr": 5e-4, "steps": 1000}),
        "lr 2e-3": ("learning rate", {"lr": 2e-3}),
        "batch 64": ("batch", {"batch_size": 64}),
        "batch 256": ("batch", {"batch_size": 256}),
        "n 8": ("sequence length n", {"task_kwargs": {"n": 8, "p": 17, "k": 2}}),
        "n 12": ("sequence length n", {"task_kwargs": {"n": 12, "p": 17, "k": 2}}),
        "p 23": ("modulus p", {"task_kwargs": {"n": 16, "p": 23, "k": 2}}),
        "p 31": ("modulus p", {"task_kwargs": {"n": 16, "p": 31, "k": 2}}),
        "softmax": ("softmax attention", {"softmax": True, "steps": 3000, "eval_every": 50}),  # 5x, as 2000 / 400
        "SGD": ("optimizer", {"optimizer": "sgd", "lr": 0.3, "steps": 1500, "eval_every": 25}),
        "Muon": ("optimizer", {"optimizer": "muon"}),  # Muon lr 0.02 (the default) on the block matrices
        "warm-up + cosine": ("schedule", {"schedule": "warmup_cosine", "warmup_steps": 300}),
        "Adam, weight decay 1e-3": ("other", {"weight_decay": 1e-3}),
        "SGD, momentum 0.9": ("other", {"optimizer": "sgd", "lr": 0.03, "momentum": 0.9, "steps": 1500,
                                        "eval_every": 25}),
        "grad clip 1": ("other", {"grad_clip": 1.0}),
    },
}
SETUP_SEEDS = {"cpu": [0], "paper": SEEDS}  # the miniature: one seed per setup (three for the baseline), for time


def setup_family(preset: str) -> dict:
    """``{setup name: family}`` of ``preset``'s training setups, in page order."""
    return {name: family for name, (family, _) in TRAINING_SETUPS[check_preset(preset)].items()}


def training_setup_runs(preset: str, setups=None, seeds=None, overrides=None) -> dict:
    """Figs. 26-40: ``{(setup, seed): TrainConfig}``, each setup the preset's MWS config with its listed changes
    (``overrides`` apply to the base first). Seeds: ``seeds``, or by default three for the baseline and
    ``SETUP_SEEDS[preset]`` for the rest."""
    reserved(overrides, ("seed",))
    table = TRAINING_SETUPS[check_preset(preset)]
    names = list(table) if setups is None else [setups] if isinstance(setups, str) else list(setups)
    unknown = [n for n in names if n not in table]
    if unknown or not names:
        raise ValueError(f"parameter 'setups' must name some of {list(table)}, got {unknown or names!r}")
    base = mws_config(preset, overrides)
    runs = {}
    for name in names:
        cfg = base.replace(**table[name][1])
        default = SEEDS if name == "baseline" else SETUP_SEEDS[preset]
        runs.update({(name, s): cfg.replace(seed=s) for s in (default if seeds is None else seeds)})
    return runs


# == MWS probe and collapse locations (Figs. 20, 41-42) ==


# The paper's probe run (``mws_probe.yaml``): the MWS config, probed every 10 steps on 2048 held-out sequences
# with MLPClassifier(hidden 256, max_iter 2000); split here 1024 / 1024 by whole sequences. The cpu miniature
# (MWS_CPU) keeps a checkpoint every 25 steps and probes 256 sequences (128 / 128, so 2,048 training rows: more
# than the 1,024 token rows the paper's probe actually trained on) with at most 100 epochs (each fit ~6 s on a core).
PROBE_CHECKPOINT_EVERY = {"paper": 10, "cpu": 25}
PROBE = {"paper": dict(hidden=256, max_iter=2000, train_seqs=1024, test_seqs=1024, data_seed=2_000_003),
         "cpu": dict(hidden=256, max_iter=100, train_seqs=128, test_seqs=128, data_seed=2_000_003)}


# The paper column made on a CPU: the paper's runs, checkpoints, probe network and probe sequences, with the probe's
# epochs capped at 100 as in the cpu preset. The paper's cap of 2,000 would cost about 12 CPU-hours over the 3 x 41
# fits; the collapse locations (Figs. 41-42) do not depend on the probe at all.
PROBE_PAPER_ON_CPU = {**PROBE["paper"], "max_iter": 100}

PROBE_FIELDS = ("hidden", "max_iter", "train_seqs", "test_seqs", "data_seed")


def check_settings(settings: dict) -> dict:
    """``settings`` (the probe's ``PROBE_FIELDS``), validated: each a positive integer (``data_seed`` >= 0; it
    seeds the probe sequences and the probe's initialisation)."""
    unknown = sorted(set(settings) - set(PROBE_FIELDS))
    missing = sorted(set(PROBE_FIELDS) - set(settings))
    if unknown or missing:
        raise ValueError(f"probe settings must be exactly {list(PROBE_FIELDS)}; unknown {unknown}, missing {missing}")
    for name in PROBE_FIELDS:
        value, low = settings[name], 0 if name == "data_seed" else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"parameter {name!r} must be an integer >= {low}, got {value!r}")
    return settings


def probe_runs(preset: str, seeds=None, overrides=None, checkpoint_every=None, **fields) -> dict:
    """``{seed: TrainConfig}`` of the probe-and-locations page: the MWS runs of ``preset`` with a checkpoint
    every ``checkpoint_every`` steps (None: ``PROBE_CHECKPOINT_EVERY[preset]``), seeds 0, 1, 2 by default."""
    reserved(overrides, ("seed", "checkpoint_steps"))
    base = mws_config(preset, overrides, **fields)
    every = PROBE_CHECKPOINT_EVERY[preset] if checkpoint_every is None else checkpoint_every
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise ValueError(f"parameter 'checkpoint_every' must be a positive integer, got {every!r}")
    base = base.replace(checkpoint_steps=tuple(range(0, base.steps + 1, every)))
    return {s: base.replace(seed=s) for s in (SEEDS if seeds is None else seeds)}


def probe_settings(preset: str, **fields) -> dict:
    """The probe's settings for ``preset`` with ``fields`` (None values are ignored), validated."""
    return check_settings({**PROBE[check_preset(preset)], **{k: v for k, v in fields.items() if v is not None}})


# == λ̂ across the MWS plateau (no paper figure) ==
# λ̂ at checkpoints of the MWS run, seeds 0-2, denser across the plateau. ``cpu``: the live part, one seed of the
# miniature stopped at step 350 (seed 0 jumps near step 220; the first 350 steps are those of the 600-step run),
# 9 checkpoints, 2 chains x 40 draws at m = 64. ``cpu_long``: the 600-step miniature, 3 seeds x 16 checkpoints,
# 3 chains x 80 draws, ε and nβ calibrated on it (``llc.plateau``), committed. ``paper``: MWS_PAPER at every 10th
# step, m = 1024, the calibrated ε and nβ (the CLI re-checks them on the paper model), for the GPU.
PLATEAU_LLC_CHECKPOINTS = {
    "cpu": (0, 40, 80, 120, 160, 200, 240, 280, 350),
    "cpu_long": (0, 25, 50, 75, 100, 125, 150, 175, 200, 250, 300, 350, 400, 450, 500, 600),
    "paper": tuple(range(0, 401, 10))}
PLATEAU_LLC_STEPS = {"cpu": 350, "cpu_long": 600, "paper": 400}
PLATEAU_LLC_SEEDS = {"cpu": [0], "cpu_long": SEEDS, "paper": SEEDS}
PLATEAU_LLC_SGLD = {
    "cpu": SGLDConfig(epsilon=3e-3, nbeta=100.0, gamma=100.0, batch_size=64, num_chains=2, num_draws=40,
                      num_burnin_steps=10, n_data=1024, seed=0),
    "cpu_long": SGLDConfig(epsilon=3e-3, nbeta=100.0, gamma=100.0, batch_size=64, num_chains=3, num_draws=80,
                           num_burnin_steps=20, n_data=2048, seed=0),
    "paper": SGLDConfig(epsilon=3e-3, nbeta=100.0, gamma=100.0, batch_size=1024, num_chains=8, num_draws=200,
                        num_burnin_steps=50, n_data=2**14, seed=0)}
# The calibration grid, at the checkpoint nearest the middle of seed 0's plateau and at the end of its run.
PLATEAU_LLC_CALIBRATION = dict(epsilons=[3e-4, 1e-3, 3e-3], nbetas=[25.0, 100.0], gammas=[100.0])


def plateau_llc_runs(preset: str, seeds=None, checkpoints=None) -> dict:
    """``{seed: TrainConfig}`` of the plateau-LLC page for ``preset`` ("cpu", "cpu_long" or "paper"), each with
    its checkpoint steps (``checkpoints`` overrides them; steps outside the run raise a ValueError)."""
    base = MWS_PAPER if preset_of(preset, PLATEAU_LLC_STEPS) == "paper" else MWS_CPU
    steps = tuple(PLATEAU_LLC_CHECKPOINTS[preset] if checkpoints is None else checkpoints)
    last = PLATEAU_LLC_STEPS[preset]
    outside = [s for s in steps if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s <= last]
    if len(set(steps)) < GP_MIN_POINTS or outside:  # the stage detection fits a GP to λ̂ at these steps
        raise ValueError(f"parameter 'checkpoints' must list at least {GP_MIN_POINTS} distinct steps in [0, "
                         f"{PLATEAU_LLC_STEPS[preset]}], got {list(steps)}")
    cfg = base.replace(steps=PLATEAU_LLC_STEPS[preset], checkpoint_steps=tuple(sorted(set(steps))))
    return {s: cfg.replace(seed=s) for s in (PLATEAU_LLC_SEEDS[preset] if seeds is None else seeds)}


def plateau_llc(preset: str, seeds=None, checkpoints=None, **sgld_fields) -> tuple[dict, SGLDConfig]:
    """The plateau-LLC page's runs (``plateau_llc_runs``) and SGLD settings for ``preset``, with ``sgld_fields``
    changed (``SGLDConfig.replace``: None ignored; unknown names and bad values raise a ValueError)."""
    return plateau_llc_runs(preset, seeds, checkpoints), PLATEAU_LLC_SGLD[preset].replace(**sgld_fields)


CONFIG_FIELDS = ["task_kwargs", "n_layer", "n_head", "d_model", "softmax", "optimizer", "lr", "steps", "batch_size",
                 "eval_every", "eval_batch"]


def config_table(cfg, paper=MWS_PAPER, fields=CONFIG_FIELDS):
    """The ``fields`` of ``cfg`` next to the paper's config (a notebook's 'what this run changed'; the page's
    Markdown says why)."""
    from plateau_lib.book.pages import setting_text  # lazy: the book's page helpers sit above the chapters' presets
    ours, ref = cfg.to_dict(), paper.to_dict()
    return pd.DataFrame({"this run": {k: setting_text(ours[k]) for k in fields},
                         "paper": {k: setting_text(ref[k]) for k in fields}})
