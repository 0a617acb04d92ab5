"""Study files fuzzed: random bytes, mangled TOML, valid TOML of the wrong shape, wrong types, huge values,
unknown axes. The outcome is always a valid plan or one StudyError, never another exception (or a hang)."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaderbench.errors import StudyError
from loaderbench.schema.axes import AXES
from loaderbench.study.study_file import load_study

# CI: a fixed, repeatable sample. Fuzz harder with LOADERBENCH_FUZZ_EXAMPLES=5000 (then random, not repeatable).
_N = int(os.environ.get("LOADERBENCH_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_N or 150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=not _N, database=None
)

VALID = """[study]
name = "fuzz"
repetitions = 2
warmup_batches = 1
measure_batches = 3
timeout_s = 30

[dataset]
kind = "synthetic-jpeg"
images = 16

[matrix]
workload = ["sleep", "cpu", "fault"]
num_workers = [0, 2]
cores = [1]
batch_size = [4]
fault = ["none", "raise"]
ulimit_nofile = [64]

[[exclude]]
num_workers = 0
workload = "cpu"
"""


# --- a small TOML writer (the standard library only reads TOML) ------------------------------------------


def _key(k: str) -> str:
    return k if k and all(c in string.ascii_letters + string.digits + "_-" for c in k) else _value(k)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")  # JSON escapes are TOML's
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def dump(doc: dict) -> str:
    lines = []
    for k, v in doc.items():
        if (
            not isinstance(v, (dict, list))
            or (isinstance(v, list) and not all(isinstance(x, dict) for x in v))
            or not v
        ):
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in doc.items():
        if isinstance(v, dict) and v:
            lines.append(f"[{_key(k)}]")
            lines += [f"{_key(kk)} = {_value(vv)}" for kk, vv in v.items()]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                lines.append(f"[[{_key(k)}]]")
                lines += [f"{_key(kk)} = {_value(vv)}" for kk, vv in item.items()]
    return "\n".join(lines) + "\n"


# --- strategies ---------------------------------------------------------------------------------------------

scalars = st.one_of(
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.sampled_from([0, -1, 1, 2**31, 2**63 - 1, -(2**63), 10**18]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.text(alphabet="ab;'\"\\ $`\n\t\x00é☃", max_size=10),
    st.datetimes(),
    st.dates(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=12,
)
axis_names = st.sampled_from(sorted(AXES))
any_key = st.one_of(
    axis_names,
    st.text(max_size=12),
    st.sampled_from(["name", "repetitions", "timeout_s", "seed", "kind", "images", "path", "recipe"]),
)


_POOL = [
    True,
    False,
    0,
    1,
    2,
    3,
    4,
    16,
    64,
    128,
    1000,
    0.5,
    2.0,
    12.0,
    "fork",
    "spawn",
    "forkserver",
    "file_system",
    "file_descriptor",
    "sleep",
    "cpu",
    "fault",
    "rng",
    "none",
    "raise",
    "hang",
    "busy",
    "pil",
    "full",
    "decode",
    "list_str",
    "auto",
    "cpu",
]


def _valid(name: str) -> list:
    out = []
    for v in _POOL:
        try:
            AXES[name].validate(v)
        except Exception:  # noqa: BLE001 - not a value of this axis
            continue
        if repr(v) not in map(repr, out):
            out.append(v)
    return out


VALID_VALUES = {name: _valid(name) for name in AXES}


def _axis_value(name: str):
    """Values for an axis: mostly valid ones, else extremes and the wrong type."""
    good = VALID_VALUES[name] or [1]
    return st.one_of(
        st.sampled_from(good),
        st.sampled_from(good),
        st.integers(-5, 5000),
        st.sampled_from(["fork", "none", "oom", "sleep"]),
        values,
    )


@st.composite
def mutated_study(draw) -> dict:
    import tomllib

    doc = tomllib.loads(VALID)
    for _ in range(draw(st.integers(1, 6))):
        where = draw(st.sampled_from(["study", "dataset", "matrix", "exclude", "top", "drop"]))
        if where == "drop" and doc:
            doc.pop(draw(st.sampled_from(sorted(doc))), None)
        elif where == "top":
            doc[draw(st.text(max_size=8))] = draw(values)
        elif where == "exclude":
            rule = {draw(axis_names): draw(values)}
            doc["exclude"] = draw(st.sampled_from([[rule], [], [rule, {}], rule, "x"]))
        elif where == "matrix" and isinstance(doc.get("matrix"), dict):
            name = draw(axis_names)
            doc["matrix"][draw(st.one_of(st.just(name), st.just(name), any_key))] = draw(
                st.one_of(
                    _axis_value(name),
                    st.lists(_axis_value(name), max_size=5),
                    st.lists(st.sampled_from(VALID_VALUES[name] or [1]), min_size=1, max_size=3, unique_by=repr),
                )
            )
        elif isinstance(doc.get(where), dict):
            doc[where][draw(any_key)] = draw(values)
    return doc


@st.composite
def valid_variation(draw) -> dict:
    """Valid values only, in random combinations: most of these are plans, the rest a StudyError that says why
    (e.g. [[exclude]] removing every cell)."""
    import tomllib

    doc = tomllib.loads(VALID)
    names = [n for n in sorted(AXES) if VALID_VALUES[n]]
    for name in draw(st.lists(st.sampled_from(names), max_size=5, unique=True)):
        doc["matrix"][name] = draw(
            st.lists(st.sampled_from(VALID_VALUES[name]), min_size=1, max_size=3, unique_by=repr)
        )
    rules = []
    for name in draw(st.lists(st.sampled_from(names), max_size=2, unique=True)):
        rules.append({name: draw(st.sampled_from(VALID_VALUES[name]))})
    doc["exclude"] = rules
    if not rules:
        doc.pop("exclude")
    return doc


def check(path) -> None:
    """Either a valid, runnable plan, or exactly one StudyError."""
    try:
        study = load_study(path, max_cores=2)
    except StudyError as exc:
        assert str(exc).strip()
        return
    assert study.cells, "a valid study has cells"
    ids = [c.cell_id for c in study.cells]
    assert len(ids) == len(set(ids))
    for cell in study.cells:
        cfg = cell.config
        for name, axis in AXES.items():
            v = cfg[name]
            if v is not None and v != axis.default:
                axis.validate(v)  # every value that runs was validated
        assert 1 <= cfg["cores"] <= 2


@FUZZ
@given(st.binary(max_size=600))
def test_random_bytes(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("f") / "s.toml"
    p.write_bytes(data)
    check(p)


@FUZZ
@given(st.text(max_size=400), st.integers(0, len(VALID)), st.integers(0, 60))
def test_mangled_toml(tmp_path_factory, junk, at, cut):
    """The valid study with a cut out and random text spliced in."""
    p = tmp_path_factory.mktemp("f") / "s.toml"
    p.write_text(VALID[:at] + junk + VALID[at + cut :], encoding="utf-8", errors="surrogatepass")
    check(p)


@FUZZ
@given(mutated_study())
def test_wrong_types_huge_values_unknown_keys(tmp_path_factory, doc):
    p = tmp_path_factory.mktemp("f") / "s.toml"
    try:
        text = dump(doc)
    except (TypeError, ValueError):
        return
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    check(p)


@FUZZ
@given(valid_variation())
def test_valid_values_in_random_combinations(tmp_path_factory, doc):
    p = tmp_path_factory.mktemp("f") / "s.toml"
    p.write_text(dump(doc), encoding="utf-8")
    check(p)


@FUZZ
@given(st.dictionaries(st.text(max_size=10), values, max_size=6))
def test_arbitrary_documents(tmp_path_factory, doc):
    p = tmp_path_factory.mktemp("f") / "s.toml"
    p.write_text(dump(doc), encoding="utf-8", errors="surrogatepass")
    check(p)


def test_deep_nesting(tmp_path):
    p = tmp_path / "deep.toml"
    p.write_text('[study]\nname = "d"\n[matrix]\nnum_workers = ' + "[" * 5000 + "]" * 5000 + "\n")
    check(p)
    p.write_text("a = " + "{b = " * 5000 + "1" + "}" * 5000 + "\n")
    check(p)


def test_huge_matrix_is_refused_quickly(tmp_path):
    """Ten axes of ten valid values each: 10^10 combinations must be a StudyError, not an endless expansion."""
    p = tmp_path / "huge.toml"
    p.write_text(
        '[study]\nname = "h"\n[matrix]\n'
        "num_workers = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
        "batch_size = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
        "prefetch_factor = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
        "epochs = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
        "step_ms = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
        "sleep_ms = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
        "sample_kb = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
        "tensors_per_sample = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
        "fault_at = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
        "ulimit_nofile = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]\n"
    )
    try:
        load_study(p, max_cores=2)
    except StudyError as exc:
        assert "combinations" in str(exc)
    else:
        raise AssertionError("a 10^10-cell study was accepted")
