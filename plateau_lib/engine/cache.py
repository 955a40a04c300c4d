"""Result cache: a run's tidy tables and small arrays on disk, keyed by its config.

The key hashes the config's ``key_dict()`` (only the fields that differ from a frozen table of neutral
values, so adding a field whose default keeps the old behaviour leaves existing keys unchanged; the
device is provenance, not part of the key), any extra inputs (e.g. the reference run an initialisation
came from) and ``RESULTS_VERSION``; bump the version whenever the computation behind a result changes.

Where results live is a ``Store``: its ``committed`` folder (``results/``, in git) and its ``local`` one
(``.cache/results``: new results, weights, checkpoints and resume states). Everything done with a training run goes
through a store's methods: ``train`` / ``train_many`` (through the cache), ``trained_checkpoints``, ``trained_model``,
``result``, ``committed_result``, ``stopped`` (a run stopped part-way), ``commit``. The rule: with ``use_cache=True`` a
run is loaded, committed results first, then local ones; with ``use_cache=False`` it is recomputed and the recomputed
result is what the caller gets (and what the page shows). New results are written atomically to the local folder;
``commit`` copies one to the committed folder without ``final_state.pt`` (``meta.json`` carries the provenance).

Which store: a caller holds one and passes it down (a worker process is handed its caller's), or asks for the
current one, ``current()``: ``DEFAULT`` unless a command chose another for a block (``using(store)``; the paper
queue's ``QUEUE``) or for a process (``use(store)``).

A result made after training (λ̂ at checkpoints, a probe, a calibration) is a ``StoredTable``: a few CSV tables
keyed by a JSON spec (the runs' keys and the settings), loaded or computed and saved in one call (``get``), its rows
built one group at a time and kept, so that interrupted work resumes (``build``).
"""
from __future__ import annotations

from plateau_lib.engine.utils import REPO_ROOT

import datetime as dt
import fcntl
import hashlib
import json
import shutil
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from plateau_lib.engine.runs import TrainConfig, TrainResult

from plateau_lib.engine.train import Stopped, train_many
from plateau_lib.engine.utils import atomic_path, git_commit, in_book_build, shown_path

RESULTS_VERSION = 1
ROOT = REPO_ROOT


