"""Which SageMaker image a job runs on, which images ship SMDDP (which the SDK cannot tell), and how long AWS patches
each: every dry run prints its image's :func:`support` window, and preflight notes one past its end of patch."""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import sagemaker_standin
from helpers.checks.findings import UnsupportedFeature
from helpers.planning import instances

# The framework image every torchrun and single-process job runs on: the newest PyTorch DLC AWS patches, the torch of
# make's .venv. The SDK's image_uris knows DLCs up to 2.10 (repository pytorch-training); from 2.11 they live in the
# repository "pytorch", named as aws/deep-learning-containers publishes them (dlc_support.json: its tags and accounts).
PYTORCH_DLC = "2.13"
# the last DLC built with CUDA 12 (CUDA 13 no longer runs on the V100), through the SDK's image_uris
CUDA_12_DLC = ("2.3.0", "py311")
# Which SageMaker images ship SMDDP, which the SDK cannot tell (its own list, fw_utils, stops at the 2.2.0 DLC). Two
# sources, checked 2026-11-23, disagree: AWS's SMDDP support table lists PyTorch 2.3.0 (SMDDP 2.3.0) as the newest
# framework DLC with SMDDP preinstalled, while the DLC repository's Dockerfiles for the 2.4 and 2.5 SageMaker GPU images
# install SMDDP 2.5.0 and 2.6.0 (the 2.6 image, and every later one, none). The Dockerfile is what goes into the image,
# so preflight goes by it; the default image stays 2.3.0, the one both sources list.
SMDDP_DLC = ("2.3.0", "py311")
SMDDP_IN_DLC = {"2.3": "2.3.0", "2.4": "2.5.0", "2.5": "2.6.0"}  # SageMaker GPU DLC (PyTorch x.y) -> SMDDP installed
SMDDP_IN_AWS_TABLE = {"2.3": "2.3.0"}  # the framework DLCs AWS's support table lists past the SDK's list
SMDDP_IN_SMP_IMAGES = {"2.4.1": "2.5.0", "2.5.1": "2.6.0"}  # SMP image (PyTorch version) -> bundled SMDDP
# SMP v2 image: PyTorch 2.5.1 with SMP 2.8.0, CUDA 12.4 (image_uris framework "pytorch-smp")
SMP_IMAGE = ("2.5.1", "py311", "cu124")

# the DLC repository's support data, with the images' tags and ECR accounts: tools/dlc_support.py refreshes it
SUPPORT_FILE = Path(__file__).with_name("dlc_support.json")
_TAG_VERSION = re.compile(r":(\d+\.\d+)(?:\.\d+)?-")


@dataclass(frozen=True)
class Support:
    """One image's support window, as the table has it (None when the table does not know the image)."""

    image: str
    pytorch: str | None  # major.minor
    ga: dt.date | None
    eop: dt.date | None
    newest: str  # the newest PyTorch version the table lists with dates
    source: str  # where the dates come from, with the snapshot's date

    def past(self, today: dt.date) -> bool:
        return self.eop is not None and today > self.eop

    def describe(self, today: dt.date | None = None) -> str:
        today = today or dt.date.today()
        if self.eop is None:
            return f"no support dates on file ({self.source})"
        if self.past(today):
            return f"past its end of patch, {self.eop} ({self.source})"
        return f"patched until {self.eop} ({self.source})"


def support_table(path: Path = SUPPORT_FILE) -> dict:
    """The DLC repository's support dates, tags and accounts (``dlc_support.json``)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def support(image_uri: str, table: dict | None = None) -> Support:
    """The support window of a SageMaker PyTorch image (a framework DLC or an SMP image, which is built on one)."""
    table = table or support_table()
    versions = table["pytorch"]
    newest = max(versions, key=lambda v: tuple(int(x) for x in v.split(".")))
    source = f"DLC support data of {table['snapshot_date']}"
    m = _TAG_VERSION.search(image_uri.rsplit("/", 1)[-1])
    version = m.group(1) if m else None
    entry = versions.get(version) if version else None
    if "smdistributed-modelparallel" in image_uri and entry:
        source += "; an SMP image has its PyTorch's dates"
    ga, eop = (dt.date.fromisoformat(entry["ga"]), dt.date.fromisoformat(entry["eop"])) if entry else (None, None)
    return Support(image_uri, version, ga, eop, newest, source)


def region_for_images(region: str | None) -> str:
    return region or sagemaker_standin.REGION


@functools.lru_cache(maxsize=64)
def _image_uri(**query) -> str:
    """``image_uris.retrieve``, remembered: it reads botocore's endpoint tables (~0.5 s) on every call."""
    from sagemaker.core import image_uris

    return image_uris.retrieve(image_scope="training", **query)


