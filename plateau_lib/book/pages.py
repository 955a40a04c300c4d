"""Page helpers for the book's notebooks: one-call setup, and (below) the patterns every page shares.

A figure notebook is its ``parameters`` cell, then library calls, then plots. Everything a page would
otherwise define for itself lives here or in ``plots`` / ``widgets``.
"""
from __future__ import annotations

import html
import math
import os
import re
import warnings
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
import seaborn as sns

from plateau_lib.book import summaries
from plateau_lib.book.summaries import load_summaries, PRESET_COLUMNS, slug
from plateau_lib.book.verdicts import BAND_KINDS, BySeed, count_verdicts, NOT_COUNTED, SANITY, VERDICTS
from plateau_lib.engine.cache import cache_key, current
from plateau_lib.engine.stages import plateau_summary
from plateau_lib.engine.utils import REPO_ROOT, atomic_path, cpu_threads, in_book_build

# Figures are drawn for the book's text column (about 780 px at a 1,400 px window): 7.5 inches at 100 dpi,
# with no text smaller than 9 pt, so the smallest label is >= 9 px on screen.
PAGE_WIDTH_IN = 7.5
MIN_FONT_PT = 9


def setup() -> None:
    """One call at the top of every page: 1 torch thread, tidy pandas display, page-width seaborn style,
    and no progress bars in the built book (tqdm's widget bars are not stderr, so they are switched off)."""
    cpu_threads()
    pd.set_option("display.precision", 3)
    pd.set_option("display.max_colwidth", None)
    sns.set_theme(context="notebook", style="whitegrid", rc={
        "figure.figsize": (PAGE_WIDTH_IN, 3.2), "figure.dpi": 100, "savefig.dpi": 100,
        "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "xtick.labelsize": MIN_FONT_PT,
        "ytick.labelsize": MIN_FONT_PT, "legend.fontsize": MIN_FONT_PT, "legend.title_fontsize": MIN_FONT_PT,
        "figure.titlesize": 11, "figure.constrained_layout.use": True})
    mpl.rcParams["figure.max_open_warning"] = 0
    # a character the font lacks (e.g. CJK in a language model's generations) is drawn as a box, not a warning
    warnings.filterwarnings("ignore", message="Glyph .* missing from", category=UserWarning)
    if in_book_build():
        os.environ["TQDM_DISABLE"] = "1"
    shell = _ipython()
    if shell is not None:  # tables show a missing value as "–", never "NaN"
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, frame_html)


MISSING = "–"
# a code name (a setting, a task, a preset): shown as code in a table's cells, and as words in its headers
CODE_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
CODE_WORD = re.compile(rf"\b{CODE_NAME.pattern}\b")
PATH = re.compile(r"[\w.-]*/[\w./-]+")  # a file or folder, e.g. results/plateau_llc-0251330af588c8be
HEADER_WORDS = {"apm": "APM", "llc": "λ̂", "se": "s.e.", "acc": "accuracy", "rel": "relative", "mala": "MALA",
                "sgld": "SGLD", "kq": "KQ", "ov": "OV", "mlp": "MLP", "ln": "LN", "attn": "attention", "tf": "TF",
                "ood": "OOD", "rho": "ρ", "mae": "MAE", "dmmse": "dMMSE", "init": "initial", "num": "number of",
                "s": "(s)", "pct": "%", "cpu": "CPU", "gpu": "GPU", "lr": "learning rate", "embed": "embedding",
                "gpt": "GPT", "llm": "LLM", "icl": "ICL", "vmap": "vmapped", "bf16": "bf16", "fp32": "fp32"}
# A paper's symbol (Carroll et al.'s t_M^crit), or a short header where the word rule reads long in a wide table
HEADER_SYMBOLS = {"t_crit": "tᶜʳⁱᵗ", "num_diverged": "diverged chains"}


class Verbatim(str):
    """Text a table shows as code, as it is: a model's generations, say, which are data and not prose."""


def frame_html(frame: pd.DataFrame, **to_html) -> str:
    """A DataFrame as the page shows it: pandas' own HTML (display options kept), missing values as
    ``MISSING``, code names in headers as words (``apm_before_jump`` -> "APM before jump") and in cells as
    code (a setting such as ``d_model``, a preset such as ``cpu_long``), as are paths and ``Verbatim`` cells.
    ``to_html`` overrides pandas' options (``index``, ``classes``, ``border``, ``na_rep``)."""
    shown = frame.copy()
    shown.columns = _relabel(shown.columns, _header)
    shown.index = _relabel(shown.index, _cell)
    for i, dtype in enumerate(shown.dtypes):
        nullable = pd.api.types.is_extension_array_dtype(dtype) and dtype.kind in "iufb"  # its <NA> is missing too
        if pd.api.types.is_float_dtype(dtype) and not nullable:
            shown.isetitem(i, float_texts(shown.iloc[:, i]))
        elif pd.api.types.is_integer_dtype(dtype) and not nullable:
            shown.isetitem(i, shown.iloc[:, i].map(_cell))
        elif (pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype) or nullable
              or pd.api.types.is_bool_dtype(dtype)):
            shown.isetitem(i, shown.iloc[:, i].astype(object).map(_cell))
    options = dict(na_rep=MISSING, border=1, max_rows=pd.get_option("display.max_rows"),
                   max_cols=pd.get_option("display.max_columns"),
                   show_dimensions=pd.get_option("display.show_dimensions") is True)
    return shown.to_html(escape=False, **{**options, **to_html})


