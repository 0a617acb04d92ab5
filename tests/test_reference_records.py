"""The reference records shipped from a GPU node stay readable by the analysis and keep deciding the claims
they were kept for (a change to the record schema or a claim's rule that orphaned them would show here)."""

from pathlib import Path

from analysis.claims import FAILS, HOLDS, NOT_MEASURED, claims_table
from analysis.records import load_records
from tests.conftest import REPO

H100 = REPO / "results" / "reference" / "h100"


def test_h100_records_load_from_a_cuda_device():
    df, report = load_records(H100, use_cache=False)
    assert not report.skipped
    counts = df.groupby("study").size().to_dict()
    assert counts == {"gpu-feed": 43, "ladder": 30}
    assert (df["status"] == "ok").all()
    assert set(df["consumer"]) == {"gpu"} and set(df["env_cuda_device"]) == {"NVIDIA H100 80GB HBM3"}
    assert (Path(H100) / "README.md").exists()


def test_h100_ladder_decides_every_ladder_claim():
    df, _ = load_records(H100, use_cache=False)
    ladder = claims_table(df).query("question == 'ladder'")
    assert len(ladder) == 8
    assert (ladder["verdict"] != NOT_MEASURED).all()
    assert (ladder["verdict"] == HOLDS).all(), ladder[["claim", "evidence"]].to_string()


def test_h100_gpu_feed_decides_its_rules_of_thumb():
    df, _ = load_records(H100, use_cache=False)
    feed = claims_table(df).query("question == 'gpu-feed'")
    assert len(feed) == 2 and (feed["study"] == "gpu-feed").all()
    assert (feed["verdict"] == FAILS).all(), feed[["claim", "evidence"]].to_string()


def test_claims_this_machine_cannot_measure_point_to_the_reference():
    from analysis.claims.common import GPU_REFERENCE
    table = claims_table(load_records(H100, use_cache=False)[0].iloc[0:0])  # no records at all
    gpu = table[table["question"].isin(["ladder", "gpu-feed"])]
    assert len(gpu) == 10 and (gpu["verdict"] == NOT_MEASURED).all()
    assert gpu["evidence"].str.contains(f"make figures RESULTS={GPU_REFERENCE}", regex=False).all()
    assert (REPO / GPU_REFERENCE).is_dir()
