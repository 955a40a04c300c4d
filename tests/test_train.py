"""The training loop: config validation before compute, resume, freezing, schedules, the phenomenon."""
import math

import pandas as pd
import pytest
import torch

from plateau_lib import cache, presets, stages
from plateau_lib.train import TrainConfig, lr_factor, train

TINY = dict(d_model=16, steps=12, eval_every=4, batch_size=16, eval_batch=16)


@pytest.mark.parametrize("changes,word", [
    ({"steps": 0}, "steps"), ({"batch_size": -1}, "batch_size"), ({"d_model": 0}, "d_model"),
    ({"task": "sorting"}, "unknown task"), ({"task_kwargs": {"k": 40}}, "'k'"), ({"optimizer": "lion"}, "optimizer"),
    ({"lr": 0.0}, "lr"), ({"copy_groups": ("attn",)}, "copy_groups"), ({"attn_bias_c": -1.0}, "attn_bias_c"),
    ({"eval_every": 0}, "eval_every"), ({"device": "tpu"}, "device"),
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


def test_copied_groups_stay_frozen():
    ref = train(TrainConfig(**TINY), progress=False)
    cfg = TrainConfig(**TINY, seed=5, copy_groups=("kq", "mlp"))
    res = train(cfg, init_state=ref.final_state, progress=False)
    for name, value in res.final_state.items():
        if ".attn.Q." in name or ".attn.K." in name or ".mlp." in name:
            assert torch.equal(value, ref.final_state[name]), name
        elif name.endswith("attn.V.weight"):
            assert not torch.equal(value, ref.final_state[name])


def test_warmup_cosine_schedule():
    cfg = TrainConfig(schedule="warmup_cosine", warmup_steps=200, steps=400)
    assert lr_factor(cfg, 0) == 0 and lr_factor(cfg, 100) == 0.5 and lr_factor(cfg, 200) == 1.0
    assert math.isclose(lr_factor(cfg, 300), 0.5) and math.isclose(lr_factor(cfg, 400), 0.0, abs_tol=1e-12)


def test_sgd_and_muon_run():
    for opt in ("sgd", "muon"):
        res = train(TrainConfig(**TINY, optimizer=opt, lr=1e-2), progress=False)
        assert res.metrics["loss"].notna().all() and len(res.metrics) == 4


def test_cache_roundtrip_and_key(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "LOCAL", tmp_path / "local")
    monkeypatch.setattr(cache, "COMMITTED", tmp_path / "committed")
    cfg = TrainConfig(**TINY)
    first = cache.cached_train(cfg, progress=False)
    again = cache.cached_train(cfg, progress=False)
    assert again.meta["cache"] is not None and first.meta["cache"] is None
    pd.testing.assert_frame_equal(first.metrics, again.metrics, check_exact=False, rtol=1e-12)
    key = cache.cache_key(cfg.to_dict())
    assert sorted(p.name for p in (tmp_path / "local").iterdir()) == [f"train-{key}", f"train-{key}.lock"]
    assert cache.cache_key(cfg.to_dict()) != cache.cache_key(cfg.replace(seed=1).to_dict())
    assert cache.cache_key(cfg.to_dict()) != cache.cache_key(cfg.to_dict(), extra={"reference": "x"})


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
                      "rho": [0.1, 0.8, 0.6, 0.1, 0.06], "apm": [0.1, 0.2, 0.4, 0.7, 0.8]})
    s = stages.plateau_summary(m)
    assert (s["partial_step"], s["jump_step"], s["plateau_span"], s["solved_step"]) == (10, 30, 20, 40)
    assert s["peak_cosine"] == 0.97 and s["peak_rho"] == 0.8 and s["apm_before_jump"] == 0.4
    solved_at_once = m.assign(acc_rest=1.0, acc_first=1.0, acc=1.0)
    assert stages.plateau_summary(solved_at_once)["jump_step"] == 0


def test_concurrent_runs_of_one_config_share_the_cache(tmp_path, monkeypatch):
    """Two notebooks asking for the same run at once: one computes, the other waits and loads it."""
    from concurrent.futures import ThreadPoolExecutor
    monkeypatch.setattr(cache, "LOCAL", tmp_path / "local")
    monkeypatch.setattr(cache, "COMMITTED", tmp_path / "committed")
    cfg = TrainConfig(**TINY)
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(lambda _: cache.cached_train(cfg, progress=False), range(2))
    assert [a.meta["cache"] is None, b.meta["cache"] is None].count(True) == 1
    pd.testing.assert_frame_equal(a.metrics, b.metrics, check_exact=False, rtol=1e-12)
    assert not list((tmp_path / "local").glob("*.partial"))


def test_checkpoints_are_written_at_the_chosen_steps(tmp_path):
    cfg = TrainConfig(**TINY, checkpoint_steps=(0, 8))
    res = train(cfg, run_dir=tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.glob("ckpt_*.pt")) == ["ckpt_000000.pt", "ckpt_000008.pt"]
    first = torch.load(tmp_path / "ckpt_000000.pt", weights_only=True)
    assert not torch.equal(first["lm_head.weight"], res.final_state["lm_head.weight"])
