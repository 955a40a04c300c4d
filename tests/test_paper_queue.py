"""The paper queue: declared runs with no committed result are trained, committed, and not run again."""
import time

import pandas as pd
import pytest
import torch

from plateau_lib import chapters, paper_queue
from plateau_lib.engine import cache, costs as run_costs
from plateau_lib.engine.analysis import Analysis
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.train import Stopped
from plateau_lib.llc import SGLDConfig
from plateau_lib.plateau import presets

TINY = TrainConfig(task_kwargs={"n": 4, "p": 5}, d_model=8, steps=4, batch_size=8, eval_every=2, eval_batch=8)


@pytest.fixture
def tiny_queue(tmp_path, monkeypatch, use_store):
    use_store(committed=tmp_path / "results", local=tmp_path / "local")
    monkeypatch.setattr(cache, "ROOT", tmp_path)
    runs = {"page_a": {0: TINY, 1: TINY.replace(seed=1)},
            "page_b": {"reference": TINY, ("KQ", 1): TINY.replace(seed=1, copy_groups=("kq", "embed"))}}
    monkeypatch.setattr(chapters, "page_runs", lambda preset="paper": runs)
    return tmp_path


def test_queue_commits_each_run_once(tiny_queue):
    todo = paper_queue.pending()
    assert [(e.page, e.label) for e in todo] == [("page_a", 0), ("page_a", 1), ("page_b", "reference"),
                                                             ("page_b", ("KQ", 1))]
    assert todo[-1].extra == {"reference": cache.cache_key(TINY)}  # copied runs are keyed by their reference
    written = paper_queue.run_queue(allow_cpu=True)
    assert len(written) == 3  # page_a's seed 0 and page_b's reference are the same run
    assert all(not list(p.glob("*.pt")) for p in written)
    assert paper_queue.pending() == []


def test_budget_stops_before_the_next_run(tiny_queue):
    assert paper_queue.run_queue(budget_s=-1, allow_cpu=True) == []


def test_unknown_page_is_refused(tiny_queue):
    with pytest.raises(ValueError, match="unknown page"):
        paper_queue.pending(["page_z"])


def test_status_lists_every_run_and_replace_cpu_requeues_cpu_results(tiny_queue):
    paper_queue.run_queue(pages=["page_a"], allow_cpu=True)  # computed here, on a CPU
    states = {(e.page, e.label): e.status for e in paper_queue.status()}
    assert states == {("page_a", 0): paper_queue.ON_CPU, ("page_a", 1): paper_queue.ON_CPU,
                      ("page_b", "reference"): paper_queue.ON_CPU, ("page_b", ("KQ", 1)): paper_queue.MISSING}
    assert [e.label for e in paper_queue.pending()] == [("KQ", 1)]
    assert len(paper_queue.pending(replace_cpu=True)) == 4
    assert paper_queue.status(preset="cpu")[0].status == paper_queue.COMMITTED  # a cpu-preset run belongs on a CPU
    assert all(run_costs.estimate_gpu_s(e.config) > 0 for e in paper_queue.status())


def test_paper_runs_need_a_gpu_unless_forced(tiny_queue):
    with pytest.raises(ValueError, match="FORCE_CPU"):
        paper_queue.run_queue(device="cpu")


def test_a_stopped_queue_resumes_from_its_packed_partial_state(tiny_queue, tmp_path, monkeypatch, use_store):
    """A deadline stops training part-way; --tar packs the partial state; --unpack elsewhere resumes it."""
    long = {"page_a": {0: TINY.replace(steps=400, eval_every=50)}}
    monkeypatch.setattr(chapters, "page_runs", lambda preset="paper": long)
    monkeypatch.setattr(chapters, "analyses", lambda preset="paper": [])
    assert paper_queue.run_queue(budget_s=0.0, allow_cpu=True) == []  # stops after its first step, whatever the speed
    assert len(cache.current().stopped_runs()) == 1
    tar, = paper_queue.pack(tmp_path / "q.tar.gz", [])
    home = tmp_path / "home"
    (home / ".cache" / "queue" / "train-0123456789abcdef.partial").mkdir(parents=True)  # older state: replaced
    assert paper_queue.unpack(tar, home) == [f".cache/queue/{cache.current().stopped_runs()[0].name}"]
    assert [p.name for p in (home / ".cache" / "queue").iterdir()] == [cache.current().stopped_runs()[0].name]
    resume = torch.load(next(home.glob(".cache/queue/*.partial/resume.pt")), weights_only=True)
    assert 0 < resume["step"] < 400
    use_store(local=home / ".cache" / "queue")
    written = paper_queue.run_queue(allow_cpu=True)
    assert len(written) == 1 and paper_queue.pending() == [] and not cache.current().stopped_runs()


