"""Run a training job on this machine the way a SageMaker training container would, without Docker.

Each host of the job gets an ``/opt/ml``-shaped directory under ``runs/jobs/<job>/<host>``: config JSON files,
channels under ``input/data/<channel>``, the source dir under ``input/data/code``, ``model``, ``output`` and
``checkpoints``. The entry script runs from the code directory with the ``SM_*`` variables of the v3 container
driver, hyperparameters as ``--key value``, and torchrun when there is more than one process, exactly as the
SDK's torchrun driver launches it. Logs stream as they come; the call returns a :class:`JobResult`.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from helpers import checks, hyperparameters
from helpers.errors import JobSetupError, WorkshopError
from helpers.job import RUNS_DIR, Job, parse_metric_line
from helpers.local import input_modes
from helpers.local.contract import HostConfig, Layout, container_env, hyperparameter_args
from helpers.local.ports import free_port
from helpers.results import RunResult
from helpers.targets import Target

CONTAINER_INIT = Path(__file__).with_name("container_init.py")

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


@dataclass(repr=False)  # the repr is RunResult's
class JobResult(RunResult):
    name: str
    status: str  # Completed | Failed | Stopped
    exit_code: int
    run_dir: Path
    metrics: dict = field(default_factory=dict)  # the [final] figures
    history: list[dict] = field(default_factory=list)  # every metric line, in order
    timings: dict = field(default_factory=dict)  # seconds: launch_to_first_log, launch_to_first_step, total
    failure_reason: str = ""
    log_tail: list[str] = field(default_factory=list)
    secondary_status: str = ""  # as DescribeTrainingJob: Completed, Failed, Stopped, MaxRuntimeExceeded...

    @property
    def model_dir(self) -> Path:
        return self.run_dir / "algo-1" / "model"

    @property
    def output_dir(self) -> Path:
        return self.run_dir / "algo-1" / "output" / "data"

    def _repr_parts(self, figures: str) -> list[str]:
        return [f"{self.status} in {self.timings.get('total', 0):.1f}s", figures]


GRACE_S = 120.0  # SageMaker's: SIGTERM, then SIGKILL 120 s later (StoppingCondition's documentation)
STALL_S = 120.0  # no log line for this long: the runner says where each process of the job is


@dataclass
class Clock:
    """SageMaker's two limits on a job's time. ``MaxRuntimeInSeconds`` counts the time the job runs, a spot job's
    earlier attempts included (``ran_s``); ``MaxWaitTimeInSeconds`` (spot) everything since it was submitted."""

    max_runtime_s: float
    max_wait_s: float | None = None
    ran_s: float = 0.0
    submitted: float = field(default_factory=time.monotonic)

    @classmethod
    def of(cls, job: Job) -> Clock:
        return cls(job.max_runtime_s, job.max_wait_s if job.spot else None)

    def deadline(self, started: float) -> tuple[float, str]:
        """(monotonic time, secondary status) at which a job started at ``started`` is stopped."""
        runtime_end = started + self.max_runtime_s - self.ran_s
        if self.max_wait_s is not None and self.submitted + self.max_wait_s < runtime_end:
            return self.submitted + self.max_wait_s, "MaxWaitTimeExceeded"
        return runtime_end, "MaxRuntimeExceeded"


def _kill_tree(pid: int) -> None:
    import psutil

    try:
        root = psutil.Process(pid)
        for p in [*root.children(recursive=True), root]:
            p.kill()
    except psutil.NoSuchProcess:
        pass


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


@dataclass
class Prepared:
    """A checked job, ready to start: its run directory, every host's command, and its s3:// channels."""

    run_dir: Path
    commands: list[tuple[str, list[str], dict, Path]]
    inputs: input_modes.JobInputs | None = None


