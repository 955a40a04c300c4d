"""The small trained MWS transformer of the LLC page: its config, its weights w*, the SGLD data and the loss.

The model is the moving-window-sum transformer of the other chapters at the page's ``d_model``, trained
``train_steps`` steps (Adam, lr 1e-3, batch 128) through the result cache. SGLD runs on a fixed set of
``n_data`` task sequences; the loss is the training loss (cross-entropy over every next-token position).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from plateau_lib.engine import cache
from plateau_lib.engine.runs import TrainConfig, TrainResult
from plateau_lib.llc import calibration
from plateau_lib.llc.config import SGLDConfig
from plateau_lib.plateau import metrics as M
from plateau_lib.plateau.model import GPT

DATA_SEED = 1234  # the SGLD sequences
EARLY_FRACTION = 10  # the early checkpoint is trained steps // EARLY_FRACTION steps (at least 10)


def sequence_loss(model, batch: torch.Tensor) -> torch.Tensor:
    """The training loss on a batch of task sequences: mean cross-entropy over every next-token position."""
    return M.loss_all(model(batch[:, :-1]), batch)


def transformer_config(settings: dict, seed: int = 0) -> TrainConfig:
    """The page's MWS training config: ``d_model`` and ``train_steps`` from the settings."""
    return TrainConfig(task="mws", d_model=settings["d_model"], lr=1e-3, batch_size=128,
                       steps=settings["train_steps"], eval_every=50, seed=seed, device="auto", checkpoint_steps=())


def early_config(cfg: TrainConfig) -> TrainConfig:
    """The same run stopped early (steps // 10, at least 10): a point that is not a minimum."""
    return cfg.replace(steps=max(10, cfg.steps // EARLY_FRACTION))


@dataclass
class TrainedTransformer:
    """A trained run with its model at w*."""
    config: TrainConfig
    run: TrainResult
    model: GPT

    @property
    def num_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def load_trained(cfg: TrainConfig, use_cache: bool = True) -> TrainedTransformer:
    """Train ``cfg`` through the result cache (its weights are needed, so a hit without weights retrains)."""
    model, run = cache.current().trained_model(cfg, use_cache)
    return TrainedTransformer(cfg, run, model)


def sgld_sequences(cfg: TrainConfig, n: int) -> torch.Tensor:
    """The fixed SGLD data set: ``n`` sequences of ``cfg``'s task (seed ``DATA_SEED``)."""
    return cfg.make_task().sample(n, torch.Generator().manual_seed(DATA_SEED))


def page_model(settings: dict, use_cache: bool = True, seed: int = 0):
    """What the LLC pages sample: ``(cfg, trained, seqs, sgld)``, the page's training config, its trained
    transformer (through the result cache), the fixed SGLD sequences and the page's SGLD settings (its chains,
    draws and batch, every estimate at ``seed``)."""
    cfg = transformer_config(settings)
    sgld = SGLDConfig(num_chains=settings["num_chains"], num_draws=settings["num_draws"],
                      batch_size=settings["sgld_batch"], seed=seed)
    return cfg, load_trained(cfg, use_cache), sgld_sequences(cfg, settings["n_data"]), sgld


def loss_at(model, data: torch.Tensor) -> float:
    """L(w*): the loss of ``model`` on the whole of ``data``."""
    with torch.no_grad():
        return float(sequence_loss(model, data))


# ---- the calibration that meets the LLC page's criteria ----------------------------------------------------------

# The live sweep's transformer (the cpu preset's), its step sizes widened downwards and its chains lengthened to
# 2,000 draws: the sweep the page's four criteria can be met on. Computed once (scripts/llc_calibration.py, about
# 15 minutes on one core) and committed; the page loads it.
LONG_CALIBRATION = {"epsilons": [1e-5, 3e-5, 1e-4, 3e-4, 1e-3], "nbetas": [None, 100.0], "gammas": [100.0],
                    "num_chains": 4, "num_draws": 2000}
LONG_CALIBRATION_KIND = "llc_calibration_long"


def long_calibration_sgld(settings: dict, seed: int = 0) -> SGLDConfig:
    """The long sweep's SGLD settings other than the swept (ε, nβ, γ): ``LONG_CALIBRATION``'s chains and draws at
    the page's SGLD batch."""
    return SGLDConfig(num_chains=LONG_CALIBRATION["num_chains"], num_draws=LONG_CALIBRATION["num_draws"],
                      batch_size=settings["sgld_batch"], seed=seed)


def long_calibration_cells() -> list[tuple]:
    """The long sweep's (ε, nβ, γ) cells, in the order they are computed and numbered."""
    grid = LONG_CALIBRATION
    return list(itertools.product(grid["epsilons"], grid["nbetas"], grid["gammas"]))


def long_calibration_table(settings: dict) -> cache.StoredTable:
    """The stored long sweep on the transformer of ``settings`` (one row per cell, ``calibration_sweep``'s columns
    and the cell's number)."""
    grid = {k: LONG_CALIBRATION[k] for k in ("epsilons", "nbetas", "gammas")}
    return cache.StoredTable(LONG_CALIBRATION_KIND, {"run": transformer_config(settings), "grid": grid,
                                                     "sgld": long_calibration_sgld(settings).key_dict(),
                                                     "n_data": settings["n_data"], "version": 1})


def long_calibration(settings: dict, compute: bool = False, deadline: float | None = None, progress: bool = True):
    """``(table, meta)`` of the long sweep (stored; else, with ``compute``, computed and kept cell by cell, so that
    an interrupted run resumes; else None)."""
    cfg = transformer_config(settings)

    def point():
        return load_trained(cfg).model, sequence_loss, sgld_sequences(cfg, settings["n_data"])
    return calibration.stored_sweep(long_calibration_table(settings), long_calibration_cells(), point,
                                    long_calibration_sgld(settings), "the LLC page's calibration sweep with chains of "
                                    f"{LONG_CALIBRATION['num_draws']:,} draws", compute, deadline, progress)
