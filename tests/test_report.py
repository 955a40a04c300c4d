import json

import pytest

from plateau_lib import report


@pytest.fixture
def roots(tmp_path, monkeypatch):
    local, committed = tmp_path / ".cache" / "summaries", tmp_path / "results" / "summaries"
    monkeypatch.setattr(report, "LOCAL_SUMMARIES", local)
    monkeypatch.setattr(report, "COMMITTED_SUMMARIES", committed)
    return local, committed


ROWS = [{"metric": "plateau length (steps)", "paper": 1500.0, "ours": 310.0},
        {"metric": "final accuracy", "paper": None, "ours": 0.99}]


def test_record_summary_writes_metadata(roots):
    local, _ = roots
    path = report.record_summary("mws_plateau", "cpu", "cpu", [0, 1], 12.34, ROWS)
    assert path == local / "mws_plateau-cpu.json"
    summary = json.loads(path.read_text())
    assert summary["rows"] == ROWS and summary["seeds"] == [0, 1] and summary["device"] == "cpu"
    assert summary["date"].endswith("+00:00")
    assert summary["commit"]


def test_record_summary_rejects_malformed_rows(roots):
    with pytest.raises(ValueError):
        report.record_summary("f", "cpu", "cpu", [0], 1.0, [{"metric": "m", "value": 1.0}])


def test_load_summaries_empty(roots):
    table = report.load_summaries()
    assert table.empty and list(table.columns) == report.COLUMNS


def test_local_summary_wins_over_committed(roots):
    local, committed = roots
    committed.mkdir(parents=True)
    old = {"figure": "mws_plateau", "preset": "cpu", "device": "cuda", "seeds": [0], "wall_time_s": 1.0,
           "date": "2025-01-01T00:00:00+00:00", "commit": "abc1234", "rows": [{"metric": "m", "paper": 1, "ours": 2}]}
    (committed / "mws_plateau-cpu.json").write_text(json.dumps(old))
    (committed / "mws_plateau-paper.json").write_text(json.dumps(dict(old, preset="paper")))
    report.record_summary("mws_plateau", "cpu", "cpu", [3, 4], 5.0, ROWS)
    table = report.load_summaries()
    cpu = table[table.preset == "cpu"]
    assert list(cpu.metric) == [r["metric"] for r in ROWS]
    assert set(cpu.source) == {"this machine"} and set(cpu.seeds) == {"3, 4"}
    assert list(table[table.preset == "paper"].source) == ["committed"]


def test_mean_sd_and_finite():
    assert report.mean_sd([1.0, 3.0, None]) == "2 ± 1.41 (n = 2)"
    assert report.mean_sd([None]) == "n/a (no run reached it)"
    assert report.finite(None) != report.finite(None) and report.finite(2) == 2.0


def test_git_commit_outside_a_repository(tmp_path):
    assert report.git_commit(tmp_path) in ("unknown", "uncommitted")
