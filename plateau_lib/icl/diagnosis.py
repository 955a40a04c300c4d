"""Runs for the differential diagnosis of the stages run (why λ̂ barely falls in LR3–LR4 at our seed 1): Hoogland et al.'s
configuration retrained with its weights kept at a dozen steps, at other model seeds and with bfloat16 matrix
operands (``TrainConfig.matmul_operands``), each kept compactly in the repository across work sessions.

A run's state waits in ``results/in_progress/icl_diagnosis-<name>/``: ``resume.pt`` while training (about 1.5 MB),
the kept checkpoints ``ckpt_<step>.pt`` (``KEPT_STEPS``, 213 KB each), ``metrics.csv`` (its evaluations at the
paper's 190 checkpoint steps), and ``progress.json`` (status "in progress" with the step reached, or
"finished"; device, seconds and commit). ``retrain`` resumes from that state and saves it again at its time
budget, so a run of several CPU-hours spans work sessions; a run trained on a lent GPU arrives in the same form.
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from plateau_lib.engine import cache, carried
from plateau_lib.engine.costs import parameters
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.train import Stopped, train_many
from plateau_lib.engine.utils import atomic_path, git_commit, resolve_device, write_json
from plateau_lib.icl import data, long_run
from plateau_lib.icl.development import llc_data, structure_row
from plateau_lib.icl.presets import ICL_LLC_PAPER, ICL_LLC_REDUCED, ICL_PAPER, ICL_PAPER_SEEDS
from plateau_lib.llc import SGLDConfig, calibration, llc_over_checkpoints, summarize

KIND = "icl_diagnosis"
TARGET_STEPS = (1_000, 5_000, 10_000, 20_000, 40_000, 80_000, 126_000, 200_000, 250_000, 320_000, 400_000, 500_000)


def kept_steps(cfg: TrainConfig = ICL_PAPER) -> tuple[int, ...]:
    """The checkpoint steps of ``cfg`` nearest to ``TARGET_STEPS`` (the paper's 1k, 40k, 126k, 320k and the end,
    and steps between them): the weights the diagnosis keeps."""
    ckpts = np.array(sorted(cfg.checkpoint_steps))
    return tuple(sorted({int(ckpts[np.abs(ckpts - t).argmin()]) for t in TARGET_STEPS if t <= cfg.steps}))


KEPT_STEPS = kept_steps()


def variant(seed: int = 1, matmul_operands: str = "float32", steps: int | None = None) -> TrainConfig:
    """Hoogland et al.'s run (``ICL_PAPER``) at another model seed or matmul precision. Seed 1 in float32 is the
    paper config itself (the committed stages run's key); its retrain keeps weights in its own run folder."""
    cfg = ICL_PAPER.replace(seed=seed, matmul_operands=matmul_operands)
    return cfg if steps is None else cfg.replace(steps=steps)


def data_stream(cfg: TrainConfig) -> str:
    """The device type whose generator draws the run's data: the same seed gives another stream on a GPU."""
    return resolve_device(cfg.device).type


def name(cfg: TrainConfig, stream: str | None = None) -> str:
    """The state folder's name: seed, precision and data stream (``data_stream``), then the config's key."""
    stream = data_stream(cfg) if stream is None else stream
    return f"{KIND}-seed{cfg.seed}-{cfg.matmul_operands}-{stream}-{cache.cache_key(cfg)}"


def state_folder(cfg: TrainConfig, stream: str | None = None) -> Path:
    return carried.folder(name(cfg, stream))


def run_folder(cfg: TrainConfig, stream: str | None = None) -> Path:
    """This machine's working folder (resume state and every checkpoint the run writes)."""
    return cache.current().local / f"{name(cfg, stream)}.partial"


def progress(cfg: TrainConfig, stream: str | None = None) -> dict | None:
    path = state_folder(cfg, stream) / "progress.json"
    return json.loads(path.read_text()) if path.exists() else None


def restore(cfg: TrainConfig, run_dir: Path, stream: str | None = None) -> int:
    """Copy the committed resume state into ``run_dir`` if it is further along (the kept checkpoints stay: the
    run writes its own); the step training resumes from."""
    return carried.restore(state_folder(cfg, stream), run_dir, files=None)


def save(cfg: TrainConfig, run_dir: Path, result=None, dst: Path | None = None) -> dict:
    """Copy the run's kept checkpoints, its resume state (or, once finished, its evaluations) and its progress
    into ``dst`` (default ``state_folder``); returns the progress record."""
    dst = state_folder(cfg) if dst is None else dst
    dst.mkdir(parents=True, exist_ok=True)
    for step in KEPT_STEPS:
        ckpt = run_dir / f"ckpt_{step:06d}.pt"
        if ckpt.exists() and not (dst / ckpt.name).exists():
            shutil.copy2(ckpt, dst / ckpt.name)
    earlier = dst / "progress.json"
    note = json.loads(earlier.read_text()).get("note") if earlier.exists() else None  # how earlier stretches ran
    record = {"config": cfg.key_dict(), "commit": git_commit(), "date": dt.date.today().isoformat(),
              "torch": torch.__version__, **({"note": note} if note else {})}
    if result is not None:
        result.metrics.to_csv(dst / "metrics.csv", index=False)
        (dst / "resume.pt").unlink(missing_ok=True)
        record.update(status="finished", step=cfg.steps, meta=result.meta)
    else:
        resume = run_dir / "resume.pt"
        if resume.exists() and carried.resume_step(resume) >= carried.resume_step(dst / "resume.pt"):
            shutil.copy2(resume, dst / "resume.pt")
        if not (dst / "resume.pt").exists():  # one after another on a CPU, a later run may not have started
            record.update(status="not started", step=0)
        else:
            state = torch.load(dst / "resume.pt", weights_only=True, map_location="cpu")
            record.update(status="in progress", step=int(state["step"]), seconds_by_device=state.get("by_device"),
                          data_stream_reseeded_at=state.get("reseeded_at"))
    write_json(dst / "progress.json", record)
    return record


def retrain(configs: list[TrainConfig], budget_s: float, progress_bar: bool = True, out: Path | None = None,
            cuda_graphs: bool = False, compile: bool = False, stream: str | None = None) -> list:
    """Train ``configs`` (stacked where the device stacks; ``cuda_graphs``, ``compile`` as ``train_many``'s) from
    their committed states for at most ``budget_s`` seconds, then save each one's state (into ``out/<name>``
    instead of the repository when given). ``stream`` (default: this device's) names the runs to continue: a run
    begun on a GPU ("cuda") goes on here with data drawn by this device from a new seed (``data_stream_reseeded_at``
    in its record), kept in its own folder."""
    dirs = [run_folder(c, stream) for c in configs]
    for c, d in zip(configs, dirs):
        restore(c, d, stream)
    finished = {}
    try:
        train_many(configs, run_dirs=dirs, progress=progress_bar, deadline=time.time() + budget_s,
                   on_result=lambda i, r: finished.__setitem__(i, r), cuda_graphs=cuda_graphs,
                   compile=compile)
    except Stopped as stop:
        print(stop, flush=True)
    return [save(c, d, finished.get(i), state_folder(c, stream) if out is None else Path(out) / name(c, stream))
            for i, (c, d) in enumerate(zip(configs, dirs))]


def load_checkpoint(cfg: TrainConfig, step: int, stream: str = "cpu") -> dict:
    """The kept weights of ``cfg`` (its data drawn on ``stream``) at ``step`` (a state dict)."""
    path = state_folder(cfg, stream) / f"ckpt_{step:06d}.pt"
    if not path.exists():
        raise FileNotFoundError(f"no kept checkpoint at step {step} for {name(cfg, stream)}; kept steps: {KEPT_STEPS}")
    return torch.load(path, weights_only=True, map_location="cpu")


def llc_table(cfg: TrainConfig, stream: str = "cpu") -> pd.DataFrame:
    """λ̂ rows made at the run's kept checkpoints (``llc_at``): step, λ̂ and its chains' spread, the budget."""
    path = state_folder(cfg, stream) / "llc.csv"
    return pd.read_csv(path) if path.exists() else pd.DataFrame()


# Hoogland et al.'s estimator as their code ran it (reference §5.1): 5,000 draws averaged from the first (no
# burn-in), from n = 2^20 sequences, at 2 chains instead of 10 (about 22 minutes a checkpoint on one CPU core).
# Its loss traces also give the stages page's window (200 steps of burn-in, then 800 draws) on the same chains.
LLC_AS_RUN = ICL_LLC_PAPER.replace(num_chains=2)
# The stages run's budget check: the reduced budget's chains 4x longer (icl.long_run.CHECK_FACTOR), where a rising
# chain's window reads λ̂ low; seed 1's 320k reads 154.0 so.
LLC_LONGER = ICL_LLC_REDUCED.replace(num_draws=long_run.CHECK_FACTOR * ICL_LLC_REDUCED.num_draws)
LATE_DRAWS = 1_000  # the draws after these steps are read apart: nearer equilibrium where the chains rise slowly


def budget_label(llc: SGLDConfig) -> str:
    """``"4 chains x 800 draws after 200"``: an SGLD budget as ``llc.csv`` records it."""
    return f"{llc.num_chains} chains x {llc.num_draws} draws after {llc.num_burnin_steps}"


def trace_path(cfg: TrainConfig, stream: str, step: int, llc: SGLDConfig) -> Path:
    """Where ``llc_at`` keeps the SGLD loss at every step of each chain (chains x steps, float32)."""
    tag = f"{llc.num_chains}x{llc.num_draws}+{llc.num_burnin_steps}"
    return state_folder(cfg, stream) / f"trace_{step:06d}_{tag}.npy"


def llc_at(runs: list[tuple[TrainConfig, str]], steps, llc: SGLDConfig = ICL_LLC_REDUCED,
           budget_s: float = float("inf"), device: str = "cpu"):
    """λ̂ at the kept checkpoints ``steps`` of each (config, data stream) run with an SGLD budget (default
    ``ICL_LLC_REDUCED``, the stages page's: the paper's ε, γ, nβ; 4 chains x 800 draws after 200), one row at a
    time, each kept in the run's ``llc.csv`` as it is made with its chains' loss traces (``trace_path``); a rerun
    skips the (step, budget) rows present; stops before a row past ``budget_s``. The chains run on ``device`` (a
    GPU for the authors' 10 chains); the SGLD data set is drawn on the CPU on any device, as the CPU rows' is."""
    bad = [s for s in steps if s not in KEPT_STEPS]
    if bad:
        raise ValueError(f"steps {bad} are not kept checkpoints; allowed: {KEPT_STEPS}")
    deadline = time.time() + budget_s
    budget = budget_label(llc)
    for step in steps:
        for cfg, stream in runs:
            done = llc_table(cfg, stream)
            made = set() if done.empty else set(zip(done["step"], done["budget"]))
            if (step, budget) in made or time.time() > deadline:
                continue
            model, loss = cfg.make_task().build_model(cfg), cfg.make_task().loss
            data = tuple(t.to(device) for t in llc_data(cfg, llc.n_data, llc.seed, "cpu"))
            row, results = llc_over_checkpoints(model, loss, data, [(step, load_checkpoint(cfg, step, stream))], llc,
                                                progress=False, device=device, return_results=True)
            row["budget"] = budget
            with atomic_path(trace_path(cfg, stream, step, llc)) as tmp:
                with open(tmp, "wb") as f:
                    np.save(f, results[step].loss_trace_all.astype(np.float32))
            # read again: another process (another step, another budget) may have added its row meanwhile
            table = pd.concat([llc_table(cfg, stream), row], ignore_index=True).sort_values(["step", "budget"])
            with atomic_path(state_folder(cfg, stream) / "llc.csv") as tmp:
                table.to_csv(tmp, index=False)
            print(f"{name(cfg, stream)}: λ̂ at {step} = {float(row['llc_mean'].iloc[0]):.1f} ({budget})", flush=True)


def window_llc(trace: np.ndarray, init_loss: float, nbeta: float, start: int, draws: int,
               num_params: int = 0) -> float:
    """λ̂ from chains' loss traces (chains x steps) over one window of steps, by the estimator's own rule
    (``llc.summarize``: nβ · (mean loss over steps ``start`` .. ``start + draws - 1`` − L(w*)), averaged over the
    chains that did not diverge; ``num_params`` sets its divergence bound). Window (0, 5000) is Hoogland et
    al.'s estimate; (200, 800) is the stages page's."""
    trace = np.asarray(trace, dtype=float)
    if trace.ndim != 2 or not 0 <= start or not 0 < draws or start + draws > trace.shape[1]:
        raise ValueError(f"the window {start}..{start + draws - 1} must lie inside the trace's {trace.shape[-1]} steps")
    hyper = {"nbeta": nbeta, "num_burnin_steps": start, "num_steps_bw_draws": 1, "num_draws": draws,
             "num_params": num_params}
    return summarize(trace[:, :start + draws], init_loss, hyper, range(len(trace)), 0.0, warn=False).llc_mean


def estimator_windows(cfg: TrainConfig, stream: str = "cpu", llc: SGLDConfig = LLC_AS_RUN) -> pd.DataFrame:
    """For each step with a ``llc`` row and its traces: λ̂ over the authors' window (every draw from the first),
    over the stages page's (``ICL_LLC_REDUCED``: 800 draws after 200 steps) and over the draws after the first
    1,000 steps (nearer the chains' equilibrium), all on the same chains."""
    table = llc_table(cfg, stream)
    rows = []
    if not table.empty:
        book = (ICL_LLC_REDUCED.num_burnin_steps, ICL_LLC_REDUCED.num_draws)
        num_params = parameters(cfg)
        for row in table[table["budget"] == budget_label(llc)].itertuples():
            path = trace_path(cfg, stream, int(row.step), llc)
            if not path.exists():
                continue
            trace = np.load(path)
            windows = {"authors' window": (0, llc.num_draws), "stages page's window": book,
                       "after 1,000 steps": (LATE_DRAWS, trace.shape[1] - LATE_DRAWS)}
            rows.append({"step": int(row.step)} | {
                name: window_llc(trace, row.init_loss, llc.nbeta, start, draws, num_params) if draws > 0
                else float("nan") for name, (start, draws) in windows.items()})
    return pd.DataFrame(rows, columns=["step", "authors' window", "stages page's window", "after 1,000 steps"])


def last_draws(cfg: TrainConfig, stream: str = "cpu", llc: SGLDConfig = ICL_LLC_REDUCED,
               draws: int = 200) -> pd.DataFrame:
    """For each ``llc`` row with its traces: λ̂ over the row's own window (after the burn-in) and over its last
    ``draws`` draws alone. A chain still rising reads higher over its last draws, so its window reads λ̂ low."""
    rows = []
    table = llc_table(cfg, stream)
    if "budget" in table:
        burn_in, total = llc.num_burnin_steps, llc.num_burnin_steps + llc.num_draws
        for row in table[table["budget"] == budget_label(llc)].itertuples():
            path = trace_path(cfg, stream, int(row.step), llc)
            if path.exists():
                trace = np.load(path)
                rows.append({"step": int(row.step),
                             "window": window_llc(trace, row.init_loss, llc.nbeta, burn_in, total - burn_in),
                             "last draws": window_llc(trace, row.init_loss, llc.nbeta, total - draws, draws)})
    return pd.DataFrame(rows, columns=["step", "window", "last draws"])


STREAMS = {"cpu": "CPU", "cuda": "GPU"}
EVAL_SEED = 20_000_003  # the common held-out sequences every run is scored on (``markers``)
MARKERS = ("loss", "delta_ridge", "loss_ood_inputs", "loss_ood_tasks", "pred_sq", "weight_norm")
# The authors' notebook built its OOD sets with noise of std 0.125 where training has variance 0.125 (reference
# §4.2): the markers recompute the g = 5 losses that way too, so the paper's 72.2 -> 84.8 compares like with like.
AUTHORS_NOISE_STD = 0.125
# Each layer norm's mean |weight| (Hoogland et al. App. D: the final LN collapses in LR3; in LR4 the collapse
# spreads to every LN but the second block's MLP one, most of all the LN before the first attention).
LAYER_NORMS = {"ln_f": "ln_f", "ln_attn_1": "blocks.0.ln_1", "ln_mlp_1": "blocks.0.ln_2",
               "ln_attn_2": "blocks.1.ln_1", "ln_mlp_2": "blocks.1.ln_2"}
COLUMNS = (*MARKERS, "loss_ood_inputs_authors", "loss_ood_tasks_authors", *LAYER_NORMS)


def layer_norm_weights(model) -> dict:
    """``LAYER_NORMS``' mean |weight| of ``model`` (keys as there), read off the stages run's structural markers
    (``development.structure_row``)."""
    row = structure_row(0, {k: v.detach() for k, v in model.state_dict().items()})
    return {key: row[f"ln {path}"] for key, path in LAYER_NORMS.items()}


def authors_ood_losses(model, task, n: int, seed: int = EVAL_SEED) -> dict:
    """The g = ``task.ood_scale`` losses as the authors' notebook computed them: ``n`` held-out sequences whose
    noise has std ``AUTHORS_NOISE_STD`` (not variance), inputs or tasks scaled as in ``data.ood_batch``."""
    batch = data.sample(n, task.K, task.D, AUTHORS_NOISE_STD ** 2, torch.Generator().manual_seed(seed))
    out = {}
    with torch.no_grad():
        for kind in ("inputs", "tasks"):
            xs, ys, _ = data.ood_batch(batch, task.ood_scale, kind)
            out[f"loss_ood_{kind}_authors"] = float((model(xs, ys) - ys).square().mean())
    return out


def runs_present(seeds=ICL_PAPER_SEEDS, operands=("float32", "bfloat16")) -> list[tuple[TrainConfig, str]]:
    """The (config, data stream) runs with a committed state, in seed order."""
    return [(variant(s, o), stream) for s in seeds for o in operands for stream in STREAMS
            if state_folder(variant(s, o), stream).exists()]


def label(cfg: TrainConfig, stream: str) -> str:
    return f"seed {cfg.seed}, {cfg.matmul_operands}, {STREAMS[stream]} data"


def _kept(cfg: TrainConfig, stream: str) -> list[int]:
    folder = state_folder(cfg, stream)
    return sorted(int(p.stem.split("_")[1]) for p in folder.glob("ckpt_*.pt"))


def markers(runs: list[tuple[TrainConfig, str]], n: int = 2**13) -> pd.DataFrame:
    """Hoogland et al.'s markers at every kept checkpoint of ``runs``, all scored on the same ``n`` held-out
    sequences (so seeds differ by their weights alone): evaluation loss, Δ to ridge, loss on inputs and on tasks
    scaled by g = 5 (also as the authors computed them: ``authors_ood_losses``), the mean-square prediction, the
    weight norm and each layer norm's mean |weight| (``LAYER_NORMS``). Each run's rows are kept in its state
    folder (``markers.csv``, per ``n``); only checkpoints new or missing a column are scored. Tidy: one row per
    run and step."""
    tables = []
    for cfg, stream in runs:
        path = state_folder(cfg, stream) / "markers.csv"
        kept = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=["step", "n"])
        kept = kept[kept["n"] == n].reindex(columns=["step", "n", *COLUMNS])
        kept = kept[kept[list(COLUMNS)].notna().all(axis=1)]
        todo = [s for s in _kept(cfg, stream) if s not in set(kept["step"])]
        if todo:
            task = cfg.make_task()
            batch = task.sample(n, torch.Generator().manual_seed(EVAL_SEED))
            model, rows = task.build_model(cfg), []
            for step in todo:
                model.load_state_dict(load_checkpoint(cfg, step, stream))
                out = task.evaluate(model, batch)
                rows.append({"step": step, "n": n, **{k: float(out[k]) for k in MARKERS},
                             **authors_ood_losses(model, task, n), **layer_norm_weights(model)})
            kept = pd.concat([kept, pd.DataFrame(rows)], ignore_index=True).sort_values("step")
            with atomic_path(path) as tmp:
                kept.to_csv(tmp, index=False)
        tables.append(kept.assign(run=label(cfg, stream), seed=cfg.seed, operands=cfg.matmul_operands,
                                  data=STREAMS[stream]))
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def llc_rows(runs: list[tuple[TrainConfig, str]]) -> pd.DataFrame:
    """Every λ̂ row made so far (``llc_at``), labelled by run."""
    tables = [llc_table(cfg, stream).assign(run=label(cfg, stream), seed=cfg.seed, operands=cfg.matmul_operands,
                                            data=STREAMS[stream]) for cfg, stream in runs]
    tables = [t for t in tables if "step" in t]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


