"""Widgets that keep working in the static HTML book, with no kernel.

Every view is rendered to PNG at execution time and put in a ``widgets.Stack``; the control's
``index`` is ``jslink``-ed to ``Stack.selected_index``, so switching happens in the browser.
Live ``@interact`` / ``observe`` callbacks need a running kernel (Jupyter, or papermill re-runs);
in the book they show their saved state and do nothing.
"""
from __future__ import annotations

import io

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from plateau_lib.book.plots import snapshot

DPI = 100  # figures are PAGE_WIDTH inches wide: 750 px images, scaled to the column by CSS


def figure_png(fig: Figure, dpi: int = DPI) -> bytes:
    """Render a matplotlib figure to PNG bytes and close it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def image_selector(images: dict[str, Figure | bytes], description: str, kind: str = "slider") -> widgets.VBox:
    """A control (SelectionSlider or Dropdown) over precomputed images, linked in the browser."""
    if not images:
        raise ValueError("image_selector needs at least one image")
    if kind not in ("slider", "dropdown"):
        raise ValueError(f"kind must be 'slider' or 'dropdown', got {kind!r}")
    labels = list(images)
    pngs = [bytes(img) if isinstance(img, (bytes, bytearray, memoryview)) else figure_png(img)
            for img in images.values()]
    stack = widgets.Stack([widgets.Image(value=png, format="png") for png in pngs], selected_index=0)
    style = {"description_width": "initial"}
    layout = widgets.Layout(width="min(100%, 480px)")
    if kind == "slider":
        control = widgets.SelectionSlider(options=labels, index=0, description=description,
                                          continuous_update=True, style=style, layout=layout)
    else:
        control = widgets.Dropdown(options=labels, index=0, description=description, style=style, layout=layout)
    box = widgets.VBox([control, stack])
    box.link = widgets.jslink((control, "index"), (stack, "selected_index"))
    return box


def step_frames(result, jump_step, query_rows, title: str = "", n: int = 10) -> dict:
    """About ``n`` snapshots (attention map and cosine matrix) of one run, from step 0 to a little after its
    jump (the whole run if it never jumps), plus the evaluations just before and at the jump."""
    steps = np.asarray(result.arrays["step"])
    every = int(steps[1] - steps[0]) if len(steps) > 1 else 1
    jumped = jump_step is not None and np.isfinite(jump_step)
    last = min(steps[-1], jump_step + 3 * every) if jumped else steps[-1]
    wanted = np.linspace(0, last, n)
    if jumped:
        wanted = np.append(wanted, [jump_step - every, jump_step])
    picked = np.unique([int(np.abs(steps - w).argmin()) for w in wanted])[: n + 2]
    return {f"step {int(steps[i])}": snapshot(result.arrays["attn"][i], result.arrays["cos"][i], int(steps[i]),
                                               query_rows, title=f"{title}step {int(steps[i])}")
            for i in picked}
