"""The workshop's labs, in order, one entry each: everything the course knows of a lab beyond its notebook.

A lab's entry holds what its prose says its run shows (``claims``: the lab runner checks every run against them), what
its real jobs' requests carry (``requests``: checked on its offline dry run), its real targets for an event, its
measured footprint on the Studio space and its sections in the short agendas. A new lab starts here
(docs/extending.md); ``tests/test_registries.py`` names what an entry lacks.
"""

from __future__ import annotations

import json
import re

from course.exercises.lab07 import AS_FAST, TARGET_SPEEDUP
from course.lab import Lab, LabError, Margin, RealTarget, exact
from helpers.planning import instances

DRY_RUN_ATTENDEE = "ci"  # the attendee the dry runs run as (tests/test_notebooks_dry_run.py)
_DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker"  # the newest patched DLC
_BUCKET = "sagemaker-us-east-1-111122223333"  # the offline placeholder account's default bucket

# peak_mb and processes: each lab in smoke size on the 2-core (2 physical cores, no SMT) machine the tests run on,
# 2026-11-25, sampled every 0.2 s: the peak PSS of the lab runner's processes (runner, kernel, launcher, training
# processes, SeaweedFS), and the training processes a lab runs at once (labs 02 and 04: torchrun with 2 ranks; lab 05:
# the store beside the reader; lab 07: the trainer beside its data-loader workers). Busy cores peaked at 1.9 of 2
# (labs 01, 05 and 07). infra/workshop_account.py sizes the spaces from them.


def listing(names) -> str:
    names = list(names)
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


def channel_modes(request: dict) -> dict[str, str]:
    """A CreateTrainingJob request's input mode per channel."""
    return {c["ChannelName"]: c.get("InputMode", "File") for c in request.get("InputDataConfig", [])}


def _by_launcher(requests: list[dict], launcher: str) -> dict:
    found = [one for one in requests if one["launcher"] == launcher]
    assert found, f"no {launcher} job among {[one['lab_job'] for one in requests]}"
    return found[0]


def _half(part: float, whole: float, tolerance: float = 0.01) -> bool:
    return abs(part / whole - 0.5) <= tolerance


# ---------------------------------------------------------------------------------------------- lab 01
def _requests_01(requests: list[dict]) -> None:
    jobs = {saved["lab_job"]: saved for saved in requests}
    assert set(jobs) == {"lab01-single", "lab01-fast"}
    one, fast = jobs["lab01-single"], jobs["lab01-fast"]
    # the fast path: every switch on, on one GPU (single-device speed, not scaling)
    assert fast["world_size"] == 1 and {
        k: fast["request"]["HyperParameters"].get(k)
        for k in ("precision", "fused_adamw", "compile", "bucket_by_length")
    } == {"precision": "bf16", "fused_adamw": "true", "compile": "true", "bucket_by_length": "true"}
    r = one["request"]
    assert one["lab_job"] == "lab01-single"
    assert r["AlgorithmSpecification"]["TrainingImage"] == _DLC
    # one device, however many the instance has: scaling out is lab 02's subject
    assert one["launcher"] == "script" and one["world_size"] == 1
    assert channel_modes(r) == {"train": "File", "validation": "File", "code": "File", "sm_drivers": "File"}
    assert r["HyperParameters"]["model_size"] == "base"  # a GPU target gets the DistilBERT-base shape
    assert r["HyperParameters"]["subset"] == "9000"  # smoke size: the debug slice
    assert not {"EnableManagedSpotTraining", "CheckpointConfig", "VpcConfig"} & set(r)


_LAB_01 = Lab(
    "01_single_gpu",
    claims={
        "at every size the notebook ships, the network beats the baseline by at least 2 points of macro-F1": lambda f: (
            f["macro_f1_margin_points"] >= 2 and f["verdict"] == "beats"
        ),
        "the baseline is weakest on the titles whose modifier names a second product": lambda f: (
            f["baseline_slice_accuracy"] < f["baseline_other_accuracy"]
        ),
        "the network is right on more of those titles": lambda f: (
            f["network_slice_accuracy"] > f["baseline_slice_accuracy"]
        ),
        "the model read back from the job's model directory scores what the job measured": lambda f: (
            abs(f["saved_model_macro_f1"] - f["val_macro_f1"]) < 0.005
        ),
        "padding shows on a CPU: the tiny model with dynamic padding and length buckets runs far faster than padded "
        "to 128": Margin("fast_path_speedup", at_least=2),
    },
    requests=_requests_01,
    targets=(RealTarget("01", "single-GPU fine-tune", "ml.g6.xlarge", 1, 20, why="one L4, with bf16"),),
    peak_mb=833,
    processes=1,
    slides=("The training script", "What came out"),
)