STEP_40K = 40_292  # the kept checkpoint at the paper's 40k (end of LR2, the λ̂ peak)
END_STEP = ICL_PAPER.steps - 1  # the last checkpoint


def llc_by_seed(llc: pd.DataFrame, llc_setting: SGLDConfig = ICL_LLC_REDUCED, operands: str = "float32") -> dict:
    """``{seed: λ̂ by step}`` of ``llc`` (``llc_rows``) at one SGLD budget (``llc_setting``, default the stages
    page's reduced one) and one precision of the matrix products; a seed without such rows is absent."""
    if llc.empty:
        return {}
    rows = llc[(llc["budget"] == budget_label(llc_setting)) & (llc["operands"] == operands)]
    return {int(seed): t.set_index(t["step"].astype(int))["llc_mean"].sort_index() for seed, t in rows.groupby("seed")}


class SeedPoints(NamedTuple):
    """One model seed's λ̂ where the stages claims read it: at STEP_40K, at END_STEP, and the step of its largest
    λ̂ over the kept checkpoints."""
    at_40k: float
    at_end: float
    peak_step: int


def seed_llc_points(llc: pd.DataFrame) -> dict[int, SeedPoints]:
    """``{seed: SeedPoints}`` of the other model seeds of the paper's configuration (float32;
    ``llc``: ``llc_rows``; seed 1, the stages run, excluded), for the seeds that have both, read by the stages
    run's own rule (``long_run.checked_rows``): the reduced budget, replaced by chains 4x longer (``LLC_LONGER``)
    where those were run and differ from it by ``long_run.CHECK_TOLERANCE`` or more. These are the runs a claim
    about the configuration is judged on beside seed 1."""
    reduced, longer = llc_by_seed(llc), llc_by_seed(llc, LLC_LONGER)
    points = {}
    for seed, at in reduced.items():
        if seed == 1:
            continue
        checked = longer.get(seed, pd.Series(dtype=float)).reindex(at.index).dropna()
        check = pd.DataFrame({"step": checked.index, "longer": checked.to_numpy(),
                              "relative difference": long_run.relative_difference(at[checked.index], checked).to_numpy()})
        at = long_run.checked_rows(pd.DataFrame({"step": at.index, "llc_mean": at.to_numpy()}), check)
        at = at.set_index("step")["llc_mean"]
        if {STEP_40K, END_STEP} <= set(at.index):
            points[seed] = SeedPoints(float(at[STEP_40K]), float(at[END_STEP]), int(at.idxmax()))
    return points


