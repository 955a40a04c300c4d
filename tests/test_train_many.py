"""train_many: S runs stacked into one computation give each run the table ``train`` gives it."""
import pandas as pd
import pytest
import torch

from plateau_lib.engine import cache
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.train import train, train_many

BASE = TrainConfig(task_kwargs={"n": 8, "p": 11}, d_model=16, steps=20, eval_every=5, batch_size=32, eval_batch=32,
                   lr=3e-3, device="cpu")


def _close(a, b, tol=1e-5):
    """Same steps and seeds, metrics and final weights equal to float tolerance (a jump's timing amplifies
    rounding, so only short runs agree this closely)."""
    assert a.metrics[["step", "seed"]].equals(b.metrics[["step", "seed"]])
    pd.testing.assert_frame_equal(a.metrics, b.metrics, check_exact=False, atol=tol, rtol=tol)
    pd.testing.assert_frame_equal(a.positions, b.positions, check_exact=False, atol=tol, rtol=tol)
    for k in a.final_state:
        torch.testing.assert_close(a.final_state[k], b.final_state[k], atol=tol, rtol=tol)


@pytest.fixture(scope="module")
def reference():
    return train(BASE.replace(steps=10), progress=False).final_state


def _mixed(reference):
    """Three runs that differ in everything a run may keep for itself."""
    return ([BASE.replace(seed=1),
             BASE.replace(seed=2, attn_bias_c=10.0, attn_bias_from=7, steps=15, eval_every=4),
             BASE.replace(seed=3, copy_groups=("kq", "embed"), weight_decay=0.01, lr=1e-2, grad_clip=0.5,
                          schedule="warmup_cosine", warmup_steps=5)],
            [None, None, reference])


def test_stacked_runs_equal_sequential_runs(reference):
    configs, inits = _mixed(reference)
    sequential = train_many(configs, inits, backend="sequential", progress=False)
    stacked = train_many(configs, inits, backend="stacked", progress=False)
    for a, b in zip(sequential, stacked):
        _close(a, b)
    assert [len(r.metrics) for r in stacked] == [5, 5, 5]  # steps 0,5,..,20 | 0,4,8,12,15 | 0,5,..,20
    assert stacked[1].metrics.step.tolist() == [0, 4, 8, 12, 15]
    for name, value in stacked[2].final_state.items():  # copied groups stay exactly as copied
        if ".attn.Q." in name or ".attn.K." in name or name.startswith(("wte", "wpe")):
            assert torch.equal(value, reference[name]), name


def test_stacked_sgd_with_and_without_momentum():
    configs = [BASE.replace(optimizer="sgd", lr=0.05, momentum=m, seed=s, weight_decay=w)
               for s, m, w in [(0, 0.9, 0.0), (1, 0.0, 0.01)]]
    for a, b in zip(train_many(configs, backend="sequential", progress=False),
                    train_many(configs, backend="stacked", progress=False)):
        _close(a, b)


def test_a_stacked_run_resumes_under_either_engine(tmp_path, reference):
    configs, inits = _mixed(reference)
    dirs = [tmp_path / str(i) for i in range(3)]
    whole = train_many(configs, inits, backend="stacked", progress=False)
    with pytest.raises(KeyboardInterrupt):
        train_many(configs, inits, dirs, save_every=1, backend="stacked", progress=False, stop_after=12)
    assert all((d / "resume.pt").exists() for d in dirs)
    again = train(configs[0], run_dir=dirs[0], progress=False)  # torch's optimizer state format
    _close(whole[0], again)
    resumed = train_many(configs[1:], inits[1:], dirs[1:], backend="stacked", progress=False)
    for a, b in zip(whole[1:], resumed):
        _close(a, b)
    assert not any((d / "resume.pt").exists() for d in dirs)


def test_checkpoints_are_written_per_run(tmp_path):
    configs = [BASE.replace(seed=s, checkpoint_steps=(0, 10)) for s in (0, 1)]
    results = train_many(configs, run_dirs=[tmp_path / "a", tmp_path / "b"], backend="stacked", progress=False)
    for folder, result in zip(("a", "b"), results):
        assert sorted(p.name for p in (tmp_path / folder).glob("ckpt_*.pt")) == ["ckpt_000000.pt", "ckpt_000010.pt"]
    first = torch.load(tmp_path / "a" / "ckpt_000000.pt", weights_only=True)
    other = torch.load(tmp_path / "b" / "ckpt_000000.pt", weights_only=True)
    assert not torch.equal(first["wte.weight"], other["wte.weight"])  # each run its own seed


@pytest.mark.parametrize("configs,word", [
    ([], "empty"),
    ([BASE, BASE.replace(d_model=32)], "architecture"),
    ([BASE, BASE.replace(task_kwargs={"n": 6, "p": 11})], "block_size"),
    (["mws"], "TrainConfig"),
])
def test_bad_input_is_refused_before_compute(configs, word):
    with pytest.raises(ValueError, match=word):
        train_many(configs, progress=False)


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend"):
        train_many([BASE], backend="parallel")


