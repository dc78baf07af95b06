"""A local job keeps SageMaker's clock: MaxRuntimeInSeconds ends it whatever its script does, a spot job's limits
count across its restarts, and a job that goes silent is reported while the runner waits for it."""

from __future__ import annotations

import re
import textwrap
import threading
import time
from datetime import datetime

import pytest

from helpers.job import Job
from helpers.local.local_job import Clock
from helpers.local.runner import LocalRunner, run_name
from helpers.targets import Target

pytestmark = pytest.mark.slow  # every test here starts a store, a job or a training run

CPU = Target("local_cpu", "local_cpu", 0, 2)

# ignores SIGTERM, or (--on_term exit) leaves on it as a script that saves on SIGTERM does; --stop_host stops its own
# process (SIGSTOP) on that host, as a stalled rank; otherwise it prints once and sleeps for ten minutes
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
    job = probe(probe_dir, 600, stop_host="algo-2")
    job.instance_count = 2
    job.processes_per_host = 1
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
