"""The Docker-free local runner: layout, environment, launching, failures and stopping."""

from __future__ import annotations

import json
import shutil
import signal
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from conftest import TINY

from helpers.errors import JobCheckError, TargetError, UnknownOption
from helpers.job_spec import Job, catalog_channels, parse_metric_line
from helpers.jobs import run_job
from helpers.local import runner as local_runner
from helpers.local.runner import JobFailed, LocalRunner
from helpers.targets import Target, resolve
from sagemaker_standin.ports import free_ports

CPU = Target("local_cpu", "local_cpu", 0, 2)

PROBE = textwrap.dedent("""
    import json, os, sys
    seen = {"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ),
            "train_files": sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"]))}
    os.makedirs(os.environ["SM_MODEL_DIR"], exist_ok=True)
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "probe.json"), "w") as f:
        json.dump(seen, f)
    print("[final] probe=1")
""")


def test_job_sees_the_container_contract(runner, probe_dir, small_catalog, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "must-not-leak")
    monkeypatch.setenv("PYTHONPATH", "/somewhere/the/notebook/added")
    monkeypatch.setenv("PWD", "/a/stale/directory")
    monkeypatch.setenv("NOTEBOOK_ONLY", "1")
    job = Job(
        "probe",
        {"epochs": 3, "lr": 0.01, "smoke": True},
        catalog_channels(small_catalog),
        entry_point="probe.py",
        source_dir=probe_dir,
    )
    result = runner.run(job, CPU)
    host = result.run_dir / "algo-1"
    seen = json.loads((result.model_dir / "probe.json").read_text())
    env = seen["env"]
    assert seen["argv"] == ["--epochs", "3", "--lr", "0.01", "--smoke", "true"]
    assert seen["cwd"] == str(host / "input" / "data" / "code")
    assert env["SM_CHANNEL_TRAIN"] == str(host / "input" / "data" / "train")
    assert env["SM_MODEL_DIR"] == str(host / "model") and env["SM_OUTPUT_DATA_DIR"] == str(host / "output" / "data")
    assert json.loads(env["SM_HPS"]) == {"epochs": 3, "lr": 0.01, "smoke": True}
    assert json.loads(env["SM_HOSTS"]) == ["algo-1"] and env["SM_CURRENT_HOST"] == "algo-1"
    assert env["SM_NUM_GPUS"] == "0" and env["OMP_NUM_THREADS"] == "2" and env["HF_HUB_OFFLINE"] == "1"
    # the container starts clean: nothing of the notebook's environment but what is documented
    assert not {"AWS_SECRET_ACCESS_KEY", "PYTHONPATH", "NOTEBOOK_ONLY"} & set(env)
    assert env["PWD"] == seen["cwd"]
    local_additions = {
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "GLOO_SOCKET_IFNAME",
        "CUDA_VISIBLE_DEVICES",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "TOKENIZERS_PARALLELISM",
        "TRAINING_JOB_NAME",
    }
    unexplained = (
        {k for k in env if not k.startswith(("SM_", "HF_", "TRANSFORMERS_", "LC_"))}
        - local_additions
        - set(local_runner._INHERITED)
        - {"PWD"}
    )
    assert not unexplained, f"variables a SageMaker container would not have: {sorted(unexplained)}"
    assert {"part-00000.csv", "labels.json", "tokenizer.json"} <= set(seen["train_files"])
    config = json.loads((host / "input" / "config" / "hyperparameters.json").read_text())
    assert config == {"epochs": "3", "lr": "0.01", "smoke": "true"}  # strings, as the service stores them
    assert result.status == "Completed" and result.metrics == {"probe": 1}


def test_two_hosts_get_their_own_directories_and_ranks(runner, probe_dir, small_catalog):
    job = Job(
        "probe2",
        {},
        catalog_channels(small_catalog),
        entry_point="probe.py",
        source_dir=probe_dir,
        instance_count=2,
        processes_per_host=1,
        environment={"PROBE": "1"},
    )
    prepared = runner.prepare(job, CPU)
    run_dir, commands = prepared.run_dir, prepared.commands
    assert [c[0] for c in commands] == ["algo-1", "algo-2"]
    env2 = commands[1][2]
    assert env2["SM_CURRENT_HOST"] == "algo-2" and env2["SM_CURRENT_HOST_RANK"] == "1"
    assert "--nnodes=2" in commands[1][1] and "--node_rank=1" in commands[1][1]
    assert env2["OMP_NUM_THREADS"] == "1"  # two cores shared by two hosts
    assert (run_dir / "algo-2" / "input" / "data" / "train" / "labels.json").is_file()


def test_missing_channel_fails_before_anything_is_written(runner, tmp_path):
    job = Job("nochan", {}, {"train": tmp_path / "nowhere"})
    with pytest.raises(JobCheckError, match="channel 'train'.*missing or empty.*catalog_generator.catalog build"):
        runner.run(job, CPU)
    assert not (tmp_path / "jobs").exists()


