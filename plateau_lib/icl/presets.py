"""The in-context linear regression chapter's configurations (Hoogland et al.; Raventós et al.; Carroll et al.):
``paper`` is the paper's config exactly, ``cpu_long`` the committed long CPU run, ``cpu`` the live miniature.
Every field can be overridden; ``page_runs`` lists the runs the chapter's pages show by default.
"""
from __future__ import annotations

import math
import numbers

from plateau_lib.engine.presets import log_linear_steps, preset_of
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.llc.config import SGLDConfig

# In-context linear regression stages (Hoogland et al., reference icl_regression.md §2.2, §5.1): the L2H4
# model (51,717 parameters), D = 4, K = 8, sigma^2 = 0.125, M = infinity, Adam with the one-cycle triangle
# to 3e-3, batch 256, 500k steps, model seed 1, evaluation on 1024 fixed sequences at every checkpoint.
ICL_TASK = {"D": 4, "K": 8, "noise_var": 0.125}
ICL_CHECKPOINTS = {"paper": (100, 100), "cpu_long": (16, 12), "cpu": (6, 4)}  # (log-spaced, linear-spaced)
ICL_PAPER = TrainConfig(task="icl_regression", task_kwargs=ICL_TASK, n_layer=2, n_head=4, d_model=64, lr=3e-3,
                        schedule="one_cycle", steps=500_000, batch_size=256, eval_every=5_000, eval_batch=1024, seed=1,
                        checkpoint_steps=log_linear_steps(500_000, *ICL_CHECKPOINTS["paper"]),
                        eval_steps=log_linear_steps(500_000, *ICL_CHECKPOINTS["paper"]))
ICL_PAPER_SEEDS = (0, 1, 2, 3, 4)  # the paper's five training seeds (its Fig. 1(b) draws all five)
# The long CPU run: the same model, data and schedule shape over 20k steps (the triangle peaks at 10k),
# 16 log + 12 linear checkpoints; run in the background (python -m plateau_lib stages) and committed.
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
ICL_LLC_PAPER = SGLDConfig(epsilon=3e-4, gamma=20 / 3, nbeta=200 / 3, batch_size=1024, num_chains=10, num_draws=5000,
                           num_burnin_steps=0, n_data=2**20, seed=0)
ICL_LLC = {"paper": ICL_LLC_PAPER,
           "cpu_long": ICL_LLC_PAPER.replace(batch_size=256, num_chains=4, num_draws=200, n_data=2**14),
           "cpu": ICL_LLC_PAPER.replace(batch_size=128, num_chains=3, num_draws=60, n_data=2**12)}
# λ̂ along the paper run made on a CPU (plateau_lib.icl.long_run): the paper's epsilon, gamma, nbeta and m, a reduced
# budget (4 chains x 800 draws after 200 burn-in steps, instead of 10 x 5,000) from 2^18 fixed sequences, at about
# 40 of the 190 checkpoints; checked against chains 4x longer at the paper's five points and at the rows whose chains
# disagree, the longer chains' λ̂ shown where the check fails (long_run.checked_rows; the page's table). Burn-in keeps
# the paper text's ratio (it discards 1,000 of 5,000). Smaller budgets failed the check at step 984, where the chains
# still rise slowly from w* (budget_check_earlier.csv): 400 draws, no burn-in: 14.5%; 400 draws after 100: 7.6%;
# a 1/n fit of those two predicts about 4% at 800. About 9 min a checkpoint on one core.
ICL_LLC_REDUCED = ICL_LLC_PAPER.replace(num_chains=4, num_draws=800, num_burnin_steps=200, n_data=2**18)


def icl_stages(preset: str, overrides: dict | None = None, **llc_fields) -> tuple[TrainConfig, SGLDConfig]:
    """The stages page's training config and SGLD settings for ``preset`` ("paper", "cpu" or "cpu_long"),
    with ``overrides`` of TrainConfig fields and ``llc_fields`` of the SGLD settings (None ignored)."""
    return ICL_STAGES[preset_of(preset, ICL_STAGES)].replace(**(overrides or {})), ICL_LLC[preset].replace(**llc_fields)


# Task diversity and the transient ridge (Carroll et al.; Raventós et al.; reference icl_regression.md §4.1,
# §4.3, §7.4). ``paper``: Carroll's data (D = 8, K = 16, sigma^2 = 0.125, nested task sets) and a 2-layer
# model of 2,641,417 parameters (their "2.65 million"; width 256 and MLP 2048 are the reference's guess
# of the unpublished shape), M from 1 to 1024 and infinity. Carroll's optimizer, schedule, batch, steps,
# heads and residual are unpublished (their App. A is not in our copy): Adam with a one-cycle triangle to
# 1e-3 (Raventós's), batch 256, 100k steps, 4 heads, a standard residual are this book's choices.
DIVERSITY_MS = {"paper": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, None],
                "cpu_long": [1, 2, 4, 8, 16, 32, 64, None], "cpu": [1, 2, 8, None],
                "cpu_d8": [4, 8, 16, 32, 64, 128, 256, None]}
