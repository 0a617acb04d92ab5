"""`loaderbench cell --set axis=value ...`: one cell, as a study of one, validated by the study rules.

Each `--set` is `key=value` with the value written as in a study file (TOML: `4`, `2.5`, `true`, `"jpeg"`;
a bare word is taken as a string). The key is a matrix axis, a [study] setting, or a dotted table key
(`study.measure_batches`, `dataset.images`, `factory_args.image_size`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from loaderbench.errors import StudyError
from loaderbench.schema.axes import AXES
from loaderbench.study.study_file import Study, StudySettings, parse_study

STUDY_NAME = "cell"
DEFAULTS = {"repetitions": 1}


def parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare word: a string


def one_cell_study(settings: list[str], where: str = "--set") -> Study:
    raw: dict[str, dict[str, Any]] = {"study": {"name": STUDY_NAME, **DEFAULTS}, "matrix": {}}
    for item in settings:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise StudyError(f"{where} {item!r}: expected key=value (e.g. num_workers=4)")
        value = parse_value(text.strip())
        if isinstance(value, list):
            raise StudyError(f"{where} {item!r}: one value per axis (a study file lists several)")
        table, dot, name = key.partition(".")
        if dot:
            raw.setdefault(table, {})[name] = value
        elif key in AXES:
            raw["matrix"][key] = value
        elif key in StudySettings.model_fields:
            raw["study"][key] = value
        else:
            raw["matrix"][key] = value  # validation names the unknown axis and suggests the closest
    study = parse_study(raw, where=where, path=Path(where))
    if len(study.cells) != 1:
        raise StudyError(f"{where}: gives {len(study.cells)} cells; one value per axis makes one cell")
    return study
