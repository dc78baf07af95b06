"""Reliability, round 4: a set-up no optional tool can stop, a lab runner whose streams die with it and hold its
folder, damaged sharded checkpoints refused by name, nothing left outside a run's folder, exercise checks run out
of order."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from course import run_labs
from helpers.job_spec import DATA_DIR, Job
from helpers.local import failures
from helpers.local.runner import LocalRunner
from helpers.targets import resolve
from sagemaker_standin.objectstore import ObjectStore

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------------- make setup
def _setup_lines_with(word: str) -> list[str]:
    """The Makefile's recipe lines (continuations joined, make's ``@`` and ``$$`` taken off) that mention ``word``:
    the npm steps have rules of their own, which make setup runs (round 5: a failed one is tried again)."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    joined = re.sub(r"\\\n\s*", " ", text)
    lines = [line.strip().lstrip("@") for line in joined.splitlines() if line.startswith("\t")]
    return [line.replace("$$", "$") for line in lines if word in line and not line.startswith("#")]


def test_a_failing_npm_never_stops_make_setup(tmp_path):
    """npm behind a TLS-inspecting proxy fails every install: each of the recipe's npm lines still succeeds (make
    goes on to the labs) and says which test that costs."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "npm").write_text("#!/bin/sh\necho 'npm ERR! self-signed certificate in certificate chain' >&2\nexit 1\n")
    (fake / "npm").chmod(0o755)
    lines = _setup_lines_with("npm ci")
    assert lines, "the Makefile's setup recipe installs nothing from npm: update this test"
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    for line in lines:
        done = subprocess.run(["/bin/sh", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
        assert "self-signed certificate" in done.stderr  # the fake npm really ran, and failed
        assert re.search(r"note: .*tests/test_\w+\.py", done.stdout), done.stdout  # names the test it costs


# ---------------------------------------------------------------------------------------------------- checkpoints
def _elastic_job(name: str, **hp) -> Job:
    settings = {"steps": 9, "subset": 800, "global_batch": 32, "micro_batch": 8, "checkpoint_every": 4, **hp}
    return Job(
        name, settings, {"train": DATA_DIR / "catalog" / "train"}, entry_point="train_elastic.py", processes_per_host=2
    )


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    """The checkpoints of a two-rank train_elastic.py job (steps 4 and 8, two shards each), as lab 08 writes them."""
    runs, tmpdir = tmp_path_factory.mktemp("elastic"), tmp_path_factory.mktemp("tmpdir")
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmpdir)  # the job's processes inherit it, as a lab's jobs inherit the kernel's
    try:
        result = LocalRunner(runs_dir=runs, echo=False).run(_elastic_job("sharded"), resolve("local_cpu"))
    finally:
        if saved is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = saved
    # nothing outside the run's folder: torchrun's log folder is its host's, not a torchelastic_* in TMPDIR
    assert not list(tmpdir.iterdir()), list(tmpdir.iterdir())
    assert list((result.run_dir / "algo-1" / "torchelastic").iterdir())
    checkpoints = result.run_dir / "algo-1" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-000004", "step-000008"]
    return checkpoints


def _truncate(file: Path, size: int) -> None:
    file.write_bytes(file.read_bytes()[:size])


def _half(file: Path) -> int:
    return file.stat().st_size // 2


def _flip_64_bytes_at_90_percent(file: Path) -> None:
    data = bytearray(file.read_bytes())
    at = int(len(data) * 0.9)
    data[at : at + 64] = bytes(b ^ 0xFF for b in data[at : at + 64])
    file.write_bytes(bytes(data))


DAMAGE = {  # each case of the review, on the newest checkpoint: what is done to it, and what the refusal names
    "a deleted shard": (lambda s: (s / "__1_0.distcp").unlink(), "__1_0.distcp is missing"),
    "a shard cut to half": (
        lambda s: _truncate(s / "__0_0.distcp", (s / "__0_0.distcp").stat().st_size // 2),
        "__0_0.distcp is",
    ),
    "a shard cut to 0": (lambda s: _truncate(s / "__1_0.distcp", 0), "__1_0.distcp is 0 bytes"),
    "a truncated .metadata": (lambda s: _truncate(s / ".metadata", 10), ".metadata is 10 bytes"),
    "a missing .metadata": (lambda s: (s / ".metadata").unlink(), ".metadata is missing"),
    "64 bytes flipped at 90% of the second shard": (
        lambda s: _flip_64_bytes_at_90_percent(s / "__1_0.distcp"),
        "__1_0.distcp does not match its SHA-256",
    ),
    "a truncated meta.json": (lambda s: _truncate(s / "meta.json", 40), "meta.json is unreadable (JSONDecodeError"),
}


def _damaged_copy(sharded: Path, into: Path, case: str) -> Path:
    copy = into / "checkpoints"
    shutil.copytree(sharded, copy)
    DAMAGE[case][0](copy / "step-000008")
    return copy


@pytest.mark.slow
@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_sharded_checkpoint_is_refused_before_launch_by_name(sharded, tmp_path, case):
    """check_resume (before launch) and the script's own resume path both refuse it, naming the checkpoint, what
    is wrong and the earlier checkpoint that would do; the undamaged one passes both."""
    import train_elastic

    assert failures.check_resume(sharded, _elastic_job("resume"))["files_verified"] == 3
    assert train_elastic.damage(str(sharded / "step-000008"))[1] == ""
    copy = _damaged_copy(sharded, tmp_path, case)
    with pytest.raises(failures.ResumeRefused) as refused:
        failures.check_resume(copy, _elastic_job("resume"))
    said = str(refused.value)
    assert "step-000008" in said and DAMAGE[case][1] in said and "step-000004 beside it verifies" in said, said
    assert DAMAGE[case][1] in train_elastic.damage(str(copy / "step-000008"))[1]


@pytest.mark.slow
def test_a_job_never_resumes_from_a_changed_shard(sharded, tmp_path):
    """The case that passed everything before: 64 bytes flipped deep in a shard. The job fails at once, saying
    which file and which earlier checkpoint would do, and trains no step."""
    copy = _damaged_copy(sharded, tmp_path, "64 bytes flipped at 90% of the second shard")
    runner = LocalRunner(runs_dir=tmp_path / "jobs", echo=False, check=False, checkpoint_dir=copy)
    result = runner.run(_elastic_job("resume"), resolve("local_cpu"))
    assert result.status == "Failed"
    assert "__1_0.distcp does not match its SHA-256" in result.failure_reason, result.failure_reason
    assert "step-000004 beside it verifies" in result.failure_reason
    assert not [h for h in result.history if h["kind"] == "train"]


# ---------------------------------------------------------------------------------------------------- the lab runner
def _notebook(path: Path, source: str) -> Path:
    """A lab of one cell after its parameters."""
    cells = [
        {"cell_type": "code", "metadata": {"tags": tags}, "source": text, "outputs": [], "execution_count": None}
        for tags, text in ((["parameters"], 'target = "local"'), ([], source))
    ]
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    path.write_text(json.dumps({"cells": cells, "metadata": kernel, "nbformat": 4, "nbformat_minor": 4}))
    return path


@pytest.fixture
def sleeping_labs(tmp_path) -> Path:
    """Two labs that each sleep two minutes, and a quick one."""
    labs = tmp_path / "labs"
    labs.mkdir()
    for name in ("01_sleep", "02_sleep"):
        _notebook(labs / f"{name}.ipynb", "import time\ntime.sleep(120)")
    _notebook(labs / "03_quick.ipynb", "print('done')")
    return labs


def _runner(labs: Path, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "course.run_labs", "--labs-dir", str(labs), "--out", str(out), *args]


def _env(tmpdir: Path) -> dict:
    return {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(REPO)}


def _wait_for(what, timeout_s: float = 90.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := what():
            return found
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s:.0f} s")


def _kernels_and_streams(parent: psutil.Process) -> list[psutil.Process] | None:
    """Every process under ``parent`` once both streams and both their kernels run, else None."""
    try:
        every = parent.children(recursive=True)
        lines = [" ".join(p.cmdline()) for p in every]
    except psutil.Error:
        return None
    streams = sum("--stream-record" in line for line in lines)
    kernels = sum("ipykernel" in line for line in lines)
    return every if streams == 2 and kernels == 2 else None


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two streams need two cores")
def test_a_killed_two_stream_runner_takes_its_streams_with_it_and_leaves_nothing_in_tmpdir(sleeping_labs, tmp_path):
    """SIGKILL to the runner (an IDE's stop button, the OOM killer): both streams and their kernels end within
    seconds, and the next run into the folder removes what the killed one left in its temporary folder, then leaves
    TMPDIR as it found it."""
    out = tmp_path / "out"
    tmpdir = Path(tempfile.mkdtemp(prefix="r4-", dir="/tmp"))  # short: a kernel's socket path holds ~100 bytes
    command = _runner(sleeping_labs, out, "--labs", "01", "02", "--streams", "2")
    runner = subprocess.Popen(command, cwd=REPO, env=_env(tmpdir), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        try:
            under = _wait_for(lambda: runner.poll() is None and _kernels_and_streams(psutil.Process(runner.pid)))
            assert [p.name for p in tmpdir.iterdir()] == [p.name for p in tmpdir.glob("lab-run-*")]  # all in its own
        finally:
            runner.kill()
            runner.wait()
        gone, alive = psutil.wait_procs(under, timeout=10)
        assert not alive, [" ".join(p.cmdline()) for p in alive]
        assert list(tmpdir.iterdir()), "the killed run left nothing behind: this test no longer tests the next start"
        done = subprocess.run(
            _runner(sleeping_labs, out, "--labs", "03"), cwd=REPO, env=_env(tmpdir), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert not list(tmpdir.iterdir())
        assert not list(out.glob(".*.stream.json"))
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


@pytest.mark.slow
def test_a_stream_holds_the_folder_while_it_lives(sleeping_labs, tmp_path):
    """A stream keeps the folder's lock after the process that took it has let go: a second run into the folder is
    refused while the stream lives, and let in once it has ended."""
    out = tmp_path / "out"
    out.mkdir()
    a = argparse.Namespace(
        labs_dir=sleeping_labs, target="local", smoke=True, out=out, parameter=[], solutions=False, verbose=False
    )
    lock = open(out / ".run_labs.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    notebook = sleeping_labs / "01_sleep.ipynb"
    share = sorted(os.sched_getaffinity(0))
    stream = threading.Thread(target=run_labs._one_stream, args=(a, notebook, share, lock.fileno()), daemon=True)
    stream.start()
    me = psutil.Process()
    child = _wait_for(lambda: [p for p in me.children() if "--stream-record" in " ".join(p.cmdline())])[0]
    lock.close()  # only the stream holds the folder now
    second = _runner(sleeping_labs, out, "--labs", "03")
    refused = subprocess.run(second, cwd=REPO, env=_env(Path("/tmp")), capture_output=True, text=True)
    assert refused.returncode != 0 and "another run of course.run_labs is writing to" in refused.stderr
    child.kill()
    stream.join(30)
    let_in = subprocess.run(second, cwd=REPO, env=_env(Path("/tmp")), capture_output=True, text=True)
    assert let_in.returncode == 0, let_in.stdout + let_in.stderr


# ---------------------------------------------------------------------------------------------------- the store
def _sockets(ports) -> list[Path]:
    return [sock for port in ports for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock")]


@pytest.mark.slow
@pytest.mark.long  # a store started, killed and started again (about 17 s): make long-check
def test_the_store_leaves_tmpdir_and_tmp_as_it_found_them_even_after_a_kill(tmp_path, monkeypatch):
    """glog's files go to the store's folder, not TMPDIR; the sockets weed keeps in /tmp go with it at stop, and
    those of a store killed outright (its kernel killed) go at the next store's start."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    with ObjectStore(tmp_path / "store") as store:
        store.create_bucket("lab05")
        ports = list(store.ports.values())
        assert _sockets(ports)  # weed's, in /tmp whatever TMPDIR says
    assert not list(tmpdir.iterdir()) and not _sockets(ports)
    assert list((tmp_path / "store" / "logs").glob("weed.*"))  # glog's files, in the store's own folder
    killed = ObjectStore(tmp_path / "killed").start()
    ports = list(killed.ports.values())
    os.killpg(killed.proc.pid, signal.SIGKILL)
    killed.proc.wait()
    assert _sockets(ports)  # left behind
    with ObjectStore(tmp_path / "next"):
        assert not _sockets(ports)
    killed.stop()
    assert not list(tmpdir.iterdir())


# ---------------------------------------------------------------------------------------------------- exercises
CHECK_CELLS = """
import json, sys
from pathlib import Path
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
for path in sorted(Path(".").glob("[0-9][0-9]_*.ipynb")):
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "code" and "exercises.check(" in text:
            shell.reset()  # a fresh kernel: the learner went straight to the exercise
            print(f"=== {path.stem}", flush=True)
            result = shell.run_cell(text)
            print(f"=== raised {type(result.error_in_exec).__name__}", flush=True)
shell.reset()
print("=== another cell", flush=True)
shell.run_cell("print(undefined_here)")
"""


@pytest.mark.slow
def test_every_check_cell_run_before_its_lab_s_set_up_says_which_cells_to_run_first():
    """Each lab's check cells in a fresh IPython, from the lab's folder as JupyterLab runs them: under the
    NameError, which cell makes the missing name and to run the lab from the top first; any other cell's NameError
    is IPython's own."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK_CELLS],
        cwd=REPO / "labs",
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)
    blocks = text.split("=== ")[1:]
    checks, other = blocks[:-1], blocks[-1]
    assert len(checks) >= 2 * 8, text  # every lab has at least one check cell, each printed twice
    for head, body in zip(checks[::2], checks[1::2]):
        lab = head.split()[0]
        assert body.startswith("raised NameError"), head + body
        says = rf"Exercise {lab[:2]}\.\d+'s check reads \w+, which an earlier cell of the lab makes"
        assert re.search(says, head) and "(in JupyterLab: Run > Run All Above Selected Cell)" in head, head
        assert "cell under the heading '" in head or "(your answer cell, 'Your turn" in head, head
    assert "NameError" in other and "Exercise" not in other, other


# ---------------------------------------------------------------------------------------------------- make studio
def _bare_venv_with_pip(where: Path) -> Path:
    """A virtual environment with this environment's pip copied in (ensurepip takes ten times longer)."""
    import pip

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    site = next((where / "lib").glob("python3.*/site-packages"))
    ours = Path(pip.__file__).parent
    shutil.copytree(ours, site / "pip", ignore=shutil.ignore_patterns("__pycache__"))
    for info in ours.parent.glob(f"pip-{pip.__version__}.dist-info"):
        shutil.copytree(info, site / info.name)
    return where / "bin" / "python"


@pytest.mark.slow
def test_make_studio_names_a_silent_index_within_30_s(tmp_path):
    """An index that takes connections and never answers (a proxy that drops packets): make studio says it is
    asking the index before its plan, and names the index within 30 s of saying so (pip's defaults were silent for
    about 100 s), under pip's own settings' absence (no PIP_TIMEOUT, no PIP_RETRIES)."""
    python = _bare_venv_with_pip(tmp_path / "env")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # the kernel completes the handshake; nothing ever reads or answers
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "SAGEMAKER_", "VIRTUAL_ENV"))}
    index = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
    env = {**clean, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index}
    command = [str(python), str(REPO / "tools" / "studio" / "install.py")]
    start = time.monotonic()
    try:
        studio = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        asked = next((time.monotonic() for line in studio.stdout if line.startswith("asking the package index")), None)
        said = studio.stderr.read()
        studio.wait(120)
    finally:
        silent.close()
    ended = time.monotonic()
    assert asked is not None, "make studio did not say it was asking the index"
    assert studio.returncode == 1 and "could not get the packages from the package index" in said, said
    assert f"({index} (PIP_INDEX_URL))" in said, said  # round 5: the index it could not reach, by its address
    print(f"named {ended - asked:.1f} s after asking, {ended - start:.1f} s after the start")
    assert ended - asked < 30, f"{ended - asked:.0f} s of silence"
