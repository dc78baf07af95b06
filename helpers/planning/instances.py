"""The SageMaker training instance types the workshop knows: hardware, price and what each one supports.

``lookup("ml.p4d.24xlarge")`` returns an :class:`InstanceType`; an unknown name raises :class:`UnknownInstanceType`
with the closest known names. Nothing here calls AWS. Prices are on-demand USD per instance-hour for SageMaker
training in us-east-1, dated per entry with its source: re-check https://aws.amazon.com/sagemaker/pricing/ before a
large launch. A feature's sources are beside the entries.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from helpers.errors import TargetError

PRICE_REGION = "us-east-1"

# where each price came from; every entry names one of these
PRICE_LIST_2026_09 = (
    "2026-09-27",
    "AWS Price List API, AmazonSageMaker offer, us-east-1 on-demand (after the "
    "June 2025 P4/P5 price cut), as compiled in a public price table",
)
PRICE_PAGE_P3 = (
    "2024-06-01",
    "aws.amazon.com/sagemaker/pricing, Training, On-Demand, US East (N. Virginia); "
    "P3 is no longer in the 2026 offer tables",
)


# the SDK's SM_EFA_NCCL_INSTANCES (sagemaker/train/container_drivers/common/utils.py), copied so that nothing here
# imports the SDK; a test compares the two. Its torchrun and mpirun drivers set FI_PROVIDER=efa there and nowhere else,
# so a type EC2 lists with EFA hardware (G5, G6, G6e, p5en) counts as plain network (ENA) here
SAGEMAKER_EFA_NCCL = frozenset(
    {
        "ml.g4dn.8xlarge",
        "ml.g4dn.12xlarge",
        "ml.g5.48xlarge",
        "ml.p3dn.24xlarge",
        "ml.p4d.24xlarge",
        "ml.p4de.24xlarge",
        "ml.p5.48xlarge",
        "ml.p5e.48xlarge",
        "ml.trn1.32xlarge",
    }
)


class UnknownInstanceType(TargetError):
    """An ``ml.*`` name the catalogue does not know; the message suggests the closest ones."""


@dataclass(frozen=True)
class Gpu:
    """One GPU model as the planners need it, from NVIDIA's datasheets. A new GPU is one record here, every figure
    given (docs/extending.md); tests/test_registries.py plans every catalogue type with every planner."""

    model: str  # "A100"
    memory_gib: int  # per GPU
    architecture: str  # "Ampere"
    bf16: bool
    # dense tensor-core TFLOP/s, no sparsity: bf16, or fp16 mixed precision where the tensor cores have no bf16 (the
    # scaling planner carries a measured step to another GPU by the ratio of these, so every figure is of one kind)
    peak_tflops: float
    link: str  # GPU to GPU inside one instance: "NVLink 4 + NVSwitch", "PCIe Gen4 x16"
    link_gbytes_per_s: float  # per GPU and direction (NVLink totals are quoted bidirectional: halved here)
    link_source: str  # where the link's figure comes from (the peaks: NVIDIA's datasheet for the model)

    @property
    def peak_precision(self) -> str:
        """The precision :attr:`peak_tflops` is quoted in, and a step carried over to this GPU runs in."""
        return "bf16" if self.bf16 else "fp16"


_NVIDIA = "NVIDIA datasheet"
# (link, GB/s per GPU and direction, source): NVLink totals are quoted bidirectional, halved here
_PCIE3 = ("PCIe Gen3 x16", 16.0, "PCIe 3.0 x16: 15.75 GB/s per direction")
_NVLINK2 = ("NVLink 2", 150.0, f"{_NVIDIA} Tesla V100 SXM2: NVLink 300 GB/s bidirectional")
_NVLINK3 = ("NVLink 3 + NVSwitch", 300.0, f"{_NVIDIA} A100 SXM4: NVLink 600 GB/s bidirectional")
_NVLINK4_H100 = ("NVLink 4 + NVSwitch", 450.0, f"{_NVIDIA} H100 SXM5: NVLink 900 GB/s bidirectional")
_NVLINK4_H200 = ("NVLink 4 + NVSwitch", 450.0, f"{_NVIDIA} H200 SXM: NVLink 900 GB/s bidirectional")
_NVLINK5 = ("NVLink 5 + NVSwitch", 900.0, f"{_NVIDIA} HGX B200: NVLink 1.8 TB/s bidirectional")


def _pcie4(family: str) -> tuple[str, float, str]:
    return ("PCIe Gen4 x16", 32.0, f"PCIe 4.0 x16: 31.5 GB/s per direction; {family} has no NVLink")


T4 = Gpu("T4", 16, "Turing", False, 65.0, *_PCIE3)
V100_16 = Gpu("V100", 16, "Volta", False, 125.0, *_NVLINK2)
V100_32 = Gpu("V100", 32, "Volta", False, 125.0, *_NVLINK2)
A10G = Gpu("A10G", 24, "Ampere", True, 125.0, *_pcie4("G5"))
L4 = Gpu("L4", 24, "Ada Lovelace", True, 121.0, *_pcie4("G6"))
L40S = Gpu("L40S", 48, "Ada Lovelace", True, 362.0, *_pcie4("G6e"))
A100_40 = Gpu("A100", 40, "Ampere", True, 312.0, *_NVLINK3)
A100_80 = Gpu("A100", 80, "Ampere", True, 312.0, *_NVLINK3)
H100 = Gpu("H100", 80, "Hopper", True, 989.0, *_NVLINK4_H100)
H200 = Gpu("H200", 141, "Hopper", True, 989.0, *_NVLINK4_H200)
B200 = Gpu("B200", 180, "Blackwell", True, 2250.0, *_NVLINK5)  # HGX B200 at 1,000 W: 2.25 PFLOP/s dense bf16
GPUS = (T4, V100_16, V100_32, A10G, L4, L40S, A100_40, A100_80, H100, H200, B200)


def gpu_model(model: str) -> Gpu:
    """A GPU by its model name ("A100"): the figures the planners use are the same for each memory size."""
    for gpu in GPUS:
        if gpu.model == model:
            return gpu
    known = ", ".join(dict.fromkeys(g.model for g in GPUS))
    raise ValueError(f"no GPU {model!r} on file, so no peak TFLOP/s or link figures for it; known: {known}")


@dataclass(frozen=True)
class InstanceType:
    """One SageMaker instance type. ``gpus`` is 0 on CPU types and on Trainium (see ``accelerators``)."""

    name: str
    vcpus: int
    memory_gib: int
    gpus: int = 0
    gpu: Gpu | None = None
    network_gbps: float = 10.0  # the type's peak network bandwidth ("up to" figures count as that figure)
    price_per_hour: float | None = None  # on-demand USD, us-east-1, SageMaker training
    price: tuple[str, str] = PRICE_LIST_2026_09  # (as of, source)
    accelerators: str = ""  # non-GPU accelerators, e.g. "16 x Trainium"
    features: frozenset[str] = field(default_factory=frozenset)  # "smddp", "smp"

    @property
    def family(self) -> str:
        return self.name.split(".")[1]

    @property
    def efa(self) -> bool:
        """SageMaker training turns the Elastic Fabric Adapter on for NCCL here (:data:`SAGEMAKER_EFA_NCCL`): the
        fast inter-node path; elsewhere NCCL talks over the ordinary network."""
        return self.name in SAGEMAKER_EFA_NCCL

    @property
    def gpu_memory_gib(self) -> int:
        """Total GPU memory of the instance."""
        return self.gpus * (self.gpu.memory_gib if self.gpu else 0)

    @property
    def bf16(self) -> bool:
        return bool(self.gpu and self.gpu.bf16)

    @property
    def price_as_of(self) -> str:
        return self.price[0]

    @property
    def price_source(self) -> str:
        return self.price[1]

    def supports(self, feature: str) -> bool:
        """``"smddp"``, ``"smp"``, ``"bf16"``, ``"efa"`` or ``"gpu"``."""
        if feature == "bf16":
            return self.bf16
        if feature == "efa":
            return self.efa
        if feature == "gpu":
            return self.gpus > 0
        return feature in self.features

    def describe(self) -> str:
        """``ml.p4d.24xlarge: 8 x A100 40 GiB, 96 vCPU, 1152 GiB, 400 Gb/s EFA, $25.25/h``"""
        hw = f"{self.gpus} x {self.gpu.model} {self.gpu.memory_gib} GiB" if self.gpu else (self.accelerators or "CPU")
        net = f"{self.network_gbps:g} Gb/s" + (" EFA" if self.efa else "")
        price = f"${self.price_per_hour:,.2f}/h" if self.price_per_hour is not None else "no price on file"
        return f"{self.name}: {hw}, {self.vcpus} vCPU, {self.memory_gib} GiB, {net}, {price}"


def _gpu_family(family: str, gpu: Gpu, rows, features=frozenset(), price=PRICE_LIST_2026_09):
    """rows: (size, vcpus, memory GiB, gpus, network Gb/s, $/h)."""
    return [
        InstanceType(f"ml.{family}.{size}", vcpus, mem, gpus, gpu, net, usd, price, features=frozenset(features))
        for size, vcpus, mem, gpus, net, usd in rows
    ]


def _cpu_family(family: str, rows, price=PRICE_LIST_2026_09):
    return [
        InstanceType(f"ml.{family}.{size}", vcpus, mem, 0, None, net, usd, price) for size, vcpus, mem, net, usd in rows
    ]


_CATALOGUE: list[InstanceType] = [
    # G4dn: NVIDIA T4; the cheapest GPU, no bf16
    *_gpu_family(
        "g4dn",
        T4,
        [
            ("xlarge", 4, 16, 1, 25, 0.7364),
            ("2xlarge", 8, 32, 1, 25, 0.94),
            ("4xlarge", 16, 64, 1, 25, 1.505),
            ("8xlarge", 32, 128, 1, 50, 2.72),
            ("12xlarge", 48, 192, 4, 50, 4.89),
            ("16xlarge", 64, 256, 1, 50, 5.44),
        ],
    ),
    # G5: NVIDIA A10G 24 GiB; the workshop's single-GPU and small multi-GPU workhorse
    *_gpu_family(
        "g5",
        A10G,
        [
            ("xlarge", 4, 16, 1, 10, 1.41),
            ("2xlarge", 8, 32, 1, 10, 1.52),
            ("4xlarge", 16, 64, 1, 25, 2.03),
            ("8xlarge", 32, 128, 1, 25, 3.06),
            ("12xlarge", 48, 192, 4, 40, 7.09),
            ("16xlarge", 64, 256, 1, 25, 5.12),
            ("24xlarge", 96, 384, 4, 50, 10.18),
            ("48xlarge", 192, 768, 8, 100, 20.36),
        ],
    ),
    # G6: NVIDIA L4 24 GiB
    *_gpu_family(
        "g6",
        L4,
        [
            ("xlarge", 4, 16, 1, 10, 1.127),
            ("2xlarge", 8, 32, 1, 10, 1.222),
            ("4xlarge", 16, 64, 1, 25, 1.654),
            ("8xlarge", 32, 128, 1, 25, 2.518),
            ("12xlarge", 48, 192, 4, 40, 5.752),
            ("16xlarge", 64, 256, 1, 25, 4.246),
            ("24xlarge", 96, 384, 4, 50, 8.344),
            ("48xlarge", 192, 768, 8, 100, 16.688),
        ],
    ),
    # G6e: NVIDIA L40S 48 GiB
    *_gpu_family(
        "g6e",
        L40S,
        [
            ("xlarge", 4, 32, 1, 20, 2.61),
            ("2xlarge", 8, 64, 1, 20, 2.8),
            ("4xlarge", 16, 128, 1, 20, 3.76),
            ("8xlarge", 32, 256, 1, 25, 5.66),
            ("12xlarge", 48, 384, 4, 100, 13.12),
            ("16xlarge", 64, 512, 1, 35, 9.47),
            ("24xlarge", 96, 768, 4, 200, 18.83),
            ("48xlarge", 192, 1536, 8, 400, 37.66),
        ],
    ),
    # P3: NVIDIA V100 (the case studies' 16-V100 runs); older prices, see PRICE_PAGE_P3
    *_gpu_family(
        "p3",
        V100_16,
        [("2xlarge", 8, 61, 1, 10, 3.825), ("8xlarge", 32, 244, 4, 10, 14.688), ("16xlarge", 64, 488, 8, 25, 28.152)],
        price=PRICE_PAGE_P3,
    ),
    InstanceType("ml.p3dn.24xlarge", 96, 768, 8, V100_32, 100, 35.894, PRICE_PAGE_P3, features=frozenset({"smddp"})),
    # P4d/P4de: 8 x A100 with 400 Gb/s EFA; SMDDP's and SMP's home
    InstanceType("ml.p4d.24xlarge", 96, 1152, 8, A100_40, 400, 25.2513, features=frozenset({"smddp", "smp"})),
    InstanceType("ml.p4de.24xlarge", 96, 1152, 8, A100_80, 400, 31.5641, features=frozenset({"smddp", "smp"})),
    # P5 family: 8 x H100/H200 with 3200 Gb/s of EFA hardware (the SDK's drivers enable it on P5 and P5e, not yet
    # on P5en). No SMDDP here (sagemaker-python-sdk issue 4988). p5.4xlarge: one H100, for single-GPU work on Hopper.
    InstanceType("ml.p5.48xlarge", 192, 2048, 8, H100, 3200, 63.296, features=frozenset({"smp"})),
    InstanceType("ml.p5.4xlarge", 16, 256, 1, H100, 100, None),
    # no SageMaker training price found for P5e/P5en: estimates say so rather than guess
    InstanceType("ml.p5e.48xlarge", 192, 2048, 8, H200, 3200, None, features=frozenset({"smp"})),
    InstanceType("ml.p5en.48xlarge", 192, 2048, 8, H200, 3200, None),
    # P6: 8 x B200 (Blackwell) with 3200 Gb/s of EFA hardware; no SageMaker training price on file either
    InstanceType("ml.p6-b200.48xlarge", 192, 2048, 8, B200, 3200, None),
    # Trainium: not GPUs (Neuron SDK, not CUDA); listed so a learner gets a clear answer rather than "unknown"
    InstanceType("ml.trn1.2xlarge", 8, 32, 0, None, 12.5, 1.54, accelerators="1 x Trainium"),
    InstanceType("ml.trn1.32xlarge", 128, 512, 0, None, 800, 24.73, accelerators="16 x Trainium"),
    InstanceType("ml.trn1n.32xlarge", 128, 512, 0, None, 1600, None, accelerators="16 x Trainium"),
    InstanceType("ml.trn2.48xlarge", 192, 2048, 0, None, 3200, None, accelerators="16 x Trainium2"),
    # CPU types: data preparation and CPU smoke runs
    # (SageMaker training has no m5.8xlarge or m5.16xlarge: tests/test_instances.py holds every entry here to the
    # API's TrainingInstanceType list)
    *_cpu_family(
        "m5",
        [
            ("large", 2, 8, 10, 0.115),
            ("xlarge", 4, 16, 10, 0.23),
            ("2xlarge", 8, 32, 10, 0.461),
            ("4xlarge", 16, 64, 10, 0.922),
            ("12xlarge", 48, 192, 12, 2.765),
            ("24xlarge", 96, 384, 25, 5.53),
        ],
    ),
    *_cpu_family(
        "c5",
        [
            ("xlarge", 4, 8, 10, 0.204),
            ("2xlarge", 8, 16, 10, 0.408),
            ("4xlarge", 16, 32, 10, 0.816),
            ("9xlarge", 36, 72, 10, 1.836),
            ("18xlarge", 72, 144, 25, 3.672),
        ],
    ),
]
CATALOGUE: dict[str, InstanceType] = {t.name: t for t in _CATALOGUE}


def lookup(name: str) -> InstanceType:
    """The catalogue entry for ``name`` (``"ml.g5.2xlarge"``); :class:`UnknownInstanceType` with suggestions."""
    key = (name or "").strip()
    if key in CATALOGUE:
        return CATALOGUE[key]
    if key.lower() in CATALOGUE:
        return CATALOGUE[key.lower()]
    guess = key.lower() if key.lower().startswith("ml.") else f"ml.{key.lower()}"
    if guess in CATALOGUE:
        raise UnknownInstanceType(
            f"unknown instance type {name!r}: SageMaker names start with 'ml.'; did you mean {guess!r}?"
        )
    close = difflib.get_close_matches(guess, CATALOGUE, n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownInstanceType(
        f"unknown instance type {name!r}.{hint} Known training types: "
        f"{', '.join(sorted({t.family for t in _CATALOGUE}))} families "
        f"(helpers.planning.instances.CATALOGUE lists them all)."
    )


def supporting(feature: str) -> list[str]:
    """Instance types that support a feature (``"smddp"``, ``"smp"``, ``"bf16"``, ``"efa"``), cheapest first."""
    found = [t for t in _CATALOGUE if t.supports(feature)]
    return [t.name for t in sorted(found, key=lambda t: (t.price_per_hour is None, t.price_per_hour or 0))]


def cheapest(gpus: int = 1, bf16: bool = False, feature: str | None = None) -> InstanceType:
    """The cheapest priced type with at least ``gpus`` GPUs on one instance (with bf16, or ``feature``, if asked):
    the catalogue's answer to "the cheapest ... that teaches this", never a claim typed into prose."""
    fits = [
        t
        for t in _CATALOGUE
        if t.gpus >= gpus
        and t.price_per_hour is not None
        and (t.bf16 or not bf16)
        and (feature is None or t.supports(feature))
    ]
    if not fits:
        raise UnknownInstanceType(f"no priced instance type has {gpus} GPU(s){' with bf16' if bf16 else ''}.")
    return min(fits, key=lambda t: (t.price_per_hour, t.name))


def table(names: list[str] | None = None) -> list[dict]:
    """Rows for a notebook table (pandas-friendly): the given types, or the whole catalogue."""
    rows = []
    for t in (lookup(n) for n in names) if names else _CATALOGUE:
        rows.append(
            {
                "instance_type": t.name,
                "gpus": t.gpus,
                "gpu": t.gpu.model if t.gpu else t.accelerators,
                "gpu_memory_gib": t.gpu.memory_gib if t.gpu else 0,
                "vcpus": t.vcpus,
                "memory_gib": t.memory_gib,
                "network_gbps": t.network_gbps,
                "efa": t.efa,
                "bf16": t.bf16,
                "smddp": t.supports("smddp"),
                "smp": t.supports("smp"),
                "usd_per_hour": t.price_per_hour,
                "price_as_of": t.price_as_of,
            }
        )
    return rows