class LocalJob:
    """One launched job: one container per host (see ``container_init.py``), their merged log, and the ways
    SageMaker ends a job: :meth:`stop` (StopTrainingJob), :meth:`kill` (the instance is lost) and its clock
    (``MaxRuntimeInSeconds``: SIGTERM, then SIGKILL after ``grace_s``). While it waits, a job that logs nothing for
    ``stall_s`` gets a report of where each of its processes is."""

    def __init__(
        self,
        job: Job,
        target: Target,
        prepared: Prepared,
        echo: bool = False,
        on_line: Callable[[str, str], None] | None = None,
        forward_sigterm: bool = False,
        clock: Clock | None = None,
        grace_s: float = GRACE_S,
        stall_s: float = STALL_S,
    ):
        self.job, self.target, self.echo, self.on_line = job, target, echo, on_line
        self.run_dir, self.inputs = prepared.run_dir, prepared.inputs
        commands = prepared.commands
        self.lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
        self.history: list[dict] = []
        self.tail: list[str] = []
        self.t0 = time.perf_counter()
        self.first_log = self.first_step = None
        self.procs: dict[str, subprocess.Popen] = {}  # host -> its container's first process
        self.interrupted = False  # stopped or killed from outside: the job ends as Stopped, as on SageMaker
        self.clock = clock or Clock.of(job)
        self.deadline, self.limit_status = self.clock.deadline(time.monotonic())
        self.grace_s, self.stall_s = grace_s, stall_s
        self.timed_out = ""  # the secondary status of a job its clock stopped
        self._kill_at: float | None = None
        self._last_line = time.monotonic()
        self._stall_reported = 0.0
        init = [sys.executable, str(CONTAINER_INIT), *(["--forward-sigterm"] if forward_sigterm else []), "--"]
        for host, cmd, env, cwd in commands:
            # stdin stays open while this process lives: the container ends everything when it closes
            proc = subprocess.Popen(
                init + cmd,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                errors="replace",
                start_new_session=True,
            )
            self.procs[host] = proc
            threading.Thread(target=self._pump, args=(host, proc), daemon=True).start()

    def _pump(self, host: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.lines.put((host, line.rstrip("\n")))
        self.lines.put((host, None))

    def _hosts(self, host: str | None) -> list[subprocess.Popen]:
        return [p for h, p in self.procs.items() if (host is None or h == host) and p.poll() is None]

    def signal(self, sig: int = signal.SIGTERM, host: str | None = None) -> None:
        """Send ``sig`` to the container's first process of every host (or of one), which is all SageMaker
        signals. Like the SDK v3 container's ``/bin/bash`` there, it does not pass SIGTERM on (unless the runner
        was made with ``forward_sigterm=True``); SIGKILL ends the host as :meth:`kill` does."""
        if sig == signal.SIGKILL:
            return self.kill(host)
        self.interrupted = True
        for proc in self._hosts(host):
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self, host: str | None = None) -> None:
        """The instance is gone: every process of the host (or of every host) dies at once, without notice."""
        hosts = self._hosts(host)
        self.interrupted = True
        for proc in hosts:
            try:
                os.kill(proc.pid, signal.SIGHUP)  # the container kills all it holds, then itself
            except ProcessLookupError:
                pass
        for proc in hosts:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # never seen; a tree walk from here as a last resort
                _kill_tree(proc.pid)

    def stop(self, grace: float = 10.0) -> None:
        """StopTrainingJob: SIGTERM to each container's first process, then SIGKILL for all after ``grace``
        seconds (SageMaker waits 120)."""
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def processes(self) -> list[int]:
        """The PIDs of every live process of the job, its containers' first processes included."""
        import psutil

        pids = []
        for proc in self._hosts(None):
            try:
                p = psutil.Process(proc.pid)
                pids += [proc.pid] + [c.pid for c in p.children(recursive=True) if c.status() != "zombie"]
            except psutil.NoSuchProcess:
                pass
        return pids

    def wait(self) -> JobResult:
        open_streams = len(self.procs)
        multi = len(self.procs) > 1
        try:
            while open_streams:
                try:
                    host, line = self.lines.get(timeout=self._next_check())
                except queue.Empty:
                    self._keep_time()
                    continue
                if line is None:
                    open_streams -= 1
                    continue
                self._take(host, line, multi)
            codes = {h: p.wait() for h, p in self.procs.items()}
        except BaseException:  # KeyboardInterrupt in a notebook, or a callback failing: never leave orphans
            self.kill()
            raise
        finally:
            if self.inputs is not None:
                self.inputs.close()  # stop serving FastFile channels; record what they fetched
        return self._result(codes)

    def _next_check(self) -> float:
        now = time.monotonic()
        due = [self.deadline if not self.timed_out else self._kill_at, self._last_line + self.stall_s]
        return max(0.05, min(d for d in due if d is not None) - now)

    def _keep_time(self) -> None:
        """The job's clock: at its limit SIGTERM (which the container's first process drops, as on SageMaker),
        SIGKILL ``grace_s`` later; a job silent for ``stall_s`` gets a report."""
        now = time.monotonic()
        if not self.timed_out and now >= self.deadline:
            self.timed_out = self.limit_status
            limit = "MaxWaitTimeInSeconds" if self.timed_out == "MaxWaitTimeExceeded" else "MaxRuntimeInSeconds"
            self._say(
                f"[runner] {limit} reached ({self._limit_s():.0f} s): SIGTERM to each host, SIGKILL in "
                f"{self.grace_s:.0f} s ({self.timed_out})"
            )
            self.signal(signal.SIGTERM)
            self._kill_at = now + self.grace_s
        elif self._kill_at is not None and now >= self._kill_at:
            self._kill_at = None
            self.kill()
        if now - self._last_line >= self.stall_s and now - self._stall_reported >= self.stall_s:
            self._stall_reported = now
            self._say(stall_report(self, now - self._last_line))

    def _limit_s(self) -> float:
        if self.timed_out == "MaxWaitTimeExceeded":
            return self.clock.max_wait_s or 0.0
        return self.clock.max_runtime_s

    def _say(self, text: str) -> None:
        """A line of the runner's own, in the log as the job's lines are."""
        if self.echo:
            print(text, flush=True)
        self.tail = (self.tail + text.splitlines())[-60:]

    def _take(self, host: str, line: str, multi: bool) -> None:
        now = time.perf_counter() - self.t0
        self._last_line = time.monotonic()
        self.first_log = self.first_log if self.first_log is not None else now
        text = f"[{host}] {line}" if multi else line
        if self.echo:
            print(text, flush=True)
        self.tail = (self.tail + [text])[-60:]
        parsed = parse_metric_line(line)
        if parsed:
            parsed["host"] = host
            parsed["t"] = round(now, 3)
            if parsed["kind"] == "train" and self.first_step is None:
                self.first_step = now
            self.history.append(parsed)
        if self.on_line:
            self.on_line(host, line)

    def _result(self, codes: dict[str, int]) -> JobResult:
        total = time.perf_counter() - self.t0
        code = next((c for c in codes.values() if c != 0), 0)
        failure = ""
        for host in codes:
            f = Layout(self.run_dir / host).failure
            if f.is_file() and f.read_text(errors="replace").strip():
                failure = f.read_text(errors="replace").strip()
                break
        lost = self.inputs.errors() if self.inputs is not None else []
        if lost and not all(e in failure for e in lost):  # a channel's bytes never arrived: say which, and why
            failure = "; ".join([*([failure] if failure else []), *(f"input: {e}" for e in dict.fromkeys(lost))])
        if code and not failure:
            failure = f"exit code {code}" + (f" (killed by signal {-code})" if code < 0 else "")
        finals = [h for h in self.history if h["kind"] == "final"]
        metrics = {k: v for k, v in (finals[-1] if finals else {}).items() if k not in ("kind", "host", "t")}
        stopped = (-signal.SIGTERM, -signal.SIGKILL, 128 + signal.SIGTERM)  # 143: saved a checkpoint on SIGTERM, left
        status = "Completed" if code == 0 else ("Stopped" if code in stopped or self.interrupted else "Failed")
        if code == 0 and lost:
            status = "Failed"  # the script carried on past a channel that never arrived: not a completed job
        if self.timed_out:
            status = "Stopped"  # as SageMaker reports a job its StoppingCondition ended
        secondary = self.timed_out if status == "Stopped" and self.timed_out else status
        return JobResult(
            self.run_dir.name,
            status,
            code,
            self.run_dir,
            metrics,
            self.history,
            {"launch_to_first_log": self.first_log, "launch_to_first_step": self.first_step, "total": total},
            failure,
            self.tail,
            secondary,
        )


