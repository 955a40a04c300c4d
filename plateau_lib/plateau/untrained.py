"""The loss-plateau chapter's claims measured on models that have learned nothing: each page's ``paper`` runs
replaced by ``engine.train.untrained`` (the same configs, initial weights never updated) and passed through the
page's own code. A finding must fail here (``book.verdicts``); a claim that passes is a sanity check."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from plateau_lib.book import pages
from plateau_lib.engine.setup import build_model
from plateau_lib.engine.train import untrained
from plateau_lib.plateau import claims, milestones, other_tasks, presets, probe, setups


def runs(configs: dict, init_state: dict | None = None) -> dict:
    """``{label: untrained TrainResult}`` for ``{label: TrainConfig}`` (``init_state``: the copied parts' source)."""
    return {label: untrained(cfg, init_state if cfg.copy_groups else None) for label, cfg in configs.items()}


def plateau_values() -> dict:
    """Fig. 2 on the paper's three seeds, untrained."""
    metrics = pages.tidy(runs(presets.seed_runs("paper")), "seed")
    return milestones.plateau_values(milestones.milestones(metrics), metrics)


def attention_bias_values() -> tuple[dict, dict]:
    """Figs. 3–4 and Fig. 43 on the paper's runs, untrained (the bias is in force from its step on)."""
    bias_configs, switch_configs = presets.attention_bias_runs("paper")
    bias = runs(bias_configs)
    bias_table = milestones.milestones(pages.tidy({(f"{c:g}", s): r for (c, s), r in bias.items()}, ("c", "seed")),
                                       by=("c", "seed"))
    switch_runs, switched_at = milestones.switch_comparison(runs(switch_configs), bias, 10.0)
    return (milestones.attention_bias_values(bias_table),
            milestones.switch_values(milestones.switch_milestones(switch_runs, switched_at)))


def optimal_init_values() -> dict:
    """Fig. 5: every condition's copied parts taken from an untrained reference, then never trained."""
    reference_cfg, configs = presets.optimal_init_runs("paper")
    reference = untrained(reference_cfg)
    metrics = pages.tidy(runs(configs, reference.final_state), ("condition", "seed"))
    return milestones.optimal_init_values(milestones.milestones(metrics, by=("condition", "seed")))


def other_task_values() -> dict:
    """Figs. 6–22 on the paper's config of each task, untrained."""
    configs = presets.other_task_runs("paper")
    return other_tasks.survey_values(runs(configs), configs)


def setup_values() -> dict:
    """Figs. 26–40 on the paper's setups, untrained."""
    family = presets.setup_family("paper")
    metrics = setups.setup_metrics(runs(presets.training_setup_runs("paper")), family)
    return setups.setup_values(setups.setup_milestones(metrics, family))


def location_values() -> dict:
    """Figs. 41–42: each location's mean cosine of the untrained model on the probe's held-out sequences, at every
    checkpoint step of the paper's probe runs (no probe is fitted: the claims read the cosines only)."""
    configs, settings = presets.probe_runs("paper"), presets.probe_settings("paper")
    rows, histories = [], []
    for label, cfg in configs.items():
        task = cfg.make_task()
        model = build_model(cfg, "cpu").eval()
        with torch.no_grad():
            states = probe.location_states(model, probe.probe_batch(task, settings))
        _, cosines = probe.location_cosines(states, task)
        rows += [{"label": label, "step": step, "probe_train_acc": np.nan, "probe_test_acc": np.nan, **cosines}
                 for step in cfg.checkpoint_steps]
        histories.append(untrained(cfg).metrics)
    return probe.location_values(probe.phase_table(pd.DataFrame(rows), pd.concat(histories, ignore_index=True)))


def values() -> dict:
    """``{figure: {claim metric: value}}`` for every figure of this chapter that has an untrained baseline."""
    bias, switch = attention_bias_values()
    figures = sorted({c.figure for c in claims.CLAIMS})
    by_figure = {"Fig. 2 (MWS plateau)": plateau_values(), "Figs. 3–4 (attention bias)": bias,
                 "Fig. 43 (bias switched on mid-run)": switch, "Fig. 5 (optimal initialisation)": optimal_init_values(),
                 "Figs. 6–22 (other tasks)": other_task_values(), "Figs. 26–40 (training setups)": setup_values(),
                 "Figs. 41–42 (collapse at every location)": location_values()}
    unknown = set(by_figure) - set(figures)
    if unknown:
        raise ValueError(f"no figure named {sorted(unknown)} among the chapter's claims: {figures}")
    return by_figure
