"""Algorithmic tasks of Gopalani et al., sampled online from an explicit seeded generator.

A task is everything the training loop needs to know about a problem: how to sample a batch, which
model it trains (``build_model``), the training loss (``loss``), the evaluation (``evaluate``: a dict of
tensors, kept on the device) and how evaluations become tidy tables (``tables``). The loop itself
(``train.py``) knows none of this, so the in-context regression task runs through the same loop.

Every task produces int64 token sequences ``[prompt | outputs]`` (layouts as in the paper's code) and
knows:
- ``prompt_len``: tokens given before the outputs; the model predicts output j at position
  ``prompt_len - 1 + j`` (the *output-predicting* positions, ``out_positions``);
- ``omega(seqs)``: the optimal attention set Ω as a bool mask (B, T, T) over query x key positions of
  the model input (length ``seq_len - 1``), used by the Attention Progress Measure;
- ``omega_layer``: the layer whose attention Ω describes, which the APM reads (the last layer, except for
  histogram, whose Ω the paper defines on layer 1 of its 2-layer model);
- ``cosine_pairs``: the (row, col) pairs of output-predicting positions averaged in the paper's
  representation-collapse metric (its per-task exclusions);
- ``cosine_segments``: named sets of such pairs, each averaged into a scalar of its own where the paper
  reports several collapse means (concatenated MWS: one per column segment);
- ``partial_positions``: the 1-based outputs of the task's partial solution (what is learned before the
  plateau ends: y_1 for MWS, the final carry for reversed addition), read by ``stages.plateau_summary``;
- ``extra_scalars`` / ``extra_metrics``: scalars only this task logs in the paper (α_1 for repeat, the
  per-layer and "alternative" APMs for permutation).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from plateau_lib.plateau import metrics as M
from plateau_lib.plateau.model import GPT, GPTConfig


def _check_int(name, value, low, high=None):
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"task parameter {name!r} must be an integer {allowed}, got {value!r}")


def _lower_pairs(rows, cols=None):
    """All (a, b) with b < a, a in rows and b in cols (cols defaults to rows)."""
    cols = rows if cols is None else cols
    return [(a, b) for a in rows for b in cols if b < a]


@dataclass
class Task:
    name: str
    n: int
    prompt_len: int
    gen_len: int
    vocab_size: int
    cosine_pairs: list = field(repr=False, default_factory=list)
    cosine_segments: dict = field(repr=False, default_factory=dict)

    @property
    def seq_len(self) -> int:
        return self.prompt_len + self.gen_len

    @property
    def block_size(self) -> int:
        return self.seq_len - 1

    @property
    def out_positions(self) -> slice:
        """Model-input positions whose next-token prediction is an output token."""
        return slice(self.prompt_len - 1, self.seq_len - 1)

    def sample(self, batch: int, generator: torch.Generator, device=None) -> torch.Tensor:
        _check_int("batch", batch, 1)
        device = generator.device if device is None else torch.device(device)
        return self._sample(batch, generator, device)

    def _randint(self, low, high, shape, generator, device):
        return torch.randint(low, high, shape, generator=generator, device=device)

    omega_is_fixed = True  # False where Ω depends on the sequence (permutation): no fixed bias mask exists
    samples_on_cpu = False  # the data are drawn on the run's device
    omega_layer = -1       # the layer (index) whose attention Ω describes; the APM reads this layer
    extra_scalars = ()     # names of the scalars ``extra_metrics`` adds

    @property
    def partial_positions(self) -> tuple:
        """1-based outputs that form the partial solution (y_1 unless a task says otherwise)."""
        return (1,)

    def extra_metrics(self, inside: dict, seqs: torch.Tensor, greedy: torch.Tensor) -> dict:
        """This task's own scalars (``extra_scalars``) from the model's internals and greedy outputs."""
        return {}

    def omega(self, seqs: torch.Tensor) -> torch.Tensor:
        """Optimal attention set Ω as a bool mask (B, T, T), T = seq_len - 1 (query, key)."""
        B, T = seqs.shape[0], self.block_size
        mask = torch.zeros(T, T, dtype=torch.bool, device=seqs.device)
        for q, keys in self._omega_rows():
            mask[q, keys] = True
        return mask.expand(B, T, T)

    def _omega_rows(self):
        raise NotImplementedError

    # --- what the training loop asks of a task -------------------------------------------------
    def model_config(self, cfg) -> GPTConfig:
        """The architecture ``cfg`` (a TrainConfig) trains on this task; runs stack only if these agree."""
        return GPTConfig(vocab_size=self.vocab_size, block_size=self.block_size, n_layer=cfg.n_layer,
                         n_head=cfg.n_head, d_model=cfg.d_model, softmax=cfg.softmax)

    def build_model(self, cfg) -> GPT:
        return GPT(self.model_config(cfg))

    def attention_bias(self, c: float, device):
        """The multiplicative mask of the attention-biasing intervention (None when c = 1)."""
        return None if c == 1.0 else M.bias_mask(self, c, device=device)

    def loss(self, model, seqs, attn_bias=None):
        """The training loss: next-token cross-entropy at every position (the paper's)."""
        return M.loss_all(model(seqs[:, :-1], attn_bias=attn_bias), seqs)

    @property
    def scalars(self) -> tuple:
        """Names of the scalar metrics ``evaluate`` returns: the chapter's, one per cosine segment, the task's own."""
        return M.SCALARS + tuple(self.cosine_segments) + tuple(self.extra_scalars)

    def evaluate(self, model, seqs, attn_bias=None) -> dict:
        """Every chapter metric on the held-out batch (``metrics.evaluate``)."""
        return M.evaluate(model, seqs, self, attn_bias=attn_bias)

    def tables(self, evals: list, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
        """``evals`` [(step, host dict)] -> (scalar metrics by step, accuracies by step and position, arrays)."""
        metrics = pd.DataFrame([{"step": s, "seed": seed, **{k: float(out[k]) for k in self.scalars}}
                                for s, out in evals])
        positions = pd.DataFrame([{"step": s, "seed": seed, "position": j + 1, "acc": float(out["acc_pos"][j]),
                                   "acc_tf": float(out["acc_tf_pos"][j])}
                                  for s, out in evals for j in range(self.gen_len)])
        arrays = {"step": np.array([s for s, _ in evals]), "cos": np.stack([out["cos"].numpy() for _, out in evals]),
                  "attn": np.stack([out["attn"].numpy() for _, out in evals])}
        return metrics, positions, arrays


class MovingWindowSum(Task):
    """MWS: y_i = (x_{i-k+1} + ... + x_i) mod p; the first k-1 outputs copy the inputs."""

    def __init__(self, n=16, p=17, k=2):
        _check_int("n", n, 2, 64)
        _check_int("p", p, 2)
        _check_int("k", k, 1, n)
        if p < n:
            raise ValueError(f"task parameter 'p' must be >= n ({n}) so the inputs 1..n are valid tokens, got {p}")
        self.p, self.k = p, k
        super().__init__("mws", n, n + 1, n, p + 1, _lower_pairs(range(1, n)))

    def _sample(self, batch, g, device):
        x = self._randint(1, self.n + 1, (batch, self.n), g, device)
        y = x.clone()
        csum = torch.cumsum(x, dim=1)
        y[:, self.k - 1:] = csum[:, self.k - 1:] - torch.nn.functional.pad(csum, (1, 0))[:, : self.n - self.k + 1]
        sep = torch.full((batch, 1), self.p, dtype=torch.long, device=device)
        return torch.cat([x, sep, y % self.p], dim=1)

    def _omega_rows(self):
        o = self.prompt_len - 1
        for j in range(self.n):  # query o+j predicts y_{j+1}: a copy of x_{j+1} if j+1 < k, else x_{j-k+2} .. x_{j+1}
            yield o + j, [j] if j < self.k - 1 else list(range(j - self.k + 1, j + 1))


class PrefixSum(Task):
    """y_i = (x_1 + ... + x_i) mod p."""

    def __init__(self, n=16, p=17):
        _check_int("n", n, 2, 64)
        _check_int("p", p, n)
        self.p = p
        super().__init__("prefix_sum", n, n + 1, n, p + 1, _lower_pairs(range(1, n)))

    def _sample(self, batch, g, device):
        x = self._randint(1, self.n + 1, (batch, self.n), g, device)
        sep = torch.full((batch, 1), self.p, dtype=torch.long, device=device)
        return torch.cat([x, sep, torch.cumsum(x, 1) % self.p], dim=1)

    def _omega_rows(self):
        o = self.prompt_len - 1
        yield o, [0]
        for i in range(1, self.n):  # y_{i+1} = y_i + x_{i+1}: the previous output (itself) and x_{i+1}
            yield o + i, [i, o + i]


class Repeat(Task):
    """Repeat_k: the outputs are k blocks of n/k tokens, block b equal to (x_1 + b) mod p."""

    def __init__(self, n=16, k=1):
        _check_int("n", n, 2, 64)
        _check_int("k", k, 1, n)
        if n % k:
            raise ValueError(f"task parameter 'k' must divide n ({n}), got {k}")
        self.k, self.p = k, n + 1
        m = n // k
        pairs = _lower_pairs(range(1, n)) if k == 1 else [
            pr for b in range(k) for pr in _lower_pairs(range(b * m + 1, (b + 1) * m))]
        super().__init__("repeat", n, n + 1, n, n + 2, pairs)

    def _sample(self, batch, g, device):
        x = self._randint(1, self.n + 1, (batch, self.n), g, device)
        offs = torch.arange(self.k, device=device).repeat_interleave(self.n // self.k)
        sep = torch.full((batch, 1), self.p, dtype=torch.long, device=device)
        return torch.cat([x, sep, (x[:, :1] + offs) % self.p], dim=1)

    extra_scalars = ("alpha_1",)

    @property
    def partial_positions(self):
        """The first block, the copy of x_1 (for k = 1 that is every output: y_1 stands for it)."""
        return (1,) if self.k == 1 else tuple(range(1, self.n // self.k + 1))

    def extra_metrics(self, inside, seqs, greedy):
        return {"alpha_1": M.alpha_1(greedy)}

    def _omega_rows(self):  # not in the paper's code (it logs no APM for repeat): every output reads x_1
        for j in range(self.n):
            yield self.prompt_len - 1 + j, [0]


class Copy(Task):
    """y = x (or reversed x with ``reverse=True``); SEP = 0."""

    def __init__(self, n=16, reverse=False):
        _check_int("n", n, 2, 64)
        self.reverse = reverse
        super().__init__("reverse" if reverse else "copy", n, n + 1, n, n + 1, _lower_pairs(range(n)))

    def _sample(self, batch, g, device):
        x = self._randint(1, self.n + 1, (batch, self.n), g, device)
        sep = torch.zeros((batch, 1), dtype=torch.long, device=device)
        return torch.cat([x, sep, x.flip(1) if self.reverse else x], dim=1)

    def _omega_rows(self):
        for j in range(self.n):
            yield self.prompt_len - 1 + j, [self.n - 1 - j if self.reverse else j]


class Histogram(Task):
    """y_i = number of occurrences of x_i in the input; x_i uniform on 1..alphabet; SEP = 0."""

    def __init__(self, n=16, alphabet=12):
        _check_int("n", n, 2, 64)
        _check_int("alphabet", alphabet, 2)
        self.alphabet = alphabet
        super().__init__("histogram", n, n + 1, n, max(alphabet, n) + 1, _lower_pairs(range(n)))

    def _sample(self, batch, g, device):
        x = self._randint(1, self.alphabet + 1, (batch, self.n), g, device)
        counts = (x.unsqueeze(2) == x.unsqueeze(1)).sum(-1)
        sep = torch.zeros((batch, 1), dtype=torch.long, device=device)
        return torch.cat([x, sep, counts], dim=1)

    omega_layer = 0  # Ω is layer 1's pattern (each output position reads its own input); layer 2 counts

    def _omega_rows(self):
        for j in range(self.n):
            yield self.prompt_len - 1 + j, [j]


class Permutation(Task):
    """[x (values lo..hi), 0, π+1, 0, y] with y_j = x_{π(j)}, for the paper's 2-layer model.

    The paper's two-hop solution: in layer 1 the query predicting y_j reads its pointer token π(j)+1
    (``omega_pointer``, the paper's ``att_progress_measure1``); in layer 2 it reads the source x_{π(j)}
    (``omega``, ``att_progress_measure2``, the ``apm`` scalar). The "alternative" strategy would let the pointer
    tokens read their sources in layer 1 (``apm_alt_layer1``) and the output queries their pointer tokens in
    layer 2 (``apm_alt_layer2``). With one layer, "layer 1" and "layer 2" are the same map.
    """

    def __init__(self, n=16, low=17, high=32):
        _check_int("n", n, 2, 64)
        _check_int("low", low, n + 1)
        _check_int("high", high, low)
        self.low, self.high = low, high
        super().__init__("permutation", n, 2 * n + 2, n, max(high, n) + 1, _lower_pairs(range(n)))

    def _sample(self, batch, g, device):
        x = self._randint(self.low, self.high + 1, (batch, self.n), g, device)
        perm = torch.argsort(torch.rand(batch, self.n, generator=g, device=device), dim=1)
        zero = torch.zeros((batch, 1), dtype=torch.long, device=device)
        return torch.cat([x, zero, perm + 1, zero, torch.gather(x, 1, perm)], dim=1)

    omega_is_fixed = False
    extra_scalars = ("apm_layer1", "apm_alt_layer1", "apm_alt_layer2")

    @property
    def pointer_rows(self) -> slice:
        """Positions of the pointer tokens π(1)+1 .. π(n)+1."""
        return slice(self.n + 1, 2 * self.n + 1)

    def _mask(self, seqs, first_row, keys):
        B, T = seqs.shape[0], self.block_size
        mask = torch.zeros(B, T, T, dtype=torch.bool, device=seqs.device)
        rows = torch.arange(first_row, first_row + self.n, device=seqs.device).expand(B, -1)
        mask[torch.arange(B, device=seqs.device)[:, None], rows, keys] = True
        return mask

    def _sources(self, seqs):
        return seqs[:, self.pointer_rows] - 1  # π(j), 0-based: the position of x_{π(j)}

    def omega(self, seqs):
        """Layer 2: the query predicting y_j reads the source x_{π(j)}."""
        return self._mask(seqs, self.prompt_len - 1, self._sources(seqs))

    def omega_pointer(self, seqs):
        """Layer 1: the query predicting y_j reads its pointer token π(j)+1."""
        return self._mask(seqs, self.prompt_len - 1, torch.arange(self.n + 1, 2 * self.n + 1, device=seqs.device))

    def omega_alt_layer1(self, seqs):
        """The alternative strategy's layer 1: each pointer token reads its source x_{π(j)}."""
        return self._mask(seqs, self.n + 1, self._sources(seqs))

    def extra_metrics(self, inside, seqs, greedy):
        first, last = inside["attn"][0], inside["attn"][-1]
        return {"apm_layer1": M.attention_progress(first, seqs, self, self.omega_pointer(seqs)),
                "apm_alt_layer1": M.attention_progress(first, seqs, self, self.omega_alt_layer1(seqs),
                                                       self.pointer_rows),
                "apm_alt_layer2": M.attention_progress(last, seqs, self, self.omega_pointer(seqs))}


class Addition(Task):
    """a + b for n-digit numbers: ``a + b = s`` with digits 0-9, '+' = 10, '=' = 11; s reversed."""

    def __init__(self, n=4, reverse=True):
        _check_int("n", n, 1, 9)
        self.reverse = reverse
        super().__init__("addition", n, 2 * n + 2, n + 1, 12, _lower_pairs(range(n)))

    @property
    def partial_positions(self):
        """The final carry (the leading digit of the sum): the last output when reversed, else the first."""
        return (self.n + 1,) if self.reverse else (1,)

    def _digits(self, v, width):
        powers = 10 ** torch.arange(width - 1, -1, -1, device=v.device)
        return (v[:, None] // powers) % 10

    def _sample(self, batch, g, device):
        a = self._randint(1, 10 ** self.n, (batch,), g, device)
        b = self._randint(1, 10 ** self.n, (batch,), g, device)
        s = self._digits(a + b, self.n + 1)
        if self.reverse:
            s = s.flip(1)
        plus = torch.full((batch, 1), 10, dtype=torch.long, device=device)
        eq = torch.full((batch, 1), 11, dtype=torch.long, device=device)
        return torch.cat([self._digits(a, self.n), plus, self._digits(b, self.n), eq, s], dim=1)

    def _omega_rows(self):
        n, o = self.n, self.prompt_len - 1
        by_power = [[n - 1, 2 * n]]  # the digit of 10^m reads a_m, b_m and the carry from a_{m-1}, b_{m-1}
        by_power += [[n - m - 1, n - m, 2 * n - m, 2 * n - m + 1] for m in range(1, n)]
        by_power += [[0, n + 1]]     # the final carry
        for m, keys in enumerate(by_power):  # reversed: units first; otherwise the carry digit first
            yield o + (m if self.reverse else n - m), keys


class ConcatMWS(Task):
    """Concatenated MWS ('123_disjoint_454'): 4 copies (k=1), 5 pair sums (k=2), 4 triple sums (k=3).

    Collapse, as in the paper's ``train_mws_concat.py``: ``cosine_1..3`` average the lower-triangle pairs
    (a, b), b < a, whose column b is the position predicting an output of segment 1, 2 or 3 (the paper's
    Σ logit_cs[:, :4] / 42, Σ logit_cs[:, 4:9] / 30, Σ logit_cs[:, 9:] / 6); the row a runs over all later
    positions, in any segment. The three column segments split all 78 pairs, so ``cosine`` pools them.
    """

    SEGMENTS = ((1, range(0, 4)), (2, range(5, 10)), (3, range(12, 16)))  # (k, 0-based last input of each window)

    def __init__(self, p=17):
        _check_int("p", p, 16)
        self.p = p
        outputs = range(13)
        segments, start = {}, 0
        for i, (_, ends) in enumerate(self.SEGMENTS, 1):
            segments[f"cosine_{i}"] = _lower_pairs(outputs, range(start, start + len(ends)))
            start += len(ends)
        super().__init__("concat_mws", 16, 17, 13, p + 1, _lower_pairs(outputs), segments)

    @property
    def partial_positions(self):
        """The copied segment (k = 1): outputs 1..4."""
        return tuple(range(1, len(self.SEGMENTS[0][1]) + 1))

    def _windows(self):
        return [list(range(e - k + 1, e + 1)) for k, ends in self.SEGMENTS for e in ends]

    def _sample(self, batch, g, device):
        x = self._randint(1, 17, (batch, 16), g, device)
        y = torch.stack([x[:, w].sum(1) for w in self._windows()], dim=1) % self.p
        sep = torch.full((batch, 1), self.p, dtype=torch.long, device=device)
        return torch.cat([x, sep, y], dim=1)

    def _omega_rows(self):
        for j, w in enumerate(self._windows()):
            yield self.prompt_len - 1 + j, w


def reverse_copy(**kwargs) -> "Copy":
    """The reverse task: copy the input in reverse order."""
    return Copy(reverse=True, **kwargs)
