"""One developmental run of Hoogland et al.: training with log+linear checkpoints, the LLC at every checkpoint
(the same SGLD seed at each), and the structural markers read from the checkpoints.

The training run goes through the result cache (``train-<key>``); the LLC curve and the structure table
are stored beside it as ``icl_stages-<key>`` (``llc.csv``, ``structure.csv``, ``meta.json`` with the
settings and provenance). Each checkpoint's row is appended as soon as it is estimated, so an interrupted
run resumes at the next checkpoint. ``commit(cfg, llc)`` copies both into ``results/``.

    OMP_NUM_THREADS=1 python -m plateau_lib stages --preset cpu_long   # the long CPU run
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from plateau_lib.engine import cache
from plateau_lib.engine.runs import TrainConfig, TrainResult
from plateau_lib.engine.utils import resolve_device
from plateau_lib.llc.callbacks import llc_at_run_checkpoints
from plateau_lib.llc.config import SGLDConfig

KIND = "icl_stages"
VERSION = 1
# The paper's run (Hoogland et al., seed 1): its length, stage boundaries and λ̂ at its marked points.
PAPER_STEPS = 500_000
PAPER_BOUNDARIES = (1_000, 40_000, 126_000, 320_000)
# λ̂ and the evaluation MSE of the published seed-1 run (reference icl_regression.md §4.2).
PAPER_LLC = {0: -0.7, 1_000: 18.6, 5_000: 124.0, 10_000: 156.0, 40_000: 169.3, 126_000: 156.9,
             320_000: 112.8, 500_000: 116.3}
# The weight norm of the same run at its boundaries and end (reference §4.2): most of its growth is in LR3-LR4.
PAPER_WEIGHT_NORM = {0: 24.9, 40_000: 31.9, 126_000: 68.7, 323_232: 213.0, 500_000: 236.0}
# The seed-1 run's other logged markers (reference §4.2): evaluation MSE, Δ to ridge (not divided by D), and the
# loss on inputs scaled by g = 5, which the authors' notebook computed with noise of std 0.125 (variance 0.0156), so
# only its direction compares with ours (variance 0.125); and the range of λ̂ over their seeds 0-4 at each point.
PAPER_EVAL_LOSS = {0: 4.45, 1_000: 4.17, 5_000: 2.58, 10_000: 2.10, 24_000: 1.93, 40_000: 1.90, 80_000: 1.86,
                   126_000: 1.83, 323_000: 1.78, 500_000: 1.747}
PAPER_DELTA_RIDGE = {0: 2.76, 40_000: 0.239, 126_000: 0.171, 500_000: 0.091}
PAPER_OOD_INPUTS_STD_NOISE = {0: 99.2, 40_000: 72.2, 126_000: 78.7, 323_000: 84.8, 500_000: 84.5}
PAPER_LLC_SEEDS = {1_000: (18, 20), 5_000: (109, 126), 10_000: (154, 157), 20_000: (167, 168), 40_000: (169, 171),
                   80_000: (165, 166), 126_000: (156, 158), 200_000: (148, 152), 320_000: (113, 131),
                   400_000: (113, 130), 500_000: (116, 141)}
PAPER_POINTS = {1_000: "1k (end of LR1)", 40_000: "40k (end of LR2, the λ̂ peak)", 126_000: "126k (end of LR3)",
                320_000: "320k (end of LR4)", 500_000: "500k (end)"}


@dataclass
class Development:
    """A developmental run: the training tables, the LLC at each checkpoint, the structure at each, and meta."""
    train: TrainResult
    llc: pd.DataFrame
    structure: pd.DataFrame
    meta: dict


def llc_spec(cfg: TrainConfig, llc: SGLDConfig) -> dict:
    """What a developmental run's tables depend on: the training run (its key) and the SGLD setting."""
    return {"train": cfg, "llc": llc, "version": VERSION}


def llc_data(cfg: TrainConfig, n: int, seed: int, device) -> tuple:
    """The fixed SGLD data set: n sequences of the training distribution, from their own seeded generator."""
    task = cfg.make_task()
    return task.sample(n, torch.Generator(device=device).manual_seed(10_000_019 + seed))


def structure_row(step: int, state: dict) -> dict:
    """Structural markers of one checkpoint: the mean |weight| of every layer norm (their collapse marks
    LR3-LR4), the singular values of the token and positional embeddings (their collapse ends LR2), and
    the weight norm."""
    row = {"step": step, "weight_norm": float(torch.sqrt(sum(v.float().square().sum() for v in state.values())))}
    for name, value in state.items():
        if name.endswith(".weight") and ("ln_" in name or name.startswith("ln_f")):
            row[f"ln {name.removesuffix('.weight')}"] = float(value.abs().mean())
    for label, name in (("token", "wte.weight"), ("position", "wpe")):
        for i, sv in enumerate(torch.linalg.svdvals(state[name].float()).tolist()[:5], 1):
            row[f"{label} sv{i}"] = sv
    return row


HEAD_TYPES = ("self", "previous token", "previous x", "previous y")
TYPED = 0.5  # a head half has a type when more than this share of its attention goes to that one token


