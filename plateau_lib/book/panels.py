"""Live "try it" panels: a page's key knobs as controls that re-run its experiment in a running kernel.

``try_it(controls, run, ...)`` is the one function the pages call. In a live kernel (JupyterLab: ``make lab``) it
shows the controls, a **Run** button, a status line and the figure ``run(**values)`` returns; with
``continuous=True`` (closed-form pages, instant) every change of a control redraws and there is no button. ``run``
trains through the result cache, so a repeated Run is a cache hit; a failing run shows one line in the status,
never a traceback, and nothing cached is lost. In the static book (``utils.in_book_build()``) the panel is the
page's precomputed views, with one line saying the page runs live with ``make lab`` and naming its controls:
nothing in the static page pretends to compute.
"""
from __future__ import annotations

import html
import time
from typing import Callable

import ipywidgets as widgets
from matplotlib.figure import Figure

from plateau_lib.book.widgets import figure_png
from plateau_lib.engine.cache import current
from plateau_lib.engine.utils import in_book_build


def trained_beside(cfg, committed_cfg=None, progress: bool = True) -> tuple:
    """``(result, committed)``: a Run's ``cfg`` trained through the result cache (a repeated Run is a hit) and the
    committed result of ``committed_cfg`` it is drawn beside (None when not given or not committed)."""
    store = current()
    committed = None if committed_cfg is None else store.committed_result(committed_cfg)
    return store.train(cfg, progress=progress), committed


class Panel(widgets.VBox):
    """The live panel: ``controls`` ({name: widget}), Run (unless ``continuous``), status, progress and figure.
    After a run, ``figure_png`` holds the drawn figure, ``result`` what ``run`` returned beside it, ``seconds``
    its time and ``error`` the message of a failed run (None after a good one)."""

    def __init__(self, controls: dict, run: Callable, continuous: bool = False):
        self.controls, self._run = controls, run
        self.button = widgets.Button(description="Run", button_style="primary", icon="play",
                                     tooltip="re-run this page's experiment with these values")
        self.status = widgets.HTML()
        self.progress = widgets.Output()
        self.image = widgets.Image(format="png", layout=widgets.Layout(display="none"))  # shown after a run
        self.result = self.seconds = self.error = None
        if continuous:
            for control in controls.values():
                control.observe(lambda _change: self.run(), names="value")
        else:
            self.button.on_click(lambda _button: self.run())
        row = widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        super().__init__([row, *([] if continuous else [self.button]), self.status, self.progress, self.image])

    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def run(self) -> "Panel":
        """Call ``run`` with the controls' values and show its figure (or one line saying why it failed)."""
        self.button.disabled = True
        self.status.value = "running…"
        start = time.perf_counter()
        try:
            with self.progress:
                out = self._run(**self.values())
            fig, self.result = out if isinstance(out, tuple) else (out, None)
            if not isinstance(fig, Figure):
                raise TypeError(f"the page's run function must return a matplotlib Figure, got {type(fig).__name__}")
            self.image.value = figure_png(fig)
            self.image.layout.display = ""
            self.seconds, self.error = time.perf_counter() - start, None
            self.status.value = f"done in {self.seconds:.1f} s"
        except Exception as err:  # noqa: BLE001 -- the panel reports any failure in one line; the kernel goes on
            self.error = f"{type(err).__name__}: {err}"
            self.status.value = f"<b>Could not run:</b> {html.escape(self.error)}"
        finally:
            self.progress.clear_output()
            self.button.disabled = False
        return self


def try_it(controls: dict, run: Callable, static: widgets.Widget | None = None, continuous: bool = False,
           live: bool | None = None) -> widgets.Widget:
    """The page's panel: live (``Panel``) in a running kernel, else ``static`` (the precomputed views) under one
    line naming the controls. ``live`` None: live unless this is the book build. What a run costs is said in the
    page's own words beside the panel."""
    if not controls:
        raise ValueError("parameter 'controls' must name at least one control")
    live = not in_book_build() if live is None else live
    if live:
        return Panel(controls, run, continuous)
    names = ", ".join(getattr(control, "description", "") or name for name, control in controls.items())
    action = "redraws as you move them" if continuous else "re-runs the experiment with a Run button"
    line = widgets.HTML(f"<p><em>Live in JupyterLab (<code>make lab</code>): controls for "
                        f"{html.escape(names)}; the panel {action}.</em></p>")
    return widgets.VBox([line, *([static] if static is not None else [])])
