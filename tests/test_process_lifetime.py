"""No process of a job outlives it: not after it fails, not after its notebook is interrupted or killed.

A SageMaker host is a container: whatever the job started ends with it. torchrun starts its workers in sessions of
their own and a script may start anything, so these tests look for every process by PID afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from conftest import REPO

from helpers.job_spec import Job, catalog_channels
from helpers.local.runner import LocalRunner
from helpers.targets import Target, resolve

CPU = Target("local_cpu", "local_cpu", 0, 2)

# a script that leaves a daemon behind (double fork, its own session), says its PID, then fails
PROBE = textwrap.dedent("""
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            print(f"[orphan] pid={os.getpid()}", flush=True)
            time.sleep(600)
        os._exit(0)
    time.sleep(1)
    sys.exit("failing on purpose")
""")


def alive(pids) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_gone(pids, seconds: float = 30) -> list[int]:
    deadline = time.monotonic() + seconds
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)


def test_a_failed_job_leaves_no_process_behind(probe_dir, small_catalog, tmp_path):
    orphans = []
    runner = LocalRunner(
        tmp_path / "jobs",
        echo=False,
        check=False,
        on_line=lambda host, line: orphans.append(int(line.split("=")[1])) if line.startswith("[orphan]") else None,
    )
    result = runner.run(
        Job("leaves-a-daemon", {}, catalog_channels(small_catalog), entry_point="probe.py", source_dir=probe_dir), CPU
    )
    assert result.status == "Failed" and "failing on purpose" in "\n".join(result.log_tail)
    assert len(orphans) == 1
    assert not wait_gone(orphans, 5), "the script's daemon outlived the job"


# kill_all in a process of its own (it reaps every child of the process it runs in), with the /proc walk made to
# miss the one child, as it could miss a dying process whose parent it read as a zombie: kill_all must still wait
# for that child to end, here by itself after half a second, instead of returning while it lives
MISSED_CHILD = textwrap.dedent("""
    import os, subprocess, time
    from sagemaker_standin import container_init
    container_init.descendants = lambda root: []
    child = subprocess.Popen(["sleep", "0.5"])
    t0 = time.monotonic()
    container_init.kill_all()
    waited = time.monotonic() - t0
    try:
        os.waitpid(-1, os.WNOHANG)
        left = "child"
    except ChildProcessError:
        left = "none"
    print(f"{waited:.2f} {left}")
""")


def test_the_container_ends_only_when_its_last_process_has_ended():
    done = subprocess.run([sys.executable, "-c", MISSED_CHILD], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    waited, left = done.stdout.split()
    assert left == "none" and float(waited) >= 0.4, done.stdout


KERNEL = textwrap.dedent("""
    import faulthandler, json, signal, sys, time
    faulthandler.enable()  # a fatal signal leaves its traceback in the kernel's stderr
    # an interrupt raises KeyboardInterrupt, as in a Jupyter kernel: a test run started in the background
    # (`cmd &` in a script) inherits SIGINT ignored, and Python keeps an ignored SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from pathlib import Path
    from helpers.job_spec import Job, catalog_channels
    from helpers.local.runner import LocalRunner
    from sagemaker_standin.objectstore import ObjectStore
    from helpers.targets import resolve

    catalog, runs, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    store = ObjectStore(runs / "store").start()
    hp = {"model_size": "tiny", "batch_size": 32, "lr": 2e-3, "epochs": 50, "subset": 2000, "log_every": 1,
          "precision": "fp32"}
    live = LocalRunner(runs / "jobs", echo=False).start(Job("kernel", hp, catalog_channels(catalog),
                                                            processes_per_host=2), resolve("local_cpu"))
    while True:  # until both ranks train
        host, line, _ = live.lines.get(timeout=120)
        if line and line.startswith("[train]"):
            break
    try:  # from before the PIDs are printed: the interrupt may come as soon as the test reads them
        print(json.dumps({"job": live.processes(), "store": store.proc.pid}), flush=True)
        live.wait() if mode == "interrupt" else time.sleep(600)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        store.stop()
""")


@pytest.mark.slow
@pytest.mark.long  # a drill of about 18 s each: make long-check (make test stays within its 8 minutes)
@pytest.mark.parametrize("how", ["killed", "interrupt"])
def test_a_notebook_killed_or_interrupted_leaves_no_process_behind(how, small_catalog, tmp_path):
    """The kernel is killed outright (its containers see their launcher go and end everything; the object store
    dies with it), or interrupted (the runner kills the job before the KeyboardInterrupt goes on)."""
    errors = tmp_path / "kernel.err"
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL, str(small_catalog), str(tmp_path), how],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=errors.open("w"),
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )

    def said() -> str:  # how the kernel ended and what it printed to stderr, for a failure to explain itself
        try:
            code = kernel.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = "still running"
        return f"kernel exit status {code}; its stderr:\n" + errors.read_text()[-3000:]

    try:
        first = kernel.stdout.readline()
        assert first, said()
        seen = json.loads(first)
        job = seen["job"]
        names = [" ".join(psutil.Process(p).cmdline()) for p in job]
        assert sum("train.py" in n for n in names) >= 3, names  # torchrun and its two workers (besides the init)
        if how == "killed":
            kernel.kill()
        else:
            kernel.send_signal(signal.SIGINT)
            assert kernel.stdout.readline().strip() == "interrupted", said()
        kernel.wait(timeout=30)
        assert not wait_gone(job + [seen["store"]]), "processes outlived their notebook"
    finally:
        if kernel.poll() is None:
            kernel.kill()


@pytest.mark.slow
def test_lab_08_s_hang_drill_interrupted_leaves_no_process_behind_the_stopped_rank_included(monkeypatch, tmp_path):
    """Lab 08 stops a rank (SIGSTOP) on purpose: interrupted while it diagnoses the hang, the drill still ends every
    process of the job, the stopped one too."""
    from helpers.local import failures

    seen: list[int] = []

    def interrupted(d, live, lines, last, use_py_spy):
        seen.extend(live.processes())
        stopped = [p for p in seen if psutil.Process(p).status() == psutil.STATUS_STOPPED]
        assert stopped, "the drill's fault stopped no process"
        raise KeyboardInterrupt

    monkeypatch.setattr(failures, "_diagnose", interrupted)
    monkeypatch.setattr("helpers.job_spec._runs_root", tmp_path)  # its jobs' folders go there, not under runs/
    hp = {"steps": 24, "subset": 2000, "fault": "stop", "fault_rank": 1, "fault_step": 4, "dist_timeout_s": 60}
    train = {"train": REPO / "data" / "catalog" / "train"}
    job = Job("lab08-lifetime", hp, train, entry_point="train_elastic.py", instance_count=2, processes_per_host=1)
    with pytest.raises(KeyboardInterrupt):
        failures.hang_drill(job, resolve("local_cpu"))
    assert len(seen) >= 6  # each host's container, torchrun and rank
    assert not wait_gone(seen, 15), "processes of the hung job outlived its interrupted drill"