def stall_report(job: LocalJob, silent_s: float) -> str:
    """Where each process of a silent job is: what it is (a rank, torchrun...), its state, its CPU time and the kernel
    call it sleeps in; a live Python rank is asked for its stacks, which it prints into the log (``container.run``
    registers faulthandler on SIGUSR1). A stopped process cannot answer: the report says it is stopped."""
    import psutil

    lines = [f"[runner] no log line for {silent_s:.0f} s; where each process of the job is:"]
    for host, proc in job.procs.items():
        try:
            processes = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for p in processes:
            try:
                with p.oneshot():
                    state, cpu, role = p.status(), sum(p.cpu_times()[:2]), _role(p)
                where = _read(f"/proc/{p.pid}/wchan")  # the kernel call it sleeps in ("0": on a CPU)
                if state == psutil.STATUS_STOPPED:
                    stack = "stopped (SIGSTOP or a debugger): it cannot run, or answer, until SIGCONT"
                elif role != "torchrun" and _catches(p.pid, signal.SIGUSR1):
                    os.kill(p.pid, signal.SIGUSR1)
                    stack = "its Python stacks follow in the log"
                else:
                    stack = ""
            except (psutil.Error, OSError):
                continue
            detail = f"{state}, {cpu:.1f} s CPU" + (f", waiting in {where}" if where not in ("", "0") else "")
            detail += f"; {stack}" if stack else ""
            lines.append(f"[runner]   {host} pid {p.pid} {role}: {detail}")
    return "\n".join(lines)


