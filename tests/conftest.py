"""Shared fixtures: a small catalogue built once per session, and helpers to run the training script."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the lab runner imports the SDK: only the fixture that runs labs pays for it
    from course.run_labs import LabRun


REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "labs" / "src"

# the suite never talks to AWS or a model hub, and must not depend on the developer's environment
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="session")
def small_catalog(tmp_path_factory) -> Path:
    """A 12,000-row catalogue (every category has enough rows for the 10% split)."""
    from catalog_generator import catalog

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
    neighbours: dict[str, float]  # each other core's busy share while the lab ran ("3": 0.98); none on one core


# The spinner takes only what no one else wants: the lowest priority, in a session of its own whose scheduler group
# (Linux's autogroup, where enabled: each session is weighed as a whole) is set to the lowest priority too, since a
# nice process in a session of its own would otherwise get a whole session's share beside a lab's job
BURN = """import os
os.nice(19)
try:
    with open("/proc/self/autogroup", "w") as group:
        group.write("19")
except OSError:
    pass
while True:
    pass
"""


@contextmanager
def beside_busy_cores():
    """The lab on one core while every other core is kept busy: by the other workers' labs, and, whenever one of
    them has nothing to run, by a spinning process of the lowest priority pinned there (it yields to a lab, so two
    labs side by side are not slowed, and a core a worker leaves idle is busy all the same). Yields what it
    measured: each other core's busy share over the lab's run, from the kernel's per-core counters."""
    import psutil

    everything = sorted(int(c) for c in os.environ.get("WORKSHOP_TEST_CORES", "").split(",") if c) or sorted(
        os.sched_getaffinity(0)
    )
    mine = sorted(os.sched_getaffinity(0))
    if mine == everything:  # one process has every core (-n 0): the lab takes the first, the rest are its neighbours
        mine = everything[:1]
    others = [c for c in everything if c not in mine]
    kept = os.sched_getaffinity(0)
    os.sched_setaffinity(0, mine)  # the kernel papermill starts, and all it starts, inherit this
    burners = [
        subprocess.Popen(
            [sys.executable, "-c", BURN], start_new_session=True, preexec_fn=lambda c=c: os.sched_setaffinity(0, {c})
        )
        for c in others
    ]
    before = psutil.cpu_times(percpu=True)
    busy: dict[str, float] = {}
    try:
        yield busy
    finally:
        after = psutil.cpu_times(percpu=True)
        for burner in burners:
            burner.kill()
            burner.wait()
        os.sched_setaffinity(0, kept)
        for c in others:
            total = sum(after[c]) - sum(before[c])
            idle = (after[c].idle + getattr(after[c], "iowait", 0.0)) - (
                before[c].idle + getattr(before[c], "iowait", 0.0)
            )
            busy[str(c)] = round(1 - idle / total, 3) if total > 0 else 0.0


@pytest.fixture(scope="session")
def lab_run(tmp_path_factory, worker_id):
    """Each lab executed once per test session, by whichever test asks first, on whichever worker: headless through
    papermill, in smoke size on the local target, with its reference answers filled in. Every test that reads a
    lab's run (its status, answers, stated time, claims, requests; the GPU suite's lab step) gets this one run:
    an :class:`ExecutedLab`."""
    import json
    from dataclasses import asdict

    from filelock import FileLock

    from course import manifest, run_labs
    from helpers.job_spec import RUNS_DIR

    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if worker_id != "master" else shared  # the workers' common folder under xdist

    def run(stem: str) -> ExecutedLab:
        notebook = next(one.notebook for one in manifest.LABS if one.stem == stem)
        record = shared / "labs" / f"{stem}.run.json"
        record.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(record) + ".lock"):
            if not record.is_file():
                before = set(RUNS_DIR.glob("*/*"))
                with beside_busy_cores() as neighbours:
                    done = run_labs.run_lab(
                        notebook, shared / "labs", {"target": "local", "smoke": True}, solutions=True
                    )
                # runs/data holds the data sets labs share, each built once and moved into place whole
                new = set(RUNS_DIR.glob("*/*")) - before
                strays = [str(p) for p in new if p.name.startswith(f"lab{stem[:2]}") and p.parent.name != "data"]
                record.write_text(json.dumps({**asdict(done), "strays": strays, "neighbours": neighbours}))
            saved = json.loads(record.read_text())
        strays, neighbours = saved.pop("strays"), saved.pop("neighbours")
        return ExecutedLab(run_labs.LabRun(**saved), strays, neighbours)

    return run


def _lab_seconds(item) -> float:
    """How long a lab's run took in the last recorded twin run (docs/studio-twin.json), for a test of one lab; a labs
    test of no one lab (it reads lab 01's run and adds its own work) counts as the longest."""
    import json

    if item.get_closest_marker("labs") is None:
        return 0.0
    record = REPO / "docs" / "studio-twin.json"
    seconds = {r["lab"]: r["seconds"] for r in json.loads(record.read_text())["labs"]} if record.is_file() else {}
    stem = getattr(getattr(item, "callspec", None), "id", "")
    return seconds.get(stem, max(seconds.values(), default=0.0) + 1)


def pytest_collection_modifyitems(config, items):
    """The slow tests first (a training run, a notebook, a store: seconds to minutes each), the labs longest first,
    then the rest: the workers start the long ones early and fill the end with short ones, instead of one worker
    finishing a lab while the other waits."""
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, -_lab_seconds(item)))