DIVERSITY_MS["cpu_d8_50k"] = DIVERSITY_MS["cpu_d8"]
DIVERSITY_PAPER = TrainConfig(task="icl_regression",
                              task_kwargs={"D": 8, "K": 16, "noise_var": 0.125, "d_mlp": 2048,
                                           "doubled_residual": False, "n_root": 512},
                              n_layer=2, n_head=4, d_model=256, lr=1e-3, schedule="one_cycle", steps=100_000,
                              batch_size=256, eval_every=2_000, eval_batch=2048,
                              eval_steps=log_linear_steps(100_000, 50, 50))
# The CPU sweep: D = 2 (instead of 8) and K = 8 (instead of 16), so that in-context learning and memorising
# M tasks both happen within 10k steps of a 17,603-parameter model (width 32, 2 heads, MLP 64), batch 128,
# Adam at 3e-3 with a 250-step warm-up and a cosine decay, 64 root-task sequences for the PCA. Committed
# (``python -m plateau_lib diversity --workers 2 --commit``); the live ``cpu`` sweep is its first 1,500 steps' worth.
DIVERSITY_CPU_LONG = DIVERSITY_PAPER.replace(
    task_kwargs={"D": 2, "K": 8, "noise_var": 0.125, "d_mlp": 64, "doubled_residual": False, "n_root": 64},
    n_head=2, d_model=32, lr=3e-3, schedule="warmup_cosine", warmup_steps=250, steps=10_000, batch_size=128,
    eval_every=250, eval_batch=1024, eval_steps=log_linear_steps(10_000, 24, 12))
DIVERSITY_CPU = DIVERSITY_CPU_LONG.replace(steps=1_500, eval_every=100, eval_batch=512,
                                           eval_steps=log_linear_steps(1_500, 12, 6))
# The CPU transient sweep (issue 23; chosen by the recorded search, ``icl.transient_search``, trial w64): Carroll's
# own data (D = 8, K = 16, sigma^2 = 0.125, nested task sets) with a 2-layer, 4-head model of width 64 and MLP 256
# (102,793 parameters), batch 128, Adam at 1e-3 with a 1k-step warm-up and then constant (a decay to 0 could
# freeze the late return to dMMSE_M), 20k steps, 60 log + linear evaluations, 64 root-task sequences for the PCA.
# Its runs are the search's trial w64 (the same keys), 20-45 min each on one core; committed, never trained by a page.
DIVERSITY_CPU_D8 = DIVERSITY_PAPER.replace(
    task_kwargs={"D": 8, "K": 16, "noise_var": 0.125, "d_mlp": 256, "doubled_residual": False, "n_root": 64},
    d_model=64, lr=1e-3, schedule="warmup_constant", warmup_steps=1_000, batch_size=128, eval_batch=1024,
    steps=20_000, eval_every=20_000, eval_steps=log_linear_steps(20_000, 30, 30))
# The same model trained 2.5 times longer (the transient search's trial w64-50k): the transient's return grows
# with training, so this is the page's CPU transient sweep.
DIVERSITY_CPU_D8_50K = DIVERSITY_CPU_D8.replace(steps=50_000, eval_every=50_000,
                                                eval_steps=log_linear_steps(50_000, 30, 30))
# More model seeds of a sweep at the M around its transients, so that t_crit is read on the seed-mean curves; they
# keep checkpoints (which do not change training) for λ̂ over training. The transient search trains them (trial
# w64-50k-seeds); a page shows those committed.
DIVERSITY_MORE_SEEDS = {"cpu_d8_50k": {"Ms": [8, 16, 32, 64], "seeds": [1, 2],
                                       "checkpoint_steps": (500, 1_000, 2_000, 3_500, 6_000, 12_000, 25_000)}}
DIVERSITY = {"paper": DIVERSITY_PAPER, "cpu_long": DIVERSITY_CPU_LONG, "cpu": DIVERSITY_CPU, "cpu_d8": DIVERSITY_CPU_D8,
             "cpu_d8_50k": DIVERSITY_CPU_D8_50K}
# SGLD at the final weights of every M (one setting for all M; Carroll's are unpublished): calibrated on these
# models by ``python -m plateau_lib diversity`` (the grid below), shown on the transient-ridge page.
DIVERSITY_LLC = {"paper": SGLDConfig(epsilon=1e-4, gamma=100.0, nbeta=None, batch_size=1024, num_chains=8,
                                     num_draws=2000, num_burnin_steps=0, n_data=2**18, seed=0),
                 "cpu_long": SGLDConfig(epsilon=3e-4, gamma=100.0, nbeta=None, batch_size=256, num_chains=4,
                                        num_draws=400, num_burnin_steps=0, n_data=2**14, seed=0),
                 "cpu": SGLDConfig(epsilon=3e-4, gamma=100.0, nbeta=None, batch_size=128, num_chains=2, num_draws=100,
                                   num_burnin_steps=0, n_data=2**12, seed=0),
                 "cpu_d8": SGLDConfig(epsilon=3e-4, gamma=100.0, nbeta=None, batch_size=256, num_chains=4,
                                      num_draws=400, num_burnin_steps=0, n_data=2**14, seed=0)}
