"""The SDK's real container code run on this machine, side by side with the local runner that imitates it.

Lab 01's request is built offline. A private mount namespace gets its own ``/opt/ml``, laid out from the request
(config files) and from what the SDK staged for it (the ``code`` and ``sm_drivers`` channels, the data); then the
request's own ``ContainerEntrypoint`` and ``ContainerArguments`` run as the first process of a PID namespace, as in a
container: ``/bin/bash -c "... sm_train.sh"``, the SDK's driver, then ``train.py``. A copy-on-write layer over the
environment keeps the driver's ``pip install`` out of it, and pip gets no index: nothing is downloaded.

Needs root and util-linux's ``unshare`` (skipped with the reason where that is not permitted).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import SRC, TINY

from helpers.contract import HostConfig
from helpers.job_spec import Job, catalog_channels, parse_metric_line
from helpers.jobs import run_job
from helpers.local.runner import LocalRunner
from helpers.targets import local_cpu_count, resolve
from sagemaker_standin.offline_account import OfflineAWS

VENV = Path(sys.prefix)
TARGET = "ml.g5.2xlarge"  # lab 01's real target: one GPU, so the SDK's basic script driver


def _unshare_problem() -> str | None:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return "needs Linux and util-linux's unshare"
    if os.geteuid() != 0:
        return "needs root to mount a private /opt/ml"
    probe = subprocess.run(
        [
            "unshare",
            "-m",
            "-p",
            "-f",
            "--mount-proc",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount -t tmpfs tmpfs /opt",
        ],
        capture_output=True,
        text=True,
    )
    return f"unshare is not permitted here: {probe.stderr.strip()}" if probe.returncode else None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(_unshare_problem()), reason=_unshare_problem() or "")]


def lab01_job(catalog: Path, tmp_path: Path, **overrides) -> Job:
    """Lab 01's job in smoke size. Its source is labs/src but for requirements.txt: the driver still runs pip on
    it, but this environment is no DLC (Python 3.11 with transformers 5, which the file's 3.11 line excludes), so
    the copy names only what is installed here, and nothing is downloaded."""
    source = tmp_path / "src"
    shutil.copytree(SRC, source, ignore=shutil.ignore_patterns("__pycache__"))
    (source / "requirements.txt").write_text("transformers\n")
    hp = {
        **TINY,
        "epochs": 1,
        "subset": 640,
        "eval_subset": 128,
        "evals_per_epoch": 1,
        "threads": 1,
        "checkpoint_every": 1000,
        **overrides,
    }  # checkpointing on: the script listens for SIGTERM
    return Job("lab01-single", hp, catalog_channels(catalog), source_dir=source)


def build_request(job: Job) -> tuple[dict, dict[tuple[str, str], bytes]]:
    recorder = OfflineAWS()
    dry = run_job(job, resolve(TARGET), session=recorder, echo=False)
    return dry.request, recorder.bodies


def lay_out(request: dict, bodies: dict[tuple[str, str], bytes], opt_ml: Path) -> None:
    """What SageMaker writes to /opt/ml before the entrypoint starts, from the request and the staged objects."""
    config = opt_ml / "input" / "config"
    config.mkdir(parents=True)
    default_mode = request["AlgorithmSpecification"]["TrainingInputMode"]
    channels = {c["ChannelName"]: c for c in request["InputDataConfig"]}
    host = HostConfig(
        request["TrainingJobName"],
        "algo-1",
        ["algo-1"],
        request["ResourceConfig"]["InstanceType"],
        {n: c.get("InputMode", default_mode) for n, c in channels.items()},
        network_interface="lo",
    )
    (config / "hyperparameters.json").write_text(json.dumps(request["HyperParameters"]))
    (config / "resourceconfig.json").write_text(json.dumps(host.resource_config()))
    (config / "inputdataconfig.json").write_text(json.dumps(host.input_data_config()))
    for name, channel in channels.items():
        bucket, _, prefix = channel["DataSource"]["S3DataSource"]["S3Uri"][len("s3://") :].partition("/")
        found = [(k, v) for (b, k), v in bodies.items() if b == bucket and k.startswith(prefix)]
        assert found, f"nothing was staged for channel {name} under {prefix}"
        for key, body in found:
            path = opt_ml / "input" / "data" / name / key[len(prefix) :].lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
    for d in ("model", "output/data", "checkpoints"):
        (opt_ml / d).mkdir(parents=True)


def container(request: dict, opt_ml: Path, scratch: Path) -> subprocess.Popen:
    """The request's entrypoint as PID 1 of fresh PID and mount namespaces, /opt/ml bound to ``opt_ml``."""
    spec = request["AlgorithmSpecification"]
    command = spec["ContainerEntrypoint"] + spec["ContainerArguments"]
    setup = (
        f"mount -t tmpfs tmpfs /opt && mkdir -p /opt/ml /opt/.up /opt/.work && mount --bind {opt_ml} /opt/ml && "
        f"mount -t overlay overlay -o lowerdir={VENV},upperdir=/opt/.up,workdir=/opt/.work {VENV} && "
        f"exec env -i PATH={VENV}/bin:/usr/local/bin:/usr/bin:/bin HOME={scratch} LANG=C.UTF-8 PIP_NO_INDEX=1 "
        f'PIP_DISABLE_PIP_VERSION_CHECK=1 TRAINING_JOB_NAME={request["TrainingJobName"]} "$@"'
    )
    return subprocess.Popen(
        ["unshare", "-m", "-p", "-f", "--mount-proc", "--propagation", "private", "sh", "-c", setup, "sh", *command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
        cwd="/",
    )


class Log:
    """A process's output read in the background; ``steps`` are the training steps it logged."""

    def __init__(self, stream=None):
        self.lines: list[str] = []
        self.new: queue.Queue[str | None] = queue.Queue()
        if stream is not None:
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.feed(line)
        self.new.put(None)

    def feed(self, line: str | None) -> None:
        self.lines.append(line.rstrip("\n"))
        self.new.put(line)

    def rows(self, kind: str) -> list[dict]:
        return [r for r in map(parse_metric_line, self.lines) if r and r["kind"] == kind]

    def wait_for_steps(self, n: int, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while len(self.rows("train")) < n:
            assert self.new.get(timeout=max(0.1, deadline - time.monotonic())) is not None, "\n".join(self.lines)


def start_container(job: Job, tmp_path: Path) -> tuple[dict, Path, subprocess.Popen, Log]:
    """``job``'s request built offline, /opt/ml laid out from it, and its entrypoint started: its log follows."""
    request, bodies = build_request(job)
    opt_ml = tmp_path / "opt_ml"
    lay_out(request, bodies, opt_ml)
    real = container(request, opt_ml, tmp_path)
    return request, opt_ml, real, Log(real.stdout)


def train_py(root_pid: int) -> psutil.Process:
    procs = [
        p
        for p in psutil.Process(root_pid).children(recursive=True)
        if any(a.endswith("train.py") for a in p.cmdline()) and "torch.distributed.run" not in p.cmdline()
    ]
    assert len(procs) == 1, procs
    return procs[0]


def sm_variables(process: psutil.Process, root: str) -> dict[str, str]:
    """The SM_* variables a process sees, with its /opt/ml written as <ml> (and JSON decoded where it is JSON)."""
    out = {}
    for key, value in process.environ().items():
        if key.startswith("SM_"):
            text = value.replace(root, "<ml>")
            try:
                out[key] = json.loads(text)
            except json.JSONDecodeError:
                out[key] = text
    return out


# what the real container has that the local runner leaves out: the SDK's own channels for the code and drivers
DRIVER_CHANNELS = {"code", "sm_drivers"}


def _without_driver_channels(value):
    if isinstance(value, dict):
        return {k: _without_driver_channels(v) for k, v in value.items() if k not in DRIVER_CHANNELS}
    if isinstance(value, list):
        return [_without_driver_channels(v) for v in value if not (isinstance(v, str) and v in DRIVER_CHANNELS)]
    return value


def _comparable(env: dict) -> dict:
    """``env`` without the rendezvous address and port, wherever they appear."""
    env = {k: v for k, v in env.items() if k not in ("SM_MASTER_ADDR", "SM_MASTER_PORT")}
    rendezvous = ("master_addr", "master_port")
    env["SM_TRAINING_ENV"] = {k: v for k, v in env["SM_TRAINING_ENV"].items() if k not in rendezvous}
    return env


def _counting_usable_cores(env: dict) -> dict:
    """``env`` with the runner's count of cores. The toolkit counts the machine's (``multiprocessing.cpu_count()``),
    the runner those this process may run on (its affinity): the same on a whole machine, fewer for the runner in
    a process pinned to a share of them, as each of the test suite's workers is."""
    assert env["SM_NUM_CPUS"] == env["SM_TRAINING_ENV"]["num_cpus"] == os.cpu_count()
    cores = local_cpu_count()
    return {**env, "SM_NUM_CPUS": cores, "SM_TRAINING_ENV": {**env["SM_TRAINING_ENV"], "num_cpus": cores}}


def _named(value, old: str, new: str):
    return json.loads(json.dumps(value).replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]))


def test_lab01_request_trains_in_the_real_container_with_the_local_runner_s_environment(small_catalog, tmp_path):
    job = lab01_job(small_catalog, tmp_path, log_every=1)
    request, opt_ml, real, log = start_container(job, tmp_path)
    log.wait_for_steps(1)
    real_env = sm_variables(train_py(real.pid), "/opt/ml")
    assert real.wait(timeout=300) == 0, "\n".join(log.lines[-30:])
    assert log.rows("final") and (opt_ml / "model" / "model.safetensors").is_file()
    assert any("basic_script_driver.py" in line for line in log.lines)  # it was the SDK's driver that ran it

    seen = {}

    def capture(host: str, line: str) -> None:
        if not seen and line.startswith("[train]"):
            seen.update(sm_variables(train_py(live.procs["algo-1"].pid), str(live.run_dir / "algo-1")))

    live = LocalRunner(tmp_path / "jobs", echo=False, on_line=capture, job_name=request["TrainingJobName"]).start(
        job, resolve("local_cpu")
    )
    local = live.wait()
    assert local.status == "Completed"
    # documented differences: the SDK's own channels (code, sm_drivers), the instance type (the local target names
    # itself) and the rendezvous (a free port on loopback instead of algo-1:7777)
    assert set(real_env) - set(seen) == {"SM_CHANNEL_CODE", "SM_CHANNEL_SM_DRIVERS"}, sorted(set(real_env) ^ set(seen))
    assert (seen["SM_MASTER_ADDR"], real_env["SM_MASTER_ADDR"], real_env["SM_MASTER_PORT"]) == (
        "127.0.0.1",
        "algo-1",
        7777,
    )
    real_env = _comparable(_without_driver_channels(_named(_counting_usable_cores(real_env), TARGET, "local_cpu")))
    differing = {k: (real_env.get(k), v) for k, v in _comparable(seen).items() if real_env.get(k) != v}
    assert not differing, differing
    assert len(seen) >= 30


def sigterm_effect(log: Log, first_process: int, alive) -> dict:
    """SIGTERM to the container's first process once training runs: does training go on, does the script save?"""
    log.wait_for_steps(2)
    before = len(log.rows("train"))
    os.kill(first_process, signal.SIGTERM)
    log.wait_for_steps(before + 5, timeout=60)
    return {
        "trained on": len(log.rows("train")) >= before + 5,
        "still running": alive(),
        "saved on the signal": any(r.get("reason") == "signal" for r in log.rows("checkpoint")),
    }


def test_sigterm_to_the_first_process_has_the_same_effect_in_the_real_container_and_the_local_runner(
    small_catalog, tmp_path
):
    job = lab01_job(small_catalog, tmp_path, epochs=50, subset=2000, log_every=1)
    _, _, real, log = start_container(job, tmp_path)
    log.wait_for_steps(2)
    pid1 = psutil.Process(real.pid).children()[0].pid  # unshare forks: its child is the namespace's PID 1
    try:
        assert Path(f"/proc/{pid1}/cmdline").read_bytes().split(b"\0")[0] == b"/bin/bash"
        real_effect = sigterm_effect(log, pid1, lambda: train_py(real.pid).is_running())
    finally:
        os.kill(pid1, signal.SIGKILL)  # the end of the grace period: the namespace ends with its first process
    real.wait(timeout=30)

    lines = Log()
    live = LocalRunner(tmp_path / "jobs", echo=False, check=False, on_line=lambda host, line: lines.feed(line)).start(
        job, resolve("local_cpu")
    )
    threading.Thread(target=live.wait, daemon=True).start()
    try:
        local_effect = sigterm_effect(
            lines, live.procs["algo-1"].pid, lambda: train_py(live.procs["algo-1"].pid).is_running()
        )
        pids = live.processes()
    finally:
        live.kill()
    assert real_effect == local_effect == {"trained on": True, "still running": True, "saved on the signal": False}
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
