"""The machine's limits a local job can meet, named as SageMaker names them: memory (the kernel's OOM killer ends a
process with SIGKILL, and SageMaker fails the job with :data:`OUT_OF_MEMORY`) and the number of processes a user may
run (a fork refused with EAGAIN).

Memory is read where Linux keeps it: the job's memory cgroup (v1 ``memory.oom_control``, v2 ``memory.events``),
else the machine's ``/proc/vmstat``, counts the OOM killer's kills; the job's peak is its processes' resident memory,
sampled while it runs (:class:`MemoryWatch`).
"""

from __future__ import annotations

import re
import resource
from dataclasses import dataclass, field
from pathlib import Path

# SageMaker's FailureReason for a training job whose container ran out of memory
OUT_OF_MEMORY = (
    "ClientError: Please use an instance type with more memory, or reduce the size of job data processed on an "
    "instance."
)
# how a SIGKILL of one of a job's processes shows: its host's first process (-9), torchrun's report of a rank,
# a DataLoader's of a worker
SIGKILLED = re.compile(r"Signal 9 \(SIGKILL\)|exitcode\s*:\s*-9\b|killed by signal: Killed")
NO_PROCESS = re.compile(r"BlockingIOError: \[Errno 11\]|can't start new thread|fork: Resource temporarily unavailable")
CGROUP = Path("/sys/fs/cgroup")
NO_LIMIT = 1 << 60  # cgroup v1 writes "no limit" as a number near 2**63


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _field(text: str, name: str) -> int | None:
    """The number after ``name`` on its line of a ``key value`` file (memory.events, /proc/vmstat...)."""
    m = re.search(rf"^{name}\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def memory_cgroup(proc_cgroup: str | None = None, root: Path = CGROUP) -> tuple[Path, str] | None:
    """This process's memory cgroup folder and its version ("v1", "v2"); None where there is none to read. Inside a
    container the path /proc names may be the host's: the container's own root is taken then."""
    text = proc_cgroup if proc_cgroup is not None else _read(Path("/proc/self/cgroup"))
    for line in text.splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            where, version = root / "memory", "v1"
        elif hierarchy == "0" and "memory" in _read(root / "cgroup.controllers").split():
            where, version = root, "v2"
        else:
            continue
        for folder in (where / path.lstrip("/"), where):
            if folder.is_dir():
                return folder, version
    return None


def _limit_of(folder: Path, version: str) -> int | None:
    text = _read(folder / ("memory.limit_in_bytes" if version == "v1" else "memory.max")).strip()
    return int(text) if text.isdigit() and int(text) < NO_LIMIT else None


@dataclass
class MemoryWatch:
    """The evidence an OOM kill leaves, from a job's start to its end: the kill counter (the job's memory cgroup,
    else the machine's) and the peak of the job's resident memory, sampled while it runs."""

    cgroup: tuple[Path, str] | None = field(default_factory=memory_cgroup)
    cgroup_root: Path = CGROUP  # where the cgroup file system is mounted: the limits above the job's stop there
    kills_at_start: int | None = None
    peak_bytes: int = 0

    def __post_init__(self):
        self.kills_at_start = self.kills()

    def kills(self) -> int | None:
        if self.cgroup is not None:
            folder, version = self.cgroup
            found = _field(_read(folder / ("memory.oom_control" if version == "v1" else "memory.events")), "oom_kill")
            if found is not None:
                return found
        return _field(_read(Path("/proc/vmstat")), "oom_kill")

    def sample(self, pids: list[int]) -> None:
        """The memory of ``pids`` (a job's live processes), kept where it is the highest yet: each one's private
        resident memory, and once the largest share of pages they map in common (torch's libraries): a sum of
        resident sizes would count those once per process."""
        import psutil

        private, shared = 0, 0
        for pid in pids:
            try:
                memory = psutil.Process(pid).memory_info()
            except psutil.Error:
                continue
            common = getattr(memory, "shared", 0)  # Linux: resident pages backed by a file or shared memory
            private, shared = private + memory.rss - common, max(shared, common)
        self.peak_bytes = max(self.peak_bytes, private + shared)

    def killed_a_process(self) -> bool:
        """Whether the OOM killer has killed since the job started (in its cgroup, else anywhere on the machine)."""
        now = self.kills()
        return None not in (now, self.kills_at_start) and now > self.kills_at_start  # type: ignore[operator]

    def limit(self) -> tuple[int, str]:
        """The memory the job could have: the lowest limit of its cgroup and the cgroups above it, else the
        machine's memory; and where that limit is set."""
        found: list[tuple[int, str]] = []
        if self.cgroup is not None:
            folder, version = self.cgroup
            root = self.cgroup_root / "memory" if version == "v1" else self.cgroup_root
            while True:
                if (limit := _limit_of(folder, version)) is not None:
                    found.append((limit, f"the memory cgroup {'/' + str(folder.relative_to(root)).strip('.')}"))
                if folder == root or root not in folder.parents:
                    break
                folder = folder.parent
        total_kb = _field(_read(Path("/proc/meminfo")), "MemTotal:")
        if total_kb:
            found.append((total_kb * 1024, "this machine's memory"))
        return min(found) if found else (0, "unknown")

    def reason(self, also: str = "") -> str:
        """SageMaker's reason for an out-of-memory job, with the job's peak and the limit it met."""
        limit, where = self.limit()
        said = (
            f"{OUT_OF_MEMORY} (out of memory: the kernel's OOM killer ended a process of the job with SIGKILL; the "
            f"job's processes held up to {_mb(self.peak_bytes)} (sampled twice a second), the limit is "
            f"{_mb(limit)}, {where}. Give the job an instance type with more memory, or lower its batch or data size.)"
        )
        return said + (f" Then: {also[:300]}" if also else "")


def killed_by_sigkill(code: int, log_tail: list[str]) -> bool:
    """Whether a failed job shows a process ended by SIGKILL: its host's exit, or torchrun's or a DataLoader's
    report of one."""
    return code in (-9, 128 + 9) or any(SIGKILLED.search(line) for line in log_tail)


def process_limit_reason(log_tail: list[str]) -> str:
    """Why a job failed where its log shows a process or thread refused (EAGAIN: the user's process limit), else
    ""."""
    if not any(NO_PROCESS.search(line) for line in log_tail):
        return ""
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    limit = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    return (
        f"the job could not start a process or thread: this user's process limit was reached (ulimit -u: {limit}; "
        f"threads count towards it, and each rank starts several). Raise it (ulimit -u 4096 in the shell that starts "
        f"JupyterLab or make), or end other processes of this user, then run the job again."
    )


def _mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"
