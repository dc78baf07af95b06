"""A job's channels as SageMaker will see them: each one's input mode and where its data comes from (uploaded from
this machine, an s3:// prefix, or a directory on an FSx for Lustre file system); lab 05's job once per input mode,
and where a finished job's time went (DescribeTrainingJob's ``SecondaryStatusTransitions``). The checks are rules of
:mod:`helpers.checks`; planning a job's channels assumes they passed. The same modes on this machine, against the
loopback object store, are the stand-in's (:mod:`sagemaker_standin.s3_inputs`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from helpers import checks, input_mode
from helpers.checks import findings, target_rules
from helpers.checks.target_rules import fsx_directory, linked_directory
from helpers.input_mode import MODES
from helpers.job_spec import Job
from helpers.targets import Target


@dataclass
class ChannelPlan:
    name: str
    mode: str  # a name of helpers.input_mode.MODES
    kind: str  # "local" (uploaded at launch), "s3" or "fsx"
    source: str  # local directory, s3:// URI, or directory path on the file system
    linked: bool = False  # an FSx channel named by its data (s3:// or local): the directory follows from it

    files: int = 0
    bytes: int = 0

    @property
    def uploaded(self) -> bool:
        """A local directory, uploaded at launch (for FSx too: the file system shows the prefix it goes to)."""
        return self.kind == "local" or (self.linked and not self.source.startswith("s3://"))


def _dir_stats(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def plan_channels(job: Job) -> list[ChannelPlan]:
    """One :class:`ChannelPlan` per channel of a checked job, with a local directory's file count and bytes."""
    plans = []
    for name, source in job.channels.items():
        mode, text = job.mode_of(name), str(source)
        if not input_mode.reads_s3(mode) and job.fsx.get("mount_name") is not None:
            source = text if text.startswith("s3://") else str(Path(source).resolve())
            plans.append(ChannelPlan(name, mode, "fsx", source, linked=True))
        elif not input_mode.reads_s3(mode):
            plans.append(ChannelPlan(name, mode, "fsx", fsx_directory(job, text)))
        elif text.startswith("s3://"):
            plans.append(ChannelPlan(name, mode, "s3", text))
        else:
            files, size = _dir_stats(Path(source))
            plans.append(ChannelPlan(name, mode, "local", str(Path(source).resolve()), files=files, bytes=size))
    return plans


def fsx_directory_of(plan: ChannelPlan, uploaded: str, bucket: str, job: Job) -> str:
    """The directory an FSx channel mounts: as planned, or, for one named by its data, where the file system shows
    ``uploaded`` (its s3:// prefix; a local directory once uploaded, to the prefix the File and FastFile jobs use).
    The file system is linked to ``Job.fsx['import_path']``, by default the workshop bucket's root (as
    infra/workshop-account.yaml links it)."""
    if not plan.linked:
        return plan.source
    return linked_directory(uploaded, job.fsx.get("import_path") or f"s3://{bucket}", job.fsx["mount_name"])


# ---------------------------------------------------------------------------------------------- the jobs
def sagemaker_jobs_per_mode(base, data: dict[str, str], fsx: dict | None = None) -> dict[str, object]:
    """``base`` (a :class:`~helpers.job_spec.Job`) once per input mode, for SageMaker.

    ``data``: channel -> S3 URI or local directory (uploaded at launch). File and FastFile name their mode per channel
    (the SDK would send File). ``fsx`` (``file_system_id``, ``mount_name``, ``import_path``, ``subnets``,
    ``security_group_ids``) adds the FSx job, whose channels mount ``/<mount_name>/<key below import_path>``, so all
    three read the same bytes (``import_path`` '' is the bucket's root, as infra/workshop-account.yaml links it). That
    job runs in the file system's VPC, which must reach S3 for its code channels (``code``, ``sm_drivers``) and outputs
    too: ``helpers.jobs.preflight`` notes it.
    """
    names, jobs = list(data), {}
    for mode in MODES.values():
        if mode.reads_s3:
            channels, networking = dict(data), {}
        elif fsx is not None:
            channels = dict(data)
            keys = ("file_system_id", "import_path", "subnets", "security_group_ids", "access_mode")
            networking = {"fsx": {"mount_name": fsx.get("mount_name", ""), **{k: fsx[k] for k in keys if fsx.get(k)}}}
        else:
            continue  # no file system to name
        jobs[mode.name] = replace(
            base,
            name=f"{base.name}-{mode.name.lower()}",
            channels=channels,
            s3_endpoint=None,
            channel_modes=dict.fromkeys(names, mode.name),
            **networking,
        )
    return jobs


