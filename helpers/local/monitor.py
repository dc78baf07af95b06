"""A system monitor for local jobs: per-core CPU, the job's processes by role and, where there are GPUs, their use.

A background thread samples every ``interval`` seconds (0.5 s by default, as SageMaker Debugger's profiler did) for
the heatmaps and line charts the case studies read their bottlenecks from (:mod:`helpers.plots`)::

    result, mon = monitor.run_monitored(job, "local", interval=0.25)
    mon.heatmap(); mon.lines(); mon.summary(window="training")

A short job mostly starts up, so :func:`run_monitored` marks the training loop's window from the job's log. Memory
is PSS: forked workers share pages that RSS would count once per worker. GPUs are read through NVML.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from helpers import targets
from helpers.job_spec import DATA_DIR
from helpers.local.runner import LocalRunner
from helpers.plots import heatmap, utilisation_lines
from helpers.report import Table

ROLES = ("launcher", "trainer", "loader workers")


@dataclass
class Sample:
    """One reading: ``t`` seconds since the monitor started, at the end of the interval it covers; CPU in % of one
    core (200 = two cores busy)."""

    t: float
    cores: list[float]  # % busy per logical core, whole machine
    cpu_by_role: dict[str, float]  # the job's processes, % of one core, by role
    mem_mb_by_role: dict[str, float]  # PSS (shared pages split among their sharers), or RSS where there is no PSS
    processes: dict[str, int]  # how many processes of each role
    gpu_util: list[float] = field(default_factory=list)  # % per GPU
    gpu_mem_gb: list[float] = field(default_factory=list)


class GPUs:
    """NVML readings, or none: a machine without the package or the driver has no GPU rows."""

    def __init__(self):
        self.handles, self.names, self.nvml = [], [], None
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
        except Exception:  # noqa: BLE001 - no package, no driver, no device: all mean "no GPU rows"
            return
        self.nvml = pynvml
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.names = [_text(pynvml.nvmlDeviceGetName(h)) for h in self.handles]

    def read(self) -> tuple[list[float], list[float]]:
        if self.nvml is None:  # NVML never started: no handles to read
            return [], []
        util, mem = [], []
        for h in self.handles:
            try:
                util.append(float(self.nvml.nvmlDeviceGetUtilizationRates(h).gpu))
                mem.append(self.nvml.nvmlDeviceGetMemoryInfo(h).used / 1e9)
            except Exception:  # noqa: BLE001 - a GPU that stops answering reads as idle rather than ending the run
                util.append(0.0)
                mem.append(0.0)
        return util, mem

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()


def _memory_kind() -> str:
    """ "PSS" where the OS reports it for our processes (Linux), else "RSS"."""
    try:
        return "PSS" if hasattr(psutil.Process().memory_full_info(), "pss") else "RSS"
    except psutil.Error:  # smaps unreadable (a locked-down container): RSS, which every OS reports
        return "RSS"


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Monitor:
    """Samples the machine and a set of process trees in a background thread until :meth:`stop`.

    ``roots``: PIDs (or ``Popen`` objects) whose whole process trees are the job; more can be added with
    :meth:`track`. CPU per process comes from its CPU-time counters, so a DataLoader worker that lives for less than
    one interval is still counted.
    """

    roles = ROLES  # the roles a job's processes play, in the order the figures and tables show them

    def __init__(self, roots: Iterable = (), interval: float = 0.5, gpus: bool = True):
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self.interval = interval
        self.samples: list[Sample] = []
        self.windows: dict[str, tuple[float, float]] = {}  # name -> (start, end), seconds on the samples' clock
        self.memory_kind = _memory_kind()
        self.started_at = time.perf_counter()  # the samples' t = 0, on the perf_counter clock (see mark)
        self.roots: list[psutil.Process] = []
        self.budget: int | None = None  # the cores the job may use (run_monitored: its cpu_set), when known
        self.gpus = GPUs() if gpus else None
        self.gpu_names = self.gpus.names if self.gpus else []
        self._cpu_seen: dict[int, float] = {}  # pid -> CPU seconds at the last sample
        self._procs: dict[int, psutil.Process] = {}
        self._roles: dict[int, str] = {}  # decided when a process is first seen alive: its command line stays
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = self._last = time.monotonic()
        self._wall_last = time.time()
        for root in roots:
            self.track(root)

    @property
    def cpu_count(self) -> int:
        return psutil.cpu_count() or 1

    def track(self, process) -> None:
        """Follow this process and every process it starts (``pid`` or anything with a ``.pid``)."""
        pid = getattr(process, "pid", process)
        with contextlib.suppress(psutil.NoSuchProcess):
            self.roots.append(psutil.Process(pid))

    def start(self) -> Monitor:
        if self._thread is not None:
            raise RuntimeError("this monitor is already running; make a new Monitor for another job")
        psutil.cpu_percent(percpu=True)  # the first call only sets the baseline for the next
        self._t0 = self._last = time.monotonic()
        self.started_at = time.perf_counter()
        self._wall_last = time.time()
        self._thread = threading.Thread(target=self._run, name="system-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Monitor:
        """Take a last sample and join the thread; safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.gpus is not None:
            self.gpus.close()
        return self

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(self.sample())
        self.samples.append(self.sample())  # the end of the job: its last partial interval

    # ---- one reading
    def sample(self) -> Sample:
        now, wall = time.monotonic(), time.time()
        elapsed = max(now - self._last, 1e-3)
        cores = psutil.cpu_percent(percpu=True)
        cpu = {r: 0.0 for r in ROLES}
        mem = {r: 0.0 for r in ROLES}
        count = {r: 0 for r in ROLES}
        for proc, role in self._job_processes():
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    used = times.user + times.system
                    memory = proc.memory_full_info() if self.memory_kind == "PSS" else proc.memory_info()
                    created = proc.create_time()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            # a process first seen now: count all its CPU time if it started after the last sample
            before = self._cpu_seen.get(proc.pid, 0.0 if created >= self._wall_last else used)
            self._cpu_seen[proc.pid] = used
            cpu[role] += 100.0 * max(0.0, used - before) / elapsed
            mem[role] += getattr(memory, self.memory_kind.lower()) / 1e6
            count[role] += 1
        util, mem_gb = self.gpus.read() if self.gpus else ([], [])
        self._last, self._wall_last = now, wall
        return Sample(round(now - self._t0, 3), cores, cpu, mem, count, util, mem_gb)

    def _job_processes(self) -> Iterator[tuple[psutil.Process, str]]:
        """Every live process of the tracked trees, with its role. DataLoader workers are forked: they carry their
        parent's command line. A trainer runs the entry script; a launcher (torchrun) starts trainers."""
        seen = set()
        for root in self.roots:
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for proc in tree:
                if proc.pid in seen:
                    continue
                seen.add(proc.pid)
                proc = self._procs.setdefault(proc.pid, proc)
                try:  # a process that has exited but is not reaped yet holds no core and no memory: not counted
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        continue
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                role = self._roles.get(proc.pid) or self._role(proc)
                if role is None:  # gone while it was read
                    continue
                self._roles[proc.pid] = role
                yield proc, role

    def _role(self, proc: psutil.Process) -> str | None:
        try:
            cmd = proc.cmdline()
            parent = proc.parent()
            parent_cmd = parent.cmdline() if parent is not None else []
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return None
        except psutil.AccessDenied:
            return "trainer"
        if "torch.distributed.run" in cmd or any(c.endswith("torchrun") for c in cmd[:2]):
            return "launcher"
        if cmd and cmd == parent_cmd:
            return "loader workers"
        return "trainer"

    # ---- windows: a stretch of the run (the training loop, say), on the samples' clock
    def mark(self, name: str, start: float, end: float, clock_zero: float | None = None) -> None:
        """Name the stretch from ``start`` to ``end`` seconds. ``clock_zero``: the ``time.perf_counter()`` value
        those seconds count from, when it is not this monitor's (a job's launch, say)."""
        shift = 0.0 if clock_zero is None else clock_zero - self.started_at
        if end <= start:
            raise ValueError(f"window {name!r}: end {end} must come after start {start}")
        self.windows[name] = (start + shift, end + shift)

    def window_samples(self, window: str | None = None) -> list[Sample]:
        """The samples of a named window (those whose interval is mostly inside it), or all of them."""
        if window is None:
            return self.samples
        if window not in self.windows:
            raise KeyError(
                f"no window {window!r} on this monitor (it has: {', '.join(self.windows) or 'none'}); "
                f"run_monitored marks 'training' when the job logs its train_seconds"
            )
        start, end = self.windows[window]
        return [s for s in self.samples if start <= s.t - self.interval / 2 <= end]

    # ---- results
    def summary(self, window: str | None = None) -> dict:
        """Averages over the run, or over a named window: how busy the cores were, what the job used, peak memory
        (``peak_mem_mb``: PSS, or RSS where the OS has no PSS; ``memory_kind`` says which)."""
        samples = self.window_samples(window)
        if not samples:
            return {}
        n = len(samples)
        busy = [sum(s.cores) / max(1, len(s.cores)) for s in samples]
        seconds = self.samples[-1].t if window is None else self.windows[window][1] - self.windows[window][0]
        out: dict[str, Any] = {
            "seconds": seconds,
            "samples": n,
            "cores": len(samples[0].cores),
            "machine_cpu_pct": sum(busy) / n,
        }
        # the cores this process may use (a lab's; its jobs inherit them): another stream's cores are not its own
        mine = [i for i in _own_cores() if i < len(samples[0].cores)]
        out["own_cores"] = len(mine)
        out["own_cpu_pct"] = sum(sum(s.cores[i] for i in mine) / max(1, len(mine)) for s in samples) / n
        for role in ROLES:
            out[f"{role}_cores"] = sum(s.cpu_by_role[role] for s in samples) / n / 100
        out["job_cores"] = sum(out[f"{r}_cores"] for r in ROLES)
        out["peak_mem_mb"] = max(sum(s.mem_mb_by_role.values()) for s in samples)
        out["memory_kind"] = self.memory_kind
        out["peak_workers"] = max(s.processes["loader workers"] for s in samples)
        for i, name in enumerate(self.gpu_names):
            out[f"gpu{i}_util_pct"] = sum(s.gpu_util[i] for s in samples) / n
            out[f"gpu{i}_peak_mem_gb"] = max(s.gpu_mem_gb[i] for s in samples)
        return out

    def rows(self) -> list[dict]:
        """One row per sample: time, each core, the job's CPU and memory by role, each GPU."""
        out = []
        for s in self.samples:
            row = {"t": s.t, **{f"cpu{i}": v for i, v in enumerate(s.cores)}}
            row.update({f"{r} cpu%": s.cpu_by_role[r] for r in ROLES})
            row.update({f"{r} MB": s.mem_mb_by_role[r] for r in ROLES})
            row.update({f"gpu{i}%": v for i, v in enumerate(s.gpu_util)})
            row.update({f"gpu{i} GB": v for i, v in enumerate(s.gpu_mem_gb)})
            out.append(row)
        return out

    def table(self, every: int = 1, title: str = "System samples"):
        """The samples as a table (every ``every``-th row)."""

        return Table(self.rows()[:: max(1, every)], title=title)

    def matrix(self, window: str | None = None) -> tuple[list[str], list[float], list[list[float]]]:
        """(row labels, times, values in %): every core, the job's share of all cores (on a shared machine the
        cores can be busy with someone else's work), then every GPU, as the heatmap draws them. With ``window``,
        only its samples, timed from its start."""
        samples = self.window_samples(window)
        zero = self.windows[window][0] if window else 0.0
        times = [round(s.t - zero, 3) for s in samples]
        cores = len(samples[0].cores) if samples else 0
        labels = [f"cpu{i}" for i in range(cores)] + (["job"] if cores else [])
        labels += [f"gpu{i}" for i in range(len(self.gpu_names))]
        values = [[s.cores[i] for s in samples] for i in range(cores)]
        if cores:
            values.append([min(100.0, sum(s.cpu_by_role.values()) / cores) for s in samples])
        values += [[s.gpu_util[i] for s in samples] for i in range(len(self.gpu_names))]
        return labels, times, values

    def heatmap(self, title: str = "Utilisation", ax=None, window: str | None = None):
        """The whole run with its named windows marked, or (``window``) only that window."""
        labels, times, values = self.matrix(window)
        return heatmap(
            labels,
            times,
            values,
            title=title,
            ax=ax,
            interval=self.interval,
            xlabel=f"seconds into {window}" if window else "seconds",
            windows=self.windows if window is None else None,
        )

    def lines(self, title: str = ""):
        """The job's CPU and memory by role over time, and GPU use where there are GPUs."""
        return utilisation_lines(self, title=title)


