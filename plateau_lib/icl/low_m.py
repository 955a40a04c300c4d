"""How a trained in-context regression model solves M = 1 and M = 2 pretraining tasks.

The Bayes predictor of a task set T_M is dMMSE: ŷ_k = Σ_m p_k(m) t_mᵀx_k with the posterior
p_k(m) = softmax_m(−Σ_{j<k} (y_j − t_mᵀx_j)² / (2σ²)), uniform at the first token. Two hypotheses follow:

- **M = 1**: the posterior is 1, so ŷ_k = t₁ᵀx_k from the very first token: the model ignores the context.
- **M = 2**: ŷ_k = p_k t₁ᵀx_k + (1 − p_k) t₂ᵀx_k, a two-hypothesis posterior with p_1 = 1/2 that the
  context sharpens towards the true task.

The tests below measure both on fresh sequences of the training distribution, per token (1-based), and
judge them by the documented tolerances; ``attention_summary`` shows where each x-token's query looks.
``sequence_frame`` keeps every (sequence, token) for the M = 2 weight analysis (``weight_rise``: how fast
the weight on the true task rises with k; ``posterior_sharpness``: the model as a tempered posterior), and
``context_swap_test`` replaces the context by a foreign task's (the causal check that M = 1 ignores it).
``mechanism_table`` gathers the verdicts; ``low_m_figures`` draws the page ``low_task_diversity``.
"""
from __future__ import annotations

import itertools
import math
import numbers

import numpy as np
import pandas as pd
import torch
from scipy.special import expit

from plateau_lib.engine import cache
from plateau_lib.icl import baselines as B
from plateau_lib.icl.diversity import final_model

SINGLE_TOL = 0.02   # M = 1: E[(ŷ − t₁ᵀx)²] < 2% of E[(t₁ᵀx)²] at every token (ignoring the context scores 1)
DELTA_TOL = 0.02    # M = 2: Δ(model, dMMSE) < 2% of the variance of the dMMSE prediction at every token
WEIGHT_TOL = 0.1    # M = 2: mean |p̂ − p| of the implied weight below 0.1 at every token
GAP = 0.5           # M = 2: p̂ only where |(t₁ − t₂)ᵀx| > GAP · |t₁ − t₂| (half its standard deviation)


def _integer(name, value, low):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ValueError(f"parameter {name!r} must be an integer >= {low}, got {value!r}")
    return int(value)


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
        raise ValueError(f"parameter {name!r} must be a finite number > 0, got {value!r}")
    return float(value)


def _device(model):
    """The model's device (its first parameter or buffer; CPU for a module with neither)."""
    first = next(itertools.chain(model.parameters(), model.buffers()), None)
    return torch.device("cpu") if first is None else first.device


def _true_index(ws, tasks):
    """Index in T_M of the task that generated each sequence (B,)."""
    return torch.cdist(ws, tasks).argmin(1)


def _sequences(model, task, n, seed, M=None):
    """n fresh training sequences from the task's own seeded generator on the model's device, with the
    model's predictions (under no_grad) and T_M: (xs, ys, ws, pred, tasks)."""
    n, seed = _integer("n", n, 1), _integer("seed", seed, 0)
    if task.M is None or (M is not None and task.M != M):
        raise ValueError(f"parameter 'task' must have M = {M or 'a finite number of tasks'}, got M = {task.M}")
    device = _device(model)
    xs, ys, ws = task.sample(n, torch.Generator(device=device).manual_seed(seed))
    with torch.no_grad():
        pred = model(xs, ys)
    return xs, ys, ws, pred, task.tasks(device)


def _numpy(t):
    return t.detach().double().cpu().numpy()


