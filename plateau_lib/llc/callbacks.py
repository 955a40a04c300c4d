"""LLC over training: at saved checkpoints, or online as a training callback (no checkpoints written).

Both use one seed at every step, so every estimate sees the same SGLD noise and the same batches
(Hoogland et al.'s trick: the LLC-over-time curve is then smooth, and its changes are the model's).
``LLCCallback(..., fresh_seed=True)`` does what a hand-made loop does instead (a new seed at every step),
and :func:`train_with_online_llc` trains once with both, to compare the curves.
"""
from __future__ import annotations

import copy
import os
from datetime import datetime, timezone
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from tqdm.auto import tqdm

from plateau_lib.engine.cache import current
from plateau_lib.engine.train import train
from plateau_lib.engine.utils import git_commit, in_book_build
from plateau_lib.llc.config import SGLDConfig
from plateau_lib.llc.estimator import estimate_llc, estimate_llc_stacked
from plateau_lib.llc.result import LLCResult

FRESH_SEED_OFFSET = 1000  # fresh_seed=True: the seed at step s is seed + FRESH_SEED_OFFSET + s
LLC_COLUMNS = ["step", "llc_mean", "llc_se", "llc_std", "num_diverged", "init_loss", "mala_mean", "elapsed_s"]


def _load_state(obj):
    if isinstance(obj, (str, os.PathLike)):
        obj = torch.load(obj, map_location="cpu", weights_only=True)
    if isinstance(obj, nn.Module):
        return obj.state_dict()
    if isinstance(obj, Mapping) and "model" in obj and isinstance(obj["model"], Mapping):
        return obj["model"]  # a training checkpoint {"model": state_dict, "optimizer": ...}
    if not isinstance(obj, Mapping):
        raise ValueError(f"a checkpoint must be a state_dict, an nn.Module or a path to one, got {type(obj).__name__}")
    return obj


def llc_row(step: int, res: LLCResult) -> dict:
    return {"step": step, "llc_mean": res.llc_mean, "llc_se": res.llc_se, "llc_std": res.llc_std,
            "num_diverged": int(res.diverged.sum()), "init_loss": res.init_loss, "mala_mean": res.mala_mean,
            "elapsed_s": res.elapsed_s}


def llc_over_checkpoints(model: nn.Module, loss_fn: Callable, data, checkpoints, sgld: SGLDConfig, *,
                         stack: int = 1, progress: bool = True, return_results: bool = False, kept=None,
                         deadline: float | None = None, desc: str = "LLC over checkpoints", **run):
    """Estimate the LLC at each checkpoint at the SGLD settings ``sgld`` (one seed for all).

    model: an instance of the architecture (its weights are not changed; copies are loaded).
    checkpoints: ``{step: state_dict | nn.Module | path}`` or a list of ``(step, ...)`` pairs; paths are
        loaded with ``torch.load(weights_only=True)`` and may hold ``{"model": state_dict, ...}``.
    stack: checkpoints per batched computation (>= 1): groups of ``stack`` checkpoints x the chains run
        together on the vmap backend (:func:`estimate_llc_stacked`; worth it on a GPU), each with its own
        w*. The numbers are those of one checkpoint at a time.
    kept: a ``cache.StoredTable`` to keep the rows in as each group is estimated: rows it already holds are not
        estimated again (an interrupted run resumes), and past ``deadline`` (a ``time.time()``) it stops once its
        rows are kept (``StoredTable.build``). Not with ``return_results``.
    run: the estimator's run options (device, backend, ...).
    Returns a tidy DataFrame (one row per checkpoint: step, llc_mean, llc_se, llc_std, num_diverged,
    init_loss, mala_mean, elapsed_s) and, with ``return_results``, also ``{step: LLCResult}``.
    """
    items = list(checkpoints.items() if isinstance(checkpoints, Mapping) else checkpoints)
    if not items:
        raise ValueError("checkpoints is empty")
    if not isinstance(stack, int) or isinstance(stack, bool) or stack < 1:
        raise ValueError(f"stack must be an integer >= 1 (checkpoints per batched computation), got {stack!r}")
    if kept is not None:
        if return_results:
            raise ValueError("parameter 'kept' keeps rows, not LLCResults: give return_results=False with it")
        by_step = dict(items)
        return kept.build(list(by_step), lambda steps: llc_over_checkpoints(
            model, loss_fn, data, [(s, by_step[s]) for s in steps], sgld, stack=stack, progress=False, **run),
            group=stack, progress=progress, desc=desc, deadline=deadline)
    groups = [items[i:i + stack] for i in range(0, len(items), stack)]
    rows, results = [], {}
    bar = tqdm(total=len(items), desc=desc, disable=not progress or in_book_build())
    for group in groups:
        models = []
        for _, ckpt in group:
            work = copy.deepcopy(model)
            work.load_state_dict(_load_state(ckpt))
            models.append(work)
        for (step, _), res in zip(group, estimate_llc_stacked(models, loss_fn, data, sgld, **run)):
            results[step] = res
            rows.append(llc_row(step, res))
        bar.update(len(group))
    bar.close()
    df = pd.DataFrame(rows)
    return (df, results) if return_results else df


