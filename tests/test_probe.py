"""The probe and the collapse-at-every-location measurements on hand-built inputs with known answers."""
import itertools

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from plateau_lib.engine import cache
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.tasks import make_task
from plateau_lib.plateau import presets, probe

MWS = make_task("mws")
TINY_PROBE = dict(hidden=8, max_iter=20, train_seqs=6, test_seqs=4, data_seed=0)


def test_split_puts_whole_sequences_on_one_side():
    S, G = 7, 3
    features = np.arange(S)[:, None, None] * np.ones((S, G, 2))  # every row carries its sequence's id
    labels = np.arange(S * G).reshape(S, G)
    sets = probe.probe_sets(features, labels, train_seqs=4, test_seqs=3)
    X_train, y_train, seq_train = sets["train"]
    X_test, y_test, seq_test = sets["test"]
    assert set(seq_train) == {0, 1, 2, 3} and set(seq_test) == {4, 5, 6}
    assert set(X_train[:, 0]) == {0, 1, 2, 3} and set(X_test[:, 0]) == {4, 5, 6}
    assert np.array_equal(y_train, labels[:4].ravel()) and np.array_equal(y_test, labels[4:].ravel())
    assert np.array_equal(X_train[:, 0], seq_train)  # row i belongs to the sequence it says


def test_probe_is_fit_on_train_sequences_only(monkeypatch):
    from sklearn.neural_network import MLPClassifier
    seen = []
    fit = MLPClassifier.fit
    monkeypatch.setattr(MLPClassifier, "fit", lambda self, X, y: seen.append(X.copy()) or fit(self, X, y))
    S, G = 10, 4
    features = np.arange(S)[:, None, None] + np.zeros((S, G, 3))
    labels = np.tile(np.arange(G), (S, 1))
    probe.fit_probe(probe.probe_sets(features, labels, 6, 4), hidden=4, max_iter=5)
    assert len(seen) == 1 and set(seen[0][:, 0]) == set(range(6))  # no row of sequences 6..9


def test_probe_on_separable_features_is_perfect():
    S, G, classes = 40, 8, 4
    labels = np.tile(np.arange(G) % classes, (S, 1))
    features = np.eye(classes)[labels] * 3.0  # one-hot of the label: linearly separable
    out = probe.fit_probe(probe.probe_sets(features, labels, 20, 20), hidden=16, max_iter=500)
    assert out["probe_train_acc"] == 1.0 and out["probe_test_acc"] == 1.0


def test_unconverged_fit_is_counted_not_warned(recwarn):
    labels = np.tile(np.arange(4), (10, 1))
    features = np.random.default_rng(0).normal(size=(10, 4, 3))
    out = probe.fit_probe(probe.probe_sets(features, labels, 5, 5), hidden=4, max_iter=2)
    assert out["probe_converged"] is False and out["probe_epochs"] == 2
    assert not [w for w in recwarn if "converge" in str(w.message).lower()]


def _hand_model(d=18):
    """MWS model whose token embeddings are one-hot and position embeddings zero."""
    cfg = TrainConfig(d_model=d)
    model = MWS.build_model(cfg)
    with torch.no_grad():
        model.wte.weight.copy_(torch.eye(MWS.vocab_size, d))
        model.wpe.weight.zero_()
    return model.eval()


def test_locations_match_direct_computation():
    model = _hand_model()
    seqs = MWS.sample(5, torch.Generator().manual_seed(3))
    states = probe.location_states(model, seqs)
    x = seqs[:, :-1]
    block = model.blocks[0]
    embed = model.wte.weight[x] + model.wpe.weight[torch.arange(x.shape[1])]
    attn_out = block.attn(block.ln_1(embed))[0]
    post_attn = embed + attn_out
    post_mlp = post_attn + block.mlp(block.ln_2(post_attn))
    expected = {"embed": embed, "attn_out": attn_out, "post_attn": post_attn, "post_mlp": post_mlp,
                "final_ln": model.ln_f(post_mlp)}
    for name, value in expected.items():
        torch.testing.assert_close(states[name], value)


