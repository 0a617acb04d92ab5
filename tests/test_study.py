"""Study files: expansion into cells, stable ids, and one clear error per bad input."""

import pytest

from loaderbench.errors import StudyError
from loaderbench.study.study_file import load_study

BASE = """
[study]
name = "t"
repetitions = 2
[matrix]
workload = ["sleep", "cpu"]
num_workers = [0, 1, 2]
cores = [1]
"""


def test_cartesian_product_and_defaults(study_file):
    study = load_study(study_file(BASE))
    assert len(study.cells) == 6
    assert all(c["batch_size"] == 32 for c in study.cells)
    # the start method is a worker setting: its default where there are workers, None (meaningless) without
    assert {c["num_workers"]: c["start_method"] for c in study.cells} == {0: None, 1: "fork", 2: "fork"}
    assert {c["workload"] for c in study.cells} == {"sleep", "cpu"}


def test_cell_ids_stable_and_unique(study_file, tmp_path):
    a = load_study(study_file(BASE, "a.toml"))
    b = load_study(study_file(BASE.replace('name = "t"', 'name = "other"'), "b.toml"))
    assert [c.cell_id for c in a.cells] == [c.cell_id for c in b.cells]
    assert len({c.cell_id for c in a.cells}) == len(a.cells)
    c = load_study(study_file(BASE.replace("[study]", "[study]\nmeasure_batches = 7"), "c.toml"))
    assert not {x.cell_id for x in a.cells} & {x.cell_id for x in c.cells}


def test_exclude_and_ratio(study_file):
    text = BASE + '\n[[exclude]]\nworkload = "cpu"\nnum_workers = [1, 2]\n'
    study = load_study(study_file(text))
    assert sorted((c["workload"], c["num_workers"]) for c in study.cells) == [
        ("cpu", 0),
        ("sleep", 0),
        ("sleep", 1),
        ("sleep", 2),
    ]
    ratio = load_study(study_file(BASE.replace("[study]", "[study]\nmax_workers_per_core = 1"), "r.toml"))
    assert max(c["num_workers"] for c in ratio.cells) == 1


def test_meaningless_axes_collapse(study_file):
    text = BASE.replace(
        "num_workers = [0, 1, 2]", 'num_workers = [0]\nprefetch_factor = [2, 4]\ndecoder = ["pil", "torchvision"]'
    )
    study = load_study(study_file(text))
    # prefetch_factor means nothing without workers, decoder nothing without jpeg: 2 cells, not 8
    assert len(study.cells) == 2
    assert all(c["prefetch_factor"] is None and c["decoder"] is None for c in study.cells)


@pytest.mark.parametrize(
    "matrix_line, key, allowed",
    [
        ("num_workers = [-1]", "num_workers", "an integer from 0 to 1024"),
        ("num_workers = [1.5]", "num_workers", "an integer"),
        ('num_workers = ["2"]', "num_workers", "an integer"),
        ('start_method = ["forkserve"]', "start_method", "fork, spawn, forkserver"),
        ("cores = [100000]", "cores", "1 to"),
        ("batch_size = []", "batch_size", "empty axis"),
        ('workloads = ["sleep"]', "workloads", "did you mean 'workload'"),
        ("pin_memory = [1]", "pin_memory", "true or false"),
    ],
)
def test_bad_matrix_values_named(study_file, matrix_line, key, allowed):
    axis = matrix_line.split(" =")[0]
    text = "\n".join(ln for ln in BASE.splitlines() if not ln.startswith(axis + " ="))
    path = study_file(text + "\n" + matrix_line + "\n")
    with pytest.raises(StudyError) as exc:
        load_study(path)
    msg = str(exc.value)
    assert str(path) in msg and key in msg and allowed in msg
    assert "Traceback" not in msg


def test_cores_limit_is_the_machine(study_file):
    with pytest.raises(StudyError, match=r"cores = 3: more than the 2 CPUs"):
        load_study(study_file(BASE.replace("cores = [1]", "cores = [3]")), max_cores=2)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[study\nname=", "not valid TOML"),
        ('[matrix]\nworkload = ["sleep"]\n', "[study]: missing"),
        (BASE.replace("repetitions = 2", "repetitions = 0"), "repetitions = 0"),
        (BASE.replace("repetitions = 2", "repetition = 2"), "repetition: unknown key"),
        (BASE + '\n[datasets]\nkind = "x"\n', "[datasets]: unknown table"),
        (BASE + '\n[dataset]\nkind = "imagefolder"\n', "[dataset] path: missing"),
        (BASE + '\n[[exclude]]\nworkload = ["sleep", "cpu"]\n', "removes every cell"),
    ],
)
def test_bad_files(study_file, text, fragment):
    with pytest.raises(StudyError) as exc:
        load_study(study_file(text))
    assert fragment in str(exc.value)


def test_missing_file(tmp_path):
    with pytest.raises(StudyError, match="no such study file"):
        load_study(tmp_path / "nope.toml")


def test_every_problem_reported_at_once(study_file):
    text = BASE.replace("cores = [1]", "cores = [1]\nnum_workers = [-3]\nbatch_size = [0]").replace(
        "num_workers = [0, 1, 2]\n", ""
    )
    with pytest.raises(StudyError) as exc:
        load_study(study_file(text))
    assert "2 problems" in str(exc.value)


@pytest.mark.parametrize("name", ["quick", "scaling"])
def test_shipped_studies_valid(name):
    from loaderbench.study.study_file import load_study
    from tests.conftest import REPO

    study = load_study(REPO / "loaderbench" / "studies" / f"{name}.toml", max_cores=64)
    assert study.cells
