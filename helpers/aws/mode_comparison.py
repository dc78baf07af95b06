"""Lab 05 on SageMaker: the three input modes compared. A job once per mode, the FSx checks run offline, the
channels each request defines, and where a finished job's time went (DescribeTrainingJob's
``SecondaryStatusTransitions``). The same modes on this machine, against the loopback object store, are the
stand-in's (:mod:`sagemaker_standin.s3_inputs`)."""

from __future__ import annotations

from dataclasses import replace

from helpers import checks, input_mode
from helpers.checks import findings, target_rules
from helpers.input_mode import MODES
from helpers.targets import Target


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
