"""Deep linear networks ``f(x) = W_L ⋯ W_1 x`` and their learning coefficient in closed form.

Aoyagi (2024), "Consideration on the learning efficiency of multiple-layered neural networks with linear
units", Neural Networks (preprint doi:10.2139/ssrn.4404877), Theorem 1, as used by Furman & Lau (2024),
"Estimating the Local Learning Coefficient at Scale" (arXiv 2402.03698) for DLNs up to 100M parameters (their
code: github.com/edmundlth/validating_lambdahat, dln.py). Widths ``[H_0 (input), H_1, ..., H_L (output)]``, a
true product of rank r, reduced widths ``M_i = H_i − r``. The bottleneck set S (ℓ + 1 of the M_i) is the one with

    max_{S} M_i < min_{not S} M_k,    Σ_S M_i ≥ ℓ · max_S M_i,    Σ_S M_i < ℓ · min_{not S} M_k

(the conditions on the complement hold vacuously when S is every layer; S exists and is unique). With
``M = ⌈Σ_S M_i / ℓ⌉`` and ``a = Σ_S M_i − (M − 1) ℓ`` (1 ≤ a ≤ ℓ),

    λ = (−r² + r (H_0 + H_L)) / 2 + a (ℓ − a) / (4ℓ) − ℓ (ℓ − 1) / 4 · (Σ_S M_i / ℓ)² + ½ Σ_{i<j in S} M_i M_j.

The correction ``a (ℓ − a) / (4ℓ)`` is non-zero exactly when ℓ does not divide Σ_S M_i; for one hidden layer
(L = 2) it is Aoyagi & Watanabe's (2005) +1/8 of reduced-rank regression (``golden.rrr_lambda``), and for a single
layer (L = 1) λ = H_0 H_1 / 2 = d/2.

λ is the global learning coefficient, the smallest local one on the set of true parameters. The local learning
coefficient differs from point to point there (widths [4, 1, 2], true product 0: 1 where W_2 = 0, 2 where
W_1 = 0 and W_2 ≠ 0), so :func:`true_parameter` places the network where every W_i has rank exactly r, the point
Aoyagi's proof expands around, where the local coefficient is λ.
"""
from __future__ import annotations

import math
from fractions import Fraction
from itertools import accumulate

import torch
import torch.nn as nn

from plateau_lib.llc.config import SGLDConfig


def _check_widths(widths) -> list[int]:
    if (not isinstance(widths, (list, tuple)) or len(widths) < 2
            or any(not isinstance(h, int) or isinstance(h, bool) or h < 1 for h in widths)):
        raise ValueError("widths must be a list of at least 2 positive integers [input, hidden..., output], "
                         f"got {widths!r}")
    return list(widths)


def _check_rank(rank, widths: list[int]) -> int:
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank <= min(widths):
        raise ValueError(f"rank must be an integer from 0 to min(widths) = {min(widths)}, got {rank!r}")
    return rank


def parameter_count(widths) -> int:
    """Number of weights d of the network: Σ H_{i-1} H_i (no biases)."""
    widths = _check_widths(widths)
    return sum(a * b for a, b in zip(widths, widths[1:]))


def is_bottleneck_set(reduced: list[int], subset: set[int]) -> bool:
    """Aoyagi's three conditions on the layer indices ``subset`` (ℓ + 1 ≥ 2 of them) of the reduced widths."""
    ell = len(subset) - 1
    inside = [reduced[i] for i in subset]
    outside = [reduced[i] for i in range(len(reduced)) if i not in subset]
    if ell < 1 or sum(inside) < ell * max(inside):
        return False
    return not outside or (max(inside) < min(outside) and sum(inside) < ell * min(outside))


def bottleneck_layers(widths, rank: int) -> list[int]:
    """Indices i (0 = input, L = output) of Aoyagi's bottleneck set S for ``widths`` at true rank ``rank``.

    The conditions make S a set of smallest reduced widths M_i = H_i − r, so only the prefixes of the layers
    sorted by M_i are tried (a prefix that splits equal M_i fails ``max_S < min_{not S}``).
    """
    widths = _check_widths(widths)
    reduced = [h - _check_rank(rank, widths) for h in widths]
    order = sorted(range(len(reduced)), key=reduced.__getitem__)
    return next(sorted(order[:k]) for k in range(2, len(order) + 1) if is_bottleneck_set(reduced, set(order[:k])))


def dln_lambda(widths, rank: int) -> float:
    """Learning coefficient λ of the deep linear network ``widths`` at a true product of rank ``rank``
    (Aoyagi 2024, Theorem 1; the formula is in this module's docstring), computed in exact fractions."""
    widths = _check_widths(widths)
    r = _check_rank(rank, widths)
    subset = [widths[i] - r for i in bottleneck_layers(widths, r)]
    ell, total = len(subset) - 1, sum(subset)
    a = total - (math.ceil(Fraction(total, ell)) - 1) * ell
    pairs = sum(m * s for m, s in zip(subset[1:], accumulate(subset)))  # Σ_{i<j} M_i M_j
    lam = (Fraction(-r * r + r * (widths[0] + widths[-1]), 2) + Fraction(a * (ell - a), 4 * ell)
           - Fraction((ell - 1) * total * total, 4 * ell) + Fraction(pairs, 2))
    return float(lam)


