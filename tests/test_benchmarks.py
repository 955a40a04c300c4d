"""Benchmark records: write_benchmark / load_benchmarks round trip and the schema (no timing is asserted)."""
import json

import pytest

from plateau_lib.book import benchmarks as B

ROWS = [{"workload": "toy", "variant": "floor: forward+backward", "steps": 10, "ms_per_step": 2.0,
         "cpu_ms_per_step": 1.5},
        {"workload": "toy", "variant": "ours", "steps": 10, "ms_per_step": 3.0, "cpu_ms_per_step": 2.0,
         "llc_mean": 1.25}]


def test_round_trip_and_schema(tmp_path):
    ratios = B.time_ratios({"ours / floor": (ROWS[1], ROWS[0])})
    assert ratios == {"ours / floor (wall)": 1.5, "ours / floor (CPU time)": pytest.approx(4 / 3)}
    path = B.write_benchmark("toy-cpu", ROWS, ratios, 1, device="cpu", folder=tmp_path, threads=1, draws=5,
                             loadavg_start=[1.0, 1.0, 1.0])
    B.write_benchmark("other-cpu", ROWS[:1], {"x": 2}, 2, folder=tmp_path)
    assert path == tmp_path / "toy-cpu.json" and not list(tmp_path.glob(".*"))  # atomic: no temporaries left
    record = json.loads(path.read_text())
    assert set(record) == set(B.KEYS) | {"args"}
    assert record["benchmark"] == "toy-cpu" and record["device"] == "cpu" and record["threads"] == 1
    assert record["args"] == {"threads": 1, "draws": 5, "loadavg_start": [1.0, 1.0, 1.0]}
    assert record["rows"] == ROWS and record["date"].endswith("+00:00") and record["commit"]
    assert "cores" in record["machine"]

    runs, rows, ratio_frame = B.load_benchmarks(tmp_path)
    assert list(runs.index) == ["other-cpu", "toy-cpu"] and runs.loc["other-cpu", "threads"] == 2
    assert runs.loc["toy-cpu", "args"]["draws"] == 5 and runs.loc["toy-cpu", "file"] == "toy-cpu.json"
    assert len(rows) == 3 and {"benchmark", "workload", "variant", "ms_per_step", "llc_mean"} <= set(rows)
    assert list(ratio_frame.columns) == ["benchmark", "ratio", "value"] and len(ratio_frame) == 3
    shown = B.table(rows, "toy-cpu")
    assert shown.index.names == ["workload", "variant"] and "LLC mean" in shown


def test_rows_need_workload_and_variant(tmp_path):
    with pytest.raises(ValueError, match="workload"):
        B.write_benchmark("bad", [{"variant": "x"}], {}, 1, folder=tmp_path)


def test_empty_folder(tmp_path):
    runs, rows, ratios = B.load_benchmarks(tmp_path)
    assert runs.empty and rows.empty and ratios.empty and "ratio" in ratios


def test_step_row_medians_and_floor():
    floor = B.step_row("w", "floor", 10, [(1.0, 0.5), (3.0, 0.7), (2.0, 0.6)])
    assert floor["wall_s"] == 2.0 and floor["ms_per_step"] == 200.0 and floor["cpu_ms_per_step"] == 60.0
    row = B.step_row("w", "v", 5, (2.0, 0.6), floor)
    assert row["x_floor"] == 2.0 and row["x_floor_cpu"] == 2.0 and row["runs_wall_s"] == [2.0]


def test_merged_record_keeps_what_other_devices_measured(tmp_path, monkeypatch):
    B.write_benchmark("both", ROWS, {"cpu_x": 1.0}, 1, device="cpu", folder=tmp_path, merge=True, steps=10)
    monkeypatch.setattr(B, "device_name", lambda device="cpu": "NVIDIA H100")
    B.write_benchmark("both", ROWS[:1], {"gpu_x": 9.0}, 1, device="cuda", folder=tmp_path, merge=True, steps=99)
    B.write_benchmark("both", ROWS[:1], {"gpu_x": 8.0}, 1, device="cuda", folder=tmp_path, merge=True, steps=98)
    record = json.loads((tmp_path / "both.json").read_text())
    assert record["device"] == "cpu + NVIDIA H100"
    assert [r["device"] for r in record["rows"]] == ["cpu", "cpu", "NVIDIA H100"]  # the GPU's rows replaced once
    assert record["ratios"] == {"cpu_x": 1.0, "gpu_x": 8.0}
    assert record["args"] == {"cpu": {"steps": 10}, "NVIDIA H100": {"steps": 98}}
    runs, _, _ = B.load_benchmarks(tmp_path)
    text = B.heading(runs, "both").data
    assert "on cpu" in text and "on NVIDIA H100" in text and "`steps=98`" in text