def as_run_falls(llc: pd.DataFrame) -> dict[int, float]:
    """``{seed: λ̂ at END_STEP ÷ λ̂ at STEP_40K}`` by the authors' estimator (``LLC_AS_RUN``: every draw from the
    first, n = 2²⁰, as the paper's logged λ̂ were made) at every float32 seed with both rows (``llc``:
    ``llc_rows``; seed 1's are the CPU retrain's, whose weights are the stages run's)."""
    at = llc_by_seed(llc, LLC_AS_RUN)
    return {seed: float(a[END_STEP] / a[STEP_40K]) for seed, a in at.items() if {STEP_40K, END_STEP} <= set(a.index)}


def progress_table(runs: list[tuple[TrainConfig, str]]) -> pd.DataFrame:
    """Each run's state: the step reached, its status and seconds per device."""
    rows = []
    for cfg, stream in runs:
        record = progress(cfg, stream) or {}
        rows.append({"run": label(cfg, stream), "status": record.get("status", "not started"),
                     "step reached": record.get("step", 0),
                     "seconds": ", ".join(f"{v:,.0f} on {k}"
                                          for k, v in (record.get("seconds_by_device") or {}).items())})
    return pd.DataFrame(rows)


def _evals(cfg: TrainConfig, stream: str) -> pd.DataFrame:
    """The run's own evaluations so far (its finished metrics, or those its resume state holds)."""
    folder = state_folder(cfg, stream)
    if (folder / "metrics.csv").exists():
        return pd.read_csv(folder / "metrics.csv")
    if not (folder / "resume.pt").exists():
        return pd.DataFrame(columns=["step", "loss"])
    evals = torch.load(folder / "resume.pt", weights_only=True, map_location="cpu")["evals"]
    return pd.DataFrame([{"step": step, "loss": float(out["loss"]), "weight_norm": float(out["weight_norm"])}
                         for step, out in evals])


