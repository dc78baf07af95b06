"""Run a training job on this machine as a SageMaker training container would, without Docker.

Each host gets an ``/opt/ml``-shaped folder under ``runs/jobs/<job>/<host>`` (configs, channels, code, model,
output, checkpoints); the script runs with the v3 driver's ``SM_*`` variables, ``--key value`` hyperparameters and
torchrun for more than one process. The started job is a :class:`~helpers.local.containers.LocalJob`.
"""

from __future__ import annotations

import difflib
import inspect
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from helpers import checks, folders, hyperparameters
from helpers.checks import findings
from helpers.contract import HostConfig, Layout, container_env, hyperparameter_args
from helpers.errors import JobCheckError, UnknownOption, WorkshopError
from helpers.job_spec import Job, runs_root
from helpers.local.containers import GRACE_S, PORT_TAKEN, STALL_S, Clock, LocalJob, Prepared
from helpers.results import JobResult
from helpers.targets import Target
from sagemaker_standin import JobInputs, StandInError, free_port, s3_channels

# All a job takes from the notebook's environment: where programs and libraries are, the user, the locale, the
# temporary directory and the GPUs it may use. A SageMaker container starts from its image's environment, so
# nothing else comes along (PYTHONPATH, credentials, a stale PWD, another job's SM_* or torchrun variables...).
_INHERITED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
)
_OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class JobFailed(WorkshopError, RuntimeError):
    """A job exited non-zero; the message carries its failure reason and the end of its log."""

    def __init__(self, message: str, result: JobResult):
        super().__init__(message)
        self.result = result


PORT_ATTEMPTS = 3  # launches of a job whose rendezvous port another process took before torchrun bound it


def port_taken(result: JobResult) -> bool:
    """A launch that failed, before any training step, because its rendezvous port was taken (EADDRINUSE)."""
    return (
        result.status == "Failed"
        and result.timings.get("launch_to_first_step") is None
        and result.failure_reason.startswith(PORT_TAKEN)
    )