# ---------------------------------------------------------------------------------------------- lab 02
def _requests_02(requests: list[dict]) -> None:
    (one,) = requests
    r = one["request"]
    assert one["lab_job"] == "lab02-ddp" and one["launcher"] == "torchrun"
    assert r["ResourceConfig"]["InstanceCount"] == 2 and one["world_size"] == 16  # 2 x 8 A100s, one process each
    assert r["AlgorithmSpecification"]["TrainingImage"] == _DLC
    assert int(r["HyperParameters"]["batch_size"]) == 64 * one["world_size"]  # the global batch: 64 per GPU
    assert r["StoppingCondition"]["MaxRuntimeInSeconds"] == 3600 and one["max_usd"] <= 60  # the lab's budget
    assert channel_modes(r) == {"train": "File", "validation": "File", "code": "File", "sm_drivers": "File"}


_LAB_02 = Lab(
    "02_ddp",
    claims={
        "the model learns: validation accuracy well above always answering the most common category": lambda f: (
            f["val_accuracy"] >= 2 * f["chance_accuracy"]
        ),
        # the smoke size's 64 steps; a longer run amplifies the last-bit differences of the summation order (the prose)
        "in the smoke size two processes train exactly like one (the loss gap reads 0)": lambda f: (
            f["steps"] > 64 or f["max_loss_gap"] < 1e-3
        ),
        "one process has no rank to wait for: its blocked time stays small": Margin(
            "blocked_share_1", at_most=0.1, of=lambda f: f["blocked_ms_1"] / f["step_ms_1"]
        ),
        "input, computing, queued and blocked make up the step": exact(
            lambda f: (
                abs(
                    f["data_wait_ms_ddp"]
                    + f["on_core_ms_ddp"]
                    + f["queued_ms_ddp"]
                    + f["blocked_ms_ddp"]
                    - f["step_ms_ddp"]
                )
                <= 0.02 * f["step_ms_ddp"]
            )
        ),
        "the two ran in turn, in pairs, and the tables read the first pair": exact(
            lambda f: f["pairs"] >= 2 and f["ddp_speedup_first"] == f["ddp_vs_1"] == f.get("ddp_speedup", f["ddp_vs_1"])
        ),
        "every pair's ratio lies in the range the sentence gives": exact(
            lambda f: (
                f["ddp_speedup_low"] <= f["ddp_speedup_middle"] <= f["ddp_speedup_high"]
                and f["ddp_speedup_low"] <= f["ddp_speedup_first"] <= f["ddp_speedup_high"]
            )
        ),
    },
    cores=2,
    cores_why="a core per rank, as each rank has a GPU of its own",
    budget_claims={
        "given a core each, two processes train near twice as fast as one (the pairs' middle: 1.3x or more)": Margin(
            "ddp_speedup_middle", at_least=1.3
        ),
    },
    requests=_requests_02,
    targets=(
        RealTarget("02", "DDP, 2 nodes", "ml.g6.12xlarge", 2, 20, why="4 L4s a node: DDP inside and across nodes"),
    ),
    peak_mb=1216,
    processes=2,
    trim=("The same job, as SageMaker would get it", "Clean up", "Next"),
)