ICL = TrainConfig(task="icl_regression", task_kwargs={"D": 2, "K": 4}, n_layer=2, n_head=2, d_model=16,
                  schedule="one_cycle", lr=3e-3, batch_size=32, steps=20, eval_every=10, eval_batch=64,
                  checkpoint_steps=(0, 5, 10, 15, 20), eval_steps=(0, 5, 10, 15, 20))
ICL_LLC = SGLDConfig(epsilon=1e-3, gamma=100.0, nbeta=10.0, batch_size=16, num_chains=1, num_draws=4,
                     num_burnin_steps=0, n_data=64, seed=0)


@pytest.fixture
def stages_queue(tiny_queue, monkeypatch):
    """One training run and one analysis of it (λ̂ at its five checkpoints, as the stages page's)."""
    from plateau_lib.icl import analyses
    monkeypatch.setattr(chapters, "page_runs", lambda preset="paper": {"icl_stages": {"training": ICL}})
    step = analyses.stages(ICL, ICL_LLC)
    monkeypatch.setattr(chapters, "analyses", lambda preset="paper": [step])
    return step


def test_an_analysis_waits_for_its_training_then_commits(stages_queue):
    assert not stages_queue.trained() and paper_queue.run_analyses(device="cpu") == []
    paper_queue.run_queue(allow_cpu=True)
    assert stages_queue.trained() and not stages_queue.committed()
    written = paper_queue.run_analyses(device="cpu")
    assert stages_queue.committed() and {p.name for p in written} == {f"train-{cache.cache_key(ICL)}",
                                                                      *stages_queue.outputs}
    assert paper_queue.run_analyses(device="cpu") == []
    assert paper_queue.run_analyses(device="cpu", deadline=0.0) == []  # nothing left, so no budget needed


def test_a_stopped_analysis_resumes_elsewhere_from_its_packed_rows_and_checkpoints(use_store, stages_queue, tmp_path,
                                                                                  monkeypatch):
    """The budget stops λ̂ after its first kept row; the pack carries those rows and the run's checkpoints (and
    nothing else); unpacked in a new home, the queue finishes with the table of an uninterrupted computation."""
    from plateau_lib.icl import development
    paper_queue.run_queue(allow_cpu=True)
    assert paper_queue.run_analyses(device="cpu", deadline=time.time() - 1) == []  # spent before it starts
    with pytest.raises(Stopped):
        stages_queue.compute("cpu", 1, time.time() - 1)
    assert len(cache.StoredTable(development.KIND, development.llc_spec(ICL, ICL_LLC)).rows()) == 1
    state = [p.name for p in paper_queue.queue_state()]
    assert state == [f"{development.stored(ICL, ICL_LLC).name}.partial", f"train-{cache.cache_key(ICL)}"]
    parts = paper_queue.pack(tmp_path / "q.tar.gz", [], part_mib=0.01)  # small parts: several files
    assert len(parts) > 1 and parts[1].name == "q.2.tar.gz"
    home = tmp_path / "home"
    assert paper_queue.unpack(parts, home) == [f".cache/queue/{name}" for name in sorted(state)]
    use_store(committed=home / "results", local=home / ".cache" / "queue")
    carried = home / ".cache" / "queue" / f"train-{cache.cache_key(ICL)}"
    weights = {p.name: p.stat().st_mtime_ns for p in carried.glob("*.pt")}
    paper_queue.run_queue(allow_cpu=True)  # the run's result is found in the carried state, not retrained
    assert len(weights) == 6 and weights == {p.name: p.stat().st_mtime_ns for p in carried.glob("*.pt")}
    paper_queue.run_analyses(device="cpu")
    resumed = development.stored(ICL, ICL_LLC).path()
    assert resumed.parent == home / "results"
    use_store(committed=tmp_path / "none", local=tmp_path / "again")
    whole = development.run(ICL, ICL_LLC, progress=False)
    columns = ["step", "llc_mean", "llc_se", "init_loss"]
    pd.testing.assert_frame_equal(pd.read_csv(resumed / "llc.csv")[columns], whole.llc[columns])