class DLNModel(nn.Module):
    """Deep linear network ``x ↦ W_L ⋯ W_1 x`` without biases; ``weights[i-1]`` is W_i (H_i x H_{i-1}),
    initialised N(0, 1/H_{i-1})."""

    def __init__(self, widths, seed: int = 0):
        super().__init__()
        self.widths = _check_widths(widths)
        g = torch.Generator().manual_seed(seed)
        self.weights = nn.ParameterList(nn.Parameter(torch.randn(h_out, h_in, generator=g) / h_in ** 0.5)
                                        for h_in, h_out in zip(self.widths, self.widths[1:]))

    def forward(self, x):
        for w in self.weights:
            x = x @ w.T
        return x

    def product(self) -> torch.Tensor:
        """The end-to-end matrix W_L ⋯ W_1 (H_L x H_0)."""
        out = self.weights[0]
        for w in self.weights[1:]:
            out = w @ out
        return out


def true_parameter(widths, rank: int, seed: int = 0) -> DLNModel:
    """A DLN on the true parameter set of :func:`dln_truth` (same ``seed``), with every W_i of rank exactly ``rank``.

    Each layer i gets a random orthonormal frame F_i (H_i x r) and ``W_i = F_i F_{i-1}ᵀ``, so the product is
    ``F_L F_0ᵀ`` (rank r, singular values 1) and every layer's nonzero singular values are 1 (balanced layers).
    ``rank = 0`` is the origin.
    """
    widths = _check_widths(widths)
    r = _check_rank(rank, widths)
    g = torch.Generator().manual_seed(seed)
    frames = [torch.linalg.qr(torch.randn(h, r, generator=g)).Q for h in widths]
    model = DLNModel(widths, seed)
    with torch.no_grad():
        for w, f_in, f_out in zip(model.weights, frames, frames[1:]):
            w.copy_(f_out @ f_in.T)
    return model


def dln_truth(widths, rank: int, seed: int = 0) -> torch.Tensor:
    """The true end-to-end matrix (H_L x H_0) of rank ``rank``: the product of :func:`true_parameter`."""
    with torch.no_grad():
        return true_parameter(widths, rank, seed).product()


def dln_data(widths, truth: torch.Tensor, n: int = 1000, seed: int = 0, noise: float = 0.0):
    """``(x, y)`` with x ~ N(0, I_{H_0}) and ``y = truth x + noise · N(0, I_{H_L})``, as (n, H_0), (n, H_L) tensors.

    With the default ``noise = 0`` (as Furman & Lau) the empirical loss is zero exactly on the true parameter set,
    so :func:`true_parameter` is the minimum of L_n as well as of the population loss.
    """
    widths = _check_widths(widths)
    if not isinstance(truth, torch.Tensor) or tuple(truth.shape) != (widths[-1], widths[0]):
        shape = tuple(truth.shape) if isinstance(truth, torch.Tensor) else type(truth).__name__
        raise ValueError(f"truth must be a ({widths[-1]}, {widths[0]}) tensor (output x input), got {shape}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not isinstance(noise, (int, float)) or isinstance(noise, bool) or not 0 <= noise < math.inf:
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, widths[0], generator=g)
    y = x @ truth.T + noise * torch.randn(n, widths[-1], generator=g)
    return x, y


# ---- λ̂ against λ at increasing size (the LLC page's known answers at the size of the book's models) -----------

# Deep, low-rank networks, so that λ is far from d/2 (d = 1,024 to 1.04 M weights; λ ÷ (d/2) from 0.20 to 0.16).
DLN_CASES = {"1k": ([20, 16, 12, 16, 20], 3), "10k": ([64, 48, 40, 48, 64], 5),
             "100k": ([200, 160, 120, 160, 200], 10), "1M": ([640, 500, 400, 500, 640], 20)}
# One setting for every size (SGLD's was chosen on the 256-weight case of tests/test_llc_dln.py). RMSProp-SGLD's
# preconditioner is nearly 1/δ = 10 here (the loss gradients near w* are far below δ = 0.1), so its ε is a tenth of
# SGLD's: the same effective step. DLN_SGLD and DLN_EPSILON are the stored tables' spec as written before SGLDConfig
# (``dln_config`` makes the settings of a sampler from them).
DLN_SGLD = dict(nbeta=1e4, gamma=10.0, num_chains=4, num_draws=6000, num_burnin_steps=3000, batch_size=64, seed=0)
DLN_EPSILON = {"sgld": 3e-5, "rmsprop_sgld": 3e-6}
# The same sweep at a third of the step: the largest network's check found the step the lever there (one chain at
# ε = 1e-5 read 1.08 of λ against 1.49 at 3e-5), so the whole sweep runs again at it, to see what it costs the small ones.
DLN_SMALL_EPSILON = {"sgld": 1e-5, "rmsprop_sgld": 1e-6}
DLN_DATA = dict(n=4096, seed=0)
DLN_SWEEPS = (DLN_EPSILON, DLN_SMALL_EPSILON)  # the page's sweeps, in the order its figure draws them
DLN_KIND = "llc_dln"