# ---------------------------------------------------------------------------------------------- lab 03
def _requests_03(requests: list[dict]) -> None:
    smddp = _by_launcher(requests, "smddp")
    r, hps = smddp["request"], smddp["request"]["HyperParameters"]
    # SMDDP AllReduce: the image's training toolkit launches mpirun, so no SDK driver and no code channel
    assert r["AlgorithmSpecification"]["TrainingImage"].endswith("/pytorch-training:2.3.0-gpu-py311")
    assert "ContainerEntrypoint" not in r["AlgorithmSpecification"]
    assert hps["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert json.loads(hps["sagemaker_program"]) == "train.py"
    assert json.loads(hps["sagemaker_submit_directory"]).endswith("/sourcedir.tar.gz")
    assert json.loads(hps["backend"]) == "smddp"
    assert set(channel_modes(r)) == {"train", "validation"}


_LAB_03 = Lab(
    "03_smddp",
    claims={
        "SMDDP's last image is past its end of patch": lambda f: f["smddp_frozen"] is True,
        "the local job is two nodes of one process each": lambda f: (
            f["local_world_size"] == 2 and f["local_hosts"] == 2
        ),
        "the run here printed no NCCL line: its backend is gloo (its log's [setup] line)": lambda f: (
            f["local_backend"] == "gloo" and f["local_log_world"] == 2 and f["local_nccl_lines"] == 0
        ),
        "the same job on SageMaker runs a process per GPU on every instance": lambda f: (
            f["request_world_size"] == f["request_gpus"]
        ),
        "the request carries NCCL_DEBUG=INFO": lambda f: json.loads(f["request_environment"]) == {"NCCL_DEBUG": "INFO"},
        "preflight's note names the log line that shows EFA": lambda f: f["request_notes_efa_log"] is True,
        "the SDK's driver sets FI_PROVIDER=efa exactly where the catalogue says EFA": lambda f: (
            f["driver_efa_types"] == f["catalogue_efa_types"]
        ),
    },
    requests=_requests_03,
    targets=(
        RealTarget(
            "03",
            "SMDDP AllReduce",
            "ml.p4d.24xlarge",
            2,
            20,
            launch=False,
            why=f"SMDDP runs only on {listing(instances.supporting('smddp'))}: "
            "a dry run unless the account has the quota",
            library="smddp",
        ),
    ),
    peak_mb=1014,
    processes=1,
)


# ---------------------------------------------------------------------------------------------- lab 04
def _requests_04(requests: list[dict]) -> None:
    smp = _by_launcher(requests, "smp")
    r = smp["request"]
    assert "/smdistributed-modelparallel:" in r["AlgorithmSpecification"]["TrainingImage"]
    degrees = json.loads(r["HyperParameters"]["mp_parameters"])
    tp, shard = degrees.get("tensor_parallel_degree") or 1, degrees["hybrid_shard_degree"]
    assert smp["world_size"] % tp == 0 and (smp["world_size"] // tp) % shard == 0


_LAB_04 = Lab(
    "04_model_parallel",
    claims={
        "every strategy follows the single-process loss to within floating-point summation order": lambda f: (
            f["max_loss_gap"] < 1e-4
        ),
        "FSDP halves parameters, gradients and optimizer state": lambda f: (
            _half(f["fsdp_param_mb"], f["single_param_mb"]) and _half(f["fsdp_optimizer_mb"], f["single_optimizer_mb"])
        ),
        "ZeRO-1 halves only the optimizer state": lambda f: (
            f["zero_param_mb"] == f["single_param_mb"] and _half(f["zero_optimizer_mb"], f["single_optimizer_mb"])
        ),
        "TP sits in between (embeddings and LM head stay whole)": lambda f: (
            f["single_param_mb"] / 2 < f["tp_param_mb"] < f["single_param_mb"]
        ),
        "PP halves parameters and optimizer state": lambda f: (
            _half(f["pp_param_mb"], f["single_param_mb"]) and _half(f["pp_optimizer_mb"], f["single_optimizer_mb"])
        ),
        "every data-parallel strategy halves activations": lambda f: all(
            _half(f[f"{s}_activation_mb"], f["single_activation_mb"]) for s in ("ddp", "zero", "fsdp")
        ),
        "the planner agrees with the measurement to well under 1%": lambda f: f["planner_worst_error_pct"] < 1,
        "the reloaded model scores what the sharded one scored, to within summation order (a gap below 1e-6, "
        "recorded unrounded)": lambda f: f["checkpoint_gap"] < 1e-6,
    },
    requests=_requests_04,
    targets=(
        RealTarget(
            "04",
            "FSDP / ZeRO / TP (torchrun)",
            "ml.g6.12xlarge",
            1,
            15,
            why="4 GPUs run every strategy",
            need=dict(gpus=4, bf16=True),  # every strategy on several GPUs of one instance
        ),
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
            need=dict(gpus=8, bf16=True, feature="smp"),  # SMP v2 runs on its own list of types
        ),
    ),
    peak_mb=1224,
    processes=2,
)


# ---------------------------------------------------------------------------------------------- lab 05
def _requests_05(requests: list[dict]) -> None:
    data = {"train", "validation"}
    modes = [{n: m for n, m in channel_modes(one["request"]).items() if n in data} for one in requests]
    assert {"train": "File", "validation": "File"} in modes
    assert {"train": "FastFile", "validation": "FastFile"} in modes  # FastFile in the request, not silently File
    fsx = [one["request"] for one in requests if "VpcConfig" in one["request"]]
    assert fsx, "the FSx job runs in the file system's VPC"
    r = fsx[0]
    assert r["VpcConfig"]["Subnets"] and r["VpcConfig"]["SecurityGroupIds"]
    file_job = next(one["request"] for one in requests if channel_modes(one["request"]).get("train") == "File")
    uploaded = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in file_job["InputDataConfig"]}
    for c in r["InputDataConfig"]:
        if c["ChannelName"] in data:
            source = c["DataSource"]["FileSystemDataSource"]
            assert source["FileSystemType"] == "FSxLustre"
            # the file system is linked to the bucket's root: it shows s3://<bucket>/<key> as /<mount name>/<key>
            mount, key = source["DirectoryPath"].strip("/").split("/", 1)
            assert uploaded[c["ChannelName"]] == f"s3://{_BUCKET}/{key}/", "FSx mounts what the File job reads"


