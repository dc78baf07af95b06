"""The interruption drill: prove that a checkpointed job survives spot reclaims and crashes bit-identically.

:func:`run_drill` runs a job once without interruption (the reference), then runs it again and interrupts it at
random steps: ``SIGTERM`` as SageMaker sends before a spot reclaim (the script saves and leaves) or ``SIGKILL`` with
no warning (the work since the last checkpoint is lost). After each interruption it restarts the job on the same
checkpoint directory, as SageMaker does after copying the checkpoints back from S3, until the job completes. Then it
compares the final weights and metrics with the reference: on a CPU they must be equal to the last bit.

The drill watches every step, so both runs log every step (``log_every=1``). Nothing here trains: the training
script does the checkpointing (``labs/src/checkpointing.py``); this module only launches, signals and measures.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import signal
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from helpers.errors import WorkshopError
from helpers.job import RUNS_DIR, Job, parse_metric_line
from helpers.local.runner import Clock, JobResult, LocalRunner
from helpers.targets import Target, resolve

SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
# figures that measure time or speed: they differ between any two runs, interrupted or not
TIMING = re.compile(r"(per_sec|seconds|_ms$|_s$|_frac$|^mfu$)")


class DrillFailed(WorkshopError, RuntimeError):
    """A launch failed on its own (not by the drill's signal), never completed, or an interruption did not
    interrupt: the drill proves nothing then."""


@dataclass(frozen=True)
class Interruption:
    step: int  # the drill signals once the job logs this step (the job may train a step or two more)
    signal: str  # "SIGTERM" (StopTrainingJob: notice, then SIGKILL after the grace) or "SIGKILL" (no warning)


@dataclass
class Segment:
    """One launch of the interrupted job. Times are seconds on the drill's clock (0 = the first launch)."""

    index: int
    run_dir: Path
    start_s: float
    end_s: float = 0.0
    first_step_s: float | None = None
    resumed_from: int = 0  # the step its checkpoint held (0: started fresh)
    last_step: int = 0  # the last step it logged
    steps: list[tuple[float, int]] = field(default_factory=list)  # (time, step) of every logged step
    saves: list[tuple[float, int, str, float]] = field(default_factory=list)  # (time, step, reason, seconds)
    interruption: Interruption | None = None
    signalled_s: float | None = None
    killed_s: float | None = None  # when the drill killed every process (SIGKILL, or the end of SIGTERM's grace)
    steps_after_signal: int = 0  # steps it logged after the signal
    status: str = ""
    exit_code: int = 0
    lost_steps: int = 0  # trained here but not in the checkpoint the next launch resumed from
    lost_seconds: float = 0.0  # the time those steps took
    restart_seconds: float = 0.0  # the next launch's start-up: launch to its first step
    # its processes still alive after it ended: PID -> "pid command (status, parent)"
    survivors: dict[int, str] = field(default_factory=dict)
    result: JobResult | None = field(default=None, repr=False)

    @property
    def ended_by(self) -> str:
        if self.interruption is None or self.signalled_s is None:
            return "completed" if self.status == "Completed" else self.status.lower()
        if any(reason == "signal" for _, _, reason, _ in self.saves):
            return "SIGTERM (saved first)"
        if self.interruption.signal == "SIGTERM" and self.killed_s is not None:
            return f"SIGTERM, SIGKILL {self.steps_after_signal} steps later"
        return self.interruption.signal

    def row(self) -> dict:
        return {
            "run": self.index,
            "launched at s": round(self.start_s, 1),
            "resumed from step": self.resumed_from,
            "reached step": self.last_step,
            "ended by": self.ended_by,
            "checkpoints saved": len(self.saves),
            "steps lost": self.lost_steps,
            "seconds lost": round(self.lost_seconds, 2),
            "restart s": round(self.restart_seconds, 1),
        }


@dataclass
class Comparison:
    """Reference against resumed run: every weight tensor and every non-timing figure of metrics.json."""

    tensors: int
    identical_tensors: int
    max_abs_diff: float
    weights_sha256: tuple[str, str]
    history_rows: tuple[int, int]
    differences: list[str]  # one line per figure or tensor that differs
    final: dict[str, tuple]  # val_* figures: (reference, resumed)

    @property
    def identical(self) -> bool:
        return self.identical_tensors == self.tensors and not self.differences

    def rows(self) -> list[dict]:
        rows = [
            {
                "what": "weight tensors bit-identical",
                "reference": self.tensors,
                "resumed": self.identical_tensors,
                "equal": self.identical_tensors == self.tensors,
            },
            {
                "what": "largest |difference| in a weight",
                "reference": 0.0,
                "resumed": self.max_abs_diff,
                "equal": self.max_abs_diff == 0,
            },
            {
                "what": "model.safetensors sha256",
                "reference": self.weights_sha256[0][:16],
                "resumed": self.weights_sha256[1][:16],
                "equal": self.weights_sha256[0] == self.weights_sha256[1],
            },
            {
                "what": "metric history rows",
                "reference": self.history_rows[0],
                "resumed": self.history_rows[1],
                "equal": self.history_rows[0] == self.history_rows[1] and not self.differences,
            },
        ]
        rows += [
            {"what": f"final {k}", "reference": repr(a), "resumed": repr(b), "equal": a == b}
            for k, (a, b) in self.final.items()
        ]
        return rows


def _learning_figures(row: dict) -> dict:
    return {k: v for k, v in row.items() if not TIMING.search(k)}


def compare(reference: JobResult, resumed: JobResult) -> Comparison:
    """Compare two finished local runs' saved model and metrics.json (timing figures aside)."""
    from safetensors.torch import load_file

    paths = [r.model_dir / "model.safetensors" for r in (reference, resumed)]
    a, b = (load_file(p) for p in paths)
    differences = [f"tensor {k}: only in one run" for k in sorted(set(a) ^ set(b))]
    same, max_diff = 0, 0.0
    for k in sorted(set(a) & set(b)):
        if a[k].shape == b[k].shape and a[k].dtype == b[k].dtype and bool((a[k] == b[k]).all()):
            same += 1
            continue
        diff = (a[k].double() - b[k].double()).abs().max().item() if a[k].shape == b[k].shape else float("inf")
        max_diff = max(max_diff, diff)
        differences.append(f"tensor {k}: max |difference| {diff:.3g}")
    ma, mb = (json.loads((r.output_dir / "metrics.json").read_text()) for r in (reference, resumed))
    ha, hb = ma["history"], mb["history"]
    for i, (ra, rb) in enumerate(zip(ha, hb)):
        fa, fb = _learning_figures(ra), _learning_figures(rb)
        for k in sorted(set(fa) | set(fb)):
            if fa.get(k) != fb.get(k):
                differences.append(
                    f"history row {i} ({ra.get('kind')} step {ra.get('step')}): {k} {fa.get(k)!r} != {fb.get(k)!r}"
                )
    if len(ha) != len(hb):
        differences.append(f"history: {len(ha)} rows in the reference, {len(hb)} resumed")
    sa, sb = _learning_figures(ma["summary"]), _learning_figures(mb["summary"])
    differences += [
        f"summary {k}: {sa.get(k)!r} != {sb.get(k)!r}" for k in sorted(set(sa) | set(sb)) if sa.get(k) != sb.get(k)
    ]
    last = lambda h: next((r for r in reversed(h) if r["kind"] == "eval"), {})  # noqa: E731
    final = {k: (v, last(hb).get(k)) for k, v in last(ha).items() if k.startswith("val_")}
    sha = tuple(hashlib.sha256(p.read_bytes()).hexdigest() for p in paths)
    return Comparison(len(a), same, max_diff, sha, (len(ha), len(hb)), differences, final)


def plan_interruptions(
    total_steps: int, count: int, seed: int = 0, kinds: tuple[str, ...] = ("SIGTERM", "SIGKILL"), margin: int = 4
) -> list[Interruption]:
    """``count`` random steps in increasing order, at least two apart and ``margin`` steps short of the end; each
    kind used about equally often, in random order."""
    unknown = set(kinds) - set(SIGNALS)
    if unknown or not kinds:
        raise ValueError(f"kinds must name signals among {sorted(SIGNALS)}, got {kinds!r}")
    room = range(2, total_steps - margin, 2)  # short of the end: the job must be stopped before it finishes
    if count < 1 or count > len(room):
        raise ValueError(
            f"{count} interruptions do not fit in {total_steps} steps (at most {len(room)}): "
            f"train longer (epochs, subset) or interrupt less often"
        )
    rng = random.Random(seed)
    steps = sorted(s + rng.randrange(2) for s in rng.sample(room, count))
    signals = [kinds[i % len(kinds)] for i in range(count)]
    rng.shuffle(signals)
    return [Interruption(step, sig) for step, sig in zip(steps, signals)]


@dataclass
class Drill:
    """What a drill did: the reference run, every launch of the interrupted job, and their comparison."""

    job: Job
    reference: JobResult
    segments: list[Segment]
    final: JobResult
    comparison: Comparison
    checkpoint_dir: Path
    seconds: float  # the interrupted job's wall time, every launch included

    @property
    def interruptions(self) -> list[Segment]:
        return [s for s in self.segments if s.signalled_s is not None]

    def timeline(self) -> list[dict]:
        """One row per launch: where it started, how far it got, how it ended and what was lost."""
        return [s.row() for s in self.segments]

    def time_split(self) -> dict[str, dict[str, float]]:
        """Seconds spent starting up, training forward, redoing lost work and saving checkpoints."""
        startup = sum((s.first_step_s or s.end_s) - s.start_s for s in self.segments)
        rework = sum(s.lost_seconds for s in self.segments)
        saving = sum(seconds for s in self.segments for *_, seconds in s.saves)
        ref_start = self.reference.timings["launch_to_first_step"] or 0.0
        return {
            "reference": {
                "start-up": ref_start,
                "training": self.reference.timings["total"] - ref_start,
                "lost work": 0.0,
                "saving checkpoints": 0.0,
            },
            "interrupted": {
                "start-up": startup,
                "training": self.seconds - startup - rework - saving,
                "lost work": rework,
                "saving checkpoints": saving,
            },
        }

    def plot(self, title: str = "Interruption drill"):
        """Steps against time for every launch (and the reference), and where the time went."""
        import matplotlib.pyplot as plt

        fig, (ax, ax_bars) = plt.subplots(1, 2, figsize=(12, 3.8), gridspec_kw={"width_ratios": [2.2, 1]})
        ref_t = [h["t"] for h in self.reference.history if h["kind"] == "train"]
        ref_s = [h["step"] for h in self.reference.history if h["kind"] == "train"]
        ax.plot(ref_t, ref_s, color="grey", ls="--", lw=1, label="uninterrupted reference")
        marks = {"SIGTERM": ("v", "#DD8452"), "SIGKILL": ("X", "#C44E52")}
        for s in self.segments:
            (line,) = ax.plot([t for t, _ in s.steps], [n for _, n in s.steps], lw=1.6, label=f"launch {s.index}")
            ax.axvspan(s.start_s, s.first_step_s or s.end_s, color=line.get_color(), alpha=0.12)
            ax.plot([t for t, *_ in s.saves], [n for _, n, *_ in s.saves], "o", ms=3.5, color=line.get_color())
            if s.signalled_s is not None:
                marker, colour = marks[s.interruption.signal]
                ax.plot(s.signalled_s, s.last_step, marker, ms=10, color=colour)
                ax.annotate(
                    f"{s.interruption.signal}\n{s.lost_steps} steps lost",
                    (s.signalled_s, s.last_step),
                    textcoords="offset points",
                    xytext=(4, -22),
                    fontsize=8,
                    color=colour,
                )
        for before, after in zip(self.segments, self.segments[1:]):  # the roll back to the checkpoint resumed from
            if before.signalled_s is not None and after.first_step_s is not None:
                ax.plot(
                    [before.signalled_s, after.first_step_s],
                    [before.last_step, after.resumed_from],
                    ":",
                    color="grey",
                    lw=1,
                )
        ax.set(
            xlabel="seconds since the first launch (shaded: start-up)",
            ylabel="step",
            title="Progress: dots are checkpoints",
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
        split = self.time_split()
        colours = {
            "start-up": "#BBBBBB",
            "training": "#4C72B0",
            "lost work": "#C44E52",
            "saving checkpoints": "#DD8452",
        }
        bottoms = {run: 0.0 for run in split}
        for part, colour in colours.items():
            values = [split[run][part] for run in split]
            ax_bars.bar(list(split), values, bottom=[bottoms[r] for r in split], color=colour, label=part)
            for run, v in zip(split, values):
                bottoms[run] += v
        ax_bars.set(ylabel="seconds", title="Where the time went")
        ax_bars.legend(fontsize=8)
        fig.suptitle(title)
        fig.tight_layout()
        return fig


def _stamp() -> str:
    return f"{datetime.now():%Y%m%d-%H%M%S-%f}"


def run_drill(
    job: Job,
    target: str | Target = "local_cpu",
    interruptions: int = 3,
    seed: int = 0,
    kinds: tuple[str, ...] = ("SIGTERM", "SIGKILL"),
    runs_dir: Path | str = RUNS_DIR / "drills",
    echo: bool = False,
    plan: list[Interruption] | None = None,
    forward_sigterm: bool = False,
    grace_steps: int = 3,
    grace_s: float = 30.0,
) -> Drill:
    """Run ``job`` uninterrupted, then interrupted ``interruptions`` times at random steps, and compare.

    ``job`` must checkpoint (a ``checkpoint_every`` hyperparameter above 0). ``plan`` replaces the random
    interruptions with given ones. A SIGTERM is followed by SIGKILL once the job has logged ``grace_steps`` more
    steps or ``grace_s`` seconds have passed (SageMaker's grace is 120 s; a few steps stand in for it here).
    ``forward_sigterm``: SIGTERM reaches the script (the best case) instead of stopping at the container's first
    process (SageMaker with SDK v3). Returns a :class:`Drill`; raises :class:`DrillFailed` if a launch fails on its
    own, the job never completes, or an interruption did not interrupt.
    """
    every = int(job.hyperparameters.get("checkpoint_every", 0) or 0)
    if every < 1:
        raise ValueError(
            "the drill needs a job that checkpoints: set hyperparameters['checkpoint_every'] to a step count (e.g. 10)"
        )
    t = resolve(target) if isinstance(target, str) else target
    if not t.is_local:
        raise ValueError(f"the drill signals local processes: use target='local' or 'local_cpu', not {t.name}")
    runs_dir = Path(runs_dir) / f"{job.name}-{_stamp()}"
    watched = replace(job, hyperparameters={**job.hyperparameters, "log_every": 1})
    reference_job = replace(watched, hyperparameters={**watched.hyperparameters, "checkpoint_every": 0})
    reference = LocalRunner(runs_dir, echo=echo, job_name="reference").run(reference_job, t)
    total = int(reference.metrics["steps"])
    plan = plan if plan is not None else plan_interruptions(total, interruptions, seed, kinds, margin=grace_steps + 4)
    checkpoint_dir = runs_dir / "checkpoints"

    segments: list[Segment] = []
    t0 = time.perf_counter()
    pending = list(plan)
    clock = Clock.of(watched)  # one job's clock across its launches, as SageMaker keeps a spot job's
    while True:
        segment = _launch(
            watched,
            t,
            runs_dir,
            checkpoint_dir,
            len(segments),
            t0,
            pending[0] if pending else None,
            echo,
            forward_sigterm,
            grace_steps,
            grace_s,
            clock,
        )
        clock.ran_s += segment.end_s - segment.start_s
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
            break
        if len(segments) > len(plan) + 2:
            raise DrillFailed(f"the job did not complete in {len(segments)} launches; see {runs_dir}")
    seconds = time.perf_counter() - t0
    for before, after in zip(segments, segments[1:]):
        _account_loss(before, after)
    verify(segments, plan, total)
    final = segments[-1].result
    return Drill(watched, reference, segments, final, compare(reference, final), checkpoint_dir, seconds)


def verify(segments: list[Segment], plan: list[Interruption], total_steps: int) -> None:
    """Raise :class:`DrillFailed` unless every planned interruption really interrupted: it stopped its launch
    before the final step, and the next launch resumed from a step before the one the interrupted launch reached."""
    interrupted = [s for s in segments if s.signalled_s is not None]
    problems = []
    if len(interrupted) != len(plan):
        problems.append(f"{len(plan)} interruptions planned, {len(interrupted)} landed")
    for before, after in zip(segments, [*segments[1:], None]):
        if before.signalled_s is None:
            if after is not None:
                problems.append(f"launch {before.index} ended ({before.status}) without an interruption")
            continue
        name = f"launch {before.index} ({before.interruption.signal} at step {before.interruption.step})"
        if before.status == "Completed" or before.last_step >= total_steps:
            problems.append(f"{name} trained on to the final step {before.last_step}: the signal did not stop it")
        elif after is None:
            problems.append(f"{name} was the last launch: the job never completed after it")
        elif after.resumed_from > before.last_step or after.resumed_from >= total_steps:
            problems.append(
                f"{name} reached step {before.last_step}, but launch {after.index} resumed from step "
                f"{after.resumed_from}: a process that outlived the launch went on training"
            )
    problems += [
        f"launch {s.index}: {len(s.survivors)} of its processes outlived it: {'; '.join(s.survivors.values())}"
        for s in segments
        if s.survivors
    ]
    if problems:
        raise DrillFailed("the drill did not do what it claims:\n- " + "\n- ".join(problems))


def _launch(
    job: Job,
    t: Target,
    runs_dir: Path,
    checkpoint_dir: Path,
    index: int,
    t0: float,
    interruption: Interruption | None,
    echo: bool,
    forward_sigterm: bool = False,
    grace_steps: int = 3,
    grace_s: float = 30.0,
    clock: Clock | None = None,
) -> Segment:
    """One launch on the shared checkpoint dir; interrupts it when it logs the interruption's step."""
    import psutil

    segment = Segment(index, runs_dir / f"launch-{index}", time.perf_counter() - t0)
    live, seen, timer = None, {}, None

    def kill() -> None:
        if segment.killed_s is None:
            segment.killed_s = time.perf_counter() - t0
            live.kill()

    def watch(host: str, line: str) -> None:
        nonlocal timer
        row = parse_metric_line(line)
        if not row:
            return
        now = time.perf_counter() - t0
        if row["kind"] == "train":
            segment.steps.append((now, row["step"]))
            segment.last_step = row["step"]
            segment.first_step_s = segment.first_step_s if segment.first_step_s is not None else now
            for pid in live.processes():  # every process the job has, to check afterwards that none outlived it
                if pid not in seen:
                    try:
                        seen[pid] = psutil.Process(pid)
                    except psutil.NoSuchProcess:
                        pass
            if segment.signalled_s is not None:
                segment.steps_after_signal += 1
                if segment.interruption.signal == "SIGTERM" and segment.steps_after_signal >= grace_steps:
                    kill()  # the end of the grace period
            elif interruption and row["step"] >= interruption.step:
                segment.signalled_s = now
                segment.interruption = interruption
                if interruption.signal == "SIGKILL":
                    kill()
                else:
                    live.signal(signal.SIGTERM)
                    timer = threading.Timer(grace_s, kill)
                    timer.daemon = True
                    timer.start()
        elif row["kind"] == "checkpoint" and row.get("event") == "saved":
            segment.saves.append((now, row["step"], row["reason"], row.get("seconds", 0.0)))
        elif row["kind"] == "checkpoint" and row.get("event") == "resumed":
            segment.resumed_from = row["step"]

    runner = LocalRunner(
        runs_dir,
        echo=echo,
        check=False,
        on_line=watch,
        job_name=segment.run_dir.name,
        checkpoint_dir=checkpoint_dir,
        forward_sigterm=forward_sigterm,
        clock=clock,
    )
    live = runner.start(job, t)
    try:
        result = live.wait()
    finally:
        if timer is not None:
            timer.cancel()
    segment.end_s = time.perf_counter() - t0
    segment.status, segment.exit_code, segment.result = result.status, result.exit_code, result
    segment.survivors = {pid: _describe(p) for pid, p in seen.items() if _alive(p)}
    return segment


def _alive(process) -> bool:
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _describe(process) -> str:
    import psutil

    try:
        with process.oneshot():
            return f"{process.pid} {' '.join(process.cmdline())[:120]} ({process.status()}, parent {process.ppid()})"
    except psutil.Error:
        return f"{process.pid} (gone)"


def _account_loss(before: Segment, after: Segment) -> None:
    """Steps ``before`` trained past the checkpoint ``after`` resumed from were trained twice: the interruption's
    cost, with the next launch's start-up."""
    before.lost_steps = max(0, before.last_step - after.resumed_from)
    redo_from = next((t for t, step in before.steps if step == after.resumed_from), before.first_step_s)
    # the work went on until every process was killed (a SIGTERM that no process heard stops nothing)
    end = next(t for t in (before.killed_s, before.signalled_s, before.end_s) if t is not None)
    before.lost_seconds = max(0.0, end - redo_from) if before.lost_steps else 0.0
    before.restart_seconds = (after.first_step_s or after.end_s) - after.start_s
