"""The training loop: config validation before compute, resume, freezing, schedules, the phenomenon."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from plateau_lib.engine import cache, stages
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.setup import lr_factor
from plateau_lib.engine.train import train
from plateau_lib.plateau import presets

TINY = dict(d_model=16, steps=12, eval_every=4, batch_size=16, eval_batch=16)


@pytest.mark.parametrize("changes,word", [
    ({"steps": 0}, "steps"), ({"batch_size": -1}, "batch_size"), ({"d_model": 0}, "d_model"),
    ({"task": "sorting"}, "unknown task"), ({"task_kwargs": {"k": 40}}, "'k'"), ({"optimizer": "lion"}, "optimizer"),
    ({"lr": 0.0}, "lr"), ({"copy_groups": ("attn",)}, "copy_groups"), ({"attn_bias_c": -1.0}, "attn_bias_c"),
    ({"eval_every": 0}, "eval_every"), ({"device": "tpu"}, "device"), ({"lr_floor": 1.5}, "lr_floor"),
    ({"decay_steps": -1}, "decay_steps"), ({"lr_floor": 0.1}, "warmup_cosine"), ({"record_train_loss": 1}, "True or"),
    ({"init_nudge": 1}, "init_nudge must be True or False"),
])
def test_bad_config_raises_before_training(changes, word):
    with pytest.raises(ValueError, match=word):
        TrainConfig(**changes)


def test_presets_reject_unknown_names():
    with pytest.raises(ValueError, match="preset"):
        presets.mws_config("gpu")
    with pytest.raises(ValueError, match="stepz"):
        presets.mws_config("cpu", stepz=3)
    paper = presets.mws_config("paper")  # the paper preset is the reference config (mws.yaml)
    assert paper.replace(task_kwargs={}) == TrainConfig() and paper.task_kwargs == {"n": 16, "p": 17, "k": 2}


def test_resume_gives_the_uninterrupted_table(tmp_path):
    cfg = TrainConfig(**TINY)
    full = train(cfg, progress=False)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, run_dir=tmp_path, save_every=1, progress=False, stop_after=6)
    assert (tmp_path / "resume.pt").exists()
    resumed = train(cfg, run_dir=tmp_path, save_every=1, progress=False)
    pd.testing.assert_frame_equal(full.metrics, resumed.metrics)
    pd.testing.assert_frame_equal(full.positions, resumed.positions)
    assert not (tmp_path / "resume.pt").exists()


def test_a_state_saved_before_a_field_was_added_resumes_and_another_runs_state_does_not(tmp_path):
    """A resume state written before ``lr_floor``, ``init_nudge`` … existed (its config lacks them) is the same run
    at their old-behaviour defaults and resumes, to the uninterrupted table; a state of another config is ignored.
    (Seeds 3 and 4 of the stages diagnosis, saved on a GPU before those fields, restarted from step 0.)"""
    cfg = TrainConfig(**TINY)
    full = train(cfg, progress=False)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, run_dir=tmp_path, save_every=1, progress=False, stop_after=6)
    state = torch.load(tmp_path / "resume.pt", weights_only=True)
    for added in ("lr_floor", "decay_steps", "record_train_loss", "init_nudge"):
        del state["config"][added]
    state["config"]["device"] = "cuda"
    torch.save(state, tmp_path / "resume.pt")
    from plateau_lib.engine.train import _resume_state
    assert _resume_state(tmp_path, cfg)["step"] == state["step"]
    assert _resume_state(tmp_path, cfg.replace(lr=cfg.lr * 2)) is None
    assert _resume_state(tmp_path, cfg.replace(init_nudge=True)) is None
    resumed = train(cfg, run_dir=tmp_path, save_every=1, progress=False)
    pd.testing.assert_frame_equal(full.metrics, resumed.metrics)


def test_training_loss_of_every_step_is_kept_and_resumes(tmp_path):
    """record_train_loss: step 0's training loss is the untrained model's loss on the first batch (chance, log 18,
    as the held-out loss at step 0), one value per step, and an interrupted run resumes to the same values."""
    cfg = TrainConfig(**TINY, record_train_loss=True)
    full = train(cfg, progress=False)
    losses = full.arrays["train_loss"]
    assert losses.shape == (cfg.steps,) and losses.dtype == np.float32
    assert losses[0] == pytest.approx(full.metrics["loss"].iloc[0], abs=0.05)
    assert "train_loss" not in train(cfg.replace(record_train_loss=False), progress=False).arrays
    with pytest.raises(KeyboardInterrupt):
        train(cfg, run_dir=tmp_path, save_every=1, progress=False, stop_after=5)
    np.testing.assert_array_equal(train(cfg, run_dir=tmp_path, progress=False).arrays["train_loss"], losses)


def test_adamw_schedule_floor_and_defaults_keep_every_old_key():
    """The fields added for the language-model miniature leave every key made before them unchanged."""
    assert "lr_floor" not in TrainConfig().key_dict() and "record_train_loss" not in TrainConfig().key_dict()
    assert cache.cache_key(TrainConfig()) == cache.cache_key(TrainConfig(lr_floor=0.0, decay_steps=0))
    cfg = TrainConfig(**LEARN, optimizer="adamw", weight_decay=0.1, schedule="warmup_cosine", warmup_steps=5,
                      lr_floor=0.1, decay_steps=10, lr=1e-2)
    assert lr_factor(cfg, 10) == pytest.approx(0.1) and lr_factor(cfg, cfg.steps) == pytest.approx(0.1)
    res = train(cfg, progress=False)
    assert res.metrics["loss"].iloc[-1] < res.metrics["loss"].iloc[0]


def test_another_devices_resume_state_continues_with_a_reseeded_stream(tmp_path):
    """A GPU run's resume state (its generator state is a CUDA one, 16 bytes) continues on a CPU: the weights and
    evaluations so far are kept, the data stream is seeded anew at the step reached, and the result says so."""
    cfg = TrainConfig(**TINY)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, run_dir=tmp_path, save_every=1, progress=False, stop_after=6)
    state = torch.load(tmp_path / "resume.pt", weights_only=True)
    state["gen"], state["device"] = torch.zeros(16, dtype=torch.uint8), "cuda"
    state["by_device"] = {"cuda": 100.0}  # 100 s on the GPU before it stopped
    torch.save(state, tmp_path / "resume.pt")
    full = train(cfg, progress=False)
    resumed = train(cfg, run_dir=tmp_path, save_every=1, progress=False)
    steps = full.metrics["step"]
    pd.testing.assert_frame_equal(full.metrics[steps <= state["step"]], resumed.metrics[steps <= state["step"]])
    assert not full.metrics[steps > state["step"]].equals(resumed.metrics[steps > state["step"]])
    assert resumed.meta["data_stream_reseeded_at"] == state["step"] and "data_stream_reseeded_at" not in full.meta
    times = resumed.meta["wall_time_s_by_device"]  # each device's time, for the search table's CPU- and GPU-hours
    assert times["cuda"] == 100.0 and 0 < times["cpu"] <= resumed.meta["wall_time_s"]
    assert "wall_time_s_by_device" not in full.meta


def test_copied_groups_stay_frozen():
    ref = train(TrainConfig(**TINY), progress=False)
    cfg = TrainConfig(**TINY, seed=5, copy_groups=("kq", "mlp"))
    res = train(cfg, init_state=ref.final_state, progress=False)
    for name, value in res.final_state.items():
        if ".attn.Q." in name or ".attn.K." in name or ".mlp." in name:
            assert torch.equal(value, ref.final_state[name]), name
        elif name.endswith("attn.V.weight"):
            assert not torch.equal(value, ref.final_state[name])


def test_one_cycle_schedule_is_a_triangle():
    cfg = TrainConfig(schedule="one_cycle", steps=400)
    assert [lr_factor(cfg, s) for s in (0, 100, 200, 300, 400)] == [0.0, 0.5, 1.0, 0.5, 0.0]


def test_warmup_cosine_schedule():
    cfg = TrainConfig(schedule="warmup_cosine", warmup_steps=200, steps=400)
    assert lr_factor(cfg, 0) == 0 and lr_factor(cfg, 100) == 0.5 and lr_factor(cfg, 200) == 1.0
    assert math.isclose(lr_factor(cfg, 300), 0.5) and math.isclose(lr_factor(cfg, 400), 0.0, abs_tol=1e-12)


def test_sgd_and_muon_run():
    for opt in ("sgd", "muon"):
        res = train(TrainConfig(**TINY, optimizer=opt, lr=1e-2), progress=False)
        assert res.metrics["loss"].notna().all() and len(res.metrics) == 4


def test_cache_roundtrip_and_key(tmp_path, use_store):
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    cfg = TrainConfig(**TINY)
    first = cache.current().train(cfg, progress=False)
    again = cache.current().train(cfg, progress=False)
    assert again.meta["cache"] is not None and first.meta["cache"] is None
    pd.testing.assert_frame_equal(first.metrics, again.metrics, check_exact=False, rtol=1e-12)
    key = cache.cache_key(cfg)
    assert sorted(p.name for p in (tmp_path / "local").iterdir()) == [f"train-{key}", f"train-{key}.lock"]
    assert cache.cache_key(cfg) != cache.cache_key(cfg.replace(seed=1))
    assert cache.cache_key(cfg) != cache.cache_key(cfg, extra={"reference": "x"})


def test_cpu_preset_shows_the_plateau_phenomenon():
    """The cpu miniature: y_1 first, a collapsed plateau with repetition, APM rising, then a jump."""
    res = train(presets.mws_config("cpu"), progress=False)
    s = stages.plateau_summary(res.metrics)
    assert s["partial_step"] is not None and s["jump_step"] is not None
    assert s["partial_step"] < s["jump_step"] and s["plateau_span"] >= 50
    assert s["peak_cosine"] >= 0.8 and s["peak_rho"] >= 0.5 and s["final_acc"] >= 0.95
    assert s["apm_before_jump"] > s["apm_start"] + 0.1
    assert abs(res.metrics["rho_data"].iloc[0] - 0.058) < 0.03


def test_plateau_summary_on_hand_built_curves():
    m = pd.DataFrame({"step": [0, 10, 20, 30, 40], "acc_first": [0.1, 0.95, 1, 1, 1], "acc_rest": [0.05, 0.05, 0.06, 0.9, 1],
                      "acc": [0.05, 0.1, 0.12, 0.9, 0.99], "cosine": [0.1, 0.9, 0.97, 0.2, 0.1],
                      "rho": [0.1, 0.8, 0.6, 0.1, 0.06], "apm": [0.1, 0.2, 0.4, 0.7, 0.8],
                      "loss_out": [2.9, 2.5, 2.48, 1.0, 0.5]})
    s = stages.plateau_summary(m)
    assert (s["partial_step"], s["jump_step"], s["plateau_span"], s["solved_step"]) == (10, 30, 20, 40)
    # steps 10 and 20 (2.5, 2.48: within 2%); the jump's step is not counted
    assert stages.plateau_evaluations(m, s["partial_step"], s["jump_step"]) == 2
    assert s["peak_cosine"] == 0.97 and s["peak_rho"] == 0.8 and s["apm_before_jump"] == 0.4
    solved_at_once = m.assign(acc_rest=1.0, acc_first=1.0, acc=1.0)
    assert stages.plateau_summary(solved_at_once)["jump_step"] == 0
    long_plateau = pd.DataFrame({"step": range(0, 70, 10), "acc_first": [0.1] + [1.0] * 6,
                                 "acc_rest": [0.05] * 5 + [0.9, 1.0], "acc": [0.05] * 5 + [0.9, 1.0],
                                 "cosine": 0.9, "rho": 0.8, "apm": [0.1, 0.2, 0.3, 0.4, 0.5, 0.8, 0.9],
                                 "loss_out": [2.9, 2.5, 2.5, 2.49, 2.48, 1.2, 0.5]})
    assert stages.plateau_summary(long_plateau)["apm_rank_corr"] == pytest.approx(1.0)
    s = stages.plateau_summary(long_plateau)
    assert stages.plateau_evaluations(long_plateau, s["partial_step"], s["jump_step"]) == 4  # steps 10-40
    # the same span with a loss that keeps falling (5% an evaluation) is no plateau: one evaluation at a time
    falling = long_plateau.assign(loss_out=[2.9, 2.5, 2.375, 2.256, 2.143, 1.2, 0.5])
    assert stages.plateau_evaluations(falling, s["partial_step"], s["jump_step"]) == 1
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a flat APM before the jump has no rank order: NaN, and nothing on the page
        assert math.isnan(stages.plateau_summary(long_plateau.assign(apm=0.3))["apm_rank_corr"])


def test_concurrent_runs_of_one_config_share_the_cache(tmp_path, use_store):
    """Two notebooks asking for the same run at once: one computes, the other waits and loads it."""
    from concurrent.futures import ThreadPoolExecutor
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    cfg = TrainConfig(**TINY)
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(lambda _: cache.current().train(cfg, progress=False), range(2))
    assert [a.meta["cache"] is None, b.meta["cache"] is None].count(True) == 1
    pd.testing.assert_frame_equal(a.metrics, b.metrics, check_exact=False, rtol=1e-12)
    assert not list((tmp_path / "local").glob("*.partial"))


def test_checkpoints_are_written_at_the_chosen_steps(tmp_path):
    cfg = TrainConfig(**TINY, checkpoint_steps=(0, 8))
    res = train(cfg, run_dir=tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.glob("ckpt_*.pt")) == ["ckpt_000000.pt", "ckpt_000008.pt"]
    first = torch.load(tmp_path / "ckpt_000000.pt", weights_only=True)
    assert not torch.equal(first["lm_head.weight"], res.final_state["lm_head.weight"])


# --- attn_bias_from (Fig. 43): the bias switches on at a training step --------------------------------------
# Definition: the update with 0-based index `step` (taken on the batch sampled at that step) uses the bias iff
# step >= attn_bias_from, and the evaluation after `s` updates uses it iff s >= attn_bias_from.

SWITCH = dict(d_model=16, steps=10, eval_every=2, batch_size=16, eval_batch=16, device="cpu")


def _train_with_states(cfg):
    """train(cfg) and the state dict after every update (keyed by the number of updates done)."""
    states = {}

    def keep(done, model):
        states[done] = {k: v.clone() for k, v in model.state_dict().items()}

    return train(cfg, progress=False, callbacks=[keep]), states


@pytest.mark.parametrize("t", [5, 6])  # between two evaluations, and on one
def test_attn_bias_from_switches_on_at_step_t(t):
    from plateau_lib.plateau import metrics as M
    plain, plain_states = _train_with_states(TrainConfig(**SWITCH))
    switched, switched_states = _train_with_states(TrainConfig(**SWITCH, attn_bias_c=10.0, attn_bias_from=t))
    # updates 0..t-1 are unbiased: the parameters agree bitwise after t updates, and differ after t + 1
    for done in range(1, t + 1):
        for name, value in plain_states[done].items():
            assert torch.equal(value, switched_states[done][name]), (done, name)
    q = "blocks.0.attn.Q.weight"
    assert not torch.equal(plain_states[t + 1][q], switched_states[t + 1][q])
    # evaluations at steps < t are the unbiased run's, bitwise
    early = plain.metrics["step"] < t
    assert early.sum() == len(range(0, t, 2))
    pd.testing.assert_frame_equal(plain.metrics[early], switched.metrics[early], check_exact=True)
    early_pos = plain.positions["step"] < t
    pd.testing.assert_frame_equal(plain.positions[early_pos], switched.positions[early_pos], check_exact=True)
    n_early = int(early.sum())
    assert np.array_equal(plain.arrays["attn"][:n_early], switched.arrays["attn"][:n_early])
    # from step t on, the evaluations see the bias: every later loss differs
    late = ~early
    assert (plain.metrics.loss[late] != switched.metrics.loss[late]).all()
    assert (plain.metrics.apm[late] != switched.metrics.apm[late]).all()
    if t % 2 == 0:  # an evaluation right at the switch: same parameters, so the scores differ by the mask alone
        mask = M.bias_mask(TrainConfig(**SWITCH).make_task(), 10.0)[0, 0].numpy()
        assert mask[16, 0] == 1.0 and (mask == 10.0).sum() == 30
        np.testing.assert_allclose(switched.arrays["attn"][n_early], plain.arrays["attn"][n_early] * mask,
                                   rtol=1e-5, atol=1e-8)


def _reference_loop(cfg, bias_from):
    """The training loop written out from its definition (constant lr, Adam, one batch per step)."""
    from plateau_lib.engine.setup import build_model
    from plateau_lib.plateau import metrics as M
    task = cfg.make_task()
    model = build_model(cfg, torch.device("cpu"))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    mask = M.bias_mask(task, cfg.attn_bias_c)
    for step in range(cfg.steps):
        seqs = task.sample(cfg.batch_size, gen)
        loss = M.loss_all(model(seqs[:, :-1], attn_bias=mask if step >= bias_from else None), seqs)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.state_dict()


@pytest.mark.parametrize("t", [0, 4])
def test_attn_bias_from_matches_a_hand_written_loop(t):
    """from=0 is a run biased from the very first update; from=t biases updates t, t+1, ... only."""
    cfg = TrainConfig(**{**SWITCH, "steps": 8}, attn_bias_c=10.0, attn_bias_from=t)
    final = train(cfg, progress=False).final_state
    same = _reference_loop(cfg, t)
    for name, value in final.items():
        torch.testing.assert_close(value, same[name], rtol=1e-6, atol=1e-7, msg=name)
    for wrong in (t - 1, t + 1):  # a switch one step early or late is detected
        if wrong >= 0:
            other = _reference_loop(cfg, wrong)
            q = "blocks.0.attn.Q.weight"
            assert not torch.allclose(final[q], other[q], rtol=1e-6, atol=1e-7)


def test_attn_bias_from_zero_biases_the_first_evaluation():
    plain = train(TrainConfig(**{**SWITCH, "steps": 2}), progress=False)
    biased = train(TrainConfig(**{**SWITCH, "steps": 2}, attn_bias_c=10.0), progress=False)
    assert TrainConfig(attn_bias_c=10.0).attn_bias_from == 0
    from plateau_lib.plateau import metrics as M
    mask = M.bias_mask(TrainConfig(**SWITCH).make_task(), 10.0)[0, 0].numpy()
    np.testing.assert_allclose(biased.arrays["attn"][0], plain.arrays["attn"][0] * mask, rtol=1e-5, atol=1e-8)
    assert not np.array_equal(biased.arrays["attn"][0], plain.arrays["attn"][0])


# --- SGD and Muon actually train ------------------------------------------------------------------------------

LEARN = dict(task_kwargs={"n": 4}, d_model=16, steps=40, eval_every=40, batch_size=32, eval_batch=64, device="cpu")


def _changed(cfg, res):
    from plateau_lib.engine.setup import build_model
    init = build_model(cfg, torch.device("cpu")).state_dict()
    return {name for name, value in res.final_state.items() if not torch.equal(value, init[name])}


def test_sgd_lowers_the_loss():
    cfg = TrainConfig(**LEARN, optimizer="sgd", lr=0.5)
    res = train(cfg, progress=False)
    first, last = res.metrics["loss"].iloc[0], res.metrics["loss"].iloc[-1]
    assert abs(first - math.log(18)) < 0.1 and last < first - 0.5, (first, last)
    assert _changed(cfg, res) == set(res.final_state)  # every parameter moved


def test_muon_lowers_the_loss():
    cfg = TrainConfig(**LEARN, optimizer="muon", lr=1e-2)
    res = train(cfg, progress=False)
    first, last = res.metrics["loss"].iloc[0], res.metrics["loss"].iloc[-1]
    assert last < first - 0.5, (first, last)
    assert _changed(cfg, res) == set(res.final_state)
    # Muon's own share: the 2-D block matrices alone (Adam's lr ~ 0 on the rest) still lower the loss ...
    muon_only = TrainConfig(**LEARN, optimizer="muon", lr=1e-9, muon_lr=0.05)
    res = train(muon_only, progress=False)
    assert res.metrics["loss"].iloc[-1] < first - 0.1
    # ... and with muon_lr ~ 0 as well nothing learns
    frozen = train(muon_only.replace(muon_lr=1e-9), progress=False)
    assert abs(frozen.metrics["loss"].iloc[-1] - first) < 1e-3


def test_the_untrained_run_is_the_trained_runs_step_0_at_every_evaluation():
    """``untrained``: the run's initial model evaluated as ``train`` evaluates it, at the run's evaluation steps, with
    the attention bias switched on where the run switches it on."""
    from plateau_lib.engine.train import evaluation_steps, untrained
    cfg = presets.MWS_CPU.replace(d_model=32, steps=30, eval_every=10, attn_bias_c=10.0, attn_bias_from=20)
    trained, frozen = train(cfg, progress=False), untrained(cfg)
    assert list(frozen.metrics["step"]) == list(trained.metrics["step"]) == evaluation_steps(cfg) == [0, 10, 20, 30]
    pd.testing.assert_series_equal(frozen.metrics.iloc[0], trained.metrics.iloc[0], check_names=False)
    assert frozen.metrics["cosine"].iloc[1] == frozen.metrics["cosine"].iloc[0]       # nothing learned
    assert frozen.metrics["cosine"].iloc[2] != frozen.metrics["cosine"].iloc[1]       # the bias from step 20
    assert frozen.meta["untrained"] and frozen.meta["wall_time_s"] == 0.0
    assert evaluation_steps(cfg.replace(steps=25, eval_steps=[3, 25])) == [0, 3, 10, 20, 25]


def test_a_nudged_start_is_one_float_step_up_and_moves_the_run_as_another_machine_would():
    """``init_nudge`` keeps every old key, moves each initial weight to the next float up (no further), and changes
    the trained run's numbers: the perturbation the fragile verdicts are judged under."""
    from plateau_lib.engine.setup import build_model
    cfg = TrainConfig(**TINY)
    assert "init_nudge" not in cfg.key_dict() and cache.cache_key(cfg) == cache.cache_key(cfg.replace(init_nudge=False))
    plain, nudged = build_model(cfg, "cpu").state_dict(), build_model(cfg.replace(init_nudge=True), "cpu").state_dict()
    for name, w in plain.items():
        assert torch.equal(nudged[name], torch.nextafter(w, torch.full_like(w, float("inf")))), name
    a, b = train(cfg, progress=False), train(cfg.replace(init_nudge=True), progress=False)
    moved = max((a.final_state[k] - b.final_state[k]).abs().max().item() for k in a.final_state)
    assert 0 < moved < 1e-5  # a rounding difference after 12 steps, not another run
    assert not a.metrics["cosine"].equals(b.metrics["cosine"])


def test_the_plateau_reading_counts_from_the_partial_solution_to_the_evaluation_before_the_jump():
    """The loss sits still from step 10 to the jump's step 40 and beyond: the evaluations at 10, 20 and 30 count,
    the jump's own does not; a run that never jumps (None or NaN) counts to its end."""
    m = pd.DataFrame({"step": [0, 10, 20, 30, 40, 50], "loss_out": [2.9, 2.5, 2.5, 2.5, 2.5, 2.5]})
    assert stages.plateau_evaluations(m, 10, 40) == 3
    assert stages.plateau_evaluations(m, 10, None) == stages.plateau_evaluations(m, 10.0, float("nan")) == 5
    assert stages.plateau_evaluations(m, None, 40) == stages.plateau_evaluations(m, float("nan"), 40) == 0
    # the stretch is measured from its own first value: 2.5 -> 2.45 -> 2.40 is 2% then 4% below 2.5
    assert stages.flat_evaluations([2.5, 2.45, 2.40]) == 2 and stages.flat_evaluations([]) == 0
    assert stages.longest_flat_stretch([0, 10, 30], [1.0, 1.0, 1.5], 0.1) == 10
