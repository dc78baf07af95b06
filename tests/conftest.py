"""Shared fixtures: a small catalogue built once per session, and helpers to run the training script."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the lab runner imports the SDK: only the fixture that runs labs pays for it
    from helpers.run_labs import LabRun


REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "labs" / "src"

# the suite never talks to AWS or a model hub, and must not depend on the developer's environment
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="session")
def small_catalog(tmp_path_factory) -> Path:
    """A 12,000-row catalogue (every category has enough rows for the 10% split)."""
    from helpers.data import catalog

    return catalog.build(tmp_path_factory.mktemp("data") / "catalog", rows=12000, seed=7, vocab_size=3000)


@pytest.fixture
def runner(tmp_path):
    """A quiet local runner writing under the test's temporary directory."""
    from helpers.local.runner import LocalRunner

    return LocalRunner(runs_dir=tmp_path / "jobs", echo=False)


@pytest.fixture
def probe_dir(tmp_path, request):
    """A source directory holding ``probe.py``: the test module's own ``PROBE`` script (each module probes
    what it tests)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe.py").write_text(request.module.PROBE)
    return src


TINY = {"model_size": "tiny", "batch_size": 32, "lr": 2e-3, "dropout": 0.0, "log_every": 5, "precision": "fp32"}


def run_script(
    args: list[str], env: dict | None = None, cwd: Path = SRC, timeout: int = 180
) -> subprocess.CompletedProcess:
    """Run train.py (or any script in labs/src) directly, as a user would by hand."""
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def pytest_configure(config):
    """Under pytest-xdist, each worker gets its own share of the cores, as if it were a machine of its own."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if worker and count > 1 and hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) >= count:
            os.environ["WORKSHOP_TEST_CORES"] = ",".join(map(str, cores))  # what the whole run had
            os.sched_setaffinity(0, cores[int(worker.removeprefix("gw")) :: count])


@dataclass
class ExecutedLab:
    run: LabRun
    strays: list[str]  # what the lab wrote under runs/ outside its own folder (nothing, if it keeps the rule)


@pytest.fixture(scope="session")
def lab_run(tmp_path_factory, worker_id):
    """Each lab executed once per test session, by whichever test asks first, on whichever worker: headless through
    papermill, in smoke size on the local target, with its reference answers filled in. Every test that reads a
    lab's run (its status, answers, stated time, claims, requests; the GPU suite's lab step) gets this one run:
    an :class:`ExecutedLab`."""
    import json
    from dataclasses import asdict

    from filelock import FileLock

    from helpers import lab, run_labs
    from helpers.job import RUNS_DIR

    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if worker_id != "master" else shared  # the workers' common folder under xdist

    def run(stem: str) -> ExecutedLab:
        notebook = next(one.notebook for one in lab.LABS if one.stem == stem)
        record = shared / "labs" / f"{stem}.run.json"
        record.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(record) + ".lock"):
            if not record.is_file():
                before = set(RUNS_DIR.glob("*/*"))
                done = run_labs.run_lab(notebook, shared / "labs", {"target": "local", "smoke": True}, solutions=True)
                # runs/data holds the data sets labs share, each built once and moved into place whole
                new = set(RUNS_DIR.glob("*/*")) - before
                strays = [str(p) for p in new if p.name.startswith(f"lab{stem[:2]}") and p.parent.name != "data"]
                record.write_text(json.dumps({**asdict(done), "strays": strays}))
            saved = json.loads(record.read_text())
        strays = saved.pop("strays")
        return ExecutedLab(run_labs.LabRun(**saved), strays)

    return run


def pytest_collection_modifyitems(config, items):
    """The slow tests first (a training run, a notebook, a store: seconds to minutes each), then the rest: the
    workers start the long ones early and fill the end with short ones, instead of one worker finishing a lab
    while the other waits."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
