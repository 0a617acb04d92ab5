"""A local run adds repetitions only to records of this machine (loaderbench.launch.same_machine)."""

import json

import pytest

from loaderbench.errors import LoaderbenchError
from loaderbench.launch.local import run_local
from loaderbench.schema.store import Store
from loaderbench.study.study_file import parse_study


def _study():
    return parse_study(
        {
            "study": {"name": "same", "repetitions": 2, "warmup_batches": 1, "measure_batches": 5},
            "matrix": {"workload": "cpu", "cpu_work": 1, "batch_size": 2, "num_workers": 0, "cores": 1},
        },
        where="test",
    )


@pytest.mark.slow
def test_a_study_measured_on_another_machine_gets_no_repetition_here(tmp_path):
    """Records of this machine take more repetitions; once one says it came from another CPU, the run refuses
    before any cell, naming that record and both machines, and writes nothing."""
    store = Store(tmp_path)
    first = run_local(_study(), store)
    assert first.measured == 2 and not first.failed
    (one, rec), (other, _) = sorted(store.records("same"))
    other.unlink()  # one repetition to measure again: this machine's records take it
    assert run_local(_study(), store).measured == 1

    data = json.loads(one.read_text())
    data["env"]["cpu_model"] = "Another CPU @ 1.0GHz"
    one.write_text(json.dumps(data))
    other.unlink()
    with pytest.raises(LoaderbenchError) as err:
        run_local(_study(), store)
    message = str(err.value)
    assert str(one) in message and "Another CPU @ 1.0GHz" in message and repr(rec.env["cpu_model"]) in message
    assert not other.exists()
