"""A local job keeps SageMaker's clock: MaxRuntimeInSeconds ends it whatever its script does, a spot job's limits
count across its restarts, and a job that goes silent is reported while the runner waits for it."""

from __future__ import annotations

import re
import textwrap
import threading
import time
from dataclasses import replace
from datetime import datetime

import pytest

from helpers.job_spec import Job
from helpers.local.containers import Clock
from helpers.local.runner import LocalRunner, run_name
from helpers.targets import Target

pytestmark = pytest.mark.slow  # every test here starts a store, a job or a training run

CPU = Target("local_cpu", "local_cpu", 0, 2)

# ignores SIGTERM, or (--on_term exit) leaves on it as a script that saves on SIGTERM does; --stop_host stops its own
# process (SIGSTOP) on that host, as a stalled rank; --chatty prints a line every 2 ms for ten minutes, as a fast
# training loop with log_every=1 does; otherwise it prints once and sleeps for ten minutes
PROBE = textwrap.dedent("""
    import faulthandler, os, signal, sys, time
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # as container.run does: stacks on request
    if args.get("--on_term") == "exit":
        signal.signal(signal.SIGTERM, lambda *_: (print("[probe] saved on SIGTERM", flush=True), os._exit(143)))
    else:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"[probe] started on {os.environ['SM_CURRENT_HOST']}", flush=True)
    if args.get("--stop_host") == os.environ["SM_CURRENT_HOST"]:
        os.kill(os.getpid(), signal.SIGSTOP)
    if args.get("--chatty"):
        for step in range(300_000):
            print(f"[probe] step {step}", flush=True)
            time.sleep(0.002)
    def waiting_for_the_other_rank():
        time.sleep(600)
    waiting_for_the_other_rank()
""")


def probe(probe_dir, max_runtime_s: int, **hyperparameters) -> Job:
    return Job("clock", hyperparameters, {}, entry_point="probe.py", source_dir=probe_dir, max_runtime_s=max_runtime_s)


def test_max_runtime_ends_a_job_that_ignores_sigterm(probe_dir, tmp_path):
    runner = LocalRunner(tmp_path / "jobs", echo=False, check=False, grace_s=2)
    t0 = time.monotonic()
    result = runner.run(probe(probe_dir, 3), CPU)
    took = time.monotonic() - t0
    assert result.status == "Stopped" and result.secondary_status == "MaxRuntimeExceeded"
    assert 3 <= took < 3 + 2 + 20  # ended by the limit plus the grace (start-up and teardown aside), not in 600 s
    assert result.exit_code < 0  # SIGTERM was dropped by the container's first process: SIGKILL ended it
    assert any("MaxRuntimeInSeconds reached (3 s)" in line for line in result.log_tail)


@pytest.mark.timeout(90)  # the bug this guards against ran such a job for its ten minutes
def test_max_runtime_ends_a_job_that_logs_every_few_milliseconds(probe_dir, tmp_path):
    """The clock does not wait for a pause in the log: a line every 2 ms (500 a second) changes nothing."""
    runner = LocalRunner(tmp_path / "jobs", echo=False, check=False, grace_s=2)
    t0 = time.monotonic()
    result = runner.run(probe(probe_dir, 3, chatty=1), CPU)
    took = time.monotonic() - t0
    assert result.status == "Stopped" and result.secondary_status == "MaxRuntimeExceeded"
    assert 3 <= took < 3 + 2 + 20, f"{took:.0f} s"
    lines = [h for h in result.log_tail if h.startswith("[probe] step ")]
    assert lines and int(lines[-1].split()[-1]) > 100  # it did log fast, right up to its end


@pytest.mark.timeout(90)
def test_max_runtime_ends_a_job_nobody_waits_on(probe_dir, tmp_path):
    """SageMaker stops a job at its limit whoever is watching: started and left alone, it ends on time."""
    runner = LocalRunner(tmp_path / "jobs", echo=False, check=False, grace_s=2)
    live = runner.start(probe(probe_dir, 3, chatty=1), CPU)
    deadline = time.monotonic() + 3 + 2 + 20
    while time.monotonic() < deadline and any(p.poll() is None for p in live.procs.values()):
        time.sleep(0.2)
    assert all(p.poll() is not None for p in live.procs.values()), "the job outlived its MaxRuntime and its grace"
    assert live.processes() == []
    result = live.wait()  # read afterwards: the ending was the clock's, not the reader's
    assert result.status == "Stopped" and result.secondary_status == "MaxRuntimeExceeded"


