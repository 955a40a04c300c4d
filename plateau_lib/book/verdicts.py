"""What each paper reports, and the rule that judges our number against it.

A :class:`Claim` is one "paper vs ours" number: the paper's statement, and two closed bands. Ours inside
``reproduced`` is *reproduced*, inside the wider ``partly`` band *partly*, anywhere else *not reproduced*.
A claim that a model which has learned nothing passes as well (``sanity``) is a *sanity check*: passed inside the
``partly`` band, failed outside, and never counted among the verdicts. A claim whose number depends on the model's scale (steps to a jump at another learning rate, say) is
*not comparable at this scale* for the ``cpu`` miniature; the ``paper`` preset is always judged. Between the two,
a ``paper_data`` run has the paper's data and task with a smaller model: it is judged except on claims that are
also ``model_bound`` (a number set by the model's width and training length, such as where a switch falls).
Every claim says where the paper's value comes from (:class:`Source`), and either has a baseline (the same measure
on a model that has learned nothing: ``engine.train.untrained`` through the page's own code, gathered by
``plateau_lib.chapters.untrained_values``), which must come out *not reproduced*, or says why it has none
(``no_baseline``: a ratio between conditions, a check of the estimator against a closed form).
A claim about a configuration, which the paper backs with several model seeds, can be judged on several of ours
(:class:`BySeed`): each seed is judged alone, and the verdict is theirs where they agree, else *partly* (or *not
reproduced* where none reaches the ``partly`` band). It is never a mean that hides a seed.
A result is counted once, under the figure the paper gives it to: the same measure on the same runs elsewhere names
that claim (``counted_under``) and is *shown, not counted*, as is a claim whose paper value no available source
confirms (a ``Source`` of kind "unconfirmed") or one whose "paper value" is the configuration itself
(``not_counted``: why). Its verdict reads "reproduced; shown, not counted", and no tally counts it.
Each chapter lists its claims in its ``claims`` module (``CLAIMS``, ``PAPER_PENDING``); ``plateau_lib.chapters``
gathers them in book order for the Reproducibility page.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field, replace
from typing import NamedTuple

VERDICTS = ("reproduced", "partly", "not reproduced", "not comparable at this scale")
# A claim that a model which has learned nothing passes too (the untrained model, chance, or the data's own statistic)
# is a sanity check: shown with its own verdict and left out of every tally of VERDICTS.
SANITY = ("sanity check passed", "sanity check failed")
# A verdict shown beside its claim but left out of every tally (``Claim.uncounted``): "reproduced; shown, not counted".
NOT_COUNTED = "shown, not counted"
INF = math.inf
# Where a paper value comes from: the paper's text (quoted), read off one of its figures (approximate), the authors'
# code or logged data (the reference notes), this book's own inference, or no available source.
SOURCE_KINDS = {"text": "the paper's text", "summary": "a summary of the paper (not its full text)",
                "figure": "read off a figure (approximate)",
                "code": "the authors' code or logged data", "inference": "this book's inference",
                "unconfirmed": "no available source confirms it"}
# Where a claim's *reproduced* band comes from: the paper's own seeds, range, bound or count; the book's tolerance
# around a value the paper gives approximately (or without a spread); or the book's reading of a qualitative
# statement as a number ("significantly faster" as under half the baseline's step). Each kind has a short ``label``,
# put before a band's reason in the claims table, and a ``meaning``, the row of the page's band tally.
class BandKind(NamedTuple):
    label: str
    meaning: str


BAND_KINDS = {"paper": BandKind("the paper's own", "the paper's own spread, bound or count"),
              "tolerance": BandKind("the book's tolerance", "the book's tolerance around the paper's value"),
              "reading": BandKind("the book's reading", "the book's reading of a qualitative statement")}


@dataclass(frozen=True)
class Source:
    """Where a claim's paper value comes from: ``kind`` (one of ``SOURCE_KINDS``), ``where`` (the paper and
    section, the figure, or the reference note's section) and ``quote`` (the words, where the text states it)."""
    kind: str
    where: str
    quote: str = ""

    def __post_init__(self):
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"Source kind must be one of {sorted(SOURCE_KINDS)}, got {self.kind!r}")
        if not self.where:
            raise ValueError("Source where must name the paper section, figure or reference note")

    def __str__(self) -> str:
        quote = f": “{self.quote}”" if self.quote else ""
        return f"{SOURCE_KINDS[self.kind]} ({self.where}){quote}"


