"""Copy-on-write: do forked workers copy the index they read, by how it is stored?

numpy_bytes is the control: the same worker, loop and samples, with an index that is one object. Private memory
it has too is not the index's; the index's share is a backing's peak USS per worker minus the control's. (The
peak, not the growth over the probe's timeline: a worker has read a good part of its share before the first
probe sample with every worker alive, and what it copied by then is missing from the growth; both start from
the same private memory, so the peaks' difference counts it all.) The largest memory every backing shares is
a full pass of Python's cyclic GC in the worker, which writes to the header of every tracked object the
worker inherited: it runs in some repetitions and not others, so it swamps the index's share with noise.
Where the study has cells with `gc_freeze` (gc.freeze() in the parent before the workers start: the pass then
leaves inherited objects alone, while reading an object still writes its refcount), the backing claims read
those cells, and a claim of its own compares the control with and without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd

from loaderbench.analysis.rules.claim import EXTENSION, Metric, Question, finite, g, missing
from loaderbench.analysis.rules.kinds import FEWEST, MOST, AllOf, Shift, medians
from loaderbench.analysis.table.derive import with_growth
from loaderbench.analysis.table.records import col, is_true
from loaderbench.stats.intervals import MIN_N
from loaderbench.stats.verdicts import (
    Outcome,
    all_of,
    at_least,
    at_most,
    both,
    decide_median,
    decide_shift,
    either,
    within,
)

#: "copies what it reads": at least this much more peak USS per worker than the control (the run reads ~400k
#: index entries, about 35 MiB of str objects).
GROW_MIB = 10.0
#: "does not grow": at most this per worker (torch's own first allocations fit in it), or within it of the control.
FLAT_MIB = 4.0
#: each worker copies for itself: all workers' copies together at the most workers, at least this times that
#: at the fewest.
COW_WORKERS_RATIO = 2.0
#: the metrics: workers' USS growth over the probe's timeline, and their peak USS, per worker
#: (loaderbench.analysis.table.derive)
GROWTH, PEAK = "growth_mib_per_worker", "end_mib_per_worker"
#: an eager dataset's workers duplicate its decoded images when each holds at least this share of them privately
#: beyond what a lazy dataset's workers hold
DUPLICATE_SHARE = 0.5
DECODED_BYTES = 3 * 224 * 224  # one image of the decoded backing (loaderbench.workloads.claim_axes.DECODED_SHAPE)


def _frozen(rows: pd.DataFrame) -> pd.Series:
    return col(rows, "gc_freeze", False).map(is_true).astype(bool)


def _isolated(rows: pd.DataFrame) -> pd.DataFrame:
    """The cells that isolate the index: those with gc.freeze() where the records have any."""
    frozen = _frozen(rows)
    return rows[frozen] if frozen.any() else rows


def _cow(rows, backing, nw, value: str = PEAK, start_method: str = "fork"):
    """One cell's `value` per repetition: a backing at a num_workers under a start method."""
    ok = rows[
        (col(rows, "index_backing") == backing)
        & (rows["num_workers"] == nw)
        & (col(rows, "start_method") == start_method)
    ]
    return finite(ok[value])


def _with_freeze(rows: pd.DataFrame) -> pd.DataFrame:
    ok = with_growth(rows)
    return ok.assign(gc_freeze=_frozen(ok))


#: b's peak USS per worker at least GROW_MIB above a's, at every num_workers
_PEAK_GROWS = partial(
    Shift, PEAK, "peak USS per worker", region=at_least(GROW_MIB), per=("num_workers",), log=False, unit=" MiB"
)
gc_pass_copies = _PEAK_GROWS(
    {"gc_freeze": True},
    {"gc_freeze": False},
    where={"start_method": "fork", "index_backing": "numpy_bytes"},
    frame=_with_freeze,
    note="the numpy_bytes control: its index is one object; the backing claims read the gc_freeze cells where the "
    "study has them",
)


def _diff(a, b, region, label) -> Outcome:
    return decide_shift(a, b, region, log=False, unit=" MiB", label=label)


def cow_grows(backing: str) -> Shift:
    """A backing's workers' peak USS per worker (memory_timeline, the samples with all workers alive) above the
    numpy_bytes control's (the same loop, an index that is one object)."""
    return _PEAK_GROWS(
        {"index_backing": "numpy_bytes"},
        {"index_backing": backing},
        where={"start_method": "fork"},
        frame=lambda rows: _isolated(with_growth(rows)),
        note="numpy_bytes is the control: the same loop, an index that is one object; cells with gc.freeze() in "
        "the parent where the study has them",
    )


