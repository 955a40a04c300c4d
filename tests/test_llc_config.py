"""SGLDConfig: validation that names the field, replace, and the cache keys it writes (the presets' dicts of old)."""
from pathlib import Path

import pytest

from plateau_lib.engine import cache
from plateau_lib.llc import SGLDConfig

RESULTS = Path(__file__).resolve().parents[1] / "results"


@pytest.mark.parametrize("fields, name", [
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=float("nan")), "epsilon"), (dict(nbeta=-1.0), "nbeta"),
    (dict(gamma=-1.0), "gamma"), (dict(weight_decay=-0.1), "weight_decay"), (dict(num_chains=0), "num_chains"),
    (dict(num_draws=2.5), "num_draws"), (dict(num_burnin_steps=-1), "num_burnin_steps"),
    (dict(num_draws=10, num_burnin_steps=10), "num_burnin_steps"), (dict(num_steps_bw_draws=0), "num_steps_bw_draws"),
    (dict(batch_size=0), "batch_size"), (dict(n_data=True), "n_data"), (dict(seed=-1), "seed"), (dict(seed=1.0), "seed"),
    (dict(share_batches=1), "share_batches"), (dict(sampler="adam"), "sampler")])
def test_validation_names_the_field(fields, name):
    with pytest.raises(ValueError, match=f"^{name} must be"):
        SGLDConfig(**fields)


def test_replace():
    base = SGLDConfig(epsilon=1e-4, num_draws=50)
    assert base.replace(num_chains=2, epsilon=None) == SGLDConfig(epsilon=1e-4, num_draws=50, num_chains=2)
    with pytest.raises(ValueError, match=r"unknown SGLD setting\(s\) \['lr'\]; allowed: \['epsilon', 'nbeta'"):
        base.replace(lr=1e-3)
    with pytest.raises(ValueError, match="num_burnin_steps"):
        base.replace(num_burnin_steps=50)


def test_key_dict_writes_defaults_only_where_the_presets_did():
    assert SGLDConfig().key_dict() == dict(epsilon=1e-3, nbeta=None, gamma=100.0, batch_size=None, num_chains=4,
                                           num_draws=200, num_burnin_steps=0, seed=0)
    changed = SGLDConfig(weight_decay=0.1, num_steps_bw_draws=2, n_data=64, share_batches=True, sampler="rmsprop_sgld")
    assert {k: v for k, v in changed.key_dict().items() if k not in SGLDConfig().key_dict()} == dict(
        weight_decay=0.1, num_steps_bw_draws=2, n_data=64, share_batches=True, sampler="rmsprop_sgld")
    assert SGLDConfig(**changed.key_dict()) == changed
    # a spec holds the settings as their dict, not a hash (a run's TrainConfig is hashed)
    assert cache.keyed({"llc": changed, "runs": [SGLDConfig()]}) == {"llc": changed.key_dict(),
                                                                     "runs": [SGLDConfig().key_dict()]}


# The presets as dicts, as they were written before SGLDConfig (commit 6555511).
_ICL = dict(epsilon=3e-4, gamma=20 / 3, nbeta=200 / 3, batch_size=1024, num_chains=10, num_draws=5000,
            num_burnin_steps=0, n_data=2**20, seed=0)
_DIV = dict(epsilon=3e-4, gamma=100.0, nbeta=None, batch_size=256, num_chains=4, num_draws=400, num_burnin_steps=0,
            n_data=2**14, seed=0)
OLD = {
    ("icl", "paper"): _ICL,
    ("icl", "cpu_long"): {**_ICL, "batch_size": 256, "num_chains": 4, "num_draws": 200, "n_data": 2**14},
    ("icl", "cpu"): {**_ICL, "batch_size": 128, "num_chains": 3, "num_draws": 60, "n_data": 2**12},
    ("icl", "reduced"): {**_ICL, "num_chains": 4, "num_draws": 800, "num_burnin_steps": 200, "n_data": 2**18},
    ("diversity", "paper"): {**_DIV, "epsilon": 1e-4, "batch_size": 1024, "num_chains": 8, "num_draws": 2000,
                             "n_data": 2**18},
    ("diversity", "cpu_long"): _DIV, ("diversity", "cpu_d8"): _DIV, ("diversity", "cpu_d8_50k"): _DIV,
    ("diversity", "cpu"): {**_DIV, "batch_size": 128, "num_chains": 2, "num_draws": 100, "n_data": 2**12},
    ("plateau", "cpu"): dict(epsilon=3e-3, nbeta=100.0, gamma=100.0, batch_size=64, num_chains=2, num_draws=40,
                             num_burnin_steps=10, n_data=1024, seed=0),
    ("plateau", "cpu_long"): dict(epsilon=3e-3, nbeta=100.0, gamma=100.0, batch_size=64, num_chains=3, num_draws=80,
                                  num_burnin_steps=20, n_data=2048, seed=0),
    ("plateau", "paper"): dict(epsilon=3e-3, nbeta=100.0, gamma=100.0, batch_size=1024, num_chains=8, num_draws=200,
                               num_burnin_steps=50, n_data=2**14, seed=0)}


def _presets():
    from plateau_lib.icl import presets as icl
    from plateau_lib.plateau import presets as plateau
    return {**{("icl", p): c for p, c in icl.ICL_LLC.items()}, ("icl", "reduced"): icl.ICL_LLC_REDUCED,
            **{("diversity", p): c for p, c in icl.DIVERSITY_LLC.items()},
            **{("plateau", p): c for p, c in plateau.PLATEAU_LLC_SGLD.items()}}


