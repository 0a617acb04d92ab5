"""Study files: load a TOML study, validate every key before anything runs, expand into cells.

Every problem found is reported at once in a single StudyError that names the file, the key,
the bad value and what is allowed. A custom workload's factories are checked last, once the rest of the
file is valid, since checking one imports and calls it (loaderbench/study/factory_check.py).
"""

from __future__ import annotations

import itertools
import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from loaderbench.errors import StudyError
from loaderbench.schema.axes import AXES, START_METHODS, Axis, validation_message
from loaderbench.schema.cell import Cell
from loaderbench.schema.disturbance import OTHERS_MARGIN, REMEASURE_BUDGET, SPEED_MARGIN
from loaderbench.schema.questions import STUDY_QUESTIONS
from loaderbench.schema.workload_catalog import WORKLOADS
from loaderbench.stats.stopping import MIN_WINDOWS
from loaderbench.study.checkpoint_rules import checkpoint_problems
from loaderbench.study.loader_rules import loader_problems
from loaderbench.study.storage_rules import storage_problems
from loaderbench.study.study_names import resolve_study
from loaderbench.study.window import study_pipeline

MAX_COMBINATIONS = 1_000_000  # of [matrix] values, before [[exclude]]


class StudySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    description: str = ""
    # the question the study is made for (loaderbench.schema.questions): carried into its records for the analysis
    question: str | None = None
    repetitions: Annotated[int, Field(ge=1, le=1000)] = 3
    warmup_batches: Annotated[int, Field(ge=0, le=100_000)] = 5
    measure_batches: Annotated[int, Field(ge=1, le=1_000_000)] = 40
    epochs: Annotated[int, Field(ge=1, le=10_000)] = 1
    timeout_s: Annotated[float | int, Field(gt=0, le=7 * 86400)] = 300
    probe_interval_s: Annotated[float | int, Field(ge=0.01, le=60)] = 0.2
    memory_interval_s: Annotated[float | int, Field(ge=0.05, le=3600)] = 2.0  # PSS/USS: a page-table walk each
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = 0
    # the measuring window (loaderbench/study/window.py): "steady" excludes start-up with a pipeline-neutral window;
    # "epoch" measures whole epochs from iter() (start-up included; warmup_batches must be 0)
    window: Literal["steady", "epoch"] = "steady"
    # adaptive measuring (loaderbench/stats/stopping.py): windows of measure_batches until the throughput's interval is
    # within target_precision of it (at least min_windows, at most max_windows or max_measure_s)
    target_precision: Annotated[float | int, Field(gt=0, lt=1)] | None = None
    min_windows: Annotated[int, Field(ge=MIN_WINDOWS, le=1000)] = MIN_WINDOWS
    max_windows: Annotated[int, Field(ge=MIN_WINDOWS, le=10_000)] = 40
    max_measure_s: Annotated[float | int, Field(gt=0, le=86400)] = 60
    max_workers_per_core: Annotated[float | int, Field(gt=0, le=1024)] | None = None  # drop cells past this ratio
    # disturbed repetitions (loaderbench/schema/disturbance.py): the machine's speed moved by more than speed_margin,
    # or other processes took more than others_margin of the cell's cores; a local run measures them again, at most
    # remeasure_budget x (cells x repetitions) extra repetitions (0: never)
    speed_margin: Annotated[float | int, Field(gt=0, le=1)] = SPEED_MARGIN
    others_margin: Annotated[float | int, Field(gt=0, le=1)] = OTHERS_MARGIN
    remeasure_budget: Annotated[float | int, Field(ge=0, le=1)] = REMEASURE_BUDGET


class DatasetSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    kind: Annotated[str, Field(pattern=r"^(synthetic-jpeg|imagefolder)$")] = "synthetic-jpeg"
    images: Annotated[int, Field(ge=1, le=10_000_000)] = 1024
    path: str | None = None
    recipe: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] = "synthetic-jpeg"