def setting_text(value) -> str:
    """A setting as a settings table shows it: a list as its items, a dict as ``name = value`` pairs, None (SGLD's
    nβ) as the estimator's default, True and False as yes and no, a float in its shortest form."""
    if isinstance(value, (list, tuple)):
        return ", ".join(setting_text(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} = {setting_text(v)}" for k, v in value.items())
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "default (batch ÷ ln batch)" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def formatted(values, fmt: str):
    """A Series or DataFrame of numbers as text by ``fmt`` (e.g. ``"{:.3g}"``), a missing value as ``MISSING``."""
    return values.map(lambda v: MISSING if pd.isna(v) else fmt.format(v))


def header_words(label: str) -> str:
    """``apm_before_jump`` -> "APM before jump"; a label that is not a code name is returned as it is."""
    if label in HEADER_SYMBOLS or not CODE_NAME.fullmatch(label):
        return HEADER_SYMBOLS.get(label, label)
    return " ".join(HEADER_WORDS.get(word, word) for word in label.split("_"))


def _header(label):
    return html.escape(header_words(label)) if isinstance(label, str) else label


SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def number_text(value: float, whole: bool = False) -> str:
    """A float as a table shows it, never in e-notation: a whole number (``whole``: its column's are all whole) as
    an integer, 1,000 and over with thousands separators, under 0.01 to 3 significant digits (under 0.0001 as
    4.44 × 10⁻¹⁶, not a row of zeros), else 3 decimals; ±∞ as ∞ and −∞, a minus sign as the typographic −, and
    no sign on a value shown as zero. The tier is chosen by the value as rounded, so 999.9996 reads 1,000.0, not
    1000.000."""
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    size = abs(value)
    if whole or round(size, 1) >= 1e5:
        text = f"{value:,.0f}"
    elif round(size, 3) >= 1e3:
        text = f"{value:,.1f}"
    elif 0 < size and float(f"{size:.3g}") < 1e-4:
        mantissa, exponent = f"{value:.2e}".split("e")
        text = f"{mantissa.rstrip('0').rstrip('.')} × 10{str(int(exponent)).translate(SUPERSCRIPTS)}"
    elif 0 < size and float(f"{size:.3g}") < 1e-2:
        text = np.format_float_positional(value, precision=3, unique=False, fractional=False, trim="-")
    else:
        text = f"{value:.3f}"
    return _minus(text)


def _minus(text: str) -> str:
    """A number's text with the typographic minus, and without a sign where every digit is 0 (−0.000)."""
    if not text.startswith("-"):
        return text
    return text[1:] if not re.search(r"[1-9]", text) else "−" + text[1:]


def float_texts(column: pd.Series) -> pd.Series:
    """A float column as text by :func:`number_text`, whole numbers as integers when the whole column is whole, and
    to one decimal when every value has one at most (λ = 104.0, 906.5, 8,631.5)."""
    finite = column[np.isfinite(column)]
    small = bool(len(finite)) and finite.abs().max() < 1e15
    whole = small and bool((finite == finite.round()).all())
    tenths = small and not whole and bool((finite * 10 == (finite * 10).round()).all())
    return column.map(lambda v: MISSING if pd.isna(v) else _minus(f"{v:,.1f}") if tenths and np.isfinite(v)
                      else number_text(v, whole))


def _cell(value):
    if isinstance(value, (bool, np.bool_)):  # a yes/no column reads as words, not Python's True and False
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)) and not np.isnan(value):
        return number_text(float(value), float(value).is_integer() and abs(value) < 1e15)
    if isinstance(value, (int, np.integer)):  # a step such as 40292 reads 40,292, as in the prose
        return _minus(f"{value:,}")
    if not isinstance(value, str):  # None in an object column is missing too (pandas' na_rep skips it there)
        return MISSING if pd.api.types.is_scalar(value) and pd.isna(value) else value
    if isinstance(value, Verbatim) or PATH.fullmatch(value):
        return f"<code>{html.escape(value)}</code>"
    return CODE_WORD.sub(r"<code>\g<0></code>", html.escape(value))


def _relabel(labels: pd.Index, rename) -> pd.Index:
    names = [_header(name) for name in labels.names]
    if isinstance(labels, pd.MultiIndex):
        return pd.MultiIndex.from_tuples([tuple(rename(v) for v in key) for key in labels], names=names)
    return pd.Index([rename(v) for v in labels], name=names[0])


# The CSV files behind a page's figures, beside the executed notebooks (book/figures/), for MyST's download role.
DATA_FOLDER = Path("book/figures/_data")
DATA_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def data_downloads(page: str, frames: dict[str, pd.DataFrame]) -> None:
    """Offer the data behind a page's figures as CSV files. In the book build (run from the repository root)
    each frame with rows is written to ``book/figures/_data/PAGE-NAME.csv`` and the page lists the files as
    downloads; a live notebook has the frames themselves, and nothing is written."""
    from IPython.display import Markdown, display
    if not isinstance(frames, dict) or not frames:
        raise ValueError(f"frames must be a non-empty dict {{name: DataFrame}}, got {frames!r}")
    for name, frame in frames.items():
        if not (isinstance(name, str) and DATA_NAME.fullmatch(name)):
            raise ValueError(f"frames: each name must be lower-case letters, digits, '_' or '-', got {name!r}")
        if not isinstance(frame, pd.DataFrame):
            raise ValueError(f"frames[{name!r}] must be a DataFrame, got {type(frame).__name__}")
    if not in_book_build():
        return
    links = []
    for name, frame in frames.items():
        if frame.empty:  # nothing to offer (a table this build did not fill)
            continue
        file = f"{page}-{name}.csv"
        with atomic_path(DATA_FOLDER / file) as tmp:
            frame.to_csv(tmp, index=not isinstance(frame.index, pd.RangeIndex))
        links.append(f"{{download}}`{file} <{DATA_FOLDER.name}/{file}>` ({len(frame):,} rows)")
    if links:
        display(Markdown("**The data behind the figures** (CSV): " + " · ".join(links)))


