"""loaderbench installs like any Python tool and is self-contained: its studies and recipes are package data,
a shipped study runs by its name, generated data goes to a cache outside the package, and a wheel installed
into a fresh venv measures a cell and a custom-factory study from an empty folder, without the checkout.

The end-to-end test makes the fresh venv what the README says loaderbench installs into, a training environment
that has torch already, and the rest of what the wheel requires: torch, torchvision, every distribution the wheel's
metadata names and what they need, transitively, are hard links to this environment's files (pip itself would take
90 s to unpack the same 5 GB, and a minute more to unpack and compile pandas, scipy, pyarrow and matplotlib). pip
then installs the wheel, and from the package index whatever the wheel requires that the venv lacks: the venv has
only what the wheel's metadata names, so a dependency it fails to name fails the import of every module. It is
marked slow and runs in `make test`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from loaderbench import locations
from loaderbench.errors import StudyError
from loaderbench.study.study_names import resolve_study, shipped_study_list
from tests.conftest import REPO

SHIPPED = sorted(p.stem for p in (REPO / "loaderbench" / "studies").glob("*.toml"))


# --- shipped studies by name ---------------------------------------------------------------------------------


def test_a_shipped_study_resolves_by_name_and_a_file_by_its_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing of the checkout in the current folder
    quick = resolve_study("quick")
    assert quick == locations.shipped_studies()["quick"] and quick.is_file()
    assert resolve_study("quick.toml") == quick
    own = tmp_path / "mine.toml"
    own.write_text('[study]\nname = "mine"\n[matrix]\nworkload = "sleep"\n')
    assert resolve_study(own) == own and resolve_study("mine.toml") == Path("mine.toml")
    (tmp_path / "quick").write_text(own.read_text())  # a file wins over a shipped study of the same name
    assert resolve_study("quick") == Path("quick")


@pytest.mark.parametrize("arg", ["no-such-study", "elsewhere/quick.toml", "nope.toml"])
def test_an_unknown_study_is_one_error_listing_the_shipped_names(arg, tmp_path, monkeypatch):
    from loaderbench.study.study_file import load_study

    monkeypatch.chdir(tmp_path)
    with pytest.raises(StudyError) as exc:
        load_study(arg)
    message = str(exc.value)
    assert message.startswith(f"{arg}: no such study file")
    assert all(name in message for name in SHIPPED), message


def test_the_studies_command_lists_every_shipped_study_with_its_description(capsys):
    from loaderbench.cli import main

    assert main(["studies"]) == 0
    out = capsys.readouterr().out
    listed = {s.name: s.description for s in shipped_study_list()}
    assert sorted(listed) == SHIPPED
    for name, description in listed.items():
        assert description, f"the shipped study {name} has no [study] description"
        assert re.search(rf"(?m)^{re.escape(name)}\s+{re.escape(description)}$", out), out
    assert main(["studies", "--json"]) == 0
    assert [s["name"] for s in json.loads(capsys.readouterr().out)] == SHIPPED


def test_run_and_plan_take_a_shipped_name(capsys, tmp_path, monkeypatch):
    from loaderbench.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["plan", "quick", "--results", str(tmp_path / "r")]) == 0
    assert "study 'quick'" in capsys.readouterr().out
    assert main(["validate", "rng", "in-order"]) == 0
    assert main(["run", "no-such-study"]) == 2
    assert "shipped studies: " in capsys.readouterr().err


def test_the_report_names_a_shipped_study_to_run_it_again():
    from loaderbench.analysis.report.page import study_file

    assert study_file("quick") == locations.shipped_studies()["quick"]
    assert study_file("no-such-study-here") is None


# --- where things are --------------------------------------------------------------------------------------


def test_run_from_this_checkout_the_checkout_is_known():
    assert locations.checkout_root() == REPO  # the test environment installs the checkout editable
    assert locations.package_folder("recipes") == REPO / "loaderbench" / "recipes"


def test_the_cache_is_the_variable_else_the_checkout_else_the_users_cache(monkeypatch, tmp_path):
    from loaderbench.datasets import default_cache_dir

    monkeypatch.setenv("LOADERBENCH_CACHE", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine" / "datasets"
    monkeypatch.delenv("LOADERBENCH_CACHE")
    assert default_cache_dir() == REPO / ".cache" / "datasets"  # `make local` keeps its cache
    monkeypatch.setattr(locations, "checkout_root", lambda: None)  # as installed from a wheel
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "loaderbench" / "datasets"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "loaderbench" / "datasets"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec says to ignore a relative path
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "loaderbench" / "datasets"


def test_an_installed_package_asks_no_git_for_its_commit(monkeypatch):
    """Installed into a project's venv, the package sits inside that project's git repository: its commit is
    not loaderbench's."""
    from loaderbench.measure import fingerprint

    monkeypatch.delenv("LOADERBENCH_GIT_COMMIT", raising=False)
    assert fingerprint._git_commit()  # this checkout's commit
    monkeypatch.setattr(fingerprint, "checkout_root", lambda: None)

    def no_git(*args, **kwargs):
        raise AssertionError(f"git was asked: {args}")

    monkeypatch.setattr(fingerprint.subprocess, "run", no_git)
    assert fingerprint._git_commit() is None


