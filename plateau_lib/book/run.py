"""Run one notebook with papermill, refusing parameters its ``parameters`` cell does not declare.

papermill injects any name it is given, so a typo (``lrr`` for ``lr``) runs the whole notebook with the
default and says nothing. Here every parameter is checked against the notebook's ``parameters`` cell
first, before any compute.

    python -m plateau_lib notebook NOTEBOOK OUT [-p NAME VALUE]... [-y YAML]... [--cwd DIR]

``-p`` values are typed as papermill types them (``0.1`` -> float, ``3`` -> int, ``False`` -> bool,
``None`` -> None, anything else a string); ``-y`` takes a YAML (or JSON) mapping, for lists and dicts.
Unknown parameters: exit status 2 and a one-line message. The notebook runs with ``--cwd`` (default: the
repository root, as in the book build) as its working directory.
"""
from __future__ import annotations

import json


def declared_parameters(notebook_path) -> list[str]:
    """The names assigned in the notebook's ``parameters`` cell, in cell order ([] without such a cell)."""
    from papermill import inspect_notebook
    return list(inspect_notebook(str(notebook_path)))


def check_parameters(notebook_path, parameters: dict, label: str | None = None) -> None:
    """Raise ValueError if ``parameters`` has a name the notebook's ``parameters`` cell does not declare.

    A notebook without a ``parameters`` cell accepts none. ``label`` names the notebook in the message
    (default: the path as given).
    """
    allowed = declared_parameters(notebook_path)
    unknown = [name for name in parameters if name not in allowed]
    if not unknown:
        return
    label = str(notebook_path) if label is None else label
    names = ", ".join(repr(name) for name in unknown)
    which = f"parameter {names}" if len(unknown) == 1 else f"parameters {names}"
    accepted = ", ".join(sorted(allowed)) if allowed else "none (no parameters cell)"
    raise ValueError(f"{label} has no {which}; allowed: {accepted}")


def run_notebook(notebook, output, parameters: dict | None = None, cwd=None, *, check: bool = True,
                 **papermill_kwargs):
    """``check_parameters`` (unless ``check=False``: already done), then ``papermill.execute_notebook``
    (kernel python3, cell output logged, no progress bar; ``papermill_kwargs`` override these).
    Returns the executed notebook."""
    import papermill
    parameters = dict(parameters or {})
    if check:
        check_parameters(notebook, parameters)
    options = {"kernel_name": "python3", "log_output": True, "progress_bar": False, **papermill_kwargs}
    return papermill.execute_notebook(str(notebook), str(output), parameters=parameters,
                                      cwd=None if cwd is None else str(cwd), **options)


def parse_value(text: str):
    """A ``-p`` value typed as papermill's CLI types it."""
    try:
        from papermill.cli import _resolve_type
    except ImportError:  # a private helper: same rules if it ever moves
        def _resolve_type(value):
            constants = {"True": True, "False": False, "None": None}
            if value in constants:
                return constants[value]
            for cast in (int, float):
                try:
                    return cast(value)
                except ValueError:
                    pass
            return value
    return _resolve_type(text)


def parse_mapping(text: str) -> dict:
    """A ``-y`` mapping: JSON first (so ``1e-05`` stays a float), else YAML."""
    import yaml
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ValueError(f"-y is not valid YAML: {' '.join(str(err).split())}") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"-y must be a YAML mapping, got {type(value).__name__}: {text!r}")
    return value