def test_embedding_cosine_is_the_share_of_equal_tokens():
    """One-hot tokens, zero positions: cos(h_a, h_b) is 1 for equal tokens and 0 otherwise, so the mean over
    the paper's pairs (positions 17..31, i.e. tokens y_1..y_15) is the share of equal pairs."""
    model = _hand_model()
    seqs = MWS.sample(6, torch.Generator().manual_seed(4))
    scalars, cos, norms = probe.measure(model, seqs, MWS, TINY_PROBE | {"train_seqs": 3, "test_seqs": 3})
    y = seqs[:, MWS.prompt_len:]  # position 16 + a holds y_a for a >= 1 (position 16 holds SEP)
    share = np.mean([(y[:, a - 1] == y[:, b - 1]).float().mean().item() for a, b in MWS.cosine_pairs])
    assert scalars["cosine_embed"] == pytest.approx(share, abs=1e-6)
    assert np.allclose(norms["embed"], 1.0)  # one-hot rows have norm 1
    assert cos["embed"][0, 0] == pytest.approx(1.0)


def test_cosines_and_norms_match_pairwise_loops():
    model = MWS.build_model(TrainConfig(d_model=8, seed=0))
    seqs = MWS.sample(4, torch.Generator().manual_seed(5))
    scalars, cos, norms = probe.measure(model, seqs, MWS, TINY_PROBE | {"train_seqs": 2, "test_seqs": 2})
    h = probe.location_states(model, seqs)["post_attn"][:, 16:32]
    by_hand = [F.cosine_similarity(h[:, a], h[:, b], dim=-1).mean().item() for a, b in MWS.cosine_pairs]
    assert len(MWS.cosine_pairs) == 105 and min(b for _, b in MWS.cosine_pairs) == 1  # position 16 excluded
    assert scalars["cosine_post_attn"] == pytest.approx(np.mean(by_hand), abs=1e-5)
    assert norms["post_attn"] == pytest.approx(h.norm(dim=-1).mean(0).detach().numpy(), abs=1e-5)


def test_tables_keep_matrices_at_the_peak_and_last_checkpoint():
    G = 3
    rows = []
    for step, level in ((0, 0.1), (10, 0.9), (20, 0.2)):
        cos = {name: np.full((G, G), level) for name in probe.LOCATIONS}
        norms = {name: np.arange(G) + step for name in probe.NORM_LOCATIONS}
        scalars = {f"cosine_{name}": level for name in probe.LOCATIONS}
        rows.append(probe._wide_row(7, step, scalars, cos, norms, G))
    tables = probe.tables_from_rows(pd.DataFrame(rows))
    assert probe.peak_steps(tables["scalars"]).loc[7] == 10
    peak = tables["cos"][tables["cos"]["at"] == "peak"]
    assert set(peak["step"]) == {10} and set(tables["cos"].loc[tables["cos"]["at"] == "last", "step"]) == {20}
    m = probe.matrices(peak, G)["attn_out"]
    assert np.allclose(m[np.tril_indices(G, -1)], 0.9) and np.isnan(m[np.triu_indices(G)]).all()
    norms = tables["norms"]
    assert norms.query("step == 20 and location == 'embed' and position == 3")["value"].item() == 22


def test_measure_runs_resumes_and_stores(tmp_path, monkeypatch, use_store):
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    cfg = TrainConfig(d_model=8, steps=4, batch_size=8, eval_every=2, eval_batch=8, checkpoint_steps=(0, 2, 4))
    configs = {0: cfg}
    measured, real = [], probe.measure

    def interrupted(*args):
        if len(measured) == 2:
            raise KeyboardInterrupt
        measured.append(1)
        return real(*args)

    monkeypatch.setattr(probe, "measure", interrupted)
    with pytest.raises(KeyboardInterrupt):
        probe.measure_runs(configs, TINY_PROBE, progress=False)
    measured.clear()
    monkeypatch.setattr(probe, "measure", lambda *args: measured.append(1) or real(*args))
    tables, meta = probe.measure_runs(configs, TINY_PROBE, progress=False)
    assert len(measured) == 1  # the two kept rows were not measured again
    assert list(tables["scalars"]["step"]) == [0, 2, 4] and meta["probe_fits"] == 3
    assert not (cache.current().local / f"{probe.probe_table(configs, TINY_PROBE).name}.partial").exists()
    again, _ = probe.measure_runs(configs, TINY_PROBE, progress=False)  # loaded, not measured
    assert len(measured) == 1
    pd.testing.assert_frame_equal(again["scalars"], tables["scalars"])