def default_image(launcher: str, instance: instances.InstanceType, region: str | None = None) -> tuple[str, str]:
    """(image URI, why this image) for a launcher on an instance type, through the SDK's ``image_uris``."""
    region = region_for_images(region)
    if launcher == "smp":
        version, py, cuda = SMP_IMAGE
        uri = _image_uri(
            framework="pytorch-smp",
            region=region,
            version=version,
            py_version=py,
            container_version=cuda,
            instance_type=instance.name,
        )
        return uri, f"SMP v2 image for PyTorch {version} (bundles SMDDP {SMDDP_IN_SMP_IMAGES[version]})"
    volta = bool(instance.gpu and instance.gpu.model == "V100")  # CUDA 13 (the newest DLC's) dropped Volta
    if launcher != "smddp" and not volta:
        return named_dlc(PYTORCH_DLC, instance, region)
    version, py = SMDDP_DLC if launcher == "smddp" else CUDA_12_DLC
    uri = _image_uri(framework="pytorch", region=region, version=version, py_version=py, instance_type=instance.name)
    why = (
        f"PyTorch {version} DLC: the newest framework image that both AWS's SMDDP table and the DLC Dockerfiles "
        f"list with SMDDP {SMDDP_IN_DLC[minor(version)]}"
        if launcher == "smddp"
        else f"PyTorch {version} DLC (CUDA 12: newer images no longer run on the V100)"
    )
    return uri, why


def named_dlc(version: str, instance: instances.InstanceType, region: str) -> tuple[str, str]:
    """(image URI, why) of a PyTorch DLC the SDK's catalogue lacks: its tag and its region's ECR account as the DLC
    repository publishes them (``helpers/aws/dlc_support.json``, refreshed by
    ``python tools/dlc_support.py --refresh``)."""
    table = support_table()
    kind = "gpu" if instance.gpus else "cpu"
    image, account = table["images"][version][kind], table["accounts"].get(region)
    if account is None:
        raise UnsupportedFeature(
            f"the PyTorch {version} DLC is not published in {region} (aws/deep-learning-containers, "
            f"docs/reference/region_availability.md: {', '.join(sorted(table['accounts']))}): choose one of those "
            f"regions, or pass Job(image_uri=...)."
        )
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    why = (
        f"PyTorch {version} DLC ({kind.upper()}, Python {table['images'][version]['python'][2:3]}."
        f"{table['images'][version]['python'][3:]}): the newest AWS patches, named as aws/deep-learning-containers "
        f"publishes it (snapshot of {table['snapshot_date']}); the SDK's catalogue stops at 2.10"
    )
    return f"{account}.dkr.ecr.{region}.{domain}/{image}", why


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def image_tag(image_uri: str) -> tuple[str, str, str]:
    """(repository, tag, PyTorch version) of an ECR image URI."""
    repo, _, tag = image_uri.rsplit("/", 1)[-1].partition(":")
    return repo, tag, tag.split("-")[0]


def image_has_smddp(image_uri: str) -> bool:
    """Whether a SageMaker framework or SMP image ships SMDDP (custom images: unknown, so False).

    Framework images: the SageMaker GPU DLCs the SDK lists (up to PyTorch 2.2.0), and 2.3, 2.4 and 2.5, whose
    Dockerfiles install SMDDP (:data:`SMDDP_IN_DLC`; AWS's support table lists only 2.3.0). Not the CPU or EC2
    variants: the Dockerfiles install SMDDP in the SageMaker GPU stage only."""
    from sagemaker.core.fw_utils import SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS

    repo, tag, version = image_tag(image_uri)
    if repo == "smdistributed-modelparallel":
        return version in SMDDP_IN_SMP_IMAGES
    if repo == "pytorch-training" and "-gpu-" in f"-{tag}-" and "-ec2" not in f"{tag}-":
        return version in SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["pytorch"] or minor(version) in SMDDP_IN_DLC
    return False