def test_bad_hyperparameters_are_refused_before_anything_is_written(runner, small_catalog, tmp_path):
    job = Job("typo", {"epochs": 1, "bucket_by_lenght": True, "precision": "bf32"}, catalog_channels(small_catalog))
    with pytest.raises(
        JobCheckError,
        match="train.py: no option 'bucket_by_lenght' .did you mean 'bucket_by_length'.."
        ": it would be ignored; precision='bf32' is not one of auto, fp32",
    ):
        runner.run(job, CPU)
    assert not (tmp_path / "jobs").exists()


def test_more_processes_than_gpus_is_refused(runner, small_catalog):
    job = Job("toomany", {}, catalog_channels(small_catalog), processes_per_host=4)
    with pytest.raises(JobCheckError, match="4 processes per host.*at most 1"):
        runner.run(job, Target("local_gpu", "local_gpu", 1, 8))


@pytest.mark.parametrize(
    "name,hint",
    [
        ("locl", "'local'"),
        ("gpu", "local_gpu"),
        ("", "Choose one of"),
        ("p4d.24xlarge", "did you mean 'ml.p4d.24xlarge'"),
        (5, "must be a string"),
    ],
)
def test_unknown_target_says_what_to_use(name, hint):
    with pytest.raises(TargetError, match=hint):
        resolve(name)


def test_an_instance_type_in_capitals_is_the_catalogue_s_name():
    assert resolve("ML.G5.2XLARGE").name == "ml.g5.2xlarge"


def test_local_gpu_without_a_gpu_is_refused(monkeypatch):
    monkeypatch.setattr("helpers.targets.local_gpu_count", lambda: 0)
    with pytest.raises(TargetError, match="needs an NVIDIA GPU"):
        resolve("local_gpu")


def test_a_hub_checkpoint_is_refused_before_anything_runs(runner, small_catalog):
    job = Job("hub", {**TINY, "hub_checkpoint": "distilbert-base-multilingual-cased"}, catalog_channels(small_catalog))
    with pytest.raises(JobCheckError, match="local jobs never leave this machine: run it on an ml.. target"):
        runner.run(job, CPU)
    assert not (runner.runs_dir / "hub").exists()


@pytest.mark.slow
def test_failed_job_shows_its_error_not_just_an_exit_code(runner, small_catalog):
    # settings each fine alone but refused together by the script itself: only the job can find this out
    job = Job("broken", {**TINY, "max_length": 64, "pad_to": 16}, catalog_channels(small_catalog))
    with pytest.raises(JobFailed) as err:
        runner.run(job, CPU)
    assert "--pad_to 16 is narrower than --max_length 64" in str(err.value)
    assert err.value.result.status == "Failed"
    failure = (err.value.result.run_dir / "algo-1" / "output" / "failure").read_text()
    assert "narrower" in failure  # SageMaker's FailureReason comes from this file


def _start_and_wait_for_training(runner: LocalRunner, job: Job):
    running = runner.start(job, CPU)
    step = None
    while step is None:  # wait for training to be under way
        host, line, at = running.lines.get(timeout=120)
        assert line is not None, "job ended before training started"
        running._take(host, line, at, False)
        step = (parse_metric_line(line) or {}).get("step") if line.startswith("[train]") else None
    return running, step


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
def test_stop_drops_sigterm_at_the_first_process_then_kills_everything(small_catalog, tmp_path):
    """StopTrainingJob as an SDK v3 job meets it: SIGTERM to the container's first process (a bash that drops it),
    so training goes on through the grace period, then SIGKILL ends every process; none is left."""
    runner = LocalRunner(runs_dir=tmp_path / "jobs", echo=False, check=False)
    job = Job("stopme", {**TINY, "epochs": 50, "subset": 2000, "log_every": 1}, catalog_channels(small_catalog))
    running, first = _start_and_wait_for_training(runner, job)
    started, signalled_at = time.monotonic(), first
    while signalled_at < first + 3:  # a few steps, to time one on this machine as loaded as it is now
        host, line, at = running.lines.get(timeout=120)
        assert line is not None, "job ended before it was stopped"
        running._take(host, line, at, False)
        signalled_at = (
            (parse_metric_line(line) or {}).get("step", signalled_at) if line.startswith("[train]") else signalled_at
        )
    step_s = (time.monotonic() - started) / (signalled_at - first)
    pids = running.processes()
    assert len(pids) >= 2  # the container's first process and train.py
    running.stop(grace=max(3.0, 8 * step_s))  # room for several steps however slow the machine is right now
    result = running.wait()
    assert result.status == "Stopped" and result.exit_code == -signal.SIGKILL
    assert max(h["step"] for h in result.history if h["kind"] == "train") > signalled_at + 1  # trained on
    assert not _alive(pids)


@pytest.mark.slow
def test_a_forwarded_sigterm_reaches_the_script(small_catalog, tmp_path):
    runner = LocalRunner(runs_dir=tmp_path / "jobs", echo=False, check=False, forward_sigterm=True)
    job = Job("stopme", {**TINY, "epochs": 50, "subset": 2000}, catalog_channels(small_catalog))
    running, _ = _start_and_wait_for_training(runner, job)
    running.signal(signal.SIGTERM)
    result = running.wait()
    assert result.status == "Stopped" and result.exit_code == -signal.SIGTERM  # no handler: the default, death