# --- the wheel ---------------------------------------------------------------------------------------------


def copy_sources(dest: Path) -> Path:
    """What a wheel is built from (as the container image's build context): no caches, no build leftovers."""
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "loaderbench", dest / "loaderbench", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    src = copy_sources(root / "src")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(root), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = root.glob("loaderbench-*.whl")
    return built


def test_the_wheel_holds_the_package_its_studies_and_recipes_and_nothing_else(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {n.split("/")[0] for n in names} == {"loaderbench", wheel.name.split("-py3")[0] + ".dist-info"}
    package = {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "loaderbench").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".toml")
    }
    assert package - names == set(), "files of the package the wheel lacks"
    assert {f"loaderbench/studies/{s}.toml" for s in SHIPPED} <= names
    assert "loaderbench/recipes/synthetic-jpeg.toml" in names


FACTORY = """
import torch
from torch.utils.data import Dataset


class Ramp(Dataset):
    def __init__(self, n, size):
        self.n, self.size = n, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((self.size,), float(i))


def make_dataset(n=256, size=16):
    return Ramp(n, size)
"""

STUDY = """
[study]
name = "my-pipeline"
repetitions = 1
warmup_batches = 2
measure_batches = 8
timeout_s = 120

[matrix]
workload = ["custom"]
factory = ["my_pipeline:make_dataset"]
num_workers = [0, 2]
cores = [1]
batch_size = [8]

[factory_args]
n = 128
"""

# What `loaderbench.__file__` and every loaded module must not be under, and what must import in the venv.
PROBE = """
import importlib, json, pkgutil, sys
import loaderbench
for m in pkgutil.walk_packages(loaderbench.__path__, "loaderbench."):
    if not m.name.endswith(("__main__", ".script")):
        importlib.import_module(m.name)
from loaderbench import locations
from loaderbench.datasets import default_cache_dir
files = sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())})
print(json.dumps({"package": loaderbench.__file__, "files": files, "checkout": str(locations.checkout_root()),
                  "cache": str(default_cache_dir()), "studies": sorted(locations.shipped_studies())}))
"""


def torch_pins() -> list[str]:
    make = (REPO / "Makefile").read_text()
    pins = dict(re.findall(r"(?m)^(TORCH_VERSION|TORCHVISION_VERSION)\s*\?=\s*(\S+)", make))
    return [f"torch=={pins['TORCH_VERSION']}", f"torchvision=={pins['TORCHVISION_VERSION']}"]


