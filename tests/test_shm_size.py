"""A cell's own /dev/shm (`shm_size_mb`): validation, the shm-size rules on synthetic rows, and real cells: a 1 MiB
/dev/shm fails as a classified error naming the size that would suffice, that size runs, and no mount, namespace
or segment outlives either cell."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from loaderbench.analysis.questions.shm_size import (
    computed_size_suffices,
    crashed_workers_leak,
    prefetch_holds_batches,
    shm_use_grows,
    too_small_fails,
)
from loaderbench.errors import LoaderbenchError
from loaderbench.measure.private_shm import in_flight_batches, needed_bytes, too_small_message
from loaderbench.stats.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURED
from loaderbench.study.study_file import load_study
from tests.conftest import REPO

MIB = 2**20
BASE = """
[study]
name = "s"
repetitions = 1
warmup_batches = 2
measure_batches = 4

[matrix]
workload = "sleep"
"""


@pytest.mark.parametrize("value, allowed", [("0", "an integer from 1 to 1048576"), ('"64m"', "an integer")])
def test_shm_size_validated(study_file, value, allowed):
    with pytest.raises(LoaderbenchError) as exc:
        load_study(study_file(BASE + f"shm_size_mb = {value}\n"))
    assert "shm_size_mb" in str(exc.value) and allowed in str(exc.value)


def test_shm_size_defaults_to_the_machines(study_file):
    (cell,) = load_study(study_file(BASE)).cells
    assert cell.typed.shm_size_mb is None


def test_needed_size_from_one_batch():
    assert in_flight_batches(0, None) == 0
    assert in_flight_batches(4, 2) == 10  # prefetch 2 per worker, and the main process's two
    assert needed_bytes(8 * MIB, 2, 2) == 60 * MIB  # 6 batches of 8 MiB, 25% margin
    text = too_small_message("worker killed by a bus error", 16, 8 * MIB, 2, 2)
    assert "shm_size_mb = 16 MiB" in text and "at least 60 MiB" in text and "--shm-size=60m" in text


# --- the rules on synthetic rows ---------------------------------------------------------------------------


def _sized(states: dict, peak_mib: dict | None = None, reps: int = 3) -> pd.DataFrame:
    """Rows of the sleep workload: states[(workers, prefetch, batch, size)] = "ok" | "short" | "other"; the batch
    is 256 KiB per sample, so a setting needs (workers x prefetch + 2) x batch/4 MiB x 1.25."""
    rows = []
    for (w, pf, bs, size), state in states.items():
        need = needed_bytes(bs * 256 * 1024, w, pf)
        peak = (peak_mib or {}).get((w, pf, bs), (w * pf + 2) * bs / 4) * MIB
        for rep in range(reps):
            rows.append(
                {
                    "study": "shm-size",
                    "cell_id": f"{w}-{pf}-{bs}-{size}",
                    "repetition": rep,
                    "status": "ok" if state == "ok" else "failed",
                    "error_kind": {"ok": None, "short": "shm_exhausted", "other": "worker_crashed"}[state],
                    "error_message": None
                    if state == "ok"
                    else "DataLoader worker 0 was killed by signal 7 (bus error)",
                    "workload": "sleep",
                    "num_workers": w,
                    "prefetch_factor": pf,
                    "batch_size": bs,
                    "shm_size_mb": size,
                    "shm_peak_bytes": peak * (1 + 0.01 * (rep - 1)) if state == "ok" else min(peak, size * MIB),
                    "shm_needed_bytes": need,
                    "shm_batch_bytes": bs * 256 * 1024,
                }
            )
    return pd.DataFrame(rows)


def _star(sizes_states) -> dict:
    out = {}
    for size, state_of in sizes_states.items():
        for setting in [(1, 2, 32), (2, 2, 32), (4, 2, 32), (2, 1, 32), (2, 4, 32), (2, 2, 16), (2, 2, 64)]:
            out[(*setting, size)] = state_of(*setting)
    return out


def _fits(size):
    return lambda w, pf, bs: "ok" if needed_bytes(bs * 256 * 1024, w, pf) <= size * MIB else "short"


def test_too_small_fails_holds_and_fails():
    rows = _sized(_star({16: _fits(16), 64: _fits(64), 1024: _fits(1024)}))
    out = too_small_fails(rows)
    assert out.verdict == HOLDS, out.evidence
    assert "64 MiB: 2 workers ran, 4 failed" in out.evidence
    never = _sized(_star({16: lambda *a: "ok", 1024: lambda *a: "ok"}))
    assert too_small_fails(never).verdict == FAILS
    broken = _sized(_star({16: lambda *a: "other", 1024: lambda *a: "ok"}))
    assert too_small_fails(broken).verdict == INCONCLUSIVE
    assert too_small_fails(_sized(_star({64: _fits(64)}))).verdict == NOT_MEASURED


def test_computed_size_suffices():
    rows = _sized(_star({16: _fits(16), 64: _fits(64), 1024: _fits(1024)}))
    assert computed_size_suffices(rows).verdict == HOLDS
    over = _sized(_star({1024: _fits(1024)}), peak_mib={(2, 2, 32): 500})  # a peak above the computed need
    out = computed_size_suffices(over)
    assert out.verdict == FAILS and "w=2, prefetch 2, batch 32" in out.evidence


def test_shm_use_grows_with_each_sweep():
    rows = _sized(_star({1024: _fits(1024)}))
    out = shm_use_grows(rows)
    assert out.verdict == HOLDS, out.evidence
    flat = _sized(_star({1024: _fits(1024)}), peak_mib={s: 40 for s in [(1, 2, 32), (4, 2, 32), (2, 2, 32)]})
    assert shm_use_grows(flat).verdict == FAILS


def test_prefetch_holds_batches():
    rows = _sized(_star({1024: _fits(1024)}))
    out = prefetch_holds_batches(rows)
    assert out.verdict == HOLDS, out.evidence
    assert "prefetch 4: 10 batches at the peak (workers x prefetch = 8" in out.evidence
    same = {(2, pf, 32): 6 * 8 for pf in (1, 2, 4)}  # the same 6 batches whatever prefetch_factor
    assert prefetch_holds_batches(_sized(_star({1024: _fits(1024)}), peak_mib=same)).verdict == FAILS


def _leaks(left: dict, reps: int = 3) -> pd.DataFrame:
    rows = []
    for (fault, strategy), n in left.items():
        for rep in range(reps):
            rows.append(
                {
                    "study": "shm-size-leaks",
                    "cell_id": f"{fault}-{strategy}",
                    "repetition": rep,
                    "status": "ok" if fault == "none" else "failed",
                    "workload": "fault",
                    "fault": fault,
                    "sharing_strategy": strategy,
                    "num_workers": 2,
                    "prefetch_factor": 2,
                    "batch_size": 8,
                    "shm_size_mb": 64,
                    "shm_left_segments": n,
                    "shm_left_bytes": n * 4096,
                }
            )
    return pd.DataFrame(rows)


def test_crashed_workers_leak():
    leaky = _leaks({("none", "file_system"): 0, ("kill_self", "file_system"): 3, ("kill_self", "file_descriptor"): 0})
    assert crashed_workers_leak(leaky).verdict == HOLDS
    clean = _leaks({("none", "file_system"): 0, ("kill_self", "file_system"): 0, ("kill_self", "file_descriptor"): 0})
    assert crashed_workers_leak(clean).verdict == FAILS
    assert crashed_workers_leak(_sized(_star({64: _fits(64)}))).verdict == NOT_MEASURED


# --- real cells ------------------------------------------------------------------------------------------

# Runs the cells of a study in a fresh interpreter, then prints every record and the mounts of this process's
# namespace that the cells' tmpfs would show as (none may be left).
SCRIPT = r"""
import json, sys
from loaderbench.launch.local import run_local
from loaderbench.schema.store import Store
from loaderbench.study.study_file import load_study

