"""doctor.html: one self-contained page (inline SVG, no script, nothing fetched) of a doctor.json: per loader
the diagnosis, the timeline of data wait against step time, the workers' CPU and memory, and headspace."""

from __future__ import annotations

import html
import os
from pathlib import Path

from loaderbench.doctor.diagnosis import tune_text
from loaderbench.doctor.doctor_json import loaders
from loaderbench.doctor.settings import loader_line

W, H = 760, 180
COLORS = {"wait": "#d62728", "step": "#1f77b4", "headspace": "#2ca02c", "cpu": "#9467bd", "mem": "#8c564b"}

CSS = """body{font-family:system-ui,sans-serif;max-width:820px;margin:2em auto;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}.verdict{font-size:1.1em;font-weight:600}
.warn{color:#a15c00}table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #ddd}
code{background:#f4f4f4;padding:1px 4px}svg{background:#fafafa;border:1px solid #eee}"""


def _e(x) -> str:
    return html.escape(str(x))


def _polyline(xs: list[float], ys: list[float], x_max: float, y_max: float, color: str) -> str:
    if not xs or x_max <= 0 or y_max <= 0:
        return ""
    pts = " ".join(f"{40 + (W - 50) * x / x_max:.1f},{H - 20 - (H - 30) * y / y_max:.1f}" for x, y in zip(xs, ys))
    return f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"/>'


def _axes(x_label: str, y_label: str, y_max: float, unit: str) -> str:
    return (
        f'<line x1="40" y1="{H - 20}" x2="{W - 10}" y2="{H - 20}" stroke="#999"/>'
        f'<line x1="40" y1="10" x2="40" y2="{H - 20}" stroke="#999"/>'
        f'<text x="{W // 2}" y="{H - 4}" font-size="11" text-anchor="middle">{_e(x_label)}</text>'
        f'<text x="44" y="20" font-size="11">{_e(y_label)} (top: {y_max:.3g} {unit})</text>'
    )


def timeline_svg(tl: dict) -> str:
    """Stacked bars per step: data wait (red) under the step (blue); replayed steps in green."""
    waits, steps, phases = tl.get("wait_s", []), tl.get("step_s", []), tl.get("phase", [])
    n = len(waits)
    if not n:
        return "<p>No step was measured.</p>"
    periods = [w + (s or 0.0) for w, s in zip(waits, steps)]
    top = max(sorted(periods)[int(0.98 * (n - 1))], 1e-9) * 1.05
    bw = (W - 50) / n
    bars = []
    for i, (w, s, ph) in enumerate(zip(waits, steps, phases)):
        x = 40 + i * bw
        hw = (H - 30) * min(w, top) / top
        hs = (H - 30) * min(s or 0.0, max(top - w, 0)) / top
        color = COLORS["headspace"] if ph == "headspace" else COLORS["step"]
        opacity = "0.45" if ph == "warmup" else "1"
        bars.append(
            f'<rect x="{x:.1f}" y="{H - 20 - hw:.1f}" width="{max(bw, 0.5):.2f}" height="{hw:.1f}" '
            f'fill="{COLORS["wait"]}" opacity="{opacity}"/>'
            f'<rect x="{x:.1f}" y="{H - 20 - hw - hs:.1f}" width="{max(bw, 0.5):.2f}" height="{hs:.1f}" '
            f'fill="{color}" opacity="{opacity}"/>'
        )
    legend = (
        f'<text x="{W - 330}" y="20" font-size="11"><tspan fill="{COLORS["wait"]}">■ data wait</tspan> '
        f'<tspan fill="{COLORS["step"]}">■ step</tspan> <tspan fill="{COLORS["headspace"]}">■ replayed '
        "(headspace)</tspan> faint: warm-up</text>"
    )
    axes = _axes("step", "time", top * 1e3, "ms")
    return f'<svg width="{W}" height="{H}" role="img">{"".join(bars)}{axes}{legend}</svg>'


