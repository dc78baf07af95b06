"""A scaling planner for data-parallel training: how long, how efficient and how expensive on 1, 2, 4... instances.

A model with every input shown: from a measured one-GPU step compute time, the gradient size and the interconnect,
it predicts a ring all-reduce, the part backward does not hide, the step time (weak scaling), time to train and
on-demand cost. It ignores data-loading stalls, stragglers, contention and a larger batch's extra epochs.
:func:`speedup_breakdown` explains a measured local run (lab 02).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from helpers.planning import instances

GB = 1e9


@dataclass(frozen=True)
class Link:
    """One kind of link between GPUs: nominal bandwidth per GPU (intra-node) or per instance (network), per
    direction, in GB/s."""

    name: str
    gbytes_per_s: float
    source: str


# A GPU's own figures (its link to the others inside an instance, its dense tensor-core peak and the precision of that
# peak) are on its catalogue record, helpers.planning.instances.Gpu. The planner carries a step time measured on one
# GPU over to another by the ratio of their datasheet peaks, so every figure is of one kind; labs/src/train.py's MFU
# table (MEASURED_PEAK_TFLOPS) is a different thing: its H100 denominator is the measured matmul ceiling.


@dataclass(frozen=True)
class MeasuredStep:
    """A step time measured on one GPU: the planner's compute input when no measurement of your own is at hand."""

    gpu: str
    per_gpu_batch: int
    samples_per_s: float
    what: str
    source: str

    @property
    def step_s(self) -> float:
        return self.per_gpu_batch / self.samples_per_s


# DistilBERT-base shape (6 layers, dim 768, vocab 30522), 128 tokens, 64 labels; a plain loop, no compile
REFERENCE_STEP = MeasuredStep(
    "H100",
    64,
    3375.0,
    "DistilBERT-base shape, seq 128, bf16 autocast, fused AdamW",
    "the workshop's reference H100, 2026-11-22 (REFERENCE sheet)",
)
# distilbert-base with a 30,522-token vocabulary and a 44-way head: fp32 gradients, as DDP all-reduces them
DISTILBERT_BASE_PARAMS = 66_987_308


def local_gpu_model() -> str | None:
    """The first local GPU as a catalogue GPU model ("A100"...), or None (no GPU, or one not on file)."""
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return None
    try:
        name = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        ).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    models = sorted({gpu.model for gpu in instances.GPUS}, key=len, reverse=True)  # "L40S" before "L4"
    return next((model for model in models if model in name), None)


def step_label(instance_type: str) -> str:
    """Which GPU, and in which precision a step carried over to it runs: "ml.p3.16xlarge (V100, fp16)"."""
    spec = instances.lookup(instance_type)
    if spec.gpu is None:
        raise ValueError(f"{instance_type} has no GPU: a GPU step carries over only to a GPU instance type")
    return f"{instance_type} ({spec.gpu.model}, {spec.gpu.peak_precision})"


def estimate_step_s(gpu: str, per_gpu_batch: int, measured: MeasuredStep = REFERENCE_STEP) -> float:
    """A step time for ``gpu`` (a model, "A100") carried over from ``measured`` by the ratio of dense tensor peaks and
    of batch sizes, in the GPU's ``peak_precision`` (fp16 mixed precision on a V100): a rough stand-in for your own
    measurement (launch-bound small batches scale worse than this says)."""
    peaks = instances.gpu_model(measured.gpu).peak_tflops / instances.gpu_model(gpu).peak_tflops
    return measured.step_s * peaks * (per_gpu_batch / measured.per_gpu_batch)


@dataclass(frozen=True)
class ClusterAssumptions:
    """The model's knobs, all visible. Defaults are typical, not measured on your cluster."""

    link_efficiency: float = 0.8  # fraction of nominal bandwidth a ring all-reduce reaches (NCCL busbw / link)
    overlap: float = 1.0  # fraction of the backward pass that can hide all-reduce (0: none, as without DDP buckets)
    backward_share: float = 2 / 3  # backward is about twice the forward's FLOPs: 2/3 of the compute step
    bucket_bytes: int = 25 * 2**20  # DDP's default gradient bucket (bucket_cap_mb=25)
    intra_latency_s: float = 3e-6  # per ring hop inside an instance (order of magnitude)
    inter_latency_s: float = 10e-6  # per ring hop across the network (order of magnitude)
    overhead_s: float = 600.0  # per job: image pull, data download, start-up; billed, not scaled

    def __post_init__(self):
        if not 0 < self.link_efficiency <= 1:
            raise ValueError("link_efficiency must be in (0, 1]")
        if not 0 <= self.overlap <= 1 or not 0 <= self.backward_share <= 1:
            raise ValueError("overlap and backward_share must be in [0, 1]")
        if self.bucket_bytes <= 0 or self.overhead_s < 0:
            raise ValueError("bucket_bytes must be positive and overhead_s not negative")


