"""Lab 03's exercises: the two-node job changed to two processes a node, its world and ranks predicted and read
from the run, with the types whose NCCL uses EFA; and moving the SMDDP job to P5, where SMDDP does not run."""

from __future__ import annotations

from course.exercises import exercise, expect

P5 = "ml.p5.48xlarge"


def _whole(value) -> int | None:
    """A count given as 16 or 16.0; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        return None
    return int(value)


@exercise("03.1", "Two nodes of two processes: the world and its ranks", minutes=6)
def launcher_sets_up(my_processes_per_host, world_size, first_rank_on_algo_2, efa_types, ran, driver_table):
    """The two-node job changed to two processes a node, the learner's prediction of its world size and of the RANK
    of algo-2's first process, checked against the run (``ran``: its status, what each node's torchrun was told and
    the world size rank 0 logged); and the instance types of the driver's table (its rows) whose NCCL uses EFA."""
    per_host = _whole(my_processes_per_host)
    expect(per_host is not None and per_host >= 1, "my_processes_per_host is a whole number of processes, 1 or more.")
    expect(
        per_host == 2, f"the task is two processes on each node, as an instance with two GPUs runs; you set {per_host}."
    )
    world, first = _whole(world_size), _whole(first_rank_on_algo_2)
    expect(world is not None and world > 0, "world_size is a whole number of processes.")
    expect(first is not None and first >= 0, "first_rank_on_algo_2 is a RANK: a whole number from 0.")
    expect(ran is not None, "no job ran: run the lab on a local target, then this cell again.")
    expect(ran["status"] == "Completed", f"your job did not complete ({ran['status']}): {ran['reason']}")
    told = f"algo-2's torchrun was told node_rank={ran['node_rank']}, nproc_per_node={ran['processes_per_host']}"
    expect(
        world != per_host,
        f"{per_host} is one node's processes. Each node runs its own torchrun, and the world counts the processes of "
        f"all {ran['instance_count']} nodes: your run's rank 0 logged world_size={ran['world_size']}.",
    )
    expect(world == ran["world_size"], f"your run's rank 0 logged world_size={ran['world_size']}; you wrote {world}.")
    expect(
        first != 0,
        "RANK 0 is algo-1's first process: RANK counts across the whole job; LOCAL_RANK is the one that starts again "
        f"at 0 on every node ({told}).",
    )
    expect(
        first == ran["first_rank_on_algo_2"],
        f"RANK = node rank x processes per node + LOCAL_RANK, and {told}: its first process is RANK "
        f"{ran['first_rank_on_algo_2']}; you wrote {first}.",
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
        f"{ran['world_size']} processes, and algo-2's first is RANK {ran['first_rank_on_algo_2']}, as your run's "
        f"torchruns were told. On two {P5} (8 GPUs each) the same rule gives 16 and RANK 8. NCCL goes over EFA on "
        f"{', '.join(sorted(want))}: the driver's list decides, not the hardware; check the log for "
        "'NET/OFI Selected Provider is efa'."
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