def scrolling(frame: pd.DataFrame):
    """``frame`` as HTML in the book's sideways-scrolling box (for a table pasted with glue, outside a cell's
    output, where the theme's own scrolling does not apply)."""
    from IPython.display import HTML
    return HTML(f'<div class="table-scroll">{frame_html(frame)}</div>')


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


# ---- runs -> tidy frames ---------------------------------------------------------------------------

def train_runs(configs: dict, use_cache: bool = True, init_states: dict | None = None,
               extras: dict | None = None) -> dict:
    """``{label: TrainResult}`` for ``{label: TrainConfig}`` through the cache, the runs of one architecture
    trained together by ``train_many`` (stacked on a GPU, one after another on a CPU)."""
    groups = {}
    for label, cfg in configs.items():
        groups.setdefault(cfg.model_config(), []).append(label)
    out, store = {}, current()
    for labels in groups.values():
        results = store.train_many([configs[k] for k in labels], use_cache=use_cache,
                                   init_states=[(init_states or {}).get(k) for k in labels],
                                   extras=[(extras or {}).get(k) for k in labels], progress=not in_book_build())
        out.update(zip(labels, results))
    return {label: out[label] for label in configs}


def committed_runs(configs: dict, extra=None) -> dict:
    """The committed results among ``{label: TrainConfig}`` (e.g. the ``paper`` runs shown beside a ``cpu``
    build); labels with no committed result are left out."""
    store = current()
    found = {label: store.committed_result(cfg, extra) for label, cfg in configs.items()}
    return {label: r for label, r in found.items() if r is not None}


def tidy(results: dict, names, table: str = "metrics") -> pd.DataFrame:
    """One tidy frame of ``table`` ("metrics" or "positions") over runs ``{label: TrainResult}``; the label
    (a value or a tuple) becomes the columns ``names`` (a name or a tuple of names)."""
    names = (names,) if isinstance(names, str) else tuple(names)
    frames = []
    for label, result in results.items():
        values = label if isinstance(label, tuple) else (label,)
        frame = getattr(result, table).drop(columns=[n for n in names if n in getattr(result, table)])
        frames.append(frame.assign(**dict(zip(names, values))))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def wall_time(results: dict) -> float:
    """Total training wall time of ``{label: TrainResult}`` in seconds (as recorded when it was computed)."""
    return float(sum(r.meta.get("wall_time_s", 0.0) for r in results.values()))


# ---- milestone tables ------------------------------------------------------------------------------

MILESTONE_COLUMNS = ["partial_step", "jump_step", "plateau_span", "solved_step", "peak_cosine", "peak_rho",
                     "apm_start", "apm_before_jump", "final_acc"]


def readable(table: pd.DataFrame, steps=None, index=None) -> pd.DataFrame:
    """A milestone table for the page: a step never reached reads "none in N steps" instead of NaN, and the steps
    from a switch to the jump of a run never switched (``switched_at`` NaN) read "no switch".

    steps: the run length, one number or a column name of ``table``; index: the columns that name a row (a run), made
    the index so that the page shows no row numbers.
    """
    shown = table.copy()
    for column in ("partial_step", "jump_step", "plateau_span", "solved_step", "steps_to_jump"):
        if column not in shown:
            continue
        budget = shown[steps] if isinstance(steps, str) else pd.Series(steps, index=shown.index)
        shown[column] = [f"{v:.0f}" if pd.notna(v) else (f"none in {b:.0f} steps" if pd.notna(b) else "none")
                         for v, b in zip(shown[column].astype(float), budget)]
    if "steps_to_jump" in shown and "switched_at" in shown:
        shown.loc[shown["switched_at"].isna(), "steps_to_jump"] = "no switch"
    return shown if index is None else shown.set_index(index)


# ---- verdicts and provenance -----------------------------------------------------------------------

