"""Deep linear networks: Aoyagi's closed-form λ (plateau_lib.llc.dln) and one SGLD known-answer check.

SGLD settings of the known-answer check (chosen on truth/SGLD seeds 0-2, where λ̂ ÷ λ was 0.87-0.90; the test
keeps seed 0): widths [10, 8, 6, 8, 10] (d = 256), true rank 2, λ = 28 (d/2 = 128), at ``true_parameter``;
noiseless data n = 500, MSE, full batch; ε = 3e-5, nβ = 1e4, γ = 10, 4 chains x 6000 draws after 3000 burn-in
(about 11 s on one thread). λ̂ sits about 10 % low: the localization γ = 10 confines the singular directions,
whose posterior at nβ = 1e4 is still wide (γ = 100 gives 0.63). γ = 1 reaches λ̂ ÷ λ ≈ 1 but keeps drifting up
over 20k steps as the chains wander along the valley to less singular points; ε = 1e-4 overshoots (1.45) by
discretization.
"""
from __future__ import annotations

from itertools import combinations

import pytest
import torch

from plateau_lib.llc import SGLDConfig, estimate_llc
from plateau_lib.llc.dln import (DLNModel, bottleneck_layers, dln_data, dln_lambda, dln_truth, is_bottleneck_set,
    parameter_count, true_parameter)
from plateau_lib.llc.golden import mse_loss, rrr_lambda

torch.set_num_threads(1)


def test_one_hidden_layer_is_reduced_rank_regression():
    """Aoyagi (2024) for L = 2 is Aoyagi & Watanabe (2005): widths [M, H, N], every rank up to min(M, H, N)."""
    for M in range(1, 7):
        for H in range(1, 7):
            for N in range(1, 7):
                for r in range(min(M, H, N) + 1):
                    assert dln_lambda([M, H, N], r) == pytest.approx(rrr_lambda(M, H, N, r), abs=1e-12), (M, H, N, r)


def test_single_layer_is_regular():
    """One linear layer is identifiable: λ = H_0 H_1 / 2 = d/2 at any rank."""
    for h0 in range(1, 7):
        for h1 in range(1, 7):
            for r in range(min(h0, h1) + 1):
                assert dln_lambda([h0, h1], r) == h0 * h1 / 2 == parameter_count([h0, h1]) / 2


def test_deep_case_with_the_correction_term():
    """widths [2, 3, 3, 3], rank 0: d = 6 + 9 + 9 = 24, d/2 = 12.

    M = (2, 3, 3, 3). Sorted prefixes: {2, 3} and {2, 3, 3} split the equal 3s (max_S < min_{not S} fails);
    all four: ℓ = 3, Σ M = 11 ≥ 3 · 3. M̄ = ⌈11/3⌉ = 4, a = 11 − 3 · 3 = 2: the correction a(ℓ − a)/(4ℓ) = 2/12.
    Σ_{i<j} M_i M_j = (11² − (4 + 9 + 9 + 9)) / 2 = 45.
    λ = 0 + 1/6 − (3 · 2 / 4) · (11/3)² + 45/2 = 1/6 − 121/6 + 45/2 = 5/2, a fifth of d/2.
    """
    assert bottleneck_layers([2, 3, 3, 3], 0) == [0, 1, 2, 3]
    assert dln_lambda([2, 3, 3, 3], 0) == 2.5
    assert parameter_count([2, 3, 3, 3]) == 24


def test_deep_case_with_a_proper_bottleneck_set():
    """widths [5, 2, 6, 3, 5], rank 1: d = 10 + 12 + 18 + 15 = 55, d/2 = 27.5.

    M = (4, 1, 5, 2, 4). The prefix {1, 2} (layers 1 and 3): ℓ = 1, Σ M = 3 ≥ 1 · 2, max 2 < min 4, 3 < 1 · 4.
    M̄ = 3, a = 3 − 2 · 1 = 1 = ℓ (no correction), ℓ(ℓ − 1) = 0, Σ_{i<j} M_i M_j = 2.
    λ = (−1 + 1 · (5 + 5)) / 2 + 0 − 0 + 2/2 = 4.5 + 1 = 5.5, a fifth of d/2.
    """
    assert bottleneck_layers([5, 2, 6, 3, 5], 1) == [1, 3]
    assert dln_lambda([5, 2, 6, 3, 5], 1) == 5.5
    assert parameter_count([5, 2, 6, 3, 5]) == 55


