"""Tests of loaderbench.analysis.report.recommend on synthetic curves (deterministic, fast)."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderbench.analysis.report.recommend import (
    RULE_LABELS,
    evaluate_rules,
    knee,
    lookup,
    medians_by_n,
    rules_of_thumb,
)

# median throughput per num_workers; best 640 at N=16, 5 % band >= 608 -> knee N=8
CURVE = {0: 50.0, 1: 100.0, 2: 190.0, 4: 350.0, 8: 620.0, 16: 640.0, 32: 500.0}
MB = 2**20


def _table(curve=CURVE, workload="img", cores=8):
    rows = []
    for n, v in curve.items():
        # three repetitions whose median is exactly v
        for r, f in enumerate([0.99, 1.0, 1.01]):
            rows.append(
                dict(
                    workload=workload,
                    cores=cores,
                    num_workers=n,
                    repetition=r,
                    status="ok",
                    samples_per_s=v * f,
                    uss_peak_bytes=float((100 + 50 * n) * MB),
                )
            )
        rows.append(
            dict(
                workload=workload,
                cores=cores,
                num_workers=n,
                repetition=3,
                status="failed",
                samples_per_s=np.nan,
                uss_peak_bytes=np.nan,
            )
        )
    # a timed-out run with an absurd value must be ignored
    rows.append(
        dict(
            workload=workload,
            cores=cores,
            num_workers=1,
            repetition=4,
            status="timeout",
            samples_per_s=1e9,
            uss_peak_bytes=0.0,
        )
    )
    return pd.DataFrame(rows)


def test_knee_picks_smallest_n_within_5_percent():
    k = knee(_table())
    assert (k.knee_n, k.best_n) == (8, 16)
    assert k.knee_x == pytest.approx(620.0) and k.best_x == pytest.approx(640.0)
    # tighter band: only the best itself qualifies
    assert knee(_table(), within=0.01).knee_n == 16
    # main-process loading is a candidate too
    flat = {0: 99.0, 1: 100.0, 2: 100.0}
    assert knee(_table(flat)).knee_n == 0


def test_knee_without_ok_rows_raises():
    t = _table()
    t["status"] = "failed"
    with pytest.raises(ValueError):
        knee(t)


@settings(max_examples=30, derandomize=True, deadline=None)
@given(st.dictionaries(st.integers(0, 64), st.floats(1.0, 1e4), min_size=1, max_size=10), st.floats(0.0, 0.5))
def test_knee_properties(curve, within):
    df = pd.DataFrame({"num_workers": list(curve), "samples_per_s": list(curve.values())})
    k = knee(df, within=within)
    assert k.knee_n <= k.best_n
    assert k.best_x == max(curve.values())
    assert k.knee_x >= (1 - within) * k.best_x
    assert all(v < (1 - within) * k.best_x for n, v in curve.items() if n < k.knee_n)


def test_rules_of_thumb():
    assert rules_of_thumb(8) == {"cores": 8, "cores_minus_1": 7, "2x_cores": 16, "4_per_gpu": 4, "lightning": 7}
    r = rules_of_thumb(32, gpus=4, local_world_size=4)
    assert r["4_per_gpu"] == 16 and r["lightning"] == 7
    r1 = rules_of_thumb(1, gpus=0)
    assert r1["cores_minus_1"] == 0 and r1["lightning"] == 1 and r1["4_per_gpu"] == 0
    assert set(r) == set(RULE_LABELS)
    with pytest.raises(ValueError):
        rules_of_thumb(0)
    with pytest.raises(ValueError):
        rules_of_thumb(8, local_world_size=0)


def test_lookup_modes():
    med = pd.Series({1: 100.0, 4: 400.0, 8: 500.0})
    assert lookup(med, 4) == (400.0, "exact", 4.0, 4.0)
    assert lookup(med, 2) == (200.0, "interpolated", 1.0, 4.0)
    assert lookup(med, 32) == (500.0, "nearest", 8.0, 8.0)  # never extrapolated
    assert lookup(med, 6, between="nearest") == (400.0, "nearest", 4.0, 4.0)  # tie -> smaller N
    assert lookup(med, 0) == (100.0, "nearest", 1.0, 1.0)


def test_evaluate_rules_expected_losses():
    t = pd.concat([_table(), _table(workload="txt", cores=4)], ignore_index=True)
    out = evaluate_rules(t)
    assert list(out.columns[:2]) == ["workload", "cores"]
    img = out[out.workload == "img"].set_index("rule")
    assert list(img.index) == list(RULE_LABELS)
    # cores=8, gpus=1: cores->8, cores-1->7, 2x->16, 4/GPU->4, Lightning->7
    assert img["rule_n"].to_dict() == {"cores": 8, "cores_minus_1": 7, "2x_cores": 16, "4_per_gpu": 4, "lightning": 7}
    x7 = 350.0 + (7 - 4) / 4 * (620.0 - 350.0)  # interpolated between N=4 and N=8
    expected_x = {"cores": 620.0, "cores_minus_1": x7, "2x_cores": 640.0, "4_per_gpu": 350.0, "lightning": x7}
    for rule, x in expected_x.items():
        assert img.loc[rule, "x_at_rule"] == pytest.approx(x)
        assert img.loc[rule, "loss_vs_best"] == pytest.approx(1 - x / 640.0)
    assert img.loc["2x_cores", "loss_vs_best"] == pytest.approx(0.0)
    assert img.loc["4_per_gpu", "loss_vs_best"] == pytest.approx(0.453125)
    assert img["match"].to_dict() == {
        "cores": "exact",
        "cores_minus_1": "interpolated",
        "2x_cores": "exact",
        "4_per_gpu": "exact",
        "lightning": "interpolated",
    }
    assert (img.loc["cores_minus_1", "n_lo"], img.loc["cores_minus_1", "n_hi"]) == (4.0, 8.0)
    assert (img["knee_n"] == 8).all() and (img["best_n"] == 16).all()
    # extra processes and memory vs the knee (USS grows by 50 MiB per worker)
    for rule, n in img["rule_n"].items():
        assert img.loc[rule, "extra_procs_vs_knee"] == n - 8
        assert img.loc[rule, "extra_mem_bytes"] == pytest.approx((n - 8) * 50 * MB)

    txt = out[out.workload == "txt"].set_index("rule")
    # cores=4: 2x cores -> 8 (exact, 620), loss 1 - 620/640
    assert txt.loc["2x_cores", "rule_n"] == 8
    assert txt.loc["2x_cores", "loss_vs_best"] == pytest.approx(1 - 620.0 / 640.0)
    assert txt.loc["cores_minus_1", "rule_n"] == 3 and txt.loc["cores_minus_1", "match"] == "interpolated"


def test_evaluate_rules_nearest_and_constants_and_no_memory():
    t = _table().drop(columns="uss_peak_bytes")
    out = evaluate_rules(t, gpus=8, between="nearest").set_index("rule")
    assert out.loc["4_per_gpu", "rule_n"] == 32 and out.loc["4_per_gpu", "match"] == "exact"
    assert out.loc["cores_minus_1", "match"] == "nearest"
    assert out.loc["cores_minus_1", "n_lo"] == 8.0  # 7 is nearer to 8 than to 4
    assert out.loc["cores_minus_1", "x_at_rule"] == pytest.approx(620.0)
    assert out["extra_mem_bytes"].isna().all()


def test_medians_by_n_ignores_not_ok_rows():
    med = medians_by_n(_table())
    assert med.loc[1] == pytest.approx(100.0)
    assert list(med.index) == sorted(CURVE)