def verdicts(claims: list, values: dict, page: str, provenance: dict, labels: dict | None = None,
             status: dict | None = None, record_as: dict | None = None, rerun: dict | None = None,
             rerun_as: str = "nudged initial weights") -> pd.DataFrame:
    """Record the summaries of one figure (``claims``: its chapter's ``claims_of(figure)``) for each preset shown
    and return the page's verdict table.

    values: ``{preset: {claim metric: our number}}``; provenance: ``{preset: {...}}`` (device, seeds,
    wall time, source); ``status``: ``{preset: why its other claims have no number yet}``. One column pair (value,
    verdict) per preset; the rule of each claim last. ``record_as``: ``{preset: the Reproducibility column it
    fills}`` (None: none), for a figure whose run in that column is another preset's (each judged by its own tier).
    Presets
    the Reproducibility page has no column for get their own columns here, headed by ``labels[preset]``,
    judged by the miniature's rule and not recorded. ``rerun``: ``{preset: {claim metric: number}}`` on a re-run
    with every initial weight nudged (``TrainConfig.init_nudge``), or with the perturbation ``rerun_as`` names (a
    sampler's other random stream, as another device's generator draws it): a column each, a verdict it turns
    marked *fragile* (recorded for the Reproducibility page).
    """
    table = pd.DataFrame({"metric": [c.metric for c in claims], "paper": [c.paper for c in claims]})
    rules = {c.metric: c.rule() for c in claims}
    for preset, by_metric in values.items():
        column_of = (record_as or {}).get(preset, preset)
        recorded = column_of in summaries.PRESET_COLUMNS
        judged = summaries.JUDGED_AS.get(preset, "cpu")
        again = (rerun or {}).get(preset)
        rows = {r["metric"]: r for r in summaries.summary_rows(claims, judged, by_metric, rerun=again)}
        if recorded:
            summaries.record_summary(claims, column_of, by_metric, page, provenance.get(preset, {}),
                                     (status or {}).get(preset), judged_as=judged, rerun=again)
        own = recorded and column_of == preset  # a run recorded under another preset's column keeps its own label here
        column = summaries.PRESET_COLUMNS[column_of] if own else (labels or {}).get(preset, preset)
        table[column] = table["metric"].map(lambda m: rows[m]["shown"] if m in rows else "–")
        tag = preset.replace("_", " ")  # a preset's name as a reader reads it ("cpu long", not "cpu_long")
        table[f"verdict ({tag})"] = table["metric"].map(lambda m: rows[m]["verdict"] if m in rows else "–")
        if again is not None:
            table[f"re-run, {rerun_as} ({tag})"] = table["metric"].map(
                lambda m: f"{rows[m]['rerun']} ({rows[m]['rerun verdict']}){': fragile' * rows[m]['fragile']}"
                if "rerun" in rows.get(m, {}) else "–")
    table["rule"] = table["metric"].map(rules)
    return table[[c for c in table if c == "rule" or table[c].ne("–").any()]].set_index("metric")


def run_provenance(results: dict, preset: str) -> list[dict]:
    """Provenance rows of ``{label: TrainResult}``: where each run came from."""
    return [{"preset": preset, "run": ", ".join(map(str, label)) if isinstance(label, tuple) else str(label),
             "device": r.meta.get("device"), "wall time (s)": r.meta.get("wall_time_s"),
             "source": r.meta["cache"] if r.meta.get("cache") else "computed in this build",
             "commit": r.meta.get("commit"), "date": str(r.meta.get("date", ""))[:10]}
            for label, r in results.items()]


def computed_on(results: dict) -> str:
    """Where ``{label: TrainResult}`` drew their data and trained, for the page's words: "a CPU", "a GPU", or "a
    GPU and a CPU" (a run resumed on another device counts each)."""
    kinds = {"a GPU" if device.startswith("cuda") else "a CPU" if device == "cpu" else "an unrecorded device"
             for device in run_devices(results)}
    return " and ".join(k for k in ("a GPU", "a CPU", "an unrecorded device") if k in kinds)


def run_devices(results: dict) -> set[str]:
    """Every device ``{label: TrainResult}`` trained on (a run resumed on another device counts each; "unknown"
    where none is recorded)."""
    return {str(d) for r in results.values()
            for d in r.meta.get("wall_time_s_by_device") or [r.meta.get("device") or "unknown"]}


def provenance_summary(results: dict) -> dict:
    """Devices (every run's, a resumed run's each), seeds, wall time and source of ``{label: TrainResult}``, for a
    recorded summary."""
    devices = run_devices(results)
    sources = {("committed" if r.meta.get("cache", "") and str(r.meta["cache"]).startswith("results")
                else "this build") for r in results.values()}
    return {"device": ", ".join(sorted(devices)) or None, "runs": len(results),
            "seeds": sorted({r.config.get("seed") for r in results.values()}),
            "wall_time_s": round(wall_time(results), 1), "source": ", ".join(sorted(sources)),
            "configs": [r.config for r in results.values()]}


def show_provenance(rows: list[dict], note: str = ""):
    """The page's one provenance block: a collapsed dropdown (``<details id="provenance">``) with a table, and
    ``note`` above it (plain text; `backticks` mark code)."""
    from IPython.display import HTML
    table = frame_html(pd.DataFrame(rows), index=False, classes="dataframe provenance-table", border=0, na_rep="")
    note = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(note))
    return HTML(f'<details class="provenance" id="provenance"><summary>Provenance of every run on this page '
                f'({len(rows)} runs)</summary>{f"<p>{note}</p>" if note else ""}'
                f'<div class="table-scroll">{table}</div></details>')


def tidy_presets(shown: dict, names) -> pd.DataFrame:
    """``tidy`` over ``{preset: {label: TrainResult}}``, with a ``preset`` column."""
    return pd.concat([tidy(results, names).assign(preset=preset) for preset, results in shown.items()],
                     ignore_index=True)


def copy_extras(reference_cfg, configs: dict) -> dict:
    """``{label: the store's extra}`` of ``configs``: the reference run's key for a config that copies from it."""
    reference_key = cache_key(reference_cfg)
    return {label: {"reference": reference_key} if cfg.copy_groups else None for label, cfg in configs.items()}


def copied_runs(reference_cfg, configs: dict, use_cache: bool = True):
    """Fig. 5: the reference run and ``{label: TrainResult}`` for configs whose ``copy_groups`` are copied
    from the reference's trained weights. The reference's weights (not committed) are recomputed only
    when a copied run has to be computed."""
    extra, store = copy_extras(reference_cfg, configs), current()
    need_weights = any(cfg.copy_groups and (not use_cache or store.run(cfg, extra[label]) is None)
                       for label, cfg in configs.items())
    reference = store.train(reference_cfg, use_cache=use_cache, progress=False, need_state=need_weights)
    init = {label: reference.final_state for label, cfg in configs.items() if cfg.copy_groups}
    return reference, train_runs(configs, use_cache, init, extra)