def _role(p) -> str:
    cmd = " ".join(p.cmdline())
    if "torch.distributed.run" in cmd or "torchrun" in cmd:
        return "torchrun"
    try:
        rank = p.environ().get("RANK")
    except Exception:  # noqa: BLE001 - psutil.AccessDenied and friends: say less
        rank = None
    return f"rank {rank}" if rank is not None else (cmd[:60] or p.name())


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (its ``SigCgt`` mask): a signal it does not catch would
    end it."""
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


class LocalRunner:
    """Launch :class:`Job` s on this machine under the container contract.

    ``echo`` streams the job's log into the notebook; ``check`` raises :class:`JobFailed` when it fails;
    ``on_line(host, line)`` sees every log line as it arrives. ``checkpoint_dir``: a directory that outlives the
    job, standing in for ``/opt/ml/checkpoints`` on every host (as SageMaker restores a restarted spot job's
    checkpoints from S3); without it every job gets a fresh, empty one in its run directory, as every SageMaker
    job does. ``forward_sigterm``: SIGTERM to a container reaches every process in it (the best case; on SageMaker
    an SDK v3 job's first process drops it, and so does the local runner by default).

    The job's clock is SageMaker's: at ``Job.max_runtime_s`` (or a spot job's ``max_wait_s``) SIGTERM, then SIGKILL
    after ``grace_s`` (120 s, SageMaker's; a test may scale it down), status Stopped with secondary status
    MaxRuntimeExceeded. ``clock`` carries a spot job's time across restarts. A job that logs nothing for ``stall_s``
    seconds gets a report of where each of its processes is.
    """

    def __init__(
        self,
        runs_dir: Path | str = RUNS_DIR / "jobs",
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
        self.runs_dir, self.echo, self.check = Path(runs_dir), echo, check
        self.on_line, self.job_name = on_line, job_name
        self.checkpoint_dir = Path(checkpoint_dir).resolve() if checkpoint_dir else None
        self.forward_sigterm = forward_sigterm
        self.clock, self.grace_s, self.stall_s = clock, grace_s, stall_s

    def prepare(self, job: Job, target: Target) -> Prepared:
        """Check the job and build every host's directory and command; raises before anything runs, and a failure
        while building (a channel that cannot be staged) leaves no run directory behind."""
        checks.check(job, checks.Where.local(job, target))
        run_dir = self.runs_dir / (self.job_name or run_name(job.name))
        inputs = input_modes.JobInputs(job, self.runs_dir.parent / "fsx", run_dir)  # s3:// channels, in their modes
        if run_dir.exists():
            raise JobSetupError(f"{run_dir} exists already: give the job another name.")
        try:
            return Prepared(run_dir, self._build(job, target, run_dir, inputs), inputs)
        except BaseException:
            inputs.close()
            shutil.rmtree(run_dir, ignore_errors=True)  # nothing half-staged stays for anyone to trust
            raise

    def _build(self, job: Job, target: Target, run_dir: Path, inputs: input_modes.JobInputs) -> list:
        """Every host's directory and command."""
        name = run_dir.name
        procs = job.processes_per_host or target.default_processes()
        entry = Path(job.source_dir) / job.entry_point
        hosts = [f"algo-{i + 1}" for i in range(job.instance_count)]
        takes_checkpoint_dir = "checkpoint_dir" in (hyperparameters.options(entry) or {})
        threads = max(1, target.cpus // (procs * len(hosts)))
        port = free_port()
        distributed = {"process_count_per_node": procs, "smp": None} if procs * len(hosts) > 1 else None
        commands = []
        for host in hosts:
            layout = Layout(run_dir / host).make()
            shutil.copytree(job.source_dir, layout.code, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            cfg = HostConfig(
                name, host, hosts, target.instance_type, {c: job.mode_of(c) for c in job.channels}, job.hyperparameters
            )
            cfg.write(layout)
            for channel, path in job.channels.items():
                if inputs.serves(channel):
                    inputs.stage(channel, layout.data / channel, host)
                else:
                    stage_channel(Path(path), layout.data / channel)
            env = clean_environment(layout.code)
            env.update(
                container_env(
                    layout,
                    cfg,
                    target.gpus,
                    target.cpus,
                    job.entry_point,
                    distributed,
                    master_addr="127.0.0.1",
                    master_port=port,
                )
            )
            env.update(_OFFLINE, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
            if not target.gpus:
                env["GLOO_SOCKET_IFNAME"] = "lo"  # gloo would otherwise resolve the host name to pick a NIC
                env["CUDA_VISIBLE_DEVICES"] = ""
            env.update(job.environment)
            env.update(inputs.environment(env, host))  # FastFile: the read-through, first on PYTHONPATH
            args = hyperparameter_args(cfg.hyperparameters_json())
            if self.checkpoint_dir:
                self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
                layout.checkpoints.rmdir()
                layout.checkpoints.symlink_to(self.checkpoint_dir, target_is_directory=True)
            if takes_checkpoint_dir and "checkpoint_dir" not in job.hyperparameters:
                # no SM_* variable names /opt/ml/checkpoints: point the script at this host's stand-in, always, so
                # no job writes (or resumes from) a checkpoint directory outside its own run directory
                args += ["--checkpoint_dir", str(layout.checkpoints)]
            if distributed:  # the v3 torchrun driver's command, with the rendezvous on loopback
                cmd = [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    f"--nnodes={len(hosts)}",
                    f"--nproc_per_node={procs}",
                    "--master_addr=127.0.0.1",
                    f"--master_port={port}",
                    f"--node_rank={hosts.index(host)}",
                    job.entry_point,
                    *args,
                ]
            else:  # the v3 basic script driver: plain python
                cmd = [sys.executable, job.entry_point, *args]
            (layout.input / "command.json").write_text(json.dumps(cmd, indent=1))
            commands.append((host, cmd, env, layout.code))
        inputs.write()
        return commands

    def start(self, job: Job, target: Target) -> LocalJob:
        prepared = self.prepare(job, target)
        if self.echo:
            print(
                f"launching {prepared.run_dir.name} on {target.describe()}: {len(prepared.commands)} host(s) x "
                f"{job.processes_per_host or target.default_processes()} process(es); logs below",
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
        return self.checked(self.start(job, target).wait())

    def checked(self, result: JobResult) -> JobResult:
        """``result``, or (with ``check``) :class:`JobFailed` with the end of its log when it did not complete."""
        if result.status != "Completed" and self.check:
            tail = "\n".join(result.log_tail[-25:])
            raise JobFailed(
                f"job {result.name} {result.status.lower()}: {result.failure_reason}\n"
                f"--- last lines of its log ({result.run_dir}) ---\n{tail}",
                result,
            )
        return result