def test_max_runtime_sigterm_reaches_a_script_that_listens_when_forwarded(probe_dir, tmp_path):
    runner = LocalRunner(tmp_path / "jobs", echo=False, check=False, grace_s=60, forward_sigterm=True)
    t0 = time.monotonic()
    result = runner.run(probe(probe_dir, 3, on_term="exit"), CPU)
    assert time.monotonic() - t0 < 30  # it left in the grace period, long before SIGKILL
    assert result.status == "Stopped" and result.secondary_status == "MaxRuntimeExceeded"
    assert "[probe] saved on SIGTERM" in result.log_tail


def test_a_spot_job_clock_counts_earlier_attempts_and_the_wait():
    job = Job("spot", spot=True, checkpoints=True, max_runtime_s=100, max_wait_s=150)
    clock = Clock.of(job)
    clock.ran_s = 70  # earlier launches of the same job ran 70 s
    deadline, why = clock.deadline(clock.submitted)
    assert (deadline - clock.submitted, why) == (30, "MaxRuntimeExceeded")
    deadline, why = clock.deadline(clock.submitted + 140)  # restarted late: the wait runs out first
    assert (deadline - clock.submitted, why) == (150, "MaxWaitTimeExceeded")
    assert Clock.of(Job("od", max_runtime_s=100, max_wait_s=None)).max_wait_s is None


def test_a_stalled_rank_is_reported_while_the_runner_waits(probe_dir, tmp_path):
    job = replace(probe(probe_dir, 600, stop_host="algo-2"), instance_count=2, processes_per_host=1)
    live = LocalRunner(tmp_path / "jobs", echo=False, check=False, stall_s=2).start(job, CPU)

    def reported() -> list[str]:
        """The runner's report lines after both ranks started (on a loaded machine a report may come before)."""
        tail = list(live.tail)
        started = [i for i, line in enumerate(tail) if "[probe] started" in line]
        return tail[started[-1] :] if len(started) == 2 else []

    def end_once_reported():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("stopped (SIGSTOP" in line for line in reported()):
            time.sleep(0.1)
        time.sleep(1)  # the live rank's stacks reach the log
        live.kill()

    watcher = threading.Thread(target=end_once_reported)
    watcher.start()
    result = live.wait()
    watcher.join()
    log = "\n".join(result.log_tail)
    report = [line for line in reported() if line.startswith("[runner]   ")]
    assert any("algo-2" in line and "rank 1: stopped" in line and "(SIGSTOP" in line for line in report), log
    assert any("algo-1" in line and "rank 0" in line and "Python stacks follow" in line for line in report), log
    assert "in waiting_for_the_other_rank" in log  # the live rank's own stack, printed on request
    assert "no log line for 2 s" in log


@pytest.mark.parametrize(
    "name",
    ["lab05-input-modes-fastfile-sequence-of-jobs-number-three-of-five", "a_b", "x" * 80, "lab01"],
)
def test_run_names_keep_the_timestamp_whole_and_follow_sagemaker_rules(name):
    now = datetime(2026, 11, 25, 17, 3, 4, 123456)
    made = run_name(name, now)
    assert made.endswith("-20261125-170304-123456") and len(made) <= 63
    assert re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", made)  # CreateTrainingJob's TrainingJobName
    later = run_name(name, datetime(2026, 11, 25, 17, 3, 4, 123457))
    assert later != made  # a rerun a microsecond later does not collide


def test_long_job_names_rerun_without_collisions(probe_dir, tmp_path):
    runner = LocalRunner(tmp_path / "jobs", echo=False)
    long = Job("a" * 30, {}, {}, entry_point="probe.py", source_dir=probe_dir)  # the longest a job takes
    first, second = runner.prepare(long, CPU), runner.prepare(long, CPU)
    assert first.run_dir != second.run_dir
