"""One launched local job: a container per host, their merged log, and the ways SageMaker ends a job.

:class:`LocalJob` starts each host's command (prepared by :class:`helpers.local.runner.LocalRunner`) under the stand-in
for its container (``container_init.py``), streams the log, keeps SageMaker's clock (``MaxRuntimeInSeconds``, a spot
job's ``MaxWaitTimeInSeconds``), reports where a silent job's processes are, and ends as a SageMaker job does:
:meth:`LocalJob.stop` is StopTrainingJob, :meth:`LocalJob.kill` a lost instance. :meth:`LocalJob.wait` returns a
:class:`JobResult`.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from helpers.contract import Layout
from helpers.job_spec import Job, parse_metric_line
from helpers.local.stall_report import stall_report
from helpers.results import JobResult
from helpers.targets import Target
from sagemaker_standin import CONTAINER_INIT, JobInputs, MemoryWatch, killed_by_sigkill, process_limit_reason

PORT_TAKEN = "torchrun's rendezvous port was taken"  # how a failure reason starts when another process had the port
GRACE_S = 120.0  # SageMaker's: SIGTERM, then SIGKILL 120 s later (StoppingCondition's documentation)
STALL_S = 120.0  # no log line for this long: the runner says where each process of the job is


@dataclass
class Clock:
    """SageMaker's two limits on a job's time. ``MaxRuntimeInSeconds`` counts the time the job runs, a spot job's
    earlier attempts included (``ran_s``); ``MaxWaitTimeInSeconds`` (spot) everything since it was submitted."""

    max_runtime_s: float
    max_wait_s: float | None = None
    ran_s: float = 0.0
    submitted: float = field(default_factory=time.monotonic)

    @classmethod
    def of(cls, job: Job) -> Clock:
        return cls(job.max_runtime_s, job.max_wait_s if job.spot else None)

    def deadline(self, started: float) -> tuple[float, str]:
        """(monotonic time, secondary status) at which a job started at ``started`` is stopped."""
        runtime_end = started + self.max_runtime_s - self.ran_s
        if self.max_wait_s is not None and self.submitted + self.max_wait_s < runtime_end:
            return self.submitted + self.max_wait_s, "MaxWaitTimeExceeded"
        return runtime_end, "MaxRuntimeExceeded"


def _kill_tree(pid: int) -> None:
    import psutil

    try:
        root = psutil.Process(pid)
        for p in [*root.children(recursive=True), root]:
            p.kill()
    except psutil.NoSuchProcess:
        pass


@dataclass
class Prepared:
    """A checked job, ready to start: its run directory, every host's command, and its s3:// channels."""

    run_dir: Path
    commands: list[tuple[str, list[str], dict, Path]]
    inputs: JobInputs | None = None
    processes: int = 1  # per host, as the checks decided (findings.Where.local)