def posterior_weights(xs, ys, tasks, noise_var) -> torch.Tensor:
    """dMMSE's posterior (B, K, M) over the M tasks before each prediction: softmax over m of
    −Σ_{j<k}(y_j − t_mᵀx_j)²/(2σ²); uniform at the first token. ``weights @ tasks`` is dMMSE's ŵ_k."""
    if xs.ndim != 3:
        raise ValueError(f"parameter 'xs' must have shape (B, K, D), got {tuple(xs.shape)}")
    if ys.shape != xs.shape[:2]:
        raise ValueError(f"parameter 'ys' must have shape {tuple(xs.shape[:2])}, got {tuple(ys.shape)}")
    if tasks.ndim != 2 or tasks.shape[1] != xs.shape[2]:
        raise ValueError(f"parameter 'tasks' must have shape (M, {xs.shape[2]}), got {tuple(tasks.shape)}")
    noise_var = _positive("noise_var", noise_var)
    sq = (ys.unsqueeze(-1) - xs @ tasks.to(xs).T).square()
    return torch.softmax(-B._before(sq) / (2 * noise_var), dim=-1)


def token_table(model, task, n=2048, seed=0) -> pd.DataFrame:
    """One row per token k = 1..K on n fresh training sequences: MSE (against the noisy y) of the model,
    dMMSE and ridge, Δ(model, dMMSE), Δ(model, ridge), and the mean posterior weight of the true task."""
    xs, ys, ws, pred, tasks = _sequences(model, task, n, seed)
    dmmse, ridge = B.dmmse_predict(xs, ys, tasks, task.noise_var), B.ridge_predict(xs, ys, task.noise_var)
    post = posterior_weights(xs, ys, tasks, task.noise_var)
    true = _true_index(ws, tasks).view(-1, 1, 1).expand(-1, task.K, 1)
    columns = {"mse_model": (pred - ys).square().mean(0), "mse_dmmse": (dmmse - ys).square().mean(0),
               "mse_ridge": (ridge - ys).square().mean(0), "delta_dmmse": B.delta(pred, dmmse, by_token=True),
               "delta_ridge": B.delta(pred, ridge, by_token=True), "p_true": post.gather(2, true)[..., 0].mean(0)}
    return pd.DataFrame({"token": np.arange(1, task.K + 1), **{k: _numpy(v) for k, v in columns.items()}})


def single_task_test(model, task, n=2048, seed=0, tol=SINGLE_TOL) -> dict:
    """M = 1: does the model predict t₁ᵀx_k at every token, the first included? Per token the relative
    error E[(ŷ − t₁ᵀx)²]/E[(t₁ᵀx)²] (ridge's, which must learn t₁ from the context, for comparison);
    ``holds`` if every token's is below ``tol``. Returns {table, first_token_rel_error, tol, holds}."""
    tol = _positive("tol", tol)
    xs, ys, _, pred, tasks = _sequences(model, task, n, seed, M=1)
    target, scale = xs @ tasks[0], (xs @ tasks[0]).square().mean(0)
    rel = _numpy((pred - target).square().mean(0) / scale)
    rel_ridge = _numpy((B.ridge_predict(xs, ys, task.noise_var) - target).square().mean(0) / scale)
    table = pd.DataFrame({"token": np.arange(1, task.K + 1), "rel_error": rel, "rel_error_ridge": rel_ridge})
    return {"table": table, "first_token_rel_error": float(rel[0]), "tol": tol, "holds": bool((rel < tol).all())}


