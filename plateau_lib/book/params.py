"""Notebook parameter parsing: papermill's ``-p`` passes lists and dicts as strings; accept both.

Each function raises a ValueError naming the parameter and what is allowed, before any compute.
"""
from __future__ import annotations

import yaml


def parsed(value, name):
    """A string parameter parsed as YAML/JSON (lists, dicts, numbers); anything else unchanged."""
    if isinstance(value, str):
        try:
            return yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ValueError(f"parameter {name!r}: cannot parse {value!r} ({err})") from None
    return value


def int_list(value, name, default):
    """None -> default; an int or a list of ints >= 0 -> list of ints."""
    value = parsed(value, name)
    if value is None:
        return list(default)
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise ValueError(f"parameter {name!r} must be a non-empty list of integers >= 0, got {value!r}")
    repeated = sorted({v for v in value if list(value).count(v) > 1})
    if repeated:
        raise ValueError(f"parameter {name!r} lists {repeated} more than once; give each value once, got {value!r}")
    return list(value)


def positive_list(value, name, default):
    """None -> default; a number or a list of numbers > 0 -> list of floats."""
    value = parsed(value, name)
    if value is None:
        return [float(v) for v in default]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in value):
        raise ValueError(f"parameter {name!r} must be a non-empty list of numbers > 0, got {value!r}")
    return [float(v) for v in value]


def overrides_dict(value, reserved=()):
    """The ``overrides`` parameter as a dict; fields the notebook sets itself are refused."""
    value = parsed(value, "overrides") or {}
    if not isinstance(value, dict):
        raise ValueError(f"parameter 'overrides' must be a mapping of TrainConfig fields, got {value!r}")
    clash = sorted(set(value) & set(reserved))
    if clash:
        raise ValueError(f"parameter 'overrides' may not set {clash}: this notebook sets them itself")
    return value


def one_number(value, name, default, kind=float):
    """None -> default; a single number > 0 (an int when ``kind`` is int; one-element lists accepted)."""
    value = parsed(value, name)
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if value is None:
        return kind(default)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= (0 if kind is int else 1e-300)
    if not ok or (kind is int and not isinstance(value, int)):
        what = "an integer >= 0" if kind is int else "a number > 0"
        raise ValueError(f"parameter {name!r} must be {what}, got {value!r}")
    return kind(value)
