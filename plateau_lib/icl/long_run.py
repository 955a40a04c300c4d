"""Hoogland et al.'s own training run (``ICL_PAPER``: one-cycle to 3e-3, batch 256, 500k steps, the paper's 190
checkpoints; seed 1, the stages page's, or another of the paper's seeds) made on one CPU core across work days,
with λ̂ at about 40 of its checkpoints at a stated reduced SGLD budget (``icl.presets.ICL_LLC_REDUCED``: the
paper's ε, γ and nβ; fewer chains and draws).

A work session lasts at most three hours and nothing on its machine is sure to survive it, so between
sessions the run lives in the repository, in ``results/in_progress/icl_stages-<train key>/``:

- ``resume.pt``: weights, Adam moments, the data generator, the step and the evaluations so far (about 1.5 MB);
- ``llc.csv``: λ̂ at each selected checkpoint reached, one row kept as it is made;
- ``budget_check.csv``: the reduced budget against chains 4x longer at the paper's five points, at the rows whose
  chains disagree and next to every failed check (``check_steps``, ``budget_check``); where it fails, the longer
  chains' λ̂ is the one shown (``checked_rows``);
- ``budget_check_earlier.csv``: the same check for budgets tried before the current one, each row naming its budget;
- ``ckpt_<step>.pt``: the selected checkpoints reached whose λ̂ row or budget check is still to do (213 KB each;
  dropped from the state once made);
- ``structure.csv``: the structural markers (``development.structure_row``) of every selected checkpoint reached,
  kept so that the checkpoints themselves need not be;
- ``progress.json``: ``status`` ("in progress" until the 500k-th step, the last λ̂ row and the last check), ``training``
  ("in progress" or "finished"), the step reached, the CPU-hours so far, the date and the commit.

Once the training is finished its result (tables, no weights) is committed as ``results/train-<key>/`` and the
state keeps only the λ̂ rows and the checkpoints still waiting for theirs. Once the last λ̂ row and the last budget
check are made, the run is also written as an ordinary developmental run (``results/icl_stages-<key of the reduced budget>/``, which
``development.load(cfg, ICL_LLC_REDUCED)`` reads), and the state stays as the record of its budget checks.

``restore`` copies that state into the queue's working folder (``cache.QUEUE``), where ``train`` resumes it
and ``llc`` reads the checkpoints; ``save`` copies the state back. Training stops cleanly at a time budget
(SIGKILL loses at most the evaluations since the last resume state, which ``train`` saves every 5).

    OMP_NUM_THREADS=1 python -m plateau_lib stages-run train --budget-s 9000  # core 1
    OMP_NUM_THREADS=1 python -m plateau_lib stages-run llc --budget-s 9000    # core 2, as checkpoints appear
    OMP_NUM_THREADS=1 python -m plateau_lib stages-run llc --shard 0/2 &      # once trained: both cores (each
    OMP_NUM_THREADS=1 python -m plateau_lib stages-run llc --shard 1/2        # then takes the other's still unclaimed)
    python -m plateau_lib stages-run save      # before the session ends: then commit results/in_progress/
    python -m plateau_lib stages-run status
    OMP_NUM_THREADS=1 python -m plateau_lib stages-run train --seed 0 --budget-s 9000  # the paper's other seeds
"""
from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from plateau_lib.engine import cache, carried
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.train import Stopped
from plateau_lib.engine.utils import atomic_path, git_commit, write_json
from plateau_lib.icl import development
from plateau_lib.icl.development import PAPER_POINTS
from plateau_lib.llc import SGLDConfig, llc_over_checkpoints

LLC_KIND = "icl_long_llc"      # the λ̂ rows being made (``kept``), resumable
CHECK_KIND = "icl_llc_budget"  # the reduced budget against a 4x longer chain
CHECK_FACTOR = 4
CHECK_TOLERANCE = 0.05
RECHECK_SE = 2.0  # a λ̂ row whose chains disagree this much (standard error over chains) is checked as well


def state_folder(cfg: TrainConfig) -> Path:
    """Where the run's state waits between work sessions (committed)."""
    return carried.folder(f"{development.KIND}-{cache.cache_key(cfg)}")


def run_folder(cfg: TrainConfig) -> Path:
    """The training's working folder (resume state and checkpoints) in this session."""
    return cache.current().working(cfg)