@dataclass(frozen=True)
class Workload:
    """What is being trained, as the planner sees it."""

    samples_per_epoch: int
    per_gpu_batch: int
    step_compute_s: float  # one GPU, one step of per_gpu_batch: forward + backward + optimizer, no communication
    grad_bytes: int  # bytes all-reduced per step (fp32 gradients: 4 x parameters)
    epochs: float = 1.0
    source: str = ""  # where step_compute_s came from

    def __post_init__(self):
        if self.samples_per_epoch <= 0 or self.per_gpu_batch <= 0 or self.epochs <= 0:
            raise ValueError("samples_per_epoch, per_gpu_batch and epochs must be positive")
        if self.step_compute_s <= 0 or self.grad_bytes <= 0:
            raise ValueError("step_compute_s and grad_bytes must be positive (measure a step first)")


def ring_allreduce_s(nbytes: float, ranks: int, gbytes_per_s: float, hop_latency_s: float = 0.0) -> float:
    """Ring all-reduce: each rank sends (and receives) 2(N-1)/N x nbytes, in 2(N-1) hops."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * nbytes / (gbytes_per_s * GB) + 2 * (ranks - 1) * hop_latency_s


def links(instance_type: str) -> tuple[Link, Link]:
    """(inside one instance, between instances) for a catalogue instance type."""
    t = instances.lookup(instance_type)
    if not t.gpu:
        raise ValueError(f"{instance_type} has no GPUs: the planner models GPU data parallelism")
    # "EFA" only where SageMaker's drivers turn it on for NCCL (instances.SAGEMAKER_EFA_NCCL); elsewhere NCCL uses
    # TCP sockets over the ordinary network, whatever EFA hardware EC2 lists for the type
    how = "EFA, enabled for NCCL by SageMaker's drivers" if t.efa else "no EFA for NCCL in SageMaker training"
    inter = Link(
        "EFA" if t.efa else "ENA network",
        t.network_gbps / 8,
        f"helpers.planning.instances: {t.name} network {t.network_gbps:g} Gb/s ({how})",
    )
    intra = Link(t.gpu.link, t.gpu.link_gbytes_per_s, t.gpu.link_source)
    return intra, inter


def allreduce_s(
    grad_bytes: float,
    gpus_per_node: int,
    nodes: int,
    intra: Link,
    inter: Link,
    a: ClusterAssumptions = ClusterAssumptions(),
) -> float:
    """One step's gradient all-reduce across ``nodes`` instances of ``gpus_per_node`` GPUs."""
    buckets = math.ceil(grad_bytes / a.bucket_bytes)
    local = ring_allreduce_s(
        grad_bytes, gpus_per_node, intra.gbytes_per_s * a.link_efficiency, a.intra_latency_s * buckets
    )
    if nodes == 1:
        return local
    # a ring that spans instances crosses every instance's network once each way: each instance's network carries
    # 2(N-1)/N of the gradients, while the faster links inside carry theirs at the same time; the slower sets the pace
    ranks = gpus_per_node * nodes
    network = ring_allreduce_s(grad_bytes, ranks, inter.gbytes_per_s * a.link_efficiency, a.inter_latency_s * buckets)
    return max(network, local)


def exposed_s(
    compute_s: float, comm_s: float, grad_bytes: float, a: ClusterAssumptions = ClusterAssumptions()
) -> float:
    """The communication the step waits for: what backward cannot hide, and at least the last bucket."""
    if comm_s <= 0:
        return 0.0
    last_bucket = comm_s * min(1.0, a.bucket_bytes / grad_bytes)
    return max(comm_s - a.overlap * a.backward_share * compute_s, last_bucket)


@dataclass(frozen=True)
class Prediction:
    instance_type: str
    instances: int
    gpus: int
    global_batch: int
    compute_s: float
    allreduce_s: float
    exposed_s: float
    step_s: float
    efficiency: float  # compute / step: 1.0 is linear scaling
    speedup: float  # against one GPU of the same type
    epoch_h: float
    train_h: float  # epochs x epoch time + the per-job overhead
    usd: float | None  # all instances, on-demand; None where the catalogue has no price

    def row(self) -> dict:
        row = asdict(self)
        for key in ("compute_s", "allreduce_s", "exposed_s", "step_s"):
            row[key.replace("_s", "_ms")] = round(row.pop(key) * 1e3, 2)
        return row


