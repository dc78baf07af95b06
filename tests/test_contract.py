"""The local runner's container contract, held against the installed SageMaker SDK's own container driver, and what
the container side (labs/src/container.py) adds to every entry script."""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import shlex
import signal
import subprocess
import sys
import textwrap

import pytest
from conftest import SRC

from helpers.contract import HostConfig, Layout, container_env, hyperparameter_args, sdk_driver_dir

HPS = {
    "epochs": 2,
    "lr": 0.001,
    "model_size": "tiny",
    "precision": "bf16",
    "smoke": False,
    "layers": [1, 2],
    "mp_parameters": {"tensor_parallel_degree": 2},
}


def _sdk_module(name: str, relative: str):
    path = sdk_driver_dir() / relative
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the driver puts its own folder on sys.path for `common.utils`
    return module


@pytest.fixture(scope="module")
def sdk_env():
    return _sdk_module("sm_driver_environment", "scripts/environment.py")


def _exports(path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        assert line.startswith("export ")
        key, _, value = line[len("export ") :].partition("=")
        out[key] = shlex.split(value)[0] if value not in ("''",) else ""
    return out


@pytest.mark.parametrize(
    "hosts,distributed", [(["algo-1"], None), (["algo-2", "algo-1"], {"process_count_per_node": 4, "smp": None})]
)
def test_env_matches_the_sdk_container_driver(tmp_path, monkeypatch, sdk_env, hosts, distributed):
    cfg = HostConfig(
        "lab-job-1",
        "algo-2" if len(hosts) > 1 else "algo-1",
        hosts,
        "ml.g5.12xlarge",
        {"train": "File", "validation": "FastFile"},
        HPS,
        network_interface="eth0",
    )
    monkeypatch.setenv("TRAINING_JOB_NAME", cfg.job_name)
    monkeypatch.setattr(sdk_env, "read_source_code_json", lambda: {"entry_script": "train.py"})
    monkeypatch.setattr(sdk_env, "read_distributed_json", lambda: distributed or {})
    monkeypatch.setattr(sdk_env, "num_gpus", lambda: 0)
    exported = tmp_path / "sm_training.env"
    sdk_env.set_env(cfg.resource_config(), cfg.input_data_config(), cfg.hyperparameters_json(), str(exported))
    theirs = _exports(exported)

    root = tmp_path / "opt-ml"
    ours = container_env(
        Layout(root),
        cfg,
        num_gpus=0,
        num_cpus=multiprocessing.cpu_count(),
        entry_script="train.py",
        distributed=distributed,
    )
    ours.pop("TRAINING_JOB_NAME")  # the platform sets it, not the driver
    # the only difference allowed: the job's /opt/ml lives under a run directory
    ours = {k: v.replace(str(root), "/opt/ml") for k, v in ours.items()}
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        assert ours[key] == theirs[key], key


def test_hyperparameters_become_the_same_cli_arguments():
    utils = _sdk_module("sm_driver_utils", "common/utils.py")
    strings = HostConfig("j", "algo-1", ["algo-1"], "local_cpu", {}, HPS).hyperparameters_json()
    assert hyperparameter_args(strings) == utils.hyperparameters_to_cli_args(strings)
    assert hyperparameter_args(strings)[:2] == ["--epochs", "2"]
    assert "--smoke" in hyperparameter_args(strings) and "false" in hyperparameter_args(strings)


def test_torchrun_command_matches_the_sdk_driver(tmp_path, monkeypatch):
    """The runner launches what the SDK's torchrun driver would, plus a loopback rendezvous."""
    monkeypatch.syspath_prepend(str(sdk_driver_dir()))
    driver = _sdk_module("sm_torchrun_driver", "distributed_drivers/torchrun_driver.py")
    cfg = HostConfig("j", "algo-1", ["algo-1"], "local_cpu", {"train": "File"}, {"epochs": 1, "lr": 0.01})
    env = container_env(Layout(tmp_path), cfg, 0, 2, "train.py", {"process_count_per_node": 2, "smp": None})
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    theirs = driver.create_commands()
    assert theirs == ["torchrun", "--nnodes=1", "--nproc_per_node=2", "train.py", "--epochs", "1", "--lr", "0.01"]

    from helpers.job_spec import Job
    from helpers.local.runner import LocalRunner
    from helpers.targets import Target

    job = Job("cmd", {"epochs": 1, "lr": 0.01}, {}, processes_per_host=2)
    runner = LocalRunner(runs_dir=tmp_path / "jobs", echo=False)
    prepared = runner.prepare(job, Target("local_cpu", "local_cpu", 0, 2))
    run_dir, ours = prepared.run_dir, prepared.commands[0][1]
    assert ours[:3] == [sys.executable, "-m", "torch.distributed.run"]
    # the local additions: the rendezvous on loopback, and this host's own checkpoint directory (no SM_* variable
    # names /opt/ml/checkpoints, and a local job must not write the machine's)
    assert ours[-2:] == ["--checkpoint_dir", str(tmp_path / "jobs" / run_dir.name / "algo-1" / "checkpoints")]
    assert [a for a in ours[3:-2] if not a.startswith(("--master_", "--node_rank"))] == theirs[1:]


STALLED_RANK = textwrap.dedent("""
    import time
    import container

    def waiting_in_a_collective(args):
        print("ready", flush=True)
        time.sleep(60)

    container.run(waiting_in_a_collective, lambda: None)
""")


def test_a_live_rank_prints_its_python_stacks_on_sigusr1():
    """A runner (or a person) asks a hung rank where it is without stopping it: the stacks go to the job log."""
    rank = subprocess.Popen(
        [sys.executable, "-c", STALLED_RANK], cwd=SRC, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert rank.stdout.readline() == "ready\n"
        rank.send_signal(signal.SIGUSR1)
        with pytest.raises(subprocess.TimeoutExpired):  # still running: the signal did not end it
            rank.wait(timeout=1)
    finally:
        rank.kill()
    stacks = rank.communicate()[1]
    assert "most recent call first" in stacks and "in waiting_in_a_collective" in stacks, stacks


def test_a_base_exception_from_the_script_is_recorded_as_its_failure(tmp_path):
    """torch.distributed.checkpoint's CheckpointException derives from BaseException, not Exception: the job's
    failure reason must still be written, and the rank must leave at once (a rank that unwinds can hang)."""
    script = textwrap.dedent("""
        import container

        class SaveFailed(BaseException):
            pass

        def main(args):
            raise SaveFailed("rank 1: no space left on device")

        container.run(main, lambda: None)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=SRC, env={**os.environ, "SM_OUTPUT_DIR": str(tmp_path)}, capture_output=True
    )
    assert done.returncode == 1
    assert (tmp_path / "failure").read_text() == "SaveFailed: rank 1: no space left on device\n"
