"""The Studio twin's variants: what a started space does that a release's package list does not show. Run by hand
(``python tools/studio/twin.py --variants``, after the twin's own checks) and recorded in docs/studio.md; CI runs the
twin without them.

Every lab runs on each (``make``'s size, the local target), and each must teach its lessons (course/lessons.py).

- ``without_local_bin``: SageMaker Distribution 4.0-4.3's PATH, which lacks ``~/.local/bin``, where ``make studio``
  puts SeaweedFS's ``weed``: lab 05 must still find it (in the user scripts folder).
- ``small_shm``: a private mount namespace whose ``/dev/shm`` is 64 KB (Studio's has been small:
  sagemaker-python-sdk #937, #5592): every lab must pass, the jobs that wanted DataLoader workers saying what they
  did instead; lab 07's lesson (a fed loader beats a starved one) needs the workers, so it is excused there.
- ``startup_removal``: ``make studio`` while the image's start-up removes some of its packages (4.4.1's
  ``start-jupyter-server``: ``micromamba remove -y jupyter-ai jupyter_server_documents jupyter-collaboration
  jupyterlab-chat`` at every start, before JupyterLab): those packages, at the release's versions, stand in the twin's
  site-packages (their metadata only: nothing imports them) and are removed the moment ``make studio`` says what it
  will add, after it took stock and before it checks what changed. It must keep its install and name them as not
  its doing.
- ``lifecycle``: the event template's lifecycle script (infra/workshop-account.yaml) as a space runs it: no terminal,
  ``env -i`` (nothing but a bare PATH, as SageMaker documents no more), the twin's image mounted where the real one is
  (``/opt/conda``), the space's metadata file in place, a home folder of its own; the script clones this checkout and
  runs ``make studio`` in the background. Then a kernel's view of that home, with 4.0-4.3's PATH: the helpers import,
  ``weed`` is found; and the README's Studio path, ``make PY=python3`` in the clone (its data, then every lab).
  ``/opt/conda`` and ``/opt/ml/metadata`` are mount points made for the run (empty folders, removed after it when the
  run made them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

SMALL_SHM = "64k"
SETUP_WAIT_S = 600
LABS_WAIT_S = 1800  # every lab, after the set-up, from the clone
SPACE_USER_HOME = "/home/sagemaker-user"  # the script's own home folder, moved to the twin's
MOUNT_POINTS = (Path("/opt/conda"), Path("/opt/ml/metadata"))
SPACE_METADATA = {"DomainId": "d-twin", "SpaceName": "twin-space", "UserProfileName": "attendee-twin"}


def namespace_problem() -> str:
    """Why a private mount namespace cannot be made here, or '' when it can."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return "needs util-linux's unshare and root (a private mount namespace)"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, text=True, check=False
    )
    return f"unshare is not permitted here: {probe.stderr.strip()}" if probe.returncode else ""


def in_namespace(preamble: str) -> list[str]:
    """A command prefix: ``preamble`` (shell) run in a private mount namespace, then the command given after it."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", f'{preamble} && exec "$@"', "sh"]


def small_shm_prefix() -> list[str]:
    return in_namespace(f"mount -t tmpfs -o size={SMALL_SHM} tmpfs /dev/shm")


def shm_lines(executed: Path) -> list[str]:
    """The lines a lab's executed notebook shows about /dev/shm (train.py's ``[setup] /dev/shm ...``)."""
    if not executed.is_file():
        return []
    text = "".join(
        "".join(o.get("text", ""))
        for c in json.loads(executed.read_text()).get("cells", [])
        for o in c.get("outputs", [])
    )
    return sorted({line.strip() for line in text.splitlines() if "/dev/shm" in line})


# ---- the image's start-up, removing packages while make studio runs

# 4.4.1's start-jupyter-server removes these at every start (aws/sagemaker-distribution, aa8a7fb0,
# build_artifacts/v4/v4.4/v4.4.1/dirs/usr/local/bin/start-jupyter-server); versions from that release's cpu.env.out
REMOVED_AT_START = {"jupyter-ai": "3.1.3", "jupyter_server_documents": "0.3.3", "jupyterlab-chat": "0.23.2"}


def _stand_in(site_packages: Path, name: str, version: str) -> Path:
    """A distribution's metadata as conda leaves it in site-packages, nothing else: pip lists it, nothing imports."""
    info = site_packages / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("conda\n")
    (info / "RECORD").write_text("")
    return info