def test_muon_falls_back_to_sequential_and_says_so():
    configs = [BASE.replace(optimizer="muon", steps=4, seed=s) for s in (0, 1)]
    with pytest.warns(UserWarning, match="do not stack"):
        stacked = train_many(configs, backend="stacked", progress=False)
    for a, b in zip(stacked, [train(c, progress=False) for c in configs]):
        pd.testing.assert_frame_equal(a.metrics, b.metrics)


def test_train_many_through_a_store_loads_hits_and_stores_each_run(tmp_path, use_store):
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    configs = [BASE.replace(seed=s, steps=6) for s in (0, 1, 2)]
    first = cache.current().train(configs[1], progress=False)
    results = cache.current().train_many(configs + [configs[0]], progress=False, backend="stacked")
    assert [r.meta["cache"] is None for r in results] == [True, False, True, True]  # a duplicate is trained once
    assert results[0] is results[3]
    pd.testing.assert_frame_equal(results[1].metrics, first.metrics)
    stored = [p for p in (tmp_path / "local").glob("train-*") if p.is_dir()]
    assert len(stored) == 3 and not any(p.suffix == ".partial" for p in stored)


def test_extra_evaluation_steps_and_kept_checkpoints(tmp_path, use_store):
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    cfg = BASE.replace(eval_steps=(1, 2, 3), checkpoint_steps=(0, 3, 20))
    result = cache.current().train(cfg, progress=False)
    assert result.metrics.step.tolist() == [0, 1, 2, 3, 5, 10, 15, 20]
    assert sorted(cache.current().checkpoints(cfg)) == [0, 3, 20]  # kept with the local result, not in the partial folder
    assert BASE.key_dict() == BASE.replace(eval_steps=()).key_dict()  # the new field keeps old keys
    with pytest.raises(ValueError, match="eval_steps"):
        BASE.replace(eval_steps=(21,))


def test_capturable_step_equals_eager_stacked_step_and_its_schedules():
    """``cuda_graphs=True`` off CUDA runs the capturable step eagerly: device-side learning rates and Adam's
    corrections give the same weights as the host-side ones, for every schedule, Adam and SGD with momentum."""
    configs = [BASE.replace(seed=1, schedule="one_cycle"),
               BASE.replace(seed=2, schedule="warmup_cosine", warmup_steps=5, weight_decay=0.01),
               BASE.replace(seed=3, schedule="warmup_constant", warmup_steps=7, grad_clip=0.5)]
    sgd = [c.replace(optimizer="sgd", momentum=0.9, lr=0.05) for c in configs]
    for group in (configs, sgd):
        eager = train_many(group, backend="stacked", progress=False)
        captured = train_many(group, backend="stacked", progress=False, cuda_graphs=True)
        for a, b in zip(eager, captured):
            _close(a, b, tol=1e-6)


def test_lr_factor_tensor_matches_lr_factor():
    from plateau_lib.engine.setup import SCHEDULES_CODE, lr_factor, lr_factor_tensor
    f64 = lambda v: torch.tensor([float(v)], dtype=torch.float64)  # noqa: E731
    floored = BASE.replace(schedule="warmup_cosine", steps=1000, warmup_steps=100, lr_floor=0.1, decay_steps=600)
    cases = [BASE.replace(schedule=schedule, steps=1000, warmup_steps=0 if schedule == "one_cycle" else 100)
             for schedule in SCHEDULES_CODE] + [floored]
    for cfg in cases:
        for step in (0, 1, 50, 99, 100, 101, 499, 500, 501, 599, 600, 601, 999, 1000):
            got = lr_factor_tensor(torch.tensor(float(step), dtype=torch.float64),
                                   torch.tensor([SCHEDULES_CODE[cfg.schedule]]), f64(cfg.steps), f64(cfg.warmup_steps),
                                   f64(cfg.lr_floor), f64(cfg.decay_steps or cfg.steps))
            assert float(got) == pytest.approx(lr_factor(cfg, step), abs=1e-15), (cfg.schedule, step)
    assert lr_factor(floored, 600) == pytest.approx(0.1) and lr_factor(floored, 1000) == pytest.approx(0.1)
    assert lr_factor(floored, 350) == pytest.approx(0.1 + 0.9 * 0.5)


ICL_TINY = TrainConfig(task="icl_regression", task_kwargs={"D": 2, "K": 4, "noise_var": 0.125, "d_mlp": 16}, n_layer=1,
                       n_head=2, d_model=16, lr=3e-3, schedule="one_cycle", steps=12, batch_size=16, eval_every=6,
                       eval_batch=32, device="cpu")


def test_compiled_step_equals_eager_and_falls_back_when_compilation_fails(monkeypatch):
    configs = [ICL_TINY.replace(seed=s) for s in (0, 1)]
    eager = train_many(configs, backend="stacked", progress=False)
    for a, b in zip(eager, train_many(configs, backend="stacked", progress=False, compile=True)):
        _close(a, b, tol=1e-5)  # fused kernels may round differently in the last bit

    def broken(fn, *args, **kwargs):
        def fail(*a, **k):
            raise RuntimeError("no compiler here")
        return fail
    monkeypatch.setattr(torch, "compile", broken)
    with pytest.warns(UserWarning, match="running it uncompiled"):
        fallback = train_many(configs, backend="stacked", progress=False, compile=True)
    for a, b in zip(eager, fallback):
        _close(a, b, tol=0.0)
