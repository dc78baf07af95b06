"""Where a training step's time goes: a data-wait clock on every step, and torch.profiler around a few of them.

The clock always runs (two ``perf_counter`` calls a step): it splits the loop's wall time into waiting for the next
batch (inside ``next(loader)``) and everything else, and adds ``data_wait_frac`` and friends to the run's summary.
With ``--step_breakdown`` it also splits everything else by where the trainer's thread was (Linux's schedstat):
on a core, queued for one, or blocked, which in a DDP step is waiting for the gradient all-reduce (lab 02).
``--device_ms`` stands in for an accelerator on a CPU machine (lab 07): each step's work lasts at least that long, the
rest of it a wait off the cores, as a GPU computes while the host that launched its kernels waits; the clock counts
it as ``device_wait_ms``.
``--profile`` adds torch.profiler on a ``wait, warmup, active`` schedule (the flags are declared with train.py's
other options, in ``options.py``). Its trace lands in ``--profile_dir`` as a Chrome trace
(``<host>-rank<r>.<id>.pt.trace.json.gz``: open it in https://ui.perfetto.dev or TensorBoard); rank ``r`` also
writes its top operators as ``top_ops.rank<r>.json`` and ``.txt``. On SageMaker, a ``--profile_dir`` under
``/opt/ml/output/tensorboard`` is uploaded to the job's TensorBoard S3 location while it runs.

SageMaker Debugger's framework profiling and SageMaker Profiler are going away; these are plain PyTorch, so they
run the same in any container. The training loop calls three hooks::

    profiler = profiling.start(args, d, total_steps)
    for batch in profiler.batches(loader): ... ; profiler.step()
    summary.update(profiler.close())
"""

from __future__ import annotations

import json
import os
import time
import warnings

import torch

# operators that only wrap others (their self time is the wrapper's own bookkeeping): not a bottleneck by themselves
_WRAPPERS = ("ProfilerStep",)  # "ProfilerStep#7", or "ProfilerStep*" once key_averages() merges them


def parse_schedule(text: str) -> tuple[int, int, int]:
    try:
        wait, warmup, active = (int(x) for x in str(text).split(","))
    except ValueError:
        raise SystemExit(
            f"--profile_schedule {text!r}: give three whole numbers, wait,warmup,active (e.g. 2,2,5)"
        ) from None
    if wait < 0 or warmup < 0 or active < 1:
        raise SystemExit(f"--profile_schedule {text!r}: wait and warmup must be >= 0 and active >= 1")
    return wait, warmup, active


def pin_cores(text: str) -> None:
    """Keep this process, and the threads and workers it starts from now on, on the cores ``text`` names ("0,1"):
    two runs pinned to the same cores get the same budget, whatever else runs on the machine. Empty: all cores."""
    if not text:
        return
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_setaffinity") else None
    try:
        cores = {int(c) for c in str(text).split(",")}
    except ValueError:
        cores = set()
    if allowed is None or not cores or not cores <= allowed:
        have = "no core pinning on this OS" if allowed is None else f"this process may use cores {sorted(allowed)}"
        raise SystemExit(f"--cpu_set {text!r}: give core numbers separated by commas, among those allowed ({have})")
    os.sched_setaffinity(0, cores)


