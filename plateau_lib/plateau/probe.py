"""Fig. 20's probe of the attention output and Figs. 41-42's collapse at every location, over MWS training.

A run keeps checkpoints (``TrainConfig.checkpoint_steps``); each checkpoint is measured on one fixed, seeded
batch of held-out sequences (reference ``tf_loss_plateau.md`` §4.9-4.10):

- the probe: an MLP classifier (one hidden ReLU layer, Adam; sklearn's ``MLPClassifier``) from the attention
  output (after ``c_proj``, before the residual add) at the output-predicting positions to the token each must
  predict. Train and test sets are disjoint sets of whole sequences (the paper's code split token rows, so its
  probe trained on the first 64 sequences' tokens and tested on the rest of those sequences and others);
- collapse at five locations: each location's cosine matrix over the output-predicting positions and the
  paper's mean of it (the task's ``cosine_pairs``), and the per-position mean L2 norm at the first three.

Rows are kept after every checkpoint, so an interrupted measurement resumes; the finished tables are stored
as a stored table (``cache.StoredTable``) and committed with ``commit``.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
import torch

from plateau_lib.book import pages
from plateau_lib.book.verdicts import BySeed
from plateau_lib.engine import cache, stages
from plateau_lib.engine.utils import resolve_device
from plateau_lib.plateau import metrics, milestones, presets

# hidden state -> what the page calls it; a per-layer state is read at the last layer (MWS has one)
LOCATIONS = {"embed": "embedding (token + position)", "attn_out": "attention output",
             "post_attn": "residual after attention", "post_mlp": "residual after MLP", "final_ln": "after the final layer norm"}
NORM_LOCATIONS = ("embed", "attn_out", "post_attn")  # the paper logs norms at these three
PROBE_LOCATION = "attn_out"
KIND = "probe"
VERSION = 1


def location_states(model, seqs) -> dict:
    """``{location: (B, T, d) hidden state}`` of ``model`` on ``seqs`` (full sequences; the model sees ``[:, :-1]``)."""
    _, inside = model(seqs[:, :-1], return_internals=True)
    return {name: inside[name] if name in ("embed", "final_ln") else inside[name][-1] for name in LOCATIONS}


def split_sequences(n_sequences: int, train_seqs: int, test_seqs: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the probe's train sequences (the first ``train_seqs``) and test sequences (the next
    ``test_seqs``) among ``n_sequences`` i.i.d. sequences: disjoint by construction."""
    if train_seqs + test_seqs > n_sequences:
        raise ValueError(f"parameters 'train_seqs' + 'test_seqs' ({train_seqs} + {test_seqs}) must be <= the "
                         f"{n_sequences} probe sequences")
    return np.arange(train_seqs), np.arange(train_seqs, train_seqs + test_seqs)


def probe_sets(features, labels, train_seqs: int, test_seqs: int) -> dict:
    """``{"train" | "test": (X, y, sequence of each row)}``: the token rows of whole sequences.

    features: (S, G, d) states at the output-predicting positions; labels: (S, G) the tokens they predict.
    """
    features, labels = np.asarray(features), np.asarray(labels)
    S, G = labels.shape
    sets = {}
    for name, seqs in zip(("train", "test"), split_sequences(S, train_seqs, test_seqs)):
        sets[name] = (features[seqs].reshape(len(seqs) * G, -1), labels[seqs].reshape(-1), np.repeat(seqs, G))
    return sets


