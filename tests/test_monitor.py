"""The system monitor: samples a real process tree in the background, finds its roles, stops cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types

import matplotlib
import pytest

matplotlib.use("Agg")

from helpers import plots  # noqa: E402
from helpers.local import bottleneck, monitor  # noqa: E402
from helpers.targets import resolve

# a "trainer" that forks one "loader worker" (same command line, as DataLoader workers have), both busy for a while
BUSY = textwrap.dedent("""
    import os, time
    def spin(seconds):
        end = time.time() + seconds
        while time.time() < end:
            pass
    pid = os.fork()
    spin(1.5)
    if pid:
        os.waitpid(pid, 0)
""")


@pytest.fixture
def busy_job():
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    yield types.SimpleNamespace(procs={"algo-1": proc})
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_samples_a_real_process_tree_and_stops_cleanly(busy_job):
    with monitor.watch(busy_job, interval=0.2, gpus=False) as mon:
        assert mon.running
        busy_job.procs["algo-1"].wait(timeout=60)
    assert not mon.running and not mon._thread.is_alive()
    n = len(mon.samples)
    assert n >= 3
    assert all(len(s.cores) == mon.cpu_count for s in mon.samples)
    assert max(s.processes["trainer"] for s in mon.samples) == 1
    assert max(s.processes["loader workers"] for s in mon.samples) == 1  # the fork carries its parent's command
    summary = mon.summary()
    # two spinning processes for 1.5 s: well over a tenth of a core each, however busy the machine is
    assert summary["trainer_cores"] > 0 and summary["loader workers_cores"] > 0
    assert summary["peak_mem_mb"] > 1 and summary["peak_workers"] == 1
    if sys.platform.startswith("linux"):  # PSS: the fork's shared pages are split between the two, not counted twice
        assert mon.memory_kind == summary["memory_kind"] == "PSS"
    assert not any(k.startswith("gpu") for k in summary)  # gpus=False: no GPU rows at all
    mon.stop()  # a second stop is harmless
    assert len(mon.samples) == n


@pytest.mark.slow
def test_results_as_table_heatmap_and_lines(busy_job):
    with monitor.watch(busy_job, interval=0.2, gpus=False) as mon:
        busy_job.procs["algo-1"].wait(timeout=60)
    labels, times, values = mon.matrix()
    assert labels == [f"cpu{i}" for i in range(mon.cpu_count)] + ["job"]
    assert len(values) == len(labels) and all(len(row) == len(times) for row in values)
    assert all(0 <= v <= 100 for row in values for v in row)
    table = mon.table()
    assert len(table.rows) == len(mon.samples) and "trainer cpu%" in table.columns
    assert "cpu0" in repr(table)
    assert mon.heatmap().axes and mon.lines().axes
    assert plots.compare_heatmaps({"a": mon, "b": mon}).axes


def synthetic(times, busy):
    """A monitor with made-up samples, ``interval`` 0.5 s: core 0 ``busy[i]`` % busy, the trainer as busy."""
    mon = monitor.Monitor(gpus=False)
    for t, b in zip(times, busy):
        mon.samples.append(
            monitor.Sample(
                t,
                [b, 0.0],
                {"launcher": 0.0, "trainer": b, "loader workers": 0.0},
                {"launcher": 0.0, "trainer": 100.0 + b, "loader workers": 0.0},
                {"launcher": 0, "trainer": 1, "loader workers": 0},
            )
        )
    return mon


@pytest.mark.slow
def test_a_window_cuts_summary_and_heatmap_to_the_training_loop():
    mon = synthetic([0.5, 1.0, 1.5, 2.0, 2.5, 3.0], [10, 10, 90, 90, 90, 10])  # start-up, training, saving
    mon.mark("training", 1.0, 2.5)  # samples whose interval is mostly inside: those ending at 1.5, 2.0 and 2.5
    assert [s.t for s in mon.window_samples("training")] == [1.5, 2.0, 2.5]
    whole, training = mon.summary(), mon.summary(window="training")
    assert training["seconds"] == 1.5 and training["samples"] == 3 and whole["samples"] == 6
    assert training["machine_cpu_pct"] == 45.0 and training["trainer_cores"] == pytest.approx(0.9)
    assert whole["machine_cpu_pct"] == pytest.approx(25.0)
    labels, times, values = mon.matrix(window="training")
    assert times == [0.5, 1.0, 1.5] and values[0] == [90, 90, 90]  # timed from the window's start
    assert mon.heatmap(window="training").axes and mon.heatmap().axes and mon.lines().axes
    assert plots.compare_heatmaps({"a": mon, "b": mon}, window="training").axes
    with pytest.raises(KeyError, match="no window 'eval'"):
        mon.summary(window="eval")
    with pytest.raises(ValueError, match="must come after"):
        mon.mark("backwards", 2.0, 1.0)


def test_a_window_on_another_clock_is_shifted_onto_the_samples():
    mon = synthetic([0.5, 1.0], [0, 0])
    mon.mark("training", 3.0, 4.0, clock_zero=mon.started_at - 2.5)  # a job launched 2.5 s before the monitor
    assert mon.windows["training"] == (0.5, 1.5)


def test_the_training_window_comes_from_the_job_log():
    history = [
        {"kind": "train", "t": 6.0, "step": 10},
        {"kind": "train", "t": 7.5, "step": 20},
        {"kind": "eval", "t": 8.0, "val_loss": 1.0},
        {"kind": "final", "t": 9.0, "train_seconds": 3.0},
    ]
    assert monitor.training_window(history) == (5.0, 8.0)  # ends with the last train/eval line, lasts train_seconds
    assert monitor.training_window(history[:-1]) is None  # no summary line: no window


@pytest.mark.slow
def test_gpu_rows_come_from_nvml_when_present(monkeypatch, busy_job):
    """With NVML answering (a stand-in module here: this machine has no GPU), every sample carries each GPU."""

    class Util:
        gpu = 87

    class Mem:
        used = 5e9

    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetUtilizationRates=lambda h: Util,
        nvmlDeviceGetMemoryInfo=lambda h: Mem,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with monitor.watch(busy_job, interval=0.2) as mon:
        busy_job.procs["algo-1"].wait(timeout=60)
    assert mon.gpu_names == ["NVIDIA H100 80GB HBM3"] * 2
    assert all(s.gpu_util == [87.0, 87.0] and s.gpu_mem_gb == [5.0, 5.0] for s in mon.samples)
    labels, _, _ = mon.matrix()
    assert labels[-2:] == ["gpu0", "gpu1"]
    assert mon.summary()["gpu1_util_pct"] == 87.0
    assert len(mon.lines().axes) >= 3  # the GPU panel


def test_no_nvml_means_no_gpu_rows(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as if the package were missing
    assert monitor.GPUs().names == []


def test_bad_interval_is_refused():
    with pytest.raises(ValueError, match="interval"):
        monitor.Monitor(interval=0)


def test_remote_targets_are_refused_before_launch():
    from helpers import jobs

    with pytest.raises(ValueError, match="cloudwatch"):
        monitor.run_monitored(jobs.Job(name="x"), resolve("ml.g5.2xlarge"))


def test_missing_profile_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="profile=True"):
        monitor.top_ops(tmp_path)


def _profile(folder, **self_ms):
    rows = [{"name": name, "self_ms_per_step": ms} for name, ms in self_ms.items()]
    folder.mkdir()
    (folder / "top_ops.rank0.json").write_text(json.dumps({"cpu": rows}))
    return folder


def test_the_step_gap_is_split_part_by_part_and_names_the_largest(tmp_path):
    starved = {"data_wait_ms": 50.0, "on_core_ms": 22.0, "queued_ms": 6.0, "blocked_ms": 2.0}
    fixed = {"data_wait_ms": 1.0, "on_core_ms": 20.0, "queued_ms": 1.0, "blocked_ms": 2.0}
    gap = bottleneck.step_gap(starved, fixed)
    assert gap == {
        "waiting for data": 49.0,
        "computing": 2.0,
        "queued for a core": 5.0,
        "waiting for the device": 0.0,  # neither run had the stand-in device
        "blocked": 0.0,
    }
    slow = _profile(tmp_path / "slow", **{"enumerate(DataLoader)": 48.0, "aten::addmm": 9.0, "aten::gelu": 3.0})
    fast = _profile(tmp_path / "fast", **{"enumerate(DataLoader)": 0.5, "aten::addmm": 8.0, "aten::mul": 2.0})
    assert bottleneck.loader_wait_ms(slow) == 48.0  # the profile's view of the wait: the trainer in next(loader)
    grown = bottleneck.operator_gap(slow, fast, limit=4)
    assert grown[0] == ("enumerate(DataLoader)", 47.5) and ("aten::mul", -2.0) in grown  # every operator, both sides
    cause, sentence = bottleneck.verdict(gap, grown[:3])
    assert cause == "waiting for data" and "49.0 ms (88%) was waiting for data" in sentence
    assert "queued for a core +5.0" in sentence and "aten::gelu +3.0" in sentence  # all parts, not only the top


def test_a_gap_needs_the_step_breakdown_and_a_slower_step():
    with pytest.raises(KeyError, match="step_breakdown=True"):
        bottleneck.step_gap({"data_wait_ms": 1.0}, {"data_wait_ms": 1.0})
    cause, sentence = bottleneck.verdict({"waiting for data": -1.0, "computing": 0.5}, [])
    assert cause == "" and "no gap to explain" in sentence


def test_the_quietest_cores_are_this_process_s_own(monkeypatch):
    monkeypatch.setattr(monitor.psutil, "cpu_percent", lambda interval, percpu: [90.0, 5.0, 50.0, 1.0])
    monkeypatch.setattr(monitor.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert monitor.quietest_cores(2, seconds=0) == [1, 2] and monitor.quietest_cores(0, seconds=0) == [1]


def test_free_cores_is_between_none_and_all():
    free = monitor.free_cores(seconds=0.2)
    assert 0.0 <= free <= len(os.sched_getaffinity(0))


def test_free_cores_counts_only_the_cores_this_process_may_use(monkeypatch):
    """A lab pinned to one core of two (two labs at a time) has one core, however idle the other is."""
    monkeypatch.setattr(monitor.psutil, "cpu_percent", lambda interval, percpu: [30.0, 0.0, 100.0, 0.0])
    monkeypatch.setattr(monitor.os, "sched_getaffinity", lambda pid: {0, 2})
    assert monitor.free_cores(seconds=0) == pytest.approx(0.7)


def test_free_cores_and_the_lab_runner_work_where_the_os_has_no_core_affinity(monkeypatch):
    """macOS has no sched_getaffinity: every core counts, and the labs run one at a time (nothing to pin them to)."""
    from course import run_labs

    monkeypatch.setattr(monitor.psutil, "cpu_percent", lambda interval, percpu: [50.0, 0.0])
    for name in ("sched_getaffinity", "sched_setaffinity"):
        monkeypatch.delattr(os, name, raising=False)
    assert monitor.free_cores(seconds=0) == pytest.approx(1.5)
    assert run_labs.default_streams("local_cpu", 8) == 1


def test_the_recorded_gpu_profile_says_where_when_and_how_and_reads_as_a_runs_would():
    """Lab 07 shows learners without a GPU a profile recorded on one: it must carry its provenance, and its rows
    must read through the same function a run's profile does (the top operators, largest first)."""
    recorded = monitor.recorded_profile()
    assert {"date", "machine", "software", "command", "run"} <= set(recorded["recorded"])
    assert "H200" in recorded["recorded"]["machine"]
    for device in ("gpu", "cpu"):
        rows = monitor.recorded_top_ops(device, limit=6)
        assert len(rows) == 6 and set(rows[0]) == {"operator", "ms per step", "share", "calls per step"}
        assert [r["ms per step"] for r in rows] == sorted((r["ms per step"] for r in rows), reverse=True)
    # the lab's sentence: the attention's CPU time per call against its kernel's, from the recorded rows
    forward = next(o for o in recorded["cpu"] if o["name"] == "aten::_cudnn_attention_forward")
    kernel = next(o for o in recorded["gpu"] if o["name"].startswith("cudnn_generated") and "fprop" in o["name"])
    assert forward["calls_per_step"] == kernel["calls_per_step"]  # the same calls, seen from each side
    assert (
        forward["self_ms_per_step"] / forward["calls_per_step"]
        > 100 * kernel["self_ms_per_step"] / kernel["calls_per_step"]
    )
    with pytest.raises(KeyError, match="no 'tpu' list"):
        monitor.recorded_top_ops("tpu")


def test_other_work_is_counted_on_the_lab_s_own_cores_only(monkeypatch):
    """A lab beside another lab's stream (make on a 4-vCPU space: two cores each): the other stream's busy cores are
    not in the way of this lab's ranks, so they are not its "other work"."""
    from helpers.planning import scaling

    mon = monitor.Monitor(gpus=False)
    roles = {"launcher": 0.0, "trainer": 80.0, "loader workers": 0.0}
    for t in (0.5, 1.0):  # cores 0 and 1 this lab's (the trainer at 80% on core 0), 2 and 3 another stream's
        mon.samples.append(monitor.Sample(t, [80.0, 10.0, 100.0, 100.0], roles, dict(roles), {r: 1 for r in roles}))
    monkeypatch.setattr(monitor, "_own_cores", lambda: [0, 1])
    used = scaling.cores_used(mon)
    assert used["job"] == pytest.approx(0.8) and used["other work"] == pytest.approx(0.1)  # not 2.1