def reference_values(reference, solved_level: float = 0.95) -> dict:
    """The Fig. 5 reference run in numbers, as its page's Markdown pastes them (``glue_texts``): its seed and steps,
    its jump step (``MISSING`` when it never jumped), its final accuracy, whether it solved the task (final accuracy
    at least ``solved_level``: "yes" or "no"; unsolved, its weights are not optimal) and that level."""
    s = plateau_summary(reference.metrics, solved_level=solved_level)
    jump = s["jump_step"]
    return {"reference_seed": str(reference.config["seed"]), "reference_steps": f"{reference.config['steps']:,}",
            "reference_jump_step": MISSING if jump is None or pd.isna(jump) else f"{int(jump):,}",
            "reference_final_acc": value_range([s["final_acc"]], "{:.3f}"),
            "reference_solved": "yes" if s["final_acc"] >= solved_level else "no",
            "reference_solved_level": f"{solved_level:g}"}


# The Reproducibility page's two tables of claims: what a reader comes for (the claim, the paper's value, the verdict
# at the paper's configuration and the miniature's) narrow enough for the text column, then the other kinds of run
# and where each value and band comes from.
REPRODUCIBILITY_PARTS = {
    "verdicts": ["figure", "metric", "paper", PRESET_COLUMNS["paper"], PRESET_COLUMNS["cpu"], "source"],
    "sources": ["figure", "metric", "paper value from", "bands from",
                *[c for p, c in PRESET_COLUMNS.items() if p not in ("cpu", "paper")], summaries.UNTRAINED],
}


def reproducibility(table: pd.DataFrame, sanity: bool = False, part: str = "verdicts"):
    """One of the Reproducibility page's tables as HTML (``part``: a key of ``REPRODUCIBILITY_PARTS``), of its
    claims (``sanity=False``) or its sanity checks, one row per claim under a row naming its figure: the paper
    value's source with its quote folded under it, and the page column linking each page's provenance."""
    import html as html_lib
    from IPython.display import HTML
    if part not in REPRODUCIBILITY_PARTS:
        raise ValueError(f"part must be one of {list(REPRODUCIBILITY_PARTS)}, got {part!r}")
    rows = table[table["sanity check"] == sanity]

    def source(where, quote):
        folded = (f'<details class="source-quote"><summary>quote</summary>“{html_lib.escape(quote)}”</details>'
                  if quote else "")
        return _cell(where) + folded
    shown = rows.map(_cell)
    shown = shown.assign(**{"paper value from": [source(w, q) for w, q in zip(rows["paper value from"], rows["quote"])],
                           "source": [f'<a href="{page}.html#provenance">provenance</a>' for page in rows["source"]]})
    columns = [c for c in REPRODUCIBILITY_PARTS[part] if not (sanity and c == "bands from")]  # a check has no band
    shown = shown[columns].rename(columns={"source": "page", "metric": "claim"})
    names = [c for c in shown.columns if c != "figure"]  # each figure heads its rows instead of filling a column
    head = "".join(f"<th>{html_lib.escape(c)}</th>" for c in names)
    body = []
    for figure, group in shown.groupby("figure", sort=False):
        body.append(f'<tr class="figure-row"><th colspan="{len(names)}">{figure}</th></tr>')
        body += ["<tr>" + "".join(f"<td>{v}</td>" for v in row) + "</tr>" for row in group[names].itertuples(index=False)]
    return HTML(f'<div class="table-scroll"><table class="dataframe reproducibility-table"><thead><tr>{head}</tr></thead>'
                f'<tbody>{"".join(body)}</tbody></table></div>')


def fragile(table: pd.DataFrame) -> pd.DataFrame:
    """The claims of the Reproducibility ``table`` whose verdict a re-run with a floating-point perturbation turned:
    figure, metric and what turned (``summaries.FRAGILE``)."""
    turned = table[table[summaries.FRAGILE].fillna("") != ""]
    return turned[["figure", "metric", summaries.FRAGILE]].rename(columns={summaries.FRAGILE: "turned"})


def not_yet_shown(table: pd.DataFrame, pending: dict, papers: dict) -> pd.DataFrame:
    """The figures of the Reproducibility ``table`` with claims whose ``paper`` column has no verdict yet: the paper
    (``papers``: ``chapters.paper_of()``), how many of the figure's claims wait, and what they wait for
    (``pending``: ``chapters.paper_pending()``), most claims first."""
    column = PRESET_COLUMNS["paper"]
    waiting = table[~table["sanity check"] & (table[column] == table["figure"].map(pending))]
    counts = waiting.groupby("figure").size()
    shown = pd.DataFrame({"paper": counts.index.map(papers), "figure": counts.index, "claims waiting": counts.values,
                          "what they wait for": counts.index.map(pending)})
    return shown.sort_values(["claims waiting", "figure"], ascending=[False, True]).set_index(["paper", "figure"])


ERRATA = REPO_ROOT / "book" / "errata.csv"
ERRATA_COLUMNS = ["date", "figure", "claim", "before", "after", "why"]


