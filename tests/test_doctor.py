"""loaderbench doctor: the timing physics of a watched loop (data wait, headspace), and whole scripts watched
unchanged through the command line (two loaders under spawn, a script that fails, one without a DataLoader)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from loaderbench.doctor import watch
from loaderbench.doctor.bootstrap import should_watch
from loaderbench.doctor.doctor_json import SCHEMA, VERSION, read

REPO = Path(__file__).resolve().parent.parent
RES = time.get_clock_info("perf_counter").resolution

LOAD_S, BATCH, STEP_S = 0.002, 4, 0.006  # per sample, samples per batch, per step


class SleepSet(Dataset):
    """Each sample sleeps LOAD_S; the sleeps it really took are kept (in this process: num_workers=0)."""

    def __init__(self, n: int):
        self.n = n
        self.slept: dict[int, float] = {}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        t = time.perf_counter()
        time.sleep(LOAD_S)
        self.slept[i] = time.perf_counter() - t
        return torch.tensor(i)


def _loop(num_workers: int, steps: int = 40, warmup: int = 3, headspace: int = 10):
    """Run the loop watched; per iteration: the batch's sample ids and the step's real sleep."""
    ds = SleepSet(BATCH * (steps + warmup + 5))
    loader = DataLoader(ds, batch_size=BATCH, num_workers=num_workers)
    w = watch(loader, steps=steps, warmup=warmup, headspace=headspace, echo=False)
    seen = []
    for batch in w:
        t = time.perf_counter()
        time.sleep(STEP_S)
        seen.append((batch.tolist(), time.perf_counter() - t))
        if len(seen) >= warmup + steps + headspace + 2:
            break
    doc = w.report()
    (lo,) = doc["processes"][0]["loaders"]
    return ds, seen, lo


def test_versions_read_off_the_loaded_packages_import_nothing():
    # a fresh interpreter that imported torch alone: torch is named, torchvision is neither named nor imported
    code = (
        "import sys, json, torch; from loaderbench.measure.fingerprint import package_versions; "
        "v = package_versions(import_missing=False); print(json.dumps([v['torch'], v['torchvision'], "
        "'torchvision' in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [torch.__version__, None, False]


def test_data_wait_fraction_matches_the_two_sleeps():
    ds, seen, lo = _loop(num_workers=0)
    tl = lo["timeline"]
    measured = [i for i, p in enumerate(tl["phase"]) if p == "measure" and tl["step_s"][i] is not None]
    assert len(measured) >= 39
    loads = [sum(ds.slept[j] for j in seen[i][0]) for i in measured]
    sleeps = [seen[i][1] for i in measured]
    period = sum(tl["wait_s"][i] + tl["step_s"][i] for i in measured)
    f = lo["steps"]["data_wait_fraction"]["estimate"]
    # physics: every wait holds its batch's sleeps, every step its own sleep (two clock reads per step apart)
    slack = 2 * RES * len(measured) / period
    assert sum(loads) / period - slack <= f <= 1 - sum(sleeps) / period + slack
    for i, load in zip(measured, loads):
        assert tl["wait_s"][i] >= load - 2 * RES
    # the ratio from the two sleeps, within what the timer saw beyond them (overshoot and the loop's own work)
    nominal = BATCH * LOAD_S / (BATCH * LOAD_S + STEP_S)
    actual = sum(loads) / (sum(loads) + sum(sleeps))
    unexplained = 1 - (sum(loads) + sum(sleeps)) / period
    assert abs(f - nominal) <= abs(actual - nominal) + unexplained + slack
    lo_f, hi_f = lo["steps"]["data_wait_fraction"]["low"], lo["steps"]["data_wait_fraction"]["high"]
    assert lo_f <= f <= hi_f
    assert lo["verdict"] == "data-bound" and "num_workers=0" in lo["diagnosis"]


def test_the_loop_threads_cpu_in_its_steps_is_at_least_what_each_step_spun():
    """A step that spins for 10 ms of this thread's CPU time, then sleeps 10 ms: the watch's step CPU holds every
    spin, and its share of the step is at most what a step of at least 20 ms allows; a step that only sleeps reads
    close to none."""
    spin_s = 0.010
    loader = DataLoader(list(range(200)), batch_size=4)
    w = watch(loader, steps=20, warmup=2, headspace=0, echo=False)
    for _ in w:
        end = time.thread_time() + spin_s
        while time.thread_time() < end:
            pass
        time.sleep(0.010)
    (lo,) = w.report()["processes"][0]["loaders"]
    (log,) = [lw.log for lw in w.session.watches.values()]
    measured = log.indices("measure")
    assert len(measured) >= 19 and all(log.step_cpu_s[i] >= spin_s for i in measured)
    share = lo["steps"]["step_cpu_share"]
    assert share is not None and share <= (spin_s + 0.002) / 0.020
    w = watch(DataLoader(list(range(200)), batch_size=4), steps=20, warmup=2, headspace=0, echo=False)
    for _ in w:
        time.sleep(0.010)
    (lo,) = w.report()["processes"][0]["loaders"]
    assert lo["steps"]["step_cpu_share"] < 0.1


def test_the_verdict_follows_the_data_wait_interval_against_the_5_percent_bound():
    from loaderbench.doctor.diagnosis import diagnose

    def verdict(estimate, low, high):
        steps = {"data_wait_fraction": {"estimate": estimate, "low": low, "high": high}}
        return diagnose({"num_workers": 0}, steps, {"cores_allowed": 2.0}, None)[:2]

    assert verdict(0.02, 0.01, 0.04)[0] == "not data-bound"
    v, sentence = verdict(0.04, 0.02, 0.07)
    assert v == "borderline" and "no loader setting can win more than 7%" in sentence
    assert verdict(0.06, 0.03, 0.09)[0] == "borderline"
    assert verdict(0.30, 0.20, 0.40)[0] == "data-bound"


def test_headspace_agrees_with_load_plus_step_over_step():
    ds, seen, lo = _loop(num_workers=0)
    tl = lo["timeline"]
    head = [i for i, p in enumerate(tl["phase"]) if p == "headspace" and tl["step_s"][i] is not None]
    measured = [i for i, p in enumerate(tl["phase"]) if p == "measure" and tl["step_s"][i] is not None]
    assert len(head) >= 9
    # replayed batches are ones the loop already had; no replayed step waited on the loader
    loaded_before = {tuple(seen[i][0]) for i in measured}
    assert all(tuple(seen[i][0]) in loaded_before for i in head)
    load = sorted(sum(ds.slept[j] for j in seen[i][0]) + seen[i][1] for i in measured)[len(measured) // 2]
    step = sorted(seen[i][1] for i in head)[len(head) // 2]
    expected = load / step
    periods_m = [tl["wait_s"][i] + tl["step_s"][i] for i in measured]
    periods_h = [tl["wait_s"][i] + tl["step_s"][i] for i in head]
    # what the timer saw beyond the sleeps, in each phase, bounds the disagreement
    extra_m = 1 - sum(sum(ds.slept[j] for j in seen[i][0]) + seen[i][1] for i in measured) / sum(periods_m)
    extra_h = 1 - sum(seen[i][1] for i in head) / sum(periods_h)
    got = lo["headspace"]["speedup"]
    assert abs(got / expected - 1) <= extra_m + extra_h + 0.5 * (max(periods_h) - min(periods_h)) / min(periods_h)
    assert lo["headspace"]["low"] <= got <= lo["headspace"]["high"]
    assert "would run" in lo["diagnosis"]


def test_with_workers_the_wait_falls():
    _, _, zero = _loop(num_workers=0, headspace=0)
    _, seen, two = _loop(num_workers=2, headspace=0)
    assert two["steps"]["data_wait_fraction"]["high"] < zero["steps"]["data_wait_fraction"]["low"]
    assert two["settings"]["num_workers"] == 2
    # the loop saw every batch it asked for, in order, each once
    ids = [j for b, _ in seen for j in b]
    assert ids == list(range(len(ids)))


def test_the_loop_sees_every_batch_without_headspace():
    _, seen, lo = _loop(num_workers=0, steps=10, headspace=0)
    ids = [j for b, _ in seen for j in b]
    assert ids == list(range(len(ids)))
    assert lo["headspace"] is None


class WhoLoads(SleepSet):
    """A sample says which process loaded it."""

    def __getitem__(self, i: int):
        super().__getitem__(i)
        return torch.tensor([i, os.getpid()])


def test_in_loop_ab_really_alternates_the_iterators():
    rounds, per = 3, 8
    ds = WhoLoads(2000)
    loader = DataLoader(ds, batch_size=BATCH)
    w = watch(
        loader, steps=6, warmup=2, headspace=0, echo=False, validate={"num_workers": 2}, rounds=rounds, round_steps=per
    )
    seen = []
    for batch in w:
        time.sleep(STEP_S)
        seen.append(batch)
        if len(seen) >= 2 + 6 + 2 * rounds * per + 3:
            break
    (lo,) = w.report()["processes"][0]["loaders"]
    phases = lo["timeline"]["phase"]
    ab = [i for i, p in enumerate(phases) if p.startswith("ab-")]
    assert len(ab) == 2 * rounds * per and len(phases) == len(seen) - 3  # every batch asked for came, in order
    me = os.getpid()
    for i in ab:
        arm = phases[i][-1]
        pids = set(seen[i][:, 1].tolist())
        assert (pids == {me}) == (arm == "A"), (i, arm, pids)
        # the arm follows the rounds: A for `per` steps, then B, then A ...
        assert arm == "AB"[((i - ab[0]) // per) % 2]
    # A's batches continue the script's own epoch where they left off, none skipped
    a_ids = [j for i, p in enumerate(phases) if not p.startswith("ab-B") for j in seen[i][:, 0].tolist()]
    assert a_ids == list(range(len(a_ids)))
    res = lo["in_loop"]
    assert res["rounds"] == rounds and res["changes"] == {"num_workers": 2}
    assert res["low"] > 1  # two sleeping workers feed the loop faster than loading in it
    assert "num_workers=2" in lo["recommendation"] and "paste it" in lo["recommendation"]


def test_only_the_script_and_each_rank_watch():
    assert should_watch(["train.py"], {})
    assert not should_watch(["-c", "--multiprocessing-fork", "tracker_fd=5"], {})
    assert not should_watch(["train.py"], {"LOADERBENCH_DOCTOR_OWNER": "12:"})
    # torchrun's launcher watches (no rank), each rank does, a rank's spawned worker does not
    assert should_watch(["train.py"], {"LOADERBENCH_DOCTOR_OWNER": "12:", "RANK": "1"})
    assert not should_watch(["train.py"], {"LOADERBENCH_DOCTOR_OWNER": "13:1", "RANK": "1"})


# --- whole scripts, through the command line ------------------------------------------------------------------

TWO_LOADERS = """
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.tensor([i])

