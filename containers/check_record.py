"""Check the records of a study run inside the image: their env fingerprint names the image.

    python containers/check_record.py RESULTS/container-smoke --image loaderbench:0.1.0 \
        --digest sha256:... --lock-sha256 ...

Reads every JSON record (*.json, *.jsonl) under the folder, prints the fingerprint of the first
one and fails unless every record's `env` has container_image, container_digest and lock_sha256
as given, pillow_simd true, a pillow-simd version (.postN) and a libjpeg-turbo version.
Standard library only, so it runs with the host's python3.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

KEYS = ("container_image", "container_digest", "lock_sha256", "pillow", "pillow_simd", "libjpeg_turbo")


def records(folder: Path):
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".json":
            try:
                docs = [json.loads(path.read_text())]
            except json.JSONDecodeError:
                continue
        elif path.suffix == ".jsonl":
            docs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        else:
            continue
        for doc in docs:
            items = doc if isinstance(doc, list) else [doc]
            for item in items:
                if isinstance(item, dict) and isinstance(item.get("env"), dict):
                    yield path, item


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--image", required=True)
    ap.add_argument("--digest", required=True)
    ap.add_argument("--lock-sha256", required=True)
    args = ap.parse_args(argv)

    found = list(records(args.folder))
    if not found:
        print(f"check_record: no JSON record with an `env` under {args.folder}", file=sys.stderr)
        return 1
    problems = []
    for path, rec in found:
        env = rec["env"]
        where = path.relative_to(args.folder)
        expect = {
            "container_image": args.image,
            "container_digest": args.digest,
            "lock_sha256": args.lock_sha256,
            "pillow_simd": True,
        }
        for key, want in expect.items():
            if env.get(key) != want:
                problems.append(f"{where}: env.{key} is {env.get(key)!r}, expected {want!r}")
        if not re.search(r"\.post\d+$", str(env.get("pillow", ""))):
            problems.append(f"{where}: env.pillow is {env.get('pillow')!r}, not a pillow-simd version")
        if not env.get("libjpeg_turbo"):
            problems.append(f"{where}: env.libjpeg_turbo is {env.get('libjpeg_turbo')!r}")

    first_path, first = found[0]
    shown = {k: first["env"].get(k) for k in KEYS}
    print(f"check_record: {len(found)} record(s) under {args.folder}; fingerprint of {first_path.name}:")
    print(json.dumps(shown, indent=2))
    for problem in problems:
        print(f"check_record: {problem}", file=sys.stderr)
    if not problems:
        print("check_record: OK: every record names the image, its digest, the lock and pillow-simd")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
