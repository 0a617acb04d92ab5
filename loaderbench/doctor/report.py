"""One watched loader as a JSON-ready dict, and as lines for the terminal."""

from __future__ import annotations

from loaderbench.doctor.accelerator import summarize as accelerator_summary
from loaderbench.doctor.diagnosis import diagnose, paste_line, tune_text, validated_text
from loaderbench.doctor.summary import headspace, summarize_steps
from loaderbench.doctor.workers import summarize


def loader_report(watch, timeline: bool = True) -> dict:
    """`watch`: a loaderbench.doctor.watch.LoaderWatch (read by its attributes: watch imports this module)."""
    steps = summarize_steps(watch.log)
    workers = summarize(
        watch.sampler.samples, float(watch.cores["cores"]), watch.sampler.cpu_s, watch.sampler.window_cpu_s
    )
    head = headspace(watch.log)
    verdict, sentence, warnings = diagnose(watch.settings, steps, workers, head)
    out = {
        "name": watch.name,
        "state": watch.state,
        "note": watch.note,
        "iterators": watch.iterators,
        "settings": watch.settings,
        "cores": watch.cores,
        "batches_pinned": watch.pinned,
        "steps": steps,
        "headspace": head,
        "workers": workers,
        "accelerator": accelerator_summary(
            watch.sampler.gpu.readings, watch.sampler.samples[0]["t"] if watch.sampler.samples else None
        ),
        "verdict": verdict,
        "diagnosis": sentence,
        "warnings": warnings,
        "tune": watch.tune_result,
        "in_loop": watch.ab_result,
        "recommendation": validated_text(watch.ab_result, watch.settings),
        "paste": paste_line(watch.ab_result),
    }
    if timeline:
        out["timeline"] = watch.log.to_json()
    return out


def terminal_lines(report: dict) -> list[str]:
    s = report["settings"]
    head = (
        f"loader {report['name']}: {s.get('dataset_type')}, batch_size={s.get('batch_size')}, "
        f"num_workers={s.get('num_workers')}"
    )
    lines = [head, f"  {report['diagnosis']}"]
    st = report["steps"]
    if st.get("measured_steps"):
        lines.append(
            f"  {st['measured_steps']} steps: wait p50 {1e3 * st['wait_p50_s']:.1f} ms, p95 "
            f"{1e3 * st['wait_p95_s']:.1f} ms; step p50 {1e3 * st['step_p50_s']:.1f} ms; "
            f"{st['steps_per_s']:.3g} steps/s"
        )
    acc = report.get("accelerator")
    if acc:
        lines.append(
            f"  accelerator: busy {acc['utilization_mean']:.0f}% of the time (median {acc['utilization_p50']:.0f}%, "
            f"{acc['samples']} readings of nvidia-smi)"
        )
    if report.get("tune"):
        lines.append(f"  {tune_text(report['tune'], s)}")
    if report.get("recommendation"):
        lines.append(f"  {report['recommendation']}")
    if report.get("paste"):
        lines.append(f"  to paste: {report['paste']}")
    if report.get("note"):
        lines.append(f"  note: {report['note']}")
    lines += [f"  warning: {w}" for w in report["warnings"]]
    return lines
