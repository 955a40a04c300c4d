"""The other-tasks page: presets, the paper's extra metrics (α_1, per-layer APMs), milestones over a task's own
partial solution, and the summary table, on hand-built inputs."""
import numpy as np
import pandas as pd
import pytest
import torch

from plateau_lib.engine import stages
from plateau_lib.engine.tasks import make_task
from plateau_lib.plateau import metrics as M, other_tasks, presets
from plateau_lib.plateau.claims import claims_of

PAPER_STEPS = {"prefix sum": 1000, "repeat_1": 200, "repeat_2": 200, "repeat_4": 200, "addition": 10000,
               "permutation": 2000, "histogram": 5000, "copy": 100, "reverse": 100, "concat MWS": 5000}


def test_paper_preset_is_the_reference_configs():
    runs = presets.other_task_runs("paper")
    assert {k: c.steps for k, c in runs.items()} == PAPER_STEPS
    for label, cfg in runs.items():
        assert (cfg.d_model, cfg.n_head, cfg.lr, cfg.batch_size, cfg.optimizer, cfg.softmax) == (
            256, 1, 1e-4, 256, "adam", False), label
        assert cfg.n_layer == (2 if label in ("permutation", "histogram") else 1), label
        assert cfg.grad_clip == (1.0 if label == "histogram" else 0.0), label
    assert runs["addition"].task_kwargs == {"n": 4, "reverse": True}
    assert [runs[f"repeat_{k}"].task_kwargs["k"] for k in (1, 2, 4)] == [1, 2, 4]


def test_cpu_preset_keeps_layers_and_clip_per_task():
    cpu = presets.other_task_runs("cpu")
    assert {k: (c.n_layer, c.grad_clip) for k, c in cpu.items()} == {
        k: (c.n_layer, c.grad_clip) for k, c in presets.other_task_runs("paper").items()}


@pytest.mark.parametrize("kwargs,word", [({"preset": "gpu"}, "preset"), ({"preset": "cpu", "tasks": ["sort"]}, "tasks"),
                                         ({"preset": "cpu", "tasks": []}, "tasks")])
def test_bad_preset_or_task_names_raise(kwargs, word):
    with pytest.raises(ValueError, match=word):
        presets.other_task_runs(**kwargs)


def test_alpha_1_is_the_fraction_equal_to_the_own_first_output():
    outputs = torch.tensor([[3, 3, 3, 3], [1, 2, 1, 4]])  # 4/4 and 2/4 (y_1 counts itself, as in the paper)
    assert M.alpha_1(outputs).item() == pytest.approx(0.75)


def test_sequence_entropy_is_the_papers_up_to_its_epsilon():
    outputs = torch.tensor([[1, 1, 2, 3], [5, 5, 5, 5]])
    counts = torch.stack([torch.bincount(row, minlength=18) for row in outputs]).float()
    probs = counts / counts.sum(1, keepdim=True)
    paper = (probs * torch.log(1 / (probs + 1e-6))).sum(1).mean()  # compute_entropy, train_prefix.py
    assert M.sequence_entropy(outputs, 18).item() == pytest.approx(paper.item(), abs=1e-5)
    assert M.sequence_entropy(outputs, 18).item() == pytest.approx((1.5 * np.log(2)) / 2, abs=1e-6)


def test_permutation_apms_read_each_layer_with_its_own_mask():
    """Layer 1 on the pointer tokens, layer 2 on the sources: APM 1 and 1, the alternatives 0."""
    task = make_task("permutation", n=3, low=4, high=6)
    seqs = torch.tensor([[4, 5, 6, 0, 3, 1, 2, 0, 6, 4, 5]])  # π = (2, 0, 1)
    first, last = torch.zeros(1, 1, 10, 10), torch.zeros(1, 1, 10, 10)
    for i, src in enumerate((2, 0, 1)):
        first[0, 0, 7 + i, 4 + i] = -2.0   # |scores| count, whatever their sign
        last[0, 0, 7 + i, src] = 1.0
    first[0, 0, 4, 3] = 5.0                # a pointer row off the alternative's Ω: only the alt APM sees it
    out = task.extra_metrics({"attn": [first, last]}, seqs, None)
    assert out["apm_layer1"].item() == 1.0 and out["apm_alt_layer2"].item() == 0.0
    assert out["apm_alt_layer1"].item() == 0.0
    assert M.attention_progress(last, seqs, task).item() == 1.0
    first[0, 0, 4, 2] = 5.0                # pointer token π(1)+1 reads x_{π(1)} = position 2: half the mass
    assert task.extra_metrics({"attn": [first, last]}, seqs, None)["apm_alt_layer1"].item() == 0.5


def _positions(acc_by_step):
    return pd.DataFrame([{"step": s, "position": j + 1, "acc": a} for s, accs in acc_by_step.items()
                         for j, a in enumerate(accs)])