def head_scores(attn: np.ndarray) -> pd.DataFrame:
    """The scores behind Hoogland et al.'s attention-head types (App. D), each head split into its x-token and
    its y-token queries, from batch-mean attention maps ``attn`` (E, L, H, 2K, 2K) at E evaluations (tokens
    alternate x_1, y_1, x_2, ...; position 0 is x_1). One row per evaluation, layer, head and query kind: the
    mean weight the queries of pairs 2..K put on themselves, on the token just before them, on the previous
    pair's x and on the previous pair's y. For an x-query the token just before *is* the previous pair's y:
    its "previous token" is left empty and the weight counts as previous y (the paper's head B1H4x)."""
    E, L, H, T, _ = attn.shape
    if T < 4:
        raise ValueError(f"head types need at least 2 (x, y) pairs per sequence, got {T} tokens")
    q = np.arange(2, T)
    is_y = q % 2 == 1
    targets = {"self": q, "previous token": q - 1, "previous x": np.where(is_y, q - 3, q - 2),
               "previous y": np.where(is_y, q - 2, q - 1)}
    e, layer, head = (a.ravel() for a in np.indices((E, L, H)))
    frames = []
    for query, mask in (("x", ~is_y), ("y", is_y)):
        scores = {name: attn[..., q[mask], pos[mask]].mean(-1).ravel() for name, pos in targets.items()}
        if query == "x":
            scores["previous token"] = np.full(E * L * H, np.nan)
        frames.append(pd.DataFrame({"evaluation": e, "layer": layer, "head": head, "query": query, **scores}))
    return pd.concat(frames, ignore_index=True)


def head_types(scores: pd.DataFrame, steps, typed: float = TYPED) -> pd.DataFrame:
    """Each head half's type at the last evaluation (``scores`` from ``head_scores``, ``steps`` the step of each
    evaluation): the type with the largest weight and that weight. ``typed``: the weight is above ``typed``, so
    that one token gets more of the attention (on average over the batch) than all the others together;
    ``typed_from``: the first evaluation step from which the half keeps that type above ``typed`` to the end
    (None if it has no type at the end). The weight also shows how hard the head is: the paper's identified
    heads are hard (weight near 1) and consistent across inputs; a per-sequence variability is not stored.
    Named as the paper: B1H3y is block 1, head 3, y-queries."""
    scores = scores.assign(step=np.asarray(steps)[scores["evaluation"]])
    types = scores[list(HEAD_TYPES)]
    scores = scores.assign(type=types.idxmax(axis=1), weight=types.max(axis=1))
    rows = []
    for (layer, head, query), half in scores.sort_values("step").groupby(["layer", "head", "query"], sort=True):
        last = half.iloc[-1]
        same = ((half["type"] == last["type"]) & (half["weight"] > typed)).to_numpy()
        settled = len(same) - int(np.argmin(same[::-1])) if not same.all() else 0
        rows.append({"head": f"B{layer + 1}H{head + 1}{query}", "type": last["type"],
                     "weight": round(float(last["weight"]), 3), "typed": bool(last["weight"] > typed),
                     "typed_from": int(half["step"].iloc[settled]) if same[-1] else None})
    return pd.DataFrame(rows)


def stored(cfg: TrainConfig, llc: SGLDConfig) -> cache.StoredTable:
    """A developmental run's stored tables (``llc``: λ̂ at every checkpoint, ``structure``), keyed by ``llc_spec``;
    its λ̂ rows are kept in it while they are estimated."""
    return cache.StoredTable(KIND, llc_spec(cfg, llc))


def load(cfg: TrainConfig, llc: SGLDConfig) -> Development | None:
    """The stored run (committed first, then local) with its training result, or None; never computes."""
    found, run = stored(cfg, llc).load(), cache.current().result(cfg)  # loads only: never trains
    if found is None or run is None:
        return None
    tables, meta = found
    return Development(run, tables["llc"], tables["structure"], meta)


def run(cfg: TrainConfig, llc: SGLDConfig, use_cache: bool = True, progress: bool = True, stack: int = 1,
        deadline: float | None = None) -> Development:
    """Train ``cfg`` (through the cache), then estimate the LLC and read the structure at every checkpoint;
    ``stack`` checkpoints per batched SGLD computation (``llc_over_checkpoints``; worth it on a GPU only); past
    ``deadline`` the λ̂ rows stop once kept (``StoredTable.build``)."""
    if use_cache:
        found = load(cfg, llc)
        if found is not None:
            return found
    device = resolve_device(cfg.device)
    table = stored(cfg, llc)
    data = llc_data(cfg, llc.n_data, llc.seed, device)
    done, train, ckpts = llc_at_run_checkpoints(cfg, cfg.make_task().loss, data, table, llc, use_cache=use_cache,
                                                progress=progress, stack=stack, deadline=deadline, device=str(device))
    structure = pd.DataFrame([structure_row(s, torch.load(p, weights_only=True)) for s, p in sorted(ckpts.items())])
    save(cfg, llc, done, structure, device=str(device), train_wall_s=train.meta["wall_time_s"],
         llc_wall_s=round(float(done["elapsed_s"].sum()), 1))
    tables, meta = table.load()
    return Development(train, tables["llc"], tables["structure"], {**meta, "cache": None})


def save(cfg: TrainConfig, llc: SGLDConfig, rows: pd.DataFrame, structure: pd.DataFrame, **fields) -> Path:
    """Store a developmental run locally (``stored``: ``llc.csv`` sorted by step, ``structure.csv``, and meta with the
    settings, ``fields`` such as the device and wall times, and the provenance); its kept rows are dropped."""
    meta = {"config": cfg.to_dict(), "llc": llc.key_dict(), "train_key": cache.cache_key(cfg), "version": VERSION,
            **fields, "torch": torch.__version__}
    return stored(cfg, llc).save({"llc": rows.sort_values("step").reset_index(drop=True), "structure": structure},
                                 meta)

