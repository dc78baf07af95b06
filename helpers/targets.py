"""Where a lab's job runs: this machine (``local``, ``local_cpu``, ``local_gpu``) or a SageMaker instance type.

A lab's ``target`` parameter is resolved once, in the lab's set-up cell (:func:`resolve`); every function of the
helpers takes that :class:`Target`, an instance type with its catalogue entry, and none resolves a name again.
Resolving a target never imports torch and never calls AWS: it looks for GPUs the way the SageMaker container
driver does (``nvidia-smi --list-gpus``), so notebooks stay light and start fast.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache

from helpers.errors import TargetError
from helpers.planning import instances

LOCAL_TARGETS = ("local", "local_cpu", "local_gpu")
LOCAL_CONTAINER = "local_container"  # the SDK's Docker local mode: the training image on this machine's Docker
SAGEMAKER = "sagemaker"  # the lab's own real_target


@dataclass(frozen=True)
class Target:
    name: str  # as the learner wrote it: "local", "local_cpu", "local_gpu" or "ml.g5.2xlarge"
    instance_type: str  # what the job sees as SM_CURRENT_INSTANCE_TYPE
    gpus: int
    cpus: int
    instance: instances.InstanceType | None = field(default=None, compare=False, repr=False)  # SageMaker: its entry

    @classmethod
    def on(cls, spec: instances.InstanceType) -> Target:
        """The target of a catalogue instance type."""
        return cls(spec.name, spec.name, spec.gpus, spec.vcpus, spec)

    @property
    def kind(self) -> str:
        """Who runs the job: ``local`` (the local runner), ``local_container`` (the SDK's Docker local mode) or
        ``sagemaker`` (an instance type)."""
        if self.name.startswith("ml."):
            return "sagemaker"
        return LOCAL_CONTAINER if self.name == LOCAL_CONTAINER else "local"

    @property
    def is_local(self) -> bool:
        """Run by the local runner, on this machine, without Docker."""
        return self.kind == "local"

    @property
    def device(self) -> str:
        return "cuda" if self.gpus else "cpu"

    def default_processes(self) -> int:
        """One process per GPU, as SageMaker's torchrun driver does; one on a CPU."""
        return self.gpus or 1

    def describe(self) -> str:
        what = f"{self.gpus} GPU(s)" if self.gpus else "CPU only"
        return f"{self.name}: {what}, {self.cpus} CPU core(s)"


@lru_cache(maxsize=1)
def local_gpu_count() -> int:
    """GPUs on this machine, counted like the SageMaker driver does; 0 without an NVIDIA driver."""
    if os.environ.get("WORKSHOP_FORCE_CPU") == "1" or not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def local_cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def given(target: Target) -> Target:
    """The Target a set-up cell resolved; a name passed instead is refused with the line that resolves it."""
    if isinstance(target, Target):
        return target
    raise TargetError(
        f"pass the Target your set-up cell resolved, not the name {target!r}: "
        f"t = targets.resolve({target!r}), then pass t."
    )


def resolve(name: str, real_target: str | None = None) -> Target:
    """Turn a lab's ``target`` parameter into a Target, or fail with what to write instead.

    ``"sagemaker"`` stands for the lab's own ``real_target``: the cheapest instance type that still teaches it.
    """
    if not isinstance(name, str):
        raise TargetError(f"target must be a string such as 'local' or 'ml.g5.2xlarge', got {name!r}.")
    name = name.strip()
    if name == SAGEMAKER:
        if not real_target:
            raise TargetError(
                "target 'sagemaker' means this lab's real_target, and none was given: set real_target to an "
                "instance type such as 'ml.g5.xlarge', or give the instance type as target."
            )
        return resolve(real_target)
    if "." in name:  # an instance type, perhaps without its "ml." or in capitals: the catalogue says which
        return Target.on(instances.lookup(name))
    gpus, cpus = local_gpu_count(), local_cpu_count()
    if name == "local":
        return Target("local", "local_gpu" if gpus else "local_cpu", gpus, cpus)
    if name == "local_cpu":
        return Target(name, name, 0, cpus)
    if name == "local_gpu":
        if not gpus:
            raise TargetError(
                "target 'local_gpu' needs an NVIDIA GPU and `nvidia-smi`, and this machine has none. "
                "Use target='local' (GPU when present, else CPU) or 'local_cpu'."
            )
        return Target(name, name, gpus, cpus)
    if name == LOCAL_CONTAINER:
        return Target(name, "local_gpu" if gpus else "local_cpu", gpus, cpus)
    close = difflib.get_close_matches(name, (*LOCAL_TARGETS, SAGEMAKER, LOCAL_CONTAINER), n=2)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise TargetError(
        f"unknown target {name!r}.{hint} Choose one of {', '.join(LOCAL_TARGETS)}, 'sagemaker' (the lab's "
        f"real_target), a SageMaker instance type such as 'ml.g5.2xlarge', or '{LOCAL_CONTAINER}' (the SDK's Docker "
        f"local mode, where Docker runs)."
    )
