"""The plateau pages' perturbed re-runs (plateau.rerun): nudged copies of a page's runs, read committed only."""
import pytest

from plateau_lib.engine.runs import TrainConfig, nudged
from plateau_lib.plateau import rerun


def test_a_rerun_is_each_config_nudged_and_nothing_else():
    cfgs = {0: TrainConfig(d_model=16, seed=0), 1: TrainConfig(d_model=16, seed=1)}
    again = nudged(cfgs)
    assert all(again[k] == cfgs[k].replace(init_nudge=True) for k in cfgs) and not any(c.init_nudge for c in cfgs.values())
    with pytest.raises(ValueError, match="figure must be one of"):
        rerun.configs("Fig. 99", "cpu")


def test_a_preset_whose_nudged_runs_are_not_all_committed_is_left_out(use_store, tmp_path):
    use_store(committed=tmp_path / "empty", local=tmp_path / "local")
    figure = "Fig. 2 (MWS plateau)"
    assert rerun.committed_values(figure, {"cpu": {0: TrainConfig(d_model=16, steps=20)}}) == {}


def test_the_regression_pages_reruns_are_read_stored_only(use_store, tmp_path):
    """A page whose nudged runs are not stored gets no re-run column; an unknown figure is refused before any compute."""
    from plateau_lib.icl import diversity_page as dp, rerun as icl_rerun, stages_page
    from plateau_lib.icl.presets import icl_stages
    use_store(committed=tmp_path / "empty", local=tmp_path / "local")
    assert icl_rerun.stages_values(*icl_stages("cpu")) is None
    assert icl_rerun.sweep_values(dp.TRANSIENT_FIGURE, *dp.sweep_settings("cpu")) is None
    with pytest.raises(ValueError, match="figure must be one of"):
        icl_rerun.run("Fig. 99", "cpu")
    with pytest.raises(ValueError, match="figure must be one of"):
        icl_rerun.commit(stages_page.FIGURE, "paper")


def test_the_probes_rerun_needs_its_probe_tables_stored_not_only_its_runs(use_store, tmp_path):
    """Figs. 41–42's claims read the nudged runs' probe tables: with the runs committed but no tables stored, the
    page gets no re-run column (it measures nothing), and the figure's re-run commits its tables with its runs."""
    from plateau_lib.engine.cache import current
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    figure = "Figs. 41–42 (collapse at every location)"
    assert figure in rerun.PRESETS["cpu"] and figure in rerun.ANALYSED
    cfg = TrainConfig(d_model=16, steps=20, eval_every=10)
    current().train(nudged({0: cfg})[0], progress=False)
    current().commit(nudged({0: cfg})[0])
    assert current().committed_result(nudged({0: cfg})[0]) is not None
    assert rerun.committed_values(figure, {"cpu": {0: cfg}}) == {}


def test_the_paper_probes_rerun_is_measured_at_the_budget_the_page_used(use_store, tmp_path):
    """At the paper preset the page reads its committed probe tables at the stated CPU budget (100 epochs), not the
    paper's 2,000; the nudged re-run measures and reads its own at the same settings, and the miniature keeps its own."""
    from plateau_lib.plateau import presets
    figure = "Figs. 41–42 (collapse at every location)"
    assert figure in rerun.PRESETS["paper"]
    paper = rerun.configs(figure, "paper")
    assert rerun.rerun_probe_settings(paper, "paper") == presets.PROBE_PAPER_ON_CPU  # the committed tables' budget
    cpu = rerun.configs(figure, "cpu")
    assert rerun.rerun_probe_settings(cpu, "cpu") == presets.probe_settings("cpu")
    use_store(committed=tmp_path / "empty", local=tmp_path / "local")  # nothing committed: the paper's own settings
    assert rerun.rerun_probe_settings(paper, "paper") == presets.probe_settings("paper")


def test_a_rerun_commits_each_run_as_it_finishes_and_resumes_after_them(use_store, tmp_path, monkeypatch):
    """train_and_commit: a run that fails stops the re-run with the runs before it committed; the next call trains
    only what is left and commits it; the CLI refuses a figure with no re-run at the preset before any compute."""
    from plateau_lib.book import pages
    from plateau_lib.engine.cache import current
    from plateau_lib.commands import main
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    figure = "Fig. 2 (MWS plateau)"
    tiny = {s: TrainConfig(d_model=16, steps=20, eval_every=10, seed=s) for s in (0, 1)}
    monkeypatch.setitem(rerun.FIGURES, figure, (lambda preset: tiny, rerun.FIGURES[figure][1]))
    real, trained = pages.train_runs, []

    def failing_second(configs, *args):
        if trained:
            raise RuntimeError("the machine went away")
        trained.extend(configs)
        return real(configs, *args)
    monkeypatch.setattr(pages, "train_runs", failing_second)
    with pytest.raises(RuntimeError):
        rerun.train_and_commit(figure, "cpu")
    nudged_runs = nudged(tiny)
    assert current().committed_result(nudged_runs[0]) is not None and current().committed_result(nudged_runs[1]) is None
    monkeypatch.setattr(pages, "train_runs", lambda configs, *args: trained.extend(configs) or real(configs, *args))
    assert len(rerun.train_and_commit(figure, "cpu")) == 2 and trained == [0, 1]
    assert current().committed_result(nudged_runs[1]) is not None
    with pytest.raises(SystemExit):
        main(["rerun", "--preset", "paper", "--figure", "Figs. 6–22 (other tasks)"])


def test_a_copied_runs_rerun_trains_its_reference_once_and_keys_each_run_by_it(use_store, tmp_path, monkeypatch):
    """train_and_commit on a figure whose runs copy a reference's weights: the reference is trained once for two
    copied runs (its weights kept in the local store), and each copied run is committed under the reference's key."""
    from plateau_lib.engine import cache
    from plateau_lib.engine.cache import cache_key, current
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    figure = "Fig. 5 (optimal initialisation)"
    reference = TrainConfig(d_model=16, steps=20, eval_every=10, seed=0)
    copied = {g: reference.replace(copy_groups=(g,), seed=1) for g in ("kq", "mlp")}
    monkeypatch.setitem(rerun.FIGURES, figure, (lambda preset: copied, rerun.FIGURES[figure][1]))
    monkeypatch.setitem(rerun.REFERENCES, figure, lambda preset: reference)
    real, trained = cache.Store.train_many, []
    monkeypatch.setattr(cache.Store, "train_many", lambda self, configs, *a, **k: (
        trained.extend(c.copy_groups for c in configs if self.result(c) is None) or real(self, configs, *a, **k)))
    folders = rerun.train_and_commit(figure, "cpu")
    assert trained.count(()) == 1 and len(folders) == 2
    for cfg in nudged(copied).values():
        assert current().committed_result(cfg, {"reference": cache_key(reference)}) is not None