def dln_table(cases: dict = DLN_CASES, epsilon: dict = DLN_EPSILON) -> "cache.StoredTable":
    """The stored λ̂ of the DLN ``cases`` with both samplers at their step sizes ``epsilon`` (one row per case,
    sampler and chain)."""
    from plateau_lib.engine import cache
    return cache.StoredTable(DLN_KIND, {"cases": cases, "sgld": DLN_SGLD, "epsilon": epsilon, "data": DLN_DATA,
                                        "version": 1})


def dln_config(sampler: str = "sgld", epsilon: dict = DLN_EPSILON, **fields) -> SGLDConfig:
    """The DLN sweep's settings for ``sampler`` (``DLN_SGLD`` at its step size in ``epsilon``), ``fields`` changed."""
    if sampler not in epsilon:
        raise ValueError(f"parameter 'sampler' must be one of {sorted(epsilon)}, got {sampler!r}")
    return SGLDConfig(epsilon=epsilon[sampler], sampler=sampler, **DLN_SGLD).replace(**fields)


def dln_result(case: str, sgld: SGLDConfig, cases: dict = DLN_CASES):
    """The LLCResult of one DLN case at :func:`true_parameter` on noiseless data (L(w*) = 0), on the CPU."""
    from plateau_lib.llc.estimator import estimate_llc
    from plateau_lib.llc.golden import mse_loss
    widths, rank = cases[case]
    data = dln_data(widths, dln_truth(widths, rank), **DLN_DATA)
    return estimate_llc(true_parameter(widths, rank), mse_loss, data, sgld, device="cpu", init_loss=0.0, warn=False)


def dln_rows(case: str, sampler: str, cases: dict = DLN_CASES, epsilon: dict = DLN_EPSILON) -> "pd.DataFrame":
    """λ̂ of one DLN case with one sampler at its step size in ``epsilon``, per chain (:func:`dln_result`)."""
    import pandas as pd

    widths, rank = cases[case]
    res = dln_result(case, dln_config(sampler, epsilon), cases)
    lam = dln_lambda(widths, rank)
    return pd.DataFrame({"case": case, "sampler": sampler, "d": parameter_count(widths), "λ": lam,
                         "chain": res.chain_ids, "λ̂": res.llc_per_chain, "λ̂ ÷ λ": res.llc_per_chain / lam,
                         "diverged": res.diverged, "seconds": res.elapsed_s})


def dln_estimates(cases: dict = DLN_CASES, epsilon: dict = DLN_EPSILON, compute: bool = False,
                  deadline: float | None = None):
    """Every case's per-chain rows at the step sizes ``epsilon`` (stored; else computed and kept case by case when
    ``compute``; else None)."""
    stored = dln_table(cases, epsilon)
    if (found := stored.load()) is not None or not compute:
        return None if found is None else found[0]["chains"]
    items = [(case, sampler) for case in cases for sampler in epsilon]
    import pandas as pd
    rows = stored.build(items, lambda chunk: pd.concat([dln_rows(c, s, cases, epsilon) for c, s in chunk]),
                        on=("case", "sampler"), desc="DLN cases", deadline=deadline)
    stored.save({"chains": rows}, {"what": "λ̂ of deep linear networks against Aoyagi's λ, both samplers"})
    stored.drop_rows()
    return rows


def step_label(epsilon: dict) -> str:
    """A sweep's step sizes as the page names them: "ε = 3e-05 (RMSProp-SGLD 3e-06)"."""
    return f"ε = {epsilon['sgld']:g} (RMSProp-SGLD {epsilon['rmsprop_sgld']:g})"


def dln_sweeps(cases: dict = DLN_CASES) -> dict:
    """``{step_label: per-chain rows}`` of each of ``DLN_SWEEPS`` that is stored (one not stored is left out)."""
    found = {step_label(e): dln_estimates(cases, e) for e in DLN_SWEEPS}
    return {label: rows for label, rows in found.items() if rows is not None}


def dln_summary(chains: "pd.DataFrame") -> "pd.DataFrame":
    """One row per case and sampler: d, λ, d/2, λ̂ ÷ λ over the chains that did not diverge (mean, lowest, highest)."""
    ok = chains[~chains["diverged"].astype(bool)]
    out = (ok.groupby(["case", "sampler"], sort=False)
           .agg(d=("d", "first"), λ=("λ", "first"), ratio=("λ̂ ÷ λ", "mean"), low=("λ̂ ÷ λ", "min"),
                high=("λ̂ ÷ λ", "max"), chains=("chain", "count")).reset_index())
    out = out.rename(columns={"ratio": "λ̂ ÷ λ", "low": "lowest chain", "high": "highest chain"})
    return out.sort_values(["d", "sampler"], ascending=[True, False]).reset_index(drop=True)


SAMPLER_NAMES = {"sgld": "SGLD", "rmsprop_sgld": "RMSProp-SGLD"}


def dln_shown_table(summary: "pd.DataFrame") -> "pd.DataFrame":
    """:func:`dln_summary` as the page shows it: one row per size and sampler, the weights with separators."""
    shown = summary.assign(weights=summary["d"].map("{:,}".format), sampler=summary["sampler"].map(SAMPLER_NAMES),
                           **{"λ ÷ (d/2)": summary["λ"] / (summary["d"] / 2)})
    return shown.set_index(["weights", "sampler"])[["λ", "λ ÷ (d/2)", "λ̂ ÷ λ", "lowest chain", "highest chain",
                                                   "chains"]]