def fit_probe(sets: dict, hidden: int, max_iter: int, seed: int = 0) -> dict:
    """Fit the paper's probe on ``sets["train"]``; its train and test accuracy, and whether it converged
    (sklearn stopped before ``max_iter``; its ConvergenceWarning is counted here, not printed)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    X, y, _ = sets["train"]
    clf = MLPClassifier(hidden_layer_sizes=(hidden,), max_iter=max_iter, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    return {"probe_train_acc": float(clf.score(X, y)), "probe_test_acc": float(clf.score(*sets["test"][:2])),
            "probe_converged": bool(clf.n_iter_ < max_iter), "probe_epochs": int(clf.n_iter_)}


def location_cosines(states: dict, task) -> tuple[dict, dict]:
    """Each location's (G, G) cosine matrix of the output-predicting states, and its mean over the paper's pairs
    (``cosine_<location>``)."""
    cos = {name: metrics.cosine_matrix(h, task) for name, h in states.items()}
    return cos, {f"cosine_{name}": float(metrics.mean_cosine(c, task.cosine_pairs)) for name, c in cos.items()}


@torch.no_grad()
def measure(model, seqs, task, settings: dict) -> tuple[dict, dict, dict]:
    """One checkpoint: (scalars: probe accuracies and each location's mean cosine; ``{location: (G, G) cosine
    matrix}``; ``{location: (G,) mean L2 norm per output-predicting position}`` for ``NORM_LOCATIONS``)."""
    model.eval()
    states = location_states(model, seqs)
    cos, means = location_cosines(states, task)
    norms = {name: states[name][:, task.out_positions].norm(dim=-1).mean(0) for name in NORM_LOCATIONS}
    sets = probe_sets(states[PROBE_LOCATION][:, task.out_positions].cpu().numpy(),
                      seqs[:, task.prompt_len:].cpu().numpy(), settings["train_seqs"], settings["test_seqs"])
    scalars = {**fit_probe(sets, settings["hidden"], settings["max_iter"], settings["data_seed"]),
               **means}
    return scalars, {k: v.cpu().numpy() for k, v in cos.items()}, {k: v.cpu().numpy() for k, v in norms.items()}


def probe_batch(task, settings: dict, device=None) -> torch.Tensor:
    """The fixed held-out sequences every checkpoint is measured on (seeded by ``data_seed``; drawn on the CPU,
    so every device measures the same sequences)."""
    n = settings["train_seqs"] + settings["test_seqs"]
    return task.sample(n, torch.Generator().manual_seed(settings["data_seed"])).to(device)


def _wide_row(label, step, scalars, cos, norms, G) -> dict:
    """One checkpoint as one flat row (the resumable partial table): scalars, norms, lower-triangle cosines."""
    row = {"label": label, "step": step, **scalars}
    row.update({f"norm|{name}|{j + 1}": float(v[j]) for name, v in norms.items() for j in range(G)})
    row.update({f"cos|{name}|{a + 1}|{b + 1}": float(c[a, b]) for name, c in cos.items()
                for a in range(G) for b in range(a)})
    return row


def _long(wide: pd.DataFrame, prefix: str, names) -> pd.DataFrame:
    """The ``prefix|...`` columns of ``wide`` as a long table with columns ``names`` and ``value``."""
    columns = [c for c in wide if c.startswith(prefix + "|")]
    long = wide.melt(id_vars=["label", "step"], value_vars=columns, var_name="key", value_name="value")
    parts = long["key"].str.split("|", expand=True).iloc[:, 1:]
    parts.columns = names
    for name in names[1:]:
        parts[name] = parts[name].astype(int)
    return pd.concat([long[["label", "step"]], parts, long[["value"]]], axis=1)


def peak_steps(scalars: pd.DataFrame, location: str = "final_ln") -> pd.Series:
    """Each run's checkpoint of highest mean cosine at ``location`` (the peak of collapse), by label."""
    rows = scalars.loc[scalars.groupby("label")[f"cosine_{location}"].idxmax()]
    return rows.set_index("label")["step"]


def tables_from_rows(wide: pd.DataFrame) -> dict:
    """The stored tables: ``scalars`` (label, step, probe and cosine columns), ``norms`` (label, step, location,
    position, value) and ``cos`` (the lower-triangle matrices at each run's peak of collapse and last checkpoint,
    with ``at`` = "peak" or "last"; the matrices of every checkpoint would make the result MBs)."""
    wide = wide.sort_values(["label", "step"]).reset_index(drop=True)
    scalars = wide[[c for c in wide if "|" not in c]]
    peak, last = peak_steps(scalars), wide.groupby("label")["step"].max()
    cos = _long(wide, "cos", ["location", "row", "col"])
    chosen = []
    for at, steps in (("peak", peak), ("last", last)):
        rows = cos[cos["step"] == cos["label"].map(steps)]
        chosen.append(rows.assign(at=at))
    return {"scalars": scalars, "norms": _long(wide, "norm", ["location", "position"]),
            "cos": pd.concat(chosen, ignore_index=True).round({"value": 5})}


