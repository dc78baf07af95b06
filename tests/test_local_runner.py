"""The Docker-free local runner: layout, environment, launching, failures and stopping."""
from __future__ import annotations

import json
import shutil
import signal
import sys
import textwrap

import pytest

from conftest import TINY
from helpers.jobs import Job, catalog_channels, run_job
from helpers.local_runner import JobFailed, JobSetupError, LocalRunner
from helpers.targets import Target, TargetError, resolve

CPU = Target("local_cpu", "local_cpu", 0, 2)

PROBE = textwrap.dedent('''
    import json, os, sys
    seen = {"argv": sys.argv[1:], "cwd": os.getcwd(), "env": {k: v for k, v in os.environ.items()
            if k.startswith(("SM_", "OMP_", "HF_", "AWS_", "TRAINING_", "GLOO_"))},
            "train_files": sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"]))}
    os.makedirs(os.environ["SM_MODEL_DIR"], exist_ok=True)
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "probe.json"), "w") as f:
        json.dump(seen, f)
    print("[final] probe=1")
''')


def test_job_sees_the_container_contract(runner, probe_dir, small_catalog, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "must-not-leak")
    job = Job("probe", {"epochs": 3, "lr": 0.01, "smoke": True}, catalog_channels(small_catalog),
              entry_point="probe.py", source_dir=probe_dir)
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
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert {"part-00000.csv", "labels.json", "tokenizer.json"} <= set(seen["train_files"])
    config = json.loads((host / "input" / "config" / "hyperparameters.json").read_text())
    assert config == {"epochs": "3", "lr": "0.01", "smoke": "true"}  # strings, as the service stores them
    assert result.status == "Completed" and result.metrics == {"probe": 1}


def test_two_hosts_get_their_own_directories_and_ranks(runner, probe_dir, small_catalog):
    job = Job("probe2", {}, catalog_channels(small_catalog), entry_point="probe.py", source_dir=probe_dir,
              instance_count=2, processes_per_host=1, environment={"PROBE": "1"})
    run_dir, commands = runner.prepare(job, CPU)
    assert [c[0] for c in commands] == ["algo-1", "algo-2"]
    env2 = commands[1][2]
    assert env2["SM_CURRENT_HOST"] == "algo-2" and env2["SM_CURRENT_HOST_RANK"] == "1"
    assert "--nnodes=2" in commands[1][1] and "--node_rank=1" in commands[1][1]
    assert env2["OMP_NUM_THREADS"] == "1"  # two cores shared by two hosts
    assert (run_dir / "algo-2" / "input" / "data" / "train" / "labels.json").is_file()


def test_missing_channel_fails_before_anything_is_written(runner, tmp_path):
    job = Job("nochan", {}, {"train": tmp_path / "nowhere"})
    with pytest.raises(JobSetupError, match="channel 'train'.*missing or empty.*helpers.catalog build"):
        runner.run(job, CPU)
    assert not (tmp_path / "jobs").exists()


def test_bad_hyperparameters_are_refused_before_anything_is_written(runner, small_catalog, tmp_path):
    job = Job("typo", {"epochs": 1, "bucket_by_lenght": True, "precision": "bf32"}, catalog_channels(small_catalog))
    with pytest.raises(JobSetupError, match="train.py: no option 'bucket_by_lenght' .did you mean 'bucket_by_length'.."
                                            ": it would be ignored; precision='bf32' is not one of auto, fp32"):
        runner.run(job, CPU)
    assert not (tmp_path / "jobs").exists()


def test_more_processes_than_gpus_is_refused(runner, small_catalog):
    job = Job("toomany", {}, catalog_channels(small_catalog), processes_per_host=4)
    with pytest.raises(JobSetupError, match="4 processes per host.*at most 1"):
        runner.run(job, Target("local_gpu", "local_gpu", 1, 8))


@pytest.mark.parametrize("name,hint", [("locl", "'local'"), ("gpu", "local_gpu"), ("", "Choose one of"),
                                       ("p4d.24xlarge", "did you mean 'ml.p4d.24xlarge'"), (5, "must be a string")])
def test_unknown_target_says_what_to_use(name, hint):
    with pytest.raises(TargetError, match=hint):
        resolve(name)


def test_an_instance_type_in_capitals_is_the_catalogue_s_name():
    assert resolve("ML.G5.2XLARGE").name == "ml.g5.2xlarge"


def test_local_gpu_without_a_gpu_is_refused(monkeypatch):
    monkeypatch.setattr("helpers.targets.local_gpu_count", lambda: 0)
    with pytest.raises(TargetError, match="needs an NVIDIA GPU"):
        resolve("local_gpu")


def test_failed_job_shows_its_error_not_just_an_exit_code(runner, small_catalog):
    # settings each fine alone but refused together by the script itself: only the job can find this out
    job = Job("broken", {**TINY, "max_length": 64, "pad_to": 16}, catalog_channels(small_catalog))
    with pytest.raises(JobFailed) as err:
        runner.run(job, CPU)
    assert "--pad_to 16 is narrower than --max_length 64" in str(err.value)
    assert err.value.result.status == "Failed"
    failure = (err.value.result.run_dir / "algo-1" / "output" / "failure").read_text()
    assert "narrower" in failure  # SageMaker's FailureReason comes from this file


def test_stop_sends_sigterm_and_reports_stopped(small_catalog, tmp_path):
    lines = []
    runner = LocalRunner(runs_dir=tmp_path / "jobs", echo=False, check=False,
                         on_line=lambda host, line: lines.append(line))
    job = Job("stopme", {**TINY, "epochs": 50, "subset": 2000}, catalog_channels(small_catalog))
    running = runner.start(job, CPU)
    while not any(l.startswith("[train]") for l in lines):  # wait for training to be under way
        host, line = running.lines.get(timeout=120)
        assert line is not None, "job ended before training started"
        running._take(host, line, False)
    running.signal(signal.SIGTERM)
    result = running.wait()
    assert result.status == "Stopped" and result.exit_code == -signal.SIGTERM


def test_run_job_dispatches_local_targets(small_catalog, tmp_path, probe_dir):
    result = run_job(Job("dispatch", {}, catalog_channels(small_catalog), entry_point="probe.py",
                         source_dir=probe_dir), "local_cpu", runs_dir=tmp_path / "jobs", echo=False)
    assert result.status == "Completed"


@pytest.mark.parametrize("fields, error, says", [
    (dict(name="../escaped"), ValueError, "use letters, digits"),
    (dict(name="has space"), ValueError, "use letters, digits"),
    (dict(name="ok", instance_count="2"), TypeError, "instance_count must be a whole number, got '2'"),
    (dict(name="ok", max_runtime_s=3600.5), TypeError, "max_runtime_s must be a whole number"),
])
def test_a_job_refuses_a_bad_name_or_count_when_it_is_made(fields, error, says):
    with pytest.raises(error, match=says):
        Job(**fields)


def test_a_malformed_data_file_is_refused_before_anything_is_written(runner, small_catalog, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(small_catalog, bad)
    part = next((bad / "validation").glob("*.csv"))
    part.write_bytes(part.read_text(encoding="utf-8").encode("cp949", errors="replace"))
    with pytest.raises(JobSetupError, match="channel 'validation': .*not UTF-8|channel 'validation': .*UTF-8"):
        runner.run(Job("badcsv", {"epochs": 1}, catalog_channels(bad)), CPU)
    assert not (tmp_path / "jobs").exists()
