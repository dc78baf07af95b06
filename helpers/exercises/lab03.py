"""Lab 03's exercise: where SMDDP runs."""

from __future__ import annotations

from helpers.exercises import exercise, expect
from helpers.planning import instances

CANDIDATES = (
    "ml.g5.48xlarge",
    "ml.p3.16xlarge",
    "ml.p3dn.24xlarge",
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.p5.48xlarge",
)


@exercise("03.1", "Where SMDDP runs", minutes=3)
def smddp_instance_types(smddp_types):
    """From CANDIDATES, the instance types on which SageMaker's data-parallel library runs."""
    expect(isinstance(smddp_types, (set, list, tuple)), "give a set of instance-type names, e.g. {'ml.x.y', ...}.")
    chosen = {instances.lookup(n).name for n in smddp_types}
    want = {n for n in CANDIDATES if instances.lookup(n).supports("smddp")}
    for name in sorted(chosen - want):
        why = (
            "P5 is not supported: use torchrun with NCCL (over EFA) there"
            if "p5" in name
            else "it has no EFA network between instances that SMDDP is built for"
        )
        expect(False, f"{name} does not run SMDDP: {why}. Check the support table above.")
    missing = sorted(want - chosen)
    expect(not missing, f"{len(missing)} more of the candidates run SMDDP: look again at the P3 and P4 families.")
    return f"{', '.join(sorted(want))}: SMDDP's home; on anything else the lab's jobs use torchrun and NCCL."