def _committed_metrics(cfg: TrainConfig) -> pd.DataFrame | None:
    """The committed stages run's evaluations (None when it is not committed)."""
    found = cache.current().result(cfg)
    return None if found is None else found.metrics


def retrain_check(cfg: TrainConfig = ICL_PAPER) -> dict:
    """The CPU retrain of the committed stages run against that run's evaluations: the steps compared and the
    largest difference in evaluation loss and weight norm (0: the same run, bit for bit)."""
    ours, committed = _evals(cfg, "cpu"), _committed_metrics(cfg)
    if ours.empty or committed is None:
        return {"steps compared": 0, "last step": None, "max |Δ loss|": None, "max |Δ weight norm|": None}
    both = ours.merge(committed, on="step", suffixes=("", " committed"))
    return {"steps compared": len(both), "last step": int(both["step"].max()),
            "max |Δ loss|": float((both["loss"] - both["loss committed"]).abs().max()),
            "max |Δ weight norm|": float((both["weight_norm"] - both["weight_norm committed"]).abs().max())}


def seed_spread(table: pd.DataFrame, step: int, column: str, data: str = "GPU") -> dict:
    """At ``step``, the float32 runs on one data stream (``data``): seed 1's value, the other seeds' range, and the
    seed-to-seed sd."""
    at = table[(table["step"] == step) & (table["operands"] == "float32") & (table["data"] == data)]
    others = at.loc[at["seed"] != 1, column]
    return {"seed 1": at.loc[at["seed"] == 1, column].mean(), "others low": others.min(), "others high": others.max(),
            "sd": at[column].std(), "seeds": sorted(at["seed"].unique().tolist())}