def predict(
    work: Workload,
    instance_type: str,
    instance_count: int,
    a: ClusterAssumptions = ClusterAssumptions(),
    gpus_per_instance: int | None = None,
) -> Prediction:
    """One configuration: ``instance_count`` x ``instance_type`` with one process per GPU."""
    t = instances.lookup(instance_type)
    intra, inter = links(instance_type)
    g = gpus_per_instance or t.gpus
    if instance_count < 1 or not 1 <= g <= t.gpus:
        raise ValueError(f"instance_count must be >= 1 and GPUs per instance 1..{t.gpus} on {t.name}")
    gpus = g * instance_count
    comm = allreduce_s(work.grad_bytes, g, instance_count, intra, inter, a)
    exposed = exposed_s(work.step_compute_s, comm, work.grad_bytes, a)
    step = work.step_compute_s + exposed
    steps_per_epoch = math.ceil(work.samples_per_epoch / (work.per_gpu_batch * gpus))
    epoch_s = steps_per_epoch * step
    train_s = work.epochs * epoch_s + a.overhead_s
    one_gpu_s = math.ceil(work.samples_per_epoch / work.per_gpu_batch) * work.step_compute_s
    usd = None if t.price_per_hour is None else instance_count * t.price_per_hour * train_s / 3600
    return Prediction(
        t.name,
        instance_count,
        gpus,
        work.per_gpu_batch * gpus,
        work.step_compute_s,
        comm,
        exposed,
        step,
        work.step_compute_s / step,
        one_gpu_s / epoch_s,
        epoch_s / 3600,
        train_s / 3600,
        usd,
    )


def plan(
    work: Workload, instance_type: str, counts=(1, 2, 4, 8, 16), a: ClusterAssumptions = ClusterAssumptions()
) -> list[Prediction]:
    """Predictions for 1...N instances of one type."""
    return [predict(work, instance_type, n, a) for n in counts]


# ------------------------------------------------------------------------------------------------ case studies
@dataclass(frozen=True)
class CaseStudy:
    """A published scaling figure, as the source states it, and the efficiency it implies (speedup per added GPU)."""

    name: str
    gpus: int
    baseline_gpus: int
    speedup: float
    published: str
    caveat: str
    source: str
    instance_type: str = ""
    lower_bound: bool = False  # the source says "more than": the speedup is at least this

    @property
    def efficiency(self) -> float:
        return self.speedup * self.baseline_gpus / self.gpus


CASE_STUDIES = [
    CaseStudy(
        "Hyundai (segmentation, SMDDP)",
        64,
        1,
        0.93 * 64,
        "up to 93% scaling efficiency on 8 instances, 64 GPUs",
        "their model and data, not DistilBERT; efficiency as published, speedup derived from it",
        "AWS Korea blog: 현대자동차, Amazon SageMaker 기반 자율 주행 기계 학습 모델의 학습 시간 단축 사례",
        "ml.p3.16xlarge",
    ),
    CaseStudy(
        "Kakao Style (DistilBERT, SMDDP)",
        16,
        1,
        15 * 24 / 30,
        "more than 15 days on 1 V100 -> 30 h on 16 V100s",
        "'more than 15 days': 12x is a lower bound; 2 x ml.p3.16xlarge",
        "AWS Korea tech blog: 카카오스타일의 Amazon SageMaker 분산 훈련을 활용한 카테고리 자동 분류 시스템 모델 구축 사례",  # noqa: E501
        "ml.p3.16xlarge",
        lower_bound=True,
    ),
    CaseStudy(
        "KT (ViT distillation, SMDDP)",
        32,
        2,
        3.20 / 0.11,
        "29x faster: 3.20 h/epoch on 2 A100s -> 0.11 h on 32",
        "also bf16, a larger batch and data-loader fixes: not scaling alone (above 1.0 per GPU)",
        "AWS Japan blog: Amazon SageMakerを使用してビジョントランスフォーマーモデルのトレーニング時間を短縮するKTの取り組み",  # noqa: E501
        "ml.p4d.24xlarge",
    ),
]


def case_study_table() -> list[dict]:
    return [
        {
            "case": c.name,
            "published": c.published,
            "GPUs": c.gpus,
            "vs GPUs": c.baseline_gpus,
            "speedup": round(c.speedup, 1),
            "per-GPU efficiency": round(c.efficiency, 2),
            "bound": "at least" if c.lower_bound else "",
            "caveat": c.caveat,
        }
        for c in CASE_STUDIES
    ]