@pytest.mark.parametrize("change", [{"hidden": 0}, {"max_iter": 1.5}, {"train_seqs": -1}, {"data_seed": True},
                                    {"width": 3}])
def test_bad_probe_settings_are_refused(change):
    with pytest.raises(ValueError, match="hidden|max_iter|train_seqs|data_seed|unknown"):
        presets.check_settings({**TINY_PROBE, **change})


def test_bad_input_is_refused_before_compute():
    with pytest.raises(ValueError, match="train_seqs"):
        probe.split_sequences(5, 4, 2)
    with pytest.raises(ValueError, match="checkpoint_every"):
        presets.probe_runs("cpu", checkpoint_every=0)
    with pytest.raises(ValueError, match="preset"):
        presets.probe_settings("gpu")
    with pytest.raises(ValueError, match="checkpoint_steps"):
        presets.probe_runs("cpu", overrides={"checkpoint_steps": [0]})
    with pytest.raises(ValueError, match="checkpoint_steps is empty"):
        probe.measure_runs({0: TrainConfig(d_model=8, steps=4)}, TINY_PROBE, use_cache=False)


def test_presets_follow_the_paper():
    paper = presets.probe_runs("paper")
    assert list(paper) == [0, 1, 2] and paper[0].checkpoint_steps == tuple(range(0, 401, 10))
    assert paper[0].replace(checkpoint_steps=()) == presets.MWS_PAPER
    settings = presets.probe_settings("paper")
    assert (settings["hidden"], settings["max_iter"], settings["train_seqs"] + settings["test_seqs"]) == (256, 2000, 2048)
    assert list(itertools.islice(presets.probe_runs("cpu")[0].checkpoint_steps, 3)) == [0, 25, 50]


def test_the_paper_column_reads_the_stated_cpu_budget_only_where_it_alone_is_stored(tmp_path, use_store):
    """The paper's probe budget is shown where its tables are stored; else the stated CPU budget's, where those are;
    a build asked to recompute, or given a probe field, measures what it was asked for."""
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    configs = presets.probe_runs("paper")
    paper, on_cpu = presets.probe_settings("paper"), presets.PROBE_PAPER_ON_CPU
    assert on_cpu == {**paper, "max_iter": 100}
    assert probe.page_settings(configs, "paper") == paper            # nothing stored: the paper's
    assert probe.paper_column() is None                              # nothing is computed for the column
    stored = cache.current().committed / probe.probe_table(configs, on_cpu).name
    stored.mkdir(parents=True)
    (stored / "meta.json").write_text("{}")
    assert probe.page_settings(configs, "paper") == on_cpu
    assert probe.page_settings(configs, "paper", use_cache=False) == paper
    assert probe.page_settings(configs, "paper", max_iter=300) == {**paper, "max_iter": 300}
    assert probe.page_settings(configs, "cpu") == presets.probe_settings("cpu")
    assert probe.paper_column() is None                              # tables without the training runs: not shown
    own = cache.current().committed / probe.probe_table(configs, paper).name
    own.mkdir()
    (own / "meta.json").write_text("{}")
    assert probe.page_settings(configs, "paper") == paper            # the paper's own budget comes first


def test_phase_views_pair_train_and_test_and_list_the_peak_cosines():
    """Two hand-built seeds, the second never jumped (NaN before the jump): pairs read 'train / test', a pair with
    nothing reads '–', the cosines are each location's, one narrow table each."""
    row = {"seed": 0, "partial_step": 20, "jump_step": 180, "model_acc_before_jump": 0.5, "model_acc_tf_before_jump": 0.25,
           **{f"probe_{split}_{phase}": value for phase in probe.PHASES
              for split, value in (("train", 0.9), ("test", 0.125))},
           **{f"peak_{name}": i / 10 for i, name in enumerate(probe.LOCATIONS)}}
    never = {**row, "seed": 1, "jump_step": np.nan, "probe_train_before_jump": np.nan, "probe_test_before_jump": np.nan}
    view, cosines = probe.phase_views(pd.DataFrame([row, never]))
    assert view.loc[0, "probe mid-plateau"] == "0.90 / 0.12" and view.loc[0, "model before the jump"] == "0.50 / 0.25"
    assert view.loc[1, "probe before the jump"] == "–" and view.index.name == "seed"
    assert list(cosines.columns) == list(probe.LOCATIONS.values()) and cosines.loc[1, "after the final layer norm"] == 0.4
