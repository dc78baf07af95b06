"""The interruption drill's plan and verdict: where to interrupt, what each launch did, and what the drill proves.

:mod:`helpers.local.drill` runs the drill; this module holds what it plans (:func:`plan_interruptions`), what it
records (a :class:`Segment` per launch, the :class:`Drill`), and how it judges: :func:`verify` (every interruption
really interrupted, no process outlived its launch) and :func:`compare` (the resumed run's weights and metrics
against the reference's, bit for bit).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

from helpers import plots
from helpers.errors import WorkshopError
from helpers.job_spec import Job
from helpers.results import JobResult

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


def compare_runs(reference: JobResult, resumed: JobResult) -> Comparison:
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
    final = {k: (v, _last_eval(hb).get(k)) for k, v in _last_eval(ha).items() if k.startswith("val_")}
    reference_sha, resumed_sha = (hashlib.sha256(p.read_bytes()).hexdigest() for p in paths)
    return Comparison(len(a), same, max_diff, (reference_sha, resumed_sha), (len(ha), len(hb)), differences, final)


def _last_eval(history: list[dict]) -> dict:
    return next((r for r in reversed(history) if r["kind"] == "eval"), {})


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
        return plots.interruption_drill(self, title)


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
        assert before.interruption is not None  # set with signalled_s, when the drill signals
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


def account_losses(segments: list[Segment]) -> None:
    """Steps a launch trained past the checkpoint the next one resumed from were trained twice: each interruption's
    cost, with the next launch's start-up."""
    for before, after in zip(segments, segments[1:]):
        before.lost_steps = max(0, before.last_step - after.resumed_from)
        redo_from = next((t for t, step in before.steps if step == after.resumed_from), before.first_step_s)
        # the work went on until every process was killed (a SIGTERM that no process heard stops nothing)
        end = next(t for t in (before.killed_s, before.signalled_s, before.end_s) if t is not None)
        if before.lost_steps:
            assert redo_from is not None  # it logged the steps it lost, so it has a first step
            before.lost_seconds = max(0.0, end - redo_from)
        else:
            before.lost_seconds = 0.0
        before.restart_seconds = (after.first_step_s or after.end_s) - after.start_s
