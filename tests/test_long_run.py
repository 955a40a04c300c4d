"""The paper's stages run made across work days (plateau_lib.icl.long_run): a run stopped by its budget and
by SIGKILL, resumed from the committed state alone on a "new machine", gives the evaluations and λ̂ rows of an
uninterrupted run; a partial state is never taken for a finished one."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from plateau_lib.engine import cache
from plateau_lib.engine.train import Stopped
from plateau_lib.icl import long_run
from plateau_lib.icl.presets import ICL_LLC_REDUCED, ICL_PAPER

TINY = ICL_PAPER.replace(d_model=16, n_head=2, steps=60, batch_size=16, eval_every=10, eval_batch=32,
                         checkpoint_steps=(0, 5, 20, 40, 60), eval_steps=(5,))
TINY_LLC = ICL_LLC_REDUCED.replace(batch_size=16, num_chains=2, num_draws=8, num_burnin_steps=2, n_data=64)


@pytest.fixture
def home(tmp_path, use_store):
    use_store(committed=tmp_path / "results", local=tmp_path / "local")
    return tmp_path


def new_machine():
    """Everything but the committed state is gone."""
    shutil.rmtree(cache.current().local, ignore_errors=True)


def child(cfg, call: str, *args: str) -> subprocess.Popen:
    """A separate process (one thread) on this test's folders that runs ``long_run.<call>`` on ``cfg`` (a
    replaced ``ICL_PAPER``), as a second core's job would; ``sys.argv[1:]`` holds ``args``."""
    fields = {k: getattr(cfg, k) for k in ("d_model", "n_head", "steps", "batch_size", "eval_every", "eval_batch",
                                           "checkpoint_steps", "eval_steps")}
    script = (f"import sys; from pathlib import Path; from plateau_lib.engine import cache; from plateau_lib.icl import long_run\n"
              f"cache.use(cache.Store({str(cache.current().committed)!r}, {str(cache.current().local)!r}))\n"
              f"from plateau_lib.icl.presets import ICL_PAPER; from plateau_lib.llc import SGLDConfig\n"
              f"cfg = ICL_PAPER.replace(**{fields!r})\n"
              f"long_run.{call}\n")
    return subprocess.Popen([sys.executable, "-c", script, *args], env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_selected_checkpoints_of_the_paper_run():
    steps = long_run.llc_steps(ICL_PAPER)
    assert 35 <= len(steps) <= 45 and set(steps) <= set(ICL_PAPER.checkpoint_steps)
    assert ICL_PAPER.steps - 1 in steps or ICL_PAPER.steps in steps   # the end
    for paper in (1_000, 40_000, 126_000, 320_000):                   # the paper's points, within 5%
        assert min(abs(s - paper) / paper for s in steps) < 0.05
    checked = long_run.check_steps(ICL_PAPER)                       # the budget check: all five paper points
    assert len(checked) == 5 and set(checked) <= set(steps) and max(checked) == max(steps)


def test_budget_stops_resume_to_the_uninterrupted_run(home):
    whole = cache.current().train(TINY, use_cache=False, progress=False).metrics
    straight = long_run.estimate(TINY, TINY_LLC, budget_s=120)            # λ̂ of the uninterrupted run, in one go
    new_machine()
    shutil.rmtree(cache.current().committed)   # the state and the finished training that the straight run committed
    assert long_run.train(TINY, TINY_LLC, budget_s=0.0, progress_bar=False) == 1   # stopped after one step
    state = long_run.progress(TINY)
    assert state["status"] == "in progress" and state["step"] == 1 and state["steps"] == 60
    new_machine()
    long_run.estimate(TINY, TINY_LLC, budget_s=60)                                  # λ̂ at step 0, then saved
    assert long_run.progress(TINY)["llc_rows"] == 1
    new_machine()
    long_run.train(TINY, TINY_LLC, budget_s=0.0, progress_bar=False)               # a second budget stop
    assert long_run.progress(TINY)["status"] == "in progress"
    new_machine()
    long_run.train(TINY, TINY_LLC, budget_s=600, progress_bar=False)
    state = long_run.progress(TINY)   # trained, but a λ̂ row is still missing: not finished
    assert (state["status"], state["training"], state["step"]) == ("in progress", "finished", 60)
    assert long_run.finished_run(TINY, TINY_LLC) is None
    again = cache.current().train(TINY, progress=False).metrics
    pd.testing.assert_frame_equal(whole.reset_index(drop=True), again.reset_index(drop=True))

    new_machine()   # the finished training's evaluations and checkpoints come from the committed state alone
    pd.testing.assert_frame_equal(long_run.evaluations(TINY).reset_index(drop=True), whole.reset_index(drop=True),
                                  check_dtype=False)
    rows = long_run.estimate(TINY, TINY_LLC, budget_s=120)
    assert list(rows["step"]) == long_run.llc_steps(TINY)
    pd.testing.assert_frame_equal(rows.drop(columns="elapsed_s"), straight.drop(columns="elapsed_s"))
    # every λ̂ row, but the budget check still to do: in progress, and the checked steps' checkpoints are kept
    assert long_run.progress(TINY)["status"] == "in progress" and long_run.finished_run(TINY, TINY_LLC) is None
    to_check = long_run.check_steps(TINY, rows)
    assert sorted(int(p.stem.split("_")[1]) for p in long_run.state_folder(TINY).glob("ckpt_*.pt")) == sorted(to_check)
    new_machine()
    check = long_run.budget_check(TINY, TINY_LLC)          # from the committed checkpoints alone
    assert sorted(check["step"]) == sorted(to_check)
    assert long_run.progress(TINY)["status"] == "finished"
    # no checkpoint is kept once its λ̂ row and check exist
    assert not list(long_run.state_folder(TINY).glob("ckpt_*.pt"))
    # the finished run reads as an ordinary developmental run: its λ̂ rows (the longer chains' where the check
    # failed), and the structure of every checkpoint (kept in the state while the checkpoints were on some machine)
    dev = long_run.finished_run(TINY, TINY_LLC)
    assert dev.meta["made_by"] == "plateau_lib.icl.long_run" and dev.meta["device"] == "cpu"
    pd.testing.assert_frame_equal(dev.llc, long_run.checked_rows(rows, check))
    assert list(dev.structure["step"]) == long_run.llc_steps(TINY)


def test_sigkill_resumes_from_the_last_resume_state(home):
    whole = cache.current().train(TINY.replace(steps=400), use_cache=False, progress=False).metrics
    new_machine()
    cfg = TINY.replace(steps=400)
    proc = child(cfg, f"train(cfg, {TINY_LLC!r}, budget_s=600, progress_bar=False)")
    resume = long_run.run_folder(cfg) / "resume.pt"
    t0 = time.time()
    while not resume.exists() and time.time() - t0 < 120 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert resume.exists(), "the run saved no resume state before it was killed"
    long_run.save(cfg, TINY_LLC)                      # what a session saves of a killed job's working folder
    assert long_run.progress(cfg)["status"] == "in progress"
    new_machine()
    long_run.train(cfg, TINY_LLC, budget_s=600, progress_bar=False)
    again = cache.current().train(cfg, progress=False).metrics
    pd.testing.assert_frame_equal(whole.reset_index(drop=True), again.reset_index(drop=True))


def test_a_failed_budget_check_blocks_the_llc_rows(home):
    """The check is computed by budget_check; here a failing row is put in place to see that λ̂ rows then wait."""
    long_run.kept(TINY, TINY_LLC, long_run.CHECK_KIND).keep(
        pd.DataFrame([{"step": 5, "reduced": 15.8, "longer": 18.5, "relative difference": 0.145, "draws": 8,
                       "longer draws": 32, "chains": 2, "elapsed_s": 1.0}]))
    with pytest.raises(ValueError, match=r"failed its check at step\(s\) \[5\].*raise icl.presets.ICL_LLC_REDUCED"):
        long_run.estimate(TINY, TINY_LLC, budget_s=10)


def test_a_state_saved_under_another_device_name_resumes(home):
    """The device is provenance: a resume state written by a run configured for "cpu" (the paper queue's) resumes
    the same run configured for "auto" (long_run's), instead of starting it again from step 0."""
    cfg = TINY.replace(device="cpu")
    whole = cache.current().train(TINY, use_cache=False, progress=False).metrics
    new_machine()
    with pytest.raises(Stopped):
        cache.current().train_many([cfg], progress=False, deadline=0.0)
    assert long_run.restore(TINY, TINY_LLC) == 1
    from plateau_lib.engine.train import _resume_state
    assert _resume_state(long_run.run_folder(TINY), TINY)["step"] == 1   # the "cpu" state resumes the "auto" config
    long_run.train(TINY, TINY_LLC, budget_s=600, progress_bar=False)
    again = cache.current().train(TINY, progress=False).metrics
    pd.testing.assert_frame_equal(whole.reset_index(drop=True), again.reset_index(drop=True))


def test_a_state_made_at_another_budget_keeps_its_check_apart(home):
    """A committed check made at an earlier SGLD budget is neither restored as the current budget's nor lost:
    it moves to budget_check_earlier.csv with its budget named, and the current check starts empty."""
    old = TINY_LLC.replace(num_burnin_steps=0)
    long_run.kept(TINY, old, long_run.CHECK_KIND).keep(
        pd.DataFrame([{"step": 5, "reduced": 15.8, "longer": 18.5, "relative difference": 0.145, "draws": 8,
                       "longer draws": 32, "chains": 2, "elapsed_s": 1.0}]))
    long_run.save(TINY, old)
    new_machine()
    new = TINY_LLC.replace(num_burnin_steps=2)
    long_run.restore(TINY, new)
    assert long_run.budget_table(TINY, new).empty
    long_run.save(TINY, new)
    earlier = pd.read_csv(long_run.state_folder(TINY) / "budget_check_earlier.csv")
    assert earlier[["budget", "step", "relative difference"]].values.tolist() == [
        ["2 chains x 8 draws, no burn-in steps", 5, 0.145]]
    assert not (long_run.state_folder(TINY) / "budget_check.csv").exists()
    assert long_run.progress(TINY)["llc"] == new.key_dict()
    long_run.save(TINY, new)   # saved again: still kept, once
    assert len(pd.read_csv(long_run.state_folder(TINY) / "budget_check_earlier.csv")) == 1


def test_two_shards_side_by_side_fill_the_table_of_one_process(home):
    """λ̂ by two processes at once (--shard 0/2 and 1/2, as on two cores) gives the rows of one process alone:
    neither overwrites the rows the other keeps meanwhile."""
    cache.current().train(TINY, use_cache=False, progress=False)
    straight = long_run.estimate(TINY, TINY_LLC, budget_s=120)
    shutil.rmtree(long_run.kept(TINY, TINY_LLC).rows_folder())
    shutil.rmtree(cache.current().in_progress())
    procs = [child(TINY, f"estimate(cfg, {TINY_LLC!r}, budget_s=120, shard=(int(sys.argv[1]), 2))", str(k))
             for k in (0, 1)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    rows = long_run.llc_table(TINY, TINY_LLC)
    pd.testing.assert_frame_equal(rows.drop(columns="elapsed_s"), straight.drop(columns="elapsed_s"))
    assert long_run.progress(TINY)["llc_rows"] == len(long_run.llc_steps(TINY))
    with pytest.raises(ValueError, match=r"parameter 'shard' must be \(k, n\)"):
        long_run.estimate(TINY, TINY_LLC, budget_s=1, shard=(2, 2))


def test_a_step_is_claimed_by_one_process_and_a_dead_processs_claim_is_taken_over(home):
    """Two processes share the work by claims: a step claimed by a running process is left to it; the claim of
    a process that has ended is taken over, so a killed job's step is not lost."""
    assert long_run.claim(TINY, TINY_LLC, 5) and long_run.claim(TINY, TINY_LLC, 5)   # ours, again
    folder = long_run.kept(TINY, TINY_LLC).rows_folder()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    (folder / "claim_20").write_text(str(other.pid))
    assert not long_run.claim(TINY, TINY_LLC, 20)                   # a running process holds it
    other.kill()
    other.wait()
    assert long_run.claim(TINY, TINY_LLC, 20)                       # it ended: taken over
    assert (folder / "claim_20").read_text() == str(os.getpid())


def test_the_budget_check_reduced_estimate_is_the_llc_row_and_two_shards_share_it(home):
    """The check's "reduced" column is the λ̂ row itself (the longer chains are the same chains, run on), a known
    answer the check must reproduce; two processes (--shard 0/2, 1/2) share the checked steps by claims and give
    the rows of one process alone."""
    cache.current().train(TINY, use_cache=False, progress=False)
    rows = long_run.estimate(TINY, TINY_LLC, budget_s=120).set_index("step")
    alone = long_run.budget_check(TINY, TINY_LLC)
    assert sorted(alone["step"]) == sorted(long_run.check_steps(TINY))
    for _, row in alone.iterrows():
        assert abs(row["reduced"] - rows.loc[row["step"], "llc_mean"]) < 1e-6 * max(1.0, abs(row["reduced"]))
    shutil.rmtree(long_run.kept(TINY, TINY_LLC, long_run.CHECK_KIND).rows_folder())
    (long_run.state_folder(TINY) / "budget_check.csv").unlink()
    procs = [child(TINY, f"budget_check(cfg, {TINY_LLC!r}, shard=(int(sys.argv[1]), 2))", str(k))
             for k in (0, 1)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    shared = long_run.budget_table(TINY, TINY_LLC)
    pd.testing.assert_frame_equal(shared.drop(columns="elapsed_s"), alone.drop(columns="elapsed_s"))


def test_a_failed_check_shows_the_longer_chains_and_a_row_whose_chains_disagree_is_checked():
    """Hand-built rows: the check failed at step 20 (the reduced chains had not converged), so the page's λ̂ there is
    the longer chains' (with their standard error, and the budget named); it passed at 5, which keeps its row. A row
    whose chains disagree (se above RECHECK_SE) joins the steps to check, the most uncertain first."""
    rows = pd.DataFrame({"step": [5, 20, 40, 60], "llc_mean": [10.0, 12.0, 13.0, 14.0],
                         "llc_se": [0.2, 3.0, 2.5, 0.1], "llc_std": [0.4, 6.0, 5.0, 0.2]})
    check = pd.DataFrame({"step": [5, 20], "reduced": [10.0, 12.0], "longer": [10.1, 15.0],
                          "relative difference": [0.0099, 0.2], "longer_se": [0.1, 0.5]})
    shown = long_run.checked_rows(rows, check).set_index("step")
    assert shown.loc[20, ["llc_mean", "llc_se"]].tolist() == [15.0, 0.5] and pd.isna(shown.loc[20, "llc_std"])
    assert shown.loc[20, "budget"] == "4x longer chains"
    assert shown.loc[5, "llc_mean"] == 10.0 and shown.loc[5, "budget"] == "reduced"
    assert shown.loc[[40, 60], "llc_mean"].tolist() == [13.0, 14.0]
    spread = pd.DataFrame({"step": [166_666, 308_080, 363_635, 499_999], "llc_se": [0.7, 3.5, 6.2, 9.0]})
    points = long_run.check_steps(ICL_PAPER)
    assert 499_999 in points                                             # a paper point: checked once
    assert long_run.check_steps(ICL_PAPER, spread) == [*points, 363_635, 308_080]
    # a failed check brings its unchecked neighbours among the λ̂ rows, until passing checks bound the stretch
    rows_here = pd.DataFrame({"step": [126_262, 166_666, 222_221, 252_524, 308_080, 318_181, 363_635, 499_999],
                              "llc_se": [0.5, 0.7, 1.1, 2.1, 3.5, 3.6, 6.2, 0.1]})
    failing = pd.DataFrame({"step": [252_524, 308_080], "relative difference": [0.07, 0.09]})
    assert long_run.check_steps(ICL_PAPER, rows_here, failing)[-1:] == [222_221]
    passing = failing.assign(**{"relative difference": [0.01, 0.02]})
    assert 222_221 not in long_run.check_steps(ICL_PAPER, rows_here, passing)