def precision_gap(table: pd.DataFrame, column: str, data: str = "GPU") -> dict:
    """The largest |bfloat16 - float32| over the runs' shared (seed, step) on one data stream (``data``), and the
    largest such gap as a share of the float32 seeds' spread (sd over seeds) at the same step (steps with one
    float32 seed have no spread and are left out of the share): a precision effect is one that stands out."""
    table = table[table["data"] == data]
    fp32 = table[table["operands"] == "float32"]
    both = table[table["operands"] == "bfloat16"].merge(fp32, on=["seed", "data", "step"], suffixes=("", " fp32"))
    if both.empty:
        return {"pairs": 0, "max gap": None, "max share of seed sd": None}
    gap = (both[column] - both[f"{column} fp32"]).abs()
    share = (gap / both["step"].map(fp32.groupby("step")[column].std())).dropna()
    return {"pairs": len(both), "max gap": float(gap.max()),
            "max share of seed sd": float(share.max()) if len(share) else None, "last step": int(both["step"].max())}


def committed_evals(step: int, cfg: TrainConfig = ICL_PAPER) -> dict:
    """The committed stages run's evaluation at ``step`` (its own held-out set): loss and Δ to ridge."""
    committed = _committed_metrics(cfg)
    if committed is None:
        return {"loss": float("nan"), "delta_ridge": float("nan")}
    row = committed.set_index("step").loc[step]
    return {"loss": float(row["loss"]), "delta_ridge": float(row["delta_ridge"])}


