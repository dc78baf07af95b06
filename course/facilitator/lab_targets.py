"""Each lab's real targets for an event (``targets`` in ``course.manifest``), as one list: the instance type a lab's
``real_target`` (or ``smp_target``) parameter names, how many a job holds, for how long, and why that type; the
facilitator guide's costs, quotas and "the cheapest" comparisons are computed from it."""

from __future__ import annotations

from course.manifest import LABS
from helpers.planning import instances

LIBRARIES = {"smddp": "SMDDP", "smp": "SMP v2"}  # instances' feature names, as the guide writes them


TARGETS = tuple(target for lab in LABS for target in lab.targets)  # every lab's, in the labs' order


def hourly(spec: instances.InstanceType) -> float:
    """On-demand $/h: the workshop plans with priced types only (``instances.cheapest`` picks among those)."""
    assert spec.price_per_hour is not None, f"{spec.name} has no price on file (helpers.planning.instances)"
    return spec.price_per_hour


def gpus_of(spec: instances.InstanceType) -> str:
    return f"{spec.gpus} × {spec.gpu.model}" if spec.gpu else spec.accelerators or "CPU"
