"""Lab 03's exercises: what SageMaker's torchrun launcher sets up across instances, and where SMDDP runs."""

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


def _whole(value) -> int | None:
    """A count given as 16 or 16.0; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        return None
    return int(value)


@exercise("03.1", "What the launcher sets up", minutes=5)
def launcher_sets_up(world_size_p5, first_rank_on_algo_2, efa_types, gpus_per_instance, instance_count, driver_table):
    """The same job on 2 x ml.p5.48xlarge: the world size, the RANK of algo-2's first process, and the instance
    types of the lab's driver table (``driver_table``: its rows) whose NCCL goes over EFA."""
    world, first = gpus_per_instance * instance_count, gpus_per_instance
    world_size_p5, first_rank_on_algo_2 = _whole(world_size_p5), _whole(first_rank_on_algo_2)
    expect(world_size_p5 is not None and world_size_p5 > 0, "the world size is a whole number of processes.")
    expect(
        world_size_p5 != gpus_per_instance,
        f"{gpus_per_instance} is one instance's processes. Every instance runs its own torchrun, one process per GPU, "
        f"and the world counts the processes of all {instance_count} instances.",
    )
    expect(
        world_size_p5 == world,
        f"one process per GPU on each instance: {instance_count} instances x {gpus_per_instance} GPUs; you wrote "
        f"{world_size_p5}.",
    )
    expect(first_rank_on_algo_2 is not None and first_rank_on_algo_2 >= 0, "a RANK is a whole number from 0.")
    expect(
        first_rank_on_algo_2 != 0,
        "RANK 0 is algo-1's first process: RANK counts across the whole job; LOCAL_RANK is the one that starts again "
        "at 0 on every instance.",
    )
    expect(
        first_rank_on_algo_2 == first,
        f"algo-2 is node rank 1, and its torchrun numbers its processes after algo-1's {gpus_per_instance}: RANK = "
        f"node rank x processes per node + LOCAL_RANK; you wrote {first_rank_on_algo_2}.",
    )
    expect(isinstance(efa_types, (set, list, tuple)), "give a set of instance-type names, e.g. {'ml.x.y', ...}.")
    table = {row["instance type"]: row for row in driver_table}
    chosen = set(efa_types)
    unknown = sorted(chosen - set(table))
    expect(not unknown, f"{', '.join(unknown)}: not in the driver's table; pick from {', '.join(table)}.")
    want = {name for name, row in table.items() if row["FI_PROVIDER"] == "efa"}
    for name in sorted(chosen - want):
        expect(
            False,
            f"{name}: the table's FI_PROVIDER column is empty there, so NCCL talks TCP over its "
            f"{table[name]['network Gb/s']:g} Gb/s network, whatever EFA hardware EC2 lists for it: SageMaker's "
            f"driver turns EFA on only for the types on its own list (SM_EFA_NCCL_INSTANCES).",
        )
    missing = want - chosen
    expect(not missing, f"{len(missing)} more of the table's types get FI_PROVIDER=efa: read that column again.")
    return (
        f"{world} processes, and algo-2's start at RANK {first}; NCCL goes over EFA on {', '.join(sorted(want))}. "
        "The driver's list decides, not the hardware: check the log for 'NET/OFI Selected Provider is efa'."
    )


@exercise("03.2", "Where SMDDP runs", minutes=3)
def smddp_instance_types(smddp_types):
    """From CANDIDATES, the instance types on which SageMaker's data-parallel library runs."""
    expect(isinstance(smddp_types, (set, list, tuple)), "give a set of instance-type names, e.g. {'ml.x.y', ...}.")
    chosen = {instances.lookup(n).name for n in smddp_types}
    want = {n for n in CANDIDATES if instances.lookup(n).supports("smddp")}
    for name in sorted(chosen - want):
        t = instances.lookup(name)
        if t.family.startswith("p5"):
            why = "P5 is not supported (the SDK's maintainers confirmed it): use torchrun with NCCL over EFA there"
        elif name == "ml.p3.16xlarge":
            why = "SMDDP ran there in the case studies' day, and later releases dropped it (its smddp column is False)"
        elif t.efa:
            why = "it has EFA for NCCL (its EFA column is True), but it is not on SMDDP's list (its smddp column)"
        else:
            why = "it is not on SMDDP's list (its smddp column is False)"
        expect(False, f"{name} does not run SMDDP: {why}.")
    missing = sorted(want - chosen)
    expect(not missing, f"{len(missing)} more of the candidates run SMDDP: look again at the P3 and P4 families.")
    return f"{', '.join(sorted(want))}: SMDDP's home; on anything else the lab's jobs use torchrun and NCCL."
