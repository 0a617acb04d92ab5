"""Records of several machines are decided together but never pooled: a study measured on two machines decides
each claim once per machine, and those rows combine as a claim's rows do."""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.claims import claims_table, numbered
from loaderbench.analysis.claims.claims_table import apart
from loaderbench.analysis.rules.machines import base_study
from loaderbench.fake_records.gpu import gpu_batch_table
from loaderbench.stats.verdicts import FAILS, HOLDS

NEAR = {32: 1650.0, 64: 2000.0, 128: 2150.0, 512: 2200.0, 2048: 0.0}  # 128 reaches 0.98x of the best
SHORT = {32: 800.0, 64: 900.0, 128: 1000.0, 512: 2000.0, 2048: 0.0}  # 128 reaches 0.5x


def on(machine: str, df: pd.DataFrame) -> pd.DataFrame:
    df.attrs["machine"] = machine
    return df


def verdict_44(*frames: pd.DataFrame) -> tuple[str, str]:
    row = numbered(claims_table(apart(list(frames))))
    row = row[row["number"] == "#44"].iloc[0]
    return row["verdict"], row["rows"]


def test_a_study_on_two_machines_is_told_apart_and_others_keep_their_names():
    a = on("a", pd.concat([gpu_batch_table(), gpu_batch_table().assign(study="other")], ignore_index=True))
    b = on("b", gpu_batch_table())
    df = apart([a, b])
    assert set(df["study"]) == {"gpu-batch-size (a)", "gpu-batch-size (b)", "other"}
    assert set(map(base_study, df["study"])) == {"gpu-batch-size", "other"}
    assert len(df) == len(a) + len(b) and df.attrs["machine"] == "a+b"
    assert (df.loc[df["study"] != "other", "question"] == "gpu-batch-size").all()


def test_each_machine_decides_its_own_row_and_one_refutation_decides_the_claim():
    assert verdict_44(on("a", gpu_batch_table(rate=NEAR.get))) == (HOLDS, "1 (gpu-batch-size: holds)")
    verdict, rows = verdict_44(on("a", gpu_batch_table(rate=NEAR.get)), on("b", gpu_batch_table(rate=SHORT.get)))
    assert verdict == FAILS and rows == "2 (gpu-batch-size (a): holds, gpu-batch-size (b): does not hold)"


def test_a_machine_that_did_not_measure_the_rule_adds_no_evidence():
    loader_bound = gpu_batch_table(rate=SHORT.get, au=0.3)  # the balance is not judged there
    verdict, rows = verdict_44(on("a", gpu_batch_table(rate=NEAR.get)), on("b", loader_bound))
    assert verdict == HOLDS and rows.startswith("1 (gpu-batch-size (a): holds"), rows
