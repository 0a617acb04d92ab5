"""The doctor under torchrun: every rank watches its own loader, and doctor.json holds one diagnosis per rank (the
launcher, which iterates no loader, is not one of them)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from loaderbench.doctor.doctor_json import read
from tests.test_doctor import REPO

DDP_SCRIPT = """
import os, time
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

class Slow(Dataset):
    def __len__(self):
        return 256
    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(8), torch.tensor(i)

if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = Slow()
    loader = DataLoader(data, batch_size=4, sampler=DistributedSampler(data))
    seen = []
    for x, ids in loader:
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += ids.tolist()
    print(f"rank {rank} saw {len(seen)} samples, {len(set(seen))} distinct", flush=True)
    dist.destroy_process_group()
"""


@pytest.mark.slow
def test_two_ranks_under_torchrun_get_one_diagnosis_each(tmp_path: Path):
    script = tmp_path / "train_ddp.py"
    script.write_text(textwrap.dedent(DDP_SCRIPT))
    out = tmp_path / "out"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "loaderbench", "doctor", "--out", str(out), "--steps", "10", "--warmup", "2"]
        + ["--headspace-steps", "3", "--", *torchrun, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    # each rank's loop ran its own half of the data (32 batches of 4), and 3 batches again (the headspace replay)
    for rank in (0, 1):
        assert f"rank {rank} saw 140 samples, 128 distinct" in r.stdout, r.stdout
    doc = read(out / "doctor.json")
    assert doc["status"] == "ok"
    ranks = [p["rank"] for p in doc["processes"]]
    assert ranks == [0, 1]  # one entry per rank, in rank order; not the launcher
    pids = {p["pid"] for p in doc["processes"]}
    assert len(pids) == 2
    for p in doc["processes"]:
        (lo,) = p["loaders"]
        assert p["world_size"] == "2"
        assert lo["settings"]["sampler"].endswith("DistributedSampler")
        assert lo["steps"]["measured_steps"] == 10 and lo["state"] == "done"
        assert lo["verdict"] in ("data-bound", "data-bound and CPU-bound", "not data-bound")
        assert f"rank {p['rank']}: loader #1" in r.stderr  # each rank's diagnosis is said as that rank's


@pytest.mark.slow
def test_two_ranks_agree_on_one_setting_before_their_rounds(tmp_path: Path):
    """--tune under torchrun: each rank searches its own loader, both validate the same changes in their loops."""
    script = tmp_path / "train_ddp.py"
    script.write_text(
        textwrap.dedent(DDP_SCRIPT).replace(
            "    for x, ids in loader:", "    for x, ids in (b for _ in range(4) for b in loader):"
        )
    )
    out = tmp_path / "out"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    plan = ["--steps", "8", "--warmup", "2", "--headspace-steps", "2", "--tune", "--budget-trials", "4"]
    r = subprocess.run(
        [sys.executable, "-m", "loaderbench", "doctor", "--out", str(out), *plan, "--rounds", "2", "--round-steps", "4"]
        + ["--", *torchrun, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    doc = read(out / "doctor.json")
    agreements = [p["loaders"][0]["tune"]["agreement"] for p in doc["processes"]]
    assert [a["missing"] for a in agreements] == [[], []]
    assert agreements[0]["found"] == agreements[1]["found"] and set(agreements[0]["found"]) == {"0", "1"}
    chosen = agreements[0]["chosen"]
    assert agreements[1]["chosen"] == chosen
    for p in doc["processes"]:
        lo = p["loaders"][0]
        if chosen:  # what every rank's loop validated is what they agreed on
            assert lo["in_loop"]["changes"] == chosen


def test_ranks_take_the_changes_most_found_and_the_lowest_rank_among_equals(tmp_path: Path):
    import threading

    from loaderbench.doctor.agreement import agree

    wins = {0: {"num_workers": 2}, 1: {"num_workers": 4}, 2: {"num_workers": 4}}
    got: dict = {}

    def rank(r: int) -> None:
        got[r] = agree(tmp_path / "three", "#1 (train.py:12)", r, 3, wins[r], wait_s=60)

    threads = [threading.Thread(target=rank, args=(r,)) for r in wins]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {r: c for r, (c, _) in got.items()} == {0: {"num_workers": 4}, 1: {"num_workers": 4}, 2: {"num_workers": 4}}
    assert got[0][1]["from_ranks"] == [1, 2]
    # two ranks, two winners: the lowest rank's
    two = {}
    for r, c in ((1, {"num_workers": 8}), (0, {"num_workers": 1})):
        threading.Thread(target=lambda r=r, c=c: two.__setitem__(r, agree(tmp_path / "two", "x", r, 2, c))).start()
    deadline = time.monotonic() + 60
    while len(two) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert two[0][0] == two[1][0] == {"num_workers": 1}


def test_a_rank_that_never_reports_leaves_each_its_own_winner(tmp_path: Path):
    from loaderbench.doctor.agreement import agree

    now = [0.0]
    changes, info = agree(
        tmp_path,
        "x",
        0,
        2,
        {"num_workers": 2},
        wait_s=5.0,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + 1),
    )
    assert changes == {"num_workers": 2} and info["missing"] == [1] and "did not report within 5 s" in info["note"]


def test_under_srun_the_rank_comes_from_slurm(monkeypatch):
    from loaderbench.doctor.bootstrap import should_watch
    from loaderbench.doctor.session import Session
    from loaderbench.doctor.watch import WatchPlan

    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    session = Session(WatchPlan(), echo=False)
    doc = session.to_json()
    assert (doc["rank"], doc["world_size"]) == (3, "4")
    assert session.prefix == "loaderbench doctor: rank 3: "
    # srun's tasks each watch, even below a watching process of another rank
    assert should_watch(["train.py"], {"LOADERBENCH_DOCTOR_OWNER": "12:0", "SLURM_PROCID": "3"})