def test_bottleneck_set_is_unique_and_lambda_at_most_d_over_2():
    """Over random widths, exactly one subset of layers meets Aoyagi's conditions (the one found), and λ ≤ d/2."""
    g = torch.Generator().manual_seed(0)
    for _ in range(500):
        depth = int(torch.randint(1, 6, (1,), generator=g))
        widths = torch.randint(1, 9, (depth + 1,), generator=g).tolist()
        r = int(torch.randint(0, min(widths) + 1, (1,), generator=g))
        reduced = [h - r for h in widths]
        found = [sorted(s) for k in range(1, len(widths) + 1) for s in combinations(range(len(widths)), k)
                 if is_bottleneck_set(reduced, set(s))]
        assert found == [bottleneck_layers(widths, r)], (widths, r)
        assert dln_lambda(widths, r) <= parameter_count(widths) / 2


def test_true_parameter_realises_the_truth():
    widths, r = [5, 4, 3, 4, 6], 2
    model = true_parameter(widths, r, seed=3)
    truth = dln_truth(widths, r, seed=3)
    assert truth.shape == (6, 5) and int(torch.linalg.matrix_rank(truth)) == r
    assert [int(torch.linalg.matrix_rank(w)) for w in model.weights] == [r] * 4
    x, y = dln_data(widths, truth, n=50, seed=1)
    with torch.no_grad():
        assert x.shape == (50, 5) and float(mse_loss(model, (x, y))) < 1e-10
        noisy = dln_data(widths, truth, n=2000, seed=1, noise=0.5)
        assert float(mse_loss(model, noisy)) == pytest.approx(0.25, rel=0.1)
    assert sum(p.numel() for p in DLNModel(widths).parameters()) == parameter_count(widths)
    assert all(not w.detach().any() for w in true_parameter(widths, 0).weights)


@pytest.mark.parametrize("call,name", [
    (lambda: dln_lambda([3], 0), "widths"),
    (lambda: dln_lambda([3, 0, 2], 0), "widths"),
    (lambda: dln_lambda([3, 2.0, 2], 0), "widths"),
    (lambda: dln_lambda([3, 2, 2], 3), "rank"),
    (lambda: dln_lambda([3, 2, 2], -1), "rank"),
    (lambda: true_parameter([3, 2, 2], 1.5), "rank"),
    (lambda: DLNModel((4,)), "widths"),
    (lambda: parameter_count("3,2"), "widths"),
    (lambda: dln_data([3, 2], torch.zeros(3, 2)), "truth"),
    (lambda: dln_data([3, 2], torch.zeros(2, 3), n=0), "n"),
    (lambda: dln_data([3, 2], torch.zeros(2, 3), noise=-1.0), "noise"),
])
def test_bad_inputs_are_refused(call, name):
    with pytest.raises(ValueError, match=f"^{name} must be"):
        call()


def test_sgld_known_answer():
    """λ̂ within 25 % of λ = 28 at the true parameter (settings in the module docstring)."""
    widths, r = [10, 8, 6, 8, 10], 2
    data = dln_data(widths, dln_truth(widths, r, seed=0), n=500, seed=0)
    sgld = SGLDConfig(epsilon=3e-5, nbeta=1e4, gamma=10.0, num_chains=4, num_draws=6000, num_burnin_steps=3000, seed=0)
    res = estimate_llc(true_parameter(widths, r, seed=0), mse_loss, data, sgld, device="cpu", backend="vmap", warn=False)
    assert dln_lambda(widths, r) == 28.0
    assert not res.diverged.any()
    assert abs(res.llc_mean / 28.0 - 1) < 0.25, res.llc_mean


