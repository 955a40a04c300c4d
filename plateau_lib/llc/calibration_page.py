"""What the LLC page shows about itself: its settings and the provenance of every run on it."""
from __future__ import annotations

import datetime as dt

import pandas as pd

from plateau_lib.engine.utils import resolve_device

SETTING_NOTES = {
    "num_chains": "SGLD chains per estimate (transformer)", "num_draws": "draws per chain (transformer)",
    "sgld_batch": "SGLD minibatch size m", "train_steps": "training steps of the transformer",
    "d_model": "transformer width", "golden_draws": "draws per golden model",
    "golden_chains": "chains per polynomial golden model",
    "golden_train_steps": "full-batch Adam steps, reduced-rank regression",
    "epsilons": "sweep: SGLD step sizes ε", "nbetas": "sweep: nβ (None = m / ln m)",
    "gammas": "sweep: localization strengths γ", "n_data": "SGLD data set (sequences)"}


def settings_table(settings: dict, preset: str) -> pd.DataFrame:
    """The page's settings (``llc.presets.llc_page``) as a two-column table: value and meaning."""
    return pd.DataFrame({preset: {k: str(v) for k, v in settings.items()},
                         "meaning": {k: SETTING_NOTES.get(k, "") for k in settings}}).rename_axis("setting")


def sgld_device() -> str:
    """The device the transformer's SGLD chains run on ('auto': cuda, then mps, then cpu)."""
    return str(resolve_device("auto"))


def golden_provenance_row(estimates, preset: str) -> dict:
    """A provenance row (the columns of ``book.pages.run_provenance``) for the golden estimates of this build."""
    from plateau_lib.engine.utils import git_commit
    return {"preset": preset, "run": f"golden models ({len(estimates)} SGLD estimates)", "device": "cpu",
            "wall time (s)": round(sum(e.wall_s for e in estimates), 1), "source": "computed in this build",
            "commit": git_commit(), "date": dt.date.today().isoformat()}


def provenance_note(device: str | None = None) -> str:
    """The page's provenance note: what is computed live, and where."""
    device = sgld_device() if device is None else device
    return (f"Every SGLD estimate on this page (golden models, sweep, failure modes, LLC over training) is computed "
            f"live in this build: the golden models on cpu, the transformer's chains on {device}. The transformer "
            f"runs are trained through the result cache; the run with the online LLC callbacks is trained in this "
            f"build.")