def test_gpu_bench_runs_tiny_on_a_cpu(tmp_path):
    """The GPU benchmark at tiny sizes: its rows, and checks that graphs (eagerly here) equal eager training."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_bench.py"), "--tiny", "--repeats", "1", "--out",
                    str(tmp_path)], check=True, capture_output=True, cwd=root, timeout=600)
    record = json.loads((tmp_path / "gpu.json").read_text())
    variants = {(r["workload"].split(",")[0], r["variant"]) for r in record["rows"]}
    assert ("Hoogland L2H4", "train_many, cuda_graphs") in variants and ("Carroll paper model", "train_many, eager") in variants
    assert all({"ms_per_step", "x_floor", "tflops", "pct_bf16_peak"} <= set(r) for r in record["rows"])  # no timing asserted
    args = record["args"]["cpu"]
    assert set(args["peaks_tflops"]) == {"256^3 bfloat16", "256^3 float32"}
    checks = args["checks"]
    assert [v for k, v in checks.items() if "cuda_graphs vs eager" in k] == [0.0, 0.0]


def test_every_ratio_reads_as_a_time_ratio():
    """Known answers: a throughput ratio recorded as ``a_vs_b`` (floor ms ÷ ours ms = 0.642) is shown as ours ÷ floor
    = 1/0.642, the figure's 1.56×; a time ratio ``a / b`` is kept; extrapolated seconds are shown as hours."""
    import pandas as pd
    ratios = pd.DataFrame({"benchmark": ["llc", "llc", "icl", "icl"],
                           "ratio": ["gpt_vmap_vs_floor", "gpt_vmap_vs_floor (CPU time)", "train() / floor (wall)",
                                     "cpu_paper_training_500k_steps_extrapolated_s"],
                           "value": [0.642, 0.5, 1.0356, 7200.0]})
    table = B.ratio_table(ratios)
    assert B.as_time_ratio("gpt_vmap_vs_floor (wall)", 0.642) == pytest.approx(1 / 0.642)
    rows = {ratio: row for (_, ratio), row in table.iterrows()}
    assert rows["ours (vmapped) on the GPT ÷ floor"]["wall time"] == pytest.approx(1.5576, abs=1e-4)
    assert rows["ours (vmapped) on the GPT ÷ floor"]["CPU time"] == pytest.approx(2.0)
    assert rows["train() ÷ floor"]["wall time"] == pytest.approx(1.0356)
    assert rows["CPU paper training 500k steps extrapolated hours"]["value"] == pytest.approx(2.0)


def test_execution_status_reads_the_builds_timings(tmp_path):
    (tmp_path / "t.json").write_text(json.dumps({
        "b_page": {"date": "2026-11-28T04:10:09Z", "ok": False, "preset": "cpu", "wall_s": 61.3},
        "a_page": {"date": "2026-11-28T04:11:54Z", "ok": True, "preset": "cpu", "wall_s": 376.4}}))
    table = B.execution_status(tmp_path / "t.json")
    assert list(table.index) == ["a_page", "b_page"] and list(table["status"]) == ["ran", "failed"]
    assert table.loc["a_page", "run time (s)"] == 376 and table.loc["b_page", "finished (UTC)"] == "2026-11-28 04:10"
    assert B.execution_status(tmp_path / "none.json").empty