# The sampling guide's calibration on Hoogland et al.'s model at one checkpoint: seed 1 (its data drawn on a CPU) at the
# 40k marker, where λ̂ peaks. A grid of ε around the paper's (3e-4) and below it, to see whether MALA's acceptance
# (about 0.5 at 1e-4) rises toward the criteria's 0.8 as ε falls (``mala_ceilings``: it cannot, at this batch size),
# at the paper's nβ (200/3) and at m / ln m for its batch m = 1,024, the
# paper's γ (20/3); 2 chains x 1,000 draws each, with the MALA acceptance the criteria read, on the stages page's
# fixed 2^18 sequences. About 5 minutes a cell on one free core. The cells are numbered in the order they were
# computed (the three larger ε first), so ``epsilons`` is not sorted.
CALIBRATION_KIND = "icl_stages_calibration"
STAGES_CALIBRATION = {"seed": 1, "stream": "cpu", "step": 40_292, "epsilons": (1e-4, 3e-4, 1e-3, 3e-5, 1e-5),
                      "nbetas": (200 / 3, 1024 / float(np.log(1024))), "gammas": (20 / 3,)}
CALIBRATION_SGLD = ICL_LLC_REDUCED.replace(num_chains=2, num_draws=1_000, num_burnin_steps=0)


