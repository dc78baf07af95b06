"""Every lab's dry-run ``CreateTrainingJob`` requests from one Python, normalised so that two Pythons (make's
``.venv``, the Studio twin's image, the twin with an older SDK) can be compared field for field.

    python tools/studio/dry_requests.py compare runs/studio-twin/requests-main runs/studio-twin/requests-twin

The requests come from the headless lab runner with an ml.* target (``python -m course.run_labs --target
ml.p4d.24xlarge --out DIR``, offline: nothing is sent), which saves each dry run as
``DIR/<lab>.requests/NN-<job>.json``.
Normalised, and nothing else: the launch time, in the job name (the SDK's ``-YYYYMMDDHHMMSS`` suffix, also in the
``code`` and ``sm_drivers`` S3 keys) and in the helpers' per-launch checkpoint prefix (``/YYYYMMDD-HHMMSS/``). The SDK
writes no version of its own into the request (its user agent travels in the HTTP headers). Compared besides the
request: the plan the helpers made (launcher, processes, world size, image note, price). Not compared: how many files
and bytes were staged and which API calls were made, since the SDK's driver bundle differs from release to release
and none of it is in the request.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

TARGET = "ml.p4d.24xlarge"  # an SMDDP instance type: lab 03 builds its SMDDP job on it
PLAN_FIELDS = ("lab_job", "target", "launcher", "processes_per_host", "world_size", "image_note", "max_usd")
LAUNCH_TIME = "<launch time>"
_JOB_SUFFIX = re.compile(r"-\d{14}$")  # ModelTrainer's unique job name: base_job_name-YYYYMMDDHHMMSS
_CHECKPOINT_TIME = re.compile(r"/\d{8}-\d{6}/$")  # helpers.aws.build.Locations.checkpoints


def run_labs_command(python: str, out: Path) -> list[str]:
    """The command that dry-runs every lab under ``python`` and saves the requests in ``out``."""
    return [python, "-m", "course.run_labs", "--target", TARGET, "--out", str(out)]


def normalise(record: dict) -> dict:
    """A saved dry run with the launch time taken out of it (see the module docstring), and only what is compared."""
    request = copy.deepcopy(record["request"])
    name = request.get("TrainingJobName", "")
    if _JOB_SUFFIX.search(name):
        request = _replaced(request, name, _JOB_SUFFIX.sub(f"-{LAUNCH_TIME}", name))
    checkpoint = request.get("CheckpointConfig") or {}
    if "S3Uri" in checkpoint:
        checkpoint["S3Uri"] = _CHECKPOINT_TIME.sub(f"/{LAUNCH_TIME}/", checkpoint["S3Uri"])
    return {**{k: record.get(k) for k in PLAN_FIELDS}, "request": request}


def _replaced(value, old: str, new: str):
    """``value`` with every string's ``old`` (the exact job name) replaced by ``new``."""
    if isinstance(value, dict):
        return {k: _replaced(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v, old, new) for v in value]
    return value.replace(old, new) if isinstance(value, str) else value


def collect(out: Path) -> dict[str, list[dict]]:
    """``{lab: [normalised dry run, ...]}`` from a lab runner's output folder, in the order the lab made them."""
    found = {}
    for folder in sorted(Path(out).glob("*.requests")):
        records = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
        found[folder.name.removesuffix(".requests")] = [normalise(r) for r in records]
    return found


def differences(a: dict[str, list[dict]], b: dict[str, list[dict]]) -> list[str]:
    """Every field where the two sets of requests differ, as ``lab/job: path: a != b`` lines; empty when equal."""
    out = []
    for lab in sorted(set(a) | set(b)):
        if lab not in a or lab not in b:
            out.append(f"{lab}: dry runs on one side only")
            continue
        if len(a[lab]) != len(b[lab]):
            out.append(f"{lab}: {len(a[lab])} dry runs against {len(b[lab])}")
        for x, y in zip(a[lab], b[lab]):
            out += [f"{lab}/{x.get('lab_job')}: {line}" for line in _diff(x, y, "")]
    return out


def _diff(x, y, path: str) -> list[str]:
    if isinstance(x, dict) and isinstance(y, dict):
        return [line for k in sorted(set(x) | set(y), key=str) for line in _diff(x.get(k), y.get(k), f"{path}/{k}")]
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        return [line for i, (p, q) in enumerate(zip(x, y)) for line in _diff(p, q, f"{path}[{i}]")]
    return [] if x == y else [f"{path}: {json.dumps(x)[:300]} != {json.dumps(y)[:300]}"]


def compare(a_dir: Path, b_dir: Path) -> dict:
    """The comparison the twin reports: labs and requests seen, and every difference (none when equal)."""
    a, b = collect(a_dir), collect(b_dir)
    found = differences(a, b)
    return {
        "equal": not found and bool(a),
        "labs": len(a),
        "requests": sum(map(len, a.values())),
        "differences": found,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dry_requests.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="compare two lab runner output folders")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    a = ap.parse_args(argv)
    result = compare(a.a, a.b)
    for line in result["differences"]:
        print(line)
    verdict = "equal" if result["equal"] else "DIFFERENT"
    print(f"{verdict}: {result['requests']} requests from {result['labs']} labs")
    return 0 if result["equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
