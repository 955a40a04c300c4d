"""The cache rule: keys hash only non-neutral fields (the device is provenance), committed keys match their
folders, a plain lookup prefers committed results, and use_cache=False shows what it recomputed."""
import dataclasses
import json
from dataclasses import dataclass

import pytest
import torch

from plateau_lib.engine import cache, utils
from plateau_lib.engine.runs import TrainConfig

TINY = dict(task_kwargs={"n": 4, "p": 5}, d_model=8, steps=4, batch_size=8, eval_every=2, eval_batch=8)


def test_device_is_not_part_of_the_key():
    cfg = TrainConfig(**TINY)
    assert cache.cache_key(cfg) == cache.cache_key(cfg.replace(device="cpu"))
    assert "device" not in cfg.key_dict()


def test_key_hashes_only_fields_that_differ_from_the_neutral_table():
    cfg = TrainConfig(**TINY)
    assert set(cfg.key_dict()) == {"task_kwargs", "d_model", "steps", "batch_size", "eval_every", "eval_batch"}
    assert TrainConfig().key_dict() == {}


def test_a_new_field_with_its_neutral_default_keeps_old_keys():
    @dataclass(frozen=True)
    class NewConfig(TrainConfig):
        dropout: float = 0.0
        KEY_NEUTRAL = {**TrainConfig.KEY_NEUTRAL, "dropout": 0.0}

    old, new = TrainConfig(**TINY), NewConfig(**TINY)
    assert cache.cache_key(new) == cache.cache_key(old)
    assert cache.cache_key(new.replace(dropout=0.1)) != cache.cache_key(old)


def test_a_field_missing_from_the_neutral_table_is_refused():
    @dataclass(frozen=True)
    class Forgotten(TrainConfig):
        dropout: float = 0.0

    with pytest.raises(ValueError, match="KEY_NEUTRAL has no entry for \\['dropout'\\]"):
        Forgotten(**TINY).key_dict()


def test_committed_results_sit_under_their_keys():
    for folder in sorted(cache.current().committed.glob("train-*")):
        meta = json.loads((folder / "meta.json").read_text())
        fields = {f.name for f in dataclasses.fields(TrainConfig)}
        cfg = TrainConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in meta["config"].items()
                             if k in fields and k != "device"})  # provenance, not key: a GPU's "cuda" too
        assert folder.name == f"train-{cache.cache_key(cfg, meta.get('extra'))}", folder
        assert not list(folder.glob("*.pt")), f"{folder}: weights are not committed"


def test_a_store_is_current_inside_its_block_and_the_one_before_after_it(tmp_path):
    """Where results go is the current store's business: a block's store takes the training run and its stored
    tables, and the store before it is current again after the block; anything but a Store is refused."""
    before, cfg = cache.current(), TrainConfig(**TINY)
    inner = cache.Store(tmp_path / "committed", tmp_path / "local")
    with cache.using(inner):
        assert cache.current() == inner
        cache.current().train(cfg, progress=False)
        assert inner.run(cfg) == tmp_path / "local" / f"train-{cache.cache_key(cfg)}"
        assert cache.StoredTable("demo", {"a": 1}).store == inner
        assert inner.has_weights(cfg)  # local: with its final weights
        assert cache.current().commit(cfg).parent == tmp_path / "committed"
    assert cache.current() == before and before.run(cfg) != inner.run(cfg)
    assert not cache.Store(tmp_path / "committed", tmp_path / "elsewhere").has_weights(cfg)  # committed: none
    with pytest.raises(ValueError, match="parameter 'store' must be a cache.Store"):
        cache.use(str(tmp_path))


def test_a_stored_tables_spec_names_its_runs_by_their_keys():
    """A spec may hold the configs themselves: the table's key and stored spec are those of their cache keys, at
    any depth, so committed tables keep their keys."""
    a, b = TrainConfig(**TINY), TrainConfig(**TINY, seed=3)
    by_key = {"runs": {"1": cache.cache_key(a), "2": [cache.cache_key(b)]}, "sgld": {"epsilon": 1e-3}}
    by_config = {"runs": {"1": a, "2": (b,)}, "sgld": {"epsilon": 1e-3}}
    assert cache.table_key(by_config) == cache.table_key(by_key)
    assert cache.StoredTable("demo", by_config).spec == by_key
    assert cache.table_key({"runs": {"1": b}}) != cache.table_key({"runs": {"1": a}})