def _corr(a, b):
    """Pearson correlation, NaN when either side is constant or has fewer than two values."""
    if len(a) < 2 or a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def two_task_test(model, task, n=2048, seed=0, tol=DELTA_TOL, weight_tol=WEIGHT_TOL, gap=GAP) -> dict:
    """M = 2: is the model the two-hypothesis posterior ŷ_k = p_k t₁ᵀx_k + (1 − p_k) t₂ᵀx_k?

    Per token: ``rel_delta`` = Δ(model, dMMSE) / Var(dMMSE prediction); the model's implied weight on t₁,
    p̂ = (ŷ − t₂ᵀx)/(t₁ᵀx − t₂ᵀx), on the ``n_used`` sequences with |(t₁ − t₂)ᵀx| > gap·|t₁ − t₂| (elsewhere
    p̂ divides by almost nothing: its error is |ŷ − dMMSE|/|(t₁ − t₂)ᵀx|), against the posterior p_k
    (``implied_mean``, ``posterior_mean``, ``weight_mae``, ``weight_corr``; NaN where p_k is constant, as
    at k = 1 where p_1 = 1/2); and ``p_true``, the mean posterior weight of the true task, the theory's
    curve. ``holds`` if every token has rel_delta < tol and weight_mae < weight_tol.
    Returns {table, tol, weight_tol, gap, holds}."""
    tol, weight_tol, gap = _positive("tol", tol), _positive("weight_tol", weight_tol), _positive("gap", gap)
    xs, ys, ws, pred, tasks = _sequences(model, task, n, seed, M=2)
    dmmse = B.dmmse_predict(xs, ys, tasks, task.noise_var)
    post = posterior_weights(xs, ys, tasks, task.noise_var)
    a, b = xs @ tasks[0], xs @ tasks[1]
    rel_delta = _numpy(B.delta(pred, dmmse, by_token=True) / dmmse.var(0))
    keep = ((a - b).abs() > gap * (tasks[0] - tasks[1]).norm()).cpu().numpy()
    implied, p1 = _numpy((pred - b) / (a - b)), _numpy(post[..., 0])
    true = _true_index(ws, tasks).view(-1, 1, 1).expand(-1, task.K, 1)
    p_true = _numpy(post.gather(2, true)[..., 0].mean(0))
    rows = []
    for k in range(task.K):
        m = keep[:, k]
        ph, p = implied[m, k], p1[m, k]
        rows.append({"token": k + 1, "rel_delta": rel_delta[k], "n_used": int(m.sum()),
                     "implied_mean": ph.mean() if m.any() else np.nan, "posterior_mean": p1[:, k].mean(),
                     "weight_mae": np.abs(ph - p).mean() if m.any() else np.nan, "weight_corr": _corr(ph, p),
                     "p_true": p_true[k]})
    table = pd.DataFrame(rows)
    holds = bool((table["rel_delta"] < tol).all() and (table["weight_mae"] < weight_tol).all())
    return {"table": table, "tol": tol, "weight_tol": weight_tol, "gap": gap, "holds": holds}


def attention_maps(model, task, n=512, seed=0) -> np.ndarray:
    """Batch-mean attention (L, H, 2K, 2K) on n fresh training sequences, for heat-maps."""
    n, seed = _integer("n", n, 1), _integer("seed", seed, 0)
    device = _device(model)
    xs, ys, _ = task.sample(n, torch.Generator(device=device).manual_seed(seed))
    with torch.no_grad():
        _, inside = model(xs, ys, return_internals=True)
    return _numpy(torch.stack([att.mean(0) for att in inside["attn"]]))


