"""A step after training that the paper queue runs (``plateau_lib.paper_queue``): each chapter declares its own in
its ``analyses`` module, and ``plateau_lib.chapters.analyses`` gathers them."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, NamedTuple

from plateau_lib.engine import cache


class Analysis(NamedTuple):
    """A step after training: it reads the local weights or checkpoints of ``runs`` (declared training runs) and
    makes the stored tables ``tables`` (``cache.StoredTable``s). ``compute(device, stack, deadline)`` makes them
    locally, resumably (a table built row by row stops past ``deadline``: ``StoredTable.build``); ``commit``
    copies the runs' results and the tables made into ``results/``."""
    page: str
    label: str
    runs: tuple
    tables: tuple
    compute: Callable

    @property
    def outputs(self) -> tuple[str, ...]:
        """The tables' folder names (``<kind>-<key>``)."""
        return tuple(t.name for t in self.tables)

    def committed(self) -> bool:
        return all(t.committed() for t in self.tables)

    def trained(self) -> bool:
        """Whether every run it reads has been trained (committed or local)."""
        return all(cache.current().run(c) is not None for c in self.runs)

    def commit(self) -> list[Path]:
        """Copy into ``results/`` the results of its runs and the tables made so far (a calibration made before a
        stopped λ̂, say); returns the folders, those of the tables last."""
        return [cache.current().commit(c) for c in self.runs] + [t.commit() for t in self.tables if t.path()]
