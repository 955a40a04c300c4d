"""The small trained MWS transformer of the LLC page: its config, its weights w*, the SGLD data and the loss.

The model is the moving-window-sum transformer of the other chapters at the page's ``d_model``, trained
``train_steps`` steps (Adam, lr 1e-3, batch 128) through the result cache. SGLD runs on a fixed set of
``n_data`` task sequences; the loss is the training loss (cross-entropy over every next-token position).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from plateau_lib.engine.cache import current
from plateau_lib.engine.runs import TrainConfig, TrainResult
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
    model, run = current().trained_model(cfg, use_cache)
    return TrainedTransformer(cfg, run, model)


def sgld_sequences(cfg: TrainConfig, n: int) -> torch.Tensor:
    """The fixed SGLD data set: ``n`` sequences of ``cfg``'s task (seed ``DATA_SEED``)."""
    return cfg.make_task().sample(n, torch.Generator().manual_seed(DATA_SEED))


def loss_at(model, data: torch.Tensor) -> float:
    """L(w*): the loss of ``model`` on the whole of ``data``."""
    with torch.no_grad():
        return float(sequence_loss(model, data))