def errata(path: Path = ERRATA) -> pd.DataFrame:
    """The book's errata (``book/errata.csv``): each changed verdict of the ``paper`` column, newest first, with
    its date, figure, claim, verdict before and after, and why; ValueError naming a malformed row."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    if list(table.columns) != ERRATA_COLUMNS:
        raise ValueError(f"{path.name} must have the columns {ERRATA_COLUMNS}, got {list(table.columns)}")
    bad = table[(table == "").any(axis=1) | (table["before"] == table["after"])
                | ~table["date"].str.fullmatch(r"\d{4}-\d{2}-\d{2}")]
    if not bad.empty:
        raise ValueError(f"{path.name} rows {list(bad.index + 2)} need a date (YYYY-MM-DD), every field, and a "
                         "verdict that changed")
    return table.sort_values("date", ascending=False, kind="stable").set_index(["date", "figure", "claim"])


def rerun_coverage(summaries_found: list[dict] | None = None) -> tuple[int, str]:
    """How many recorded verdicts a perturbed re-run checked, and which figures' columns ("Fig. 2 (cpu miniature,
    paper preset), …"), from this build's summaries."""
    found = load_summaries() if summaries_found is None else summaries_found
    checked = [(s["figure"], s["preset"]) for s in found for r in s["rows"] if "rerun verdict" in r]
    columns = {}
    for figure, preset in dict.fromkeys(checked):
        columns.setdefault(figure.split(" (")[0], []).append(PRESET_COLUMNS.get(preset, preset))
    return len(checked), "; ".join(f"{figure} ({', '.join(kinds)})" for figure, kinds in columns.items()) or MISSING


