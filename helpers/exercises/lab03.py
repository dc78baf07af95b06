"""Lab 03's exercises: what SageMaker's torchrun launcher sets up across instances, and moving the SMDDP job to
P5, where SMDDP does not run."""

from __future__ import annotations

from helpers.exercises import exercise, expect

P5 = "ml.p5.48xlarge"


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


@exercise("03.2", "The SMDDP job, moved to P5", minutes=5)
def smddp_job_on_p5(my_distribution, my_backend, my_request):
    """The learner changes the SMDDP job so that two ml.p5.48xlarge run it; the request they built is read."""
    expect(
        my_distribution in ("smddp", "torchrun"),
        "the job's distribution is 'smddp' (SMDDP's mpirun launcher) or 'torchrun' (the core path's).",
    )
    expect(
        my_distribution != "smddp",
        f"{P5} does not run SMDDP (its smddp column in the table above is False; the cell under your answer printed "
        "the refusal, before anything was built): which launcher did the core path use?",
    )
    expect(my_backend in ("smddp", "nccl", "auto"), "the script's --backend is 'smddp', 'nccl' or 'auto'.")
    expect(
        my_backend != "smddp",
        "under torchrun the script would try to import SMDDP, fail (no current image has it), say so in its log and "
        "fall back to NCCL: ask for what will run, 'nccl' (or 'auto', which picks NCCL on GPUs).",
    )
    expect(my_request is not None, "no request was built: run the cell under your answer, then this one.")
    spec, hps = my_request["AlgorithmSpecification"], my_request["HyperParameters"]
    channels = [c["ChannelName"] for c in my_request["InputDataConfig"]]
    expect(
        my_request["ResourceConfig"]["InstanceType"] == P5 and hps.get("backend") == my_backend,
        f"the request below your answer is for another job ({my_request['ResourceConfig']['InstanceType']}, "
        f"--backend {hps.get('backend')}): run the cell under your answer again.",
    )
    expect(
        "sm_drivers" in channels and "sagemaker_distributed_dataparallel_enabled" not in hps,
        "that request still starts the job through the training toolkit's SMDDP runner: set my_distribution = "
        "'torchrun'.",
    )
    image = spec["TrainingImage"].rsplit("/", 1)[-1]
    count = my_request["ResourceConfig"]["InstanceCount"]
    return (
        f"{count} × {P5} under torchrun over NCCL (EFA on P5), image {image}: the script is the same file, with "
        "--backend changed, and the job's launcher with it. Lab 03's diff, backwards: the way off SMDDP."
    )
