"""The figures of the page ``low_task_diversity`` (page width, fonts from ``book.setup``), drawn from the
tables and tests of ``low_m``."""
from __future__ import annotations

import math

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from scipy.special import expit

from plateau_lib.book.plots import PAGE_WIDTH
from plateau_lib.icl.low_m import two_task_frame, weight_rise

STYLE = {"model": dict(color="k", ls="-", marker="o", ms=4, lw=1.6, label="trained model"),
         "dmmse": dict(color="tab:blue", ls="--", lw=1.6, label="dMMSE$_M$ (Bayes)"),
         "ridge": dict(color="tab:red", ls=":", lw=1.8, label="ridge"),
         "tempered": dict(color="tab:orange", ls="-.", lw=1.6, label="tempered posterior (fitted c)")}


def _label(M) -> str:
    return f"M = {M}"


def _token_axis(ax, K):
    ax.set_xticks(range(1, K + 1))
    ax.set_xlabel("token k (pairs seen: k − 1)")


def token_figure(tables: dict, noise_var: float | None = None):
    """Per token, for each M of ``tables`` ({M: token_table}) in its own column: the MSE of the model, dMMSE
    and ridge (top; σ² dotted grey, the noise floor), and Δ of the model to dMMSE and to ridge (bottom, log)."""
    n = len(tables)
    fig, axes = plt.subplots(2, n, figsize=(PAGE_WIDTH, 5.4), sharex=True, sharey="row", squeeze=False)
    for j, (M, t) in enumerate(tables.items()):
        top, bottom = axes[0, j], axes[1, j]
        for name in ("model", "dmmse", "ridge"):
            top.plot(t["token"], t[f"mse_{name}"], **STYLE[name])
        if noise_var is not None:
            top.axhline(noise_var, color="grey", ls=":", lw=1, label="σ² (noise floor)")
        bottom.plot(t["token"], t["delta_dmmse"], **{**STYLE["dmmse"], "marker": "s", "ms": 4,
                                                      "label": "Δ(model, dMMSE$_M$)"})
        bottom.plot(t["token"], t["delta_ridge"], **{**STYLE["ridge"], "marker": "^", "ms": 4,
                                                      "label": "Δ(model, ridge)"})
        bottom.set_yscale("log")
        top.set_title(_label(M))
        _token_axis(bottom, len(t))
    axes[0, 0].set_ylabel("MSE against y")
    axes[1, 0].set_ylabel("Δ per token")
    axes[0, -1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    axes[1, -1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


def posterior_figure(frame: pd.DataFrame, sharpness: dict | None = None, max_points: int = 4000, seed: int = 0):
    """M = 2. Left: the model's implied weight on t₁ (p̂) against dMMSE's posterior weight p_k, one dot per
    kept (sequence, token) at k ≥ 2 (at most ``max_points``, drawn at random), coloured by token, with the
    diagonal (Bayes) and the tempered curve of ``sharpness``. Right: the mean weight on the true task
    against k (``weight_rise``): the posterior, the model's implied weight and, with ``sharpness``, the
    tempered posterior."""
    f = two_task_frame(frame)
    pts = f[f["kept"] & (f["token"] > 1)]
    if len(pts) > max_points:
        pts = pts.sample(max_points, random_state=seed)
    c = None if sharpness is None else sharpness["c"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 3.6), gridspec_kw={"width_ratios": [1.1, 1]})
    K = int(f["token"].max())
    sc = a.scatter(pts["p1"], pts["implied"].clip(-0.5, 1.5), c=pts["token"], cmap="viridis", vmin=2, vmax=K,
                   s=5, alpha=0.5, linewidths=0, rasterized=True)
    grid = np.linspace(0.005, 0.995, 200)
    a.plot([0, 1], [0, 1], color="tab:blue", ls="--", lw=1.4, label="p̂ = p (Bayes)")
    if c is not None:
        a.plot(grid, expit(c * np.log(grid / (1 - grid))), **{**STYLE["tempered"], "label": f"tempered, c = {c:.2f}"})
    a.set(xlim=(0, 1), ylim=(-0.5, 1.5), xlabel="posterior weight on t₁, $p_k$", ylabel="model's implied weight p̂")
    a.legend(loc="upper left")
    fig.colorbar(sc, ax=a, label="token k", ticks=range(2, K + 1))
    rise = weight_rise(f, c)
    b.plot(rise["token"], rise["posterior"], **{**STYLE["dmmse"], "marker": "s", "ms": 4, "label": "posterior (dMMSE₂)"})
    b.plot(rise["token"], rise["model"], **{**STYLE["model"], "label": "model's implied weight"})
    if c is not None:
        b.plot(rise["token"], rise["tempered"], **{**STYLE["tempered"], "label": f"tempered, c = {c:.2f}"})
    b.axhline(0.5, color="grey", ls=":", lw=1)
    b.set(ylabel="mean weight on the true task", ylim=(0.45, 1.0))
    _token_axis(b, K)
    b.legend(loc="lower right")
    return fig


def sequence_figure(frame: pd.DataFrame, sequence: int, title: str = ""):
    """One sequence token by token: y, t₁ᵀx (and t₂ᵀx), and the predictions of the model, dMMSE and ridge;
    at M = 2 below them the weight on the true task, the posterior's and the model's implied p̂ (hollow where
    |(t₁ − t₂)ᵀx| is too small for p̂ to mean much)."""
    s = frame[frame["sequence"] == sequence]
    if s.empty:
        raise ValueError(f"parameter 'sequence': no sequence {sequence!r} in the frame")
    two = "implied" in s
    fig, axes = plt.subplots(2 if two else 1, 1, figsize=(PAGE_WIDTH, 5.2 if two else 3.0), sharex=True,
                             squeeze=False, gridspec_kw={"height_ratios": [1.5, 1] if two else [1]})
    ax, k = axes[0, 0], s["token"]
    true = int(s["true"].iloc[0])
    ax.plot(k, s["y"], "o", color="grey", ms=6, label="y (noisy target)")
    ax.plot(k, s["t1x"], "_", color="tab:green", ms=14, mew=2.5, label="t₁ᵀx" + (" (true task)" if true == 1 else ""))
    if two:
        ax.plot(k, s["t2x"], "_", color="tab:purple", ms=14, mew=2.5,
                label="t₂ᵀx" + (" (true task)" if true == 2 else ""))
    for name in ("ridge", "dmmse", "model"):
        ax.plot(k, s[name], **STYLE[name])
    ax.set_ylabel("prediction of y_k")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if two:
        b = axes[1, 0]
        b.plot(k, s["p_true"], **{**STYLE["dmmse"], "marker": "s", "ms": 5, "label": "posterior"})
        b.plot(k, s["implied_true"], color="k", lw=1.2, label="model's implied p̂")
        b.plot(k[s["kept"]], s["implied_true"][s["kept"]], "o", color="k", ms=6)
        b.plot(k[~s["kept"]], s["implied_true"][~s["kept"]], "o", mfc="white", mec="k", ms=6,
               label="p̂ where (t₁ − t₂)ᵀx ≈ 0")
        b.axhline(0.5, color="grey", ls=":", lw=1)
        b.set(ylabel="weight on the true task", ylim=(-0.25, 1.25))
        b.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _token_axis(axes[-1, 0], int(s["token"].max()))
    if title:
        fig.suptitle(title)
    return fig


def context_figure(swaps: dict):
    """For each M of ``swaps`` ({M: context_swap_test}): how much the predictions change when the context's
    y's come from a foreign Gaussian task, relative (log scale, k ≥ 2; a predictor that never changes is
    named in the panel instead of drawn)."""
    fig, axes = plt.subplots(1, len(swaps), figsize=(PAGE_WIDTH, 3.2), sharey=True, squeeze=False)
    for ax, (M, out) in zip(axes[0], swaps.items()):
        t = out["table"][out["table"]["token"] > 1]
        still = []
        for name in ("model", "dmmse", "ridge"):
            v = t[f"change_{name}"]
            if (v > 0).any():
                ax.plot(t["token"], v.where(v > 0), **STYLE[name])
            else:
                still.append(STYLE[name]["label"])
        if still:
            ax.text(0.5, 0.5, f"{', '.join(still)}: no change", transform=ax.transAxes, ha="center", va="center",
                    color=STYLE["dmmse"]["color"])
        ax.set_yscale("log")
        ax.set_title(_label(M))
        ax.set_xticks(t["token"])
        ax.set_xlabel("token k (pairs seen: k − 1)")
    axes[0, 0].set_ylabel("change / E[dMMSE prediction²]")
    axes[0, -1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


def token_labels(K: int) -> list[str]:
    """x1, y1, x2, … yK: the token order of the transformer's input (plain digits: subscripts are too small
    at 9 pt)."""
    return [f"{v}{k}" for k in range(1, K + 1) for v in ("x", "y")]


def attention_figure(maps: np.ndarray, title: str = ""):
    """Batch-mean attention (``attention_maps``: layer × head × query × key) as one heat map per layer and
    head (square-root colour scale, shared), with the tokens x₁, y₁, … on both axes."""
    L, H, T, _ = maps.shape
    labels = token_labels(T // 2)
    fig, axes = plt.subplots(L, H, figsize=(PAGE_WIDTH, 3.3 * L + 0.4), squeeze=False)
    norm = mpl.colors.PowerNorm(0.5, vmin=0, vmax=1)
    masked = np.where(np.triu(np.ones((T, T), bool), 1), np.nan, maps)
    for l in range(L):
        for h in range(H):
            ax = axes[l, h]
            im = ax.imshow(masked[l, h], cmap="magma_r", norm=norm, interpolation="nearest")
            ax.set_xticks(range(T), labels, rotation=90)
            ax.set_yticks(range(T), labels)
            ax.tick_params(length=0)
            ax.grid(False)
            ax.set_title(f"layer {l + 1}, head {h + 1}")
            if h == 0:
                ax.set_ylabel("query")
            if l == L - 1:
                ax.set_xlabel("key")
    fig.colorbar(im, ax=axes, label="attention (batch mean)", shrink=0.8)
    if title:
        fig.suptitle(title)
    return fig


def llc_against_M_figure(tables: dict, highlight=(1, 2)):
    """λ̂ of the final weights against M for each sweep ``{label: llc_table}`` (seed means ± SE), M on a
    categorical axis (∞ last), the M of ``highlight`` shaded; a log λ̂ axis when the values span over 10×."""
    Ms = sorted({M for t in tables.values() for M in t["M"]})
    x = {M: i for i, M in enumerate(Ms)}
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 3.4))
    colours = sns.color_palette("dark", len(tables))
    for (label, t), colour, marker in zip(tables.items(), colours, "os^D"):
        g = t.groupby("M").agg(llc=("llc_mean", "mean"), se=("llc_se", "mean")).reindex(Ms).dropna()
        ax.errorbar([x[M] for M in g.index], g["llc"], yerr=g["se"], fmt=f"{marker}-", color=colour, capsize=3,
                    ms=6, lw=1.4, label=label)
    shown = [x[M] for M in highlight if M in x]
    if shown and len(shown) < len(Ms):
        ax.axvspan(min(shown) - 0.4, max(shown) + 0.4, color="gold", alpha=0.25, lw=0,
                   label=" and ".join(f"M = {M}" for M in highlight if M in x))
    values = pd.concat([t["llc_mean"] for t in tables.values()])
    if (values > 0).all() and values.max() > 10 * values.min():
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(mpl.ticker.LogLocator(base=10, subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(mpl.ticker.StrMethodFormatter("{x:g}"))
        ax.yaxis.set_minor_formatter(mpl.ticker.NullFormatter())
    ax.set_xticks(range(len(Ms)), ["∞" if M == math.inf else str(int(M)) for M in Ms])
    ax.set(xlabel="M (pretraining tasks)", ylabel="λ̂ (final weights)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