def smddp_images(region: str | None = None) -> list[dict]:
    """One row per SageMaker image that matters for SMDDP: what AWS's support table says, what the image's
    Dockerfile installs, and whether preflight accepts it for ``distribution="smddp"`` (lab 03's table)."""
    region = region_for_images(region)
    p4d = instances.lookup("ml.p4d.24xlarge")
    rows = []
    uris = [
        _image_uri(framework="pytorch", region=region, version=version, py_version=py, instance_type=p4d.name)
        for version, py in [SMDDP_DLC, ("2.4.0", "py311"), ("2.5.1", "py311"), ("2.6.0", "py312")]
    ]
    for uri in [*uris, named_dlc(PYTORCH_DLC, p4d, region)[0]]:
        _, _, version = image_tag(uri)
        table = SMDDP_IN_AWS_TABLE.get(minor(version))
        built = SMDDP_IN_DLC.get(minor(version))
        rows.append(
            {
                "image": uri.rsplit("/", 1)[-1],
                "AWS support table": f"SMDDP {table}" if table else "not listed",
                "DLC Dockerfile installs": f"SMDDP {built}" if built else "no SMDDP",
                "preflight": "accepted" if image_has_smddp(uri) else "refused",
            }
        )
    for version, bundled in SMDDP_IN_SMP_IMAGES.items():
        rows.append(
            {
                "image": f"smdistributed-modelparallel:{version} (SMP)",
                "AWS support table": "SMP images bundle it",
                "DLC Dockerfile installs": f"SMDDP {bundled}",
                "preflight": "accepted",
            }
        )
    return rows


def choose_image(job, where, region: str | None = None, has_smddp: bool | None = None) -> tuple[str, str, list[str]]:
    """(image URI, why this image, notes) for a checked job on an instance type in ``region``: its own step, since
    an image lives in one region (pulls across regions are refused) and the region is known only at launch.

    Raises ``UnsupportedFeature`` for an image that cannot run the job's launcher. ``has_smddp`` vouches for (or
    against) a custom image's SMDDP."""
    if job.image_uri:
        image, why = job.image_uri, "image given in Job.image_uri"
    else:
        image, why = default_image(where.launcher, where.instance, region)
    window = support(image)
    why = f"{why}; {window.describe()}"
    notes = []
    if window.past(dt.date.today()):
        notes.append(
            f"image {image.rsplit('/', 1)[-1]} is past its end of patch ({window.eop}): AWS ships it no more "
            f"security or bug fixes"
            + (
                f"; the newest image with support dates is PyTorch {window.newest}"
                if where.launcher not in ("smddp", "smp")
                else f" (no newer image has {'SMDDP' if where.launcher == 'smddp' else 'SMP v2'}: it is frozen)"
            )
        )
    if where.launcher == "smddp":
        if not (image_has_smddp(image) if has_smddp is None else has_smddp):
            default = SMDDP_DLC[0]
            others = sorted(set(SMDDP_IN_DLC) - {minor(default)})
            raise UnsupportedFeature(
                f"image {image} does not ship SMDDP: leave Job.image_uri unset (the helpers pick the PyTorch "
                f"{default} DLC, which AWS's SMDDP table and its Dockerfile both list with SMDDP), or use the "
                f"SageMaker GPU DLC for PyTorch {' or '.join(others)} (their Dockerfiles install SMDDP) or an SMP "
                f"image; for your own image that installs smdistributed-dataparallel pass image_has_smddp=True."
            )
        repo, _, version = image_tag(image)
        if (
            has_smddp is None
            and repo == "pytorch-training"
            and minor(version) in set(SMDDP_IN_DLC) - set(SMDDP_IN_AWS_TABLE)
        ):
            notes.append(
                f"{image.rsplit('/', 1)[-1]}: AWS's SMDDP support table does not list it, but its Dockerfile "
                f"installs SMDDP {SMDDP_IN_DLC[minor(version)]}, and the Dockerfile is what goes into the image"
            )
    if where.launcher == "smp" and job.image_uri and "smdistributed-modelparallel" not in job.image_uri:
        raise UnsupportedFeature(
            f"SMP v2 needs an SMP image (smdistributed-modelparallel); {job.image_uri} is not one. Leave "
            f"Job.image_uri unset."
        )
    attention = str(job.hyperparameters.get("attn_implementation", "sdpa"))
    if "smdistributed-modelparallel" in image and job.entry_point == "train.py" and attention == "sdpa":
        notes.append(
            "an SMP image keeps its own transformers (requirements.txt installs one only where the image has none "
            "that fits: 4.44.2 in the SMP 2.5.1 image), and DistilBERT has SDPA attention only from transformers "
            "4.46: pass attn_implementation='eager' to train.py there"
        )
    return image, why, notes