def llc_steps(cfg: TrainConfig, n_log: int = 20, n_linear: int = 18) -> list[int]:
    """About 40 of the run's checkpoints for λ̂: the nearest to ``n_log`` log-spaced steps from 100, to ``n_linear``
    evenly spaced ones, and to the paper's points (1k, 40k, 126k, 320k, the end)."""
    ckpts = np.array(sorted(cfg.checkpoint_steps))
    targets = [*np.geomspace(100, cfg.steps, n_log), *np.linspace(cfg.steps / n_linear, cfg.steps, n_linear),
               *(p * cfg.steps / max(PAPER_POINTS) for p in PAPER_POINTS)]
    return sorted({int(ckpts[np.abs(np.log1p(ckpts) - np.log1p(t)).argmin()]) for t in targets})


def check_steps(cfg: TrainConfig, rows: pd.DataFrame | None = None, check: pd.DataFrame | None = None) -> list[int]:
    """The checkpoints where the reduced budget is checked against a longer chain: the nearest selected ones to
    the paper's five points (the end of LR1, the λ̂ peak, the ends of LR3 and LR4, the end of training), then
    every λ̂ row of ``rows`` whose standard error over chains exceeds ``RECHECK_SE`` (its chains disagree: where
    the check failed at 320k they did), the most uncertain first, then the λ̂ rows next to a failed check in
    ``check`` (so a stretch where the reduced budget fails is checked until a passing check bounds it on each
    side). Where the check fails, the page's λ̂ is the longer chains'."""
    chosen = llc_steps(cfg)
    points = [min(chosen, key=lambda s: abs(np.log1p(s) - np.log1p(p * cfg.steps / max(PAPER_POINTS))))
              for p in PAPER_POINTS]
    if rows is None or rows.empty:
        return points
    spread = rows[rows["llc_se"] > RECHECK_SE].sort_values("llc_se", ascending=False)
    steps = [*points, *(int(s) for s in spread["step"] if int(s) not in points)]
    if check is not None and not check.empty:
        order = sorted(int(s) for s in rows["step"])
        for s in sorted(check.loc[check["relative difference"] >= CHECK_TOLERANCE, "step"].astype(int)):
            i = order.index(s) if s in order else None
            for j in ([] if i is None else [i - 1, i + 1]):
                if 0 <= j < len(order) and order[j] not in steps:
                    steps.append(order[j])
    return steps


def kept(cfg: TrainConfig, llc: SGLDConfig, kind: str = LLC_KIND) -> cache.StoredTable:
    """The rows of ``kind`` (λ̂, or the budget check's) made so far for ``cfg`` at ``llc``, kept as they are made."""
    return cache.StoredTable(kind, development.llc_spec(cfg, llc))


# ---- the state between sessions --------------------------------------------------------------------------

def progress(cfg: TrainConfig) -> dict | None:
    """The committed state's ``progress.json`` (status, step, steps, CPU-hours, date, commit), or None."""
    path = state_folder(cfg) / "progress.json"
    return json.loads(path.read_text()) if path.exists() else None


def restore(cfg: TrainConfig, llc: SGLDConfig) -> int:
    """Copy the committed state into this session's working folders, unless they already hold as much;
    returns the step the training resumes from (0 if nothing is committed)."""
    src = state_folder(cfg)
    step = carried.restore(src, run_folder(cfg))
    same_budget = (progress(cfg) or {}).get("llc") == llc.key_dict()
    for kind, name in ((LLC_KIND, "llc.csv"), (CHECK_KIND, "budget_check.csv")):
        committed = pd.read_csv(src / name) if (src / name).exists() and same_budget else pd.DataFrame()
        if len(committed) > len(kept(cfg, llc, kind).rows()):
            kept(cfg, llc, kind).keep(committed)
    return step


def _train_seconds(cfg: TrainConfig, resume: Path) -> float:
    """Training time so far (one thread: CPU time), as the resume state or the finished result records it."""
    found = cache.current().run(cfg)
    if found is not None:
        return float(json.loads((found / "meta.json").read_text()).get("wall_time_s", 0.0))
    return float(torch.load(resume, weights_only=True)["elapsed"]) if resume.exists() else 0.0