@pytest.fixture
def stores(tmp_path, monkeypatch, use_store):
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    monkeypatch.setattr(utils, "REPO_ROOT", tmp_path)   # where shown paths are relative to
    return tmp_path


def test_plain_lookup_shows_committed_and_recompute_shows_what_it_computed(stores):
    cfg = TrainConfig(**TINY)
    first = cache.current().train(cfg, progress=False)
    path = cache.current().commit(cfg)
    assert path == stores / "committed" / f"train-{cache.cache_key(cfg)}"
    assert not (path / "final_state.pt").exists()
    # mark the committed copy, so we can tell which one a lookup returns
    (path / "meta.json").write_text(json.dumps({**json.loads((path / "meta.json").read_text()), "marker": 1}))
    plain = cache.current().train(cfg, progress=False)
    assert plain.meta.get("marker") == 1 and plain.meta["cache"] == f"committed/train-{cache.cache_key(cfg)}"
    fresh = cache.current().train(cfg, use_cache=False, progress=False)
    assert "marker" not in fresh.meta and fresh.meta["cache"] is None
    assert fresh.metrics.equals(first.metrics)
    assert cache.current().committed_result(cfg).meta.get("marker") == 1
    assert cache.current().committed_result(cfg.replace(seed=5)) is None


def test_committing_a_run_needs_a_local_result(stores):
    with pytest.raises(ValueError, match="no local result"):
        cache.current().commit(TrainConfig(**TINY))


def test_committing_again_without_the_local_copy_keeps_the_committed_one(stores):
    """A queue that resumes elsewhere commits what it already committed: nothing to copy, no error."""
    import shutil
    cfg = TrainConfig(**TINY)
    cache.current().train(cfg, progress=False)
    path = cache.current().commit(cfg)
    shutil.rmtree(cache.current().local / path.name)
    assert cache.current().commit(cfg) == path and (path / "meta.json").exists()


def test_stored_tables_round_trip(tmp_path, use_store):
    import pandas as pd
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    spec = {"runs": {"1/0": "abc"}, "llc": {"epsilon": 3e-4}}
    stored = cache.StoredTable("kind", spec)
    assert stored.load() is None and stored.name == f"kind-{cache.table_key(spec)}"
    table = pd.DataFrame({"M": [1.0, float("inf")], "holds": [True, False]})
    stored.save({"llc": table}, {"wall_s": 1.5})
    tables, meta = stored.load()
    pd.testing.assert_frame_equal(tables["llc"], table)
    assert meta["wall_s"] == 1.5 and meta["spec"] == spec and meta["cache"].endswith(stored.name)
    assert cache.StoredTable("kind", {**spec, "llc": {"epsilon": 1e-3}}).load() is None  # another setting, another key
    path = stored.commit()
    assert path.parent == tmp_path / "committed" and stored.load()[1]["cache"] == str(path)
    calls = []
    again = cache.StoredTable("kind", {"other": 1})
    computed = again.get(lambda: calls.append(1) or ({"t": table}, {"n": 1}))  # computed once, then loaded
    assert calls == [1] and computed[1]["cache"] is None and computed[1]["n"] == 1
    assert again.get(lambda: calls.append(1))[1]["cache"].endswith(again.name) and calls == [1]


