"""The loss-plateau pages re-run as another machine might run them: the same configs with every initial weight one
float step up (``TrainConfig.init_nudge``), the rounding difference another machine's order of sums brings. The
escape from a plateau is chaotic, so a verdict that such a re-run turns is *fragile* (``book.summaries``); the
page shows both.

The nudged runs are made and committed, each as it finishes, by ``python -m plateau_lib rerun --preset P --commit``
(``--figure F`` for one figure); a page reads them committed only, and trains nothing."""
from __future__ import annotations

from plateau_lib.book import pages
from plateau_lib.engine.cache import current
from plateau_lib.engine.runs import nudged
from plateau_lib.plateau import milestones, other_tasks, presets, probe, setups


def plateau_values(results: dict, configs: dict, preset: str) -> dict:
    """Fig. 2's claims on ``{seed: TrainResult}``, measured as the page measures them."""
    metrics = pages.tidy(results, "seed")
    return milestones.plateau_values(milestones.milestones(metrics), metrics)


def bias_values(results: dict, configs: dict, preset: str) -> dict:
    """Figs. 3–4's claims on ``{(c, seed): TrainResult}`` (the bias from step 0), as the page measures them."""
    metrics = pages.tidy({(f"{c:g}", s): r for (c, s), r in results.items()}, ("c", "seed"))
    return milestones.attention_bias_values(milestones.milestones(metrics, by=("c", "seed")))


def switch_values(results: dict, configs: dict, preset: str) -> dict:
    """Fig. 43's claim on ``{(switch step, seed): TrainResult}``, as the page measures it."""
    runs, switched_at = milestones.switch_comparison(results, {}, next(iter(configs.values())).attn_bias_c)
    return milestones.switch_values(milestones.switch_milestones(runs, switched_at))


def optimal_init_values(results: dict, configs: dict, preset: str) -> dict:
    """Fig. 5's claims on ``{(condition, seed): TrainResult}``, as the page measures them."""
    metrics = pages.tidy(results, ("condition", "seed"))
    order = {"condition": list(dict.fromkeys(name for name, _ in configs))}
    return milestones.optimal_init_values(milestones.milestones(metrics, by=("condition", "seed"), order=order))


def setup_values(results: dict, configs: dict, preset: str) -> dict:
    """Figs. 26–40's claims on ``{(setup, seed): TrainResult}``, as the page measures them (the families only
    label the page's panels, so none is needed here)."""
    family = {name: "" for name, _ in configs}
    return setups.setup_values(setups.setup_milestones(setups.setup_metrics(results, family), family))


def probe_values(results: dict, configs: dict, preset: str) -> dict:
    """Figs. 41–42's claims on ``{seed: TrainResult}`` from the stored probe tables of those runs (``run`` measures
    them first), as the page measures them; {} where the tables are not stored (a page trains and measures nothing)."""
    found = probe_stored(configs, preset).load()
    if found is None:
        return {}
    return probe.location_values(probe.phase_table(found[0]["scalars"], pages.tidy(results, "seed")))


def probe_stored(configs: dict, preset: str):
    """The stored probe tables of the nudged runs ``configs`` at the settings the page measured their runs with
    (``probe.page_settings``: at the paper preset, the stated CPU budget where that is what is committed)."""
    return probe.probe_table(configs, rerun_probe_settings(configs, preset))


def rerun_probe_settings(configs: dict, preset: str) -> dict:
    """The probe settings of the page's own runs of ``configs`` (the same configs, not nudged) at ``preset``."""
    return probe.page_settings({label: cfg.replace(init_nudge=False) for label, cfg in configs.items()}, preset)