study = load_study(sys.argv[1])
store = Store(sys.argv[2])
run_local(study, store, retry_failed=True)
records = [store.read(study.name, c.cell_id, 0).to_json() for c in study.cells]
mounts = [ln for ln in open("/proc/self/mountinfo") if "loaderbench-shm" in ln]
print(json.dumps({"records": records, "mounts": mounts}))
"""


def _can_unshare() -> bool:
    return os.geteuid() == 0 and subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_unshare(), reason="a private /dev/shm needs root (unshare --mount)")
def test_too_small_shm_fails_and_the_named_size_runs(study_file, tmp_path):
    """Batches of 4 MiB from 2 workers cannot fit a 1 MiB /dev/shm: a classified failure whose message names the
    size that would suffice; that size runs. Neither cell leaves its tmpfs mounted or a segment behind."""

    def run(size: int) -> dict:
        # a 50 ms step consumes slower than the workers load: their prefetch queues stay full for about a second
        text = (
            BASE.replace('name = "s"', f'name = "s{size}"').replace("measure_batches = 4", "measure_batches = 20")
            + "sleep_ms = 0.0\nsample_kb = 128.0\nbatch_size = 32\nnum_workers = 2\nstep_ms = 50.0\n"
            + f"shm_size_mb = {size}\n"
        )
        path = study_file(text, name=f"s{size}.toml")
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(path), str(tmp_path / "results")],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert got["mounts"] == []
        (rec,) = got["records"]
        assert rec["cleanup"]["processes_left"] == [] and rec["cleanup"]["shm_new_left"] == []
        return rec

    small = run(1)
    assert small["status"] == "failed" and small["error"]["kind"] == "shm_exhausted", small["error"]
    message = small["error"]["message"]
    assert "shm_size_mb = 1 MiB is too small" in message and "would suffice" in message
    shm = small["metrics"]["shm_private"]
    assert shm["batch_bytes"] == 32 * 128 * 1024 and shm["size_bytes"] == MIB
    suffices = shm["needed_bytes"] // MIB
    assert f"at least {suffices} MiB" in message
    enough = run(suffices)
    assert enough["status"] == "ok", enough.get("error")
    used = enough["metrics"]["shm_peak_bytes"]
    assert 4 * MIB <= used <= suffices * MIB  # at least one batch was in flight; never more than the computed size
