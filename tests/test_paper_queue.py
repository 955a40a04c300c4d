"""The paper queue: declared runs with no committed result are trained, committed, and not run again."""
import pytest
import torch

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
    assert [(e.page, e.label) for e in todo] == [("page_a", 0), ("page_a", 1), ("page_b", "reference"),
                                                             ("page_b", ("KQ", 1))]
    assert todo[-1].extra == {"reference": cache.cache_key(TINY)}  # copied runs are keyed by their reference
    written = paper.run_queue(allow_cpu=True)
    assert len(written) == 3  # page_a's seed 0 and page_b's reference are the same run
    assert all(not list(p.glob("*.pt")) for p in written)
    assert paper.pending() == []


def test_budget_stops_before_the_next_run(tiny_queue):
    assert paper.run_queue(budget_s=-1, allow_cpu=True) == []


def test_unknown_page_is_refused(tiny_queue):
    with pytest.raises(ValueError, match="unknown page"):
        paper.pending(["page_z"])


def test_status_lists_every_run_and_replace_cpu_requeues_cpu_results(tiny_queue):
    paper.run_queue(pages=["page_a"], allow_cpu=True)  # computed here, on a CPU
    states = {(e.page, e.label): e.status for e in paper.status()}
    assert states == {("page_a", 0): paper.ON_CPU, ("page_a", 1): paper.ON_CPU,
                      ("page_b", "reference"): paper.ON_CPU, ("page_b", ("KQ", 1)): paper.MISSING}
    assert [e.label for e in paper.pending()] == [("KQ", 1)]
    assert len(paper.pending(replace_cpu=True)) == 4
    assert paper.status(preset="cpu")[0].status == paper.COMMITTED  # a cpu-preset run belongs on a CPU
    assert all(paper.estimate_gpu_s(e.config) > 0 for e in paper.status())


def test_paper_runs_need_a_gpu_unless_forced(tiny_queue):
    with pytest.raises(ValueError, match="FORCE_CPU"):
        paper.run_queue(device="cpu")


def test_a_stopped_queue_resumes_from_its_packed_partial_state(tiny_queue, tmp_path, monkeypatch):
    """A deadline stops training part-way; --tar packs the partial state; --unpack elsewhere resumes it."""
    long = {"page_a": {0: TINY.replace(steps=400, eval_every=50)}}
    monkeypatch.setattr(presets, "page_runs", lambda preset="paper": long)
    assert paper.run_queue(budget_s=0.5, allow_cpu=True) == []
    assert len(paper.partial_folders()) == 1
    tar = paper.pack(tmp_path / "q.tar.gz", [])
    home = tmp_path / "home"
    assert paper.unpack(tar, home) == [f".cache/results/{paper.partial_folders()[0].name}"]
    resume = torch.load(next(home.glob(".cache/results/*.partial/resume.pt")), weights_only=True)
    assert 0 < resume["step"] < 400
    monkeypatch.setattr(cache, "LOCAL", home / ".cache" / "results")
    written = paper.run_queue(allow_cpu=True)
    assert len(written) == 1 and paper.pending() == [] and not paper.partial_folders()


def test_unpack_refuses_runs_no_page_declares(tiny_queue, tmp_path):
    folder = tmp_path / "results" / "train-0123456789abcdef"
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text("{}")
    import tarfile
    with tarfile.open(tmp_path / "stray.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname=f"results/{folder.name}")
    with pytest.raises(ValueError, match="no page declares"):
        paper.unpack(tmp_path / "stray.tar.gz", tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()


def test_queue_trains_analyses_commits_and_packs_the_miniature_language_models(tiny_queue, tmp_path, monkeypatch):
    from plateau_lib import llm
    tiny = llm.MiniatureConfig(n_layer=1, d_model=16, n_head=2, d_ff=32, batch_size=2, context=8, steps=2)
    monkeypatch.setattr(presets, "llm_miniatures", lambda preset: {("pythia", 0): tiny})
    monkeypatch.setattr(llm, "LOCAL", tmp_path / "llm")
    monkeypatch.setattr(llm, "corpus_tokens", lambda arch, sources: torch.arange(3, 503).numpy())
    monkeypatch.setattr(llm, "prompts", lambda n, seed: ["What is a plant?", "Why is the sky blue?"][:n] * (n // 2))
    assert [s for _, _, s in paper.llm_status()] == [paper.MISSING]
    written = paper.run_llm(device="cpu")
    assert [p.name for p in written] == [llm.stored_name(tiny)] and paper.llm_status()[0][2] == paper.COMMITTED
    assert not list(written[0].rglob("*.safetensors")), "checkpoints are never committed"
    assert paper.run_llm(device="cpu") == []
    tar = paper.pack(tmp_path / "q.tar.gz", written)
    assert paper.unpack(tar, tmp_path / "home") == [f"results/{written[0].name}"]