def dln_metric(case: str, cases: dict = DLN_CASES) -> str:
    """The claim metric of one DLN case (``llc.claims``): named by its number of weights."""
    return f"λ̂ ÷ λ, deep linear network d = {parameter_count(cases[case][0]):,}"


def dln_ratios(chains: "pd.DataFrame", sampler: str = "sgld") -> dict:
    """``{claim metric: λ̂ ÷ λ}`` of one sampler, the mean over its chains that did not diverge."""
    summary = dln_summary(chains)
    mine = summary[summary["sampler"] == sampler]
    return {dln_metric(case): float(ratio) for case, ratio in zip(mine["case"], mine["λ̂ ÷ λ"])}


# Why a size reads off λ: the sweep's plain-SGLD setting with one thing changed. On the two smallest networks the
# localization loosened, or chains four times longer; on the largest (shorter chains, one each, to fit a CPU) a
# larger SGLD batch or a smaller step.
DLN_CHECKS = {"the sweep's setting (γ = 10)": {}, "γ = 3": {"gamma": 3.0}, "γ = 1": {"gamma": 1.0},
              "chains 4 × longer": {"num_draws": 24_000, "num_burnin_steps": 12_000}}
DLN_CHECK_CASES = ("1k", "10k")
DLN_LARGE_CHECKS = {"the sweep's setting, 1 chain × 3,000 draws": {}, "SGLD batch 256": {"batch_size": 256},
                    "ε = 1e-5": {"epsilon": 1e-5}}
DLN_LARGE_CASES = ("1M",)
DLN_LARGE_BASE = {"num_chains": 1, "num_draws": 3_000, "num_burnin_steps": 1_500}
DLN_CHECK_KIND = "llc_dln_check"


def dln_check_table(large: bool = False, cases: dict = DLN_CASES) -> "cache.StoredTable":
    """The stored λ̂ of ``DLN_CHECKS`` on ``DLN_CHECK_CASES`` (``large``: ``DLN_LARGE_CHECKS`` on ``DLN_LARGE_CASES``),
    plain SGLD, one row per case, check and chain."""
    from plateau_lib.engine import cache
    names, checks = (DLN_LARGE_CASES, DLN_LARGE_CHECKS) if large else (DLN_CHECK_CASES, DLN_CHECKS)
    spec = {"cases": {c: cases[c] for c in names}, "sgld": DLN_SGLD, "epsilon": DLN_EPSILON["sgld"], "checks": checks,
            "data": DLN_DATA, "version": 1}
    return cache.StoredTable(DLN_CHECK_KIND, spec | ({"base": DLN_LARGE_BASE} if large else {}))


def dln_check_estimates(large: bool = False, cases: dict = DLN_CASES, compute: bool = False,
                        deadline: float | None = None):
    """The checks' per-chain rows (stored; else computed and kept one by one when ``compute``; else None)."""
    import pandas as pd

    stored = dln_check_table(large, cases)
    if (found := stored.load()) is not None or not compute:
        return None if found is None else found[0]["chains"]
    names, checks = (DLN_LARGE_CASES, DLN_LARGE_CHECKS) if large else (DLN_CHECK_CASES, DLN_CHECKS)
    base = dln_config(**(DLN_LARGE_BASE if large else {}))

    def rows(chunk):
        out = []
        for case, check in chunk:
            widths, rank = cases[case]
            res = dln_result(case, base.replace(**checks[check]), cases)
            lam = dln_lambda(widths, rank)
            out.append(pd.DataFrame({"case": case, "check": check, "d": parameter_count(widths), "chain": res.chain_ids,
                                     "λ̂ ÷ λ": res.llc_per_chain / lam, "diverged": res.diverged}))
        return pd.concat(out)
    table = stored.build([(c, k) for c in names for k in checks], rows, on=("case", "check"),
                         desc="DLN checks", deadline=deadline)
    stored.save({"chains": table}, {"what": "λ̂ ÷ λ of deep linear networks with one SGLD setting changed"})
    stored.drop_rows()
    return table


def dln_check_summary(chains: "pd.DataFrame") -> "pd.DataFrame":
    """λ̂ ÷ λ per check (rows, in ``DLN_CHECKS`` order) and size (columns, by d), the mean over the chains that did
    not diverge."""
    ok = chains[~chains["diverged"].astype(bool)]
    table = ok.pivot_table(index="check", columns="d", values="λ̂ ÷ λ", aggfunc="mean")
    table.columns = [f"d = {d:,}" for d in table.columns]
    order = [*DLN_CHECKS, *DLN_LARGE_CHECKS]
    return table.reindex([c for c in order if c in table.index])


def dln_provenance(chains: "pd.DataFrame") -> dict:
    """Device, seed, wall time and source of the stored DLN estimates, for the recorded summary."""
    seconds = chains.groupby(["case", "sampler"])["seconds"].first().sum()
    return {"device": "cpu", "seeds": [DLN_SGLD["seed"]], "wall_time_s": round(float(seconds), 1),
            "source": "committed (scripts/llc_dln.py)"}


# ---- has a chain settled? λ̂ against the localization γ, with chains long enough to settle at each ----------------

