"""The interruption drill: prove that a checkpointed job survives spot reclaims and crashes bit-identically.

:func:`run_drill` runs a job once uninterrupted, then again with ``SIGTERM`` (a spot reclaim's notice) or ``SIGKILL``
(a crash) at random steps, restarting it on the same checkpoint directory as SageMaker does. On a CPU its final
weights and metrics must equal the first run's to the last bit. The script checkpoints (``labs/src/checkpointing.py``);
:mod:`helpers.local.drill_verdict` plans and judges.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import psutil

from helpers import folders
from helpers.job_spec import Job, parse_metric_line, runs_root
from helpers.local.containers import Clock, LocalJob
from helpers.local.drill_verdict import (
    Drill,
    DrillFailed,
    Interruption,
    Segment,
    account_losses,
    compare_runs,
    plan_interruptions,
    verify,
)
from helpers.local.runner import LocalRunner
from helpers.targets import Target, given


def run_drill(
    job: Job,
    target: Target,
    interruptions: int = 3,
    seed: int = 0,
    kinds: tuple[str, ...] = ("SIGTERM", "SIGKILL"),
    runs_dir: Path | str | None = None,
    echo: bool = False,
    plan: list[Interruption] | None = None,
    forward_sigterm: bool = False,
    grace_steps: int = 3,
    grace_s: float = 30.0,
) -> Drill:
    """Run ``job`` uninterrupted, then interrupted ``interruptions`` times at random steps (or ``plan``'s), and compare.

    ``job`` must checkpoint (``checkpoint_every`` above 0); both runs log every step. SIGKILL follows a SIGTERM after
    ``grace_steps`` more steps or ``grace_s`` seconds (standing in for SageMaker's 120 s). ``forward_sigterm``: SIGTERM
    reaches the script, the best case, not only the container's first process (SageMaker with SDK v3). Returns a
    :class:`~helpers.local.drill_verdict.Drill`; raises :class:`~helpers.local.drill_verdict.DrillFailed` if a launch
    fails on its own, the job never completes, or an interruption did not interrupt.
    """
    t = _drillable(job, given(target))
    runs_dir = Path(runs_dir or runs_root() / "drills") / f"{job.name}-{datetime.now():%Y%m%d-%H%M%S-%f}"
    folders.refuse_released(runs_dir)
    watched = replace(job, hyperparameters={**job.hyperparameters, "log_every": 1})
    reference_job = replace(watched, hyperparameters={**watched.hyperparameters, "checkpoint_every": 0})
    reference = LocalRunner(runs_dir, echo=echo, job_name="reference").run(reference_job, t)
    total = int(reference.metrics["steps"])
    plan = plan if plan is not None else plan_interruptions(total, interruptions, seed, kinds, margin=grace_steps + 4)
    launches = _Launches(
        watched, t, runs_dir, runs_dir / "checkpoints", echo, forward_sigterm, grace_steps, grace_s, Clock.of(watched)
    )
    segments = launches.until_complete(plan)
    seconds = time.perf_counter() - launches.t0
    account_losses(segments)
    verify(segments, plan, total)
    final = segments[-1].result
    assert final is not None  # every launch records its result
    return Drill(watched, reference, segments, final, compare_runs(reference, final), launches.checkpoint_dir, seconds)


def _drillable(job: Job, target: Target) -> Target:
    """``target``, unless ``job`` does not checkpoint or ``target`` is not this machine."""
    every = int(job.hyperparameters.get("checkpoint_every", 0) or 0)
    if every < 1:
        raise ValueError(
            "the drill needs a job that checkpoints: set hyperparameters['checkpoint_every'] to a step count (e.g. 10)"
        )
    if not target.is_local:
        raise ValueError(f"the drill signals local processes: use target='local' or 'local_cpu', not {target.name}")
    return target


@dataclass
class _Launches:
    """The interrupted job's launches: all on one checkpoint directory and one clock (``MaxRuntimeInSeconds`` counts
    every launch, as SageMaker keeps a spot job's across restarts), timed from the first (``t0``)."""

    job: Job
    target: Target
    runs_dir: Path
    checkpoint_dir: Path
    echo: bool
    forward_sigterm: bool
    grace_steps: int
    grace_s: float
    clock: Clock
    t0: float = 0.0

    def until_complete(self, plan: list[Interruption]) -> list[Segment]:
        """Launch after launch, each interrupted at the plan's next step, until one completes."""
        self.t0 = time.perf_counter()
        segments: list[Segment] = []
        pending = list(plan)
        while True:
            segment = self.launch(len(segments), pending[0] if pending else None)
            assert segment.result is not None  # launch() records it
            self.clock.ran_s += segment.end_s - segment.start_s
            segments.append(segment)
            if segment.signalled_s is not None:
                pending.pop(0)
            elif segment.status != "Completed":
                raise DrillFailed(
                    f"launch {segment.index} {segment.status.lower()} without being interrupted "
                    f"(exit code {segment.exit_code}): {segment.result.failure_reason}\n"
                    + "\n".join(segment.result.log_tail[-20:])
                )
            if segment.status == "Completed":
                return segments
            if len(segments) > len(plan) + 2:
                raise DrillFailed(f"the job did not complete in {len(segments)} launches; see {self.runs_dir}")

    def launch(self, index: int, interruption: Interruption | None) -> Segment:
        """One launch on the shared checkpoint dir; interrupts it when it logs the interruption's step."""
        segment = Segment(index, self.runs_dir / f"launch-{index}", time.perf_counter() - self.t0)
        watch = _Watch(segment, interruption, self.t0, self.grace_steps, self.grace_s)
        runner = LocalRunner(
            self.runs_dir,
            echo=self.echo,
            check=False,
            on_line=watch,
            job_name=segment.run_dir.name,
            checkpoint_dir=self.checkpoint_dir,
            forward_sigterm=self.forward_sigterm,
            clock=self.clock,
        )
        watch.live = runner.start(self.job, self.target)  # its log reaches `watch` only once `wait` reads it
        try:
            result = watch.live.wait()
        finally:
            watch.cancel()
        segment.end_s = time.perf_counter() - self.t0
        segment.status, segment.exit_code, segment.result = result.status, result.exit_code, result
        segment.survivors = {pid: _describe(p) for pid, p in watch.seen.items() if _alive(p)}
        return segment


class _Watch:
    """A launch's log, line by line (the runner's ``on_line``): records its steps and checkpoints, notes every process
    it has (to check afterwards that none outlived it), and interrupts it at the planned step: SIGKILL at once, or
    SIGTERM and then SIGKILL after ``grace_steps`` more steps or ``grace_s`` seconds."""

    def __init__(
        self, segment: Segment, interruption: Interruption | None, t0: float, grace_steps: int, grace_s: float
    ):
        self.segment, self.interruption, self.t0 = segment, interruption, t0
        self.grace_steps, self.grace_s = grace_steps, grace_s
        self.live: LocalJob | None = None
        self.seen: dict[int, psutil.Process] = {}
        self.timer: threading.Timer | None = None

    @property
    def launched(self) -> LocalJob:
        """The launch watched: started before its log reaches this watch (``wait`` reads the log)."""
        assert self.live is not None
        return self.live

    def __call__(self, host: str, line: str) -> None:
        row = parse_metric_line(line)
        if not row:
            return
        now = time.perf_counter() - self.t0
        if row["kind"] == "train":
            self._step(now, row["step"])
        elif row["kind"] == "checkpoint" and row.get("event") == "saved":
            self.segment.saves.append((now, row["step"], row["reason"], row.get("seconds", 0.0)))
        elif row["kind"] == "checkpoint" and row.get("event") == "resumed":
            self.segment.resumed_from = row["step"]

    def _step(self, now: float, step: int) -> None:
        segment = self.segment
        segment.steps.append((now, step))
        segment.last_step = step
        segment.first_step_s = segment.first_step_s if segment.first_step_s is not None else now
        for pid in self.launched.processes():
            if pid not in self.seen:
                try:
                    self.seen[pid] = psutil.Process(pid)
                except psutil.NoSuchProcess:
                    pass
        if segment.signalled_s is not None:
            segment.steps_after_signal += 1
            assert segment.interruption is not None  # _interrupt sets it with signalled_s
            if segment.interruption.signal == "SIGTERM" and segment.steps_after_signal >= self.grace_steps:
                self.kill()  # the end of the grace period
        elif self.interruption and step >= self.interruption.step:
            self._interrupt(now, self.interruption)

    def _interrupt(self, now: float, interruption: Interruption) -> None:
        self.segment.signalled_s = now
        self.segment.interruption = interruption
        if interruption.signal == "SIGKILL":
            self.kill()
        else:
            self.launched.signal(signal.SIGTERM)
            self.timer = threading.Timer(self.grace_s, self.kill)
            self.timer.daemon = True
            self.timer.start()

    def kill(self) -> None:
        if self.segment.killed_s is None:
            self.segment.killed_s = time.perf_counter() - self.t0
            self.launched.kill()

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _describe(process: psutil.Process) -> str:
    try:
        with process.oneshot():
            return f"{process.pid} {' '.join(process.cmdline())[:120]} ({process.status()}, parent {process.ppid()})"
    except psutil.Error:
        return f"{process.pid} (gone)"