def _metrics(steps, positions):
    acc = positions.groupby("step")["acc"].mean()
    first = positions[positions["position"] == 1].set_index("step")["acc"]
    rest = positions[positions["position"] > 1].groupby("step")["acc"].mean()
    return pd.DataFrame({"step": steps, "acc": acc.values, "acc_first": first.values, "acc_rest": rest.values,
                         "cosine": [0.1, 0.9, 0.95, 0.2], "rho": [0.0, 0.5, 0.6, 0.1], "apm": [0.1, 0.2, 0.4, 0.9],
                         "entropy": [2.0, 0.5, 0.4, 1.5], "entropy_data": 1.5, "rho_data": 0.1})


def test_plateau_summary_follows_the_tasks_partial_solution():
    """Addition-like: the last output (the final carry) is learned at step 10, the others jump at 30."""
    pos = _positions({0: [0.1, 0.1, 0.1, 0.0], 10: [0.1, 0.1, 0.1, 0.95], 20: [0.2, 0.2, 0.2, 1.0],
                      30: [0.9, 0.9, 0.9, 1.0]})
    m = _metrics([0, 10, 20, 30], pos)
    s = stages.plateau_summary(m, positions=pos, partial=(4,))
    assert (s["partial_step"], s["jump_step"], s["plateau_span"]) == (10, 30, 20)
    assert s["peak_cosine"] == 0.95 and s["apm_before_jump"] == 0.4
    # with y_1 as the partial solution (MWS's rule) the plateau vanishes: y_1 comes with the jump
    assert stages.plateau_summary(m)["plateau_span"] == 0
    with pytest.raises(ValueError, match="positions"):
        stages.plateau_summary(m, partial=(4,))


def test_run_summary_reads_the_lead_and_the_repetition_extremes():
    pos = _positions({0: [0.1, 0.1, 0.1, 0.0], 10: [0.1, 0.1, 0.1, 0.95], 20: [0.2, 0.2, 0.2, 1.0],
                      30: [0.9, 0.9, 0.9, 1.0]})

    class Result:
        metrics, positions = _metrics([0, 10, 20, 30], pos), pos

    cfg = presets.other_task_runs("cpu", ["addition"])["addition"].replace(task_kwargs={"n": 3, "reverse": True})
    s = other_tasks.run_summary(Result, cfg)
    # at the partial step the carry is 0.9 of the way from its chance (0.5) to 1, the digits at their chance (0.1)
    assert s["partial_lead"] == pytest.approx(0.9, abs=0.03)
    assert s["min_entropy"] == 0.4 and s["peak_rho"] == 0.6   # before the jump at step 30
    table = other_tasks.summary_table({"addition": Result}, {"addition": cfg})
    assert table.loc["addition", "plateau span"] == "20"
    assert table.loc["addition", "partial solution"] == "y4"


def test_the_lead_over_chance_is_zero_for_a_model_at_chance_and_can_fail():
    """Addition's final carry is right half the time by guessing, its other digits a tenth: a model that has learned
    only the answers' frequencies leads by 0.4 in raw accuracy, and by 0 above chance, so the claim can fail."""
    import pandas as pd

    cfg = presets.other_task_runs("cpu", ["addition"])["addition"]
    chance = other_tasks.chance_accuracy(cfg)
    assert chance.index.tolist() == [1, 2, 3, 4, 5]
    assert chance[5] == pytest.approx(0.5, abs=0.02) and chance[1:4].between(0.09, 0.12).all()
    at_chance = pd.DataFrame({"step": 100, "position": chance.index, "acc": chance.values})
    assert other_tasks.lead_over_chance(at_chance, 100, (5,), chance) == pytest.approx(0.0)
    assert chance[5] - chance[1:4].mean() > 0.35  # the raw lead a guessing model would have had
    claim = {c.metric: c for c in claims_of("Figs. 6–22 (other tasks)")}[
        "addition: final carry − rest accuracy above chance when it is learned"]
    assert claim.judge(0.0, "paper") == "not reproduced"
    assert np.isnan(other_tasks.lead_over_chance(at_chance, None, (5,), chance))
    fixed = chance.copy()
    fixed[1] = 1.0  # an output that never varies says nothing: left out, not a division by zero
    assert other_tasks.lead_over_chance(at_chance.assign(acc=1.0), 100, (5,), fixed) == pytest.approx(0.0)


def test_the_longest_flat_stretch_is_measured_on_the_curve():
    """REPEAT1's plateau as the paper-config run shows it: accuracy rises, stays at 0.80 for 18 steps, then jumps;
    a steady rise has none, and a flat curve is flat for its whole length."""
    steps = [0, 10, 20, 30, 40, 42, 50, 60, 62, 70]
    acc = [0.05, 0.3, 0.6, 0.7, 0.787, 0.797, 0.80, 0.805, 0.83, 1.0]
    assert stages.longest_flat_stretch(steps, acc, 0.01) == 18  # 42 to 60; 40's 0.787 is 0.018 below 60's
    assert stages.longest_flat_stretch([0, 1, 2, 3], [0.1, 0.2, 0.3, 0.4], 0.01) == 0
    assert stages.longest_flat_stretch([0, 5, 9], [0.06, 0.065, 0.062], 0.01) == 9
    assert stages.longest_flat_stretch([4], [0.5], 0.01) == 0
