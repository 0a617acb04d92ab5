"""Experiment 6, analysis at scale: `python -m loaderbench.analysis.stage_costs --records N --json FILE`, run as its own
process (the analysis never shares a process with the harness), its numbers read from FILE; then again at a tenth
and three tenths of N, each in a fresh process, for the scaling row (how the cold cost grows with the records).

Contract: `analysis_scale(records)` returns {"available": False, "records"} when the module is missing, else
{"available": True, "records", "command", "wall_s", "returncode"} plus "result" (bench_scale's JSON: seconds
and CPU seconds per stage, the floor under the cold stages, peak memory, the targets) and "scaling" (per size:
records, cold_s, unchanged_rerun_s, peak memory), or "error". Figures are drawn into a temporary folder (drawing is
one of the timed stages) and removed afterwards, in `formats` (comma-separated, as `make figures FORMATS=...`; PNG
alone by default, as `make figures` draws them); the result's "formats" names those drawn, and the floor is theirs.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODULE = "loaderbench.analysis.stage_costs"
# (label, key prefix in bench_scale's JSON, what the stage does)
STAGES = (
    ("first load", "first_load", "parse JSON, write Parquet cache"),
    ("cached load", "cached_load", "Parquet cache, stat every file"),
    ("aggregate", "aggregate", "medians, intervals, knees, rules, USL fits"),
    ("draw", "draw", "figures in the formats drawn, + CSV tables; the claims decided"),
    ("report", "report", "claims, HTML with figures inlined + Markdown"),
    ("cold total", "cold", "the four above: make figures from nothing"),
    ("floor", "floor", "the libraries alone: json.loads of every record + matplotlib's savefig of every figure drawn"),
    ("unchanged rerun", "unchanged_rerun", "make figures again, no record changed"),
    ("one study changed", "one_study_changed", "one record changed: its study alone drawn again"),
)
#: The sizes of the scaling row, as fractions of the records asked for (the full size is the detailed run).
SCALING = (0.1, 0.3)
#: Kept from each size's result for the scaling row.
SCALING_KEYS = ("records", "cold_s", "unchanged_rerun_s", "peak_rss_main_bytes", "peak_rss_largest_child_bytes")


#: The figures' formats `make figures` draws by default (loaderbench.analysis.figures.formats.DEFAULT).
FORMATS = "png"


def analysis_scale(records: int, timeout_s: float = 1800, formats: str = FORMATS) -> dict:
    out = _one_size(records, timeout_s, formats)
    if "result" not in out:
        return out
    out["scaling"] = []
    for share in SCALING:
        smaller = _one_size(int(records * share), timeout_s, formats)
        if "result" not in smaller:
            return {**out, "error": f"scaling row, {int(records * share)} records: {smaller.get('error')}"}
        out["scaling"].append({k: smaller["result"][k] for k in SCALING_KEYS})
    out["scaling"].append({k: out["result"][k] for k in SCALING_KEYS})
    return out


def _one_size(records: int, timeout_s: float, formats: str = FORMATS) -> dict:
    try:
        spec = importlib.util.find_spec(MODULE)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return {"available": False, "records": records}
    with tempfile.TemporaryDirectory(prefix="loaderbench-bench-scale-") as tmp:
        json_path = Path(tmp) / "bench_scale.json"
        cmd = [
            sys.executable,
            "-m",
            MODULE,
            "--records",
            str(records),
            "--json",
            str(json_path),
            "--figures",
            str(Path(tmp) / "figures"),
            "--formats",
            formats,
        ]
        out: dict[str, Any] = {
            "available": True,
            "records": records,
            "command": f"python -m {MODULE} --records {records} --formats {formats} --json FILE",
        }
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {**out, "error": f"timed out after {timeout_s:.0f} s"}
        out.update(wall_s=time.perf_counter() - t0, returncode=proc.returncode)
        if proc.returncode != 0:
            return {**out, "error": proc.stderr[-2000:]}
        try:
            out["result"] = json.loads(json_path.read_text())
        except (OSError, ValueError) as exc:
            return {**out, "error": f"{MODULE} wrote no readable JSON to {json_path.name}: {exc}"}
    out["result"].pop("figures_folder", None)  # a temporary folder, gone by now
    return out