def calibration_cells() -> list[tuple]:
    """The calibration's (ε, nβ, γ) cells, in the order they are computed and numbered."""
    grid = STAGES_CALIBRATION
    return [(e, b, g) for e in grid["epsilons"] for b in grid["nbetas"] for g in grid["gammas"]]


def calibration_stored() -> cache.StoredTable:
    """The stored calibration (one row per cell: ``calibration_sweep``'s columns and the cell's number)."""
    grid = STAGES_CALIBRATION
    return cache.StoredTable(CALIBRATION_KIND, {"run": name(variant(grid["seed"]), grid["stream"]), "step": grid["step"],
                                                "grid": {k: list(grid[k]) for k in ("epsilons", "nbetas", "gammas")},
                                                "sgld": CALIBRATION_SGLD.key_dict(), "version": 1})


def calibration_point():
    """``(model, loss, data)`` of the calibration: seed 1's kept weights at its step, the task's loss and the stages
    page's fixed SGLD sequences."""
    grid = STAGES_CALIBRATION
    cfg = variant(grid["seed"])
    model = cfg.make_task().build_model(cfg)
    model.load_state_dict(load_checkpoint(cfg, grid["step"], grid["stream"]))
    return model, cfg.make_task().loss, llc_data(cfg, CALIBRATION_SGLD.n_data, CALIBRATION_SGLD.seed, "cpu")