def workers_svg(workers: dict) -> str:
    s = workers.get("series")
    if not s or len(s.get("t_s", [])) < 2:
        return "<p>Too few samples of the workers.</p>"
    t = s["t_s"]
    cpu = [
        (b - a) / (t1 - t0) if t1 > t0 else 0.0
        for a, b, t0, t1 in zip(s["workers_cpu_s"], s["workers_cpu_s"][1:], t, t[1:])
    ]
    main = [
        (b - a) / (t1 - t0) if t1 > t0 else 0.0 for a, b, t0, t1 in zip(s["main_cpu_s"], s["main_cpu_s"][1:], t, t[1:])
    ]
    cores = float(workers.get("cores_allowed") or 1)
    top = max([cores, *cpu, *main]) * 1.05
    cap = 10 + (H - 30) * (1 - cores / top)
    cpu_svg = (
        f'<svg width="{W}" height="{H}" role="img">{_axes("seconds", "CPU, cores", top, "cores")}'
        f'<line x1="40" y1="{cap:.1f}" x2="{W - 10}" y2="{cap:.1f}" stroke="#999" stroke-dasharray="4"/>'
        f"{_polyline(t[1:], cpu, t[-1], top, COLORS['cpu'])}{_polyline(t[1:], main, t[-1], top, COLORS['step'])}"
        f'<text x="{W - 330}" y="20" font-size="11"><tspan fill="{COLORS["cpu"]}">— workers</tspan> '
        f'<tspan fill="{COLORS["step"]}">— main process</tspan> - - cores allowed ({cores:g})</text></svg>'
    )
    tm = s.get("memory_t_s", t)
    uss = [u / 2**20 for u in s["workers_uss"]]
    pss = [p / 2**20 for p in s.get("workers_pss", [])]
    mem_svg = ""
    if len(tm) >= 2 and any(uss):
        mtop = max([*uss, *pss]) * 1.1
        mem_svg = (
            f'<svg width="{W}" height="{H}" role="img">{_axes("seconds", "workers memory", mtop, "MiB")}'
            f"{_polyline(tm, uss, t[-1], mtop, COLORS['mem'])}{_polyline(tm, pss, t[-1], mtop, COLORS['cpu'])}"
            f'<text x="{W - 330}" y="20" font-size="11"><tspan fill="{COLORS["mem"]}">— USS (their own pages)</tspan> '
            f'<tspan fill="{COLORS["cpu"]}">— PSS (their share of all)</tspan></text></svg>'
        )
    return cpu_svg + mem_svg


def accelerator_svg(acc: dict) -> str:
    """The GPU's utilization over the run (loaderbench.doctor.accelerator)."""
    s = acc["series"]
    text = (
        f"<p>The GPU ran a kernel {acc['utilization_mean']:.0f}% of the time (median {acc['utilization_p50']:.0f}%, "
        f"{acc['samples']} readings of nvidia-smi), using up to {acc['memory_used_mib_peak']:.0f} MiB.</p>"
    )
    if len(s["t_s"]) < 2:
        return text
    return text + (
        f'<svg width="{W}" height="{H}" role="img">{_axes("seconds", "GPU utilization", 100, "%")}'
        f"{_polyline(s['t_s'], s['utilization'], s['t_s'][-1], 100, COLORS['step'])}</svg>"
    )


def _settings_table(settings: dict) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in settings.items())
    return f"<table>{rows}</table>"


def _tune_section(tune: dict, settings: dict) -> str:
    rows = "".join(
        f"<tr><td>{_e(t['phase'])}</td><td>{_e(t['setting'])}</td>"
        f"<td>{'failed' if t['steps_per_s'] is None else format(t['steps_per_s'], '.4g')}</td></tr>"
        for t in tune.get("trials") or []
    )
    fixed = "".join(f"<li>{_e(axis)}: {_e(why)}</li>" for axis, why in (tune.get("fixed") or {}).items())
    return (
        f"<h3>Search (--tune)</h3><p>{_e(tune_text(tune, settings))}</p>"
        + (f"<p>Held as they are:</p><ul>{fixed}</ul>" if fixed else "")
        + (f"<table><tr><th>phase</th><th>setting</th><th>steps/s, replica</th></tr>{rows}</table>" if rows else "")
    )


