"""What a run returns, wherever it ran: the local runner's ``JobResult``, a SageMaker job's result and a dry run all
have a ``name``, a ``status``, the final ``metrics`` and every metric line in ``history``, so a lab plots and
prints them the same way."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING


class RunResult:
    """The shared part of a run's result; subclasses hold ``name``, ``status``, ``metrics`` and ``history``: a
    run's as dataclass fields, a dry run's as properties."""

    # read-only to whoever holds a RunResult, which either kind of subclass satisfies; for the type checker only:
    # at run time a property here would become each subclass dataclass's default
    if TYPE_CHECKING:

        @property
        def name(self) -> str: ...

        @property
        def status(self) -> str: ...

        @property
        def metrics(self) -> dict: ...  # the [final] figures

        @property
        def history(self) -> list[dict]: ...  # every metric line, in order

    def curve(self, kind: str, key: str) -> tuple[list[float], list[float]]:
        """(steps, values) of one metric, for plotting."""
        rows = [h for h in self.history if h["kind"] == kind and key in h]
        return [h["step"] for h in rows], [h[key] for h in rows]

    def failure_message(self, where: str = "") -> str:
        """Why the run did not complete and the last lines of its log (``where``: where the whole log is)."""
        tail = "\n".join(getattr(self, "log_tail", [])[-25:])
        reason = getattr(self, "failure_reason", "")
        return f"job {self.name} {self.status.lower()}: {reason}\n--- last lines of its log{where} ---\n{tail}"

    def _repr_parts(self, figures: str) -> list[str]:
        """What follows ``name:`` in the repr; ``figures`` are the final metrics as ``key=value``."""
        return [self.status, figures]

    def __repr__(self) -> str:
        figures = ", ".join(f"{k}={v:.4g}" for k, v in self.metrics.items() if isinstance(v, float))
        return f"{type(self).__name__}({self.name}: {'; '.join(self._repr_parts(figures))})"


@dataclass(repr=False)  # the repr is RunResult's
class JobResult(RunResult):
    """A local job's result (:meth:`helpers.local.containers.LocalJob.wait`): its status and exit code, figures,
    log tail and run folder, as DescribeTrainingJob and the job's logs give them on SageMaker."""

    name: str
    status: str  # Completed | Failed | Stopped
    exit_code: int
    run_dir: Path
    metrics: dict = field(default_factory=dict)  # the [final] figures
    history: list[dict] = field(default_factory=list)  # every metric line, in order
    timings: dict = field(default_factory=dict)  # seconds: launch_to_first_log, launch_to_first_step, total
    failure_reason: str = ""
    log_tail: list[str] = field(default_factory=list)
    secondary_status: str = ""  # as DescribeTrainingJob: Completed, Failed, Stopped, MaxRuntimeExceeded...

    @property
    def model_dir(self) -> Path:
        return self.run_dir / "algo-1" / "model"

    @property
    def output_dir(self) -> Path:
        return self.run_dir / "algo-1" / "output" / "data"

    def _repr_parts(self, figures: str) -> list[str]:
        return [f"{self.status} in {self.timings.get('total', 0):.1f}s", figures]


@dataclass(frozen=True)
class PairedRatio:
    """B over A, from pairs of runs made side by side in time: each pair's ratio, the middle one (for an even count
    the lower middle: a ratio one pair of runs really gave) and the range. A range that spans 1 leaves the sign open."""

    each: tuple[float, ...]

    @property
    def middle(self) -> float:
        return statistics.median_low(self.each)

    @property
    def low(self) -> float:
        return min(self.each)

    @property
    def high(self) -> float:
        return max(self.each)

    @property
    def settled(self) -> bool:
        """Every pair agrees on which side is faster."""
        return self.low > 1 or self.high < 1

    def __str__(self) -> str:
        pairs = ", ".join(f"{r:.2f}x" for r in self.each)
        return f"{self.middle:.2f}x (pairs: {pairs})"


def paired_ratio(a: list[float], b: list[float]) -> PairedRatio:
    """``b[i] / a[i]`` for each pair of runs ``i`` (e.g. samples/s of the fix over the baseline, same trial)."""
    if not a or len(a) != len(b) or not all(a):
        raise ValueError(f"paired_ratio needs as many non-zero baselines as runs to compare: {a} against {b}")
    return PairedRatio(tuple(y / x for x, y in zip(a, b)))
