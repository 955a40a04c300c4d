"""Every metric of the loss-plateau chapters, in one place (Gopalani et al., Sec. 3-4).

Conventions: ``seqs`` are full token sequences (B, seq_len); the model sees ``seqs[:, :-1]``.
Output-predicting positions are ``task.out_positions`` (for MWS with n = 16: positions 16..31).
All functions are plain tensor code with no host syncs; ``evaluate`` gathers them into one dict.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def loss_all(logits, seqs):
    """Cross-entropy over every next-token position (the paper's training loss)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), seqs[:, 1:].reshape(-1))


def loss_outputs(logits, seqs, task):
    """Cross-entropy over the output-predicting positions only."""
    pos = task.out_positions
    return F.cross_entropy(logits[:, pos].reshape(-1, logits.shape[-1]), seqs[:, pos.start + 1:].reshape(-1))


def position_accuracy(pred_outputs, true_outputs):
    """Accuracy per output position (G,), averaged over the batch."""
    return (pred_outputs == true_outputs).float().mean(0)


def teacher_forced_outputs(logits, task):
    """Argmax predictions at the output-predicting positions, given the true prefix (B, G)."""
    return logits[:, task.out_positions].argmax(-1)


def greedy_outputs(model, seqs, task, attn_bias=None, caches=None, logits=None):
    """The model's own greedy generation of the outputs from the prompt (B, G).

    Given the ``caches`` and ``logits`` of a teacher-forced pass over ``seqs[:, :-1]``, only what that pass
    cannot give is decoded. Up to and including a sequence's first wrong teacher-forced prediction, greedy
    generation sees the true prefix, so its tokens are the teacher-forced argmaxes; only sequences with an
    earlier error are decoded, from the first such error on, reusing the pass's key/value cache for the
    prefix (one host sync to pick them). A solved model decodes nothing.
    """
    P, G = task.prompt_len, task.gen_len
    if caches is None:
        return model.generate(seqs[:, :P], G, attn_bias=attn_bias)[:, P:]
    tf = teacher_forced_outputs(logits, task)
    wrong = tf[:, :-1] != seqs[:, P:-1]  # an error at output j changes the input of output j + 1
    redo = wrong.any(1)
    rows = redo.nonzero().squeeze(1)
    if rows.numel() == 0:
        return tf
    start = int(wrong[rows].float().argmax(1).min())  # the earliest first error among those rows
    sub = [{"k": c["k"][rows], "v": c["v"][rows]} for c in caches]
    bias = attn_bias if attn_bias is None or attn_bias.shape[0] == 1 else attn_bias[rows]
    gen = model.generate(seqs[rows, : P + start], G - start, attn_bias=bias, caches=sub, logits=logits[rows])
    out = tf.clone()
    out[rows, start:] = gen[:, P + start:]
    return out


def adjacent_repeats(outputs):
    """(..., n) tokens -> per sequence, the fraction of its n - 1 adjacent pairs that are equal."""
    return (outputs[..., :-1] == outputs[..., 1:]).float().mean(-1)


def repetition_frequency(outputs):
    """ρ: fraction of adjacent output pairs that are equal, averaged over sequences."""
    return adjacent_repeats(outputs).mean()


def alpha_1(outputs):
    """α_1: fraction of the outputs equal to the sequence's own first output (1/n Σ_i 1[y_i = y_1], the
    paper's agreement with "repeat the first token"), averaged over sequences."""
    return (outputs == outputs[:, :1]).float().mean()


def sequence_entropy(outputs, vocab_size):
    """Mean entropy (nats) of each sequence's histogram of output tokens (0 log 0 = 0)."""
    counts = F.one_hot(outputs, vocab_size).sum(1).float()
    probs = counts / counts.sum(1, keepdim=True)
    return -(probs * torch.log(probs.clamp_min(1e-30))).sum(1).mean()


def cosine_matrix(hidden, task):
    """Mean over the batch of cos(h_a, h_b) between output-predicting positions (G, G), full matrix."""
    h = F.normalize(hidden[:, task.out_positions], dim=-1)
    return torch.einsum("bad,bcd->ac", h, h) / h.shape[0]


def mean_cosine(cos, pairs):
    """The paper's collapse metric: mean of ``cos`` over (row, col) ``pairs`` (a task's, its exclusions applied)."""
    rows, cols = zip(*pairs)
    return cos[list(rows), list(cols)].mean()


def attention_progress(attn, seqs, task, omega=None, rows=None):
    """APM: per sequence, Σ_Ω |A| / Σ |A| over the query ``rows``; batch mean.

    attn: (B, H, T, T) attention scores of one layer (raw linear scores may be negative). omega: a (B, T, T)
    bool mask (default the task's Ω); rows: the query rows (default the output-predicting positions).
    """
    rows = task.out_positions if rows is None else rows
    a = attn.abs().sum(1)[:, rows]  # (B, rows, T), summed over heads
    omega = (task.omega(seqs) if omega is None else omega)[:, rows].to(a.dtype)
    return ((a * omega).sum((1, 2)) / a.sum((1, 2)).clamp_min(1e-30)).mean()


def bias_mask(task, c, batch=1, device=None, include_first=False):
    """Multiplicative attention mask: entries of Ω scaled by c, all others 1 (shape (1, 1, T, T)).

    As in the paper, the partial-solution row (the query predicting y_1) is left alone unless
    ``include_first``; the mask is applied after the causal zero-fill.
    """
    if not task.omega_is_fixed:
        raise ValueError(f"attention bias needs a task whose Ω is the same for every sequence; {task.name!r}'s "
                         "Ω depends on the sequence")
    seqs = torch.zeros(batch, task.seq_len, dtype=torch.long, device=device)
    omega = task.omega(seqs)[:1].clone()
    if not include_first:
        omega[:, task.out_positions.start] = False
    mask = torch.ones(omega.shape, device=device)
    mask[omega] = float(c)
    return mask.unsqueeze(1)


def data_repetition(task, generator, n=4096):
    """ρ of the ground-truth outputs (the data's own repetition frequency)."""
    seqs = task.sample(n, generator)
    return repetition_frequency(seqs[:, task.prompt_len:])


@torch.no_grad()
def evaluate(model, seqs, task, attn_bias=None, hidden_site="final_ln", hidden_layer=-1):
    """All chapter metrics on one batch; tensors stay on the device (no host syncs). Greedy generation
    reuses the teacher-forced pass's key/value cache for the prompt.

    Returns scalars (loss, loss_out, acc, acc_tf, acc_first, acc_rest, rho, rho_data, entropy,
    entropy_data, cosine, apm, then the task's cosine segments and ``extra_scalars``) and arrays (acc_pos (G,),
    acc_tf_pos (G,), cos (G, G), attn (T, T) batch-mean of the scores of ``task.omega_layer``, the layer the
    APM reads).
    ``hidden_layer`` picks the layer of a per-layer ``hidden_site`` for the cosines.
    """
    was_training = model.training
    model.eval()
    caches = [{} for _ in range(model.cfg.n_layer)]
    logits, inside = model(seqs[:, :-1], attn_bias=attn_bias, return_internals=True, caches=caches)
    true_out = seqs[:, task.prompt_len:]
    greedy = greedy_outputs(model, seqs, task, attn_bias, caches, logits)
    tf = teacher_forced_outputs(logits, task)
    hidden = inside[hidden_site] if hidden_site in ("embed", "final_ln") else inside[hidden_site][hidden_layer]
    attn = inside["attn"][task.omega_layer]
    acc_pos = position_accuracy(greedy, true_out)
    cos = cosine_matrix(hidden, task)
    model.train(was_training)
    return {
        "loss": loss_all(logits, seqs),
        "loss_out": loss_outputs(logits, seqs, task),
        "acc": acc_pos.mean(),
        "acc_tf": (tf == true_out).float().mean(),
        "acc_first": acc_pos[0],
        "acc_rest": acc_pos[1:].mean(),
        "rho": repetition_frequency(greedy),
        "rho_data": repetition_frequency(true_out),
        "entropy": sequence_entropy(greedy, task.vocab_size),
        "entropy_data": sequence_entropy(true_out, task.vocab_size),
        "cosine": mean_cosine(cos, task.cosine_pairs),
        "apm": attention_progress(attn, seqs, task),
        **{name: mean_cosine(cos, pairs) for name, pairs in task.cosine_segments.items()},
        **task.extra_metrics(inside, seqs, greedy),
        "acc_pos": acc_pos,
        "acc_tf_pos": position_accuracy(tf, true_out),
        "cos": cos,
        "attn": attn.mean((0, 1)),
    }


SCALARS = ("loss", "loss_out", "acc", "acc_tf", "acc_first", "acc_rest", "rho", "rho_data",
           "entropy", "entropy_data", "cosine", "apm")
ARRAYS = ("acc_pos", "acc_tf_pos", "cos", "attn")

# Loss anchors for MWS (n = 16, p = 17) under the all-position loss (derived in the reference notes).
MWS_LOSS_INIT = math.log(18)
MWS_LOSS_FLOOR = 15 * math.log(16) / 32
MWS_LOSS_PARTIAL = (15 * math.log(16) + 15 * math.log(17)) / 32