def _own_cores() -> list[int]:
    """This process's cores (its affinity; every core where the OS cannot say, as on macOS)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(psutil.cpu_count() or 1))


def free_cores(seconds: float = 1.0) -> float:
    """How many of this process's cores (its affinity) nothing else is using right now, measured over ``seconds``: on
    a shared laptop or instance this, not the core count, is what a job's threads and workers can have."""
    busy = psutil.cpu_percent(interval=seconds, percpu=True)
    return sum(100.0 - busy[c] for c in _own_cores() if c < len(busy)) / 100.0


def quietest_cores(count: int, seconds: float = 1.0) -> list[int]:
    """The ``count`` cores of this process's affinity that other work used least over ``seconds``: where to pin
    jobs that must share one core budget (``train.py --cpu_set``)."""
    busy = psutil.cpu_percent(interval=seconds, percpu=True)
    return sorted(sorted((c for c in _own_cores() if c < len(busy)), key=lambda c: busy[c])[: max(1, count)])


def training_window(history: list[dict]) -> tuple[float, float] | None:
    """(start, end) of the training loop in seconds since launch, from a job's metric lines (``JobResult.history``):
    it ends with the last ``[train]`` or ``[eval]`` line and lasted the ``[final]`` line's ``train_seconds``."""
    final = next((h for h in reversed(history) if h.get("kind") == "final" and "train_seconds" in h), None)
    ends = [h["t"] for h in history if h.get("kind") in ("train", "eval") and "t" in h]
    if final is None or not ends:
        return None
    end = max(ends)
    return max(0.0, end - final["train_seconds"]), end


