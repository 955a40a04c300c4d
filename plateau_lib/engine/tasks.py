"""The tasks the training loop knows, by name (``TrainConfig.task``).

Each entry says where its class lives; it is imported on first use. Chapters import the engine, never the
reverse, so the loop reaches a chapter's task only through this table.
"""
from __future__ import annotations

import importlib

TASKS = {
    "mws": "plateau_lib.plateau.tasks:MovingWindowSum",
    "prefix_sum": "plateau_lib.plateau.tasks:PrefixSum",
    "repeat": "plateau_lib.plateau.tasks:Repeat",
    "copy": "plateau_lib.plateau.tasks:Copy",
    "reverse": "plateau_lib.plateau.tasks:reverse_copy",
    "histogram": "plateau_lib.plateau.tasks:Histogram",
    "permutation": "plateau_lib.plateau.tasks:Permutation",
    "addition": "plateau_lib.plateau.tasks:Addition",
    "concat_mws": "plateau_lib.plateau.tasks:ConcatMWS",
    "icl_regression": "plateau_lib.icl.task:ICLRegression",
    "next_token": "plateau_lib.llm.task:NextToken",
}


def task_class(name: str):
    """The class (or factory) of task ``name``; ValueError listing the known names."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; allowed: {sorted(TASKS)}")
    module, attr = TASKS[name].split(":")
    return getattr(importlib.import_module(module), attr)


def make_task(name: str, **kwargs):
    """Build a task by name; unknown names or parameters raise a ValueError listing what is allowed."""
    factory = task_class(name)
    try:
        return factory(**kwargs)
    except TypeError as err:
        raise ValueError(f"bad parameters {sorted(kwargs)} for task {name!r}: {err}") from None