def fsx_preflight(job) -> None:
    """The FSx checks of ``helpers.jobs.preflight`` alone (file system id, subnets, security groups, directory
    paths), without choosing an image: fast enough to run in every lab, offline. Raises ``FSxConfigError``."""

    where = findings.Where(Target("fsx", "fsx", 0, 1), None, 1, "script")  # the FSx rule reads neither
    checks.run_rules(job, where, [target_rules.fsx])


def channel_definitions(request: dict) -> list[dict]:
    """The input channels of a CreateTrainingJob request, one row each (the SDK's code channels left out)."""
    rows = []
    vpc = request.get("VpcConfig") or {}
    for c in request.get("InputDataConfig", []):
        if c["ChannelName"] in ("code", "sm_drivers"):
            continue
        s3, fs = c["DataSource"].get("S3DataSource"), c["DataSource"].get("FileSystemDataSource")
        rows.append(
            {
                "channel": c["ChannelName"],
                "InputMode": c.get("InputMode", input_mode.DEFAULT),
                "source": s3["S3Uri"]
                if s3
                else f"{fs['FileSystemType']} {fs['FileSystemId']}:"
                f"{fs['DirectoryPath']} ({fs['FileSystemAccessMode']})",
                "VpcConfig": f"{','.join(vpc.get('Subnets', []))} / {','.join(vpc.get('SecurityGroupIds', []))}"
                if fs
                else "",
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------- a finished job
def startup_cost(describe: dict) -> list[dict]:
    """Where a finished SageMaker job's time went, from DescribeTrainingJob's ``SecondaryStatusTransitions``:
    one row per phase (Starting, Downloading, Training, Uploading...) with its seconds and share, in order.
    In File mode "Downloading" is the input copy; FastFile and FSx jobs spend seconds there instead of minutes."""
    rows = []
    for t in describe.get("SecondaryStatusTransitions") or []:
        start, end = t.get("StartTime"), t.get("EndTime")
        if start is None:
            continue
        seconds = (end - start).total_seconds() if end is not None else float("nan")
        rows.append({"phase": t["Status"], "seconds": seconds, "message": t.get("StatusMessage", "")})
    known = sum(r["seconds"] for r in rows if r["seconds"] == r["seconds"])
    for r in rows:
        r["share"] = r["seconds"] / known if known and r["seconds"] == r["seconds"] else float("nan")
    return rows


def download_share(describe: dict) -> dict:
    """Seconds spent downloading input vs training, and what the download cost as a share of both."""
    phases: dict[str, float] = {}
    for r in startup_cost(describe):
        if r["seconds"] == r["seconds"]:
            phases[r["phase"]] = phases.get(r["phase"], 0.0) + r["seconds"]
    download_s, training_s = phases.get("Downloading", 0.0), phases.get("Training", 0.0)
    return {
        "starting_s": phases.get("Starting", 0.0),
        "downloading_s": download_s,
        "training_s": training_s,
        "download_share": download_s / (download_s + training_s) if download_s + training_s else float("nan"),
        "billable_s": describe.get("BillableTimeInSeconds"),
        "input_mode": _input_modes(describe),
    }


def _input_modes(describe: dict) -> str:
    modes = []
    for c in describe.get("InputDataConfig") or []:
        modes.append(f"{c['ChannelName']}={input_mode.of_channel(c)}")
    return ", ".join(modes)