def clean_environment(cwd: Path) -> dict[str, str]:
    """A container's starting environment: :data:`_INHERITED` and the locale, this Python first on ``PATH`` (the
    image's ``python3``), ``PWD`` the code directory the script starts in."""
    env = {k: v for k, v in os.environ.items() if k in _INHERITED or k.startswith("LC_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    env["PWD"] = str(cwd)
    return env


_NAME_MAX = 63  # SageMaker's TrainingJobName: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
_STAMP = "%Y%m%d-%H%M%S-%f"


def run_name(job_name: str, now: datetime | None = None) -> str:
    """``<name>-<timestamp>`` within SageMaker's 63 characters: the name part is shortened, never the timestamp
    (two runs of one job must not collide), and it follows SageMaker's rule (letters, digits, single dashes)."""
    stamp = (now or datetime.now()).strftime(_STAMP)
    stem = re.sub(r"[^A-Za-z0-9]+", "-", job_name).strip("-")[: _NAME_MAX - len(stamp) - 1].rstrip("-")
    return f"{stem or 'job'}-{stamp}"


def stage_channel(source: Path, dest: Path) -> None:
    """Present a local directory in ``input/data/<channel>`` as SageMaker's File mode does.

    File mode copies everything before the script starts (hard links where the file system allows, which costs
    nothing and keeps the job from altering the source).
    """
    try:
        shutil.copytree(source, dest, copy_function=os.link, dirs_exist_ok=True)
    except OSError:
        shutil.copytree(source, dest, dirs_exist_ok=True)


@dataclass(frozen=True)
class _Cluster:
    """What every host of one job shares: the host names, processes per host, threads per process, the rendezvous
    port, torchrun's settings (None for a single process) and whether the entry script takes ``--checkpoint_dir``."""

    hosts: list[str]
    procs: int
    threads: int
    port: int
    distributed: dict | None
    takes_checkpoint_dir: bool

    @classmethod
    def of(cls, job: Job, target: Target, where: findings.Where) -> _Cluster:
        procs = where.processes
        hosts = [f"algo-{i + 1}" for i in range(job.instance_count)]
        entry = Path(job.source_dir) / job.entry_point
        takes_checkpoint_dir = "checkpoint_dir" in (hyperparameters.options(entry) or {})
        threads = max(1, target.cpus // (procs * len(hosts)))
        distributed = {"process_count_per_node": procs, "smp": None} if where.launcher == "torchrun" else None
        return cls(hosts, procs, threads, free_port(), distributed, takes_checkpoint_dir)


class LocalRunner:
    """Launch :class:`Job` s on this machine under the container contract.

    ``echo`` streams the log; ``check`` raises :class:`JobFailed` on failure; ``on_line(host, line)`` sees each
    line. ``checkpoint_dir`` outlives the job as ``/opt/ml/checkpoints`` (as SageMaker restores a spot job's);
    ``forward_sigterm`` lets SIGTERM reach every process (SDK v3's first process drops it). SageMaker's clock:
    SIGTERM at ``max_runtime_s``, SIGKILL ``grace_s`` later; ``clock`` carries a spot job's time across restarts;
    ``stall_s`` of silence gets a report of where each process is.
    """

    def __init__(
        self,
        runs_dir: Path | str | None = None,
        echo: bool = True,
        check: bool = True,
        on_line: Callable[[str, str], None] | None = None,
        job_name: str | None = None,
        checkpoint_dir: Path | str | None = None,
        forward_sigterm: bool = False,
        clock: Clock | None = None,
        grace_s: float = GRACE_S,
        stall_s: float = STALL_S,
    ):
        self.runs_dir = Path(runs_dir) if runs_dir else runs_root() / "jobs"
        folders.refuse_released(self.runs_dir)
        self.echo, self.check = echo, check
        self.on_line, self.job_name = on_line, job_name
        self.checkpoint_dir = Path(checkpoint_dir).resolve() if checkpoint_dir else None
        self.forward_sigterm = forward_sigterm
        self.clock, self.grace_s, self.stall_s = clock, grace_s, stall_s

    def prepare(self, job: Job, target: Target) -> Prepared:
        """Check the job and build every host's directory and command; raises before anything runs, and a failure
        while building (a channel that cannot be staged) leaves no run directory behind."""
        where = findings.Where.local(job, target)  # the processes per host and the launcher, decided once
        checks.run_rules(job, where)
        run_dir = self.runs_dir / (self.job_name or run_name(job.name))
        if run_dir.exists():
            raise JobCheckError(f"{run_dir} exists already: give the job another name.")
        inputs = None
        try:
            # s3:// channels come from the stand-in's object store, each in its input mode; a local folder is copied
            inputs = JobInputs(job, self.runs_dir.parent / "fsx", run_dir) if s3_channels(job) else None
            return Prepared(run_dir, self._build(job, target, where, run_dir, inputs), inputs, where.processes)
        except BaseException as err:
            if inputs is not None:
                inputs.close()
            shutil.rmtree(run_dir, ignore_errors=True)  # nothing half-staged stays for anyone to trust
            if isinstance(err, StandInError):  # the store could not present a channel: the learner's error kind
                raise findings.ChannelError(str(err)) from err
            raise

    def _build(self, job: Job, target: Target, where: findings.Where, run_dir: Path, inputs: JobInputs | None) -> list:
        """Every host's directory and command."""
        cluster = _Cluster.of(job, target, where)
        modes = {c: job.mode_of(c) for c in job.channels}
        commands = []
        for host in cluster.hosts:
            layout = Layout(run_dir / host).make()
            shutil.copytree(job.source_dir, layout.code, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            cfg = HostConfig(run_dir.name, host, cluster.hosts, target.instance_type, modes, job.hyperparameters)
            cfg.write(layout)
            for channel, path in job.channels.items():
                if inputs is not None and inputs.serves(channel):
                    inputs.stage(channel, layout.data / channel, host)
                else:
                    stage_channel(Path(path), layout.data / channel)
            env = self._environment(job, target, cluster, layout, cfg)
            if inputs is not None:  # FastFile: the read-through, first on PYTHONPATH
                env.update(inputs.environment(env, host))
            cmd = self._command(job, cluster, layout, cfg, host)
            (layout.input / "command.json").write_text(json.dumps(cmd, indent=1))
            commands.append((host, cmd, env, layout.code))
        if inputs is not None:
            inputs.write()
        return commands

    def _environment(self, job: Job, target: Target, cluster: _Cluster, layout: Layout, cfg: HostConfig) -> dict:
        """A host's environment: a container's clean start, the ``SM_*`` contract, the local additions, the job's."""
        env = clean_environment(layout.code)
        env.update(
            container_env(
                layout,
                cfg,
                target.gpus,
                target.cpus,
                job.entry_point,
                cluster.distributed,
                master_addr="127.0.0.1",
                master_port=cluster.port,
            )
        )
        env.update(_OFFLINE, OMP_NUM_THREADS=str(cluster.threads), MKL_NUM_THREADS=str(cluster.threads))
        if not target.gpus:
            env["GLOO_SOCKET_IFNAME"] = "lo"  # gloo would otherwise resolve the host name to pick a NIC
            env["CUDA_VISIBLE_DEVICES"] = ""
        if cluster.distributed:  # torchrun's log folder (its --log-dir) in the host's: else a torchelastic_* in TMPDIR
            env["PET_LOG_DIR"] = str(layout.root / "torchelastic")
        env.update(job.environment)
        return env

    def _command(self, job: Job, cluster: _Cluster, layout: Layout, cfg: HostConfig, host: str) -> list[str]:
        """A host's command line: the v3 basic script driver's, or its torchrun driver's with the rendezvous on
        loopback; ``/opt/ml/checkpoints`` linked to ``checkpoint_dir`` when the runner has one."""
        args = hyperparameter_args(cfg.hyperparameters_json())
        if self.checkpoint_dir:
            self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
            layout.checkpoints.rmdir()
            layout.checkpoints.symlink_to(self.checkpoint_dir, target_is_directory=True)
        if cluster.takes_checkpoint_dir and "checkpoint_dir" not in job.hyperparameters:
            # no SM_* variable names /opt/ml/checkpoints: point the script at this host's stand-in, always, so
            # no job writes (or resumes from) a checkpoint directory outside its own run directory
            args += ["--checkpoint_dir", str(layout.checkpoints)]
        if not cluster.distributed:  # the v3 basic script driver: plain python
            return [sys.executable, job.entry_point, *args]
        return [  # the v3 torchrun driver's command, with the rendezvous on loopback
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nnodes={len(cluster.hosts)}",
            f"--nproc_per_node={cluster.procs}",
            "--master_addr=127.0.0.1",
            f"--master_port={cluster.port}",
            f"--node_rank={cluster.hosts.index(host)}",
            job.entry_point,
            *args,
        ]

    def start(self, job: Job, target: Target) -> LocalJob:
        prepared = self.prepare(job, target)
        if self.echo:
            print(
                f"launching {prepared.run_dir.name} on {target.describe()}: {len(prepared.commands)} host(s) x "
                f"{prepared.processes} process(es); logs below",
                flush=True,
            )
        return LocalJob(
            job,
            target,
            prepared,
            self.echo,
            self.on_line,
            self.forward_sigterm,
            self.clock,
            self.grace_s,
            self.stall_s,
        )

    def run(self, job: Job, target: Target) -> JobResult:
        """Start ``job`` and follow it to its result. A rendezvous port another process took between the runner
        choosing it and torchrun binding it fails the launch before any training: it is launched again on another
        port, up to :data:`PORT_ATTEMPTS` times in all."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            result = self.start(job, target).wait()
            if not port_taken(result) or attempt == PORT_ATTEMPTS:
                break
            if self.echo:
                print(f"[runner] {result.failure_reason}: launching again on another port", flush=True)
        return self.checked(result)

    @classmethod
    def with_options(cls, **options) -> LocalRunner:
        """A runner from a lab's keywords; an unknown one is refused naming the options there are (a typo would
        otherwise be a bare TypeError, and a SageMaker option given for a local target would be silently lost)."""
        names = [n for n in inspect.signature(cls.__init__).parameters if n != "self"]
        unknown = sorted(set(options) - set(names))
        if unknown:
            close = {u: difflib.get_close_matches(u, names, n=1) for u in unknown}
            hints = "; ".join(f"did you mean {c[0]!r} for {u!r}?" for u, c in close.items() if c)
            raise UnknownOption(
                f"unknown option(s) {', '.join(map(repr, unknown))} for a job on this machine; the options are "
                f"{', '.join(names)}, and wait=False (a started job: LocalJob.wait() follows it). "
                + (f"{hints} " if hints else "")
                + "Options of a SageMaker job (attendee, role, bucket, region, budget_usd...) need an ml.* target."
            )
        return cls(**options)

    def checked(self, result: JobResult) -> JobResult:
        """``result``, or (with ``check``) :class:`JobFailed` with the end of its log when it did not complete."""
        if result.status != "Completed" and self.check:
            raise JobFailed(result.failure_message(f" ({result.run_dir})"), result)
        return result