def attention_summary(model, task, n=512, seed=0) -> pd.DataFrame:
    """Where each x-token's query looks: per layer, head and token k = 1..K (query position 2(k−1)), the
    batch-mean attention mass on itself, on the earlier x-tokens and on the earlier y-tokens (the three sum
    to 1 under the causal mask). Tidy rows (layer, head, token, target, mass)."""
    maps = attention_maps(model, task, n, seed)
    L, H, T, _ = maps.shape
    mass = np.stack([np.stack([maps[:, :, 2 * k, 2 * k], maps[:, :, 2 * k, 0:2 * k:2].sum(-1),
                               maps[:, :, 2 * k, 1:2 * k:2].sum(-1)], -1) for k in range(T // 2)], 2)
    index = pd.MultiIndex.from_product([range(L), range(H), range(1, T // 2 + 1), ["self", "earlier_x", "earlier_y"]],
                                       names=["layer", "head", "token", "target"])
    return pd.Series(mass.reshape(-1), index=index, name="mass").reset_index()


# ---- per-sequence predictions, the implied weight and its sharpness ----------------------------------------

SWAP_SEED_OFFSET = 7_919  # the foreign contexts' generator: seed + this, so they differ from the sequences'


def sequence_frame(model, task, n=2048, seed=0) -> pd.DataFrame:
    """Tidy, one row per (sequence, token k = 1..K) of n fresh training sequences (the same ones as the tests
    with this seed): the noisy ``y``, the predictions of the model, dMMSE and ridge, the task predictions
    ``t1x`` (and ``t2x`` at M = 2), ``true`` (1-based index of the sequence's task), and the posterior weight
    ``p1`` of t₁ before the prediction. At M = 2 also ``log_odds`` = log p₁/p₂, the model's implied weight on
    t₁ ``implied`` = (ŷ − t₂ᵀx)/(t₁ᵀx − t₂ᵀx), ``kept`` (|(t₁ − t₂)ᵀx| > GAP·|t₁ − t₂|, where p̂ is well
    defined), and both weights on the true task (``p_true``, ``implied_true``). M must be 1 or 2."""
    if task.M not in (1, 2):
        raise ValueError(f"parameter 'task' must have M = 1 or 2, got M = {task.M}")
    xs, ys, ws, pred, tasks = _sequences(model, task, n, seed)
    n_seq, K = ys.shape
    post = posterior_weights(xs, ys, tasks, task.noise_var)
    true = _true_index(ws, tasks)
    cols = {"y": ys, "model": pred, "dmmse": B.dmmse_predict(xs, ys, tasks, task.noise_var),
            "ridge": B.ridge_predict(xs, ys, task.noise_var), "t1x": xs @ tasks[0], "p1": post[..., 0]}
    frame = {"sequence": np.repeat(np.arange(n_seq), K), "token": np.tile(np.arange(1, K + 1), n_seq),
             "true": np.repeat(_numpy(true).astype(int) + 1, K)}
    frame.update({name: _numpy(v).reshape(-1) for name, v in cols.items()})
    out = pd.DataFrame(frame)
    if task.M == 2:
        a, b = xs @ tasks[0], xs @ tasks[1]
        sq = (ys.unsqueeze(-1) - xs @ tasks.to(xs).T).square()
        logits = -B._before(sq) / (2 * task.noise_var)
        out["t2x"] = _numpy(b).reshape(-1)
        out["log_odds"] = _numpy(logits[..., 0] - logits[..., 1]).reshape(-1)
        out["implied"] = _numpy((pred - b) / (a - b)).reshape(-1)
        out["kept"] = ((a - b).abs() > GAP * (tasks[0] - tasks[1]).norm()).cpu().numpy().reshape(-1)
        first = out["true"] == 1
        out["p_true"] = np.where(first, out["p1"], 1 - out["p1"])
        out["implied_true"] = np.where(first, out["implied"], 1 - out["implied"])
    return out


def two_task_frame(frame):
    """``frame`` itself, once checked to be a ``sequence_frame`` of an M = 2 task."""
    if "implied" not in frame:
        raise ValueError("parameter 'frame' must be a sequence_frame of an M = 2 task")
    return frame


def weight_rise(frame: pd.DataFrame, c: float | None = None) -> pd.DataFrame:
    """How fast the weight on the true task rises with k (M = 2): per token, the posterior's mean weight on
    the true task over all sequences (``posterior_all``) and over the ``n_used`` kept sequences
    (``posterior``), and the model's implied weight on it over the same kept sequences (``model``). With
    ``c`` (``posterior_sharpness``), also the tempered posterior's, sigmoid(c · log-odds of the true task)
    (``tempered``)."""
    f = two_task_frame(frame)
    kept = f[f["kept"]]
    by = kept.groupby("token")
    table = pd.DataFrame({"posterior_all": f.groupby("token")["p_true"].mean(), "posterior": by["p_true"].mean(),
                          "model": by["implied_true"].mean(), "n_used": by.size()})
    if c is not None:
        z = np.where(kept["true"] == 1, kept["log_odds"], -kept["log_odds"])
        table["tempered"] = pd.Series(expit(c * z), index=kept.index).groupby(kept["token"]).mean()
    return table.reset_index().astype({"n_used": int})


def posterior_sharpness(frame: pd.DataFrame, low: float = 0.05, high: float = 20.0) -> dict:
    """The model's posterior as a tempered dMMSE (M = 2): the factor c in p̂ ≈ sigmoid(c · log p₁/p₂) that fits
    the implied weights best (least squares over the kept sequences at tokens k ≥ 2, c searched on a log grid
    in [low, high] and refined). c = 1 is Bayes; c < 1 a flatter posterior, as if the noise variance were
    σ²/c; c > 1 a sharper one. Returns {c, mae_bayes (c = 1), mae_fit, n}."""
    f = two_task_frame(frame)
    f = f[f["kept"] & (f["token"] > 1)]
    if f.empty:
        return {"c": float("nan"), "mae_bayes": float("nan"), "mae_fit": float("nan"), "n": 0}
    z, ph = f["log_odds"].to_numpy(), f["implied"].to_numpy()

    def sse(cs):
        return ((ph[None, :] - expit(np.outer(cs, z))) ** 2).sum(1)

    grid = np.exp(np.linspace(np.log(low), np.log(high), 241))
    i = int(sse(grid).argmin())
    fine = np.exp(np.linspace(np.log(grid[max(i - 1, 0)]), np.log(grid[min(i + 1, len(grid) - 1)]), 201))
    c = float(fine[int(sse(fine).argmin())])

    def mae(cc):
        return float(np.abs(ph - expit(cc * z)).mean())

    return {"c": c, "mae_bayes": mae(1.0), "mae_fit": mae(c), "n": int(len(z))}


def context_swap_test(model, task, n=2048, seed=0, tol=SINGLE_TOL) -> dict:
    """Does the model respond to a foreign context as dMMSE does? The same inputs xs with the y's of a fresh
    Gaussian task w ~ N(0, I_D) (plus noise), far outside q_M. Per token, relative to the second moment of
    dMMSE's in-distribution prediction: how much the model's prediction changes (``change_model``), dMMSE's
    and ridge's for comparison, and ``rel_delta``, the model's distance to dMMSE on the foreign contexts.
    At M = 1 dMMSE never changes, so ``holds`` (every rel_delta < tol) says the context is ignored.
    Returns {table, tol, holds}."""
    tol = _positive("tol", tol)
    xs, ys, _, pred, tasks = _sequences(model, task, n, seed)
    g = torch.Generator(device=xs.device).manual_seed(seed + SWAP_SEED_OFFSET)
    w = torch.randn(xs.shape[0], xs.shape[2], generator=g, device=xs.device)
    ys2 = (xs @ w.unsqueeze(-1)).squeeze(-1) + torch.randn(ys.shape, generator=g, device=xs.device) * math.sqrt(task.noise_var)
    with torch.no_grad():
        pred2 = model(xs, ys2)
    d1, d2 = B.dmmse_predict(xs, ys, tasks, task.noise_var), B.dmmse_predict(xs, ys2, tasks, task.noise_var)
    r1, r2 = B.ridge_predict(xs, ys, task.noise_var), B.ridge_predict(xs, ys2, task.noise_var)
    scale = d1.square().mean(0)
    cols = {"change_model": (pred2 - pred), "change_dmmse": (d2 - d1), "change_ridge": (r2 - r1),
            "rel_delta": (pred2 - d2)}
    table = pd.DataFrame({"token": np.arange(1, task.K + 1),
                          **{k: _numpy(v.square().mean(0) / scale) for k, v in cols.items()}})
    return {"table": table, "tol": tol, "holds": bool((table["rel_delta"] < tol).all())}


def attention_table(summaries: dict, token: int | None = None) -> pd.DataFrame:
    """``attention_summary`` frames ``{label: summary}`` side by side at one query token (default the last):
    one row per (layer, head), one column per (label, target) with the attention mass."""
    frames = {}
    for label, s in summaries.items():
        k = int(s["token"].max()) if token is None else token
        frames[label] = s[s["token"] == k].pivot_table(index=["layer", "head"], columns="target", values="mass")
    table = pd.concat(frames, axis=1, names=["M", "target"])
    return table.reindex(columns=["self", "earlier_x", "earlier_y"], level="target")


def llc_contrast(llc_table: pd.DataFrame, low: int = 1, high: int = 2) -> dict:
    """λ̂ at M = ``low`` against M = ``high`` of one LLC table (seed means): both values, their difference
    and its size in standard errors (``z``). Needs both M in the table."""
    t = llc_table.groupby("M").agg(llc=("llc_mean", "mean"), se=("llc_se", "mean"))
    missing = [M for M in (low, high) if M not in t.index]
    if missing:
        raise ValueError(f"the LLC table has no M = {missing}")
    a, b = t.loc[low], t.loc[high]
    diff = float(b["llc"] - a["llc"])
    se = float(math.hypot(a["se"], b["se"]))
    return {"low": float(a["llc"]), "high": float(b["llc"]), "diff": diff, "z": diff / se if se > 0 else float("inf")}


def mechanism_table(single: dict, two: dict, swap: dict | None = None, sharpness: dict | None = None,
                    llc: dict | None = None) -> pd.DataFrame:
    """One row per test of the stated mechanism: hypothesis, measure, tolerance, value, holds.

    single: ``single_task_test`` (M = 1); two: ``two_task_test`` (M = 2); swap: ``context_swap_test`` of
    the M = 1 model; sharpness: ``posterior_sharpness`` (M = 2, reported, judged against [0.8, 1.25]);
    llc: ``llc_contrast`` (λ̂ at M = 2 above M = 1 by more than 2 standard errors)."""
    s, t = single["table"], two["table"]
    rows = [
        ("M = 1", "predicts t₁ᵀx at the first token", "E[(ŷ − t₁ᵀx)²] / E[(t₁ᵀx)²] at k = 1",
         f"< {single['tol']:g}", s["rel_error"].iloc[0], s["rel_error"].iloc[0] < single["tol"]),
        ("M = 1", "… and at every later token", "largest of the same over k",
         f"< {single['tol']:g}", s["rel_error"].max(), single["holds"]),
    ]
    if swap is not None:
        rows.append(("M = 1", "ignores the context", "largest change under a foreign context, relative",
                     f"< {swap['tol']:g}", swap["table"]["rel_delta"].max(), swap["holds"]))
    rows += [
        ("M = 2", "predicts as dMMSE₂", "largest Δ(model, dMMSE) / Var(dMMSE) over k",
         f"< {two['tol']:g}", t["rel_delta"].max(), bool((t["rel_delta"] < two["tol"]).all())),
        ("M = 2", "its weight on t₁ is the posterior pₖ", "largest mean |p̂ − pₖ| over k",
         f"< {two['weight_tol']:g}", t["weight_mae"].max(), bool((t["weight_mae"] < two["weight_tol"]).all())),
    ]
    if sharpness is not None:
        rows.append(("M = 2", "… with the Bayes temperature", "fitted c in p̂ ≈ sigmoid(c · log p₁/p₂)",
                     "0.8 to 1.25", sharpness["c"], 0.8 <= sharpness["c"] <= 1.25))
    if llc is not None:
        rows.append(("λ̂", "the one-task solution is simpler", "(λ̂₂ − λ̂₁) / SE", "> 2", llc["z"], llc["z"] > 2))
    return pd.DataFrame(rows, columns=["M", "hypothesis", "measure", "tolerance", "value", "holds"])



def mechanism_tests(models: dict, llc_table: pd.DataFrame | None = None, n: int = 2048, seed: int = 0) -> pd.DataFrame:
    """``mechanism_table`` of every test at once, for ``models`` {1: (model, task), 2: (model, task)} (e.g. the
    final weights of another sweep) and its λ̂ table (None: no λ̂ row)."""
    frame = sequence_frame(*models[2], n=n, seed=seed)
    return mechanism_table(single_task_test(*models[1], n=n, seed=seed), two_task_test(*models[2], n=n, seed=seed),
                           context_swap_test(*models[1], n=n, seed=seed), posterior_sharpness(frame),
                           None if llc_table is None else llc_contrast(llc_table))


TESTS_KIND = "icl_low_m_tests"


def mechanism_answers(table: pd.DataFrame) -> pd.DataFrame:
    """``mechanism_table``'s tests as the opening box's questions and answers: "M = 1: ignores the context" and
    "holds (0.0123, pass mark < 0.05)"."""
    hypotheses = table["hypothesis"].str.replace("p_k", "pₖ")  # tables stored before the subscript was typeset
    return pd.DataFrame({"question": [f"{m}: {h}" for m, h in zip(table["M"], hypotheses)],
                         "answer": [f"{'holds' if ok else 'fails'} ({value:.3g}, pass mark {mark})"
                                    for ok, value, mark in zip(table["holds"], table["value"], table["tolerance"])]})


def stored_mechanism_tests(configs: dict, llc_table: pd.DataFrame | None = None, n: int = 2048, seed: int = 0):
    """``mechanism_tests`` of a sweep's M = 1 and M = 2 runs (``configs`` {(M, seed): TrainConfig}), as a stored
    table: weights are never committed, so a committed sweep carries this table instead. Loaded if stored,
    computed (and stored locally) if the final weights are on this machine, else None."""
    runs = {M: configs[(M, 0)] for M in (1, 2)}
    stored = cache.StoredTable(TESTS_KIND, {
        "runs": runs, "n": n, "seed": seed,
        "llc": None if llc_table is None else llc_table[["M", "llc_mean", "llc_se"]].round(6).to_dict("list")})
    found = stored.load()
    if found is not None:
        return found[0]["tests"]
    if not all(cache.current().has_weights(c) for c in runs.values()):  # else final_model would train
        return None
    table = mechanism_tests({M: final_model(c)[:2] for M, c in runs.items()}, llc_table, n=n, seed=seed)
    stored.save({"tests": table}, {})
    return table


def task_table(task) -> pd.DataFrame:
    """The task set T_M of a finite-M task: one row per task (t₁, t₂, …) with its components and norm; for
    M ≥ 2 also each task's distance to t₁ and the expected evidence a single pair gives against t₁ when it
    is true, |t_m − t₁|² / (2σ²) (nats: the mean log-likelihood ratio, as E[xxᵀ] = I)."""
    tasks = task.tasks()
    if tasks is None:
        raise ValueError("parameter 'task' must have a finite task set (M < ∞)")
    t = _numpy(tasks)
    sub = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
    table = pd.DataFrame(t, columns=[f"component {d + 1}" for d in range(t.shape[1])],
                         index=pd.Index([f"t{str(m + 1).translate(sub)}" for m in range(len(t))], name="task"))
    table["norm"] = np.linalg.norm(t, axis=1)
    if len(t) > 1:
        table["distance to t₁"] = np.linalg.norm(t - t[0], axis=1)
        table["evidence per pair (nats)"] = table["distance to t₁"] ** 2 / (2 * task.noise_var)
    return table


def mechanism_tally(table: pd.DataFrame) -> dict:
    """The count of a ``mechanism_table``'s tests for the page's sentence: ``held`` and ``tests`` (numbers), and
    ``not_holding``, each test that does not hold as "M, *hypothesis*: value against tolerance" ("none" when all
    hold)."""
    failed = table[~table["holds"].astype(bool)]
    items = "; ".join(f"{r['M']}, *{r['hypothesis']}*: {r['value']:.3g} against {r['tolerance']}"
                      for _, r in failed.iterrows())
    return {"held": len(table) - len(failed), "tests": len(table), "not_holding": items or "none"}
    items = "; ".join(f"{r['M']}, *{r['hypothesis']}*: {r['value']:.3g} against {r['tolerance']}"
                      for _, r in failed.iterrows())
    return f"{head} Not holding: {items}."