def verdict_counts(table: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """How many claims each preset column reproduced, partly reproduced, and so on, with the sanity checks and the
    results shown but not counted apart (they are never verdicts); per ``by`` (a column of ``table``, e.g. the chapter) when given."""
    groups = table.groupby(by, sort=False) if by else [(None, table)]
    frames = []
    for name, rows in groups:  # a cell reads "value (verdict)"
        counts = pd.DataFrame({column: count_verdicts(rows[column].str.extract(r"\(([^()]*)\)$")[0].dropna())
                               for column in PRESET_COLUMNS.values()}, index=[*VERDICTS, *SANITY, NOT_COUNTED])
        frames.append(counts.rename_axis("verdict").assign(**({by: name} if by else {})))
    out = pd.concat(frames)
    return out.reset_index().set_index([by, "verdict"]) if by else out



def paper_claims(table: pd.DataFrame, papers: dict[str, str], paper_of: dict, column: str = PRESET_COLUMNS["paper"]
                 ) -> tuple[dict[str, str], dict[str, pd.DataFrame]]:
    """Each paper's claims in ``column`` of ``summaries.reproducibility_table`` (default: the paper preset's), for
    the per-paper summaries; ``papers``: ``{key: paper}``, ``paper_of``: ``chapters.paper_of()``. Sanity checks and
    results counted under another figure are left out. Returns the counts the summary glues, under
    ``{key}_claims``, ``{key}_reproduced``, ``{key}_partly``, ``{key}_not_reproduced`` and ``{key}_waiting`` (no
    verdict yet), and per key one row per claim: figure, claim, the paper's value, ours and the verdict (or what
    the claim waits for)."""
    texts, tables = {}, {}
    for key, paper in papers.items():
        rows = table[(table["figure"].map(paper_of) == paper) & ~table["sanity check"].astype(bool)]
        verdict = rows[column].str.extract(r"\(([^()]*)\)$")[0]
        counted = ~verdict.str.endswith(NOT_COUNTED, na=False)
        rows, verdict = rows[counted], verdict[counted]
        judged = verdict.isin(VERDICTS)
        counts = count_verdicts(verdict[judged])
        texts |= {f"{key}_claims": f"{len(rows)}", f"{key}_reproduced": f"{counts[VERDICTS[0]]}",
                  f"{key}_partly": f"{counts[VERDICTS[1]]}", f"{key}_not_reproduced": f"{counts[VERDICTS[2]]}",
                  f"{key}_waiting": f"{int((~judged).sum())}"}
        tables[key] = pd.DataFrame({
            "figure": rows["figure"], "claim": rows["metric"], "the paper": rows["paper"],
            "ours": rows[column].str.replace(r"\s*\([^()]*\)$", "", regex=True).where(judged, MISSING),
            "verdict": verdict.where(judged, rows[column])}).set_index(["figure", "claim"])
    return texts, tables

def tally(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """The Reproducibility page's opening tally: one row per (``by``, kind of run) that has any verdict, one
    column per verdict (the sanity checks and the results shown but not counted last, apart)."""
    counts = verdict_counts(table, by).rename_axis(columns="kind of run").stack().unstack("verdict")
    order = {name: i for i, name in enumerate(dict.fromkeys(table[by]))}  # book order, not alphabetical
    counts = counts.sort_index(level=0, key=lambda names: names.map(order), sort_remaining=False)
    counts = counts.loc[counts.sum(axis=1) > 0, [*VERDICTS, *SANITY, NOT_COUNTED]]
    return counts.rename(columns=lambda v: v.replace("sanity check ", "sanity check: "))


def band_tally(table: pd.DataFrame, column: str = PRESET_COLUMNS["paper"]) -> pd.DataFrame:
    """How many of ``column``'s verdicts (default: the paper preset's) rest on each kind of band
    (``verdicts.BAND_KINDS``, each row named by its kind's meaning), one column per verdict; sanity checks are left
    out."""
    judged = table[~table["sanity check"]]
    verdicts = judged[column].str.extract(r"\(([^()]*)\)$")[0]
    counts = pd.DataFrame({kind.meaning: count_verdicts(verdicts[judged["band kind"] == name].dropna())
                           for name, kind in BAND_KINDS.items()}).T.loc[:, list(VERDICTS[:3])]
    return counts.rename_axis("bands from")


def near_edges(edges: pd.DataFrame, within: float = 0.1) -> tuple[dict[str, str], pd.DataFrame]:
    """``(texts, table)`` of the verdicts of ``summaries.edge_table`` that sit within ``within`` (a fraction) of an
    edge their bands set. ``texts`` as the page glues them: ``near_total``, the verdicts with such an edge;
    ``near_count``, how many of them are near it ("none"); ``near_within`` ("10%"). The table lists those near,
    nearest first."""
    near = edges[edges["distance"] <= within]
    texts = {"near_total": f"{len(edges)}", "near_count": f"{len(near)}" if len(near) else "none",
             "near_within": f"{within:.0%}"}
    shown = near.assign(edge=near["edge"].map("{:g}".format), distance=near["distance"].map("{:.1%}".format))
    return texts, shown.rename(columns={"distance": "distance to it"}).set_index(["figure", "metric"])[
        ["ours", "verdict", "edge", "distance to it"]]


def tally_html(counts: pd.DataFrame):
    """``tally``'s counts as one narrow HTML table for the text column: each group (a paper) a full-width row, its
    kinds of run under it, one column per verdict (the sanity checks last, set apart)."""
    import html as html_lib
    from IPython.display import HTML
    columns = list(counts.columns)
    head = "".join(f'<th class="{"tally-sanity" if _apart(c) else ""}">{html_lib.escape(c)}</th>'
                   for c in columns)
    rows = []
    for group, part in counts.groupby(level=0, sort=False):
        rows.append(f'<tr class="tally-chapter"><th colspan="{len(columns) + 1}">{html_lib.escape(str(group))}</th></tr>')
        rows += [f'<tr><td>{html_lib.escape(str(kind))}</td>'
                 + "".join(f'<td class="{"tally-sanity" if _apart(c) else ""}">{int(n)}</td>'
                           for c, n in zip(columns, values)) + "</tr>"
                 for (_, kind), values in zip(part.index, part.to_numpy())]
    return HTML(f'<div class="table-scroll"><table class="tally-table"><thead><tr><th>kind of run</th>{head}</tr>'
                f'</thead><tbody>{"".join(rows)}</tbody></table></div>')


# ---- the verdict box that opens a figure page --------------------------------------------------------------------

VERDICT_BOX = "verdict_box"  # the glue key a page's opening Markdown pastes (```{glue} verdict_box```)


# What a figure's box shows in place of verdicts at the paper's configuration, where it has none, each named for
# what it is: the paper's data on a smaller model, models shaped like the paper's, an estimator check at this
# book's setting, the long CPU run (a miniature, judged as one).
STAND_INS = {"paper_data": f"Standing in ({PRESET_COLUMNS['paper_data']})",
             "trained_shape": f"Standing in ({PRESET_COLUMNS['trained_shape']})",
             "estimator_check": "At this book's own setting",
             "cpu_long": "In miniature (the long CPU run, judged as a miniature)"}


def verdict_box_html(figures: list[str], pending: dict, summaries: list[dict] | None = None, answers: str = "") -> str:
    """The box that opens a figure page: for each of its ``figures``, the claims judged at the paper's
    configuration (the ``paper`` column this build recorded), with the tally (sanity checks apart), or why the
    column is empty (the page's recorded status, else ``pending``: ``chapters.paper_pending()``); then ``answers``
    (``answers_html``: the page's own questions), if any."""
    import html as html_lib
    found = {(s["figure"], s["preset"]): s for s in (load_summaries() if summaries is None else summaries)}
    parts = []
    for figure in figures:
        summary = found.get((figure, "paper"))
        rows = summary["rows"] if summary else []
        head = f'<p class="verdict-box-figure">{html_lib.escape(figure)}</p>'
        if not rows:
            why = (summary or {}).get("status") or pending.get(figure, "no run at the paper's configuration yet")
            stand_ins = [f" {STAND_INS[p]}: {_tally(found[(figure, p)]['rows'])}."
                         for p in STAND_INS if found.get((figure, p), {}).get("rows")]
            more = "".join(stand_ins)
            parts.append(f'{head}<p>No verdict at the paper\'s configuration: {html_lib.escape(why)}.'
                         f'{html_lib.escape(more)}</p>')
            continue
        tally = _tally(rows)
        ordered = sorted(rows, key=lambda r: _apart(r["verdict"]))  # the sanity checks and uncounted results last
        body = "".join(
            f'<tr class="{"sanity-row" if _apart(r["verdict"]) else ""}"><td>{html_lib.escape(r["metric"])}</td>'
            f'<td>{html_lib.escape(r["paper"])}</td><td>{html_lib.escape(r["shown"])}</td>'
            f'<td class="verdict-{slug(r["verdict"])}">{html_lib.escape(r["verdict"] + _fragile(r))}</td></tr>'
            for r in ordered)
        parts.append(f'{head}<p class="verdict-box-tally">At the paper\'s configuration: {tally}.</p>'
                     f'<div class="table-scroll"><table class="verdict-box-table"><thead><tr><th>claim</th>'
                     f'<th>paper</th><th>ours</th><th>verdict</th></tr></thead><tbody>{body}</tbody></table></div>')
    return f'<div class="verdict-box" id="verdict-box">{"".join(parts)}{answers}</div>'


def _fragile(row: dict) -> str:
    """" (fragile: a re-run gives partly, 0.88)" for a summary row whose verdict a perturbed re-run turned, else ""."""
    return f" (fragile: a re-run gives {row['rerun verdict']}, {row['rerun']})" if row.get("fragile") else ""


def _apart(verdict: str) -> bool:
    """Whether a verdict (or tally column) stands apart from the counted ones: a sanity check, or shown only."""
    return verdict in SANITY or verdict.startswith("sanity") or verdict.endswith(NOT_COUNTED)


def _tally(rows: list[dict]) -> str:
    """"3 reproduced, 1 partly; 2 sanity checks and 1 result counted under another figure, not counted" of a
    summary's rows."""
    counts = count_verdicts(r["verdict"] for r in rows)
    tally = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v]) or "no verdict"
    checks, shown = sum(counts[v] for v in SANITY), counts[NOT_COUNTED]
    apart = [f"{checks} sanity check{'s' * (checks != 1)}"] * bool(checks) + [f"{shown} shown only"] * bool(shown)
    return tally + (f"; {' and '.join(apart)}, not counted" if apart else "")


