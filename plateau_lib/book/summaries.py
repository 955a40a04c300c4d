"""Run summaries: each figure page records its paper-vs-ours numbers with verdicts; the Reproducibility
page tabulates them.

A page records one summary per preset it shows (its live run, and committed ``paper`` runs beside it)
into ``summaries_dir()``: ``$PLATEAU_SUMMARIES`` (the book build sets ``book/figures/_summaries`` and
empties it first, so the Reproducibility page shows exactly what this build's pages show) or else
``.cache/summaries``. The numbers come from the results the page itself showed, so the cache rule of
``plateau_lib.engine.cache`` holds here too: a plain build shows committed results, a recomputing build what
it recomputed.
"""
from __future__ import annotations

import json
import math
import os
import re
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from plateau_lib.book.verdicts import SOURCE_KINDS, AtLeast, BySeed
from plateau_lib.engine.utils import REPO_ROOT, git_commit, write_json

# One column, one kind of run. A long CPU run is still a miniature: judged by the cpu rule (scale-bound claims are not
# comparable). The paper's data with a smaller model (Carroll's CPU transient sweep) has its own column and rule
# (``Claim.model_bound``). Models trained here in the shapes of the papers' language models (Pythia, OLMo-2) are
# not the papers' models: their own column, judged as miniatures. A check of the estimator against a closed-form
# answer on models no paper used (deep linear networks) has its own column, judged by the full rule: the answer is
# exact at any size. The paper preset holds only the papers' configs.
PRESET_COLUMNS = {"cpu": "cpu miniature", "cpu_long": "long CPU run", "paper_data": "paper's data, smaller model",
                  "trained_shape": "trained here in the paper's model shapes",
                  "estimator_check": "estimator check, this book's setting", "paper": "paper preset"}
JUDGED_AS = {"cpu": "cpu", "cpu_long": "cpu", "cpu_d8": "paper_data", "cpu_d8_50k": "paper_data",
             "paper_data": "paper_data", "trained_shape": "cpu",
             "estimator_check": "paper", "paper": "paper"}
# The column of each claim's measure on models that have learned nothing (the paper configs, never updated).
UNTRAINED = "untrained model (must fail)"
# A verdict that a re-run with a floating-point perturbation turns: "column: verdict → re-run's (value → value)".
FRAGILE = "fragile: turned by a perturbed re-run"
# Only some pages have these; elsewhere their columns read "–", not "no run yet".
OPTIONAL_PRESETS = ("cpu_long", "paper_data", "trained_shape", "estimator_check")


def summaries_dir() -> Path:
    """Where summaries are written and read: ``$PLATEAU_SUMMARIES`` or ``.cache/summaries``."""
    return Path(os.environ.get("PLATEAU_SUMMARIES") or REPO_ROOT / ".cache" / "summaries")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "-", text).strip("-").lower()


def summary_rows(claims: list, preset: str, values: dict, judged_as: str | None = None,
                 rerun: dict | None = None) -> list[dict]:
    """One row per claim of one figure (``claims``, its chapter's ``claims_of(figure)``): paper, ours (float or
    None), shown text, verdict and rule.

    ``values`` maps each claim's metric to our number (None/NaN: never reached), or to a ``BySeed`` (judged seed
    by seed; "ours" is their median, and the row keeps each seed's under "by seed"); unknown metrics raise. A value
    known only from below (:class:`AtLeast`) is listed under "lower bounds" ("ours", or its seed).
    ``rerun``: the same measures on a re-run with a floating-point perturbation (``TrainConfig.init_nudge``); the
    row keeps its shown value and verdict ("rerun", "rerun verdict") and whether the verdict turned ("fragile").
    """
    figure = claims[0].figure
    unknown = sorted(set(values) - {c.metric for c in claims})
    if unknown:
        raise ValueError(f"no claim named {unknown} for {figure!r}; claims: {[c.metric for c in claims]}")
    rows = []
    for c in claims:
        if c.metric not in values:
            continue
        given = values[c.metric]
        ours = None if given is None or math.isnan(float(given)) else float(given)
        judged = given if isinstance(given, BySeed) else ours
        tier = judged_as or JUDGED_AS.get(preset, preset)
        row = {"metric": c.metric, "paper": c.paper, "ours": ours, "shown": c.show(judged),
               "verdict": c.judge(judged, tier), "rule": c.rule()}
        if c.uncounted:
            row["not counted"] = c.uncounted
        if isinstance(given, BySeed):
            row["by seed"] = {str(k): float(v) for k, v in sorted(given.values.items())}
            if len(given.values) > 1:
                row["shown"] += f", {c.seeds_in_band(given, tier)}"
        bounds = ([str(k) for k, v in sorted(given.values.items()) if isinstance(v, AtLeast)]
                  if isinstance(given, BySeed) else ["ours"] if isinstance(given, AtLeast) else [])
        if bounds:
            row["lower bounds"] = bounds
        if rerun is not None and c.metric in rerun:
            again = rerun[c.metric]
            row.update({"rerun": c.show(again), "rerun verdict": c.judge(again, tier)})
            row["fragile"] = row["rerun verdict"] != row["verdict"]
        rows.append(row)
    return rows