def test_devinterp2_ratios_read_in_words():
    """The devinterp 2.0.1 benchmark's ratios, as the page names them, beside 1.3.2's."""
    assert B.plain_name("gpt_vs_devinterp2 (CPU time)") == "ours (sequential) on the GPT ÷ devinterp v2 (CPU time)"
    assert B.plain_name("mlp_devinterp2_vs_floor") == "devinterp v2 on the MLP ÷ floor"
    assert B.plain_name("gpt_vs_devinterp (wall)") == "ours (sequential) on the GPT ÷ devinterp v1 (wall)"
    assert "devinterp 2.0.1" in B.title("llc_devinterp2")


def test_committed_devinterp2_record_is_shown_beside_devinterp1():
    """results/benchmarks/llc_devinterp2.json: both workloads' ratios reach the ratio table, each estimator's λ̂ the
    runs' table (no timing is asserted)."""
    runs, rows, ratios = B.load_benchmarks()
    assert {"llc", "llc_devinterp2"} <= set(runs.index) and runs.loc["llc_devinterp2", "args"]["devinterp"] == "2.0.1"
    shown = B.ratio_table(ratios).loc[B.title("llc_devinterp2")]
    for model in ("GPT", "MLP"):
        assert {f"ours (sequential) on the {model} ÷ devinterp v2", f"devinterp v2 on the {model} ÷ floor",
                f"ours (sequential) on the {model} ÷ floor"} <= set(shown.index)
        assert shown.loc[f"ours (sequential) on the {model} ÷ devinterp v2", ["wall time", "CPU time"]].notna().all()
    table = B.table(rows, "llc_devinterp2")
    estimates = table["LLC mean"].dropna()
    assert len(estimates) == 4 and any(v.startswith("devinterp 2.0.1") for _, v in estimates.index)


def test_devinterp2_runner_refuses_another_devinterp():
    """Run outside .venv-devinterp2 (here: .venv, with devinterp 1.3.2), the runner stops before any work and names
    the make target that builds its venv."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "llc_devinterp2_bench.py"), "--quick"],
                          capture_output=True, text=True, cwd=root, timeout=120)
    assert done.returncode != 0 and "make venv-devinterp2" in done.stderr and "found 1.3.2" in done.stderr


def _agreement_csv(path, ours, theirs, workload="mlp"):
    rows = [{"workload": workload, "estimator": "ours", "seed": s, "chains": 4, "draws": 30, "llc_mean": v,
             "llc_std": 0.1} for s, v in enumerate(ours)]
    rows += [{"workload": workload, "estimator": "devinterp 1.3.2", "seed": s, "chains": 4, "draws": 30,
              "llc_mean": v, "llc_std": 0.1} for s, v in enumerate(theirs)]
    import pandas as pd
    pd.DataFrame(rows, columns=B.AGREEMENT_COLUMNS).to_csv(path, index=False)


def test_estimator_agreement_by_hand(tmp_path):
    path = tmp_path / "agreement.csv"
    _agreement_csv(path, [1.0, 3.0], [2.0, 2.0, 2.0, 2.0])  # ours: mean 2, SE 1; theirs: mean 2, SE 0
    row = B.estimator_agreement(path).loc["MLP"]
    assert (row["seeds"], row["ours"], row["ours SE"], row["devinterp"]) == (2, 2.0, 1.0, 2.0)
    assert row["difference"] == 0.0 and row["difference SE"] == 1.0 and row["within 2 SE"] == "yes"
    _agreement_csv(path, [4.0, 4.2], [2.0, 2.2])  # a gap of 2 against an SE of 0.14: they disagree
    assert B.estimator_agreement(path).loc["MLP", "within 2 SE"] == "no"


def test_estimator_agreement_needs_two_seeds_and_tolerates_no_file(tmp_path):
    assert B.estimator_agreement(tmp_path / "absent.csv").empty
    path = tmp_path / "agreement.csv"
    _agreement_csv(path, [1.0], [2.0, 2.0])
    with pytest.raises(ValueError, match="'mlp' needs at least 2 seeds"):
        B.estimator_agreement(path)


def test_committed_agreement_rows_show_the_estimators_agree():
    table = B.estimator_agreement()
    assert {"MLP", "GPT"} <= set(table.index), "run benchmarks/llc_agreement.py and commit its CSV"
    assert (table["within 2 SE"] == "yes").all(), table
