"""The copy-on-write figure draws every index backing a study measures, the eager dataset of Python objects
(`decoded_objects`, the cow-memory-lazy study's) among them."""

from loaderbench.analysis.figures.questions.cow_memory import memory_growth_by_backing
from loaderbench.fake_records.questions import lazy_table


def test_the_lazy_study_s_backings_are_drawn(tmp_path):
    eager = {(b, sm): mib for b, mib in (("decoded", 60.0), ("decoded_objects", 90.0)) for sm in ("fork", "spawn")}
    paths = memory_growth_by_backing(lazy_table(eager), "cow-memory-lazy", tmp_path)
    assert paths and all(p.exists() for p in paths)