def test_pack_leaves_out_state_past_the_carry_limit(stages_queue, tmp_path, capsys):
    paper_queue.run_queue(allow_cpu=True)
    tar, = paper_queue.pack(tmp_path / "q.tar.gz", [], carry_mib=0.001)
    assert "not packed" in capsys.readouterr().out
    assert paper_queue.unpack(tar, tmp_path / "home") == []


def test_unpack_refuses_runs_no_page_declares(tiny_queue, tmp_path):
    folder = tmp_path / "results" / "train-0123456789abcdef"
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text("{}")
    import tarfile
    with tarfile.open(tmp_path / "stray.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname=f"results/{folder.name}")
    with pytest.raises(ValueError, match="no page declares"):
        paper_queue.unpack(tmp_path / "stray.tar.gz", tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()
    with tarfile.open(tmp_path / "odd.tar.gz", "w:gz") as tar:
        tar.add(folder / "meta.json", arcname=".cache/queue/notes/meta.json")
    with pytest.raises(ValueError, match="unexpected member"):
        paper_queue.unpack(tmp_path / "odd.tar.gz", tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()


def test_queue_trains_analyses_commits_and_packs_the_miniature_language_models(tiny_queue, tmp_path, monkeypatch):
    from plateau_lib.llm import collapse, corpus, miniature, presets as llm_presets, task as llm_task
    tiny = miniature.MiniatureConfig(n_layer=1, d_model=16, n_head=2, d_ff=32, batch_size=2, context=8, steps=2)
    monkeypatch.setattr(llm_presets, "llm_miniatures", lambda preset: {("pythia", 0): tiny})
    monkeypatch.setattr(miniature, "LOCAL", tmp_path / "llm")
    monkeypatch.setattr(corpus, "LOCAL", tmp_path / "llm")
    monkeypatch.setattr(llm_task, "corpus_tokens", lambda arch, sources: torch.arange(3, 503).numpy())
    monkeypatch.setattr(collapse, "prompts", lambda n, seed: ["What is a plant?", "Why is the sky blue?"][:n] * (n // 2))
    step, = [a for a in chapters.analyses() if a.page == "llm_collapse"]
    assert step.trained() and not step.committed()  # a miniature trains within its own step
    written = paper_queue.run_analyses(["llm_collapse"], device="cpu")
    assert [p.name for p in written] == [collapse.miniature_table(tiny).name] and step.committed()
    assert not list(written[0].rglob("*.safetensors")), "checkpoints are never committed"
    assert paper_queue.run_analyses(["llm_collapse"], device="cpu") == []
    tar, = paper_queue.pack(tmp_path / "q.tar.gz", written)
    assert paper_queue.unpack(tar, tmp_path / "home") == [f"results/{written[0].name}"]


def test_the_queue_finds_every_committed_cpu_analysis_under_its_name():
    """The cpu queue's analyses (the long CPU runs' and the CPU miniatures') are committed, so their names match
    the stored tables'; of the paper ones, the two miniatures are committed and the six λ̂ and probe tables wait
    for a GPU."""
    assert all(a.committed() for a in chapters.analyses("cpu"))
    paper = chapters.analyses("paper")
    names = [name for a in paper for name in a.outputs]
    assert len(names) == len(set(names)) == 8
    assert [a.page for a in paper if a.committed()] == ["llm_collapse", "llm_collapse"]


def test_cpu_queue_trains_the_feasible_runs_on_two_workers_stops_and_resumes(tiny_queue, monkeypatch):
    """Without a GPU: runs within the CPU limit are trained on two dask workers and committed as each finishes;
    a run over the limit and Fig. 5's copied run are left for a GPU; a budget stops them and the next call resumes."""
    import distributed
    from plateau_lib.engine.train import train
    runs = {"page_a": {0: TINY, 1: TINY.replace(seed=1), "long": TINY.replace(seed=2, steps=40_000)},
            "page_b": {"reference": TINY.replace(seed=3), ("KQ", 1): TINY.replace(seed=1, copy_groups=("kq", "embed"))}}
    monkeypatch.setattr(chapters, "page_runs", lambda preset="paper": runs)
    costs = {run_costs.architecture(TINY): {"step_s": 0.5, "eval_s": 0.0}}   # 4 steps: 2 s; 40k steps: 5.6 h
    monkeypatch.setattr(paper_queue, "cpu_costs", lambda configs, measure=True, record=None: costs)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, \
            distributed.Client(lc) as client:
        assert paper_queue.run_cpu_queue(budget_s=0.0, client=client, limit_h=3.0) == []   # each stops after one step
        assert len(list(cache.current().local.glob("train-*.partial/resume.pt"))) == 3
        written = paper_queue.run_cpu_queue(client=client, limit_h=3.0)
    assert sorted(p.name for p in written) == sorted(f"train-{cache.cache_key(c)}" for c in
                                                     (TINY, TINY.replace(seed=1), TINY.replace(seed=3)))
    assert {(e.page, e.label) for e in paper_queue.pending()} == {("page_a", "long"), ("page_b", ("KQ", 1))}
    resumed = cache.current().committed_result(TINY.replace(seed=1)).metrics
    pd.testing.assert_frame_equal(resumed, train(TINY.replace(seed=1), progress=False).metrics)
    assert all(cache.current().committed_meta(c)["device"] == "cpu" for c in (TINY, TINY.replace(seed=3)))


def test_cpu_estimate_multiplies_out_the_measured_step_and_evaluation_times():
    """Hand-set costs: 300 steps at 0.01 s, and 300 // 30 + 2 (start, end) + 2 extra evaluations at 0.1 s. (How close
    the estimate comes to a measured run is a benchmark ratio: ``benchmarks/costs_bench.py``.)"""
    cfg = TINY.replace(steps=300, eval_every=30, eval_steps=(5, 7))
    costs = {run_costs.architecture(cfg): {"step_s": 0.01, "eval_s": 0.1}}
    assert run_costs.estimate_cpu_s(cfg, costs) == pytest.approx(300 * 0.01 + 14 * 0.1)
    assert run_costs.estimate_cpu_s(cfg.replace(d_model=16), costs) is None   # another architecture: not measured
    assert run_costs.estimate_cpu_s(cfg.replace(seed=3, steps=600), costs) == pytest.approx(600 * 0.01 + 24 * 0.1)


def test_duplicate_seeds_are_refused():
    from plateau_lib.book.params import int_list
    with pytest.raises(ValueError, match=r"parameter 'seeds' lists \[0\] more than once"):
        int_list([0, 1, 0], "seeds", [0])
    with pytest.raises(ValueError, match="'seeds'"):
        presets.training_setup_runs("cpu", seeds=int_list("[2, 2]", "seeds", [0]))


def _entry(page, label, cfg):
    return paper_queue.Entry(page, label, cfg, None, paper_queue.MISSING, None, cache.cache_key(cfg), None)


def test_lease_groups_put_carrolls_sweep_first_and_start_only_what_can_finish_or_come_back():
    """Hand-built costs: 12 large-state runs of one architecture at 100 s each (stacked or not), small-state runs
    of another. The large group takes as many runs as finish in the budget; the small one starts whole."""
    big = TINY.replace(d_model=16)
    sweep = [_entry("transient_ridge", ("M", m, 0), big.replace(seed=m)) for m in range(12)]
    small = [_entry("page_a", s, TINY.replace(seed=s)) for s in range(3)]
    muon = [_entry("mws_training_setups", ("Muon", s), TINY.replace(optimizer="muon", d_model=24, seed=s)) for s in range(2)]
    state = lambda cfg: 30.0 if cfg.d_model == 16 else 1.0  # noqa: E731  (MiB)
    estimate = lambda cfg, stacked: 100.0  # noqa: E731  (seconds a run, its share)
    groups, left = paper_queue.lease_groups(small + muon + sweep, 450, carry_mib=64, estimate=estimate, state_mib=state)
    assert [g[0].page for g in groups] == ["transient_ridge", "mws_training_setups", "page_a"]
    assert [e.label for e in groups[0]] == [("M", m, 0) for m in range(4)]  # 4 x 100 s <= 450 s < 5 x 100 s
    assert left == sweep[4:] and groups[1] == muon and groups[2] == small
    assert paper_queue.lease_groups(sweep, 50, 64, estimate, state) == ([], sweep)  # not even one run finishes
    assert paper_queue.lease_groups(sweep, None, 64, estimate, state) == ([sweep], [])  # no budget: everything starts
    assert paper_queue.lease_groups(sweep[:2], 1, 64, estimate, state) == ([sweep[:2]], [])  # 60 MiB can come back


def test_a_lease_starts_one_run_it_cannot_finish_where_its_state_comes_back_and_counts_a_resumed_runs_share():
    """Seconds left after the runs that finish (at least ``PARTIAL_MIN_S``) start the next run alone, its 30 MiB
    state brought back; a run already half made costs half its estimate."""
    big = TINY.replace(d_model=16)
    sweep = [_entry("transient_ridge", ("M", m, 0), big.replace(seed=m)) for m in range(12)]
    state = lambda cfg: 30.0  # noqa: E731
    estimate = lambda cfg, stacked: 100.0  # noqa: E731
    groups, left = paper_queue.lease_groups(sweep, 480, 64, estimate, state)  # 4 finish, 80 s start a fifth
    assert groups == [sweep[:4], [sweep[4]]] and left == sweep[5:]
    assert paper_queue.lease_groups(sweep, 200, 64, estimate, state) == ([sweep[:2]], sweep[2:])  # no second left
    assert paper_queue.lease_groups(sweep, 280, 20, estimate, state) == ([sweep[:2]], sweep[2:])  # 30 MiB > 20
    assert paper_queue.lease_groups(sweep, 90, 64, estimate, state) == ([[sweep[0]]], sweep[1:])  # alone, stopped
    half = lambda cfg: 0.5 if cfg.seed == 0 else 0.0  # noqa: E731  (seed 0 resumed at half its steps)
    assert paper_queue.lease_groups(sweep, 220, 64, estimate, state, done=half)[0] == [sweep[:2], [sweep[2]]]  # 150 s, then 70


def test_a_budgeted_queue_leaves_runs_it_could_neither_finish_nor_bring_back(tiny_queue, monkeypatch):
    """Dry run at tiny sizes: the runs' states are made to look too large to carry, and the estimate lets one
    finish in the budget; that one is trained and committed, the other left untouched (no resume state)."""
    monkeypatch.setattr(paper_queue, "resume_mib", lambda cfg: 100.0)
    monkeypatch.setattr(paper_queue, "estimate_gpu_s", lambda cfg, stacked=1: 50.0)
    monkeypatch.setattr(chapters, "page_runs", lambda preset="paper": {"page_a": {0: TINY, 1: TINY.replace(seed=1)}})
    written = paper_queue.run_queue(budget_s=80, allow_cpu=True)
    assert len(written) == 1 and [e.label for e in paper_queue.pending()] == [1]
    assert not cache.current().stopped_runs()


def test_an_analysis_stopped_at_the_deadline_commits_what_it_made_and_resumes_the_rest(tiny_queue, monkeypatch):
    """An analysis that makes a calibration, then is stopped during its λ̂ rows: the queue commits the calibration
    (and the runs it read), not the λ̂ table; the next command makes and commits the rest."""
    paper_queue.run_queue(allow_cpu=True)
    first, second = cache.StoredTable("calibration", {"run": TINY}), cache.StoredTable("llc", {"run": TINY})
    stops = [True]

    def compute(device, stack, deadline):
        first.get(lambda: ({"t": pd.DataFrame({"eps": [1e-4]})}, {}))
        if stops.pop(0):
            raise Stopped("deadline reached after 0 llc rows")
        second.save({"t": pd.DataFrame({"llc": [3.0]})}, {})

    step = Analysis("page_a", "calibration, then λ̂", (TINY,), (first, second), compute)
    monkeypatch.setattr(chapters, "analyses", lambda preset="paper": [step])
    written = paper_queue.run_analyses(device="cpu")
    assert {p.name for p in written} == {f"train-{cache.cache_key(TINY)}", first.name}
    assert first.committed() and not second.committed() and not step.committed()
    stops.append(False)
    assert [p.name for p in paper_queue.run_analyses(device="cpu")][-2:] == [first.name, second.name]
    assert step.committed() and paper_queue.run_analyses(device="cpu") == []