DIVERSITY_LLC["cpu_d8_50k"] = DIVERSITY_LLC["cpu_d8"]
DIVERSITY_CALIBRATION = dict(epsilons=[1e-4, 3e-4, 1e-3, 3e-3], nbetas=[None], gammas=[100.0])


INF = math.inf  # M = ∞ (Gaussian tasks) in every table; the task's M=None


def check_Ms(Ms) -> list:
    """The M grid as a list of positive ints and ``math.inf``; ValueError for an empty grid or M <= 0."""
    if isinstance(Ms, (str, bytes)) or not hasattr(Ms, "__iter__"):
        raise ValueError(f"parameter 'Ms' must be a list of task counts M (positive integers, or math.inf), got {Ms!r}")
    Ms = list(Ms)
    if not Ms:
        raise ValueError("parameter 'Ms' (the grid of task counts) is empty; give at least one M >= 1 or math.inf")
    out = []
    for M in Ms:
        if M is None or (isinstance(M, float) and M == INF):
            out.append(INF)
        elif not isinstance(M, bool) and isinstance(M, numbers.Real) and M >= 1 and float(M).is_integer():
            out.append(int(M))  # 8.0 (M read back from a table whose column also holds ∞) is 8
        else:
            raise ValueError(f"parameter 'Ms' must hold positive integers or math.inf (M = ∞, Gaussian tasks); got {M!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"parameter 'Ms' repeats a value: {Ms}")
    return out


def configs(base: TrainConfig, Ms, seeds=(0,)) -> dict:
    """``{(M, seed): config}``: ``base`` with ``task_kwargs["M"]`` (None for ∞) and model seed ``seed``. The
    task sets are nested across M (``data.task_set``: the same ``task_seed`` for every M)."""
    if base.task != "icl_regression":
        raise ValueError(f"parameter 'base' must be an icl_regression config, got task {base.task!r}")
    seeds = list(seeds)
    if not seeds or not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise ValueError(f"parameter 'seeds' must be a non-empty list of integers >= 0, got {seeds!r}")
    return {(M, s): base.replace(seed=int(s), task_kwargs={**base.task_kwargs, "M": None if M == INF else M})
            for M in check_Ms(Ms) for s in seeds}


def more_seeds(preset: str) -> dict:
    """``{(M, seed): config}`` of ``DIVERSITY_MORE_SEEDS[preset]`` (empty for a preset without more seeds)."""
    extra = DIVERSITY_MORE_SEEDS.get(preset)
    if extra is None:
        return {}
    base = DIVERSITY[preset].replace(checkpoint_steps=extra["checkpoint_steps"])
    return configs(base, extra["Ms"], extra["seeds"])


def diversity(preset: str, Ms=None, seeds=(0,), overrides: dict | None = None,
              **llc_fields) -> tuple[dict, SGLDConfig]:
    """The task-diversity sweep of ``preset`` (a key of ``DIVERSITY``): ``{(M, seed): config}`` and the
    SGLD settings, with ``overrides`` of TrainConfig fields (task fields go in ``task_kwargs``) and
    ``llc_fields`` of the SGLD settings (None ignored)."""
    base = DIVERSITY[preset_of(preset, DIVERSITY)].replace(**(overrides or {}))
    return configs(base, DIVERSITY_MS[preset] if Ms is None else Ms, seeds), DIVERSITY_LLC[preset].replace(**llc_fields)


def page_runs(preset: str = "paper") -> dict:
    """The training runs of the chapter's pages for ``preset`` ("paper"; anything else: the long CPU runs): the
    stages page's (its λ̂ is computed by ``python -m plateau_lib stages`` from the checkpoints that run
    keeps locally) and the transient-ridge sweep's."""
    long = "paper" if preset == "paper" else "cpu_long"
    sweep = sorted(diversity(long)[0].items(), key=lambda item: sweep_rank(item[0][0]))
    return {"icl_stages": {"training": ICL_STAGES[long]},
            "transient_ridge": {("M", M, seed): cfg for (M, seed), cfg in sweep}}


SWEEP_DECIDES_FIRST = (64, 512, math.inf, 256)  # a transient M, a ridge M (≥ 362), M = ∞, the switch (182–362)


def sweep_rank(M) -> tuple:
    """Where ``M`` comes in the paper queue: the values that decide Carroll et al.'s claims soonest first
    (``SWEEP_DECIDES_FIRST``), then the rest from the middle of the grid outwards, since a lent GPU trains
    one or two values of M a day."""
    if M in SWEEP_DECIDES_FIRST:
        return (0, SWEEP_DECIDES_FIRST.index(M))
    return (1, abs(math.log2(M) - 6), M)