_LAB_05 = Lab(
    "05_input_modes",
    claims={
        "a job that reads a slice waits less for FastFile than for File": Margin(
            "file_over_fastfile_input_wait",
            at_least=2,
            of=lambda f: f["file_input_wait_s"] / f["fastfile_input_wait_s"],
        ),
        "FastFile fetches a fraction of the bytes": lambda f: f["fastfile_bytes_share"] < 0.5,
        "small data read for several epochs: File, which copies once, is faster than FastFile, which fetches every "
        "epoch again": Margin("small_data_epochs_ratio", at_least=2),
        "reading every shard with work on each batch, FastFile is no slower than File: it streams while the job "
        "works": Margin("fastfile_vs_file", at_most=1.0),
        "a sequence of jobs costs FSx less than File": Margin(
            "fsx_over_file_sequence", at_most=1.0, of=lambda f: f["fsx_sequence_s"] / f["file_sequence_s"]
        ),
        "a sequence of jobs fetches the data once for FSx, every job for FastFile": lambda f: (
            f["fsx_sequence_mb"] < f["fastfile_sequence_mb"] / 2
        ),
        "many small objects cost FastFile a request each: far slower than its shards": Margin(
            "fastfile_small_slowdown", at_least=5
        ),
        "random reads of many small objects are slowest on FastFile": Margin(
            "random_others_over_fastfile",
            at_least=2,
            of=lambda f: min(f["file_random_mb_per_s"], f["fsx_random_mb_per_s"]) / f["fastfile_random_mb_per_s"],
        ),
        "FastFile reads ahead within a shard read in order, and has nothing to read ahead in a small file": lambda f: (
            f["fastfile_shards_read_ahead_share"] > 0.5 and f["fastfile_small_read_ahead_share"] < 0.05
        ),
    },
    requests=_requests_05,
    targets=(
        RealTarget(
            "05",
            "File, FastFile, FSx: 3 jobs",
            "ml.g6.xlarge",
            3,
            10,
            why="the input path, not the GPU",
            need=dict(gpus=1, bf16=True),
        ),
    ),
    peak_mb=1023,
    processes=2,
)