# The localization pulls a chain back towards w* at a rate εγ/2 a step, so along the flat valley of true parameters
# a chain needs a few times τ = 2/(εγ) steps to spread to its posterior width. At γ = 10 and ε = 1e-5, τ is 20,000
# steps, more than the sweep's 9,000, so the sweep's chains may still be spreading when they stop. Each scan below runs
# its sizes at its γ with a burn-in of τ and 1.5 τ of draws, and keeps each chain's λ̂ over windows of its steps, to
# see whether it has settled; ``slug`` names its download on the page. A scan's SGLD batch is the sweep's (64) unless
# its settings name ``batch_size`` or ``batch_per_input`` (the batch as a multiple of the network's input width H_0).
DLN_GAMMAS = (10.0, 30.0, 100.0)
DLN_SETTLE = dict(epsilon=1e-5, num_chains=2, burnin_tau=1.0, draws_tau=1.5, window=1_000)
# Networks only some scans run, kept apart from DLN_CASES (whose scans over every size keep their stored keys): one
# hidden layer at DLN_CASES' four sizes (the same d) and ranks (λ ÷ (d/2) 0.51 to 0.45), and two of DLN_CASES' networks
# at another true rank.
DLN_SHALLOW = ("1k, one hidden layer", "10k, one hidden layer", "100k, one hidden layer", "1M, one hidden layer")
DLN_VARIANT_CASES = dict(zip(DLN_SHALLOW, (([32, 16, 32], 3), ([96, 52, 96], 5), ([320, 160, 320], 10),
                                           ([1000, 520, 1000], 20)))) | {
    "1k, rank 1": (DLN_CASES["1k"][0], 1), "1M, rank 100": (DLN_CASES["1M"][0], 100)}
# Two hidden layers at DLN_CASES' four sizes (the same d), each at two true ranks: one whose λ ÷ (d/2) is near 0.25,
# towards the three-hidden-layer networks' 0.16-0.20, and one near 0.44, the one-hidden-layer networks' (no rank
# takes one or three hidden layers into the other's range; two hidden layers reach both).
DLN_TWO_HIDDEN_WIDTHS = {"1k": [24, 16, 16, 24], "10k": [80, 48, 48, 80], "100k": [240, 160, 160, 240],
                         "1M": [790, 500, 500, 790]}
DLN_TWO_HIDDEN_RANKS = {"1k": (1, 12), "10k": (4, 33), "100k": (10, 122), "1M": (35, 358)}
DLN_TWO_HIDDEN = {f"{size}, two hidden layers, rank {rank}": (DLN_TWO_HIDDEN_WIDTHS[size], rank)
                  for size, ranks in DLN_TWO_HIDDEN_RANKS.items() for rank in ranks}
DLN_VARIANT_CASES |= DLN_TWO_HIDDEN
DLN_ALL_CASES = DLN_CASES | DLN_VARIANT_CASES  # every network a scan may name
DLN_SCANS = {
    # every size at three γ, plain SGLD
    "γ scan": dict(slug="windows", cases=tuple(DLN_CASES), gammas=DLN_GAMMAS, settle=DLN_SETTLE),
    # The largest network settled at γ = 10 still reads far above λ, so the same at a third of the step (one chain,
    # since its τ is three times as long; the two chains at 1e-5 agreed to 0.01): the step's share in that excess.
    "finer step": dict(slug="finer", cases=("1M",), gammas=(10.0,),
                       settle={**DLN_SETTLE, "epsilon": 3e-6, "num_chains": 1}),
    # RMSProp-SGLD at the step the sweeps pair with plain SGLD's (a tenth of it, as in DLN_SMALL_EPSILON) and with
    # plain SGLD's chain lengths (``tau_epsilon``): its preconditioner scales the step weight by weight, so τ has no
    # one value, and the drift over the draws says whether its chains settled.
    "RMSProp-SGLD γ scan": dict(slug="rmsprop", cases=tuple(DLN_CASES), gammas=DLN_GAMMAS,
                                settle={**DLN_SETTLE, "sampler": "rmsprop_sgld", "epsilon": 1e-6,
                                        "tau_epsilon": DLN_SETTLE["epsilon"]}),
    # Is the minibatch why the excess grows with size? A minibatch of b inputs of width H_0 has E[H_b²] ÷ E[H_b] ≈
    # 1 + H_0/b times the full batch's curvature, so at b = 64 the step is in effect 1.3 (d = 1,024) to 11
    # (d = 1,040,000) times as hot. The test: the smallest network with a batch of 2, whose 1 + H_0/b = 11 is the
    # largest's at b = 64 ...
    "batch 2, smallest": dict(slug="batch-2", cases=("1k",), gammas=DLN_GAMMAS, settle={**DLN_SETTLE, "batch_size": 2}),
    # ... and every size with the batch equal to its input width (1 + H_0/b = 2 at every size), one chain a cell.
    "batch = input width": dict(slug="batch-input", cases=tuple(DLN_CASES), gammas=DLN_GAMMAS,
                                settle={**DLN_SETTLE, "num_chains": 1, "batch_per_input": 1.0}),
    # Or is it the temperature? Fluctuations of size 1/√(nβ) in H weights of a row add up in the products of layers,
    # so the quadratic (asymptotic) regime needs nβ large against the width: 1e4 is 600 times the smallest network's
    # mean width and 20 times the largest's. ``cool`` k multiplies nβ and γ by k and divides ε by k (the posterior at
    # temperature 1/k, the same τ; ``gammas`` name γ before the scaling): every size ten times colder, one chain a
    # cell. (The smallest network made as hot as the largest, k = 1/32, diverged at γ = 0.31: not a scan here.)
    "colder": dict(slug="colder", cases=tuple(DLN_CASES), gammas=(10.0,),
                   settle={**DLN_SETTLE, "num_chains": 1, "cool": 10.0}),
    # Or the depth? The same four sizes and ranks with one hidden layer (DLN_VARIANT_CASES), the batch equal to the
    # input width as in the row above that reads nearest λ: if the rise with size is the depth's, it goes here.
    "one hidden layer": dict(slug="one-hidden-layer", cases=DLN_SHALLOW, gammas=(10.0,),
                             settle={**DLN_SETTLE, "num_chains": 1, "batch_per_input": 1.0}),
    # Or the true rank against the widths? r ÷ the narrowest width falls from 3/12 (the smallest) to 20/400 (the
    # largest). The largest at r = 100 (100/400, the smallest's share) and the smallest at r = 1 (1/12, the nearest
    # to the largest's share), at the γ scan's setting: if the share drives the excess, they trade places.
    "true rank": dict(slug="true-rank", cases=("1k, rank 1", "1M, rank 100"), gammas=(10.0, 30.0),
                      settle={**DLN_SETTLE, "num_chains": 1}),
    # Depth or degeneracy? With two hidden layers both can be held apart: at each size a rank with λ ÷ (d/2) near
    # 0.25 and one near 0.44 (DLN_TWO_HIDDEN), at the one-hidden-layer scan's setting. If the excess at a million
    # weights follows the degeneracy, it comes at the low share only; if it follows the depth, at both or neither.
    "two hidden layers": dict(slug="two-hidden-layers", cases=tuple(DLN_TWO_HIDDEN), gammas=(10.0,),
                              settle={**DLN_SETTLE, "num_chains": 1, "batch_per_input": 1.0}),
}
DLN_GAMMA_KIND = "llc_dln_gamma"


