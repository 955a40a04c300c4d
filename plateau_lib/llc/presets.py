"""The LLC calibration page's configurations (Hoogland et al., App. A.5 procedure): SGLD sizes, the sweep grid,
the golden models' runs."""
from __future__ import annotations

from plateau_lib.engine.presets import check_preset

LLC_PAGE = {
    "cpu": dict(num_chains=4, num_draws=60, sgld_batch=128, train_steps=300, d_model=32, golden_draws=1500,
                golden_chains=32, golden_train_steps=5000, epsilons=[3e-4, 1e-3, 3e-3], nbetas=[None, 100.0],
                gammas=[100.0], n_data=2048),
    "paper": dict(num_chains=20, num_draws=200, sgld_batch=100, train_steps=400, d_model=256, golden_draws=5000,
                  golden_chains=64, golden_train_steps=5000, epsilons=[1e-4, 3e-4, 1e-3, 3e-3],
                  nbetas=[None, 100.0], gammas=[100.0, 300.0], n_data=16384),
}


def llc_page(preset: str, **fields) -> dict:
    """The LLC page's settings for ``preset`` with ``fields`` (None values are ignored), validated."""
    settings = dict(LLC_PAGE[check_preset(preset)])
    settings.update({k: v for k, v in fields.items() if v is not None})
    for name in ("num_chains", "num_draws", "sgld_batch", "train_steps", "d_model", "golden_draws",
                 "golden_train_steps"):
        if not isinstance(settings[name], int) or isinstance(settings[name], bool) or settings[name] < 1:
            raise ValueError(f"parameter {name!r} must be a positive integer, got {settings[name]!r}")
    for name in ("epsilons", "nbetas", "gammas"):
        if not isinstance(settings[name], (list, tuple)) or not settings[name]:
            raise ValueError(f"parameter {name!r} must be a non-empty list, got {settings[name]!r}")
    return settings
