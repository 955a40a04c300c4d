"""What a training run starts from: its seeded model (with any parameter groups copied from a trained model and
frozen), its optimizers and its learning-rate schedule, shared by ``train`` and the stacked engine."""
from __future__ import annotations

import math

import torch

from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.utils import seed_everything


def make_optimizers(cfg: TrainConfig, model):
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "adam":
        return [torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)]
    if cfg.optimizer == "sgd":
        return [torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)]
    if cfg.optimizer == "adamw":  # GPT-NeoX's: decoupled decay on the matrices only, betas (0.9, 0.95)
        return [torch.optim.AdamW([{"params": [p for p in params if p.dim() > 1], "weight_decay": cfg.weight_decay},
                                   {"params": [p for p in params if p.dim() <= 1], "weight_decay": 0.0}],
                                  lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8)]
    named = dict(model.named_parameters())
    matrices, others = muon_groups(model)
    return [torch.optim.Muon([named[n] for n in matrices], lr=cfg.muon_lr, weight_decay=cfg.weight_decay),
            torch.optim.Adam([named[n] for n in others], lr=cfg.lr, weight_decay=cfg.weight_decay)]


def muon_groups(model) -> tuple[list, list]:
    """Names of the trainable parameters Muon updates (the 2-D weights of the transformer blocks, as the paper's
    ``train_mws_muon.py``) and of those Adam updates (embeddings, head, gains and biases, and ``ln_f``, which
    the paper's script left in neither group, so never trained)."""
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    matrices = [n for n, p in trainable if p.ndim == 2 and n.startswith("blocks.")]
    return matrices, [n for n, _ in trainable if n not in matrices]


def lr_factor(cfg: TrainConfig, step: int) -> float:
    """Multiplier of the base learning rates at ``step``: "warmup_cosine" is a linear warm-up then a cosine
    decay to ``lr_floor`` at ``decay_steps`` (defaults: to 0 at the run's end), flat after; "warmup_constant" the same warm-up, then constant (the temporal-task-diversity runs' schedule);
    "one_cycle" the triangle 0 -> 1 at the half-way step -> 0 (Hoogland et al.'s schedule)."""
    if cfg.schedule == "constant":
        return 1.0
    if cfg.schedule == "one_cycle":
        half = cfg.steps / 2
        return step / half if step < half else max(0.0, (cfg.steps - step) / half)
    if step < cfg.warmup_steps:
        return step / cfg.warmup_steps
    if cfg.schedule == "warmup_constant":
        return 1.0
    end = cfg.decay_steps or cfg.steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, end - cfg.warmup_steps))
    return cfg.lr_floor + (1 - cfg.lr_floor) * 0.5 * (1 + math.cos(math.pi * progress))


SCHEDULES_CODE = {"constant": 0, "warmup_cosine": 1, "warmup_constant": 2, "one_cycle": 3}


def lr_factor_tensor(step, schedule, steps, warmup, floor, decay_end):
    """``lr_factor`` per run as device arithmetic (float64): ``step`` a scalar tensor, ``schedule`` the runs'
    ``SCHEDULES_CODE``, ``steps``, ``warmup`` and ``decay_end`` (``decay_steps or steps``) their step counts,
    ``floor`` their ``lr_floor``. What a captured CUDA graph computes."""
    half = steps / 2
    one_cycle = torch.where(step < half, step / half, ((steps - step) / half).clamp(min=0.0))
    warming = step < warmup
    ramp = step / warmup.clamp(min=1.0)
    progress = ((step - warmup) / (decay_end - warmup).clamp(min=1.0)).clamp(max=1.0)
    cosine = torch.where(warming, ramp, floor + (1 - floor) * 0.5 * (1 + torch.cos(math.pi * progress)))
    constant_after = torch.where(warming, ramp, torch.ones_like(ramp))
    by_code = torch.stack([torch.ones_like(ramp), cosine, constant_after, one_cycle])
    return by_code.gather(0, schedule.view(1, -1)).squeeze(0)


def param_groups(model: torch.nn.Module) -> dict[str, list[str]]:
    """Parameter names by the paper's functional groups (``COPY_GROUPS``, copied and frozen in Fig. 5), read from
    the module names both chapters' models share (``attn.Q/K/V/c_proj``, ``mlp``, ``wte``/``wpe``, ``ln_1``,
    ``ln_2``, ``ln_f``): each layer norm goes with what it feeds, as the authors' code copies them (``ln_attn``:
    the norms before attention, ``ln_mlp``: before the MLP, ``ln_f``: before the readout)."""
    groups = {"kq": [], "ov": [], "mlp": [], "embed": [], "ln_attn": [], "ln_mlp": [], "ln_f": [], "head": []}
    for name, _ in model.named_parameters():
        if ".attn.Q." in name or ".attn.K." in name:
            groups["kq"].append(name)
        elif ".attn.V." in name or ".attn.c_proj." in name:
            groups["ov"].append(name)
        elif ".mlp." in name:
            groups["mlp"].append(name)
        elif name.startswith(("wte", "wpe")):
            groups["embed"].append(name)
        elif ".ln_1." in name:
            groups["ln_attn"].append(name)
        elif ".ln_2." in name:
            groups["ln_mlp"].append(name)
        elif name.startswith("ln_f."):
            groups["ln_f"].append(name)
        else:
            groups["head"].append(name)
    return groups


def build_model(cfg: TrainConfig, device, init_state: dict | None = None) -> torch.nn.Module:
    """Seeded model of ``cfg``'s task (``init_nudge``: each initial weight moved to the next float up); ``copy_groups``
    are copied from ``init_state`` and frozen."""
    seed_everything(cfg.seed)
    model = cfg.make_task().build_model(cfg).to(device)
    if cfg.init_nudge:
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.nextafter(p, torch.full_like(p, float("inf"))))
    if cfg.copy_groups:
        if init_state is None:
            raise ValueError("copy_groups needs init_state (the trained model's state dict)")
        groups = param_groups(model)
        names = [n for g in cfg.copy_groups for n in groups[g]]
        params = dict(model.named_parameters())
        with torch.no_grad():
            for n in names:
                params[n].copy_(init_state[n].to(device))
                params[n].requires_grad_(False)
    return model