def _scan(name: str) -> dict:
    if name not in DLN_SCANS:
        raise ValueError(f"parameter 'name' must be one of {list(DLN_SCANS)}, got {name!r}")
    return DLN_SCANS[name]


def scan_cases(name: str) -> dict:
    """``{case: (widths, rank)}`` of the scan ``name`` of ``DLN_SCANS`` (from ``DLN_CASES`` and ``DLN_VARIANT_CASES``)."""
    return {case: DLN_ALL_CASES[case] for case in _scan(name)["cases"]}


def settling_steps(gamma: float, settle: dict = DLN_SETTLE) -> tuple[int, int]:
    """``(burn-in steps, draws)`` long enough for a chain to settle at localization ``gamma`` and ``settle``'s step
    (its ``tau_epsilon`` where it has one): τ × ``burnin_tau`` and τ × ``draws_tau``, with τ = 2/(εγ)."""
    epsilon = settle.get("tau_epsilon", settle["epsilon"])
    if not gamma > 0 or not epsilon > 0:
        raise ValueError(f"gamma and epsilon must be > 0, got gamma={gamma!r}, epsilon={epsilon!r}")
    tau = 2 / (epsilon * gamma)
    return round(settle["burnin_tau"] * tau), round(settle["draws_tau"] * tau)


def scan_batch(settle: dict, widths=None) -> int:
    """The SGLD batch of a scan on the network ``widths``: ``batch_per_input`` × H_0 (``widths`` needed), else
    ``batch_size``, else the sweep's."""
    if "batch_per_input" in settle:
        if widths is None:
            raise ValueError("parameter 'widths' is needed for a scan whose batch is a multiple of the input width")
        return max(1, round(settle["batch_per_input"] * _check_widths(widths)[0]))
    return settle.get("batch_size", DLN_SGLD["batch_size"])


def dln_gamma_config(gamma: float, settle: dict = DLN_SETTLE, widths=None) -> SGLDConfig:
    """The sweep's setting of ``settle``'s sampler (plain SGLD unless it names one) at its step, chains and batch (on
    the network ``widths``), at localization ``gamma`` with chains of ``settling_steps``; with ``settle["cool"]`` = k,
    nβ and γ times k and ε ÷ k."""
    burnin, draws = settling_steps(gamma, settle)
    sampler, cool = settle.get("sampler", "sgld"), settle.get("cool", 1.0)
    return dln_config(sampler, {sampler: settle["epsilon"] / cool}, gamma=float(gamma) * cool,
                      nbeta=DLN_SGLD["nbeta"] * cool, num_chains=settle["num_chains"], num_burnin_steps=burnin,
                      num_draws=draws, batch_size=scan_batch(settle, widths))


def dln_gamma_table(cases: dict = DLN_CASES, gammas=DLN_GAMMAS, settle: dict = DLN_SETTLE) -> "cache.StoredTable":
    """The stored γ scan of the DLN ``cases``: λ̂ ÷ λ over windows of each chain's steps, at each of ``gammas``,
    with ``settle``'s step, chains and chain lengths."""
    from plateau_lib.engine import cache
    return cache.StoredTable(DLN_GAMMA_KIND, {"cases": cases, "sgld": DLN_SGLD, "gammas": list(gammas),
                                              "settle": settle, "data": DLN_DATA, "version": 1})