_ALLOWED_TEXT = {
    "name": "letters, digits, '.', '_' or '-', at most 64, starting with a letter or digit",
    "kind": "synthetic-jpeg or imagefolder",
    "recipe": "a shipped dataset recipe's name, or a .toml file in the current folder (letters, digits, '.', '_', '-')",
    "question": f"one of {', '.join(STUDY_QUESTIONS)}",
    "speed_margin": "a fraction above 0 and at most 1 (0.25: the reference may move 25%)",
    "others_margin": "a fraction above 0 and at most 1 (0.1: others may take 10% of the cell's cores)",
    "remeasure_budget": "a fraction from 0 to 1 of the study's repetitions (0: never measure again)",
}


@dataclass(frozen=True)
class Study:
    path: Path
    settings: StudySettings
    dataset: DatasetSettings
    cells: tuple[Cell, ...]

    @property
    def name(self) -> str:
        return self.settings.name

    def needs_dataset(self) -> bool:
        return any(WORKLOADS[c["workload"]].reads_images for c in self.cells)


def allowed_cores() -> int:
    return len(os.sched_getaffinity(0))


def load_study(path: str | os.PathLike, max_cores: int | None = None) -> Study:
    """Read, validate and expand a study file, given by its path or a shipped study's name (`quick`).
    `max_cores` defaults to the CPUs this process may use."""
    path = resolve_study(path)
    where = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StudyError(f"{where}: no such study file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StudyError(f"{where}: cannot read the study file: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"{where}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per nesting level (found by tests/test_fuzz_study.py)
        raise StudyError(f"{where}: not valid TOML: arrays or tables nested too deeply") from None
    return parse_study(raw, where=where, path=path, max_cores=max_cores)


def parse_study(raw: dict[str, Any], where: str, path: Path | None = None, max_cores: int | None = None) -> Study:
    problems: list[str] = []
    max_cores = allowed_cores() if max_cores is None else max_cores

    for key in raw:
        if key not in ("study", "dataset", "matrix", "exclude", "factory_args"):
            problems.append(
                f"[{key}]: unknown table; allowed: [study], [dataset], [matrix], [[exclude]], [factory_args]"
            )
    factory_args = raw.get("factory_args", {})
    if not isinstance(factory_args, dict):
        problems.append(
            "[factory_args]: not a table; allowed: a table of keyword arguments for the custom workload's factory"
        )

    settings = _model(StudySettings, raw.get("study"), "study", problems, required=True)
    dataset = _model(DatasetSettings, raw.get("dataset", {}), "dataset", problems)
    if dataset is not None and dataset.kind == "imagefolder" and not dataset.path:
        problems.append(
            '[dataset] path: missing; allowed: the root folder of an ImageFolder tree when kind = "imagefolder"'
        )

    matrix = raw.get("matrix")
    axes_values: dict[str, list[Any]] = {}
    if not isinstance(matrix, dict):
        problems.append("[matrix]: missing or not a table; allowed: a table of axes, each a value or a list of values")
    else:
        defaults = {"epochs": settings.epochs} if settings is not None else {}
        for key, value in matrix.items():
            values = _axis_values(key, value, "matrix", problems, max_cores)
            if values is not None:
                axes_values[key] = values
        for name, axis in AXES.items():
            axes_values.setdefault(name, [defaults.get(name, axis.default)])

    excludes = raw.get("exclude", [])
    exclude_rules: list[dict[str, list[Any]]] = []
    if not isinstance(excludes, list):
        problems.append("[[exclude]]: not an array of tables; allowed: [[exclude]] tables of axis = value(s)")
    else:
        for i, rule in enumerate(excludes):
            if not isinstance(rule, dict) or not rule:
                problems.append(f"[[exclude]] #{i + 1}: must be a non-empty table of axis = value(s)")
                continue
            parsed = {}
            for key, value in rule.items():
                values = _axis_values(key, value, f"exclude #{i + 1}", problems, max_cores)
                if values is not None:
                    parsed[key] = values
            exclude_rules.append(parsed)

    if settings is not None and settings.target_precision and axes_values.get("epochs", [1]) != [1]:
        problems.append(
            f"[matrix] epochs = {axes_values['epochs']!r}: adaptive measuring (target_precision) "
            "measures one epoch; allowed: epochs = 1 with target_precision"
        )
    if settings is not None and settings.target_precision and "ddp" in axes_values.get("rank_mode", []):
        problems.append(
            '[matrix] rank_mode = "ddp": DDP ranks step together (every step all-reduces), so one rank cannot stop '
            "early; allowed: no target_precision in a study with DDP cells"
        )
    if settings is not None and settings.window == "epoch" and settings.warmup_batches:
        problems.append(
            f'[study] warmup_batches = {settings.warmup_batches}: window = "epoch" measures whole '
            'epochs from their start; allowed: warmup_batches = 0 with window = "epoch"'
        )
    if settings is not None and settings.window == "epoch" and settings.target_precision:
        problems.append(
            '[study] target_precision: adaptive measuring needs window = "steady"; allowed: '
            'no target_precision with window = "epoch"'
        )
    if settings is not None and settings.question is not None and settings.question not in STUDY_QUESTIONS:
        problems.append(
            f"[study] question = {settings.question!r}: unknown question; allowed: {_ALLOWED_TEXT['question']}"
        )
    if settings is not None and settings.min_windows > settings.max_windows:
        problems.append(f"[study] min_windows = {settings.min_windows}: more than max_windows = {settings.max_windows}")
    if problems:
        raise StudyError(_format(where, problems))

    combinations = math.prod(len(v) for v in axes_values.values())
    if combinations > MAX_COMBINATIONS:  # expanding them would take hours (found by tests/test_fuzz_study.py)
        raise StudyError(
            f"{where}: [matrix] has {combinations:.3g} combinations of axis values; at most "
            f"{MAX_COMBINATIONS}: split it into several studies"
        )
    cells = expand(axes_values, exclude_rules, settings, dataset)
    images = tuple(w.name for w in WORKLOADS.values() if w.image_batches)
    bad = sorted({c["workload"] for c in cells if c["model"] != "none" and c["workload"] not in images})
    if bad:
        raise StudyError(
            f"{where}: [matrix] model = {axes_values['model']!r} with workload {bad!r}: a real model step "
            f'needs image batches; allowed: workload in {images} when model is not "none" '
            f"(add an [[exclude]] for the other workloads)"
        )
    if not cells:
        raise StudyError(f"{where}: [[exclude]] removes every cell of [matrix]; nothing would run")
    combined = storage_problems(cells) + loader_problems(cells) + checkpoint_problems(cells)
    if combined:
        raise StudyError(_format(where, combined))
    if any(c["workload"] == "custom" for c in cells):  # imports and calls the user's factory: last, once valid
        from loaderbench.study.factory_check import bind_factories

        study_dir = (path or Path(where)).resolve().parent
        cells = bind_factories(cells, factory_args, study_dir, float(settings.timeout_s), problems)
        if problems:
            raise StudyError(_format(where, problems))
    return Study(path=path or Path(where), settings=settings, dataset=dataset, cells=tuple(cells))


def _format(where: str, problems: list[str]) -> str:
    if len(problems) == 1:
        return f"{where}: {problems[0]}"
    return f"{where}: {len(problems)} problems:\n" + "\n".join(f"  - {p}" for p in problems)


def _model(model: type[BaseModel], data: Any, table: str, problems: list[str], required: bool = False):
    if data is None and required:
        problems.append(f'[{table}]: missing; allowed: a table with at least name = "..."')
        return None
    if not isinstance(data, dict):
        problems.append(f"[{table}]: not a table")
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "?"
            field = model.model_fields.get(str(err["loc"][0])) if err["loc"] else None
            if err["type"] == "extra_forbidden":
                allowed = ", ".join(model.model_fields)
                problems.append(f"[{table}] {key}: unknown key; allowed keys: {allowed}")
            elif err["type"] == "missing":
                problems.append(f"[{table}] {key}: missing")
            else:
                bad = err.get("input")
                hint = _ALLOWED_TEXT.get(key) or (field.annotation if field else "")
                problems.append(
                    f"[{table}] {key} = {bad!r}: {err['msg']}" + (f"; allowed: {hint}" if key in _ALLOWED_TEXT else "")
                )
        return None


def _axis_values(key: str, value: Any, table: str, problems: list[str], max_cores: int) -> list[Any] | None:
    axis = AXES.get(key)
    if axis is None:
        close = _close_match(key)
        problems.append(f"[{table}] {key}: unknown axis{close}; allowed axes: {', '.join(AXES)}")
        return None
    values = value if isinstance(value, list) else [value]
    if not values:
        problems.append(f"[{table}] {key} = []: empty axis; allowed: {axis.allowed} (a value or a non-empty list)")
        return None
    good = []
    for v in values:
        try:
            v = axis.validate(v)
        except ValidationError as exc:
            problems.append(f"[{table}] {key} = {v!r}: {validation_message(axis, exc)}")
            continue
        if key == "cores" and v > max_cores:
            problems.append(
                f"[{table}] cores = {v}: more than the {max_cores} CPUs allowed here; allowed: 1 to "
                f"{max_cores} (for a cluster study: validate or plan with --cluster PROFILE)"
            )
            continue
        if key == "start_method" and v not in START_METHODS:
            problems.append(
                f"[{table}] start_method = {v!r}: not available on this platform; allowed: {', '.join(START_METHODS)}"
            )
            continue
        if isinstance(v, int) and not isinstance(v, bool) and _is_float_axis(axis):
            v = float(v)
        good.append(v)
    if len(set(map(repr, good))) != len(good):
        problems.append(f"[{table}] {key} = {values!r}: repeated values; list each value once")
        return None
    return good if len(good) == len(values) else None


def _is_float_axis(axis: Axis) -> bool:
    return isinstance(axis.default, float)


def _close_match(key: str) -> str:
    import difflib

    match = difflib.get_close_matches(key, AXES, n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def normalize(axes: dict[str, Any]) -> dict[str, Any]:
    """Give every axis that means nothing for this cell its blank value, so equivalent cells collapse into one.
    When an axis means nothing is declared in loaderbench.schema.axes, on the other axes' values as normalized:
    threads have no start method, so no forkserver preload either; without a model there is no device, so no
    "the model runs on the CPU" to zero the simulated step. Repeated from the given values until nothing changes
    (the conditions form no cycle)."""
    out = dict(axes)
    for _ in range(len(AXES) + 1):
        new = dict(axes)
        for name, axis in AXES.items():
            if name in axes and axis.means_nothing(out):
                new[name] = axis.blank
        if new == out:
            return out
        out = new
    raise ValueError(f"the axes' conditions form a cycle: {sorted(axes)}")


def expand(
    axes_values: dict[str, list[Any]],
    excludes: list[dict[str, list[Any]]],
    settings: StudySettings,
    dataset: DatasetSettings,
) -> list[Cell]:
    """Cartesian product of the axes, minus [[exclude]] matches, with duplicates after normalising removed.
    Every cell's window is sized from the largest pipeline among them (loaderbench/study/window.py)."""
    names = list(AXES)
    kept: dict[str, dict[str, Any]] = {}
    for combo in itertools.product(*(axes_values[n] for n in names)):
        axes = dict(zip(names, combo))
        if any(all(axes[k] in vs for k, vs in rule.items()) for rule in excludes):
            continue
        ratio = settings.max_workers_per_core
        if ratio is not None and axes["num_workers"] > ratio * axes["cores"]:
            continue
        norm = normalize(axes)
        kept.setdefault(repr(sorted(norm.items(), key=lambda kv: kv[0])), norm)
    window = (
        (("window", "epoch"),) if settings.window == "epoch" else (("pipeline_batches", study_pipeline(kept.values())),)
    )
    measure = (
        ("warmup_batches", settings.warmup_batches),
        ("measure_batches", settings.measure_batches),
        ("seed", settings.seed),
        *window,
        *(
            (
                ("target_precision", settings.target_precision),
                ("min_windows", settings.min_windows),
                ("max_windows", settings.max_windows),
                ("max_measure_s", settings.max_measure_s),
            )
            if settings.target_precision
            else ()
        ),
    )
    # the study's question travels with each cell into its records, no part of its id
    context = (("question", settings.question),) if settings.question is not None else ()
    seen: dict[str, Cell] = {}
    for norm in kept.values():
        extra = (("dataset", dataset.model_dump()),) if WORKLOADS[norm["workload"]].reads_images else ()
        cell = Cell(axes=tuple(norm.items()), measure=measure + extra, context=context)
        seen.setdefault(cell.cell_id, cell)
    return list(seen.values())