def _loader_section(process: dict, lo: dict) -> str:
    rank = f" (rank {process['rank']})" if process.get("rank") is not None else ""
    st, head = lo.get("steps", {}), lo.get("headspace")
    parts = [f"<h2>Loader {_e(lo['name'])}{_e(rank)}</h2>", f'<p class="verdict">{_e(lo["diagnosis"])}</p>']
    parts += [f'<p class="warn">Warning: {_e(w)}</p>' for w in lo.get("warnings", [])]
    if lo.get("note"):
        parts.append(f"<p>Note: {_e(lo['note'])}</p>")
    if st.get("measured_steps"):
        parts.append(
            f"<p>{st['measured_steps']} measured steps after {st['warmup_steps']} warm-up steps: data wait p50 "
            f"{1e3 * st['wait_p50_s']:.2f} ms, p95 {1e3 * st['wait_p95_s']:.2f} ms; step p50 "
            f"{1e3 * st['step_p50_s']:.2f} ms; {st['steps_per_s']:.3g} steps/s.</p>"
        )
    parts += ["<h3>Timeline</h3>", timeline_svg(lo.get("timeline", {}))]
    if head:
        parts.append(
            f"<h3>Headspace</h3><p>{head['steps']} steps replayed from memory ran at a median of "
            f"{1e3 * head['median_period_s']:.2f} ms per step: <b>{head['speedup']:.3g}x</b> the measured rate "
            f"[{head['low']:.3g}-{head['high']:.3g}], the most any loader setting can gain.</p>"
        )
    if lo.get("tune"):
        parts.append(_tune_section(lo["tune"], lo.get("settings", {})))
    if lo.get("recommendation"):
        parts.append(f"<h3>Validated in the loop</h3><p><b>{_e(lo['recommendation'])}</b></p>")
    if lo.get("paste"):
        parts.append(f"<p>To paste: <code>{_e(lo['paste'])}</code></p>")
    parts += ["<h3>Workers</h3>", workers_svg(lo.get("workers", {}))]
    if lo.get("accelerator"):
        parts += ["<h3>Accelerator</h3>", accelerator_svg(lo["accelerator"])]
    parts += [
        "<h3>Settings</h3>",
        f"<p><code>{_e(loader_line(lo.get('settings', {})))}</code></p>",
        _settings_table(lo.get("settings", {})),
    ]
    return "\n".join(parts)


def render(doc: dict) -> str:
    found = loaders(doc)
    body = [
        "<h1>loaderbench doctor</h1>",
        f"<p><code>{_e(' '.join(doc.get('command', [])))}</code>: {_e(doc.get('status'))}, exit status "
        f"{_e(doc.get('exit_code'))}</p>",
    ]
    if not found:
        body.append("<p>The script never iterated a DataLoader: there was nothing to watch.</p>")
    body += [_loader_section(p, lo) for p, lo in found]
    fp = doc.get("fingerprint", {})
    body.append(
        f"<h2>Machine</h2><p>{_e(fp.get('host'))}: {_e(fp.get('cpu_model'))}, {_e(fp.get('logical_cpus'))} CPUs; "
        f"torch {_e(fp.get('torch'))}, Python {_e(fp.get('python'))}; loaderbench {_e(fp.get('loaderbench'))} "
        f"({_e(fp.get('git_commit'))})</p>"
    )
    if doc.get("exit_code") not in (0, None) and doc.get("stderr_tail"):
        body.append(f"<h2>The end of the script's stderr</h2><pre>{_e(doc['stderr_tail'][-4000:])}</pre>")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>loaderbench doctor</title>'
        f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write_page(doc: dict, out_dir: Path, name: str = "doctor.html") -> Path:
    path = out_dir / name
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(render(doc))
    os.replace(tmp, path)
    return path