def gamma_rows(case: str, gamma: float, cases: dict = DLN_CASES, settle: dict = DLN_SETTLE) -> "pd.DataFrame":
    """One case at one γ (``dln_gamma_config``), tidy: one row per chain and window of ``settle["window"]`` steps,
    with nβ × the window's mean minibatch loss ÷ λ, whether the window is burn-in, and the chain's own λ̂ ÷ λ (over
    its draws)."""
    import numpy as np
    import pandas as pd

    widths, rank = cases[case]
    sgld = dln_gamma_config(gamma, settle, widths)
    res = dln_result(case, sgld, cases)
    lam, window = dln_lambda(widths, rank), settle["window"]
    rows = []
    for c, chain in enumerate(res.chain_ids):
        losses = res.loss_trace_all[c]
        for start in range(0, len(losses), window):
            rows.append({"case": case, "γ": float(gamma), "d": parameter_count(widths), "λ": lam, "chain": int(chain),
                         "batch": sgld.batch_size, "step": start, "burn-in": start < sgld.num_burnin_steps,
                         "window λ̂ ÷ λ": float(sgld.nbeta * np.mean(losses[start:start + window]) / lam),
                         "λ̂ ÷ λ": float(res.llc_per_chain[c] / lam), "diverged": bool(res.diverged[c]),
                         "seconds": res.elapsed_s})
    return pd.DataFrame(rows)


def dln_gamma_estimates(cases: dict = DLN_CASES, gammas=DLN_GAMMAS, settle: dict = DLN_SETTLE, compute: bool = False,
                        deadline: float | None = None):
    """The γ scan's rows (stored; else computed and kept case by case, smallest first, when ``compute``; else None)."""
    import pandas as pd

    stored = dln_gamma_table(cases, gammas, settle)
    if (found := stored.load()) is not None or not compute:
        return None if found is None else found[0]["windows"]
    items = [(case, float(g)) for case in cases for g in gammas]
    rows = stored.build(items, lambda chunk: pd.concat([gamma_rows(c, g, cases, settle) for c, g in chunk]),
                        on=("case", "γ"), desc="DLN γ scan", deadline=deadline)
    stored.save({"windows": rows}, {"what": "λ̂ ÷ λ of deep linear networks over each chain's steps, at three γ"})
    stored.drop_rows()
    return rows


def scan_table(name: str) -> "cache.StoredTable":
    """The stored table of the scan ``name`` of ``DLN_SCANS``."""
    scan = _scan(name)
    return dln_gamma_table(scan_cases(name), scan["gammas"], scan["settle"])


def scan_estimates(name: str, compute: bool = False, deadline: float | None = None):
    """The rows of the scan ``name`` of ``DLN_SCANS`` (stored; else computed when ``compute``; else None), as
    ``dln_gamma_estimates``."""
    scan = _scan(name)
    return dln_gamma_estimates(scan_cases(name), scan["gammas"], scan["settle"], compute, deadline)


def gamma_summary(windows: "pd.DataFrame", by=("d",)) -> "pd.DataFrame":
    """Per size (or per ``by``, e.g. ``("case",)`` for networks of one size at two ranks) and γ, over the chains
    that did not diverge: λ̂ ÷ λ (mean over chains), and how far it still moved over the draws: the last draw
    window's λ̂ ÷ λ minus the first's (mean over chains; near 0 once settled)."""
    by = [*by, "γ"]
    ok = windows[~windows["diverged"].astype(bool) & ~windows["burn-in"].astype(bool)]
    per_chain = ok.sort_values("step").groupby([*by, "chain"]).agg(
        ratio=("λ̂ ÷ λ", "first"), first=("window λ̂ ÷ λ", "first"), last=("window λ̂ ÷ λ", "last"))
    per_chain["drift"] = per_chain["last"] - per_chain["first"]
    out = per_chain.groupby(by).agg(**{"λ̂ ÷ λ": ("ratio", "mean"), "drift over the draws": ("drift", "mean"),
                                       "chains": ("ratio", "count")})
    return out.reset_index()


def at_gamma(windows: "pd.DataFrame", gamma: float = 10.0) -> "pd.Series":
    """λ̂ ÷ λ of a scan's settled chains (:func:`gamma_summary`) at localization ``gamma``, by number of weights d
    (ascending; a scan with one network per size: two at one size would be averaged)."""
    settled = gamma_summary(windows)
    return settled[settled["γ"] == gamma].set_index("d")["λ̂ ÷ λ"].sort_index()


def settled_by_size(gamma: float = 10.0) -> "pd.Series":
    """:func:`at_gamma` of the γ scan; empty when the scan is not stored."""
    import pandas as pd

    windows = scan_estimates("γ scan")
    return pd.Series(dtype=float, name="λ̂ ÷ λ") if windows is None else at_gamma(windows, gamma)


def scans_at(scans: dict, gamma: float = 10.0) -> "pd.DataFrame":
    """λ̂ ÷ λ of each scan of ``scans`` (``{label: windows}``, a row each; :func:`gamma_summary`) at localization
    ``gamma`` (before a ``cool`` scaling), a column per size, to two decimals; blank where a scan did not run."""
    import pandas as pd

    rows = {}
    for label, windows in scans.items():
        rows[label] = at_gamma(windows, gamma)
    table = pd.DataFrame(rows).T.sort_index(axis=1)
    table.columns = [f"d = {d:,}" for d in table.columns]
    return table.map(lambda v: "" if pd.isna(v) else f"{v:.2f}")


