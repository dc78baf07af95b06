"""helpers/README.md's numbered reading path is the path a job really runs: lab 01's job is launched on this machine
and dry-run on SageMaker under a profiler, and every module of ``helpers`` whose code ran is on the path, in the
README's words, with the result ``run_job`` returned defined there too."""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO

HELPERS = REPO / "helpers"
README = HELPERS / "README.md"
# lines: the whole path, both targets, as round 5 left it (5,009), kept from growing; the local job alone (its
# first seven modules) is under 1,400
PATH_LIMIT = 5009


def numbered_path() -> list[str]:
    return re.findall(r"^\d+\. `([\w/]+\.py)`", README.read_text(encoding="utf-8"), re.M)


def lines(relative: str) -> int:
    return len((HELPERS / relative).read_text(encoding="utf-8").splitlines())


class Trace:
    """The ``helpers`` files whose functions were called, in every thread (the local job's log pumps and clock too)."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.root = str(HELPERS) + "/"

    def __call__(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(self.root):
            self.files.add(frame.f_code.co_filename[len(self.root) :])

    def __enter__(self) -> Trace:
        threading.setprofile(self)
        sys.setprofile(self)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def test_the_numbered_path_names_real_modules_and_says_its_size():
    path = numbered_path()
    assert path[:2] == ["jobs.py", "job_spec.py"] and len(path) == len(set(path))
    total, local = sum(map(lines, path)), sum(map(lines, path[:7]))
    assert total <= PATH_LIMIT, f"the reading path is {total} lines: keep it under {PATH_LIMIT:,}"
    text = README.read_text(encoding="utf-8")
    stated_total = int(re.search(r"about ([\d,]+)\s+lines in all", text)[1].replace(",", ""))
    stated_local = int(re.search(r"the first seven, about ([\d,]+) lines", text)[1].replace(",", ""))
    assert abs(stated_total - total) <= 100, f"helpers/README.md says about {stated_total} lines; the path is {total}"
    assert abs(stated_local - local) <= 50, f"helpers/README.md says the local job is {stated_local}; it is {local}"


@pytest.mark.long
def test_every_helpers_module_lab_01_s_job_runs_is_on_the_path(tmp_path):
    from helpers import jobs, targets
    from helpers.job_spec import DATA_DIR, Job, catalog_channels

    job = Job(
        "lab01-single",
        {"model_size": "tiny", "epochs": 1, "subset": 256, "batch_size": 32, "max_steps": 2, "threads": 1},
        catalog_channels(DATA_DIR / "catalog"),
        processes_per_host=1,
    )
    local, real = targets.resolve("local_cpu"), targets.resolve("ml.g6.xlarge")  # the set-up cell's, untraced
    jobs.write_runs_under(str(tmp_path))
    try:
        with Trace() as here:
            result = jobs.run_job(job, local, echo=False)
        with Trace() as there:
            dry = jobs.on_sagemaker(job, real)
    finally:
        jobs.write_runs_under("")
    assert result.status == "Completed" and result.history, "the traced job must have trained"
    assert dry.request["ResourceConfig"]["InstanceType"] == "ml.g6.xlarge"
    path = set(numbered_path())
    assert {"local/containers.py", "local/runner.py"} <= here.files and "aws/dry_run.py" in there.files
    off_path = sorted((here.files | there.files) - path)
    assert not off_path, f"modules a launch runs that helpers/README.md's path does not name: {off_path}"
    defined_in = Path(sys.modules[type(result).__module__].__file__).relative_to(HELPERS).as_posix()
    assert defined_in in path, f"run_job returned a {type(result).__name__}, defined off the path in {defined_in}"