def test_a_built_table_resumes_its_kept_rows_and_stops_past_its_deadline_with_them_kept(tmp_path, use_store):
    import time

    import pandas as pd

    from plateau_lib.engine.train import Stopped
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    stored, calls = cache.StoredTable("rows", {"run": "abc"}), []

    def rows(steps):
        calls.extend(steps)
        return pd.DataFrame({"step": steps, "value": [10 * s for s in steps]})

    with pytest.raises(Stopped, match="deadline reached after 1 rows"):  # past the deadline: the first row, kept
        stored.build([1, 2, 3], rows, progress=False, deadline=time.time() - 1)
    assert calls == [1] and stored.rows()["step"].tolist() == [1]
    done = stored.build([1, 2, 3], rows, progress=False)  # resumed: only the rows not kept are computed
    assert calls == [1, 2, 3] and done["value"].tolist() == [10, 20, 30]


def test_a_stored_table_reads_and_keeps_in_the_store_current_when_it_is_used(tmp_path, use_store):
    """A table made under one store and used under another follows the current one; one given a store keeps it."""
    import pandas as pd
    use_store(committed=tmp_path / "a" / "committed", local=tmp_path / "a" / "local")
    floating, pinned = cache.StoredTable("kind", {"x": 1}), cache.StoredTable("kind", {"x": 1}, store=cache.current())
    second = use_store(committed=tmp_path / "b" / "committed", local=tmp_path / "b" / "local")
    floating.save({"t": pd.DataFrame({"v": [1]})}, {})
    assert (second.local / floating.name / "meta.json").exists() and pinned.load() is None
    assert not floating.committed() and floating.commit() == second.committed / floating.name and floating.committed()


def test_a_trained_model_holds_its_runs_final_weights_and_is_trained_once(stores):
    """The model comes back with the run's final weights, not a fresh initialisation; asking again is a hit."""
    cfg = TrainConfig(**TINY)
    model, run = cache.current().trained_model(cfg)
    fresh = cfg.make_task().build_model(cfg)
    assert all(torch.equal(v, run.final_state[k]) for k, v in model.state_dict().items())
    assert not all(torch.equal(v, fresh.state_dict()[k]) for k, v in model.state_dict().items())
    again, second = cache.current().trained_model(cfg)
    assert second.meta["cache"] is not None   # loaded from the local store, not trained again
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in model.state_dict().items())


def test_a_stopped_build_carries_its_rows_to_another_machine_and_resumes_there(tmp_path, use_store):
    """A build stopped by its deadline keeps its rows; ``carry_rows`` commits them; on a machine with an empty local
    cache ``restore_rows`` takes them up, and the build computes only the items still missing."""
    import pandas as pd
    from plateau_lib.engine.train import Stopped
    computed = []

    def rows(chunk):
        computed.extend(chunk)
        return pd.DataFrame({"step": chunk, "value": [2 * s for s in chunk]})

    use_store(committed=tmp_path / "results", local=tmp_path / "here")
    table = cache.StoredTable("carry_test", {"x": 1})
    with pytest.raises(Stopped):
        table.build([1, 2, 3], rows, deadline=0.0)  # past: stops once the first row is kept
    assert computed == [1] and table.carry_rows() == tmp_path / "results" / "in_progress" / table.name / "rows.csv"
    use_store(committed=tmp_path / "results", local=tmp_path / "elsewhere")  # another machine: nothing local
    assert table.rows().empty and table.restore_rows() == 1
    done = table.build([1, 2, 3], rows)
    assert computed == [1, 2, 3] and done["value"].tolist() == [2, 4, 6]
    table.drop_carried_rows()
    assert not table.carried_rows().exists()


def test_carried_rows_never_go_backwards_and_an_empty_build_carries_nothing(tmp_path, use_store):
    import pandas as pd
    use_store(committed=tmp_path / "results", local=tmp_path / "here")
    table = cache.StoredTable("carry_test", {"x": 2})
    assert table.carry_rows() is None and not table.carried_rows().exists()   # nothing kept: nothing written
    assert table.restore_rows() == 0
    table.keep(pd.DataFrame({"step": [1], "value": [2]}))
    table.carry_rows()
    table.keep(pd.DataFrame({"step": [1, 2], "value": [2, 4]}))               # further along here than committed
    assert table.restore_rows() == 2 and table.rows()["step"].tolist() == [1, 2]
    table.carried_rows().write_text("")                                        # an empty committed file: no rows
    assert table.restore_rows() == 2