def save(cfg: TrainConfig, llc: SGLDConfig) -> Path:
    """Copy this session's state into ``state_folder`` (atomically): the newer resume state, the λ̂ and check rows,
    and the selected checkpoints reached with no λ̂ row yet. CPU-hours count the training's time and every row's.
    Processes that share the run (``estimate``'s shards) save one at a time, each reading the rows kept so far, so
    the last to save counts every row (two saves at once let the one that read first write last)."""
    run = run_folder(cfg)
    run.parent.mkdir(parents=True, exist_ok=True)
    with open(run.parent / f"{run.name}.save.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _save(cfg, llc)


def _save(cfg: TrainConfig, llc: SGLDConfig) -> Path:
    """``save``'s work, under its lock."""
    dst, run = state_folder(cfg), run_folder(cfg)
    rows = kept(cfg, llc).rows()
    have = set() if rows.empty else set(rows["step"].astype(int))
    resume = carried.further(run / "resume.pt", dst / "resume.pt")
    step = max(carried.resume_step(resume), 0)
    store = cache.current()
    finished = store.run(cfg) is not None
    if finished:
        store.commit(cfg)  # the evaluations, for the page and the next session (no weights)
    check = budget_table(cfg, llc)
    to_check = set(check_steps(cfg, rows, check))
    checked = to_check & (set() if check.empty else set(check["step"].astype(int)))
    with atomic_path(dst) as tmp:
        tmp.mkdir()
        if resume.exists() and not finished:
            shutil.copy2(resume, tmp / "resume.pt")
        for s in llc_steps(cfg):
            found = _checkpoint(cfg, s)
            if (s not in have or s in to_check - checked) and found is not None:
                shutil.copy2(found, tmp / found.name)
        if not rows.empty:
            rows.sort_values("step").to_csv(tmp / "llc.csv", index=False)
        if not check.empty:
            check.to_csv(tmp / "budget_check.csv", index=False)
        earlier = earlier_budget_table(cfg, llc)
        if not earlier.empty:
            earlier.to_csv(tmp / "budget_check_earlier.csv", index=False)
        structure = structure_table(cfg)
        if not structure.empty:
            structure.to_csv(tmp / "structure.csv", index=False)
        cpu_s = _train_seconds(cfg, resume) + sum(float(t["elapsed_s"].sum()) for t in (rows, check) if not t.empty)
        done = finished and have >= set(llc_steps(cfg)) and checked == to_check
        write_json(tmp / "progress.json", {
            "status": "finished" if done else "in progress", "training": "finished" if finished else "in progress",
            "step": cfg.steps if finished else step,
            "steps": cfg.steps, "cpu_hours": round(cpu_s / 3600, 3),
            "llc_rows": len(have), "llc_checkpoints": len(llc_steps(cfg)),
            "checks": len(checked), "check_steps": len(to_check), "llc": llc.key_dict(),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": git_commit()})
    if done:
        write_development(cfg, llc, checked_rows(rows, check), structure)
    else:  # one written before a check was added (or failed) is not the finished run
        table = development.stored(cfg, llc)
        shutil.rmtree(table.store.committed / table.name, ignore_errors=True)
    return dst


def progress_line(state: dict) -> str:
    """What a partial state holds, in words: the step reached, or the λ̂ rows and budget checks made."""
    if state.get("training") != "finished":
        return f"step {state['step']:,} of {state['steps']:,}"
    line = f"training finished ({state['steps']:,} steps), λ̂ at {state['llc_rows']} of {state['llc_checkpoints']} checkpoints"
    if state["llc_rows"] >= state["llc_checkpoints"] and "check_steps" in state:
        line += f", budget checks at {state['checks']} of {state['check_steps']}"
    return line


def relative_difference(reduced, longer):
    """How far the reduced budget's λ̂ is from the longer chains', as a fraction of the longer chains' (numbers or
    aligned Series): the budget check fails at ``CHECK_TOLERANCE`` or more."""
    return abs(reduced - longer) / abs(longer)


def checked_rows(rows: pd.DataFrame, check: pd.DataFrame) -> pd.DataFrame:
    """The λ̂ rows as the page shows them: where the budget check failed, the longer chains' λ̂ and standard error
    replace the reduced budget's (the reduced one had not converged there); column ``budget`` says which."""
    out = rows.assign(budget="reduced")
    if check.empty or out.empty:
        return out
    failed = check[check["relative difference"] >= CHECK_TOLERANCE].set_index("step")
    replaced = out["step"].isin(failed.index)
    steps = out.loc[replaced, "step"]
    out.loc[replaced, "llc_mean"] = steps.map(failed["longer"]).to_numpy()
    out.loc[replaced, "llc_se"] = steps.map(failed["longer_se"]).to_numpy() if "longer_se" in failed else np.nan
    out.loc[replaced, "llc_std"] = np.nan
    out.loc[replaced, "budget"] = f"{CHECK_FACTOR}x longer chains"
    return out


def structure_table(cfg: TrainConfig) -> pd.DataFrame:
    """``development.structure_row`` of every selected checkpoint on this machine, and the committed state's rows
    for those whose checkpoint is gone; empty before the first."""
    path = state_folder(cfg) / "structure.csv"
    committed = pd.read_csv(path) if path.exists() else pd.DataFrame({"step": []})
    here = [s for s in llc_steps(cfg) if _checkpoint(cfg, s) is not None]
    fresh = pd.DataFrame([development.structure_row(s, torch.load(_checkpoint(cfg, s), weights_only=True))
                          for s in here])
    table = pd.concat([committed[~committed["step"].isin(here)], fresh], ignore_index=True)
    return table.sort_values("step").reset_index(drop=True) if len(table) else pd.DataFrame()


def write_development(cfg: TrainConfig, llc: SGLDConfig, rows: pd.DataFrame, structure: pd.DataFrame) -> Path:
    """The finished run as a developmental run in ``results/`` (``development.load(cfg, llc)`` reads it): λ̂ at
    the selected checkpoints, their structure, and meta with the CPU-hours of training and of λ̂ (its budget
    checks included)."""
    check = budget_table(cfg, llc)
    development.save(cfg, llc, rows, structure, device="cpu", made_by="plateau_lib.icl.long_run",
                     llc_checkpoints=sorted(int(s) for s in rows["step"]),
                     train_wall_s=round(_train_seconds(cfg, run_folder(cfg) / "resume.pt"), 1),
                     llc_wall_s=round(float(rows["elapsed_s"].sum())
                                      + (float(check["elapsed_s"].sum()) if not check.empty else 0.0), 1))
    return development.stored(cfg, llc).commit()


def finished_run(cfg: TrainConfig, llc: SGLDConfig):
    """The finished run as a ``development.Development`` (λ̂ at the selected checkpoints at budget ``llc``), or None
    while it is in progress."""
    if (progress(cfg) or {}).get("status") != "finished":
        return None
    return development.load(cfg, llc)


def _finished_ckpt(cfg: TrainConfig, name: str) -> Path:
    """Where the finished training keeps a checkpoint in this session (the committed result has no weights)."""
    return cache.current().local_run(cfg) / name


def evaluations(cfg: TrainConfig) -> pd.DataFrame:
    """The evaluations made so far (the finished training's result, else the committed state's or this
    session's newer ones) as the task's tidy metrics table; empty before the first."""
    found = cache.current().result(cfg)
    if found is not None:
        return found.metrics
    paths = [p for p in (run_folder(cfg) / "resume.pt", state_folder(cfg) / "resume.pt") if p.exists()]
    if not paths:
        return pd.DataFrame()
    state = torch.load(carried.further(*paths), weights_only=True)
    metrics, _, _ = cfg.make_task().tables(state["evals"], cfg.seed)
    return metrics


def _newer_rows(cfg: TrainConfig, llc: SGLDConfig, kind: str, name: str) -> pd.DataFrame:
    """The rows of ``kind`` made so far, by step: this session's, else the committed state's ``name``."""
    rows = kept(cfg, llc, kind).rows()
    path = state_folder(cfg) / name
    committed = pd.read_csv(path) if path.exists() else pd.DataFrame()
    newer = rows if len(rows) >= len(committed) else committed
    return newer.sort_values("step").reset_index(drop=True) if len(newer) else pd.DataFrame()


def llc_table(cfg: TrainConfig, llc: SGLDConfig) -> pd.DataFrame:
    """λ̂ rows made so far."""
    return _newer_rows(cfg, llc, LLC_KIND, "llc.csv")


def shown_table(cfg: TrainConfig, llc: SGLDConfig) -> pd.DataFrame:
    """λ̂ rows made so far as the page shows them (``checked_rows``: the longer chains' where the check failed)."""
    return checked_rows(llc_table(cfg, llc), budget_table(cfg, llc))


def budget_curves(cfg: TrainConfig, llc: SGLDConfig) -> dict:
    """The λ̂ curve on each SGLD budget: as the page shows it (the longer chains' where the budget check failed)
    and at the reduced budget everywhere (the stages are found on each: ``stages_page.boundaries_by_budget``)."""
    return {"as shown (4x longer chains where the check failed)": shown_table(cfg, llc),
            "reduced budget at every checkpoint": llc_table(cfg, llc)}


def budget_table(cfg: TrainConfig, llc: SGLDConfig) -> pd.DataFrame:
    """The reduced budget's check rows made so far (none from a committed state made at another budget)."""
    if (progress(cfg) or {}).get("llc", llc.key_dict()) != llc.key_dict():
        rows = kept(cfg, llc, CHECK_KIND).rows()
        return rows.sort_values("step").reset_index(drop=True) if len(rows) else pd.DataFrame()
    return _newer_rows(cfg, llc, CHECK_KIND, "budget_check.csv")


def budget_label(llc: SGLDConfig) -> str:
    return f"{llc.num_chains} chains x {llc.num_draws} draws, {llc.num_burnin_steps or 'no'} burn-in steps"


def earlier_budget_table(cfg: TrainConfig, llc: SGLDConfig) -> pd.DataFrame:
    """The check rows of budgets tried before ``llc`` (the committed state's ``budget_check_earlier.csv``, plus
    its ``budget_check.csv`` when that state was made at another budget), each row with its ``budget``."""
    folder, state = state_folder(cfg), progress(cfg) or {}
    tables = [pd.read_csv(folder / "budget_check_earlier.csv")] if (folder / "budget_check_earlier.csv").exists() else []
    if state.get("llc", llc.key_dict()) != llc.key_dict() and (folder / "budget_check.csv").exists():
        tables.append(pd.read_csv(folder / "budget_check.csv").assign(budget=budget_label(SGLDConfig(**state["llc"]))))
    return pd.concat(tables, ignore_index=True).drop_duplicates(["budget", "step"]) if tables else pd.DataFrame()


# ---- the work -------------------------------------------------------------------------------------------

def train(cfg: TrainConfig, llc: SGLDConfig, budget_s: float, progress_bar: bool = True) -> int:
    """Restore, train until ``budget_s`` seconds have passed (or the end), save; returns the step reached."""
    restore(cfg, llc)
    t0 = time.time()
    try:
        cache.current().train_many([cfg], progress=progress_bar, deadline=t0 + budget_s)
    except Stopped as stop:
        print(stop, flush=True)
    folder = save(cfg, llc)
    print(f"saved {folder}: {progress(cfg)}", flush=True)
    return progress(cfg)["step"]


def _checkpoint(cfg: TrainConfig, step: int) -> Path | None:
    name = f"ckpt_{step:06d}.pt"
    return next((p for p in (run_folder(cfg) / name, state_folder(cfg) / name, _finished_ckpt(cfg, name))
                 if p.exists()), None)


def claim(cfg: TrainConfig, llc: SGLDConfig, step: int, kind: str = LLC_KIND) -> bool:
    """Claim ``step``'s row of table ``kind`` (λ̂ rows or the budget check's) for this process: a file beside the
    rows naming its pid, made only if none exists. A claim of a process no longer running is taken over (a killed
    job's step is not lost)."""
    folder = kept(cfg, llc, kind).rows_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"claim_{step}"
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            pid = int(path.read_text())
        except (OSError, ValueError):  # being written by its maker: taken
            return False
        if pid == os.getpid():
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
            return claim(cfg, llc, step, kind)
        except PermissionError:  # running, as another user
            pass
        return False
    with os.fdopen(fd, "w") as out:
        out.write(str(os.getpid()))
    return True


def shard_order(steps: list[int], shard: tuple[int, int]) -> list[int]:
    """The order in which process k of n takes ``steps``: every n-th from the k-th first, then the others (which
    ``claim`` shares out), so the n processes end together."""
    if not (len(shard) == 2 and all(isinstance(v, int) for v in shard) and 0 <= shard[0] < shard[1]):
        raise ValueError(f"parameter 'shard' must be (k, n) with integers 0 <= k < n, got {shard!r}")
    k, n = shard
    return [*steps[k::n], *(s for s in steps if s not in steps[k::n])]


def next_step(cfg: TrainConfig, llc: SGLDConfig, order: list[int], have: set, n: int, kind: str) -> int | None:
    """The first step of ``order`` with no row of table ``kind`` yet whose checkpoint is here and which this process
    may take (``claim``ed, when ``n`` > 1 processes share the table); None when there is none."""
    return next((s for s in order if s not in have and _checkpoint(cfg, s) is not None
                 and (n == 1 or claim(cfg, llc, s, kind))), None)


def estimate(cfg: TrainConfig, llc: SGLDConfig, budget_s: float, wait: bool = False, shard: tuple[int, int] = (0, 1)
             ) -> pd.DataFrame:
    """λ̂ at every selected checkpoint that exists and has no row yet, each row kept at once; stops at the
    budget (and with ``wait`` waits for the training's next checkpoint until then). Saves the state. Refused
    (ValueError) while the budget check has failed somewhere: rows at a budget too small would be wasted.
    ``shard`` (k, n): this process takes every n-th selected checkpoint from the k-th first, then any other step no
    process has claimed (``claim``), so n processes (one a core) fill the same table side by side and end together."""
    chosen = llc_steps(cfg)
    order, n = shard_order(chosen, shard), shard[1]
    restore(cfg, llc)
    check = budget_table(cfg, llc)
    failed = [] if check.empty else check.loc[check["relative difference"] >= CHECK_TOLERANCE, "step"].tolist()
    if failed:
        raise ValueError(f"the reduced SGLD budget ({llc.num_chains} chains x {llc.num_draws} draws) failed its check at "
                         f"step(s) {failed}: it differs from chains {CHECK_FACTOR}x longer by {CHECK_TOLERANCE:.0%} or more "
                         "(budget_check.csv); raise icl.presets.ICL_LLC_REDUCED's num_draws before estimating λ̂ rows")
    deadline = time.time() + budget_s
    model, loss = cfg.make_task().build_model(cfg), cfg.make_task().loss
    data = development.llc_data(cfg, llc.n_data, llc.seed, "cpu")

    def rows(steps):
        return llc_over_checkpoints(model, loss, data, [(s, _checkpoint(cfg, s)) for s in steps], llc,
                                    progress=False, device="cpu")
    try:
        while time.time() < deadline:
            done = llc_table(cfg, llc)
            have = set() if done.empty else set(done["step"].astype(int))
            step = next_step(cfg, llc, order, have, n, LLC_KIND)
            if step is not None:
                kept(cfg, llc).build([*have, step], rows, progress=False, shared=n > 1, deadline=deadline)
                print(f"λ̂ at step {step} kept", flush=True)
            elif wait and not set(chosen) <= have:
                time.sleep(60)
            else:
                break
    except Stopped as stop:
        print(stop, flush=True)
    save(cfg, llc)
    return llc_table(cfg, llc)


def budget_check(cfg: TrainConfig, llc: SGLDConfig, factor: int = CHECK_FACTOR, shard: tuple[int, int] = (0, 1)
                 ) -> pd.DataFrame:
    """At ``check_steps``: λ̂ from chains ``factor`` times longer than the reduced budget's, and the same chains'
    estimate after the reduced budget's draws (their first ``num_draws``: the reduced run itself, since the
    chains are the same until then). A row per checkpoint, kept as it is made, with the relative difference.
    ``shard`` as in ``estimate``: n processes share the steps by claims."""
    restore(cfg, llc)
    n = shard[1]
    long = llc.replace(num_draws=llc.num_draws * factor)
    model, loss = cfg.make_task().build_model(cfg), cfg.make_task().loss
    data = development.llc_data(cfg, llc.n_data, llc.seed, "cpu")

    def rows(steps):
        out = []
        for s in steps:
            _, results = llc_over_checkpoints(model, loss, data, [(s, _checkpoint(cfg, s))], long, progress=False,
                                              device="cpu", return_results=True)
            res = results[s]
            ok = ~res.diverged
            short = float(np.mean(res.llc_running[ok, llc.num_draws - 1]))
            half = float(np.mean(res.llc_running[ok, long.num_draws // 2 - 1]))
            out.append({"step": s, "reduced": short, "longer": res.llc_mean,
                        "relative difference": relative_difference(short, res.llc_mean),
                        "draws": llc.num_draws, "longer draws": long.num_draws, "chains": llc.num_chains,
                        "elapsed_s": res.elapsed_s, "longer_se": res.llc_se, "longer at half its draws": half})
        return pd.DataFrame(out)
    while True:
        done = budget_table(cfg, llc)
        have = set() if done.empty else set(done["step"].astype(int))
        order = shard_order(check_steps(cfg, llc_table(cfg, llc), done), shard)  # a failed check adds its neighbours
        step = next_step(cfg, llc, order, have, n, CHECK_KIND)
        if step is None:
            break
        kept(cfg, llc, CHECK_KIND).build([*have, step], rows, progress=False, shared=n > 1)
        print(f"budget check at step {step} kept", flush=True)
    save(cfg, llc)
    return budget_table(cfg, llc)
