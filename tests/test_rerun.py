"""The plateau pages' perturbed re-runs (plateau.rerun): nudged copies of a page's runs, read committed only."""
import pytest

from plateau_lib.engine.runs import TrainConfig
from plateau_lib.plateau import rerun


def test_a_rerun_is_each_config_nudged_and_nothing_else():
    cfgs = {0: TrainConfig(d_model=16, seed=0), 1: TrainConfig(d_model=16, seed=1)}
    again = rerun.nudged(cfgs)
    assert all(again[k] == cfgs[k].replace(init_nudge=True) for k in cfgs) and not any(c.init_nudge for c in cfgs.values())
    with pytest.raises(ValueError, match="figure must be one of"):
        rerun.configs("Fig. 99", "cpu")


def test_a_preset_whose_nudged_runs_are_not_all_committed_is_left_out(use_store, tmp_path):
    use_store(committed=tmp_path / "empty", local=tmp_path / "local")
    figure = "Fig. 2 (MWS plateau)"
    assert rerun.committed_values(figure, {"cpu": {0: TrainConfig(d_model=16, steps=20)}}) == {}