def rank_table(windows: "pd.DataFrame", cases=("1k", "1M"), gammas=(10.0, 30.0)) -> "pd.DataFrame":
    """Does λ̂ follow λ when only the true rank changes? ``windows``: the rows of scans that ran the same networks
    (widths) at different ranks (the γ scan's and the true-rank scan's, concatenated); per network of ``cases`` and
    rank, λ and, at each of ``gammas``, λ̂ (the mean over chains of λ̂ ÷ λ, times λ) and λ̂ ÷ λ."""
    import pandas as pd

    widths = {tuple(DLN_CASES[c][0]) for c in cases}
    ok = windows[windows["γ"].isin(gammas)]
    ok = ok[[tuple(DLN_ALL_CASES[c][0]) in widths for c in ok["case"]]]
    mean = gamma_summary(ok, by=("case",)).rename(columns={"λ̂ ÷ λ": "ratio", "γ": "gamma"})
    mean["d"] = [parameter_count(DLN_ALL_CASES[c][0]) for c in mean["case"]]
    mean["rank"] = [DLN_ALL_CASES[c][1] for c in mean["case"]]
    mean["lam"] = [dln_lambda(*DLN_ALL_CASES[c]) for c in mean["case"]]
    rows = {}
    for row in mean.sort_values(["d", "lam"]).itertuples(index=False):
        key = (int(row.d), int(row.rank))
        rows.setdefault(key, {"λ": float(row.lam)})
        rows[key] |= {f"λ̂, γ = {row.gamma:g}": float(row.ratio * row.lam), f"λ̂ ÷ λ, γ = {row.gamma:g}": float(row.ratio)}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index = pd.MultiIndex.from_tuples(table.index, names=["weights", "true rank"])
    return table


RANK_FINDINGS = ("large_lambda_rise", "large_llc_change", "large_llc_change_30", "large_ratio_base", "large_ratio_high",
                 "small_lambda_fall", "small_llc_fall", "small_ratio_base", "small_ratio_low")


def rank_findings(ranks: "pd.DataFrame | None") -> dict[str, str]:
    """What the page glues from :func:`rank_table` (``dln_rank_{RANK_FINDINGS}``; ``MISSING`` without it): on the
    largest network, how much λ rises from the γ scan's rank to the higher one and how much λ̂ moves at γ = 10 and
    30, with λ̂ ÷ λ at both; on the smallest, how much λ and λ̂ fall from its rank to the lower one. Anything but two
    networks at two ranks each, with every value, reads ``MISSING``."""
    from plateau_lib.book.pages import MISSING
    columns = {"λ", "λ̂, γ = 10", "λ̂ ÷ λ, γ = 10", "λ̂, γ = 30"}
    if (ranks is None or len(ranks.index.levels[0]) != 2 or (ranks.groupby(level="weights").size() != 2).any()
            or not columns <= set(ranks.columns) or ranks[list(columns)].isna().any().any()):
        return {f"dln_rank_{name}": MISSING for name in RANK_FINDINGS}
    (small_low, small_base), (large_base, large_high) = (
        [row for _, row in ranks.xs(d, level="weights").sort_index().iterrows()] for d in sorted(ranks.index.levels[0]))
    signed = lambda x: f"{x:+.0%}".replace("-", "−")  # noqa: E731
    values = {"large_lambda_rise": f"{large_high['λ'] / large_base['λ'] - 1:.0%}",
              "large_llc_change": signed(large_high["λ̂, γ = 10"] / large_base["λ̂, γ = 10"] - 1),
              "large_llc_change_30": signed(large_high["λ̂, γ = 30"] / large_base["λ̂, γ = 30"] - 1),
              "large_ratio_base": f"{large_base['λ̂ ÷ λ, γ = 10']:.2f}", "large_ratio_high": f"{large_high['λ̂ ÷ λ, γ = 10']:.2f}",
              "small_lambda_fall": f"{1 - small_low['λ'] / small_base['λ']:.0%}",
              "small_llc_fall": f"{1 - small_low['λ̂, γ = 10'] / small_base['λ̂, γ = 10']:.0%}",
              "small_ratio_base": f"{small_base['λ̂ ÷ λ, γ = 10']:.2f}", "small_ratio_low": f"{small_low['λ̂ ÷ λ, γ = 10']:.2f}"}
    return {f"dln_rank_{name}": values[name] for name in RANK_FINDINGS}


def gamma_shown_table(summaries: dict) -> "pd.DataFrame":
    """``{sampler name: gamma_summary}`` as the page shows it: one row per sampler and γ, a column per size
    (λ̂ ÷ λ), then the largest drift over the draws at that γ (in λ̂ ÷ λ), each to two decimals."""
    import pandas as pd

    tables = {}
    for name, summary in summaries.items():
        table = summary.pivot_table(index="γ", columns="d", values="λ̂ ÷ λ")
        table.columns = [f"d = {d:,}" for d in table.columns]
        table["largest drift over the draws"] = summary.assign(
            size=summary["drift over the draws"].abs()).groupby("γ")["size"].max()
        table.index = [f"γ = {g:g}" for g in table.index]
        tables[name] = table
    return pd.concat(tables, names=["sampler", "localization"]).map("{:.2f}".format)