def test_the_size_check_summarizes_the_chains_that_did_not_diverge():
    """dln_summary / dln_ratios on hand-made per-chain rows: a diverged chain is left out of the mean and the range."""
    import pandas as pd

    from plateau_lib.llc.dln import DLN_CASES, dln_metric, dln_ratios, dln_summary
    chains = pd.DataFrame({"case": "1k", "sampler": ["sgld"] * 3 + ["rmsprop_sgld"] * 3, "d": 1024, "λ": 104.0,
                           "chain": [0, 1, 2] * 2, "λ̂ ÷ λ": [0.9, 1.0, 5.0, 0.8, 0.9, 1.0],
                           "diverged": [False, False, True, False, False, False]})
    summary = dln_summary(chains).set_index("sampler")
    assert summary.loc["sgld", "λ̂ ÷ λ"] == pytest.approx(0.95) and summary.loc["sgld", "chains"] == 2
    assert summary.loc["sgld", "highest chain"] == 1.0 and summary.loc["rmsprop_sgld", "lowest chain"] == 0.8
    assert dln_ratios(chains) == {dln_metric("1k"): pytest.approx(0.95)}
    assert dln_metric("1M") == "λ̂ ÷ λ, deep linear network d = 1,040,000"
    assert [parameter_count(w) for w, _ in DLN_CASES.values()] == [1024, 9984, 102400, 1040000]
    assert [dln_lambda(w, r) for w, r in DLN_CASES.values()] == [104.0, 906.5, 8631.5, 85125.0]


def test_the_smaller_step_is_its_own_table_and_a_sampler_must_be_known():
    """The sweep at DLN_SMALL_EPSILON is a new stored table (the committed one keeps its key); an unknown sampler is
    refused before any compute, naming the parameter."""
    from plateau_lib.llc import dln
    assert dln.dln_table(epsilon=dln.DLN_SMALL_EPSILON).key != dln.dln_table().key
    assert dln.dln_config("sgld", dln.DLN_SMALL_EPSILON).epsilon == 1e-5
    with pytest.raises(ValueError, match="'sampler'"):
        dln.dln_config("adam")


def test_the_size_figure_draws_each_sweep_in_its_own_dashes_with_one_legend():
    """plot_dln with two sweeps: a line per (sweep, sampler), the sweeps told apart by their dashes, a legend with
    the band, each sampler and each sweep, and nothing under the book's smallest font."""
    import matplotlib
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.text import Text

    from plateau_lib.book import pages
    from plateau_lib.llc import dln, plots
    rows = pd.DataFrame({"case": "1k", "sampler": ["sgld", "rmsprop_sgld"] * 2, "d": [1024, 1024, 9984, 9984],
                         "λ": 1.0, "chain": 0, "λ̂ ÷ λ": [0.9, 0.95, 1.0, 1.05], "diverged": False})
    sweeps = {dln.step_label(dln.DLN_EPSILON): rows, dln.step_label(dln.DLN_SMALL_EPSILON): rows.assign(**{"λ̂ ÷ λ": 0.8})}
    with matplotlib.rc_context():
        pages.setup()
        fig = plots.plot_dln(sweeps, (0.9, 1.1), dln.SAMPLER_NAMES)
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels == ["0.9–1.1 × λ", "SGLD", "RMSProp-SGLD", *sweeps]
        lines = [line for line in ax.get_lines() if list(line.get_xdata()) == [1024, 9984]]
        assert len(lines) == 4 and len({line.get_linestyle() for line in lines}) == 2
        fig.canvas.draw()
        assert min(t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text()) >= pages.MIN_FONT_PT
        plt.close(fig)