def llc_at_run_checkpoints(cfg, loss_fn: Callable, data, kept, sgld: SGLDConfig, *, with_final: bool = False,
                           use_cache: bool = True, progress: bool = True, stack: int = 1,
                           deadline: float | None = None, desc: str = "λ̂ at checkpoints", **run):
    """λ̂ at every checkpoint of the training run ``cfg`` (``cfg.checkpoint_steps``; ``with_final``: its final
    weights too, at ``cfg.steps``), one seed for all (:func:`llc_over_checkpoints`, ``stack`` checkpoints per
    batched computation). The run is trained through the store where its checkpoints are missing
    (``Store.trained_checkpoints``, the current store's), and the rows are kept in the stored table ``kept`` as they are made: an
    interrupted estimate resumes, and past ``deadline`` it stops once they are kept. ``run``: the estimator's run
    options. Returns ``(rows, TrainResult, {step: checkpoint path})``."""
    trained, ckpts = current().trained_checkpoints(cfg, use_cache, progress)
    states = {**ckpts, cfg.steps: trained.final_state} if with_final else ckpts
    rows = llc_over_checkpoints(cfg.make_task().build_model(cfg), loss_fn, data, dict(sorted(states.items())), sgld,
                                stack=stack, progress=progress, kept=kept, deadline=deadline, desc=desc, **run)
    return rows, trained, ckpts


class LLCCallback:
    """Estimate the LLC online at chosen training steps, without writing checkpoints.

    Call ``callback(step, model)`` from the training loop after each optimizer step (or pass it to a
    trainer that does); at steps in ``steps`` it runs :func:`estimate_llc` at the SGLD settings ``sgld`` on the
    live model (which is left untouched) with the same seed every time (``run``: the estimator's run options).
    ``table()`` gives the tidy LLC-over-training table; ``results`` maps step -> :class:`LLCResult`.

    fresh_seed: use the seed ``sgld.seed + FRESH_SEED_OFFSET + step`` at each step instead (new noise and
    batches at every step, as a hand-made loop does; its curve carries each step's own sampling error).

    Example::

        cb = LLCCallback(loss_fn, data, [0, 100, 200], SGLDConfig(epsilon=1e-3, gamma=100, num_draws=100))
        for step in range(201):
            ...; opt.step()
            cb(step, model)
        cb.table()
    """

    def __init__(self, loss_fn: Callable, data, steps: Iterable[int], sgld: SGLDConfig, *, progress: bool = True,
                 fresh_seed: bool = False, **run):
        self.loss_fn, self.data, self.sgld, self.run = loss_fn, data, sgld, run
        self.fresh_seed = bool(fresh_seed)
        self.steps = sorted({int(s) for s in steps})
        if not self.steps or self.steps[0] < 0:
            raise ValueError(f"steps must be a non-empty collection of non-negative integers, got {steps!r}")
        self._pending = set(self.steps)
        self.results: dict[int, LLCResult] = {}
        self._bar = tqdm(total=len(self.steps), desc="LLC (online)", disable=not progress or in_book_build())

    def seed_at(self, step: int) -> int:
        """The SGLD seed used at ``step``."""
        return self.sgld.seed + FRESH_SEED_OFFSET + step if self.fresh_seed else self.sgld.seed

    def __call__(self, step: int, model: nn.Module) -> LLCResult | None:
        if step not in self._pending:
            return None
        was_training = model.training
        res = estimate_llc(model, self.loss_fn, self.data, self.sgld.replace(seed=self.seed_at(step)), **self.run)
        model.train(was_training)
        self._pending.discard(step)
        self.results[step] = res
        self._bar.update(1)
        self._bar.set_postfix(step=step, llc=f"{res.llc_mean:.3g}")
        if not self._pending:
            self._bar.close()
        return res

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([llc_row(s, r) for s, r in sorted(self.results.items())], columns=LLC_COLUMNS)


class StepProgress:
    """A training callback that advances one progress bar by ``per_step`` at each step of ``steps``
    (e.g. one tick per LLC estimate of the other callbacks); hidden in the book build."""

    def __init__(self, steps: Iterable[int], per_step: int = 1, desc: str = "LLC over training", progress=True):
        self.steps, self.per_step, self.done = {int(s) for s in steps}, per_step, 0
        self.total = per_step * len(self.steps)
        self.bar = tqdm(total=self.total, desc=desc, disable=not progress or in_book_build())

    def __call__(self, step: int, model: nn.Module) -> None:
        if step in self.steps:
            self.done += self.per_step
            self.bar.update(self.per_step)
            if self.done >= self.total:
                self.bar.close()


def evenly_spaced_steps(total: int, n: int = 6) -> list[int]:
    """``n`` training steps spread evenly over (0, total], step 0 left out (distinct, sorted)."""
    return sorted({int(s) for s in np.linspace(0, total, n + 1)} - {0})


SAME_SEED = "same seed every step"
FRESH_SEED = "fresh seed every step (hand-made)"


def train_with_online_llc(cfg, loss_fn: Callable, data, steps: Iterable[int], sgld: SGLDConfig, *,
                          progress: bool = True, **run) -> tuple[pd.DataFrame, object]:
    """Train ``cfg`` once (``plateau_lib.engine.train``) with two online LLC callbacks: the same seed at every step,
    and a fresh seed per step. Returns the tidy curve (one row per (seeding, step), column ``seeding``) and
    the TrainResult of the run (not cached: the callbacks need the live model).
    """
    same = LLCCallback(loss_fn, data, steps, sgld, progress=False, **run)
    fresh = LLCCallback(loss_fn, data, steps, sgld, progress=False, fresh_seed=True, **run)
    ticks = StepProgress(same.steps, per_step=2, progress=progress)
    result = train(cfg, callbacks=[same, fresh, ticks], progress=False)
    result.meta.update(commit=git_commit(), date=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    curve = pd.concat([same.table().assign(seeding=SAME_SEED), fresh.table().assign(seeding=FRESH_SEED)],
                      ignore_index=True)
    return curve, result
