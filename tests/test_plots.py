"""The book's shared figures (plateau_lib.book.plots) on hand-built metrics."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from plateau_lib.book import plots  # noqa: E402


def metrics(seeds=(0, 1)) -> pd.DataFrame:
    steps = np.arange(0, 50, 10)
    return pd.DataFrame([{"step": s, "seed": seed, "loss": 3 - s / 50, "acc": s / 50, "acc_first": 1.0,
                          "acc_rest": s / 60, "rho": 0.5, "rho_data": 0.058, "cosine": 0.9, "apm": s / 100}
                         for seed in seeds for s in steps])


def test_the_papers_numbers_are_drawn_as_labelled_lines_with_room_above():
    fig = plots.training_curves(metrics(), paper={"apm": (0.8, "≈ 0.8"), "cosine": (0.95, "peak ≈ 0.95")})
    by_title = {ax.get_title(): ax for ax in fig.axes}
    for title, value, label in (("attention progress (APM)", 0.8, "paper: ≈ 0.8"),
                                ("representation collapse", 0.95, "paper: peak ≈ 0.95")):
        ax = by_title[title]
        lines = [line for line in ax.get_lines() if line.get_color() == plots.PAPER_COLOUR]
        assert len(lines) == 1 and list(lines[0].get_ydata()) == [value, value]
        assert [t.get_text() for t in ax.texts] == [label]
        low, high = ax.get_ylim()
        assert high - value >= 0.12 * (high - low) - 1e-9  # the label fits above its line
    assert not by_title["greedy accuracy"].texts  # no paper number given, none drawn
    plt.close(fig)


def test_several_paper_levels_each_get_a_line_and_a_label_and_the_highest_fits():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0.0, 0.5])
    plots.paper_levels(ax, [(0.15, "KQ+OV ≈ 0.15"), (0.95, "baseline ≈ 0.95")])
    lines = [line for line in ax.get_lines() if line.get_color() == plots.PAPER_COLOUR]
    assert sorted(line.get_ydata()[0] for line in lines) == [0.15, 0.95]
    assert sorted(t.get_text() for t in ax.texts) == ["paper: KQ+OV ≈ 0.15", "paper: baseline ≈ 0.95"]
    low, high = ax.get_ylim()
    assert high - 0.95 >= 0.12 * (high - low) - 1e-9
    plt.close(fig)


def test_a_paper_span_marks_both_ends_and_is_labelled():
    fig, ax = plt.subplots()
    ax.plot([1, 1000], [0, 1])
    ax.set_xscale("log")
    plots.paper_span(ax, 16, 128, "transient at M = 16–128")
    ends = [line.get_xdata()[0] for line in ax.get_lines() if line.get_color() == plots.PAPER_COLOUR]
    assert sorted(ends) == [16, 128]
    assert [t.get_text() for t in ax.texts] == ["paper: transient at M = 16–128"]
    plt.close(fig)