def test_the_gamma_scan_lets_each_chain_settle_and_measures_its_drift():
    """settling_steps gives a burn-in of τ = 2/(εγ) and 1.5 τ of draws (γ = 10, ε = 1e-5: 20,000 and 30,000) and
    refuses γ <= 0; gamma_summary reads each chain's λ̂ and its drift over the draws (last draw window minus first)
    from hand-made windows, leaving out burn-in windows and diverged chains; the scan is a table of its own."""
    import pandas as pd

    from plateau_lib.llc import dln
    assert dln.settling_steps(10.0) == (20_000, 30_000)
    assert dln.settling_steps(100.0) == (2_000, 3_000)
    assert dln.settling_steps(10.0, dln.DLN_SCANS["finer step"]["settle"]) == (66_667, 100_000)
    with pytest.raises(ValueError, match="gamma and epsilon must be > 0"):
        dln.settling_steps(0.0)
    cfg = dln.dln_gamma_config(30.0)
    assert (cfg.gamma, cfg.epsilon, cfg.num_burnin_steps, cfg.num_draws) == (30.0, 1e-5, 6_667, 10_000)
    assert cfg.sampler == "sgld"
    # RMSProp-SGLD at its own step, with plain SGLD's chain lengths, in a table of its own
    rms = dln.dln_gamma_config(30.0, dln.DLN_SCANS["RMSProp-SGLD γ scan"]["settle"])
    assert (rms.sampler, rms.epsilon, rms.num_burnin_steps, rms.num_draws) == ("rmsprop_sgld", 1e-6, 6_667, 10_000)
    assert dln.scan_table("RMSProp-SGLD γ scan").key != dln.dln_gamma_table().key
    # a scan's batch: the sweep's, a fixed one, or a multiple of the input width
    assert cfg.batch_size == 64
    assert dln.dln_gamma_config(10.0, dln.DLN_SCANS["batch 2, smallest"]["settle"]).batch_size == 2
    assert dln.dln_gamma_config(10.0, dln.DLN_SCANS["batch = input width"]["settle"], [640, 500, 640]).batch_size == 640
    with pytest.raises(ValueError, match="parameter 'widths'"):
        dln.dln_gamma_config(10.0, dln.DLN_SCANS["batch = input width"]["settle"])
    with pytest.raises(ValueError, match="parameter 'name' must be one of"):
        dln.scan_table("γ-scan")
    windows = pd.DataFrame({"d": 1024, "γ": 10.0, "chain": [0] * 4 + [1] * 4 + [2] * 4,
                            "step": [0, 1000, 2000, 3000] * 3, "burn-in": [True, False, False, False] * 3,
                            "window λ̂ ÷ λ": [0.1, 0.8, 0.9, 1.0, 0.1, 0.9, 0.9, 0.9, 0.1, 5.0, 6.0, 7.0],
                            "λ̂ ÷ λ": [0.9] * 4 + [0.9] * 4 + [6.0] * 4,
                            "diverged": [False] * 8 + [True] * 4})
    row = dln.gamma_summary(windows).iloc[0]
    assert row["λ̂ ÷ λ"] == pytest.approx(0.9) and row["chains"] == 2
    assert row["drift over the draws"] == pytest.approx((0.2 + 0.0) / 2)
    shown = dln.gamma_shown_table({"SGLD": dln.gamma_summary(windows),
                                   "RMSProp-SGLD": dln.gamma_summary(windows.assign(**{"λ̂ ÷ λ": 0.8}))})
    assert list(shown.index) == [("SGLD", "γ = 10"), ("RMSProp-SGLD", "γ = 10")]
    assert list(shown.columns) == ["d = 1,024", "largest drift over the draws"]
    assert shown.iloc[0].tolist() == ["0.90", "0.10"] and shown.iloc[1].tolist() == ["0.80", "0.10"]
    assert dln.dln_gamma_table().name.startswith("llc_dln_gamma-")
    assert dln.dln_gamma_table().key != dln.dln_gamma_table(gammas=(10.0,)).key
    # the named scans kept the keys of the tables committed before they were named
    assert [dln.scan_table(n).name for n in ("γ scan", "finer step", "RMSProp-SGLD γ scan")] == [
        "llc_dln_gamma-9469adceee351012", "llc_dln_gamma-f7025574ffca987d", "llc_dln_gamma-c649d4ac5ed40171"]


def test_the_variant_networks_keep_the_sizes_and_have_their_own_scans():
    """The one-hidden-layer networks have DLN_CASES' four sizes and ranks, and their λ is reduced-rank regression's
    (Aoyagi & Watanabe 2005, an independent formula); the true-rank variants change only the rank; a scan's cases
    come from either table, and DLN_CASES (whose scans cover every size) is unchanged."""
    from plateau_lib.llc import dln
    from plateau_lib.llc.golden import rrr_lambda
    shallow = [dln.DLN_VARIANT_CASES[c] for c in dln.DLN_SHALLOW]
    deep = list(dln.DLN_CASES.values())
    assert [dln.parameter_count(w) for w, _ in shallow] == [dln.parameter_count(w) for w, _ in deep]
    assert [r for _, r in shallow] == [r for _, r in deep]
    for (m, h, n), r in shallow:
        assert dln.dln_lambda([m, h, n], r) == rrr_lambda(m, h, n, r)
    assert dln.DLN_VARIANT_CASES["1M, rank 100"] == (dln.DLN_CASES["1M"][0], 100)
    assert dln.scan_cases("true rank") == {"1k, rank 1": (dln.DLN_CASES["1k"][0], 1),
                                           "1M, rank 100": (dln.DLN_CASES["1M"][0], 100)}
    assert list(dln.scan_cases("γ scan")) == ["1k", "10k", "100k", "1M"]
    assert dln.dln_gamma_config(10.0, dln.DLN_SCANS["one hidden layer"]["settle"], [1000, 520, 1000]).batch_size == 1000