def matrices(cos: pd.DataFrame, G: int) -> dict:
    """``{location: (G, G)}`` lower-triangle cosine matrices (NaN elsewhere) from rows of the ``cos`` table."""
    out = {}
    for name, rows in cos.groupby("location", sort=False):
        m = np.full((G, G), np.nan)
        m[rows["row"].to_numpy() - 1, rows["col"].to_numpy() - 1] = rows["value"].to_numpy()
        out[name] = m
    return {name: out[name] for name in LOCATIONS if name in out}


def phase_table(scalars: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """Per run: its plateau (``stages.plateau_summary`` of the training metrics), the probe's accuracies at the
    first checkpoint, the one nearest the middle of the plateau, the last one before the jump (with the model's
    own greedy and teacher-forced accuracy there) and the last one, and each location's peak mean cosine over the checkpoints
    before the jump (all of them if the run never jumped)."""
    rows = []
    for label, own in scalars.groupby("label"):
        run = metrics[metrics["seed"] == label]
        s = stages.plateau_summary(run)
        partial, jump = s["partial_step"], s["jump_step"]
        middle = (partial + jump) / 2 if partial is not None and jump is not None else np.nan
        row = {"seed": label, "partial_step": partial, "jump_step": jump}
        before = own[own["step"] < jump] if jump is not None else own
        before = own.iloc[:1] if before.empty else before
        last_before = before["step"].max() if jump is not None else np.nan
        for phase, step in (("start", 0), ("plateau", middle), ("before_jump", last_before), ("end", own["step"].max())):
            for split in ("train", "test"):
                row[f"probe_{split}_{phase}"] = milestones.value_at(own, step, f"probe_{split}_acc") \
                    if np.isfinite(step) else np.nan
        for column in ("acc", "acc_tf"):
            row[f"model_{column}_before_jump"] = milestones.value_at(run, last_before, column) \
                if np.isfinite(last_before) else np.nan
        row.update({f"peak_{name}": before[f"cosine_{name}"].max() for name in LOCATIONS})
        rows.append(row)
    return pd.DataFrame(rows)


PHASES = {"start": "at the start", "plateau": "mid-plateau", "before_jump": "before the jump", "end": "at the end"}


def phase_views(phases: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``phase_table`` as the page shows it, in two narrow tables indexed by seed: the plateau and the probe's
    "train / test" accuracy at each phase, with the model's own greedy / teacher-forced accuracy before the jump;
    and each location's peak mean cosine before the jump."""
    def pair(a, b):
        return "–" if np.isnan(a) and np.isnan(b) else f"{a:.2f} / {b:.2f}"
    probe_view = pd.DataFrame({"partial step": phases["partial_step"], "jump step": phases["jump_step"],
                               **{f"probe {words}": [pair(a, b) for a, b in zip(phases[f"probe_train_{phase}"],
                                                                            phases[f"probe_test_{phase}"])]
                                  for phase, words in PHASES.items()},
                               "model before the jump": [pair(a, b) for a, b in zip(phases["model_acc_before_jump"],
                                                                                   phases["model_acc_tf_before_jump"])]})
    cosines = pd.DataFrame({words: phases[f"peak_{name}"] for name, words in LOCATIONS.items()})
    return (probe_view.set_index(phases["seed"].rename("seed")),
            cosines.set_index(phases["seed"].rename("seed")).round(2))


def plateau_spans(phases: pd.DataFrame) -> dict:
    """``{seed: (partial step, jump step)}``: each run's plateau, for shading (None where never reached)."""
    return {row.seed: (row.partial_step, row.jump_step) for row in phases.itertuples()}


def location_values(phases: pd.DataFrame) -> dict:
    """Figs. 41-42's reported numbers, seed by seed (``plateau.claims``)."""
    peak = {name: milestones.by_seed(phases, f"peak_{name}") for name in LOCATIONS}
    return {"peak cosine before the jump, embedding (before attention)": peak["embed"],
            "peak cosine before the jump, residual after attention": peak["post_attn"],
            "peak cosine before the jump, after the final layer norm": peak["final_ln"],
            "peak cosine after attention ÷ after the MLP (before the final layer norm)": BySeed(
                {s: peak["post_attn"].values[s] / peak["post_mlp"].values[s] for s in peak["post_attn"].values})}


def _column(frame: pd.DataFrame, name: str) -> list[float]:
    return [float(v) for v in frame[name]] if name in frame else []


def prose_numbers(phases: pd.DataFrame | None = None, scalars: pd.DataFrame | None = None) -> dict:
    """The per-run numbers the page's prose gives as ranges over the seeds (empty lists without ``phases``): each
    location's peak cosine before the jump (``embed``, ``attn_out``, ``post_attn``, and ``later``: after the MLP
    and the final layer norm; ``from_attn``: every location from the attention output on), the peak after
    attention ÷ after the MLP (``ratio``), the probe's test accuracy at the start, mid-plateau and before the jump,
    the model's own accuracy before the jump, and the cosine of the attention output and after the final layer
    norm at each run's last checkpoint (``end_attn_out``, ``end_final_ln``, from ``scalars``)."""
    if phases is None:
        phases = pd.DataFrame(columns=[f"peak_{name}" for name in LOCATIONS] + [
            "probe_test_start", "probe_test_plateau", "probe_test_before_jump", "model_acc_before_jump"])
    last = pd.DataFrame() if scalars is None else scalars.sort_values("step").groupby("label").tail(1)
    return {"embed": _column(phases, "peak_embed"), "attn_out": _column(phases, "peak_attn_out"),
            "post_attn": _column(phases, "peak_post_attn"),
            "later": _column(phases, "peak_post_mlp") + _column(phases, "peak_final_ln"),
            "from_attn": [v for name in ("attn_out", "post_attn", "post_mlp", "final_ln")
                          for v in _column(phases, f"peak_{name}")],
            "ratio": [a / b for a, b in zip(_column(phases, "peak_post_attn"), _column(phases, "peak_post_mlp"))],
            **{f"probe_{phase}": _column(phases, f"probe_test_{phase}")
               for phase in ("start", "plateau", "before_jump")},
            "model_before_jump": _column(phases, "model_acc_before_jump"),
            "end_attn_out": _column(last, "cosine_attn_out"), "end_final_ln": _column(last, "cosine_final_ln")}


def norms_at(tables: dict) -> pd.DataFrame:
    """The ``norms`` table at each run's first checkpoint, peak of collapse and last checkpoint (column ``at``)."""
    norms, scalars = tables["norms"], tables["scalars"]
    picks = {"first checkpoint": scalars.groupby("label")["step"].min(), "peak of collapse": peak_steps(scalars),
             "last checkpoint": scalars.groupby("label")["step"].max()}
    return pd.concat([norms[norms["step"] == norms["label"].map(steps)].assign(at=at) for at, steps in picks.items()],
                     ignore_index=True)


def paper_column() -> dict | None:
    """The paper-config column shown beside a ``cpu`` build, from committed results only (nothing is computed):
    ``{"results", "metrics", "tables", "meta", "settings", "phases"}`` of the paper's three runs, measured at
    ``page_settings`` (the paper's probe budget, else the stated CPU one); None unless all of it is committed."""
    configs = presets.probe_runs("paper")
    settings = page_settings(configs, "paper")
    results = pages.committed_runs(configs)
    found = probe_table(configs, settings).load()
    if found is None or len(results) < len(configs):
        return None
    metrics = pages.tidy(results, "seed")
    tables, meta = found
    return {"results": results, "metrics": metrics, "tables": tables, "meta": meta, "settings": settings,
            "phases": phase_table(tables["scalars"], metrics)}


def page_settings(configs: dict, preset: str, use_cache: bool = True, **fields) -> dict:
    """The probe settings the page measures ``configs`` with: ``presets.probe_settings(preset, **fields)``, except
    for the ``paper`` preset with no field given and the committed tables loaded (``use_cache``): where no result
    at the paper's own probe budget is stored but one at the stated CPU budget (``presets.PROBE_PAPER_ON_CPU``)
    is, that one. The settings table then shows the deviation."""
    settings = presets.probe_settings(preset, **fields)
    if preset != "paper" or not use_cache or any(v is not None for v in fields.values()):
        return settings
    stored = [s for s in (settings, presets.PROBE_PAPER_ON_CPU) if probe_table(configs, s).path()]
    return stored[0] if stored else settings


def settings_table(settings: dict) -> pd.DataFrame:
    """The probe settings of this page next to the paper's."""
    return pd.DataFrame({"this page": settings, "paper": presets.PROBE["paper"]}).rename_axis("probe setting")


def provenance_row(meta: dict, preset: str) -> dict:
    """The probe tables' row of the page's provenance block."""
    return {"preset": preset, "run": f"probe and locations ({meta.get('probe_fits')} checkpoints)",
            "device": meta.get("device"), "wall time (s)": meta.get("measure_wall_s"),
            "source": meta["cache"] if meta.get("cache") else "computed in this build", "commit": meta.get("commit"),
            "date": str(meta.get("date", ""))[:10]}


def peak_and_last(cos: pd.DataFrame, label, G: int) -> dict:
    """``{"peak, step s" | "last, step s": {location: (G, G) matrix}}`` of run ``label`` from the ``cos`` table."""
    own = cos[cos["label"] == label]
    return {f"{at}, step {rows['step'].iloc[0]}": matrices(rows, G)
            for at in ("peak", "last") for rows in [own[own["at"] == at]]}


def probe_table(configs: dict, settings: dict) -> cache.StoredTable:
    """The stored probe tables of runs ``{label: TrainConfig}``, keyed by each run's training key and the probe
    settings."""
    return cache.StoredTable(KIND, {"runs": {str(label): cfg for label, cfg in configs.items()},
                                    "probe": presets.check_settings(dict(settings)), "version": VERSION})


def measure_runs(configs: dict, settings: dict, use_cache: bool = True, progress: bool = True,
                 deadline: float | None = None) -> tuple[dict, dict]:
    """The tables of ``tables_from_rows`` and their meta for runs ``{label: TrainConfig}`` (labels: seeds); past
    ``deadline`` the rows stop once kept (``StoredTable.build``).

    use_cache: load the stored tables (committed first). Otherwise, or when none are stored, measure every
    checkpoint; runs without local checkpoints are trained first (a run the page just retrained is reused).
    """
    empty = [label for label, cfg in configs.items() if not cfg.checkpoint_steps]
    if empty:
        raise ValueError(f"checkpoint_steps is empty for runs {empty}: the probe over training needs checkpoints")
    stored = probe_table(configs, settings)
    ready = {}  # label -> (task, probe batch, model, checkpoints), set up when a run's first row is measured

    def row(items):
        (label, step), = items
        cfg = configs[label]
        if label not in ready:
            task, device = cfg.make_task(), resolve_device(cfg.device)
            ready[label] = task, probe_batch(task, settings, device), task.build_model(cfg).to(device), \
                cache.current().trained_checkpoints(cfg, progress=progress)[1], device
        task, seqs, model, ckpts, device = ready[label]
        t0 = time.perf_counter()
        model.load_state_dict(torch.load(ckpts[step], weights_only=True, map_location=device))
        wide = _wide_row(label, step, *measure(model, seqs, task, settings), task.gen_len)
        return pd.DataFrame([{**wide, "seconds": round(time.perf_counter() - t0, 2)}])

    def compute():
        done = stored.build([(label, step) for label, cfg in configs.items() for step in sorted(cfg.checkpoint_steps)],
                            row, on=("label", "step"), progress=progress, desc="probe at checkpoints",
                            deadline=deadline)
        return tables_from_rows(done), {
            "device": str(resolve_device(next(iter(configs.values())).device)), "torch": torch.__version__,
            "measure_wall_s": round(float(done["seconds"].sum()), 1), "probe_fits": len(done),
            "probe_not_converged": int((~done["probe_converged"].astype(bool)).sum())}

    if not use_cache:
        stored.drop_rows()
    return stored.get(compute, use_cache)