def value_range(values, fmt: str = "{:.2f}") -> str:
    """The lowest to the highest of ``values`` by ``fmt`` ("0.23–0.28"; "−20 to 40" when the lowest is negative;
    one number when they agree, ∞ for a milestone never reached in a ratio, ``MISSING`` when none is a number):
    a number for the page's prose."""
    found = sorted(float(v) for v in values if v is not None and not math.isnan(float(v)))
    if not found:
        return MISSING
    low, high = (("−∞" if v < 0 else "∞") if math.isinf(v) else re.sub(r"^-", "−", fmt.format(v))
                 for v in (found[0], found[-1]))
    return low if low == high else f"{low} to {high}" if found[0] < 0 else f"{low}–{high}"


def seed_range(claim, value) -> str:
    """``value`` (a number, or a :class:`~plateau_lib.book.verdicts.BySeed`) as the claim formats a number, a range
    over the seeds ("0.88–1"), or ``MISSING`` when no seed reached it: a number for the page's prose."""
    return value_range(value.values.values() if isinstance(value, BySeed) else [value], claim.fmt)


def glue_seed_ranges(claims: list, values: dict, names: dict, presets=("cpu", "paper")) -> None:
    """Glue, for each of ``presets`` and each ``{glue name: claim metric}`` of ``names``, that claim's value in
    ``values`` (``{preset: {metric: number or BySeed}}``) as ``seed_range`` writes it, under ``{name}_{preset}``
    (``MISSING`` for a preset not shown): the numbers the page's Markdown pastes with {glue:md}`name_preset`."""
    by_metric = {c.metric: c for c in claims}
    unknown = sorted(set(names.values()) - set(by_metric))
    if unknown:
        raise ValueError(f"names must map to claims of this figure; unknown {unknown}, allowed {sorted(by_metric)}")
    glue_texts({f"{name}_{preset}": seed_range(by_metric[metric], values[preset][metric])
                if metric in values.get(preset, {}) else MISSING for name, metric in names.items() for preset in presets})


def glue_texts(texts: dict) -> None:
    """Glue each ``{name: text}`` (a number or a run's name, already written as the page shows it) as Markdown,
    for the page's prose to paste inline ({glue:md}`name`)."""
    from IPython.display import Markdown
    from myst_nb import glue
    for name, text in texts.items():
        glue(name, Markdown(str(text)), display=False)


def glue_verdict_box(figures: list[str], pending: dict, none: str = "", answers: pd.DataFrame | None = None,
                     answered_on: str = "") -> None:
    """Glue the page's verdict box (``verdict_box_html``; ``none``: why a page without ``figures`` has no verdicts)
    under ``VERDICT_BOX`` for its opening Markdown to paste (MyST-NB's glue: a page shows, at its top, the verdicts
    its later cells recorded). Call it after the page's last verdict table. Questions of the page's own that no
    paper asks go below its verdicts (or stand alone on a page without any) as ``answers`` (columns question,
    answer), measured on ``answered_on``."""
    from IPython.display import HTML
    from myst_nb import glue
    if not figures and not none:
        raise ValueError("glue_verdict_box needs the page's figures, or none: why the page has no verdicts")
    if answers is not None and (list(answers.columns) != ["question", "answer"] or not answered_on):
        raise ValueError("answers are a table of the columns question and answer, with answered_on naming the runs; "
                         f"got columns {list(answers.columns)} and answered_on {answered_on!r}")
    box = (verdict_box_html(figures, pending, answers=answers_html(answers, answered_on)) if figures else
           answers_box_html(none, answers, answered_on))
    glue(VERDICT_BOX, HTML(box), display=False)


def answers_box_html(none: str, answers: pd.DataFrame | None = None, answered_on: str = "") -> str:
    """The opening box of a page without verdicts: why it has none, then the page's own questions and their
    answers (``answers``: columns question, answer) measured on ``answered_on``, if it gives them."""
    import html as html_lib
    text = f"<p>No verdicts on this page: {html_lib.escape(none)}</p>" + answers_html(answers, answered_on)
    return f'<div class="verdict-box" id="verdict-box">{text}</div>'


def answers_html(answers: pd.DataFrame | None, answered_on: str) -> str:
    """The page's own questions and their answers (``answers``: columns question, answer), measured on
    ``answered_on``, as a verdict box shows them ("" without any)."""
    import html as html_lib
    if answers is None or not len(answers):
        return ""
    body = "".join(f"<tr><td>{html_lib.escape(str(q))}</td><td>{html_lib.escape(str(a))}</td></tr>"
                   for q, a in zip(answers["question"], answers["answer"]))
    return (f'<p class="verdict-box-tally">Its own questions, answered on {html_lib.escape(answered_on)}:</p>'
            '<div class="table-scroll"><table class="verdict-box-table"><thead><tr><th>question</th>'
            f"<th>answer</th></tr></thead><tbody>{body}</tbody></table></div>")