def test_scans_at_one_gamma_put_each_scan_in_a_row_and_leave_unrun_sizes_blank():
    import pandas as pd

    from plateau_lib.llc import dln

    def windows(d, gamma, ratio):
        return pd.DataFrame({"d": d, "γ": gamma, "chain": 0, "step": [0, 1000], "burn-in": [True, False],
                             "window λ̂ ÷ λ": [0.1, ratio], "λ̂ ÷ λ": ratio, "diverged": False})
    scans = {"batch 64": pd.concat([windows(1024, 10.0, 0.89), windows(1024, 30.0, 0.7), windows(9984, 10.0, 0.92)]),
             "batch 2": windows(1024, 10.0, 0.956)}
    table = dln.scans_at(scans)
    assert list(table.columns) == ["d = 1,024", "d = 9,984"] and list(table.index) == ["batch 64", "batch 2"]
    assert table.loc["batch 64"].tolist() == ["0.89", "0.92"] and table.loc["batch 2"].tolist() == ["0.96", ""]
    assert dln.scans_at(scans, 30.0).loc["batch 64", "d = 1,024"] == "0.70"
    cold = dln.dln_gamma_config(10.0, dln.DLN_SCANS["colder"]["settle"])
    assert (cold.nbeta, cold.gamma, cold.num_burnin_steps) == (1e5, 100.0, dln.settling_steps(10.0)[0])
    assert cold.epsilon == pytest.approx(1e-6)


def test_the_settling_figure_has_a_panel_per_size_and_a_line_per_gamma_and_sampler():
    """plot_settling on hand-made windows: a panel per size titled by its weights, two lines per γ (burn-in faded,
    draws), a legend with the band, each γ and the burn-in, and nothing under the book's smallest font."""
    import matplotlib
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.text import Text

    from plateau_lib.book import pages
    from plateau_lib.llc import plots
    windows = pd.DataFrame([{"d": d, "γ": g, "chain": c, "step": s, "burn-in": s < 2000, "window λ̂ ÷ λ": 0.5 + s / 1e4,
                             "diverged": False} for d in (1024, 9984) for g in (10.0, 100.0) for c in (0, 1)
                            for s in range(0, 5000, 1000)])
    with matplotlib.rc_context():
        pages.setup()
        fig = plots.plot_settling(windows)
        assert [ax.get_title() for ax in fig.axes] == ["d = 1,024", "d = 9,984"]
        assert all(len(ax.get_lines()) == 1 + 2 * 2 for ax in fig.axes)  # the line at 1, then burn-in and draws per γ
        assert [t.get_text() for t in fig.legends[0].get_texts()] == ["0.9–1.1 × λ", "γ = 10", "γ = 100", "burn-in"]
        fig.canvas.draw()
        assert min(t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text()) >= pages.MIN_FONT_PT
        plt.close(fig)
        fig = plots.plot_settling(windows, rmsprop=windows)  # RMSProp-SGLD's scan dashed, beside plain SGLD's
        assert all(len(ax.get_lines()) == 1 + 2 * 2 * 2 for ax in fig.axes)
        assert sum(line.get_linestyle() == "--" for line in fig.axes[0].get_lines()) == 2 * 2
        assert [t.get_text() for t in fig.legends[0].get_texts()][-2:] == ["SGLD", "RMSProp-SGLD"]
        plt.close(fig)


