"""A long job's state between work sessions (README, "Long CPU jobs"): its compact resume state and kept files wait,
committed, in ``Store.in_progress()/<name>/``; a session copies them into a local working folder, trains on from
there, and commits them back before it stops. Used by the stages run (``icl.long_run``), the stages diagnosis
(``icl.diagnosis``) and the transient search's stopped trials (``icl.transient_search``)."""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

from plateau_lib.engine import cache
from plateau_lib.engine.utils import atomic_path


def folder(name: str) -> Path:
    """The committed folder of the long job ``name`` in the current store."""
    return cache.current().in_progress() / name


def resume_step(path: Path) -> int:
    """The step a resume state (``train``'s ``resume.pt``) reached; -1 where there is none."""
    return int(torch.load(path, weights_only=True, map_location="cpu")["step"]) if Path(path).exists() else -1


def further(*paths: Path) -> Path:
    """The resume state furthest along among ``paths`` (the first of equals)."""
    return max(paths, key=lambda p: (resume_step(p), -paths.index(p)))


def restore(committed: Path, working: Path, files: str | None = "ckpt_*.pt") -> int:
    """Copy the committed ``resume.pt`` into ``working`` where it is further along than the one there, and the
    committed ``files`` (a glob; None: none) that ``working`` lacks; returns the step training resumes from (0:
    from the start)."""
    working.mkdir(parents=True, exist_ok=True)
    if resume_step(committed / "resume.pt") > resume_step(working / "resume.pt"):
        shutil.copy2(committed / "resume.pt", working / "resume.pt")
    for path in sorted(committed.glob(files)) if files and committed.exists() else ():
        if not (working / path.name).exists():
            shutil.copy2(path, working / path.name)
    return max(resume_step(working / "resume.pt"), 0)


def keep(resume: Path, committed: Path) -> int:
    """Copy the resume state ``resume`` into ``committed`` (atomically) where it is further along than the one
    there; returns the step the committed state reached (-1: none)."""
    if resume_step(resume) > resume_step(committed / "resume.pt"):
        committed.mkdir(parents=True, exist_ok=True)
        with atomic_path(committed / "resume.pt") as tmp:
            shutil.copy2(resume, tmp)
    return resume_step(committed / "resume.pt")
