"""The container recipe, checked without building an image or touching the network.

containers/Dockerfile, containers/apptainer.def, the lock files and containers/containers.mk must
agree: the base is pinned by digest, every Python package comes from the hash-checked lock,
pillow-simd is compiled last, the lock matches pyproject.toml and the Makefile's torch versions,
and Docker and Apptainer name the same image. `make image-test` does the real build.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CT = ROOT / "containers"
DOCKERFILE = CT / "Dockerfile"
LOCK = CT / "requirements.lock"
SIMD_LOCK = CT / "pillow-simd.lock"
DEF = CT / "apptainer.def"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


lockcheck = _load("containers_lockcheck", CT / "lockcheck.py")
check_record = _load("containers_check_record", CT / "check_record.py")
tomllib = lockcheck.tomllib  # stdlib tomllib, or tomli on Python 3.10


def project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


# ----------------------------------------------------------------------------- Dockerfile parsing


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    out, buf = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not buf):
            continue
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        keyword, _, args = buf.partition(" ")
        out.append((keyword.upper(), args.strip()))
        buf = ""
    assert not buf, "Dockerfile ends inside a continuation"
    return out


INSTR = instructions(DOCKERFILE.read_text())

# One `pip install` command inside a RUN: optional VAR=value prefixes, then pip or python -m pip.
PIP_INSTALL = re.compile(
    r"(?:^|&&|\|\||;)\s*(?P<env>(?:[A-Za-z_][A-Za-z0-9_]*=(?:\"[^\"]*\"|'[^']*'|\S+)\s+)*)"
    r"(?:\S*python3?(?:\.\d+)?\s+-m\s+)?\S*pip3?(?:\.\d+)?\s+install\b(?P<args>[^&;|]*)"
)


def pip_installs() -> list[dict]:
    """Every pip install of the Dockerfile in build order, with its flags and operands."""
    found = []
    for index, (keyword, args) in enumerate(INSTR):
        if keyword != "RUN":
            continue
        for m in PIP_INSTALL.finditer(args):
            tokens = shlex.split(m.group("args"))
            flags, operands, requirement_files = set(), [], []
            i = 0
            while i < len(tokens):
                tok = tokens[i]
                if tok in ("-r", "--requirement"):
                    requirement_files.append(tokens[i + 1])
                    i += 2
                    continue
                if tok in ("--no-binary", "--only-binary", "-c", "--constraint"):
                    flags.add(f"{tok} {tokens[i + 1]}")
                    i += 2
                    continue
                if tok.startswith("-"):
                    flags.add(tok)
                else:
                    operands.append(tok)
                i += 1
            found.append(
                {
                    "instr": index,
                    "pos": m.start(),
                    "env": m.group("env"),
                    "flags": flags,
                    "operands": operands,
                    "files": requirement_files,
                    "text": m.group(0).strip(),
                }
            )
    return found


def classify(step: dict) -> str:
    if step["files"] == ["/opt/loaderbench/requirements.lock"] and not step["operands"]:
        return "lock"
    if step["files"] == ["/opt/loaderbench/pillow-simd.lock"] and not step["operands"]:
        return "pillow-simd"
    if not step["files"] and step["operands"] == ["/opt/loaderbench/src"]:
        return "project"
    return "other"


def arg_defaults() -> dict[str, str]:
    defaults = {}
    for keyword, args in INSTR:
        if keyword == "ARG" and "=" in args:
            name, _, value = args.partition("=")
            defaults.setdefault(name.strip(), value.strip().strip('"'))
    return defaults


# ----------------------------------------------------------------------------- Dockerfile


def test_base_image_is_pinned_by_digest():
    froms = [args for keyword, args in INSTR if keyword == "FROM"]
    assert froms, "no FROM"
    defaults = arg_defaults()
    for ref in froms:
        ref = ref.split()[0]
        ref = re.sub(r"\$\{?(\w+)\}?", lambda m: defaults.get(m.group(1), m.group(0)), ref)
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", ref), f"FROM {ref} is not pinned by digest"
        assert re.match(r"(docker\.io/library/)?python:3\.11(\.\d+)?-slim-bookworm@", ref), ref


def test_every_python_package_comes_from_the_lock():
    steps = pip_installs()
    kinds = [classify(s) for s in steps]
    assert kinds.count("lock") == 1 and kinds.count("project") == 1 and kinds.count("pillow-simd") == 1, steps
    others = [s["text"] for s, k in zip(steps, kinds) if k == "other"]
    assert not others, f"pip installs that bypass the lock: {others}"

    lock = steps[kinds.index("lock")]
    assert "--require-hashes" in lock["flags"]
    assert "--no-deps" in lock["flags"]  # nothing beyond the lock's closure
    assert "--only-binary :all:" in lock["flags"]  # no sdist built in an unpinned environment

    project = steps[kinds.index("project")]
    assert {"--no-deps", "--no-index", "--no-build-isolation"} <= project["flags"]
    assert not {"-e", "--editable"} & project["flags"], "the project is installed editable, not as a user installs it"

    simd = steps[kinds.index("pillow-simd")]
    assert {"--no-deps", "--require-hashes", "--no-build-isolation"} <= simd["flags"]
    assert "--no-binary pillow-simd" in simd["flags"]
    assert re.search(r"""CC=(["'])cc -mavx2\1""", simd["env"]), "pillow-simd is not compiled with AVX2"

    # The lock files the RUN lines read are the repository's, copied into /opt/loaderbench/.
    copies = [args for keyword, args in INSTR if keyword == "COPY"]
    copied = " ".join(copies)
    assert "containers/requirements.lock" in copied and "containers/pillow-simd.lock" in copied
    assert any(c.split()[-1] == "/opt/loaderbench/" for c in copies if "requirements.lock" in c)


def test_pillow_simd_is_the_last_python_step_and_is_verified():
    steps = pip_installs()
    kinds = [classify(s) for s in steps]
    simd = steps[kinds.index("pillow-simd")]
    order = [(s["instr"], s["pos"]) for s in steps]
    assert (simd["instr"], simd["pos"]) == max(order), "a pip install runs after pillow-simd"
    assert kinds.index("project") < kinds.index("pillow-simd") and kinds.index("lock") < kinds.index("project")

    run = INSTR[simd["instr"]][1]
    at = run.index(simd["text"])
    before, after = run[:at], run[at:]
    assert re.search(r"pip3? uninstall -y pillow\b", before), "stock Pillow is not removed before pillow-simd"
    assert "verify_pillow_simd.py" in after, "pillow-simd is not verified in the build"
    # No pip command of any kind after it: nothing can put stock Pillow back.
    later = [args for keyword, args in INSTR[simd["instr"] + 1 :] if keyword == "RUN"]
    assert not any(re.search(r"\bpip3?\s+(install|download|wheel)\b|-m pip\b", r) for r in later)
    for word in ("install", "download"):
        assert not re.search(rf"\bpip3?\s+{word}\b", after[len(simd["text"]) :])

    verify = (CT / "verify_pillow_simd.py").read_text()
    assert r"\.post\d+$" in verify and 'check_feature("libjpeg_turbo")' in verify


def test_project_is_installed_and_runs_as_non_root_with_labels_and_entrypoint():
    users = [args for keyword, args in INSTR if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    entry = [args for keyword, args in INSTR if keyword == "ENTRYPOINT"]
    assert entry and json.loads(entry[-1]) == ["loaderbench"]
    labels = " ".join(args for keyword, args in INSTR if keyword == "LABEL")
    for key, arg in (("version", "VERSION"), ("revision", "GIT_COMMIT"), ("source", "SOURCE_URL")):
        assert re.search(rf'org\.opencontainers\.image\.{key}="?\$\{{?{arg}\}}?', labels), key
    assert arg_defaults()["VERSION"] == project_version()


def test_image_names_itself_and_its_lock():
    env = " ".join(args for keyword, args in INSTR if keyword == "ENV")
    assert re.search(r'LOADERBENCH_IMAGE="?loaderbench:\$\{?VERSION\}?', env)
    assert re.search(r'LOADERBENCH_LOCK_SHA256="?\$\{?LOCK_SHA256\}?', env)
    runs = " ".join(args for keyword, args in INSTR if keyword == "RUN")
    # The sha256 is computed in the build from the lock copied into the image and must equal the ENV.
    assert "sha256sum /opt/loaderbench/requirements.lock" in runs
    assert "/opt/loaderbench/lock.sha256" in runs
    assert re.search(r'"\$actual" != "\$\{?LOCK_SHA256\}?"', runs)


def test_build_context_holds_what_the_dockerfile_copies():
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore, ".dockerignore should exclude everything by default (venv, results, .git)"
    for keyword, args in INSTR:
        if keyword != "COPY":
            continue
        for src in args.split()[:-1]:
            if src.startswith("--"):
                continue
            assert src.rstrip("/") in allowed or src in allowed, f"COPY {src} is excluded by .dockerignore"


# ----------------------------------------------------------------------------- lock


def test_lock_has_hashes_and_the_makefile_torch_versions():
    _, pins = lockcheck.parse_lock(LOCK.read_text())
    assert len(pins) > 20
    assert all(p.hashes for p in pins.values()), [p.name for p in pins.values() if not p.hashes]
    makefile = (ROOT / "Makefile").read_text()
    torch = re.search(r"^TORCH_VERSION \?= (\S+)$", makefile, re.M).group(1)
    torchvision = re.search(r"^TORCHVISION_VERSION \?= (\S+)$", makefile, re.M).group(1)
    assert pins["torch"].version == torch
    assert pins["torchvision"].version == torchvision
    _, simd = lockcheck.parse_lock(SIMD_LOCK.read_text())
    assert list(simd) == ["pillow-simd"] and simd["pillow-simd"].hashes
    assert re.search(r"\.post\d+$", simd["pillow-simd"].version)


def test_lock_matches_pyproject():
    """The offline half of `make lock-check` (the online half re-resolves and diffs)."""
    assert lockcheck.check(ROOT) == []


def _copy_inputs(tmp_path: Path) -> Path:
    (tmp_path / "containers").mkdir()
    for name in ("pyproject.toml", "Makefile"):
        shutil.copy(ROOT / name, tmp_path / name)
    for path in CT.glob("*"):
        if path.suffix in (".lock", ".in", ".txt"):
            shutil.copy(path, tmp_path / "containers" / path.name)
    assert lockcheck.check(tmp_path) == []
    return tmp_path


def test_lock_check_notices_a_changed_pyproject(tmp_path):
    root = _copy_inputs(tmp_path)
    py = root / "pyproject.toml"
    original = py.read_text()
    py.write_text(original.replace("dependencies = [", 'dependencies = [\n    "requests>=2",', 1))
    assert any("requests" in p for p in lockcheck.check(root))
    py.write_text(original.replace('"numpy>=1.26"', '"numpy>=99"'))
    assert any("numpy" in p for p in lockcheck.check(root))
    py.write_text(re.sub(r'\n\s*"scipy[^"]*",', "", original))
    assert any("scipy" in p for p in lockcheck.check(root))


def test_lock_check_notices_a_new_torch_version(tmp_path):
    root = _copy_inputs(tmp_path)
    mk = root / "Makefile"
    mk.write_text(re.sub(r"^TORCH_VERSION \?= \S+$", "TORCH_VERSION ?= 2.99.0", mk.read_text(), flags=re.M))
    problems = lockcheck.check(root)
    assert any("torch==" in p and "2.99.0" in p for p in problems)
    assert any("torch-pins.txt" in p for p in problems)


def test_lock_check_notices_a_missing_hash(tmp_path):
    root = _copy_inputs(tmp_path)
    lock = root / "containers" / "requirements.lock"
    text = lock.read_text()
    lock.write_text(re.sub(r"(psutil==\S+) \\\n(\s+--hash=\S+ \\\n)*\s+--hash=\S+\n", r"\1\n", text))
    assert any("psutil" in p and "hash" in p for p in lockcheck.check(root))


# ----------------------------------------------------------------------------- Apptainer, make


def test_apptainer_definition_parses_and_bootstraps_from_the_docker_image():
    from spython.main.parse.parsers import SingularityParser

    recipe = SingularityParser(str(DEF)).recipe
    assert list(recipe) == ["spython-base"]
    stage = recipe["spython-base"]
    assert stage.fromHeader == f"loaderbench:{project_version()}"
    text = DEF.read_text()
    assert re.search(r"^Bootstrap:\s*docker-(daemon|archive)\s*$", text, re.M)
    labels = dict(line.split(None, 1) for line in stage.labels)
    assert labels.get("org.opencontainers.image.version") == project_version()
    assert stage.test, "no %test"
    test_script = "\n".join(stage.install)  # spython turns %test into lines written to /tests.sh
    assert "import torch, torchvision" in test_script
    assert "verify_pillow_simd.py" in test_script
    assert re.search(r"^%help\s*$", text, re.M)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_builds_the_tag_apptainer_bootstraps_from():
    out = subprocess.run(
        [
            "make",
            "-s",
            "--no-print-directory",
            "-f",
            "Makefile",
            "--eval",
            "ct-print: ; @echo $(IMAGE) $(IMAGE_NAME):latest $(BASE_IMAGE)",
            "ct-print",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    image, latest, base = out.stdout.split()
    assert image == f"loaderbench:{project_version()}" and latest == "loaderbench:latest"
    assert f"From: {image}" in DEF.read_text()
    assert base == arg_defaults()["BASE_IMAGE"]
    mk = (CT / "containers.mk").read_text()
    for target in ("lock", "lock-check", "image", "sif", "image-test"):
        assert re.search(rf"^{re.escape(target)}:", mk, re.M), target
    assert "--shm-size=1g" in mk and "LOADERBENCH_IMAGE_DIGEST" in mk and "smoke.toml" in mk


def test_smoke_study_is_a_valid_tiny_study():
    from loaderbench.study.study_file import load_study

    study = load_study(CT / "smoke.toml", max_cores=1)
    assert study.name == "container-smoke"
    assert 0 < len(study.cells) <= 8 and study.settings.repetitions == 1


# ----------------------------------------------------------------------------- helper scripts


def _record(env: dict) -> dict:
    return {"cell_id": "c0", "status": "ok", "env": env}


def test_check_record_accepts_a_container_record_and_rejects_stock_pillow(tmp_path, capsys):
    good = {
        "container_image": "loaderbench:0.1.0",
        "container_digest": "sha256:" + "a" * 64,
        "lock_sha256": "b" * 64,
        "pillow": "12.1.1.post0",
        "pillow_simd": True,
        "libjpeg_turbo": True,
    }
    folder = tmp_path / "container-smoke"
    folder.mkdir()
    (folder / "c0.json").write_text(json.dumps(_record(good)))
    args = [str(folder), "--image", "loaderbench:0.1.0", "--digest", "sha256:" + "a" * 64, "--lock-sha256", "b" * 64]
    assert check_record.main(args) == 0
    (folder / "c1.json").write_text(json.dumps(_record({**good, "pillow": "13.0.0", "pillow_simd": False})))
    assert check_record.main(args) == 1
    assert "pillow_simd" in capsys.readouterr().err


def test_verify_script_rejects_stock_pillow():
    """The host venv has stock Pillow: the in-build check must fail on it (and pass only on pillow-simd)."""
    import PIL

    out = subprocess.run(
        [sys.executable, str(CT / "verify_pillow_simd.py")], capture_output=True, text=True, timeout=300
    )
    if re.search(r"\.post\d+$", PIL.__version__):
        assert out.returncode == 0, out.stderr
    else:
        assert out.returncode == 1 and "not pillow-simd" in out.stderr