@contextlib.contextmanager
def watch(job=None, interval: float = 0.5, gpus: bool = True) -> Iterator[Monitor]:
    """Monitor a local job (anything with ``.procs``: the LocalRunner's ``LocalJob``) for the length of the block."""
    procs = getattr(job, "procs", {}) if job is not None else {}
    mon = Monitor(procs.values() if isinstance(procs, dict) else procs, interval=interval, gpus=gpus)
    with mon:
        yield mon


def run_monitored(job, target: targets.Target, interval: float = 0.5, **runner_options):
    """Launch ``job`` on a local target with the monitor on: ``(JobResult, Monitor)``. Raises like ``run_job``.

    The monitor gets a ``training`` window (see :func:`training_window`) when the job logs one."""

    t = targets.given(target)
    if not t.is_local:
        raise ValueError(
            f"run_monitored watches processes on this machine; {t.name} is a SageMaker instance type: "
            f"use helpers.aws.cloudwatch for a real job's metrics."
        )
    runner = LocalRunner(**runner_options)
    local = runner.start(job, t)
    with watch(local, interval=interval) as mon:
        mon.budget = job_budget(job)
        result = local.wait()
    window = training_window(result.history)
    if window:  # the job's log times count from its launch, local.t0 on the perf_counter clock
        mon.mark("training", *window, clock_zero=local.t0)
    return runner.checked(result), mon


