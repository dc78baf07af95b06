"""Shared fixtures: a small catalogue built once per session, and helpers to run the training script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