def requirements(wheel: Path) -> list[str]:
    """The names of the distributions the wheel's metadata requires (its extras' excluded)."""
    from email.parser import HeaderParser

    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as z:
        (metadata,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        headers = HeaderParser().parsestr(z.read(metadata).decode())
    reqs = [Requirement(text) for text in headers.get_all("Requires-Dist") or []]
    return [r.name for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def _distributions(names: list[str]) -> list:
    """The installed distributions of `names` and of everything they require, transitively."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, object] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        seen[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def _installed_files(dist, here: Path) -> set[Path]:
    """A distribution's files under `here` (this environment's site-packages), with what Python compiled of its
    modules since (RECORD lists only what pip compiled): the venv's imports then find nothing left to compile."""
    files = set()
    for f in dist.files or []:
        src = Path(dist.locate_file(f)).resolve()
        if not src.is_file() or not src.is_relative_to(here):  # console scripts live outside site-packages
            continue
        files.add(src)
        if src.suffix == ".py":
            files.update((src.parent / "__pycache__").glob(f"{src.stem}.*.pyc"))
    return files


def seed(site: Path, names: list[str]) -> int:
    """Put this environment's distributions of `names` and their requirements into `site` (another venv's
    site-packages) as hard links, dist-info and compiled files included, so that pip sees them installed; returns
    the distributions linked."""
    import sysconfig

    here = Path(sysconfig.get_paths()["purelib"]).resolve()
    dists = _distributions(names)
    for src in set().union(*(_installed_files(dist, here) for dist in dists)):
        dst = site / src.relative_to(here)
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:  # another file system: a copy
            shutil.copy2(src, dst)
    return len(dists)


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` with its size and mtime."""
    out = {}
    for dirpath, _, files in os.walk(folder):
        for f in files:
            st = os.stat(os.path.join(dirpath, f))
            out[os.path.relpath(os.path.join(dirpath, f), folder)] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_wheel_in_a_fresh_venv_measures_a_cell_and_a_custom_study_from_an_empty_folder(wheel, tmp_path):
    venv = tmp_path / "venv"
    try:
        _fresh_install_runs(wheel, tmp_path, venv)
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # a few GB of torch: not kept among pytest's temporary folders


def _fresh_install_runs(wheel: Path, tmp_path: Path, venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    pip_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        ).stdout.strip()
    )
    wanted = requirements(wheel)
    assert {"torch", "torchvision", "pandas", "submitit"} <= set(wanted), wanted
    assert seed(site, wanted) > len(wanted)  # and what they require
    done = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", *torch_pins(), str(wheel)],
        capture_output=True,
        text=True,
        timeout=1200,
        env=pip_env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    before = snapshot(site)

    work = tmp_path / "empty"
    work.mkdir()
    home = tmp_path / "home"
    env = {k: v for k, v in pip_env.items() if k not in ("LOADERBENCH_CACHE", "XDG_CACHE_HOME", "MPLCONFIGDIR")}
    env.update(HOME=str(home), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")

    def run(*args: str, timeout: float = 600) -> str:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env, cwd=work)
        assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    # the package, every module of it, comes from the venv; the shipped studies and recipes with it
    probe = json.loads(run(str(py), "-c", PROBE))
    assert Path(probe["package"]).is_relative_to(site)
    files = [Path(f) for f in probe["files"] if os.path.isabs(f)]  # torch names some modules' file "_ops.py"
    from_checkout = [f for f in files if f.resolve().is_relative_to(REPO)]
    assert len(files) > 100, probe["files"]  # the probe saw the modules it loaded
    assert not from_checkout, f"modules imported from the checkout: {from_checkout[:5]}"
    assert probe["checkout"] == "None"
    assert probe["cache"] == str(home / ".cache" / "loaderbench" / "datasets")
    assert probe["studies"] == SHIPPED
    assert "quick" in run("loaderbench", "studies")
    assert "study 'quick'" in run("loaderbench", "plan", "quick", "--results", "results")

    # one cell, through the console script
    run("loaderbench", "cell", "--set", "workload=sleep", "--set", "num_workers=2", "--set", "repetitions=1")
    cell = [json.loads(p.read_text()) for p in (work / "results" / "cell").glob("*.json")]
    assert [r["status"] for r in cell] == ["ok"], cell
    assert cell[0]["metrics"]["samples_per_s"] > 0
    assert cell[0]["env"]["git_commit"] is None  # no checkout: no commit, and no git asked about another repo

    # a study whose factory lives in this folder, through `python -m loaderbench`
    (work / "my_pipeline.py").write_text(FACTORY)
    (work / "study.toml").write_text(STUDY)
    run(str(py), "-m", "loaderbench", "run", "study.toml")
    records = [json.loads(p.read_text()) for p in sorted((work / "results" / "my-pipeline").glob("*.json"))]
    assert sorted(r["config"]["num_workers"] for r in records) == [0, 2]
    assert all(r["status"] == "ok" and r["metrics"]["samples_per_s"] > 0 for r in records), records
    assert all(Path(r["config"]["factory_file"]) == work / "my_pipeline.py" for r in records)

    # the synthetic dataset goes to the user's cache; the figures and report from the records
    out = run("loaderbench", "dataset", "--images", "8")
    assert out.startswith(str(home / ".cache" / "loaderbench" / "datasets"))
    run("loaderbench", "figures", "results", "--figures", "figures")
    assert (work / "figures" / "report.html").is_file()

    after = snapshot(site)
    changed = sorted(k for k in after.keys() | before.keys() if after.get(k) != before.get(k))
    assert not changed, f"written into site-packages: {changed[:10]}"
    assert not (REPO / "results" / "my-pipeline").exists()
