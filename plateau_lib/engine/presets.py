"""What every chapter's presets share: the preset names, their checks and Hoogland et al.'s log + linear
checkpoint schedule (SGLD settings are ``plateau_lib.llc.SGLDConfig``s, overridden with their ``replace``).
Each chapter's own configs live in its ``presets`` module
(``plateau_lib.plateau.presets``, ``plateau_lib.icl.presets``, ``plateau_lib.llm.presets``, ``plateau_lib.llc.presets``):
``paper`` is the paper's config exactly; ``cpu`` is the smallest config that still shows the phenomenon on a
2-core laptop; ``cpu_long`` (some pages) a committed long CPU run. Every field can be overridden.
"""
from __future__ import annotations

import numpy as np

PRESETS = ("cpu", "paper")


def check_preset(preset: str) -> str:
    """``preset`` if it is "cpu" or "paper", else a ValueError naming both."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
    return preset


def preset_of(preset: str, table: dict) -> str:
    """``preset`` if ``table`` (a page's configs by preset) has it, else a ValueError listing the table's."""
    if preset not in table:
        raise ValueError(f"preset must be one of {sorted(table)}, got {preset!r}")
    return preset


def reserved(overrides, names):
    """ValueError if the free-form ``overrides`` set a field the page sets itself (``names``)."""
    clash = sorted(set(overrides or {}) & set(names))
    if clash:
        raise ValueError(f"parameter 'overrides' may not set {clash}: the page sets them itself")


def log_linear_steps(total: int, n_log: int, n_linear: int) -> tuple:
    """Hoogland et al.'s checkpoint schedule: the union of ``n_log`` log-spaced steps in [1, total] and
    ``n_linear`` linear-spaced steps in [0, total - 1] (190 unique steps for 500k, 100 + 100)."""
    log = np.logspace(0, np.log10(total), n_log).astype(int)
    linear = np.linspace(0, total - 1, n_linear).astype(int)
    return tuple(sorted({int(s) for s in (*log, *linear) if s <= total}))