def test_the_rank_table_puts_the_same_network_at_two_ranks_side_by_side():
    """λ̂ is λ̂ ÷ λ (the chains' mean, burn-in and diverged chains left out) times each rank's own λ; rows are
    (weights, true rank), only the networks and γ asked for."""
    import pandas as pd

    from plateau_lib.llc import dln

    def windows(case, gamma, ratios):
        widths, rank = (dln.DLN_CASES | dln.DLN_VARIANT_CASES)[case]
        return pd.DataFrame({"case": case, "γ": gamma, "d": dln.parameter_count(widths), "λ": dln.dln_lambda(widths, rank),
                             "chain": range(len(ratios)), "burn-in": False, "λ̂ ÷ λ": ratios, "diverged": False,
                             "step": 0, "window λ̂ ÷ λ": ratios})
    rows = pd.concat([windows("1k", 10.0, [0.1]).assign(**{"burn-in": True}),    # chain 0's burn-in: left out
                      windows("1k", 10.0, [0.8, 1.0]), windows("1k, rank 1", 10.0, [0.5]),
                      windows("1k", 100.0, [0.3]), windows("10k", 10.0, [0.9]),
                      windows("1k", 10.0, [9.0]).assign(chain=5, diverged=True)])   # a diverged chain: left out
    table = dln.rank_table(rows, cases=("1k",), gammas=(10.0,))
    assert list(table.index) == [(1024, 1), (1024, 3)]
    assert table.loc[(1024, 3)].tolist() == pytest.approx([104.0, 93.6, 0.9])      # 0.9 × λ = 104
    assert table.loc[(1024, 1)].tolist() == pytest.approx([86.5, 43.25, 0.5])


def test_the_rank_findings_read_the_changes_of_lambda_and_of_its_estimate():
    import pandas as pd

    from plateau_lib.book.pages import MISSING
    from plateau_lib.llc import dln
    index = pd.MultiIndex.from_tuples([(1024, 1), (1024, 3), (1040000, 20), (1040000, 100)], names=["weights", "true rank"])
    ranks = pd.DataFrame({"λ": [80.0, 100.0, 1000.0, 1250.0], "λ̂, γ = 10": [60.0, 90.0, 1300.0, 1287.0],
                          "λ̂ ÷ λ, γ = 10": [0.75, 0.9, 1.3, 1.0296], "λ̂, γ = 30": [1.0, 1.0, 1000.0, 1100.0]}, index=index)
    found = dln.rank_findings(ranks)
    assert (found["dln_rank_large_lambda_rise"], found["dln_rank_large_llc_change"]) == ("25%", "−1%")
    assert (found["dln_rank_large_llc_change_30"], found["dln_rank_large_ratio_high"]) == ("+10%", "1.03")
    assert (found["dln_rank_small_lambda_fall"], found["dln_rank_small_llc_fall"]) == ("20%", "33%")
    assert set(dln.rank_findings(None).values()) == {MISSING} and len(found) == len(dln.RANK_FINDINGS)
    assert set(dln.rank_findings(ranks.iloc[:3]).values()) == {MISSING}                  # a network at one rank
    assert set(dln.rank_findings(ranks.assign(**{"λ̂, γ = 30": float("nan")})).values()) == {MISSING}


def test_two_hidden_layers_hold_depth_and_degeneracy_apart():
    """The depth scan's premise: no rank takes the one-hidden-layer networks (λ ÷ (d/2) from 0.44 up) into the
    three-hidden-layer ones' range (up to 0.35) or back; two hidden layers at DLN_CASES' sizes reach both, at a rank
    near 0.25 and one near 0.44."""
    from plateau_lib.llc import dln

    def shares(cases):
        return [dln_lambda(w, r) / (parameter_count(w) / 2) for w, _ in cases for r in range(1, min(w) + 1)]
    one = shares([dln.DLN_VARIANT_CASES[c] for c in dln.DLN_SHALLOW])
    three = shares(dln.DLN_CASES.values())
    assert max(three) < min(one)
    for size, (low, high) in dln.DLN_TWO_HIDDEN_RANKS.items():
        widths = dln.DLN_TWO_HIDDEN_WIDTHS[size]
        assert len(widths) == 4 and parameter_count(widths) == parameter_count(dln.DLN_CASES[size][0])
        assert dln_lambda(widths, low) / (parameter_count(widths) / 2) == pytest.approx(0.25, abs=0.005)
        assert dln_lambda(widths, high) / (parameter_count(widths) / 2) == pytest.approx(0.44, abs=0.005)
