"""The newest-versions run: the newest releases the package index offers of the workshop's main dependencies, in an
environment of their own, and every lab run on them with its lessons checked (``make newest``; weekly in the
GitHub workflow and by hand), so that a new release of torch, transformers or the SageMaker SDK is tried when it
appears, and pyproject.toml's upper bounds follow what passed here rather than the calendar.

    python tools/newest/run.py                   # build or update .newest/venv, then every lab
    python tools/newest/run.py --labs 01 03      # some labs
    python tools/newest/run.py --install-only    # the environment and its report, no lab

1. ``.newest/venv`` (a virtual environment of this machine's Python) gets the newest release of each of
   :data:`NEWEST` that pip can install together (``pip install --upgrade --upgrade-strategy eager``), then this
   checkout's helpers with their dependencies, every newest release held by a constraint: if pyproject.toml's ranges
   refuse one of them, the install fails and names it (the ranges must admit what passes here).
2. Each package's newest release on the index (``pip index versions``) is set beside what was installed: a release
   that did not install says why where pip says so (this machine's pip caps torch, a package's own pins).
3. Every lab headless, smoke size, local target (``python -m course.run_labs``: two at a time on two free cores, one
   at a time on a busy machine), each lesson its prose states checked against its run by the lab runner.

The report is ``runs/newest/report.json`` (the versions, the labs) and a table. Exit status 0 only when everything
installed and every lab passed with every lesson held. Standard library only: it runs with any Python 3.10+.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the dependencies whose new releases most often break a lab: the framework, the model code, the SDK, the runner
NEWEST = (
    "torch",
    "transformers",
    "tokenizers",
    "sagemaker",
    "sagemaker-core",
    "sagemaker-train",
    "numpy",
    "papermill",
    "ipykernel",
)
PIP = ["-m", "pip", "--disable-pip-version-check", "--no-input"]


class NewestError(Exception):
    """The environment could not be built; the message says why."""


def run(command: list[str], echo: bool = False, **kw) -> tuple[int, str, float]:
    """(status, output, seconds) of a command; its output streams through when ``echo``."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if echo:
            print(f"    {line}", end="", flush=True)
    return proc.wait(), "".join(lines), round(time.perf_counter() - start, 1)


def checked(command: list[str], what: str, **kw) -> tuple[str, float]:
    status, output, seconds = run(command, **kw)
    if status:
        raise NewestError(f"{what} failed:\n{output[-3000:]}")
    return output, seconds


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build(venv: Path, base: str) -> dict:
    """The environment: the newest of :data:`NEWEST`, then the helpers with every one of them held."""
    start = time.perf_counter()
    python = venv / "bin" / "python"
    if not python.exists():
        checked([base, "-m", "venv", str(venv)], "making the environment")
    # pip itself first (a newer resolver), then the packages: no bytecode compiled at install (several thousand files
    # of torch and transformers; a lab compiles what it imports)
    install = [str(python), *PIP, "install", "--quiet", "--no-compile", "--upgrade", "--upgrade-strategy", "eager"]
    checked([*install, "pip"], "upgrading pip")
    print(f"  newest releases of {', '.join(NEWEST)} ...", flush=True)
    checked([*install, *NEWEST], "pip")
    installed = versions(python)
    held = venv / "newest-constraints.txt"
    held.write_text("".join(f"{n}=={installed[canonical(n)]}\n" for n in NEWEST), encoding="utf-8")
    print("  this checkout's helpers, every newest release held ...", flush=True)
    status, output, _ = run([str(python), *PIP, "install", "--no-compile", "-c", str(held), "-e", str(REPO)])
    if status:
        said = [line.strip() for line in output.splitlines() if "requested" in line or "depends on" in line]
        raise NewestError(
            "pyproject.toml's ranges refuse a newest release (raise its upper bound if the labs pass on it, or say "
            f"why not): {' / '.join(said[:8]) or output[-1500:]}"
        )
    return {"python": str(python), "seconds": round(time.perf_counter() - start, 1), "versions": versions(python)}


VERSIONS = r"""
import json
from importlib import metadata
print(json.dumps({d.metadata["Name"]: d.version for d in metadata.distributions() if d.metadata["Name"]}))
"""


