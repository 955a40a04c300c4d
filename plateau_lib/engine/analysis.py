"""A step after training that the paper queue runs (``plateau_lib.paper``): each chapter declares its own in its
``analyses`` module, and ``plateau_lib.chapters.analyses`` gathers them."""
from __future__ import annotations

from typing import Callable, NamedTuple

from plateau_lib.engine import cache


class Analysis(NamedTuple):
    """A step after training: it reads the local weights or checkpoints of ``runs`` (declared training runs) and
    commits the stored tables named ``outputs`` (their ``StoredTable.name``: ``<kind>-<key>`` folders); ``compute(device, stack,
    deadline)`` does it, resumably (a table built row by row stops past ``deadline``: ``StoredTable.build``), and
    returns the folders it committed."""
    page: str
    label: str
    runs: tuple
    outputs: tuple
    compute: Callable

    def committed(self) -> bool:
        return all((cache.current().committed / name / "meta.json").exists() for name in self.outputs)

    def trained(self) -> bool:
        """Whether every run it reads has been trained (committed or local)."""
        return all(cache.current().run(c) is not None for c in self.runs)