def job_budget(job) -> int:
    """The cores a local job may run on: those its ``cpu_set`` names (train.py pins itself and its workers there),
    else every core this process may use."""
    named = str(getattr(job, "hyperparameters", {}).get("cpu_set", "") or "")
    return len({c for c in named.split(",") if c.strip()}) or targets.local_cpu_count()


def run_in_turn(
    jobs: dict, target: targets.Target, trials: int, reverse_first: bool = False, **options
) -> dict[str, list]:
    """Each job ``trials`` times, in turn: A B, then B A, and so on (``reverse_first``: B A first). A machine that
    slows down for a while slows both sides of a pair alike, so the ratio within each pair compares like with like
    (:func:`helpers.results.paired_ratio`). ``{label: [(JobResult, Monitor), ...]}``, trials in order; ``options``
    as :func:`run_monitored`'s."""
    if trials < 0:
        raise ValueError(f"trials must be 0 or more, not {trials}")
    runs: dict[str, list] = {label: [] for label in jobs}
    for trial in range(trials):
        order = list(jobs) if (trial % 2 == 0) != reverse_first else list(reversed(list(jobs)))
        for label in order:
            runs[label].append(run_monitored(jobs[label], target, **options))
    return runs


# ---------------------------------------------------------------------------------------------------- profiles
def top_ops(output_dir: str | Path, rank: int = 0, device: str | None = None, limit: int = 8) -> list[dict]:
    """The top operators ``train.py --profile`` wrote for one rank: per-step milliseconds and share of the time.

    ``device``: "cpu" or "gpu" (default: the GPU list when the run had one, else the CPU list).
    """
    return _ranked_rows(profile_report(output_dir, rank), device, limit)