def cow_flat(rows: pd.DataFrame) -> Outcome:
    ok = _isolated(with_growth(rows))
    checks = []
    for nw in sorted(set(ok["num_workers"])):
        ref, nb, ar = (_cow(ok, b, nw) for b in ("list_str", "numpy_bytes", "arrow"))
        nb_growth, ar_growth = _cow(ok, "numpy_bytes", nw, GROWTH), _cow(ok, "arrow", nw, GROWTH)
        if len(nb_growth) < 3 or len(ar_growth) < 3:
            continue
        flat = both(
            decide_median(nb_growth, at_most(FLAT_MIB), label="numpy_bytes growth per worker", unit=" MiB"),
            decide_median(ar_growth, at_most(FLAT_MIB), label="arrow growth per worker", unit=" MiB"),
        )
        common = both(
            _diff(nb, ar, within(-FLAT_MIB, FLAT_MIB), "peak USS per worker arrow - numpy_bytes"),
            _diff(nb, ref, at_least(GROW_MIB), "peak USS per worker list_str - numpy_bytes"),
        )
        o = either(flat, common)
        checks.append(Outcome(o.verdict, f"fork, w={nw}: {o.evidence}"))
    return all_of(checks, "needs fork cells of numpy_bytes and arrow with a memory timeline, 3 ok repetitions")


def _beyond_control(rows: pd.DataFrame) -> pd.DataFrame:
    """The fork cells that isolate the index, with all workers' peak USS beyond the numpy_bytes control's (its
    median per worker at the same num_workers, of MIN_N or more ok repetitions) as `beyond_mib`."""
    ok = _isolated(with_growth(rows))
    ok = ok[col(ok, "start_method") == "fork"]
    control = {
        nw: float(np.median(x))
        for nw, grp in ok[col(ok, "index_backing") == "numpy_bytes"].groupby("num_workers")
        if len(x := finite(grp[PEAK])) >= MIN_N
    }
    return ok.assign(beyond_mib=(pd.to_numeric(ok[PEAK]) - ok["num_workers"].map(control)) * ok["num_workers"])


_totals = Shift(
    "beyond_mib",
    "all workers' peak USS beyond the control",
    {"num_workers": FEWEST},
    {"num_workers": MOST},
    at_least(COW_WORKERS_RATIO),
    where={"start_method": "fork", "index_backing": "list_str"},
    frame=_beyond_control,
    aside=medians("beyond_mib", " MiB"),
)
#: without the totals the rest says nothing of the number of workers
_TOTALS_NEEDED = "needs fork list_str cells and the numpy_bytes control at two or more num_workers, 3 ok repetitions"
cow_grows_with_workers = AllOf(
    (_totals, dataclasses.replace(cow_grows("list_str"), per=(), where={"start_method": "fork", "num_workers": MOST})),
    note="the control is numpy_bytes (an index that is one object), its median per worker subtracted",
    guard=lambda rows: None if _totals.grouped(rows) else missing(_TOTALS_NEEDED),
)


#: the eager backings: decoded images as NumPy arrays, or as Python objects (each image a list of its pixel rows)
EAGER = ("decoded", "decoded_objects")


def lazy_avoids_duplication(eager: str, start_method: str) -> Callable[[pd.DataFrame], Outcome]:
    """#24 under one start method: at every num_workers, the eager dataset's (`eager` backing) workers' peak USS per
    worker minus the lazy one's, against DUPLICATE_SHARE of the decoded images' size: a worker that holds its own
    copy of them duplicates, a lazy one reads only file names."""

    def rule(rows: pd.DataFrame) -> Outcome:
        ok = with_growth(rows)
        held = ok[col(ok, "index_backing") == eager]
        if held.empty:
            return missing(f"needs cells of the {eager} (eager) and list_str (lazy) backings")
        data_mib = float(pd.to_numeric(held["index_items"]).max()) * DECODED_BYTES / 2**20
        checks = []
        for nw in sorted(set(held["num_workers"])):
            a, b = (_cow(ok, backing, nw, start_method=start_method) for backing in (eager, "list_str"))
            if len(a) < 3 or len(b) < 3:
                continue
            checks.append(
                _diff(
                    b,
                    a,
                    at_least(DUPLICATE_SHARE * data_mib),
                    f"{start_method}, w={nw}: peak USS per worker {eager} - list_str",
                )
            )
        o = all_of(
            checks, f"needs {eager} and list_str cells under {start_method} at the same num_workers, 3 ok repetitions"
        )
        return Outcome(o.verdict, f"decoded images held: {g(data_mib)} MiB of pixels; {o.evidence}")

    rule.__name__ = f"lazy_avoids_duplication_{eager}_{start_method}"
    return rule


