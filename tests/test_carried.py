"""A long job's state between work sessions (``engine.carried``) on hand-built resume states."""
import torch

from plateau_lib.engine import carried


def _state(folder, step):
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"step": step}, folder / "resume.pt")
    return folder / "resume.pt"


def test_restore_takes_the_committed_state_only_where_it_is_further_along(tmp_path):
    committed, working = tmp_path / "committed", tmp_path / "working"
    _state(committed, 300)
    (committed / "ckpt_000100.pt").write_text("committed")
    assert carried.restore(committed, working) == 300 and (working / "ckpt_000100.pt").read_text() == "committed"
    _state(working, 500)
    (working / "ckpt_000100.pt").write_text("this session's")
    assert carried.restore(committed, working) == 500  # the working state is further: kept
    assert (working / "ckpt_000100.pt").read_text() == "this session's"  # files the working folder has are kept
    assert carried.restore(tmp_path / "nothing", tmp_path / "fresh") == 0 and (tmp_path / "fresh").is_dir()
    (committed / "ckpt_000200.pt").write_text("x")
    carried.restore(committed, working, files=None)
    assert not (working / "ckpt_000200.pt").exists()


def test_further_is_the_state_with_the_higher_step_and_the_first_of_equals(tmp_path):
    a, b, none = _state(tmp_path / "a", 7), _state(tmp_path / "b", 9), tmp_path / "none" / "resume.pt"
    assert carried.further(a, b) == b and carried.further(b, a) == b and carried.further(none, a) == a
    c = _state(tmp_path / "c", 9)
    assert carried.further(b, c) == b and carried.further(c, b) == c
    assert carried.resume_step(none) == -1 and carried.resume_step(a) == 7