def main():
    train = DataLoader(Slow(), batch_size=2, num_workers=1, multiprocessing_context="spawn")
    val = DataLoader(Slow(), batch_size=4)
    for epoch in range(2):
        for b in train:
            time.sleep(0.001)
        for b in val:
            pass
    print("script done", file=sys.stderr)

if __name__ == "__main__":
    main()
"""

RAISES = """
import time
import torch
from torch.utils.data import DataLoader

loader = DataLoader(list(range(200)), batch_size=2)
for i, b in enumerate(loader):
    time.sleep(0.001)
    if i == 12:
        raise RuntimeError("the model exploded at step 12")
"""

NO_LOADER = """
import torch
print("trained", torch.ones(2).sum().item())
"""


def _doctor(tmp_path: Path, script: str, *extra: str, name: str = "train.py") -> subprocess.CompletedProcess:
    path = tmp_path / name
    path.write_text(textwrap.dedent(script))
    cmd = [sys.executable, "-m", "loaderbench", "doctor", "--out", str(tmp_path / "out"), *extra]
    return subprocess.run(
        cmd + ["--", sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.slow
def test_script_with_spawn_workers_and_two_loaders(tmp_path):
    r = _doctor(tmp_path, TWO_LOADERS, "--steps", "8", "--warmup", "2", "--headspace-steps", "3")
    assert r.returncode == 0, r.stderr
    assert "script done" in r.stderr
    doc = read(tmp_path / "out" / "doctor.json")
    assert doc["schema"] == SCHEMA and doc["schema_version"] == VERSION and doc["status"] == "ok"
    assert doc["fingerprint"]["torch"] == torch.__version__
    # versions as the script's process has them: it never imported torchvision, so none is named (or imported)
    assert doc["fingerprint"]["torchvision"] is None and doc["processes"][0]["versions"]["torch"] == torch.__version__
    (proc,) = doc["processes"]
    train, val = proc["loaders"]
    assert train["settings"]["start_method"] == "spawn" and train["settings"]["num_workers"] == 1
    assert val["settings"]["num_workers"] == 0 and val["settings"]["batch_size"] == 4
    for lo in (train, val):
        assert lo["state"] == "done" and lo["steps"]["measured_steps"] == 8
        assert lo["headspace"]["steps"] == 3
    page = (tmp_path / "out" / "doctor.html").read_text()
    assert page.count("<svg") >= 2 and "http" not in page.split("<body>")[1]


EPOCHS = """
import time
import torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.tensor([i])