class LocalJob:
    """One launched job: one container per host (see ``container_init.py``), their merged log, and the ways
    SageMaker ends a job: :meth:`stop` (StopTrainingJob), :meth:`kill` (the instance is lost) and its clock
    (``MaxRuntimeInSeconds``: SIGTERM, then SIGKILL after ``grace_s``). The clock is the job's own, as on SageMaker:
    a watcher thread keeps it from the start, whether or not anyone waits and however fast the job logs; it also
    reports where each process of a job is that logs nothing for ``stall_s``."""

    def __init__(
        self,
        job: Job,
        target: Target,
        prepared: Prepared,
        echo: bool = False,
        on_line: Callable[[str, str], None] | None = None,
        forward_sigterm: bool = False,
        clock: Clock | None = None,
        grace_s: float = GRACE_S,
        stall_s: float = STALL_S,
    ):
        self.job, self.target, self.echo, self.on_line = job, target, echo, on_line
        self.run_dir, self.inputs = prepared.run_dir, prepared.inputs
        commands = prepared.commands
        self.lines: queue.Queue[tuple[str, str | None, float]] = queue.Queue()  # host, line, seconds since t0
        self.history: list[dict] = []
        self.tail: list[str] = []
        self.t0 = time.perf_counter()
        self.first_log: float | None = None  # seconds from t0 to the first line, and to the first training step
        self.first_step: float | None = None
        self.procs: dict[str, subprocess.Popen] = {}  # host -> its container's first process
        self.interrupted = False  # stopped or killed from outside: the job ends as Stopped, as on SageMaker
        self.clock = clock or Clock.of(job)
        self.deadline, self.limit_status = self.clock.deadline(time.monotonic())
        self.grace_s, self.stall_s = grace_s, stall_s
        self.timed_out = ""  # the secondary status of a job its clock stopped
        self._kill_at: float | None = None
        self._last_line = time.monotonic()  # when a host last printed a line (the pumps set it, read or not)
        self._stall_reported = 0.0
        self._said = threading.Lock()  # the log's tail and echo: written by wait() and by the clock's watcher
        self.memory = MemoryWatch()  # the OOM killer's count from before the first process starts
        init = [sys.executable, str(CONTAINER_INIT), *(["--forward-sigterm"] if forward_sigterm else []), "--"]
        for host, cmd, env, cwd in commands:
            # stdin stays open while this process lives: the container ends everything when it closes
            proc = subprocess.Popen(
                init + cmd,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                errors="replace",
                start_new_session=True,
            )
            self.procs[host] = proc
            threading.Thread(target=self._pump, args=(host, proc), daemon=True).start()
        threading.Thread(target=self._watch_the_clock, daemon=True).start()

    def _pump(self, host: str, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None  # started with stdout=PIPE
        for line in proc.stdout:
            self._last_line = time.monotonic()
            self.lines.put((host, line.rstrip("\n"), time.perf_counter() - self.t0))
        self.lines.put((host, None, time.perf_counter() - self.t0))

    def _watch_the_clock(self) -> None:
        """Keep the job's clock until every host has ended: wake at the next thing due (the limit, the kill after
        the grace, a stall report), whatever the log does and whether or not :meth:`wait` runs."""
        while self._hosts(None):
            time.sleep(min(self._next_check(), 0.5))
            self._keep_time()
            self.memory.sample(self.processes())  # the job's peak, for an out-of-memory failure's reason

    def _hosts(self, host: str | None) -> list[subprocess.Popen]:
        return [p for h, p in self.procs.items() if (host is None or h == host) and p.poll() is None]

    def signal(self, sig: int = signal.SIGTERM, host: str | None = None) -> None:
        """Send ``sig`` to the container's first process of every host (or of one), which is all SageMaker
        signals. Like the SDK v3 container's ``/bin/bash`` there, it does not pass SIGTERM on (unless the runner
        was made with ``forward_sigterm=True``); SIGKILL ends the host as :meth:`kill` does."""
        if sig == signal.SIGKILL:
            return self.kill(host)
        self.interrupted = True
        for proc in self._hosts(host):
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self, host: str | None = None) -> None:
        """The instance is gone: every process of the host (or of every host) dies at once, without notice."""
        hosts = self._hosts(host)
        self.interrupted = True
        for proc in hosts:
            try:
                os.kill(proc.pid, signal.SIGHUP)  # the container kills all it holds, then itself
            except ProcessLookupError:
                pass
        for proc in hosts:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # never seen; a tree walk from here as a last resort
                _kill_tree(proc.pid)

    def stop(self, grace: float = 10.0) -> None:
        """StopTrainingJob: SIGTERM to each container's first process, then SIGKILL for all after ``grace``
        seconds (SageMaker waits 120)."""
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def processes(self) -> list[int]:
        """The PIDs of every live process of the job, its containers' first processes included."""
        import psutil

        pids = []
        for proc in self._hosts(None):
            try:
                p = psutil.Process(proc.pid)
                pids += [proc.pid] + [c.pid for c in p.children(recursive=True) if c.status() != "zombie"]
            except psutil.NoSuchProcess:
                pass
        return pids

    def wait(self) -> JobResult:
        """Follow the log to the end of every host (the clock keeps itself meanwhile) and return the result."""
        open_streams = len(self.procs)
        multi = len(self.procs) > 1
        try:
            while open_streams:
                host, line, at = self.lines.get()
                if line is None:
                    open_streams -= 1
                    continue
                self._take(host, line, at, multi)
            codes = {h: p.wait() for h, p in self.procs.items()}
        except BaseException:  # KeyboardInterrupt in a notebook, or a callback failing: never leave orphans
            self.kill()
            raise
        finally:
            if self.inputs is not None:
                self.inputs.close()  # stop serving FastFile channels; record what they fetched
        return self._result(codes)

    def _next_check(self) -> float:
        now = time.monotonic()
        due = [self.deadline if not self.timed_out else self._kill_at, self._last_line + self.stall_s]
        return max(0.05, min(d for d in due if d is not None) - now)

    def _keep_time(self) -> None:
        """The job's clock: at its limit SIGTERM (which the container's first process drops, as on SageMaker),
        SIGKILL ``grace_s`` later; a job silent for ``stall_s`` gets a report."""
        now = time.monotonic()
        if not self.timed_out and now >= self.deadline:
            self.timed_out = self.limit_status
            limit = "MaxWaitTimeInSeconds" if self.timed_out == "MaxWaitTimeExceeded" else "MaxRuntimeInSeconds"
            self._say(
                f"[runner] {limit} reached ({self._limit_s():.0f} s): SIGTERM to each host, SIGKILL in "
                f"{self.grace_s:.0f} s ({self.timed_out})"
            )
            self.signal(signal.SIGTERM)
            self._kill_at = now + self.grace_s
        elif self._kill_at is not None and now >= self._kill_at:
            self._kill_at = None
            self.kill()
        if now - self._last_line >= self.stall_s and now - self._stall_reported >= self.stall_s:
            self._stall_reported = now
            self._say(stall_report(self.procs, now - self._last_line))

    def _limit_s(self) -> float:
        if self.timed_out == "MaxWaitTimeExceeded":
            return self.clock.max_wait_s or 0.0
        return self.clock.max_runtime_s

    def _say(self, text: str) -> None:
        """A line of the runner's own, in the log as the job's lines are."""
        with self._said:
            if self.echo:
                print(text, flush=True)
            self.tail = (self.tail + text.splitlines())[-60:]

    def _take(self, host: str, line: str, now: float, multi: bool) -> None:
        """One line of a host's log, printed ``now`` seconds after the launch: echoed, kept, its figures parsed."""
        self.first_log = self.first_log if self.first_log is not None else now
        text = f"[{host}] {line}" if multi else line
        with self._said:
            if self.echo:
                print(text, flush=True)
            self.tail = (self.tail + [text])[-60:]
        parsed = parse_metric_line(line)
        if parsed:
            parsed["host"] = host
            parsed["t"] = round(now, 3)
            if parsed["kind"] == "train" and self.first_step is None:
                self.first_step = now
            self.history.append(parsed)
        if self.on_line:
            self.on_line(host, line)

    def _result(self, codes: dict[str, int]) -> JobResult:
        total = time.perf_counter() - self.t0
        code = next((c for c in codes.values() if c != 0), 0)
        failure = ""
        for host in codes:
            f = Layout(self.run_dir / host).failure
            if f.is_file() and f.read_text(errors="replace").strip():  # each rank may write the same reason
                failure = "\n".join(dict.fromkeys(f.read_text(errors="replace").strip().splitlines()))
                break
        lost = self.inputs.errors() if self.inputs is not None else []
        if lost and not all(e in failure for e in lost):  # a channel's bytes never arrived: say which, and why
            failure = "; ".join([*([failure] if failure else []), *(f"input: {e}" for e in dict.fromkeys(lost))])
        if code and not failure and any("EADDRINUSE" in line or "address already in use" in line for line in self.tail):
            failure = (
                f"{PORT_TAKEN} by another process before torchrun could bind it (EADDRINUSE, in the log): launch "
                f"the job again, and the runner picks another free port"
            )
        # the OOM killer's SIGKILL: a failure, as on SageMaker, whatever the processes left behind said after it
        oom = bool(code) and not (self.interrupted or self.timed_out) and killed_by_sigkill(code, self.tail)
        oom = oom and self.memory.killed_a_process()
        if oom:
            failure = self.memory.reason(failure)
        if code and not oom:  # a fork or thread refused (EAGAIN) is the process limit, whatever a rank wrote
            failure = process_limit_reason([*self.tail, failure]) or failure
        if code and not failure:
            failure = f"exit code {code}" + (f" (killed by signal {-code})" if code < 0 else "")
        finals = [h for h in self.history if h["kind"] == "final"]
        metrics = {k: v for k, v in (finals[-1] if finals else {}).items() if k not in ("kind", "host", "t")}
        stopped = (-signal.SIGTERM, -signal.SIGKILL, 128 + signal.SIGTERM)  # 143: saved a checkpoint on SIGTERM, left
        status = "Completed" if code == 0 else ("Stopped" if code in stopped or self.interrupted else "Failed")
        status = "Failed" if oom else status
        if code == 0 and lost:
            status = "Failed"  # the script carried on past a channel that never arrived: not a completed job
        if self.timed_out:
            status = "Stopped"  # as SageMaker reports a job its StoppingCondition ended
        secondary = self.timed_out if status == "Stopped" and self.timed_out else status
        return JobResult(
            self.run_dir.name,
            status,
            code,
            self.run_dir,
            metrics,
            self.history,
            {"launch_to_first_log": self.first_log, "launch_to_first_step": self.first_step, "total": total},
            failure,
            self.tail,
            secondary,
        )
