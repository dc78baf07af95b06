"""Each lab's real target for an event: the instance type its ``real_target`` (or ``smp_target``) parameter names,
how many instances a job holds, for how long, and why that type; the facilitator guide's costs, quotas and "the
cheapest" comparisons are computed from this table."""

from __future__ import annotations

from dataclasses import dataclass

from helpers.planning import instances

LIBRARIES = {"smddp": "SMDDP", "smp": "SMP v2"}  # instances' feature names, as the guide writes them


def listing(names) -> str:
    names = list(names)
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


@dataclass(frozen=True)
class RealTarget:
    lab: str  # "02"
    part: str  # what the job is
    instance_type: str
    count: int  # instances an attendee holds at once (lab 05: its three jobs, counted as if they ran together)
    minutes: int  # a planning figure: the job's expected training time at full size
    spot: bool = False
    launch: bool = True  # False: shown as a dry run unless the account has quota for it
    why: str = ""  # typed reasons only: a "cheapest" claim is computed (see why()), never typed here
    parameter: str = "real_target"  # the lab parameter that holds instance_type
    library: str = ""  # "smddp" or "smp": the library the job needs, which narrows "the same need"


TARGETS = (
    RealTarget("01", "single-GPU fine-tune", "ml.g6.xlarge", 1, 20, why="one L4, with bf16"),
    RealTarget("02", "DDP, 2 nodes", "ml.g6.12xlarge", 2, 20, why="4 L4s a node: DDP inside and across nodes"),
    RealTarget(
        "03",
        "SMDDP AllReduce",
        "ml.p4d.24xlarge",
        2,
        20,
        launch=False,
        why=f"SMDDP runs only on {listing(instances.supporting('smddp'))}: a dry run unless the account has the quota",
        library="smddp",
    ),
    RealTarget("04", "FSDP / ZeRO / TP (torchrun)", "ml.g6.12xlarge", 1, 15, why="4 GPUs run every strategy"),
    RealTarget(
        "04",
        "SMP v2",
        "ml.p4d.24xlarge",
        1,
        15,
        launch=False,
        why=f"SMP v2 runs only on {listing(instances.supporting('smp'))}",
        parameter="smp_target",
        library="smp",
    ),
    RealTarget("05", "File, FastFile, FSx: 3 jobs", "ml.g6.xlarge", 3, 10, why="the input path, not the GPU"),
    RealTarget("06", "managed spot with checkpoints", "ml.g6.xlarge", 1, 30, spot=True, why="lab 01's GPU, on spot"),
    RealTarget("07", "profiled job + CloudWatch", "ml.g6.xlarge", 1, 15, why="one GPU shows the GEMM-bound profile"),
    RealTarget(
        "08",
        "2-node job with retries, health check, warm pool",
        "ml.g6.12xlarge",
        2,
        15,
        why="two nodes: a straggler and a health check need more than one instance",
    ),
)


def hourly(spec: instances.InstanceType) -> float:
    """On-demand $/h: the workshop plans with priced types only (``instances.cheapest`` picks among those)."""
    assert spec.price_per_hour is not None, f"{spec.name} has no price on file (helpers.planning.instances)"
    return spec.price_per_hour


def gpus_of(spec: instances.InstanceType) -> str:
    return f"{spec.gpus} × {spec.gpu.model}" if spec.gpu else spec.accelerators or "CPU"