class StepClock:
    """Splits each step into data wait (blocked in ``next(loader)``) and work (from the batch's arrival to
    :meth:`stepped`), from the second step on: the first batch carries worker start-up (reported on its own as
    ``first_batch_s``) and the first step the allocator's and autograd's warm-up. What the loop does between a
    step's end and its next ``next(loader)`` (evaluation, checkpoints, log lines) is no step's time.

    ``breakdown``: the work also split by where this thread spent it (:func:`thread_times`): computing on a core,
    queued for one (the cores were busy with other work), waiting for the stand-in device (``device_wait_ms``), and the
    rest blocked, off the cores, which in a DDP step is waiting for the gradient all-reduce and the slowest rank.

    ``device_ms``: the stand-in accelerator's time per step (0: none). :meth:`stepped` waits, off the cores, until
    the step's work has lasted that long: the host's own part of the step (Python, launching operators) overlaps
    it, as it overlaps a GPU's kernels, and a loader worker has the cores meanwhile."""

    def __init__(self, breakdown: bool = False, device_ms: float = 0.0):
        self.start = time.perf_counter()
        self.first_batch_s = None
        self.wait = self.total = 0.0
        self.steps = 0
        self.arrived = None  # when the current step's batch arrived
        self.ended = None  # when the current step's work ended (None: not told; the next wait ends it)
        self.warm = False
        self.breakdown = breakdown and thread_times() is not None
        self.on_core = self.queued = self.device = 0.0
        self.arrived_at = self.ended_at = None  # thread_times() at those moments
        self.device_s, self.device_now = device_ms / 1e3, 0.0  # the stand-in's time per step; this step's wait

    def stepped(self) -> None:
        now = time.perf_counter()
        self.device_now = 0.0
        if self.device_s and self.arrived is not None:  # the device is still computing: wait for it off the cores
            self.device_now = max(0.0, self.arrived + self.device_s - now)
            if self.device_now:
                time.sleep(self.device_now)
        self.ended = time.perf_counter()
        self.ended_at = thread_times() if self.breakdown else None

    def batches(self, loader, counted=lambda: True):
        """Yield the loader's batches, timing each wait; ``counted()`` says whether the coming step counts."""
        with warnings.catch_warnings():  # the loader warned of too many workers when it was built: once is enough
            warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
            it = iter(loader)
        while True:
            before = time.perf_counter()
            before_at = thread_times() if self.breakdown and self.ended is None else self.ended_at
            try:
                batch = next(it)
            except StopIteration:
                return
            now = time.perf_counter()
            if self.first_batch_s is None:
                self.first_batch_s = now - self.start
            elif self.warm and counted():
                work = (self.ended if self.ended is not None else before) - self.arrived
                self.wait += now - before
                self.total += work + now - before
                self.steps += 1
                self.device += self.device_now
                if self.breakdown:
                    self.on_core += before_at[0] - self.arrived_at[0]
                    self.queued += before_at[1] - self.arrived_at[1]
            self.warm = self.arrived is not None  # from the second step's span on
            self.arrived, self.ended, self.device_now = now, None, 0.0
            self.arrived_at = thread_times() if self.breakdown else None
            yield batch

    def summary(self) -> dict:
        if not self.steps:
            return {"first_batch_s": self.first_batch_s or 0.0}
        out = {
            "data_wait_frac": self.wait / self.total,
            "data_wait_ms": 1e3 * self.wait / self.steps,
            "step_ms": 1e3 * self.total / self.steps,
            "first_batch_s": self.first_batch_s,
        }
        if self.breakdown:
            work = self.total - self.wait
            out["on_core_ms"] = 1e3 * self.on_core / self.steps
            out["queued_ms"] = 1e3 * self.queued / self.steps
            out["device_wait_ms"] = 1e3 * self.device / self.steps
            out["blocked_ms"] = 1e3 * max(0.0, work - self.on_core - self.queued - self.device) / self.steps
        return out


def timed(make, *args):
    """``(make(*args), seconds it took)``: a set-up step's wall time, for the run's summary."""
    start = time.perf_counter()
    return make(*args), time.perf_counter() - start