@dataclass(frozen=True)
class Band:
    """Where a claim's bands come from: ``kind`` (one of ``BAND_KINDS``) and ``why`` (the spread, bound or count
    the paper gives, or the book's tolerance or reading in words)."""
    kind: str
    why: str

    def __post_init__(self):
        if self.kind not in BAND_KINDS:
            raise ValueError(f"Band kind must be one of {sorted(BAND_KINDS)}, got {self.kind!r}")
        if not self.why:
            raise ValueError("Band why must say which spread, bound, tolerance or reading gives the band")

    def __str__(self) -> str:
        return f"{BAND_KINDS[self.kind].label}: {self.why}"


# A claim whose paper value is "≈ x" is judged on a band the book put around x (the claim's own comment gives the
# figure it was read from); other claims name their band's basis in the chapter's ``BANDS``.
APPROXIMATE = Band("tolerance", "a band around the paper's approximate value")


class AtLeast(float):
    """A number known only from below: a ratio whose milestone came after its run ended, with the run's length in
    its place. It decides a band with no upper edge (any larger value is in it too), no other; shown "≥ x"."""


@dataclass(frozen=True)
class BySeed:
    """Our number at each of several model seeds of one configuration (``values``: ``{seed: number}``; NaN: the
    seed never reached it). ``float()`` is the median over the seeds that reached it (NaN if none did)."""
    values: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.values:
            raise ValueError("BySeed values must hold at least one {seed: number}")

    def __float__(self) -> float:
        reached = [float(v) for v in self.values.values() if v is not None and not math.isnan(float(v))]
        return statistics.median(reached) if reached else math.nan


def combine_seed_verdicts(verdicts: list[str]) -> str:
    """One verdict for several seeds' (``VERDICTS`` or ``SANITY``): theirs where every seed agrees; otherwise
    *partly* if some seed is reproduced or partly (a sanity check: failed), else *not reproduced*."""
    if len(set(verdicts)) == 1:
        return verdicts[0]
    if set(verdicts) <= set(SANITY):
        return SANITY[1]
    return VERDICTS[1] if set(verdicts) & set(VERDICTS[:2]) else VERDICTS[2]