def test_run_job_dispatches_local_targets(small_catalog, tmp_path, probe_dir):
    result = run_job(
        Job("dispatch", {}, catalog_channels(small_catalog), entry_point="probe.py", source_dir=probe_dir),
        resolve("local_cpu"),
        runs_dir=tmp_path / "jobs",
        echo=False,
    )
    assert result.status == "Completed"
    started = run_job(
        Job("dispatch", {}, catalog_channels(small_catalog), entry_point="probe.py", source_dir=probe_dir),
        resolve("local_cpu"),
        runs_dir=tmp_path / "jobs",
        echo=False,
        wait=False,
    )
    assert started.processes() or started.procs  # started, and handed back without waiting
    assert started.wait().status == "Completed"


@pytest.mark.parametrize(
    "options, says",
    [
        ({"attendee": "alice"}, "'attendee' for a job on this machine.*need an ml.. target"),
        ({"runs_dirr": "x"}, "did you mean 'runs_dir' for 'runs_dirr'"),
    ],
)
def test_run_job_refuses_an_option_a_local_job_does_not_take_naming_those_it_does(options, says, tmp_path):
    with pytest.raises(UnknownOption, match=says) as refused:
        run_job(Job("x", {}, {}), resolve("local_cpu"), **options)
    assert "runs_dir, echo, check" in str(refused.value) and "wait=False" in str(refused.value)
    assert isinstance(refused.value, TypeError)  # what a wrong keyword always was
    assert not (tmp_path / "jobs").exists()


@pytest.mark.parametrize(
    "fields, error, says",
    [
        (dict(name="../escaped"), ValueError, "use letters, digits"),
        (dict(name="has space"), ValueError, "use letters, digits"),
        (dict(name="ok", instance_count="2"), TypeError, "instance_count must be a whole number, got '2'"),
        (dict(name="ok", max_runtime_s=3600.5), TypeError, "max_runtime_s must be a whole number"),
    ],
)
def test_a_job_refuses_a_bad_name_or_count_when_it_is_made(fields, error, says):
    with pytest.raises(error, match=says):
        Job(**fields)


def test_a_malformed_data_file_is_refused_before_anything_is_written(runner, small_catalog, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(small_catalog, bad)
    part = next((bad / "validation").glob("*.csv"))
    part.write_bytes(part.read_text(encoding="utf-8").encode("cp949", errors="replace"))
    with pytest.raises(JobCheckError, match="channel 'validation': .*not UTF-8|channel 'validation': .*UTF-8"):
        runner.run(Job("badcsv", {"epochs": 1}, catalog_channels(bad)), CPU)
    assert not (tmp_path / "jobs").exists()


@pytest.mark.slow
def test_a_checkpointing_job_keeps_its_checkpoints_in_its_own_run_directory(runner, small_catalog):
    """Without Job(checkpoints=True) a script that checkpoints still gets a fresh directory of its own, as every
    SageMaker job does: never the machine's /opt/ml/checkpoints, never another job's."""
    outside = Path("/opt/ml/checkpoints")
    before = sorted(outside.iterdir()) if outside.is_dir() else None
    job = Job(
        "ckpt",
        {**TINY, "subset": 320, "epochs": 1, "checkpoint_every": 4, "eval_subset": 64},
        catalog_channels(small_catalog),
    )
    first = runner.run(job, CPU)
    assert sorted(p.name for p in (first.run_dir / "algo-1" / "checkpoints").iterdir() if p.name.startswith("step-"))
    second = runner.run(job, CPU)
    assert not [h for h in second.history if h["kind"] == "checkpoint" and h.get("event") == "resumed"]
    assert (sorted(outside.iterdir()) if outside.is_dir() else None) == before


@pytest.mark.slow
def test_a_rendezvous_port_taken_before_torchrun_binds_it_is_named_and_launched_again(
    small_catalog, tmp_path, probe_dir, monkeypatch
):
    """Another process takes the port between the runner choosing it and torchrun binding it: the launch fails
    before any training, says so, and the runner launches again on another port; taken every time, the job's
    failure names the cause instead of 'exit code 1'."""
    import socket

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    offered = []

    def taken_first(ports=iter([taken])):
        offered.append(next(ports, None) or free_ports(1)[0])
        return offered[-1]

    job = Job(
        "twoproc",
        {},
        catalog_channels(small_catalog),
        entry_point="probe.py",
        source_dir=probe_dir,
        processes_per_host=2,
    )
    with held:
        monkeypatch.setattr(local_runner, "free_port", taken_first)
        result = LocalRunner(runs_dir=tmp_path / "jobs", echo=False).run(job, CPU)
        assert result.status == "Completed" and offered[0] == taken and len(offered) == 2
        monkeypatch.setattr(local_runner, "free_port", lambda: taken)
        failed = LocalRunner(runs_dir=tmp_path / "again", echo=False, check=False).run(job, CPU)
    assert failed.status == "Failed" and failed.failure_reason.startswith("torchrun's rendezvous port was taken")
    assert len(list((tmp_path / "again").iterdir())) == local_runner.PORT_ATTEMPTS