def thread_times() -> tuple[float, float] | None:
    """(seconds on a core, seconds queued for one) of the calling thread so far, from Linux's
    ``/proc/thread-self/schedstat``; None where there is none (macOS, Windows)."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as f:
            on_core, queued, _ = f.read().split()
    except (OSError, ValueError):
        return None
    return int(on_core) / 1e9, int(queued) / 1e9


class StepTimer:
    """The profiler when ``--profile`` is off: only the clock. Same hooks, so the loop has no branches."""

    def __init__(self, num_workers: int = 0, breakdown: bool = False, device_ms: float = 0.0):
        self.clock = StepClock(breakdown, device_ms)
        self.num_workers = num_workers

    def batches(self, loader):
        return self.clock.batches(loader, self.counted)

    def counted(self) -> bool:
        return True

    def step(self) -> None:
        self.clock.stepped()

    def close(self) -> dict:
        return {**self.clock.summary(), "threads": torch.get_num_threads(), "num_workers": self.num_workers}


class TorchProfiler(StepTimer):
    """torch.profiler on a ``wait, warmup, active`` schedule; profiled steps are left out of the clock's figures
    (the profiler slows them down)."""

    def __init__(
        self,
        out_dir: str,
        schedule: tuple[int, int, int],
        device: torch.device,
        rank: int,
        num_workers: int = 0,
        breakdown: bool = False,
        device_ms: float = 0.0,
    ):
        super().__init__(num_workers, breakdown, device_ms)
        self.out_dir, self.schedule, self.device, self.rank = out_dir, schedule, device, rank
        os.makedirs(out_dir, exist_ok=True)
        host = os.environ.get("SM_CURRENT_HOST", "local")
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        else:  # kineto prints its profiler_start/stop probe markers at a level above ERROR: on a CPU, with no CUPTI
            # to report on, silence it (read when the first profiler starts; a value already set wins)
            os.environ.setdefault("KINETO_LOG_LEVEL", "6")
        wait, warmup, active = schedule
        self.steps_done = 0
        self.prof = torch.profiler.profile(
            activities=activities,
            record_shapes=True,
            schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1),
            on_trace_ready=torch.profiler.tensorboard_trace_handler(
                out_dir, worker_name=f"{host}-rank{rank}", use_gzip=True
            ),
        )
        self.prof.start()

    def counted(self) -> bool:
        # asked as batch n+1 arrives (steps_done == n): the span covers step n's work (0-based n-1) and the wait
        # for step n+1 (0-based n); leave it out if either ran under the profiler
        wait, warmup, active = self.schedule
        return not wait <= self.steps_done <= wait + warmup + active

    def step(self) -> None:
        super().step()
        self.steps_done += 1
        self.prof.step()

    def close(self) -> dict:
        self.prof.stop()
        report = top_operators(self.prof, self.device, self.schedule)
        report["traces"] = sorted(
            f for f in os.listdir(self.out_dir) if f.endswith((".pt.trace.json", ".pt.trace.json.gz"))
        )
        base = os.path.join(self.out_dir, f"top_ops.rank{self.rank}")
        with open(base + ".json", "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
        with open(base + ".txt", "w", encoding="utf-8") as f:
            f.write(report.pop("table"))
        return {**super().close(), "profiled_steps": self.schedule[2], "profiled_step_ms": report["step_ms"]}


def top_operators(prof, device: torch.device, schedule: tuple[int, int, int], limit: int = 40) -> dict:
    """The operators that took the most time over the active steps, per step: self time on the CPU, and on the
    GPU when there is one (that list is where GEMM kernels show up)."""
    active = schedule[2]
    averages = prof.key_averages()
    steps = [e for e in averages if e.key.startswith(_WRAPPERS)]
    step_ms = sum(e.cpu_time_total for e in steps) / 1e3 / max(1, sum(e.count for e in steps))
    report = {
        "device": device.type,
        "schedule": dict(zip(("wait", "warmup", "active"), schedule)),
        "step_ms": step_ms,
        "cpu": _ranked(averages, "self_cpu_time_total", "cpu_time_total", active, limit),
    }
    sort_by = "self_cpu_time_total"
    if device.type == "cuda":
        report["gpu"] = _ranked(averages, "self_device_time_total", "device_time_total", active, limit)
        sort_by = "self_device_time_total"
    report["table"] = averages.table(sort_by=sort_by, row_limit=15)
    return report


def _ranked(averages, self_key: str, total_key: str, active: int, limit: int) -> list[dict]:
    rows = [e for e in averages if not e.key.startswith(_WRAPPERS) and getattr(e, self_key, 0) > 0]
    spent = sum(getattr(e, self_key) for e in rows) or 1.0
    rows.sort(key=lambda e: -getattr(e, self_key))
    return [
        {
            "name": e.key,
            "calls_per_step": e.count / active,
            "self_ms_per_step": getattr(e, self_key) / 1e3 / active,
            "total_ms_per_step": getattr(e, total_key) / 1e3 / active,
            "share": getattr(e, self_key) / spent,
        }
        for e in rows[:limit]
    ]


def start(args, d, total_steps: int) -> StepTimer:
    """The loop's profiler: the clock alone, or torch.profiler as well with ``--profile``. Checks the schedule
    fits the run before training starts."""
    workers = getattr(args, "num_workers", 0)
    breakdown = getattr(args, "step_breakdown", False)
    device_ms = getattr(args, "device_ms", 0.0)
    if device_ms and d.device.type != "cpu":
        raise SystemExit(f"--device_ms {device_ms:g} stands in for an accelerator on a CPU: this run has a {d.device}")
    if not args.profile:
        return StepTimer(workers, breakdown, device_ms)
    schedule = parse_schedule(args.profile_schedule)
    if sum(schedule) > total_steps:
        raise SystemExit(
            f"--profile_schedule {args.profile_schedule} needs {sum(schedule)} steps but this run has "
            f"{total_steps}: shorten the schedule or train for more steps"
        )
    out_dir = args.profile_dir or os.path.join(args.output_data_dir, "profile")
    return TorchProfiler(out_dir, schedule, d.device, d.rank, workers, breakdown, device_ms)