def _needs_eager(eager: str) -> Callable[[pd.DataFrame], bool]:
    return lambda rows: bool((col(rows, "index_backing") == eager).any())


QUESTION = Question(
    "cow-memory",
    ("index_backing", "num_workers", "start_method", "gc_freeze"),
    lambda rows: "index_backing" in rows and (rows["index_backing"].dropna() != "none").any(),
    figure="loaderbench.analysis.figures.questions.cow_memory:memory_growth_by_backing",
    tables={
        "cow-memory": (
            Metric("end_mib_per_worker", "peak USS per worker (MiB)"),
            Metric("growth_mib_per_worker", "USS growth per worker (MiB)"),
        ),
        "cow-memory-lazy": (
            Metric("end_mib_per_worker", "peak USS per worker (MiB)"),
            Metric("growth_mib_per_worker", "USS growth per worker (MiB)"),
        ),
    },
)
QUESTION.add(
    "forked workers reading a Python list of str copy the index pages they touch: their memory grows",
    cow_grows("list_str"),
    number=22,
)
QUESTION.add(
    "a NumPy object array behaves like a list (its elements carry refcounts)", cow_grows("numpy_object"), number=22
)
QUESTION.add(
    "NumPy fixed-width bytes and Arrow indexes add no copy-on-write growth",
    f"holds if at every num_workers (fork) numpy_bytes and arrow both grow by at most {FLAT_MIB:g} MiB per "
    f"worker over the probe's timeline (each cell's median), or peak alike (arrow's peak USS per worker "
    f"within +-{FLAT_MIB:g} MiB of numpy_bytes') while list_str's is at least {GROW_MIB:g} MiB above: memory "
    f"common to every backing is not the index's",
    cow_flat,
    number=21,
)
QUESTION.add("the copies grow with the number of workers (each copies for itself)", cow_grows_with_workers, number=23)
QUESTION.add(
    "a full GC pass in a forked worker copies what it inherited, whatever it reads; gc.freeze() "
    "in the parent before the workers start avoids it",
    gc_pass_copies,
    number=25,
)
QUESTION.add(
    "lazy loading (paths, not decoded data, in the dataset) avoids the duplication forked workers make of "
    "an eager dataset of Python objects",
    "fork, an eager dataset holding decoded images as Python objects (decoded_objects: each image a list of "
    "its pixel rows, bytes objects whose refcounts every read writes) against a lazy one holding file names "
    "(list_str): holds if at every num_workers the eager workers' peak USS per worker minus the lazy ones' "
    f"is at least {DUPLICATE_SHARE:g}x the decoded images' pixels (every worker holds its own copy of what "
    "it read), does not hold if it is shown below",
    lazy_avoids_duplication("decoded_objects", "fork"),
    needs=_needs_eager("decoded_objects"),
    number=24,
    study="cow-memory-lazy",
)
QUESTION.add(
    "lazy loading avoids duplication: an eager dataset of NumPy arrays under fork",
    f"as above with the images held as NumPy arrays (decoded): reading an array writes only its header, so "
    f"forked workers share its pixels; holds if the difference is at least {DUPLICATE_SHARE:g}x the pixels",
    lazy_avoids_duplication("decoded", "fork"),
    needs=_needs_eager("decoded"),
    number=24,
    study="cow-memory-lazy",
    role=EXTENSION,
    setting="under fork with images held as NumPy arrays",
)
for eager in EAGER:
    QUESTION.add(
        f"lazy loading avoids duplication: an eager dataset ({eager}) under spawn",
        f"as above under spawn, where every worker unpickles its own copy of whatever the dataset holds (the "
        f"cost of pickling, not of copy-on-write); holds if the difference is at least {DUPLICATE_SHARE:g}x "
        "the pixels",
        lazy_avoids_duplication(eager, "spawn"),
        needs=_needs_eager(eager),
        number=24,
        study="cow-memory-lazy",
        role=EXTENSION,
        setting=f"under spawn ({'NumPy arrays' if eager == 'decoded' else 'Python objects'})",
    )
