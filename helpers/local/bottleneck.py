"""Why one run's training step is longer than another's: the step's gap split into the clock's parts (data wait,
computing, queued for a core, waiting for the device, blocked) with the largest named as the cause, and the operators
that grew most in the two runs' profiles. Both runs need ``train.py --step_breakdown`` (and ``--profile`` for the
operators)::

    gap = bottleneck.step_gap(starved.metrics, fixed.metrics)
    cause, sentence = bottleneck.verdict(gap, bottleneck.operator_gap(starved.output_dir, fixed.output_dir))
"""

from __future__ import annotations

from pathlib import Path

from helpers.local.monitor import profile_report

GAP_PARTS = {  # where the clock of ``train.py --step_breakdown`` puts each millisecond of a step
    "waiting for data": "data_wait_ms",
    "computing": "on_core_ms",
    "queued for a core": "queued_ms",
    "waiting for the device": "device_wait_ms",  # train.py --device_ms: the stand-in accelerator (0 without one)
    "blocked": "blocked_ms",
}
CAUSES = {  # the largest part of the gap, in words a learner can act on
    "waiting for data": "the loader: the trainer sat waiting for batches its workers had not decoded yet",
    "computing": "the trainer's own operators: they computed longer on the cores they had",
    "queued for a core": "too few cores: the trainer's threads queued for cores its workers or other work held",
    "waiting for the device": "the accelerator: the trainer waited for the device's own work",
    "blocked": "the trainer was blocked off the cores (a lock, memory or I/O)",
}


def step_gap(slow: dict, fast: dict) -> dict[str, float]:
    """How many ms per step longer the slow run's step was, part by part (:data:`GAP_PARTS`), from two runs'
    metrics: the clock's unprofiled steps, whose parts add up to the step."""
    slow, fast = ({"device_wait_ms": 0.0, **m} for m in (slow, fast))  # a run without the stand-in waited for none
    missing = [k for k in GAP_PARTS.values() if k not in slow or k not in fast]
    if missing:
        raise KeyError(f"no {', '.join(missing)} in the metrics: run both jobs with step_breakdown=True (Linux)")
    return {part: slow[key] - fast[key] for part, key in GAP_PARTS.items()}


def operator_gap(slow_dir: str | Path, fast_dir: str | Path, limit: int = 3) -> list[tuple[str, float]]:
    """The operators whose self time per profiled step grew the most from the fast run to the slow one, with the
    growth in ms: every operator either profile kept, not only the slow run's top one."""
    slow, fast = ({r["name"]: r["self_ms_per_step"] for r in profile_report(d)["cpu"]} for d in (slow_dir, fast_dir))
    grown = {name: slow.get(name, 0.0) - fast.get(name, 0.0) for name in slow.keys() | fast.keys()}
    return sorted(grown.items(), key=lambda item: -item[1])[:limit]


def verdict(gap: dict[str, float], operators: list[tuple[str, float]]) -> tuple[str, str]:
    """(cause, sentence): the largest part of the step's gap names the cause; the sentence gives every part and the
    operators that grew most. The cause is "" when the slow run's step was not longer."""
    total = sum(gap.values())
    if total <= 0:
        return "", f"The starved run's step was not longer ({total:+.1f} ms): no gap to explain; run both again."
    cause = max(gap, key=lambda part: gap[part])
    parts = ", ".join(f"{part} {ms:+.1f}" for part, ms in sorted(gap.items(), key=lambda item: -item[1]))
    grew = ", ".join(f"{name} {ms:+.1f}" for name, ms in operators)
    return cause, (
        f"Of the {total:.1f} ms gap per step, {gap[cause]:.1f} ms ({gap[cause] / total:.0%}) was {cause}, "
        f"so the cause is {CAUSES[cause]}. All parts, in ms: {parts}. In the profile the operators that grew most "
        f"(ms per step): {grew}."
    )


def loader_wait_ms(output_dir: str | Path) -> float:
    """Self ms per profiled step in ``next(loader)`` (the profile's ``enumerate(DataLoader)...`` rows): the data
    wait as the profile sees it, on the trainer's side."""
    return sum(r["self_ms_per_step"] for r in profile_report(output_dir)["cpu"] if r["name"].startswith("enumerate("))