def versions(python: Path) -> dict[str, str]:
    out, _ = checked([str(python), "-c", VERSIONS], "listing the environment", cwd=str(python.parent))
    return {canonical(k): v for k, v in json.loads(out.strip().splitlines()[-1]).items()}


def index_newest(python: Path, name: str) -> str:
    """The newest release the index lists for ``name`` (``pip index versions``), or '' if it could not say."""
    status, output, _ = run([str(python), *PIP, "index", "versions", name])
    found = re.search(rf"^{re.escape(name)} \(([^)]+)\)", output, re.MULTILINE | re.IGNORECASE)
    return found[1] if status == 0 and found else ""


def compared(python: Path, installed: dict[str, str]) -> list[dict]:
    """Each of :data:`NEWEST`: installed, the index's newest, and whether they are the same release."""
    rows = []
    for name in NEWEST:
        have, newest = installed.get(canonical(name), ""), index_newest(python, name)
        rows.append({"name": name, "installed": have, "index_newest": newest, "newest": _same(have, newest)})
    return rows


def _same(have: str, newest: str) -> bool:
    return bool(have) and (not newest or have.split("+")[0] == newest)


def labs(python: Path, out: Path, only: list[str]) -> tuple[list[dict], float]:
    """Every lab (or ``only``) through the lab runner on the environment's Python; each one's status, time and the
    lessons its run did not bear out."""
    command = [str(python), "-m", "course.run_labs", "--out", str(out / "labs"), *(["--labs", *only] if only else [])]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    _, _, seconds = run(command, echo=True, cwd=str(REPO), env=env)
    summary = out / "labs" / "summary.json"
    if not summary.is_file():
        return [{"lab": "(all)", "status": "failed", "seconds": seconds, "error": "no summary", "wrong": []}], seconds
    rows = [
        {
            "lab": r["lab"],
            "status": r["status"],
            "seconds": r["seconds"],
            "error": (r.get("error") or "").splitlines()[:1],
            "wrong": r.get("lessons_not_held", []),
        }
        for r in json.loads(summary.read_text(encoding="utf-8"))["labs"]
    ]
    return rows, seconds


def table(report: dict) -> str:
    lines = [f"newest-versions run (Python {report['python_version']}):"]
    for row in report["packages"]:
        note = "" if row["newest"] else f"  (the index's newest: {row['index_newest']})"
        lines.append(f"  {row['name']:<16} {row['installed']:<16}{note}")
    lines.append(f"  environment: {report['environment_seconds']} s")
    for r in report.get("labs", []):
        first = r["error"][0][:160] if r["error"] else ""
        lines.append(f"  {r['lab']:<22} {r['status']:<7} {r['seconds']:>6.1f} s  {first}")
        lines += [f"      LESSON NOT HELD: {w}" for w in r["wrong"]]
    if "labs_seconds" in report:
        lines.append(f"  labs: {report['labs_seconds']} s")
    lines.append(f"  {'PASSED' if report['passed'] else 'FAILED'} in {report['seconds']} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/newest/run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", type=Path, default=REPO / ".newest" / "venv")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "newest")
    ap.add_argument("--python", default=getattr(sys, "_base_executable", sys.executable), help="the base Python")
    ap.add_argument("--labs", nargs="*", default=[], help="lab numbers (default: every lab)")
    ap.add_argument("--install-only", action="store_true", help="the environment and its versions, no lab")
    a = ap.parse_args(argv)
    start = time.perf_counter()
    a.out.mkdir(parents=True, exist_ok=True)
    try:
        env = build(a.venv.resolve(), a.python)
    except NewestError as err:
        print(f"newest-versions run: {err}", file=sys.stderr)
        return 1
    python = Path(env["python"])
    done = subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    report: dict = {
        "python_version": done.stdout.strip(),
        "packages": compared(python, env["versions"]),
        "environment_seconds": env["seconds"],
    }
    if not a.install_only:
        report["labs"], report["labs_seconds"] = labs(python, a.out.resolve(), a.labs)
    report["passed"] = all(r["status"] == "ok" and not r["wrong"] for r in report.get("labs", []))
    report["seconds"] = round(time.perf_counter() - start, 1)
    (a.out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(table(report))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
