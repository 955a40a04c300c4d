"""The paper queue: declared runs with no committed result are trained, committed, and not run again."""
import pytest

from plateau_lib import cache, paper, presets
from plateau_lib.train import TrainConfig

TINY = TrainConfig(task_kwargs={"n": 4, "p": 5}, d_model=8, steps=4, batch_size=8, eval_every=2, eval_batch=8)


@pytest.fixture
def tiny_queue(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "LOCAL", tmp_path / "local")
    monkeypatch.setattr(cache, "COMMITTED", tmp_path / "results")
    monkeypatch.setattr(cache, "ROOT", tmp_path)
    runs = {"page_a": {0: TINY, 1: TINY.replace(seed=1)},
            "page_b": {"reference": TINY, ("KQ", 1): TINY.replace(seed=1, copy_groups=("kq", "embed"))}}
    monkeypatch.setattr(presets, "page_runs", lambda preset="paper": runs)
    return tmp_path


def test_queue_commits_each_run_once(tiny_queue):
    todo = paper.pending()
    assert [(page, label) for page, label, _, _ in todo] == [("page_a", 0), ("page_a", 1), ("page_b", "reference"),
                                                             ("page_b", ("KQ", 1))]
    assert todo[-1][3] == {"reference": cache.cache_key(TINY)}  # copied runs are keyed by their reference
    written = paper.run_queue()
    assert len(written) == 3  # page_a's seed 0 and page_b's reference are the same run
    assert all(not list(p.glob("*.pt")) for p in written)
    assert paper.pending() == []


def test_budget_stops_before_the_next_run(tiny_queue):
    assert paper.run_queue(budget_s=-1) == []


def test_unknown_page_is_refused(tiny_queue):
    with pytest.raises(ValueError, match="unknown page"):
        paper.pending(["page_z"])