# figure: (its runs at a preset, {label: TrainConfig}; the page's measure of them, (results, configs, preset) ->
# values). Figs. 2-5 and 41-42 at both presets; the others at the miniature's (their paper runs are hours on this
# CPU or a GPU's).
FIGURES = {
    "Fig. 2 (MWS plateau)": (presets.seed_runs, plateau_values),
    "Figs. 3–4 (attention bias)": (lambda preset: presets.attention_bias_runs(preset)[0], bias_values),
    "Fig. 43 (bias switched on mid-run)": (lambda preset: presets.attention_bias_runs(preset)[1], switch_values),
    "Fig. 5 (optimal initialisation)": (lambda preset: presets.optimal_init_runs(preset)[1], optimal_init_values),
    "Figs. 6–22 (other tasks)": (presets.other_task_runs,
                                 lambda results, configs, preset: other_tasks.survey_values(results, configs)),
    "Figs. 26–40 (training setups)": (presets.training_setup_runs, setup_values),
    "Figs. 41–42 (collapse at every location)": (presets.probe_runs, probe_values),
}
# A figure whose claims read an analysis of the runs' checkpoints as well: its stored tables, (configs, preset) -> table.
ANALYSED = {"Figs. 41–42 (collapse at every location)": probe_stored}
PRESETS = {"cpu": tuple(FIGURES), "paper": ("Fig. 2 (MWS plateau)", "Figs. 3–4 (attention bias)",
                                           "Fig. 5 (optimal initialisation)", "Figs. 41–42 (collapse at every location)")}
# A figure whose runs copy parts of a trained model: its reference run (the same, not nudged, as the page's).
REFERENCES = {"Fig. 5 (optimal initialisation)": lambda preset: presets.optimal_init_runs(preset)[0]}


def extras(figure: str, preset: str, configs: dict) -> dict:
    """``{label: the store's extra}`` of ``configs``: the reference's key for a run that copies from it."""
    if figure not in REFERENCES:
        return {label: None for label in configs}
    return pages.copy_extras(REFERENCES[figure](preset), configs)


def train(figure: str, preset: str, wanted: dict | None = None) -> tuple[dict, dict]:
    """``(configs, results)`` of ``figure``'s nudged runs at ``preset`` (or those of them in ``wanted``), trained
    through the store (copied runs from the page's reference run)."""
    wanted = configs(figure, preset) if wanted is None else wanted
    if figure in REFERENCES:
        return wanted, pages.copied_runs(REFERENCES[figure](preset), wanted)[1]
    return wanted, pages.train_runs(wanted)


def train_and_commit(figure: str, preset: str) -> list:
    """Train ``figure``'s nudged runs at ``preset`` one at a time through the store and commit each as soon as it is
    trained, so an interrupted re-run keeps every run it finished and the next one resumes after them (a copied
    run's reference weights are kept in the local store, so made once); then its analysis, if it has one. Returns
    the folders."""
    wanted = configs(figure, preset)
    extra, store, folders = extras(figure, preset, wanted), current(), []
    for label, cfg in wanted.items():
        if store.committed_result(cfg, extra[label]) is None:
            train(figure, preset, {label: cfg})
        folders.append(store.commit(cfg, extra[label]))
    if figure in ANALYSED:
        probe.measure_runs(wanted, rerun_probe_settings(wanted, preset))
        folders.append(ANALYSED[figure](wanted, preset).commit())
    return folders


def run(figure: str, preset: str) -> dict:
    """Train ``figure``'s nudged runs at ``preset`` (through the store) and measure them as its page does."""
    configs_, results = train(figure, preset)
    if figure in ANALYSED:
        probe.measure_runs(configs_, rerun_probe_settings(configs_, preset))
    return FIGURES[figure][1](results, configs_, preset)


def configs(figure: str, preset: str) -> dict:
    """``figure``'s runs of ``preset``, nudged."""
    if figure not in FIGURES:
        raise ValueError(f"figure must be one of {list(FIGURES)}, got {figure!r}")
    return nudged(FIGURES[figure][0](preset))


def committed_values(figure: str, shown: dict) -> dict:
    """``{preset: figure's claims on the committed nudged copies of its runs}`` for the ``{preset: {label:
    config}}`` a page shows; a preset with any nudged copy not committed is left out."""
    measure = FIGURES[figure][1]
    values = {}
    for preset, page_configs in shown.items():
        wanted = nudged(page_configs)
        extra = extras(figure, preset, wanted)
        found = {label: current().committed_result(cfg, extra[label]) for label, cfg in wanted.items()}
        found = {label: r for label, r in found.items() if r is not None}
        if len(found) == len(wanted) and (measured := measure(found, wanted, preset)):
            values[preset] = measured
    return values
