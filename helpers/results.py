"""What a run returns, wherever it ran: the local runner's ``JobResult``, a SageMaker job's result and a dry run all
have a ``name``, a ``status``, the final ``metrics`` and every metric line in ``history``, so a lab plots and
prints them the same way."""

from __future__ import annotations

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

    def _repr_parts(self, figures: str) -> list[str]:
        """What follows ``name:`` in the repr; ``figures`` are the final metrics as ``key=value``."""
        return [self.status, figures]

    def __repr__(self) -> str:
        figures = ", ".join(f"{k}={v:.4g}" for k, v in self.metrics.items() if isinstance(v, float))
        return f"{type(self).__name__}({self.name}: {'; '.join(self._repr_parts(figures))})"