@dataclass(frozen=True)
class Store:
    """Where results are kept: ``committed`` (``results/``: tables and provenance, no weights; read first) and
    ``local`` (new results, weights, checkpoints and resume states). A plain value: a worker process is given one."""
    committed: Path
    local: Path

    def __post_init__(self):
        object.__setattr__(self, "committed", Path(self.committed))
        object.__setattr__(self, "local", Path(self.local))

    def find(self, kind: str, key: str) -> Path | None:
        """The folder of the finished result ``<kind>-<key>`` (committed first), or None."""
        for base in (self.committed, self.local):
            path = base / f"{kind}-{key}"
            if (path / "meta.json").exists():
                return path
        return None

    def run(self, cfg, extra=None) -> Path | None:
        """The folder of the finished training run of ``cfg`` (committed first), or None; never trains."""
        return self.find(RUN_KIND, cache_key(cfg, extra))

    def has_weights(self, cfg, extra=None) -> bool:
        """Whether the final weights of ``cfg``'s run are stored here (committed results carry none, as a rule)."""
        name = run_name(cache_key(cfg, extra))
        return any((base / name / "final_state.pt").exists() for base in (self.committed, self.local))

    def local_run(self, cfg, extra=None) -> Path:
        """The local folder of ``cfg``'s finished run (its weights and checkpoints; it may not exist yet)."""
        return self.local / run_name(cache_key(cfg, extra))

    def working(self, cfg, extra=None) -> Path:
        """The local folder of ``cfg``'s run while it trains (resume state, checkpoints so far)."""
        return self.local / run_name(cache_key(cfg, extra), ".partial")

    def stopped_runs(self) -> list[Path]:
        """The working folders of runs stopped part-way (with a resume state), to carry to a next command."""
        return sorted(p for p in self.local.glob(run_name("*", ".partial")) if (p / "resume.pt").exists())

    def in_progress(self) -> Path:
        """The committed folder of long jobs' compact resume states, carried between work sessions."""
        return self.committed / "in_progress"

    # ---- training runs: trained through the store, found, committed ----------------------------------------------

    def train(self, cfg: TrainConfig, use_cache: bool = True, init_state=None, extra=None, progress=True,
              need_state: bool = False) -> TrainResult:
        """``train(cfg)`` through this store. An interrupted run resumes from its partial folder.

        need_state: the caller needs ``final_state`` (the trained weights); committed results carry only
        tables and arrays, so such a hit is recomputed locally.
        """
        return self.train_many([cfg], use_cache, [init_state], [extra], progress, need_state)[0]

    def train_many(self, configs, use_cache: bool = True, init_states=None, extras=None, progress=True,
                   need_state: bool = False, backend: str = "auto", deadline: float | None = None,
                   lock: bool = True, on_done=None, cuda_graphs: bool = False) -> list[TrainResult]:
        """``train_many(configs)`` through this store: hits are loaded, the rest trained together (``backend``),
        each stored the moment it finishes; interrupted runs resume from their partial folders (``deadline``
        stops them there on purpose, raising ``train.Stopped``). ``lock``: see ``_locked``. ``on_done``:
        ``f(index, result)`` for each config as it is loaded or finishes (e.g. a sweep's progress bar).
        ``cuda_graphs``: as ``train_many``'s."""
        configs = list(configs)
        init_states = [None] * len(configs) if init_states is None else list(init_states)
        extras = [None] * len(configs) if extras is None else list(extras)
        keys = [cache_key(c, e) for c, e in zip(configs, extras)]
        done = on_done or (lambda i, result: None)
        with _locked(self.local, keys, lock):
            results = [_hit(self, k, need_state) if use_cache else None for k in keys]
            for i, result in enumerate(results):
                if result is not None:
                    done(i, result)
            todo = {}  # one computation per key, even if a config is listed twice
            for i, k in enumerate(keys):
                if results[i] is None:
                    todo.setdefault(k, i)
            if todo:
                index = list(todo.values())
                partials = [self.local / run_name(keys[i], ".partial") for i in index]
                for folder in partials:
                    folder.mkdir(parents=True, exist_ok=True)
                fresh = train_many([configs[i] for i in index], [init_states[i] for i in index], partials,
                                   progress=progress, backend=backend, deadline=deadline, cuda_graphs=cuda_graphs,
                                   on_result=lambda j, r: done(index[j], _store(self, r, keys[index[j]],
                                                                               extras[index[j]])))
                for i, k in enumerate(keys):
                    if results[i] is None:
                        results[i] = fresh[index.index(todo[k])]
        return results

    def checkpoints(self, cfg, extra=None) -> dict:
        """``{step: path}`` of the checkpoints a local result of ``cfg`` kept (``cfg.checkpoint_steps``)."""
        return {int(p.stem.split("_")[1]): p for p in sorted(self.local_run(cfg, extra).glob("ckpt_*.pt"))}

    def trained_checkpoints(self, cfg, use_cache: bool = True, progress: bool = False) -> tuple[TrainResult, dict]:
        """``(TrainResult with its final weights, {step: checkpoint path})`` of ``cfg`` through this store, at every
        step of ``cfg.checkpoint_steps``. Checkpoints are local files (never committed): a run whose local copy lacks
        any is trained again."""
        if not cfg.checkpoint_steps:
            raise ValueError("parameter 'cfg' has no checkpoint_steps: the work after training reads its checkpoints")
        run = self.train(cfg, use_cache=use_cache, progress=progress, need_state=True)
        if not set(cfg.checkpoint_steps) <= set(self.checkpoints(cfg)):
            run = self.train(cfg, use_cache=False, progress=progress, need_state=True)
        kept = self.checkpoints(cfg)
        return run, {s: kept[s] for s in sorted(cfg.checkpoint_steps)}

    def trained_model(self, cfg, use_cache: bool = True, progress: bool = False) -> tuple[torch.nn.Module, TrainResult]:
        """``(model, TrainResult)``: ``cfg``'s task's model (on the CPU) holding the run's trained final weights, trained
        through this store where no local copy has them."""
        run = self.train(cfg, use_cache=use_cache, progress=progress, need_state=True)
        model = cfg.make_task().build_model(cfg)
        model.load_state_dict(run.final_state)
        return model, run

    def result(self, cfg, extra=None) -> TrainResult | None:
        """The finished result of ``cfg`` (committed first, then local; ``meta["cache"]`` says where), or None;
        never trains."""
        return _hit(self, cache_key(cfg, extra), need_state=False)

    def committed_result(self, cfg, extra=None) -> TrainResult | None:
        """The committed result of ``cfg`` (e.g. a ``paper`` run shown beside a live ``cpu`` run), or None."""
        path = self.committed / run_name(cache_key(cfg, extra))
        return _loaded(path) if (path / "meta.json").exists() else None

    def committed_meta(self, cfg, extra=None) -> dict | None:
        """The provenance (``meta.json``) of the committed result of ``cfg``, without loading its tables; or None."""
        path = self.committed / run_name(cache_key(cfg, extra)) / "meta.json"
        return json.loads(path.read_text()) if path.exists() else None

    def stopped(self, cfg, extra=None) -> TrainResult | None:
        """The evaluations so far of a run of ``cfg`` stopped at a deadline (its local resume state), as a
        TrainResult whose ``meta["stopped_at"]`` is the step reached; None when there is none. For showing how far a
        run got, never as a finished one (it has no final weights)."""
        path = self.working(cfg, extra) / "resume.pt"
        if not path.exists():
            return None
        state = torch.load(path, weights_only=True, map_location="cpu")
        metrics, positions, arrays = cfg.make_task().tables(state["evals"], cfg.seed)
        return TrainResult(cfg.to_dict(), metrics, positions, arrays,
                           {"stopped_at": int(state["step"]), "wall_time_s": round(float(state["elapsed"]), 2),
                            "device": state.get("device", "unknown")})

    def commit(self, cfg, extra=None) -> Path:
        """Copy the local result of ``cfg`` into ``committed`` (tables, arrays, meta; no weights) for committing
        (already committed and not local: nothing to copy)."""
        key = cache_key(cfg, extra)
        return _commit(self, run_name(key), f"no local result for this config (key {key}); run store.train(cfg) first",
                       shutil.ignore_patterns("final_state.pt", "*.pt"))

    def partial_tables(self) -> list[Path]:
        """The local folders of stored tables whose rows are kept part-way (not training runs'), with rows in them."""
        return sorted(p for p in self.local.glob("*.partial") if not p.name.startswith(f"{RUN_KIND}-")
                      and any(p.iterdir()))