# ------------------------------------------------------------------------------------------------ measured here
# a step of train.py --step_breakdown, as its [final] line splits it (rank 0's thread): the label and the metric
STEP_PARTS = {
    "input": "data_wait_ms",
    "computing": "on_core_ms",
    "queued for a core": "queued_ms",
    "blocked": "blocked_ms",
}


def cores_used(monitor) -> dict[str, float]:
    """Cores a local job's processes kept busy while it trained, and cores every other process did meanwhile on the
    job's own cores (another lab's stream on other cores is not in its way): a
    :class:`helpers.local.monitor.Monitor`'s training window (its whole run when it has none)."""
    s = monitor.summary("training" if "training" in monitor.windows else None)
    return {"job": s["job_cores"], "other work": max(0.0, s["own_cpu_pct"] / 100 * s["own_cores"] - s["job_cores"])}


def speedup_breakdown(
    one: dict, many: dict, ranks: int, cores: int, device: str, used_one: dict, used_many: dict
) -> tuple[str, dict]:
    """What held a local DDP run's speed-up back: a sentence template and the figures it is formatted from
    (``report.says(template, **figures)``).

    ``one`` and ``many`` are the ``[final]`` metrics of the 1-process and ``ranks``-process runs with
    ``--step_breakdown``; ``used_*`` what :func:`cores_used` measured during each. It names the cores when rank 0
    queued for one in 15% or more of its step; otherwise the largest of blocked time, input, or computing that did
    not halve with half the batch.
    """
    ceiling = min(ranks, cores) if device == "cpu" else ranks
    rest = {
        "blocked": many["blocked_ms"],
        "input": many["data_wait_ms"],
        "computing": many["on_core_ms"] - one["on_core_ms"] / ranks,
    }
    limit = "cores" if many["queued_ms"] >= 0.15 * many["step_ms"] else max(rest, key=lambda part: rest[part])
    why = {
        "cores": "the cores: other work kept {other_work_cores:.1f} of the {cpus} busy while the ranks trained, "
        "leaving the job {job_cores_ddp:.2f} cores against {job_cores_1:.2f} for one process, at most "
        "{ddp_speedup_cores_allow:.2f}x",
        "blocked": "the gradient all-reduce, and waiting for the slower rank",
        "input": "waiting for input",
        "computing": "computing that did not halve with half the batch",
    }[limit]
    # each rank computes 1/ranks of the batch: its time on a core should be about 1/ranks of one process's
    halved = many["on_core_ms"] <= 1.2 * one["on_core_ms"] / ranks
    computed = (
        "about 1/{ranks} of one process's {on_core_ms_1:.0f} ms, as it should"
        if halved
        else "where 1/{ranks} of one process's {on_core_ms_1:.0f} ms would be {on_core_share_1:.0f} ms"
    )
    template = (
        "{ranks} processes ran {ddp_speedup:.2f}x as fast as one, where {ddp_speedup_ceiling} {units} allow "
        f"{{ddp_speedup_ceiling}}x. What held it back here was {why}. Of each {{step_ms_ddp:.0f}} ms step, rank 0 "
        "spent {queued_ms_ddp:.0f} ms queued for a core and {blocked_ms_ddp:.0f} ms blocked, waiting for the other "
        f"rank and the all-reduce; it computed for {{on_core_ms_ddp:.0f}} ms, {computed}, and waited "
        "{data_wait_ms_ddp:.0f} ms for input. With a free core for each rank, these computing and input times allow "
        "{ddp_speedup_compute:.2f}x, less the all-reduce."
    )
    figures = {
        "ranks": ranks,
        "ddp_speedup": many["samples_per_sec"] / one["samples_per_sec"],
        "ddp_speedup_ceiling": ceiling,
        "units": "cores" if device == "cpu" else "GPUs",
        "cpus": cores,
        "ddp_limit": limit,
        "other_work_cores": used_many["other work"],
        "job_cores_1": used_one["job"],
        "job_cores_ddp": used_many["job"],
        "ddp_speedup_cores_allow": used_many["job"] / used_one["job"],
        "ddp_speedup_compute": (one["on_core_ms"] + one["data_wait_ms"]) / (many["on_core_ms"] + many["data_wait_ms"]),
        "on_core_share_1": one["on_core_ms"] / ranks,
        "computing_halved": halved,
        **{f"{key}_1": one[key] for key in ("step_ms", *STEP_PARTS.values())},
        **{f"{key}_ddp": many[key] for key in ("step_ms", *STEP_PARTS.values())},
    }
    return template, figures