@dataclass(frozen=True)
class Claim:
    """One number the paper reports and the bands that judge ours (see the module docstring)."""
    figure: str
    metric: str
    paper: str
    reproduced: tuple[float, float]
    partly: tuple[float, float]
    scale_bound: bool = False       # True: a miniature's value is not comparable with the paper's
    model_bound: bool = False       # True (with scale_bound): not comparable either at the paper's data with a smaller model
    missing: str = "not reached"    # how a missing value (NaN: the milestone never came) is shown
    missing_as: float | None = None  # judge a missing value as this number (e.g. inf: "later than the run")
    fmt: str = "{:.3g}"
    sanity: str = ""                # non-empty: a sanity check, and why (the baseline that passes it too)
    source: Source | None = None    # where the paper value comes from (every claim has one; tests check)
    band: Band | None = None        # where the bands come from (every claim but a sanity check has one)
    no_baseline: str = ""           # non-empty: why no untrained baseline is defined (else chapters.untrained_values has it)
    counted_under: str = ""         # "figure: metric" of the claim that counts the same measure on the same runs
    not_counted: str = ""           # non-empty: why this claim is shown but no verdict (e.g. its value is the config's)

    @property
    def uncounted(self) -> str:
        """Why the claim is shown but not counted ("" if it is counted): the same result counted under another
        figure, a value that is the configuration itself, or a paper value no available source confirms."""
        if self.counted_under:
            return f"the same result is counted under {self.counted_under}"
        if self.not_counted:
            return self.not_counted
        if self.source is not None and self.source.kind == "unconfirmed" and not self.sanity:
            return "no available source confirms the paper's value"
        return ""

    def rule(self) -> str:
        """The rule in words, shown on the page next to the verdict."""
        def band(lo, hi):
            if lo == hi:
                return f"= {lo:g}"
            if hi == INF:
                return f"≥ {lo:g}"
            return f"≤ {hi:g}" if lo in (0, -INF) else f"{lo:g}–{hi:g}"
        if self.sanity:
            return f"sanity check, passed if {band(*self.partly)}: {self.sanity}"
        text = f"reproduced if {band(*self.reproduced)}, partly if {band(*self.partly)}"
        if self.model_bound:
            return text + "; not comparable below the paper's model"
        return text + ("; the cpu miniature is not comparable" if self.scale_bound else "")

    def judge(self, ours: float | BySeed | None, preset: str) -> str:
        """The verdict on ``ours`` (None or NaN: the milestone was never reached; :class:`BySeed`: each seed judged,
        then ``combine_seed_verdicts``) for ``preset``; "…; shown, not counted" for a claim that is ``uncounted``."""
        verdict = self._verdict(ours, preset)
        return f"{verdict}; {NOT_COUNTED}" if self.uncounted and verdict in VERDICTS else verdict

    def seeds_in_band(self, ours: BySeed, preset: str) -> str:
        """"2 of 3 seeds reproduced": how many of ``ours``' seeds fall inside the *reproduced* band (a sanity
        check: pass)."""
        verdicts = [self._verdict(v, preset) for v in ours.values.values()]
        hit = SANITY[0] if self.sanity else VERDICTS[0]
        return f"{verdicts.count(hit)} of {len(verdicts)} seeds {'passed' if self.sanity else hit}"

    def _verdict(self, ours: float | BySeed | None, preset: str) -> str:
        if isinstance(ours, BySeed):
            return combine_seed_verdicts([self._verdict(v, preset) for v in ours.values.values()])
        if preset not in ("cpu", "paper_data", "paper"):
            raise ValueError(f"preset must be 'cpu', 'paper_data' or 'paper', got {preset!r}")
        if (self.scale_bound and preset == "cpu") or (self.model_bound and preset == "paper_data"):
            return VERDICTS[3]
        value = self.missing_as if ours is None or math.isnan(ours) else ours
        if self.sanity:
            return SANITY[0] if value is not None and self.partly[0] <= value <= self.partly[1] else SANITY[1]
        if value is None:
            return VERDICTS[2]
        for verdict, (lo, hi) in zip(VERDICTS, (self.reproduced, self.partly)):
            if lo <= value <= hi and (hi == INF or not isinstance(value, AtLeast)):
                return verdict
        return VERDICTS[2]

    def nearest_edge(self, ours: float | BySeed | None) -> tuple[float, float]:
        """``(edge, distance)``: the band edge nearest ``ours`` among those the book's bands set, and how far ours
        is from it as a fraction of the edge (``|ours − edge| / |edge|``; a :class:`BySeed`: its nearest seed).
        The edges set are those where the *reproduced* and *partly* bands differ; an edge both share is the
        measure's own bound (1 for a cosine), and infinite or zero edges have no relative distance. ``(nan, nan)``
        when there is no such edge or no value."""
        values = list(ours.values.values()) if isinstance(ours, BySeed) else [ours]
        values = [float(v) for v in values if v is not None and not math.isnan(float(v)) and not math.isinf(float(v))]
        shared = set(self.reproduced) & set(self.partly)
        edges = {e for e in (*self.reproduced, *self.partly) if math.isfinite(e) and e != 0 and e not in shared}
        pairs = [(abs(v - e) / abs(e), e) for v in values for e in edges]
        if not pairs:
            return math.nan, math.nan
        distance, edge = min(pairs)
        return edge, distance

    def show(self, ours: float | BySeed | None) -> str:
        """``ours`` formatted (≥ x: :class:`AtLeast`), or the ``missing`` text; a
        :class:`BySeed` as each seed's, in seed order ("169.3, 162.5 and 169.0 (seeds 0, 1 and 2)"; the same text at
        seeds once where no seed reached it, "no jump in 600 steps (seeds 0, 1 and 2)"; a number at each seed, even
        the same, so that it cannot read as a mean)."""
        if isinstance(ours, BySeed):
            seeds = sorted(ours.values)
            shown = [self.show(ours.values[s]) for s in seeds]
            if len(seeds) > 1 and all(v is None or math.isnan(v) for v in ours.values.values()):
                shown = shown[:1]
            return f"{listed(shown)} (seed{'s' if len(seeds) > 1 else ''} {listed([str(s) for s in seeds])})"
        if ours is None or math.isnan(ours):
            return self.missing
        if isinstance(ours, AtLeast):
            return f"≥ {self.fmt.format(ours)}"
        return ("∞" if ours > 0 else "−∞") if math.isinf(ours) else self.apart_from_edges(float(ours))

    def bands_of(self, value: float) -> tuple[bool, bool]:
        """Whether ``value`` lies in the reproduced band and in the partly band (edges included)."""
        return tuple(lo <= value <= hi for lo, hi in (self.reproduced, self.partly))

    def apart_from_edges(self, value: float) -> str:
        """``value`` by ``fmt``, with ``fmt``'s precision raised where it would write the value as a band edge on the
        other side of it (0.899 against a band from 0.9 reads "0.899", not "0.90"; 19.96% against 20% reads "19.96%"),
        so the text agrees with its verdict; a value written as an edge of the band it is in keeps ``fmt``."""
        text = self.fmt.format(value)
        edges = [e for e in (*self.reproduced, *self.partly) if math.isfinite(e) and e != value]
        if not any(self.fmt.format(e) == text and self.bands_of(e) != self.bands_of(value) for e in edges):
            return text
        precision = re.search(r"\.(\d+)", self.fmt)
        for extra in range(1, 8):
            fmt = (self.fmt[:precision.start(1)] + str(int(precision.group(1)) + extra) + self.fmt[precision.end(1):]
                   if precision else f"{{:.{2 + extra}g}}")
            text = fmt.format(value)
            if all(fmt.format(e) != text for e in edges):
                break
        return text


