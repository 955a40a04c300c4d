"""The SGLD settings of one λ̂ estimate, as one typed, validated value: :class:`SGLDConfig`.

Everything statistical about an estimate lives here (step, temperature, localization, chains, draws, batches,
the data set's size, the seed, the sampler); how it is run (device, backend, init loss, progress...) is an
argument of :func:`plateau_lib.llc.estimate_llc`. A chapter's presets are SGLDConfigs, and a stored table's spec
holds ``key_dict()``, the dict the presets were written as before there was a class (so keys do not change).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from plateau_lib.llc.sampler import SAMPLERS

# Written into every key; the other fields only where they leave their default (``key_dict``).
KEY_FIELDS = ("epsilon", "nbeta", "gamma", "batch_size", "num_chains", "num_draws", "num_burnin_steps", "seed")


def check_number(name, value, *, low=None, strict=True, allowed="", integer=False):
    """ValueError naming ``name`` and what is ``allowed`` unless ``value`` is a finite real number (an integer
    if ``integer``) above ``low`` (or at it, if not ``strict``)."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok and integer:
        ok = float(value).is_integer()
    if ok:
        ok = math.isfinite(float(value)) and (low is None or (value > low if strict else value >= low))
    if not ok:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


@dataclass(frozen=True)
class SGLDConfig:
    """The SGLD settings of a λ̂ estimate (devinterp v1 names; see :func:`plateau_lib.llc.estimate_llc`).

    epsilon: step size ε > 0 (devinterp's ``lr``). nbeta: inverse temperature times n, > 0; None = m / ln m
    for batch size m (devinterp v1). gamma: localization γ >= 0 (devinterp's ``localization``). weight_decay:
    λ >= 0 in the drift. batch_size: m >= 1, None = full batch. num_chains, num_draws: >= 1. num_burnin_steps:
    steps before the first draw, < num_draws. num_steps_bw_draws: >= 1. n_data: the size of the fixed data set the
    chapter samples from (None where the caller gives the data). seed: >= 0, everything random derives from it.
    share_batches: one batch stream for all chains (devinterp v2) rather than one each (v1). sampler: 'sgld' or
    'rmsprop_sgld'.
    """
    epsilon: float = 1e-3
    nbeta: float | None = None
    gamma: float = 100.0
    weight_decay: float = 0.0
    batch_size: int | None = None
    num_chains: int = 4
    num_draws: int = 200
    num_burnin_steps: int = 0
    num_steps_bw_draws: int = 1
    n_data: int | None = None
    seed: int = 0
    share_batches: bool = False
    sampler: str = "sgld"

    key_inline: ClassVar[bool] = True  # a spec holds its key_dict (cache.keyed), not a hash as for a run's config

    def __post_init__(self):
        check_number("epsilon", self.epsilon, low=0, allowed="a finite number > 0")
        if self.nbeta is not None:
            check_number("nbeta", self.nbeta, low=0, allowed="a finite number > 0 (or None for m / ln m)")
        check_number("gamma", self.gamma, low=0, strict=False, allowed="a finite number >= 0")
        check_number("weight_decay", self.weight_decay, low=0, strict=False, allowed="a finite number >= 0")
        for name, low in (("num_chains", 1), ("num_draws", 1), ("num_burnin_steps", 0), ("num_steps_bw_draws", 1)):
            check_number(name, getattr(self, name), low=low, strict=False, integer=True,
                         allowed=f"an integer >= {low}")
        if self.num_burnin_steps >= self.num_draws:
            raise ValueError(f"num_burnin_steps must be < num_draws ({self.num_draws}), got {self.num_burnin_steps}")
        for name in ("batch_size", "n_data"):
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), low=1, strict=False, integer=True,
                             allowed="an integer >= 1 (or None)")
        if not isinstance(self.seed, (int, np.integer)) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if not isinstance(self.share_batches, bool):
            raise ValueError(f"share_batches must be True or False, got {self.share_batches!r}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")

    def replace(self, **fields) -> "SGLDConfig":
        """A copy with ``fields`` changed (None values ignored); an unknown name is a ValueError listing the allowed."""
        names = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(fields) - set(names))
        if unknown:
            raise ValueError(f"unknown SGLD setting(s) {unknown}; allowed: {names}")
        return dataclasses.replace(self, **{k: v for k, v in fields.items() if v is not None})

    def key_dict(self) -> dict:
        """The settings as a stored table's spec holds them: ``KEY_FIELDS`` always, ``n_data`` when set, the
        others only where they leave their default (the presets' dicts of old, so existing keys are kept)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name in KEY_FIELDS or getattr(self, f.name) != f.default}
