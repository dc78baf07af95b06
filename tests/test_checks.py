"""The rule table of job checks: each rule from a table of cases, and one table for every target (a rule added to
COMMON refuses the job on this machine and on SageMaker alike)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from helpers import checks, jobs
from helpers.checks import common_rules, findings, target_rules
from helpers.errors import JobCheckError, WorkshopError
from helpers.job_spec import Job, catalog_channels
from helpers.local.runner import LocalRunner
from helpers.targets import Target, resolve

CPU = Target("local_cpu", "local_cpu", 0, 2)
GPU1 = Target("local_gpu", "local_gpu", 1, 8)
G5 = resolve("ml.g5.2xlarge")
G5_12 = resolve("ml.g5.12xlarge")
P4D = resolve("ml.p4d.24xlarge")


def where(job: Job, target: Target) -> findings.Where:
    return findings.Where.sagemaker(job, target) if target.kind == "sagemaker" else findings.Where.local(job, target)


# (rule, the job's fields, target, the error kind it raises or None for a note, what its message says)
CASES = [
    (common_rules.counts, dict(processes_per_host=0), CPU, findings.ProcessCountError, "at least 1"),
    (common_rules.entry_point, dict(entry_point="nope.py"), CPU, JobCheckError, "nope.py does not exist"),
    (common_rules.hyperparameter_names, dict(hyperparameters={"sagemaker_x": 1}), G5, JobCheckError, "reserved"),
    (common_rules.hyperparameter_values, dict(hyperparameters={"lr": "inf"}), CPU, JobCheckError, "finite"),
    (
        common_rules.hyperparameter_values,
        dict(hyperparameters={"epochz": 1}),
        G5,
        JobCheckError,
        "did you mean 'epochs'",
    ),
    (common_rules.secrets, dict(hyperparameters={"hf_token": "hf_abc"}), CPU, JobCheckError, "look like secrets"),
    (common_rules.secrets, dict(hyperparameters={"generate_tokens": "20"}), CPU, None, None),
    (
        common_rules.secrets,
        dict(environment={"HF_TOKEN": "hf_abc", "WANDB_API_KEY": "x"}),
        G5,
        JobCheckError,
        "environment variable(s) HF_TOKEN, WANDB_API_KEY look like secrets",
    ),
    (common_rules.secrets, dict(environment={"TOKENIZERS_PARALLELISM": "false", "NCCL_DEBUG": "INFO"}), G5, None, None),
    (common_rules.traffic_encryption, dict(encrypt_traffic=True, instance_count=2), G5, None, "IPsec"),
    (common_rules.traffic_encryption, dict(encrypt_traffic=True), G5, None, "nothing to encrypt on one instance"),
    (common_rules.traffic_encryption, dict(encrypt_traffic=True, instance_count=2), CPU, None, "loopback"),
    (common_rules.tags, dict(tags={"workshop-lab": "x"}), G5, JobCheckError, "helpers' own"),
    (common_rules.stopping, dict(max_runtime_s=0), CPU, findings.SpotConfigError, "between 1 and"),
    (common_rules.stopping, dict(spot=True), G5, findings.SpotConfigError, "checkpoints=True"),
    (common_rules.stopping, dict(max_wait_s=9000), G5, findings.SpotConfigError, "spot=True"),
    (
        common_rules.stopping,
        dict(spot=True, checkpoints=True, max_wait_s=10),
        G5,
        findings.SpotConfigError,
        "max_wait_s >=",
    ),
    (common_rules.stopping, dict(spot=True, checkpoints=True), G5, None, "twice max_runtime_s"),
    (
        common_rules.processes_fit_the_gpus,
        dict(processes_per_host=2),
        GPU1,
        findings.ProcessCountError,
        "target='local_cpu'",
    ),
    (common_rules.processes_fit_the_gpus, dict(processes_per_host=8), G5_12, findings.ProcessCountError, "has 4 GPU"),
    (
        common_rules.precision_fits_the_device,
        dict(hyperparameters={"precision": "fp16"}),
        CPU,
        findings.UnsupportedFeature,
        "needs a GPU",
    ),
    (common_rules.channel_modes, dict(input_mode="Pipe"), CPU, findings.ChannelError, "Pipe mode is legacy"),
    (common_rules.channel_modes, dict(channels={"code": "s3://b/c/"}), G5, findings.ChannelError, "reserved"),
    (
        common_rules.channel_sources,
        dict(channels={"train": "s3://Bad_Bucket/x"}),
        G5,
        findings.ChannelError,
        "valid S3 URI",
    ),
    (
        common_rules.channel_sources,
        dict(channels={"train": "/no/such/dir"}),
        CPU,
        findings.ChannelError,
        "missing or empty",
    ),
    (target_rules.no_hub_downloads, dict(hyperparameters={"hub_checkpoint": "x/y"}), CPU, JobCheckError, "never leave"),
    (
        target_rules.local_channel_modes,
        dict(input_mode="FastFile"),
        CPU,
        findings.ChannelError,
        "needs an s3:// channel",
    ),
    (target_rules.local_mode_limits, dict(spot=True, checkpoints=True), CPU, findings.UnsupportedFeature, "local mode"),
    (
        target_rules.instance_runs_the_script,
        dict(),
        resolve("ml.trn1.2xlarge"),
        findings.UnsupportedFeature,
        "needs CUDA GPUs",
    ),
    (target_rules.launcher, dict(distribution="deepspeed"), G5, JobCheckError, "not one of"),
    (target_rules.launcher, dict(distribution="torchrun"), G5, None, "torchrun adds nothing"),
    (
        target_rules.smddp,
        dict(distribution="smddp"),
        G5,
        findings.UnsupportedFeature,
        "SMDDP does not run on ml.g5.2xlarge",
    ),
    (
        target_rules.smddp,
        dict(distribution="smddp", hyperparameters={"backend": "nccl"}),
        P4D,
        JobCheckError,
        "set it to 'smddp'",
    ),
    (
        target_rules.smp,
        dict(distribution="smp", smp={"tensor_parallel_degree": 3}),
        P4D,
        findings.ProcessCountError,
        "must divide the 8 GPUs",
    ),
    (target_rules.smp, dict(smp={"tensor_parallel_degree": 2}), P4D, JobCheckError, "distribution='smp'"),
    (target_rules.fsx, dict(channel_modes={"train": "FSx"}), P4D, findings.FSxConfigError, "file_system_id"),
    (target_rules.fsx, dict(fsx={"file_system_id": "fs-1"}), P4D, findings.FSxConfigError, "no channel uses it"),
    (
        target_rules.multi_node_network,
        dict(instance_count=2),
        G5_12,
        None,
        "go over TCP sockets ('NET/Socket' in NCCL's log), not EFA: the 40 Gb/s",
    ),
    (target_rules.multi_node_network, dict(instance_count=2), P4D, None, "NET/OFI Selected Provider is efa"),
    (target_rules.multi_node_network, dict(instance_count=1), P4D, None, None),
    (target_rules.relaunch_settings, dict(retry_attempts=31), G5, JobCheckError, "MaximumRetryAttempts takes 1 to 30"),
    (target_rules.relaunch_settings, dict(retry_attempts=0), G5, JobCheckError, "takes 1 to 30"),
    (target_rules.relaunch_settings, dict(warm_pool_s=21601), G5, JobCheckError, "KeepAlivePeriodInSeconds takes 0"),
    (target_rules.relaunch_settings, dict(retry_attempts=2, infra_check=True, warm_pool_s=1800), G5, None, None),
]


@pytest.mark.parametrize("rule, fields, target, error, says", CASES, ids=lambda c: getattr(c, "__name__", None))
def test_each_rule_refuses_or_notes_what_its_table_says(small_catalog, rule, fields, target, error, says):
    job = replace(Job("lab-x", {}, catalog_channels(small_catalog)), **fields)
    found = list(findings.each_finding(job, where(job, target), [rule]))
    if error is None:
        assert all(f.error is None for f in found)
        assert any(says in f.message for f in found) if says else found == [], found
        return
    assert found and found[0].rule == rule.__name__ and found[0].error is error, found
    assert says in found[0].message
    with pytest.raises(error, match=None):
        checks.run_rules(job, where(job, target), [rule])


@pytest.mark.slow
def test_a_good_job_passes_every_rule_for_every_kind_of_target(small_catalog):
    job = Job("lab-x", {"epochs": 1}, catalog_channels(small_catalog))
    for target in (CPU, G5, Target("local_container", "local_cpu", 0, 2)):
        assert not [f for f in findings.each_finding(job, where(job, target), checks.rules_for(target.kind)) if f.error]


def test_every_rule_is_in_the_table_and_tested():
    tabled = {rule for kind in target_rules.ONLY for rule in checks.rules_for(kind)}
    tested = {case[0] for case in CASES} | {
        common_rules.channel_data,
        target_rules.event_guardrails,  # tests/test_event_account_policies.py: it reads the event's settings
    }  # tested in their own files
    assert tabled == tested


def test_one_error_family():
    assert issubclass(JobCheckError, WorkshopError)
    for kind in (
        findings.UnsupportedFeature,
        findings.SpotConfigError,
        findings.ProcessCountError,
        findings.FSxConfigError,
    ):
        assert issubclass(kind, JobCheckError)


def test_a_rule_added_to_common_applies_on_this_machine_and_on_sagemaker(small_catalog, tmp_path, monkeypatch):
    def no_fridays(job, where):
        yield findings.fail(f"no jobs named {job.name!r} on {where.target.name}")

    monkeypatch.setattr(checks, "COMMON", (*common_rules.COMMON, no_fridays))
    job = Job("friday", {}, catalog_channels(small_catalog))
    with pytest.raises(JobCheckError, match="no jobs named 'friday' on local_cpu"):
        LocalRunner(tmp_path / "jobs", echo=False).prepare(job, CPU)
    with pytest.raises(JobCheckError, match="no jobs named 'friday' on ml.g5.2xlarge"):
        jobs.preflight(job, resolve("ml.g5.2xlarge"))
    assert not (tmp_path / "jobs").exists()  # refused before anything was written