def stored_value(row: dict) -> float | BySeed | None:
    """A summary row's number as ``summary_rows`` judged it: a :class:`BySeed` where it kept each seed's, and each
    value it recorded under "lower bounds" an :class:`AtLeast` again ("ours", or a seed)."""
    bounds = set(row.get("lower bounds", ()))
    if row.get("by seed"):
        return BySeed({int(k): AtLeast(v) if k in bounds else v for k, v in row["by seed"].items()})
    return AtLeast(row["ours"]) if "ours" in bounds and row["ours"] is not None else row["ours"]


def record_summary(claims: list, preset: str, values: dict, page: str, provenance: dict,
                   status: str | None = None, judged_as: str | None = None, rerun: dict | None = None) -> Path:
    """Write the summary of one figure (``claims``) for ``preset`` (``provenance``: device, seeds, wall time, source).
    ``status``: the claims not in ``values`` are still being made (e.g. a run whose training is finished and whose
    λ̂ is not): the Reproducibility page shows it for them, as ``record_status`` does for a whole figure.
    ``judged_as``: the judging tier when the column's run is another preset's (``pages.verdicts``' record_as).
    ``rerun``: the same measures on a perturbed re-run (``summary_rows``)."""
    figure = claims[0].figure
    summary = {"figure": figure, "preset": preset, "page": page,
               "rows": summary_rows(claims, preset, values, judged_as, rerun),
               "provenance": provenance, "commit": git_commit(),
               "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if status:
        summary["status"] = status
    path = summaries_dir() / f"{slug(figure)}-{preset}.json"
    write_json(path, summary)
    return path


def record_status(figure: str, preset: str, page: str, status: str) -> Path:
    """Say why ``figure`` has no ``preset`` numbers yet (e.g. "in progress: step 180,000 of 500,000 on a CPU", or
    "left for a GPU: three CPU-days a run"): the Reproducibility page shows it in place of "no run yet". A figure
    that records numbers for ``preset`` replaces it."""
    summary = {"figure": figure, "preset": preset, "page": page, "rows": [], "status": status,
               "commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path = summaries_dir() / f"{slug(figure)}-{preset}.json"
    write_json(path, summary)
    return path


def load_summaries() -> list[dict]:
    """Every summary in ``summaries_dir()``."""
    folder = summaries_dir()
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def reproducibility_table(claims: list, pending: dict, summaries: list[dict] | None = None,
                          untrained: dict | None = None) -> pd.DataFrame:
    """One wide table of ``claims`` (every chapter's, in book order: ``chapters.claims()``): figure | metric |
    paper | where the paper value comes from | its quote | where the bands come from (``bands from``, and its
    ``band kind``) | one "value (verdict)" column per preset | the untrained
    model's "value (verdict)" (``untrained``: ``chapters.untrained_values()``; a claim without a baseline says why) |
    the verdicts a perturbed re-run turned (``FRAGILE``; empty: none, or no re-run) | whether it is a sanity check |
    the page.

    A claim no page recorded for a preset reads the status its page recorded (``record_status``: a run in
    progress), else for the paper column why it is pending (``pending``: ``chapters.paper_pending()``), else "no run yet"; a
    figure with no run of an optional preset (the long CPU runs) reads "–" in that column.
    """
    summaries = load_summaries() if summaries is None else summaries
    found = {(s["figure"], s["preset"], r["metric"]): (r, s) for s in summaries for r in s["rows"]}
    pages = {s["figure"]: s["page"] for s in summaries}
    has = {(s["figure"], s["preset"]) for s in summaries}
    status = {(s["figure"], s["preset"]): s["status"] for s in summaries if s.get("status")}
    rows = []
    for claim in claims:
        if claim.figure not in pages:
            continue
        row = {"figure": claim.figure, "metric": claim.metric, "paper": claim.paper,
               "paper value from": f"{SOURCE_KINDS[claim.source.kind]} ({claim.source.where})" if claim.source else "",
               "quote": claim.source.quote if claim.source else "",
               "bands from": str(claim.band) if claim.band else "none: a sanity check",
               "band kind": claim.band.kind if claim.band else ""}
        for preset, column in PRESET_COLUMNS.items():
            hit = found.get((claim.figure, preset, claim.metric))
            why = pending.get(claim.figure, "no run yet") if preset == "paper" else "no run yet"
            absent = "–" if preset in OPTIONAL_PRESETS and (claim.figure, preset) not in has else \
                status.get((claim.figure, preset), why)
            row[column] = f"{hit[0]['shown']} ({hit[0]['verdict']})" if hit else absent
        baseline = (untrained or {}).get(claim.figure, {})
        row[UNTRAINED] = (f"none: {claim.no_baseline}" if claim.no_baseline else
                          f"{claim.show(baseline[claim.metric])} ({claim.judge(baseline[claim.metric], 'paper')})"
                          if claim.metric in baseline else "no baseline run yet")
        recorded = {p: found[(claim.figure, p, claim.metric)][0] for p in PRESET_COLUMNS
                    if (claim.figure, p, claim.metric) in found}
        turned = [f"{PRESET_COLUMNS[p]}: {r['verdict']} → {r['rerun verdict']} ({r['shown']} → {r['rerun']})"
                  for p, r in recorded.items() if r.get("fragile")]
        row[FRAGILE] = "; ".join(turned)
        row["sanity check"] = bool(claim.sanity)
        row["source"] = pages[claim.figure]
        rows.append(row)
    return pd.DataFrame(rows, columns=["figure", "metric", "paper", "paper value from", "quote", "bands from",
                                       "band kind", *PRESET_COLUMNS.values(), UNTRAINED, FRAGILE, "sanity check",
                                       "source"])


def edge_table(claims: list, kind: str = "reading", preset: str = "paper",
               summaries: list[dict] | None = None) -> pd.DataFrame:
    """How close each ``preset`` verdict resting on a band of ``kind`` (``verdicts.BAND_KINDS``) sits to the
    nearest edge its bands set (``Claim.nearest_edge``): figure, metric, ours (as shown), verdict, rule, edge and
    distance (a fraction of the edge), nearest first. A verdict near an edge is one a slightly different band
    would turn."""
    summaries = load_summaries() if summaries is None else summaries
    found = {(s["figure"], r["metric"]): r for s in summaries if s["preset"] == preset for r in s["rows"]}
    rows = []
    for claim in claims:
        row = found.get((claim.figure, claim.metric))
        if claim.sanity or claim.band is None or claim.band.kind != kind or row is None:
            continue
        edge, distance = claim.nearest_edge(stored_value(row))
        rows.append({"figure": claim.figure, "metric": claim.metric, "ours": row["shown"], "verdict": row["verdict"],
                     "rule": row["rule"], "edge": edge, "distance": distance})
    columns = ["figure", "metric", "ours", "verdict", "rule", "edge", "distance"]
    return pd.DataFrame(rows, columns=columns).sort_values("distance", na_position="last", ignore_index=True)


def mean_sd(values) -> str:
    """'mean ± sd (n = k)' over the finite values; 'n/a (no run reached it)' if there are none."""
    v = pd.Series(values, dtype=float).dropna()
    if v.empty:
        return "n/a (no run reached it)"
    sd = f" ± {v.std(ddof=1):.3g}" if len(v) > 1 else ""
    return f"{v.mean():.3g}{sd} (n = {len(v)})"
