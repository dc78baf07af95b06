"""The 2026 map of what to use when, and the answers to the questions a room asks: computed from the instance
catalogue, the images' support dates (``helpers.aws.images``) and the labs' real targets."""

from __future__ import annotations

from functools import cache

from course.facilitator.lab_targets import TARGETS, hourly
from course.facilitator.tables import markdown, money
from course.manifest import listing
from helpers.aws import images
from helpers.planning import instances

SDK_V2 = (
    "SDK v2 is in maintenance from 2026-07-06 and reaches end of support on 2027-07-06 (sagemaker-python-sdk "
    'master-v2 README, "Version Lifecycle")'
)
SMP_LIBRARY = "2.8.0"  # the last SMP v2 release, on PyTorch images.SMP_IMAGE (no newer one found on 2026-11-25)


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


@cache
def support_facts() -> dict:
    """The dated facts the map and the answers cite, from the helpers' image tables."""
    table = images.support_table()
    dates = table["pytorch"]
    smddp_pt = max(images.SMDDP_IN_DLC, key=_version)
    labs_pt = images.PYTORCH_DLC
    smp_pt = images.SMP_IMAGE[0]
    return {
        "source": f"DLC support data of {table['snapshot_date']}, `helpers/aws/dlc_support.json`",
        "labs_image": images.PYTORCH_DLC,
        "labs_eop": dates[labs_pt]["eop"],
        "smddp_pytorch": smddp_pt,
        "smddp_version": images.SMDDP_IN_DLC[smddp_pt],
        "smddp_eop": dates[smddp_pt]["eop"],
        "smddp_types": listing(instances.supporting("smddp")),
        "smp_pytorch": smp_pt,
        "smp_eop": dates[images.minor(smp_pt)]["eop"],
        "efa_8_gpu": listing(
            n for n in instances.supporting("efa") if instances.lookup(n).gpus >= 8 and instances.lookup(n).bf16
        ),
    }


def map_markdown() -> str:
    f = support_facts()
    one = instances.cheapest(1, bf16=True)
    rows = [
        (
            "the model and a useful batch fit one GPU",
            f"one GPU with bf16 (Ampere or newer; the cheapest: {one.name}, {money(hourly(one))}/h)",
            "01",
            "",
        ),
        (
            "more throughput; the model still fits one GPU",
            "DDP under torchrun, NCCL; across nodes over EFA, which SageMaker turns on for NCCL on the 8-GPU "
            f"types {f['efa_8_gpu']}",
            "02",
            f"the labs' image: PyTorch {f['labs_image']} DLC, patched until {f['labs_eop']} ({f['source']})",
        ),
        (
            "SMDDP, in the case studies",
            f"NCCL instead. SMDDP's newest framework image is the PyTorch {f['smddp_pytorch']} DLC "
            f"(SMDDP {f['smddp_version']}); it runs on {f['smddp_types']} only",
            "03",
            f"frozen: that image is out of patch since {f['smddp_eop']} ({f['source']})",
        ),
        (
            "the model does not fit one GPU",
            f"FSDP2, and tensor parallel, under torchrun on a current image. SMP v2 stopped at {SMP_LIBRARY} on "
            f"PyTorch {f['smp_pytorch']}",
            "04",
            f"SMP v2 frozen: its PyTorch is out of patch since {f['smp_eop']} ({f['source']}); no SMP release "
            "after it as of 2026-11-25",
        ),
        (
            "large data in S3",
            "FastFile to stream it; FSx for Lustre when many jobs or instances read it, or read it at random; "
            "File for small data",
            "05",
            "",
        ),
        ("interruptible work, lower cost", "managed spot with periodic checkpoints", "06", ""),
        (
            "a cluster that lives for weeks",
            "SageMaker HyperPod: a persistent cluster (Slurm or Amazon EKS) that replaces faulty nodes and resumes "
            "from checkpoints, billed while it exists; training jobs for work that starts and ends",
            "–",
            "",
        ),
        ("the SDK", "SDK v3 (`ModelTrainer`), as the labs use it", "all", SDK_V2),
    ]
    return markdown([{"when": w, "use": u, "lab": lab, "status": s or "–"} for w, u, lab, s in rows])


def answers_markdown() -> str:
    f = support_facts()
    ddp = next(t for t in TARGETS if t.lab == "02")
    spec = instances.lookup(ddp.instance_type)
    network = f"{spec.network_gbps:g} Gb/s" + (" with EFA" if spec.efa else " without EFA")
    return "\n".join(
        [
            '- **"Why no speed-up?"** Read it off lab 02\'s "Step time and samples per second": its last line '
            "compares the measured speed-up (`vs 1 process`) with the ceiling the machine allows (on a CPU, "
            "processes or cores, whichever is fewer) and shows the load average; a headless run keeps both as "
            "`ddp_speedup` and `ddp_speedup_ceiling` in `runs/labs/02_ddp.figures.json`. A ceiling of 1 means the "
            "processes "
            "shared one core; below the ceiling, the machine was busy (the load average) or the short smoke-size "
            "step spent a larger share on its gradient all-reduce. "
            'On SageMaker, lab 02\'s planner (deep dive "How far does it scale?") predicts it per instance count: '
            f"lab 02's {ddp.count} × {ddp.instance_type} exchange gradients across nodes over {network}.",
            '- **"Why does it barely beat TF-IDF?"** It should beat it by at least 2 points of macro-F1 at every '
            "size (a test holds each size to it): the network trained from scratch catches up with the bag of "
            "n-grams over its first passes and wins on the titles whose modifier misleads it. A learner who changed "
            '`epochs`, `batch_size` or `subset` may have cut the run short of that: lab 01\'s "What came out" '
            "prints the margin (`macro_f1_margin_points` in `runs/labs/01_single_gpu.figures.json`); the "
            "pre-launched job is the full-size run (`done.metrics`).",
            f'- **"SMDDP or NCCL today?"** NCCL, under torchrun (lab 02). No framework image after PyTorch '
            f"{f['smddp_pytorch']} carries SMDDP (its last, {f['smddp_version']}), and that image is out of patch "
            f"since {f['smddp_eop']} ({f['source']}); SMDDP runs on {f['smddp_types']} only, not P5, and its "
            "AllReduce needs the image's mpirun launcher (lab 03). Moving off it is lab 03's diff backwards: drop the "
            '`smdistributed` import and use `backend="nccl"`.',
            f'- **"We have SDK v2 code."** {SDK_V2}: pinned to `sagemaker<3` it keeps working meanwhile. The README\'s '
            '"SDK v2 → v3" table maps each `Estimator` argument to `ModelTrainer`; the training script stays as it '
            "is (the container contract is the same). SMDDP jobs are the exception: no v3 launcher runs SMDDP "
            "AllReduce (lab 03 shows the way round).",
            '- **"HyperPod?"** For a cluster that outlives its jobs: HyperPod keeps instances (Slurm or Amazon EKS) '
            "between jobs, replaces faulty nodes and resumes from the last checkpoint, and bills while the cluster "
            "exists. The labs' training jobs start instances per job and bill its billable seconds. The torchrun "
            "script and its checkpoints carry over; the launch (`ModelTrainer`) does not.",
        ]
    )
