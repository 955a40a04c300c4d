"""The book's shared figures (plateau_lib.book.plots) on hand-built metrics."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

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
    assert (high - 0.95) / (high - low) == pytest.approx(plots.LABEL_ROOM)
    plt.close(fig)


def test_the_labels_room_is_the_same_share_of_the_axes_on_linear_and_log_axes_and_never_shrinks_them():
    fig, (linear, log, tall) = plt.subplots(1, 3)
    linear.set_ylim(0, 1)
    plots.room_above(linear, 1.0)
    assert linear.get_ylim()[1] == pytest.approx(1 / (1 - plots.LABEL_ROOM))
    log.set_yscale("log")
    log.set_ylim(1, 100)
    plots.room_above(log, 100)
    assert np.log(log.get_ylim()[1] / 100) / np.log(log.get_ylim()[1]) == pytest.approx(plots.LABEL_ROOM)
    tall.set_ylim(0, 10)
    plots.room_above(tall, 1.0)
    assert tall.get_ylim() == (0, 10)
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


def paper_lines(ax):
    return sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_color() == plots.PAPER_COLOUR)


def test_task_facets_draw_the_papers_numbers_only_on_the_named_tasks_panels():
    steps = np.arange(0, 50, 10)
    long = pd.DataFrame([{"task": task, "step": s, "curve": curve, "value": v}
                         for task in ("prefix sum", "repeat_1", "addition") for s in steps
                         for curve, v in (("mean cosine", 0.3 + s / 100), ("data ρ", 0.1))])
    fig = plots.task_facets(long, "mean cosine", paper={"prefix sum": (0.8, "peak ≈ 0.80"),
                                                        "repeat_1": [(0.5, "≈ 0.5 after one step"), (0.9, "x")]})
    by_title = {ax.get_title(): ax for ax in fig.axes}
    assert paper_lines(by_title["prefix sum"]) == [0.8]
    assert [t.get_text() for t in by_title["prefix sum"].texts] == ["paper: peak ≈ 0.80"]
    assert paper_lines(by_title["repeat_1"]) == [0.5, 0.9]
    assert sorted(t.get_text() for t in by_title["repeat_1"].texts) == ["paper: x", "paper: ≈ 0.5 after one step"]
    assert paper_lines(by_title["addition"]) == [] and not by_title["addition"].texts
    low, high = by_title["prefix sum"].get_ylim()
    assert high - 0.8 >= 0.12 * (high - low) - 1e-9  # the label fits above its line
    legend = next(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)
    assert [t.get_text() for t in legend.get_texts()] == ["mean cosine", "data ρ"]  # the paper's lines stay out of it
    plt.close(fig)


def test_location_cosines_draw_the_papers_level_on_every_seeds_panel():
    steps = np.arange(0, 50, 10)
    scalars = pd.DataFrame([{"step": s, "label": seed, "cosine_embed": 0.1, "cosine_final_ln": s / 50}
                            for seed in (0, 1) for s in steps])
    names = {"embed": "embedding", "final_ln": "after the final layer norm"}
    fig = plots.location_cosines(scalars, names, paper=(0.95, "final LN peak ≈ 0.95"))
    panels = [ax for ax in fig.axes if ax.get_title().startswith("seed")]
    assert [ax.get_title() for ax in panels] == ["seed 0", "seed 1"]
    for ax in panels:
        assert paper_lines(ax) == [0.95]
        assert [t.get_text() for t in ax.texts] == ["paper: final LN peak ≈ 0.95"]
        low, high = ax.get_ylim()
        assert low == -0.05 and high - 0.95 >= 0.12 * (high - low) - 1e-9
    plt.close(fig)
    fig = plots.location_cosines(scalars, names)  # no paper number given, none drawn
    assert not any(paper_lines(ax) or ax.texts for ax in fig.axes)
    plt.close(fig)


def test_the_mws_figures_paper_levels_are_numbers_the_papers_text_gives():
    """Each level a figure of the Gopalani et al. chapter draws is a claim's text-sourced number, quoted."""
    from plateau_lib.plateau import claims
    metric = {claim.metric: claim for claim in claims.CLAIMS}
    drawn = [(claims.FIG3_TEXT_LEVELS["cosine"], ("peak cosine, c = 10", "1 − peak cosine, c = 0.2 ÷ c = 1")),
             (claims.FIG3_WIDTHS_TEXT_LEVELS["cosine"], ("peak cosine, c = 10", "peak cosine, baseline")),
             (claims.FIG5_TEXT_LEVELS["cosine"], ("peak cosine, KQ copied", "peak cosine, KQ+OV copied",
                                                  "peak cosine, MLP copied")),
             ([claims.FIG41_42_TEXT_LEVELS], ("peak cosine before the jump, after the final layer norm",)),
             ([claims.OTHER_TASKS_COSINE_TEXT_LEVELS["prefix sum"]], ("prefix sum: peak cosine before the jump",)),
             ([claims.OTHER_TASKS_COSINE_TEXT_LEVELS["repeat_1"]], ("REPEAT1: cosine after one step",))]
    assert claims.FIG5_TEXT_LEVELS["cosine"][2][0] == 0.95 and "0.95" in metric["peak cosine, baseline"].paper
    for levels, metrics in drawn:
        assert len(levels) == len(metrics)
        for (value, what), name in zip(levels, metrics):
            claim = metric[name]
            number = f"{value:g}"
            assert claim.source.kind == "summary" and number in claim.source.quote and number in claim.paper, name
            assert number in what, what
