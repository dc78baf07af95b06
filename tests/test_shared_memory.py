"""A small /dev/shm (SageMaker Studio's has been): train.py lowers its DataLoader workers to what fits, and says so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import SRC
from test_train_script import tiny_run

import train  # noqa: E402  (the container's script)

MB = 2**20


def test_workers_are_lowered_to_what_the_free_shared_memory_holds():
    batch = MB  # one batch: 1 MB, so a worker holds PREFETCH x SHM_MARGIN = 4 MB in flight
    assert train.workers_that_fit(1024 * MB, 4, batch) == 4  # plenty
    assert train.workers_that_fit(100 * MB, 40, batch) == 25  # only 25 workers' batches fit
    assert train.workers_that_fit(100 * MB, 40, batch, local_ranks=5) == 5  # five ranks share it
    assert train.workers_that_fit(63 * MB, 2, batch) == 0  # under the floor: no worker processes
    assert train.workers_that_fit(None, 2, batch) == 2  # no /dev/shm to ask (macOS): as asked
    assert train.workers_that_fit(1 * MB, 0, batch) == 0


def _unshare_problem() -> str | None:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return "needs Linux and util-linux's unshare"
    if os.geteuid() != 0:
        return "needs root to mount a private /dev/shm"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
        capture_output=True,
        text=True,
    )
    return f"unshare is not permitted here: {probe.stderr.strip()}" if probe.returncode else None


@pytest.mark.slow
@pytest.mark.skipif(bool(_unshare_problem()), reason=_unshare_problem() or "")
def test_a_run_with_a_tiny_dev_shm_trains_without_workers_and_says_why(tmp_path):
    """train.py with 2 workers in a private mount namespace whose /dev/shm is 64 KB, less than their 4 batches in
    flight (a bus error before): the run finishes, in one process, and says why."""
    args = [sys.executable, *tiny_run(tmp_path, "--num_workers", "2", "--epochs", "1")]
    mount = 'mount -t tmpfs -o size=64k tmpfs /dev/shm && exec "$@"'
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh", *args],
        cwd=SRC,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("[setup] /dev/shm")]
    assert len(said) == 1 and "0.1 MB free" in said[0] and "DataLoader workers 2 -> 0" in said[0], said