DEFAULT = Store(ROOT / "results", ROOT / ".cache" / "results")
QUEUE = Store(DEFAULT.committed, ROOT / ".cache" / "queue")  # the paper queue's: its working files in one folder
_current = [DEFAULT]  # the process's current store (all its threads'), changed only by ``use`` and ``using``


def current() -> Store:
    """The store the functions here use: the one chosen by ``using`` or ``use``, else ``DEFAULT``."""
    return _current[0]


def use(store: Store) -> Store:
    """Make ``store`` the current one for the rest of this process (a worker's or a script's; a block: ``using``);
    returns the one it replaces."""
    if not isinstance(store, Store):
        raise ValueError(f"parameter 'store' must be a cache.Store, got {store!r}")
    before, _current[0] = _current[0], store
    return before


@contextmanager
def using(store: Store):
    """``store`` is the current one inside the block, and the one before it after the block."""
    before = use(store)
    try:
        yield store
    finally:
        _current[0] = before


RUN_KIND = "train"  # a training run's folders: ``train-<key>``, ``.partial`` while it trains, ``.lock`` while held


def run_name(key: str, suffix: str = "") -> str:
    """The folder (or lock) name of the training run with cache key ``key``."""
    return f"{RUN_KIND}-{key}{suffix}"


def cache_key(cfg, extra=None) -> str:
    """16 hex digits identifying the result of ``cfg`` (a config with ``key_dict()``) and ``extra``."""
    blob = json.dumps({"config": cfg.key_dict(), "extra": extra, "version": RESULTS_VERSION}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _hit(store: Store, key: str, need_state: bool) -> TrainResult | None:
    hit = store.find(RUN_KIND, key)
    local = store.local / run_name(key)
    if hit is not None and need_state and not (hit / "final_state.pt").exists():
        hit = local if (local / "final_state.pt").exists() else None
    return None if hit is None else _loaded(hit)


def _loaded(folder: Path) -> TrainResult:
    """The stored run in ``folder``, its ``meta["cache"]`` saying where it was found."""
    result = TrainResult.load(folder)
    result.meta["cache"] = shown_path(folder)
    return result


def _store(store: Store, result: TrainResult, key: str, extra) -> TrainResult:
    """Write a fresh result atomically under its key (with provenance) and drop its partial folder."""
    result.meta.update(commit=git_commit(), date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                       results_version=RESULTS_VERSION, key=key, extra=extra)
    partial = store.local / run_name(key, ".partial")
    with atomic_path(store.local / run_name(key)) as tmp:
        result.save(tmp)
        for ckpt in partial.glob("ckpt_*.pt"):  # checkpoints stay with the local result (never committed)
            shutil.move(ckpt, tmp / ckpt.name)
    shutil.rmtree(partial, ignore_errors=True)
    result.meta["cache"] = None
    return result


@contextmanager
def _locked(local: Path, keys, lock: bool = True):
    """Hold the lock of every key (in sorted order, so two callers never deadlock): one process computes a
    key, others wait and then load it. ``lock=False`` takes none (sweep workers on other machines, where
    file locks are unreliable; they rely on atomic renames)."""
    local.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        for key in sorted(set(keys)) if lock else ():
            fcntl.flock(stack.enter_context(open(local / run_name(key, ".lock"), "w")), fcntl.LOCK_EX)
        yield


def _commit(store: Store, folder: str, missing: str, ignore=None) -> Path:
    """Copy ``store``'s local ``folder`` into its committed one atomically (``ignore``: shutil's, for files left
    out); already committed and not local: nothing to copy. No local result and none committed: ``missing`` is
    raised."""
    src, dst = store.local / folder, store.committed / folder
    if not (src / "meta.json").exists():
        if (dst / "meta.json").exists():
            return dst
        raise ValueError(missing)
    with atomic_path(dst) as tmp:
        shutil.copytree(src, tmp, ignore=ignore)
    return dst


# ---- stored tables: results that are a few CSV tables (e.g. λ̂ per run), keyed by a JSON spec ---------------

def keyed(spec):
    """``spec`` with every training config in it (anything with ``key_dict``, at any depth of its dicts, lists and
    tuples) replaced by its ``cache_key``: a stored table names the runs it was made from by their keys. Settings
    (``key_inline``, e.g. an ``SGLDConfig``) are replaced by their ``key_dict()`` itself."""
    if hasattr(spec, "key_dict"):
        return spec.key_dict() if getattr(spec, "key_inline", False) else cache_key(spec)
    if isinstance(spec, dict):
        return {k: keyed(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [keyed(v) for v in spec]
    return spec


def table_key(spec: dict) -> str:
    """16 hex digits identifying a stored-tables result by its ``spec`` (the runs, as configs or keys, and the
    settings)."""
    return hashlib.sha256(json.dumps(keyed(spec), sort_keys=True, default=str).encode()).hexdigest()[:16]


class StoredTable:
    """A result made of a few CSV tables (``kind``, e.g. λ̂ per checkpoint), keyed by its JSON-able ``spec`` (the
    runs, as configs or their keys (``keyed``), and the settings): committed under ``results/<kind>-<key>/`` or local under ``.cache/results``,
    with provenance in ``meta.json``. Its rows can be built one group at a time, each kept at once, so that an
    interrupted build resumes (``build``); several processes can fill the same rows (``shared``)."""

    def __init__(self, kind: str, spec: dict, store: Store | None = None):
        self.kind, self.spec = kind, keyed(spec)
        self._store = store  # None: the current store, whichever it is when the table is read or kept
        self.key = table_key(self.spec)  # already keyed
        self.name = f"{kind}-{self.key}"  # its folder under results/ or the local cache

    @property
    def store(self) -> Store:
        """Where it is read and kept."""
        return current() if self._store is None else self._store

    def committed(self) -> bool:
        """Whether the finished table is in ``results/``."""
        return (self.store.committed / self.name / "meta.json").exists()

    def __repr__(self) -> str:
        return f"StoredTable({self.kind!r}, key {self.key})"

    def path(self) -> Path | None:
        """Where the finished table is stored (committed first), or None."""
        return self.store.find(self.kind, self.key)

    def load(self):
        """``({name: DataFrame}, meta)`` of the finished table (committed first), or None; never computes."""
        import pandas as pd
        path = self.path()
        if path is None:
            return None
        meta = json.loads((path / "meta.json").read_text())
        meta["cache"] = shown_path(path)
        return {p.stem: pd.read_csv(p) for p in sorted(path.glob("*.csv"))}, meta

    def save(self, tables: dict, meta: dict) -> Path:
        """Store the finished ``tables`` ({name: DataFrame}) with ``meta`` and provenance, locally and atomically;
        the rows kept while building are dropped."""
        meta = {**meta, "spec": self.spec, "key": self.key, "commit": git_commit(),
                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        with atomic_path(self.store.local / self.name) as tmp:
            tmp.mkdir()
            for name, table in tables.items():
                table.to_csv(tmp / f"{name}.csv", index=False)
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
        self.drop_rows()
        return self.store.local / self.name

    def get(self, compute, use_cache: bool = True):
        """``(tables, meta)``: the stored table (with ``use_cache``), else ``compute()`` -> ``(tables, meta)``,
        saved and read back (``meta["cache"]`` None: computed in this process)."""
        if use_cache and (found := self.load()) is not None:
            return found
        self.save(*compute())
        tables, meta = self.load()
        return tables, {**meta, "cache": None}

    def commit(self) -> Path:
        """Copy the local finished table into ``results/`` (already committed and not local: nothing to copy)."""
        return _commit(self.store, self.name,
                       f"no local {self.kind} result for this spec (key {self.key}); compute it first")

    def rows_folder(self) -> Path:
        """The local folder of the rows kept while building (beside them, processes may leave claims)."""
        return self.store.local / f"{self.name}.partial"

    def rows(self):
        """The rows kept so far while building (an empty DataFrame at first)."""
        import pandas as pd
        path = self.rows_folder() / "rows.csv"
        return pd.read_csv(path) if path.exists() else pd.DataFrame()

    def keep(self, rows, shared: bool = False, deadline: float | None = None) -> None:
        """Keep ``rows`` (all rows so far) atomically. ``shared``: other processes keep rows of other steps in the
        same table (each its own ``step`` values), so under a file lock the rows they kept meanwhile are merged in
        instead of overwritten. Past ``deadline`` (a ``time.time()``; None: never), stop once the rows are kept
        (``train.Stopped``), so that a time-limited command ends cleanly and the next one resumes from them."""
        import pandas as pd
        folder = self.rows_folder()
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "rows.lock", "w") as lock:
            if shared:
                fcntl.flock(lock, fcntl.LOCK_EX)
                theirs = self.rows()
                if not theirs.empty:
                    rows = pd.concat([rows, theirs[~theirs["step"].isin(rows["step"])]], ignore_index=True)
            with atomic_path(folder / "rows.csv") as tmp:
                rows.to_csv(tmp, index=False)
        if deadline is not None and time.time() > deadline:
            raise Stopped(f"deadline reached after {len(rows)} {self.kind} rows; they resume from {self.store.local}")

    def drop_rows(self) -> None:
        """Remove the kept rows (once the finished table is stored, or to start over)."""
        shutil.rmtree(self.rows_folder(), ignore_errors=True)

    def carried_rows(self) -> Path:
        """The committed copy of the rows kept so far, for a build that spans work sessions (``carry_rows``)."""
        return self.store.in_progress() / self.name / "rows.csv"

    def carry_rows(self) -> Path | None:
        """Copy the rows kept so far into ``carried_rows`` (atomically), to commit before a session ends; None
        when no row is kept yet (nothing is written)."""
        rows = self.rows()
        if rows.empty:
            return None
        dst = self.carried_rows()
        dst.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(dst) as tmp:
            rows.to_csv(tmp, index=False)
        return dst

    def restore_rows(self) -> int:
        """Take the committed rows (``carried_rows``) where they hold more than the local ones (builds make their
        items in one order, so more rows are further along); returns the number of rows the build resumes from."""
        import pandas as pd
        carried = self.carried_rows()
        committed = pd.read_csv(carried) if carried.exists() and carried.stat().st_size else pd.DataFrame()
        if len(committed) > len(self.rows()):
            self.keep(committed)
        return len(self.rows())

    def drop_carried_rows(self) -> None:
        """Remove the committed rows once the finished table is committed."""
        shutil.rmtree(self.carried_rows().parent, ignore_errors=True)

    def build(self, items, compute_rows, on="step", group: int = 1, progress: bool = True,
              desc: str = "checkpoints", shared: bool = False, deadline: float | None = None):
        """The rows of ``compute_rows(chunk)`` for every item of ``items`` (an integer step, or a tuple of the
        columns ``on`` names, e.g. ``("M", "seed")``), ``group`` items per call. Rows kept by an earlier, interrupted
        build are loaded instead of recomputed, and each new group is kept at once (``keep``; ``shared``: other
        processes fill other steps; past ``deadline`` it stops there). Sorted by ``on``. A tqdm bar (hidden in the book build) counts them."""
        import pandas as pd
        from tqdm.auto import tqdm
        on = [on] if isinstance(on, str) else list(on)
        done = self.rows()
        have = set() if done.empty else set(done[on[0]].astype(int) if len(on) == 1 else
                                             map(tuple, done[on].itertuples(index=False)))
        todo = [int(i) if len(on) == 1 else tuple(i) for i in items]
        todo = [i for i in todo if i not in have]
        bar = tqdm(total=len(todo), desc=desc, disable=not progress or in_book_build())
        for i in range(0, len(todo), group):
            done = pd.concat([done, compute_rows(todo[i:i + group])], ignore_index=True)
            self.keep(done, shared, deadline)
            bar.update(len(todo[i:i + group]))
        bar.close()
        return done.sort_values(on).reset_index(drop=True)