def recorded_profile(name: str = "07_gpu_profile_h200") -> dict:
    """A profile recorded on a GPU machine and kept in ``data/recorded/``, with where, when and how it was taken:
    what a learner without a GPU reads in place of their own run's."""
    return json.loads((DATA_DIR / "recorded" / f"{name}.json").read_text(encoding="utf-8"))


def recorded_top_ops(device: str, name: str = "07_gpu_profile_h200", limit: int = 8) -> list[dict]:
    """The top operators of a recorded profile (:func:`recorded_profile`), in :func:`top_ops`'s rows."""
    return _ranked_rows(recorded_profile(name), device, limit)


def _ranked_rows(report: dict, device: str | None, limit: int) -> list[dict]:
    which = device or ("gpu" if "gpu" in report else "cpu")
    if which not in report:
        has = ", ".join(k for k in ("cpu", "gpu") if k in report)
        raise KeyError(f"the profile has no {which!r} list (it has {has})")
    return [
        {
            "operator": r["name"] if len(r["name"]) <= 60 else r["name"][:57] + "...",
            "ms per step": r["self_ms_per_step"],
            "share": r["share"],
            "calls per step": r["calls_per_step"],
        }
        for r in report[which][:limit]
    ]


def profile_report(output_dir: str | Path, rank: int = 0) -> dict:
    """The whole ``top_ops.rank<r>.json`` of a run's output directory (``result.output_dir`` or its profile dir)."""
    base = Path(output_dir)
    for candidate in (base / f"top_ops.rank{rank}.json", base / "profile" / f"top_ops.rank{rank}.json"):
        if candidate.is_file():
            return json.loads(candidate.read_text(encoding="utf-8"))
    raise FileNotFoundError(
        f"no top_ops.rank{rank}.json under {base}: was the job run with profile=True (and did "
        f"it train for at least the profile schedule's steps)?"
    )