def startup_removal(make_studio: list[str], env: dict, site_packages: Path, cwd: Path) -> dict:
    """``make_studio`` (a command) with the start-up's packages removed when it prints its plan; what it said."""
    infos = [_stand_in(site_packages, n, v) for n, v in REMOVED_AT_START.items()]
    removed_at = None
    lines: list[str] = []
    proc = subprocess.Popen(make_studio, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip())
        if removed_at is None and line.startswith("  to add:"):  # stock taken, install next: the start-up strikes
            for info in infos:
                shutil.rmtree(info)
            removed_at = len(lines)
    status = proc.wait()
    for info in infos:  # a run that never printed a plan: leave the image as it was
        shutil.rmtree(info, ignore_errors=True)
    notes = [line for line in lines if line.startswith("note: while make studio ran, something else changed")]
    return {
        "status": status,
        "removed_mid_run": removed_at is not None,
        "note": notes[0] if notes else "",
        "named": sorted(n for n in REMOVED_AT_START if notes and install_name(n) in notes[0]),
        "added": _added(lines),
    }


def _added(lines: list[str]) -> list[str]:
    """The packages make studio's "added (...)" block lists, its total aside."""
    start = next((i for i, line in enumerate(lines) if line.startswith("added (")), len(lines))
    block = []
    for line in lines[start + 1 :]:
        if not line.startswith("  ") or line.startswith("  total"):
            break
        block.append(line.split()[0])
    return block


