"""Lab 01's exercise: the precision each GPU wants."""

from __future__ import annotations

from helpers.exercises import exercise, expect
from helpers.planning import instances

PRECISIONS = ("fp32", "bf16", "fp16")


def _fits(answer: object, instance_type: str) -> str:
    spec = instances.lookup(instance_type)
    gpu = spec.gpu.model if spec.gpu else "its GPU"
    expect(answer in PRECISIONS, f"{instance_type}: give one of {', '.join(PRECISIONS)}, not {answer!r}.")
    expect(
        answer != "fp32",
        f"{instance_type}: fp32 runs, but {gpu}'s tensor cores do their fast work in 16-bit: which 16-bit format "
        "does it support?",
    )
    want = "bf16" if spec.supports("bf16") else "fp16"
    expect(
        answer == want,
        f"{instance_type}: {gpu} "
        + (
            "supports bf16, which keeps fp32's range: no loss scaling needed, so prefer it to fp16."
            if want == "bf16"
            else "has no bf16 in hardware (it predates Ampere): its 16-bit format is fp16, with a GradScaler."
        ),
    )
    return gpu


@exercise("01.1", "The precision each GPU wants", minutes=3)
def precision_per_gpu(precision_g5, precision_p3):
    """Pick the training precision for ml.g5.xlarge and for ml.p3.2xlarge."""
    g5 = _fits(precision_g5, "ml.g5.xlarge")
    p3 = _fits(precision_p3, "ml.p3.2xlarge")
    return (
        f"bf16 on the {g5} (Ampere and later: fp32's range, no scaler); fp16 with a GradScaler on the {p3}. "
        'The script\'s precision="auto" makes the same choice.'
    )