def listed(items, fmt: str = "{}", empty: str = "–") -> str:
    """``["0", "2", "3"]`` -> "0, 2 and 3", each item written by ``fmt`` (``listed([984, 40292], "{:,}")`` ->
    "984 and 40,292"); one item as it is; none as ``empty``."""
    items = [fmt.format(i) for i in items]
    return empty if not items else items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def steps_listed(steps, empty: str = "no step") -> str:
    """``[80807, 202019]`` -> "steps 80,807 and 202,019", one -> "step 4", none -> ``empty``: steps a sentence names."""
    steps = list(steps)
    return empty if not steps else f"step{'s' if len(steps) > 1 else ''} {listed(steps, '{:,.0f}')}"


def sourced(claims: list[Claim], sources: dict, bands: dict | None = None) -> list[Claim]:
    """``claims`` with each one's :class:`Source` from ``{metric: Source}`` (a chapter's ``SOURCES``) and its
    :class:`Band` from ``{metric: Band}`` (its ``BANDS``; a claim whose paper value reads "≈ x" defaults to
    ``APPROXIMATE``, a sanity check has none); ValueError naming the claims without a source or a band and the
    sources or bands without a claim."""
    bands = bands or {}
    metrics = [c.metric for c in claims]
    duplicated = sorted({m for m in metrics if metrics.count(m) > 1})
    missing, unknown = sorted(set(metrics) - set(sources)), sorted(set(sources) - set(metrics))
    if duplicated or missing or unknown:
        raise ValueError(f"sources must name each claim's metric once: duplicated {duplicated}, without a source "
                         f"{missing}, no such claim {unknown}")
    judged = {c.metric for c in claims if not c.sanity}
    unbanded = sorted(m for m in judged - set(bands)
                      if not next(c for c in claims if c.metric == m).paper.startswith("≈"))
    stray = sorted(set(bands) - judged)
    if unbanded or stray:
        raise ValueError(f"bands must name each judged claim without an '≈' paper value: without a band {unbanded}, "
                         f"no such judged claim {stray}")
    return [replace(c, source=sources[c.metric],
                    band=None if c.sanity else bands.get(c.metric, APPROXIMATE)) for c in claims]


def count_verdicts(verdicts) -> dict[str, int]:
    """``{verdict: how many}`` over ``VERDICTS``, ``SANITY`` then ``NOT_COUNTED`` (zeros kept) of an iterable of
    verdicts; any other string (a missing run, say) is not counted."""
    verdicts = list(verdicts)
    return {**{v: verdicts.count(v) for v in (*VERDICTS, *SANITY)},
            NOT_COUNTED: sum(str(v).endswith(f"; {NOT_COUNTED}") for v in verdicts)}


def select(claims: list[Claim], figure: str) -> list[Claim]:
    """The claims of ``figure`` among ``claims``, in order; ValueError naming the figures there are."""
    found = [c for c in claims if c.figure == figure]
    if not found:
        raise ValueError(f"figure must be one of {sorted({c.figure for c in claims})}, got {figure!r}")
    return found