def install_name(name: str) -> str:
    """How make studio names a package (PEP 503, as install.canonical does)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- the lifecycle script


def lifecycle_script(template: Path, repository: str, home: Path) -> str:
    """The template's lifecycle script as CloudFormation's Fn::Sub renders it for ``repository``, its home moved."""
    from cfnlint.decode import cfn_yaml

    doc = cfn_yaml.loads(template.read_text(encoding="utf-8"))
    sub = doc["Resources"]["StudioSetup"]["Properties"]["StudioLifecycleConfigContent"]["Fn::Base64"]["Fn::Sub"]
    values = {
        "AWS::StackName": "twin",
        "AWS::Region": "us-east-1",
        "RepositoryUrl": repository,
        "RepositoryBranch": "",
        "ExecutionRole.Arn": "arn:aws:iam::111122223333:role/twin-ExecutionRole",
        "WorkshopBucket": "twin-bucket",
    }

    def one(m: re.Match) -> str:
        name = m.group(1)
        return "${" + name[1:] + "}" if name.startswith("!") else values[name]

    return re.sub(r"\$\{([^}]*)\}", one, sub).replace(SPACE_USER_HOME, str(home))


def _space_preamble(prefix: Path, metadata: Path) -> str:
    """Mount the twin's image at /opt/conda and the space's metadata at /opt/ml/metadata (this namespace only)."""
    return f"mount --bind {prefix} /opt/conda && mount --bind {metadata.parent} /opt/ml/metadata"


def lifecycle(prefix: Path, root: Path, repository: Path, template: Path) -> dict:
    """The lifecycle script run as a space starts; its log, how long the set-up took, and a kernel's view after."""
    home = root / "lcc-home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    metadata = root / "lcc-metadata" / "resource-metadata.json"
    metadata.parent.mkdir(parents=True, exist_ok=True)
    metadata.write_text(json.dumps(SPACE_METADATA))
    made = [p for p in (Path("/opt/conda"), Path("/opt/ml")) if not p.exists()]  # removed again after the run
    for p in MOUNT_POINTS:
        p.mkdir(parents=True, exist_ok=True)
    try:
        bare = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        if os.environ.get("PIP_CONFIG_FILE") or (Path.home() / ".config/pip/pip.conf").is_file():
            # not SageMaker's: this machine's package index, which a space reaches as PyPI
            bare["PIP_CONFIG_FILE"] = os.environ.get("PIP_CONFIG_FILE") or str(Path.home() / ".config/pip/pip.conf")
        script = lifecycle_script(template, f"file://{repository}", home)
        start = time.monotonic()
        started = subprocess.run(
            [*in_namespace(_space_preamble(prefix, metadata)), "env", "-i", *_pairs(bare), "bash", "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        returned_s = round(time.monotonic() - start, 1)
        log = home / "workshop-setup.log"
        text = _wait_for_setup(log)
        kernel = subprocess.run(
            [
                *in_namespace(_space_preamble(prefix, metadata)),
                "env",
                "-i",
                f"HOME={home}",
                "PATH=/opt/conda/bin:/usr/bin:/bin",  # 4.0-4.3's: no ~/.local/bin
                "/opt/conda/bin/python3",
                "-c",
                "import helpers, sys; from sagemaker_standin.objectstore import weed_binary; "
                "print(helpers.__file__); print(weed_binary()); print(sys.prefix)",
            ],
            capture_output=True,
            text=True,
            cwd=home,
            timeout=120,
            check=False,
        )
        clone = home / repository.name
        # then the README's Studio path from a terminal-less shell: `make PY=python3` (the data, then every lab)
        every_lab = subprocess.run(
            [
                *in_namespace(_space_preamble(prefix, metadata)),
                "env",
                "-i",
                f"HOME={home}",
                "PATH=/opt/conda/bin:/usr/bin:/bin",
                "make",
                "--no-print-directory",
                "-C",
                str(clone),
                "PY=/opt/conda/bin/python3",
            ],
            capture_output=True,
            text=True,
            timeout=LABS_WAIT_S,
            check=False,
        )
    finally:
        for p in made:  # empty on this side: the mounts were the namespace's own
            shutil.rmtree(p, ignore_errors=True)
    done = re.search(r"== set-up done in (\d+) s", text)
    return {
        "script_status": started.returncode,
        "script_returned_s": returned_s,
        "setup_done": bool(done),
        "setup_s": int(done.group(1)) if done else None,
        "log_tail": text.strip().splitlines()[-8:],
        "kernel": kernel.stdout.strip().splitlines() if kernel.returncode == 0 else [kernel.stderr.strip()[-600:]],
        "kernel_ok": kernel.returncode == 0 and all(str(home) in line for line in kernel.stdout.split()[:2]),
        "make_status": every_lab.returncode,
        "make_tail": (every_lab.stdout + every_lab.stderr).strip().splitlines()[-3:],
        "summary": str(clone / "runs" / "labs" / "summary.json"),
    }


def _pairs(env: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in env.items()]


def _wait_for_setup(log: Path) -> str:
    deadline = time.monotonic() + SETUP_WAIT_S
    text = ""
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if "== set-up done in" in text or "== set-up FAILED" in text:
            return text
        time.sleep(1)
    return text + f"\n(no end of the set-up in {SETUP_WAIT_S} s)"


def report_lines(found: dict | None) -> list[str]:
    """The variants' part of the twin's table."""
    if not found:
        return []
    lines = ["  variants (tools/studio/variants.py), every lab on each:", "    4.0-4.3's PATH (no ~/.local/bin):"]
    lines += _lab_lines(found["without_local_bin"])
    if "skipped" in found:
        return [*lines, f"    skipped {found['skipped']}"]
    small = found["small_shm"]
    lines.append(f"    a {SMALL_SHM}B /dev/shm (a private mount namespace):")
    lines += _lab_lines(small["labs"])
    lines += [f"      said: {line}" for line in small["said"][:3]] or ["      said nothing about /dev/shm"]
    gone = found["startup_removal"]
    lines.append(
        f"    make studio while the start-up removes {', '.join(REMOVED_AT_START)}: exit {gone['status']}, "
        + ("removed mid-run" if gone["removed_mid_run"] else "NOT removed mid-run")
        + f", named as not its doing: {', '.join(gone['named']) or 'none'}; kept: {', '.join(gone['added']) or 'none'}"
    )
    lines += _lab_lines(gone["labs"])
    lcc = found["lifecycle"]
    lines.append(
        f"    lifecycle script (env -i, the image at /opt/conda): returned in {lcc['script_returned_s']} s, "
        + (f"set-up done in {lcc['setup_s']} s" if lcc["setup_done"] else "set-up NOT done")
    )
    lines += [f"      log: {line}" for line in lcc["log_tail"][-3:]]
    lines += [f"      kernel (4.0-4.3's PATH): {line}" for line in lcc["kernel"][:3]]
    lines.append(f"      make PY=/opt/conda/bin/python3 in the clone: exit {lcc['make_status']}")
    lines += _lab_lines(lcc["labs"])
    return lines


def _lab_lines(runs: list[dict]) -> list[str]:
    out = []
    for r in runs:
        out.append(f"      {r['lab']:<22} {r['status']:<7} {r['seconds']:>6.1f} s  {_first(r['error'])}")
        out += [f"        WRONG: {claim}" for claim in r.get("wrong_claims", [])]
    return out or ["      (no lab ran)"]


def _first(error: str) -> str:
    return (error.splitlines() or [""])[0][:200]
