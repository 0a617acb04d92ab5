"""Offline check that containers/requirements.lock still matches its inputs.

    python containers/lockcheck.py            # check; exit 1 and name every problem
    python containers/lockcheck.py pins T TV  # print containers/torch-pins.txt for torch T, torchvision TV

pip-compile writes, for each pin, the requirements that pulled it in (`# via` comments). The
top-level inputs appear there by name: `loaderbench (pyproject.toml)`,
`-r containers/build-requirements.in`, `-c containers/torch-pins.txt`. Without any network this
checks that:
  * the lock was written by `make lock` (pip-compile header, Python 3.11), every entry is an
    exact `==` pin with at least one sha256 hash, and every `# via` names an input or a package
    that is itself in the lock (the closure is self-contained);
  * the packages recorded as `via loaderbench (pyproject.toml)` are exactly pyproject's
    [project].dependencies (a dependency added or removed there without `make lock` fails),
    and each pin satisfies pyproject's specifier (a tightened specifier fails);
  * pyproject's [build-system].requires and build-requirements.in are satisfied by the pins;
  * torch and torchvision are pinned to the Makefile's TORCH_VERSION and TORCHVISION_VERSION,
    and containers/torch-pins.txt is what `make lock` writes for them;
  * containers/pillow-simd.lock pins pillow-simd exactly as pillow-simd.in, with a hash.
What it cannot see offline is a new release of a transitive dependency or a changed dependency
list of a pinned package: `make lock-check` also re-resolves online and diffs (see
containers/containers.mk).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    try:
        import tomli as tomllib  # type: ignore[no-redef]  # the same module from wherever this Python has it
    except ModuleNotFoundError:
        from pip._vendor import tomli as tomllib  # type: ignore[no-redef]  # the same module from wherever this Python has it
try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ModuleNotFoundError:
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]  # the same module from wherever this Python has it
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]  # the same module from wherever this Python has it

ROOT = Path(__file__).resolve().parent.parent
LOCK = "containers/requirements.lock"
SIMD_LOCK = "containers/pillow-simd.lock"
BUILD_IN = "containers/build-requirements.in"
SIMD_IN = "containers/pillow-simd.in"
PINS = "containers/torch-pins.txt"
PYPROJECT_VIA = "loaderbench (pyproject.toml)"

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)\s*\\?$")
_HASH = re.compile(r"^\s+--hash=sha256:([0-9a-f]{64})\s*\\?$")


@dataclass
class Pin:
    name: str
    version: str
    hashes: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)


def parse_lock(text: str) -> tuple[list[str], dict[str, Pin]]:
    """Header comment lines and {canonical name: Pin} of a pip-compile output."""
    header: list[str] = []
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    in_via = False
    for line in text.splitlines():
        if not pins and current is None and line.startswith("#"):
            header.append(line)
            continue
        m = _PIN.match(line)
        if m:
            current = Pin(m.group(1), m.group(2))
            pins[canonicalize_name(current.name)] = current
            in_via = False
            continue
        m = _HASH.match(line)
        if m and current is not None:
            current.hashes.append(m.group(1))
            continue
        stripped = line.strip()
        if stripped.startswith("# via") and current is not None:
            rest = stripped[len("# via") :].strip()
            if rest:
                current.via.append(rest)
                in_via = False
            else:
                in_via = True
            continue
        if in_via and stripped.startswith("#   ") and current is not None:
            current.via.append(stripped[4:].strip())
            continue
        if stripped and not stripped.startswith("#"):
            raise ValueError(f"unexpected line in lock: {line!r}")
        in_via = False
    return header, pins


def read_requirements_in(path: Path) -> list[Requirement]:
    reqs = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            reqs.append(Requirement(line))
    return reqs


def makefile_versions(root: Path = ROOT) -> dict[str, str]:
    text = (root / "Makefile").read_text()
    out = {}
    for var in ("TORCH_VERSION", "TORCHVISION_VERSION"):
        m = re.search(rf"^{var}\s*\??=\s*(\S+)\s*$", text, re.M)
        if m:
            out[var] = m.group(1)
    return out


def pins_text(torch: str, torchvision: str) -> str:
    return (
        "# Written by `make lock` from the Makefile (TORCH_VERSION, TORCHVISION_VERSION); do not edit.\n"
        f"torch=={torch}\n"
        f"torchvision=={torchvision}\n"
    )


def _satisfies(problems: list[str], pins: dict[str, Pin], req: Requirement, where: str) -> None:
    pin = pins.get(canonicalize_name(req.name))
    if pin is None:
        problems.append(f"{req.name} ({where}) is not in the lock")
    elif req.specifier and not req.specifier.contains(pin.version, prereleases=True):
        problems.append(f"lock pins {pin.name}=={pin.version}, but {where} wants {req}")


def check(root: Path = ROOT) -> list[str]:
    problems: list[str] = []
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    header, pins = parse_lock((root / LOCK).read_text())

    # Written by pip-compile (via `make lock`) for the image's Python, with hashes.
    head = "\n".join(header)
    if "autogenerated by pip-compile with Python 3.11" not in head:
        problems.append(f"{LOCK}: header does not say pip-compile with Python 3.11 (the image's Python)")
    if "#    make lock" not in head:
        problems.append(f"{LOCK}: header does not name `make lock` as the command")
    if not pins:
        problems.append(f"{LOCK}: no pins")
    for pin in pins.values():
        if not pin.hashes:
            problems.append(f"{LOCK}: {pin.name}=={pin.version} has no --hash")
        if not pin.via:
            problems.append(f"{LOCK}: {pin.name} has no `# via` (nothing requires it)")
        for via in pin.via:
            if via in (PYPROJECT_VIA, f"-r {BUILD_IN}", f"-c {PINS}"):
                continue
            if canonicalize_name(via) not in pins:
                problems.append(f"{LOCK}: {pin.name} is `via {via}`, which is neither an input nor in the lock")

    # pyproject's dependencies are exactly the lock's pyproject roots, and each is satisfied.
    deps = [Requirement(d) for d in pyproject["project"].get("dependencies", [])]
    wanted = {canonicalize_name(r.name) for r in deps if r.marker is None or r.marker.evaluate()}
    recorded = {n for n, p in pins.items() if PYPROJECT_VIA in p.via}
    for name in sorted(wanted - recorded):
        problems.append(f"pyproject dependency {name} is not recorded in {LOCK} (run `make lock`)")
    for name in sorted(recorded - wanted):
        problems.append(
            f"{LOCK} records {name} as a pyproject dependency, pyproject no longer has it (run `make lock`)"
        )
    for req in deps:
        _satisfies(problems, pins, req, "pyproject.toml [project].dependencies")
    for spec in pyproject.get("build-system", {}).get("requires", []):
        _satisfies(problems, pins, Requirement(spec), "pyproject.toml [build-system].requires")

    # Build requirements of the in-image builds (pillow-simd, the project).
    build_reqs = read_requirements_in(root / BUILD_IN)
    recorded_build = {n for n, p in pins.items() if f"-r {BUILD_IN}" in p.via}
    if recorded_build != {canonicalize_name(r.name) for r in build_reqs}:
        problems.append(f"{BUILD_IN} and the lock disagree on its packages (run `make lock`)")
    for req in build_reqs:
        _satisfies(problems, pins, req, BUILD_IN)

    # torch and torchvision: the Makefile's versions, through torch-pins.txt.
    versions = makefile_versions(root)
    for var, name in (("TORCH_VERSION", "torch"), ("TORCHVISION_VERSION", "torchvision")):
        want = versions.get(var)
        pin = pins.get(name)
        if want is None:
            problems.append(f"Makefile has no {var}")
        elif pin is None or pin.version != want:
            got = pin.version if pin else "nothing"
            problems.append(f"{LOCK} pins {name}=={got}, the Makefile's {var} is {want} (run `make lock`)")
        if pin is not None and f"-c {PINS}" not in pin.via:
            problems.append(f"{LOCK}: {name} is not constrained by {PINS}")
    if len(versions) == 2:
        pins_file = root / PINS
        expected = pins_text(versions["TORCH_VERSION"], versions["TORCHVISION_VERSION"])
        if not pins_file.exists() or pins_file.read_text() != expected:
            problems.append(f"{PINS} is not what `make lock` writes for the Makefile's versions")

    # pillow-simd: its own one-line lock, hash-pinned, as pillow-simd.in says.
    _, simd = parse_lock((root / SIMD_LOCK).read_text())
    simd_reqs = read_requirements_in(root / SIMD_IN)
    if set(simd) != {canonicalize_name(r.name) for r in simd_reqs}:
        problems.append(f"{SIMD_LOCK} does not hold exactly the packages of {SIMD_IN}")
    for req in simd_reqs:
        _satisfies(problems, simd, req, SIMD_IN)
    for pin in simd.values():
        if not pin.hashes:
            problems.append(f"{SIMD_LOCK}: {pin.name} has no --hash")
    overlap = set(simd) & set(pins)
    if overlap:
        problems.append(f"{SIMD_LOCK} and {LOCK} both pin {sorted(overlap)}")
    return problems


def main(argv: list[str]) -> int:
    if argv[:1] == ["pins"] and len(argv) == 3:
        sys.stdout.write(pins_text(argv[1], argv[2]))
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check()
    for problem in problems:
        print(f"lock-check: {problem}", file=sys.stderr)
    if not problems:
        print(f"lock-check: {LOCK} and {SIMD_LOCK} match pyproject.toml and the Makefile (offline check)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