def test_every_preset_keys_as_its_old_dict():
    presets = _presets()
    assert set(presets) == set(OLD)
    for name, sgld in presets.items():
        assert isinstance(sgld, SGLDConfig), name
        assert sgld.key_dict() == OLD[name], name
        assert cache.table_key({"llc": sgld, "version": 1}) == cache.table_key({"llc": OLD[name], "version": 1}), name
        assert SGLDConfig(**sgld.key_dict()) == sgld


# Every stored table keyed by SGLD settings, with its key before SGLDConfig (commit 6555511); True: committed.
KEYS = {
    ("icl_llc_vs_M", "paper"): ("65c45523c2d80a79", False), ("icl_llc_vs_M", "cpu_long"): ("5d63b7ea75f22b66", True),
    ("icl_llc_vs_M", "cpu"): ("1af821e9c148d339", False), ("icl_llc_vs_M", "cpu_d8"): ("1707e616b133d38c", False),
    ("icl_llc_vs_M", "cpu_d8_50k"): ("c5d3d53ec594be89", True),
    ("icl_llc_calibration", "paper"): ("be0cba034392444f", False),
    ("icl_llc_calibration", "cpu_long"): ("307e0f772fec4a69", True),
    ("icl_llc_calibration", "cpu"): ("5a43da4eea22bd46", False),
    ("icl_llc_calibration", "cpu_d8"): ("7320569c3ea5e45e", False),
    ("icl_llc_calibration", "cpu_d8_50k"): ("0d207698d59d31b6", True),
    ("icl_stages", "paper"): ("b482509190887b6c", False), ("icl_stages", "cpu_long"): ("f11b28a209b24d44", True),
    ("icl_stages", "cpu"): ("6aa144d75bf90cd2", False), ("icl_stages", "reduced"): ("f57b3958767bfbf5", True),
    ("icl_long_llc", "reduced"): ("f57b3958767bfbf5", False),
    ("icl_untrained_llc", "reduced"): ("efbda24535747287", True),
    ("icl_llc_over_training", "search"): ("fadc2366527796b3", True),
    ("plateau_llc", "cpu"): ("d64b8195a4dbf5a2", False), ("plateau_llc", "cpu_long"): ("e028f9bde9df01c6", True),
    ("plateau_llc", "paper"): ("647e58877ee2df44", False),
    ("plateau_llc_rows", "cpu"): ("453024976eb33090", False),
    ("plateau_llc_rows", "cpu_long"): ("ea4438ff6726070f", False),
    ("plateau_llc_rows", "paper"): ("3f3d557f357343bc", False),
    ("plateau_llc_calibration", "cpu"): ("9d629c9f89ce5fe8", False),
    ("plateau_llc_calibration", "cpu_long"): ("0251330af588c8be", True),
    ("plateau_llc_calibration", "paper"): ("bb84c9de41fe67b8", False),
    ("llc_dln", "paper"): ("8e6a4b80a41e44e8", True), ("llc_dln_check", "paper"): ("d19260d349fdc3dd", True),
    ("llc_dln_check", "large"): ("bb1d037f23554f72", True)}


def _tables():
    from plateau_lib.icl import development, diversity, diversity_page, long_run, transient_search, untrained
    from plateau_lib.icl import presets as icl
    from plateau_lib.llc import dln
    from plateau_lib.plateau import llc_across
    from plateau_lib.plateau import presets as plateau
    out = {}
    for p in icl.DIVERSITY_LLC:
        configs, llc = diversity_page.sweep_settings(p)
        out["icl_llc_vs_M", p] = diversity.llc_table(configs, llc)
        out["icl_llc_calibration", p] = diversity.calibration_table(configs, llc, icl.DIVERSITY_CALIBRATION)
    for p in icl.ICL_LLC:
        out["icl_stages", p] = development.stored(*icl.icl_stages(p))
    out["icl_stages", "reduced"] = development.stored(icl.ICL_PAPER, icl.ICL_LLC_REDUCED)
    out["icl_long_llc", "reduced"] = long_run.kept(icl.ICL_PAPER, icl.ICL_LLC_REDUCED)
    out["icl_untrained_llc", "reduced"] = untrained.llc_table()
    out["icl_llc_over_training", "search"] = diversity.llc_over_training_table(
        transient_search.llc_training_runs(), transient_search.diversity_sweep(transient_search.SWEEP)[1])
    for p in plateau.PLATEAU_LLC_SGLD:
        runs, sgld = plateau.plateau_llc(p)
        out["plateau_llc", p] = llc_across.llc_table(runs, sgld)
        out["plateau_llc_rows", p] = llc_across.curve_rows(runs[min(runs)], sgld)
        out["plateau_llc_calibration", p] = llc_across.calibration_table(runs[min(runs)],
                                                                         plateau.PLATEAU_LLC_CALIBRATION, sgld)
    out["llc_dln", "paper"] = dln.dln_table()
    out["llc_dln_check", "paper"], out["llc_dln_check", "large"] = dln.dln_check_table(), dln.dln_check_table(True)
    return out


def test_stored_tables_keep_their_keys_and_committed_results_are_found():
    tables = _tables()
    assert set(tables) == set(KEYS)
    for name, table in tables.items():
        key, committed = KEYS[name]
        assert table.key == key, name
        if committed:
            assert (RESULTS / f"{table.kind}-{key}").is_dir(), name