def stages_calibration(compute: bool = False, deadline: float | None = None, progress: bool = True):
    """``(table, meta)`` of the calibration on Hoogland et al.'s model (stored; else, with ``compute``, computed and
    kept cell by cell so that an interrupted run resumes; else None)."""
    grid = STAGES_CALIBRATION
    return calibration.stored_sweep(calibration_stored(), calibration_cells(), calibration_point, CALIBRATION_SGLD,
                                    f"the sampling guide's calibration on Hoogland et al.'s model, seed {grid['seed']} "
                                    f"at step {grid['step']:,}", compute, deadline, progress)


# The MALA acceptance a minibatch estimate can reach at all on that checkpoint (``calibration.mala_ceiling``): its
# acceptance compares the potential on two different batches, and at batch 1,024 their losses differ enough to cap it.
MALA_CEILING_KIND, CEILING_BATCHES = "icl_stages_mala_ceiling", 64


def mala_ceilings_stored() -> cache.StoredTable:
    """The stored MALA ceilings of the calibration's checkpoint (one row per nβ of its grid)."""
    grid = STAGES_CALIBRATION
    return cache.StoredTable(MALA_CEILING_KIND, {"run": name(variant(grid["seed"]), grid["stream"]), "step": grid["step"],
                                                 "nbetas": list(grid["nbetas"]), "batches": CEILING_BATCHES,
                                                 "sgld": CALIBRATION_SGLD.key_dict(), "version": 1})


def mala_ceilings(compute: bool = False):
    """``(table, meta)``: per nβ of the calibration's grid, the highest MALA acceptance its minibatch noise allows at
    the checkpoint (``mala_ceiling``, from ``CEILING_BATCHES`` batch losses at w*) and the batch losses' standard
    deviation (stored; else, with ``compute``, computed and saved; else None)."""
    stored = mala_ceilings_stored()
    if (found := stored.load()) is not None or not compute:
        return None if found is None else (found[0]["ceilings"], found[1])
    start = time.time()
    model, loss, data = calibration_point()
    losses = calibration.batch_losses(model, loss, data, CALIBRATION_SGLD.batch_size, CEILING_BATCHES)
    table = pd.DataFrame({"nbeta": list(STAGES_CALIBRATION["nbetas"]), "batch_loss_std": float(losses.std()),
                          "mala_ceiling": [calibration.mala_ceiling(losses, nb) for nb in STAGES_CALIBRATION["nbetas"]]})
    stored.save({"ceilings": table}, {"what": "the MALA acceptance the calibration's minibatch noise allows",
                                      "device": "cpu", "wall_s": round(time.time() - start, 1)})
    return table, stored.load()[1]