# ---------------------------------------------------------------------------------------------- lab 06
def _requests_06(requests: list[dict]) -> None:
    spot = [one["request"] for one in requests if one["request"].get("EnableManagedSpotTraining")]
    assert spot, "the spot lab's job uses managed spot"
    r = spot[0]
    sc = r["StoppingCondition"]
    assert sc["MaxWaitTimeInSeconds"] >= sc["MaxRuntimeInSeconds"]  # the service rejects anything else
    # the checkpoint prefix outlives the job, one per launch, under the attendee's prefix
    assert (
        re.fullmatch(
            rf"s3://{_BUCKET}/{DRY_RUN_ATTENDEE}/checkpoints/lab06-spot/\d{{8}}-\d{{6}}/",
            r["CheckpointConfig"]["S3Uri"],
        )
        and r["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
    )


_LAB_06 = Lab(
    "06_spot_checkpoints",
    claims={
        "the interrupted-and-resumed run is bit-identical to the reference": lambda f: (
            f["bit_identical"] is True and f["max_abs_weight_diff"] == 0
        ),
        "every planned interruption interrupted, and each restart resumed": lambda f: (
            f["interruptions"] == f["planned_interruptions"] and f["launches"] == f["interruptions"] + 1
        ),
        "the accuracy is set against always answering the most common category of the rows the job scored": lambda f: (
            0 < f["majority_accuracy"] < 1
            and f["beat_majority"]
            == ("beat that" if f["reference_accuracy"] > f["majority_accuracy"] else "did not beat that")
        ),
        "at every size the model learns: well above always answering the most common category": lambda f: (
            f["reference_accuracy"] >= 2 * f["majority_accuracy"]
        ),
    },
    requests=_requests_06,
    targets=(
        RealTarget(
            "06",
            "managed spot with checkpoints",
            "ml.g6.xlarge",
            1,
            30,
            spot=True,
            why="lab 01's GPU, on spot",
            need=dict(gpus=1, bf16=True),
        ),
    ),
    peak_mb=611,
    processes=1,
)

# ---------------------------------------------------------------------------------------------- lab 07
_GAP = {  # the verdict's parts of the gap (helpers.local.bottleneck.GAP_PARTS) and the figures they are recorded as
    "waiting for data": "gap_data_wait_ms",
    "computing": "gap_on_core_ms",
    "queued for a core": "gap_queued_ms",
    "waiting for the device": "gap_device_wait_ms",
    "blocked": "gap_blocked_ms",
}


def _requests_07(requests: list[dict]) -> None:
    profiled = [one for one in requests if one["request"]["HyperParameters"].get("profile") == "true"]
    assert profiled, "the profiling lab's job turns the profiler on"
    r = profiled[0]["request"]
    # the trace goes where SageMaker collects TensorBoard files, and the job says where they land in S3
    assert r["HyperParameters"]["profile_dir"].startswith("/opt/ml/output/tensorboard")
    assert r["TensorBoardOutputConfig"]["LocalPath"] == "/opt/ml/output/tensorboard"
    assert r["TensorBoardOutputConfig"]["S3OutputPath"].startswith("s3://")


_LAB_07 = Lab(
    "07_profiling",
    claims={
        "both pipelines give exactly the same batches": lambda f: (
            abs(f["starved_val_loss"] - f["fixed_val_loss"]) < 1e-4
        ),
        "the starved run's workers delay its first batch": Margin(
            "first_batch_delay_s", at_least=0.1, of=lambda f: f["starved_first_batch_s"] - f["fixed_first_batch_s"]
        ),
        "the fixed run waits less for data, per step": Margin(
            "data_wait_ratio", at_least=10, of=lambda f: f["starved_data_wait_ms"] / f["fixed_data_wait_ms"]
        ),
        "the two ran in turn, in pairs, and the figures above are the first pair's": exact(
            lambda f: (
                f["pairs"] >= 2
                and f["pipeline_speedup_first"] == f["pipeline_speedup"]
                and f["pipeline_speedup_low"] <= f["pipeline_speedup_middle"] <= f["pipeline_speedup_high"]
            )
        ),
        "the fix's loop is faster in every pair": Margin("pipeline_speedup_low", at_least=2),
        "with its decoding ahead added to the loop, the fix is faster in every pair": Margin(
            "pipeline_speedup_end_to_end_low", at_least=1.3
        ),
        "the verdict names the loader: the starved run was waiting for data": lambda f: (
            f["pipeline_cause"] == "waiting for data" and f["pipeline_cause"] in f["pipeline_verdict"]
        ),
        "waiting for data is most of the step's gap": Margin(
            "gap_data_wait_share", at_least=0.5, of=lambda f: f["gap_data_wait_ms"] / f["step_gap_ms"]
        ),
        "the cause is the largest part of the step's gap, and the parts make up the gap": exact(
            lambda f: (
                f[_GAP[f["pipeline_cause"]]] == max(f[key] for key in _GAP.values())
                and abs(sum(f[key] for key in _GAP.values()) - f["step_gap_ms"]) <= 0.02 * abs(f["step_gap_ms"]) + 0.01
            )
        ),
        "the starved run's worker was busy while its trainer waited: in the monitor and in the profile": (
            Margin(
                "workers_over_trainer", at_least=2, of=lambda f: f["starved_workers_cores"] / f["starved_trainer_cores"]
            ),
            Margin(
                "profile_wait_ratio",
                at_least=10,
                of=lambda f: f["starved_profile_wait_ms"] / max(f["fixed_profile_wait_ms"], 0.01),
            ),
        ),
        "on a GPU the fp32 and bf16 runs were profiled; without one, the profile recorded on a GPU shows it waiting "
        "on the CPU: an attention call's CPU time over 100x its kernel's": exact(
            lambda f: (
                "bf16_speedup" in f
                if "attention_cpu_ms" not in f
                else 1e3 * f["attention_cpu_ms"] > 100 * f["attention_kernel_us"]
            )
        ),
    },
    cores=2,
    cores_why="the trainer's and its loader worker's, each a core of its own as on a GPU machine; its stand-in device "
    "keeps every lesson on one core too",
    exercise_margins={
        f"07.1: the reference answer's pairs reach the target for the job's cores ({TARGET_SPEEDUP}x from two, "
        f"{AS_FAST}x on one)": Margin("exercise_07_1_over_target", at_least=1.0),
    },
    requests=_requests_07,
    targets=(
        RealTarget(
            "07",
            "profiled job + CloudWatch",
            "ml.g6.xlarge",
            1,
            15,
            why="one bf16 GPU: the profiled job and its GPU time",
            need=dict(gpus=1, bf16=True),
        ),
    ),
    peak_mb=765,
    processes=2,
)


# ---------------------------------------------------------------------------------------------- lab 08
def _requests_08(requests: list[dict]) -> None:
    (one,) = requests
    r = one["request"]
    assert one["lab_job"] == "lab08-elastic" and one["launcher"] == "torchrun"
    assert r["ResourceConfig"]["InstanceCount"] == 2 and one["world_size"] == 2 * one["processes_per_host"]
    assert r["HyperParameters"]["global_batch"] == "256" and r["AlgorithmSpecification"]["TrainingImage"] == _DLC
    # SageMaker's job-level answers to a failure, in the request (ModelTrainer has no argument for the first two)
    assert r["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    assert r["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert r["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 1800
    assert "fault" not in r["HyperParameters"]  # the fault switch stays off on a real job


_LAB_08 = Lab(
    "08_failures_at_scale",
    claims={
        "the stall report names the stopped rank: rank 1, stopped, the other waits in the all-reduce": lambda f: (
            f["stop_stuck_rank"] == 1 and f["stop_stuck_state"] == "stopped" and f["stop_in_collective"] == [0]
        ),
        "the rank stopped mid-run": lambda f: 0 < f["stop_last_step"] < f["steps"],
        "py-spy read every rank, the stopped one in the fault switch (or could not attach and said so)": lambda f: (
            f["py_spy_attached"] is False or f["stop_stuck_frame"].startswith("before_collective (faults.py")
        ),
        "the stall report and py-spy came before the timeout, which ended the job with its error": (
            Margin("timeout_over_report", at_least=1.0, of=lambda f: f["stop_timeout_s"] / f["stop_report_s"]),
            Margin("timeout_over_pyspy", at_least=1.0, of=lambda f: f["stop_timeout_s"] / f["stop_pyspy_s"]),
            exact(  # gloo's timeout fires no sooner than it was set
                lambda f: (
                    f["stop_timeout_s"] >= f["dist_timeout_s"]
                    and "Timed out" in f["stop_timeout_error"]
                    and f["stop_report_before_timeout"] is True
                )
            ),
        ),
        "no rank is stopped in the skipped collective; the skipping rank waits in the end barrier, the other in the "
        "all-reduce": lambda f: (
            f["skip_any_stopped"] is False
            and f["skip_stuck_rank"] == 1
            and f["skip_stuck_frame"].startswith("leave (")
            and f["skip_collective_frame"].startswith("average_gradients (")
        ),
        "every drill left no process behind": lambda f: f["stop_processes_left"] == 0 == f["skip_processes_left"],
        "the straggler's compute grew by the delay, and the other rank's wait by as much": (
            Margin("slow_compute_added_share", at_least=0.8, of=lambda f: f["slow_compute_added_ms"] / f["delay_ms"]),
            Margin("fast_wait_added_share", at_least=0.6, of=lambda f: f["fast_wait_added_ms"] / f["delay_ms"]),
        ),
        "both ranks' steps take the slow rank's pace": (
            Margin(
                "step_pace_gap",
                at_most=0.15,
                of=lambda f: abs(f["fast_step_ms"] - f["slow_step_ms"]) / f["slow_step_ms"],
            ),
            Margin("fast_step_over_slow_compute", at_least=1.0, of=lambda f: f["fast_step_ms"] / f["slow_compute_ms"]),
        ),
        "a changed model and a world size that cannot keep the global batch are refused before launch": lambda f: (
            f["refused a changed model"] is True and f["refused three ranks"] is True
        ),
        "each resume started after its checkpoint's step, trained the same rows, reached the end; the one-rank "
        "checkpoint came later than the two-rank one": lambda f: (
            f["resume_first_step"] == f["resume_checkpoint_step"] + 1
            and f["regrow_first_step"] == f["regrow_checkpoint_step"] + 1
            and f["resume_checkpoint_step"] < f["regrow_checkpoint_step"] < f["steps"]
            and f["same_rows"] == "yes"
            and f["resume_last_step"] == f["steps"] == f["regrow_last_step"]
            and f["resume_steps_compared"] == f["steps"] - f["resume_checkpoint_step"]
            and f["regrow_steps_compared"] == f["steps"] - f["regrow_checkpoint_step"]
        ),
        "across world sizes each resumed curve follows the run its checkpoint came from "
        "within 1e-3 (recorded unrounded)": (lambda f: f["gap_2_to_1"] < 1e-3 and f["gap_1_to_2"] < 1e-3),
        "a rank crashed after the checkpoint, torchrun restarted the group once, it resumed at the checkpoint's step, "
        "redid the steps in between with the same losses and completed, leaving no process": lambda f: (
            0 < f["restart_checkpoint_step"] < f["restart_crash_step"] < f["steps"]
            and f["restart_count"] == 1
            and f["restart_resume_step"] == f["restart_checkpoint_step"]
            and f["restart_redone_n"] == f["restart_crash_step"] - f["restart_checkpoint_step"] - 1
            and f["restart_same"] == "yes"
            and f["restart_last_step"] == f["steps"]
            and f["restart_status"] == "Completed"
            and f["restart_processes_left"] == 0
        ),
        "the request carries RetryStrategy, InfraCheckConfig and a warm pool": lambda f: (
            f["retry"] == {"MaximumRetryAttempts": 2} and f["infra"] == {"EnableInfraCheck": True} and f["keep"] == 1800
        ),
    },
    requests=_requests_08,
    targets=(
        RealTarget(
            "08",
            "2-node job with retries, health check, warm pool",
            "ml.g6.12xlarge",
            2,
            15,
            why="two nodes: a straggler and a health check need more than one instance",
        ),
    ),
)

# Every lab of the workshop, in order: a notebook in labs/ that is not here fails the tests.
LABS = (_LAB_01, _LAB_02, _LAB_03, _LAB_04, _LAB_05, _LAB_06, _LAB_07, _LAB_08)


def registered(number: str) -> Lab:
    """The lab of this number ("05"), or a :class:`LabError` naming the labs there are."""
    for lab in LABS:
        if lab.number == number:
            return lab
    raise LabError(f"no lab {number!r}; the labs are {', '.join(lab.number for lab in LABS)}")