if __name__ == "__main__":
    loader = DataLoader(Slow(), batch_size=2)
    steps = 0
    for epoch in range(30):
        for batch in loader:  # a new iterator every epoch, from the same line
            time.sleep(0.002)
            steps += 1
    print("script done", steps)
"""


@pytest.mark.slow
def test_try_through_the_hooks_feeds_the_other_arm_from_its_own_iterator(tmp_path):
    """The other arm's loader is iterated from the script's own loop line; it must not be watched as the script's
    loader is (that would feed it to itself), and the script runs to its end."""
    r = _doctor(tmp_path, EPOCHS, "--steps", "8", "--warmup", "2", "--no-headspace", "--try", "num_workers=1")
    # 30 epochs of 8 batches, and the 4 x 10 steps of arm B fed between them from the other loader
    assert r.returncode == 0 and "script done 280" in r.stdout, r.stderr[-3000:]
    (lo,) = read(tmp_path / "out" / "doctor.json")["processes"][0]["loaders"]
    assert lo["in_loop"]["rounds"] == 4 and lo["in_loop"]["changes"] == {"num_workers": 1}


@pytest.mark.slow
def test_a_script_that_raises_keeps_its_status_stderr_and_measurements(tmp_path):
    r = _doctor(tmp_path, RAISES, "--steps", "100", "--warmup", "2")
    assert r.returncode == 1
    assert "the model exploded at step 12" in r.stderr
    doc = json.loads((tmp_path / "out" / "doctor.json").read_text())
    assert doc["status"] == "script failed" and doc["exit_code"] == 1
    assert "the model exploded at step 12" in doc["stderr_tail"]
    (lo,) = doc["processes"][0]["loaders"]
    assert lo["steps"]["warmup_steps"] == 2 and lo["steps"]["measured_steps"] >= 9
    assert lo["note"] and lo["state"] == "done"
    assert "exited with status 1" in r.stdout


@pytest.mark.slow
def test_a_script_without_a_dataloader_gets_one_sentence(tmp_path):
    r = _doctor(tmp_path, NO_LOADER)
    assert r.returncode == 1
    assert "trained 2.0" in r.stdout
    said = [line for line in r.stdout.splitlines() if "never iterated" in line]
    assert len(said) == 1
    doc = read(tmp_path / "out" / "doctor.json")
    assert doc["status"] == "no loader" and doc["exit_code"] == 0


def test_doctor_without_a_command_is_bad_input(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "loaderbench", "doctor", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: no command to watch") and "Traceback" not in r.stderr


SVG_CHECK = """<script>
window.addEventListener("load", () => {
  const out = [];
  for (const svg of document.querySelectorAll("svg")) {
    const box = svg.getBoundingClientRect();
    out.push(Math.round(box.width) + "x" + Math.round(box.height) + "x" + svg.querySelectorAll("rect,polyline").length);
  }
  document.title = "CHECKED " + out.length + " " + out.join(" ");
});
</script>"""


def test_the_page_opens_in_the_headless_browser(tmp_path):
    from tests.test_report_browser import chromium

    browser = chromium()
    _, _, lo = _loop(num_workers=1, steps=12, headspace=4)
    from loaderbench.doctor.page import render

    page = render({"command": ["train.py"], "status": "ok", "exit_code": 0, "processes": [{"loaders": [lo]}]})
    checked = tmp_path / "checked.html"
    checked.write_text(page.replace("</body>", SVG_CHECK + "</body>"))
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-breakpad",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            checked.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    import re

    title = re.search(r"<title>(.*?)</title>", proc.stdout, re.S)
    assert title and title.group(1).startswith("CHECKED"), proc.stderr[-2000:]
    _, count, *boxes = title.group(1).split(" ")
    assert int(count) >= 2
    for box in boxes:
        w, h, marks = (int(x) for x in box.split("x"))
        assert w > 0 and h > 0 and marks > 0, box
