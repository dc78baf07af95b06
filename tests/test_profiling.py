"""Profiling in the training script: the trace and top-operators table, the data-pipeline knobs, the step clock."""

from __future__ import annotations

import gzip
import json
import os
import time
import types
import warnings

import pytest
import torch
from conftest import TINY, run_script

from helpers.local import monitor

import profiling  # noqa: E402
from catalog_data import (  # noqa: E402
    DataError,
    PadCollator,
    TitlesTokenizedOnTheFly,
    TokenizedTitles,
    decode,
    load_tokenizer,
    read_channel,
    read_labels,
)
from sampling import GlobalBatchPlan  # noqa: E402


@pytest.fixture(scope="module")
def profiled(small_catalog, tmp_path_factory):
    """One by-hand run with the starved pipeline's knobs and --profile, across an epoch boundary: its output
    directory, summary and log."""
    out = tmp_path_factory.mktemp("profiled")
    args = [
        "train.py",
        "--train",
        str(small_catalog / "train"),
        "--validation",
        str(small_catalog / "validation"),
        "--model_dir",
        str(out / "model"),
        "--output_data_dir",
        str(out / "data"),
        "--subset",
        "640",
        "--eval_subset",
        "200",
        "--max_steps",
        "26",
        "--epochs",
        "2",
        *[x for k, v in TINY.items() for x in (f"--{k}", str(v))],
        "--tokenize",
        "on_the_fly",
        "--num_workers",
        "2",
        "--persistent_workers",
        "true",
        "--threads",
        "1",
        "--profile",
        "true",
        "--profile_schedule",
        "2,1,3",
    ]
    done = run_script(args, env={"SM_OUTPUT_DIR": str(out / "output")})
    assert done.returncode == 0, done.stdout + done.stderr
    return out, json.loads((out / "data" / "metrics.json").read_text())["summary"], done.stdout + done.stderr


@pytest.mark.slow
def test_profile_writes_a_chrome_trace(profiled):
    out, _, log = profiled
    traces = list((out / "data" / "profile").glob("local-rank0.*.pt.trace.json.gz"))
    assert len(traces) == 1
    trace = json.loads(gzip.decompress(traces[0].read_bytes()))
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert {"ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"} <= names  # the active steps (wait 2, warmup 1)
    assert "ProfilerStep#1" not in names and "ProfilerStep#6" not in names
    assert any(n.startswith("enumerate(DataLoader)#_MultiProcessingDataLoaderIter") for n in names)
    assert any(n in ("aten::addmm", "aten::mm") for n in names)
    assert "profiler_start" not in log and "USDT" not in log  # kineto's probe markers stay out of a CPU job's log


@pytest.mark.slow
def test_profile_writes_the_top_operators(profiled):
    out, summary, _ = profiled
    report = monitor.profile_report(out / "data")
    assert report["device"] == "cpu" and report["schedule"] == {"wait": 2, "warmup": 1, "active": 3}
    assert report["traces"] and report["step_ms"] > 0 and "gpu" not in report
    ops = report["cpu"]
    assert ops and all(not o["name"].startswith("ProfilerStep") for o in ops)
    assert ops == sorted(ops, key=lambda o: -o["self_ms_per_step"])
    assert 0 < sum(o["share"] for o in ops) <= 1.0 + 1e-9
    assert any(o["name"] in ("aten::addmm", "aten::mm") for o in ops)
    text = (out / "data" / "profile" / "top_ops.rank0.txt").read_text()
    assert "Self CPU" in text and "aten::" in text
    rows = monitor.top_ops(out / "data", limit=5)
    assert len(rows) == 5 and set(rows[0]) == {"operator", "ms per step", "share", "calls per step"}
    # the knobs reached the trainer, and the clock left the profiled steps out
    assert summary["threads"] == 1 and summary["num_workers"] == 2 and summary["profiled_steps"] == 3
    assert 0 <= summary["data_wait_frac"] < 1 and summary["step_ms"] > 0 and summary["steps"] == 26


def _datasets(catalog, rows=300):
    labels = read_labels(catalog / "train")
    tokenizer = load_tokenizer(str(catalog / "train" / "tokenizer.json"))
    titles, targets = read_channel(catalog / "train", labels, rows)
    return (
        TokenizedTitles(titles, targets, tokenizer, 24),
        TitlesTokenizedOnTheFly(titles, targets, tokenizer, 24),
        PadCollator(tokenizer.pad_token_id),
    )


def _batches(dataset, collate, workers=0):
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_sampler=GlobalBatchPlan(len(dataset), 32, seed=3),
        collate_fn=collate,
        num_workers=workers,
        generator=torch.Generator().manual_seed(3),
    )
    return list(loader)


def test_on_the_fly_and_ahead_give_identical_batches(small_catalog):
    ahead, on_the_fly, collate = _datasets(small_catalog)
    assert [on_the_fly[i] for i in range(len(ahead))] == [ahead[i] for i in range(len(ahead))]
    truncated = max(len(ids) for ids, _ in (on_the_fly[i] for i in range(len(on_the_fly))))
    assert truncated <= 24  # truncation applies per title too
    reference = _batches(ahead, collate)
    for got in (_batches(on_the_fly, collate), _batches(on_the_fly, collate, workers=2)):
        assert len(got) == len(reference) == 300 // 32
        for a, b in zip(reference, got):
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_decoding_costs_its_cpu_time_per_sample_and_changes_no_batch(small_catalog):
    labels = read_labels(small_catalog / "train")
    tokenizer = load_tokenizer(str(small_catalog / "train" / "tokenizer.json"))
    titles, targets = read_channel(small_catalog / "train", labels, 20)
    before = time.thread_time()
    assert decode(titles[0], 5.0) == titles[0]
    assert time.thread_time() - before >= 0.005  # CPU time, not a sleep: a busy core makes it last longer
    ahead = TokenizedTitles(titles, targets, tokenizer, 24, decode_ms=0.5)
    on_the_fly = TitlesTokenizedOnTheFly(titles, targets, tokenizer, 24, decode_ms=0.5)
    before = time.thread_time()
    assert [on_the_fly[i] for i in range(20)] == [ahead[i] for i in range(20)]
    assert time.thread_time() - before >= 20 * 0.0005  # every sample paid again, on the fly


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no core pinning on this OS (macOS)")
def test_pinning_keeps_the_process_on_the_cores_named_and_refuses_others():
    before = os.sched_getaffinity(0)
    try:
        profiling.pin_cores("")
        assert os.sched_getaffinity(0) == before
        first = min(before)
        profiling.pin_cores(str(first))
        assert os.sched_getaffinity(0) == {first}
        for text in ("a", "0,,1", "999"):
            with pytest.raises(SystemExit, match="give core numbers"):
                profiling.pin_cores(text)
    finally:
        os.sched_setaffinity(0, before)


def test_length_bucketing_needs_lengths_up_front(small_catalog):
    _, on_the_fly, _ = _datasets(small_catalog, rows=40)
    with pytest.raises(DataError, match="--tokenize ahead"):
        on_the_fly.ids  # noqa: B018 - what train.py reads for --bucket_by_length


@pytest.mark.parametrize("text", ["2,2", "a,b,c", "1,1,0", "-1,1,2"])
def test_bad_schedules_are_refused(text):
    with pytest.raises(SystemExit, match="--profile_schedule"):
        profiling.parse_schedule(text)


def test_a_schedule_longer_than_the_run_is_refused_before_training(tmp_path):
    args = types.SimpleNamespace(
        profile=True, profile_schedule="2,2,5", profile_dir="", output_data_dir=str(tmp_path), num_workers=0
    )
    with pytest.raises(SystemExit, match="needs 9 steps but this run has 6"):
        profiling.start(args, types.SimpleNamespace(device=torch.device("cpu"), rank=0), total_steps=6)
    assert not any(tmp_path.iterdir())  # nothing written


def test_without_profile_only_the_clock_runs():
    args = types.SimpleNamespace(profile=False, num_workers=0)
    timer = profiling.start(args, None, total_steps=3)
    assert type(timer) is profiling.StepTimer
    seen = []
    for batch in timer.batches([10, 20, 30]):
        seen.append(batch)
        timer.step()
    assert seen == [10, 20, 30]
    summary = timer.close()
    assert summary["num_workers"] == 0 and summary["threads"] == torch.get_num_threads()
    assert 0 <= summary["data_wait_frac"] <= 1 and summary["first_batch_s"] >= 0


def test_profiled_steps_are_left_out_of_the_clock():
    timer = profiling.TorchProfiler.__new__(profiling.TorchProfiler)
    timer.schedule, timer.steps_done = (2, 1, 3), 0
    counted = []
    for done in range(10):
        timer.steps_done = done
        counted.append(timer.counted())
    # asked as batch done+1 arrives: spans touching steps 3-6 (0-based 2-5: warmup and active) are left out
    assert counted == [True, True, False, False, False, False, False, True, True, True]


class WarnsOnIter:
    """A loader that warns as DataLoader does when asked for more workers than cores, and a second, other warning."""

    def __iter__(self):
        warnings.warn(
            "This DataLoader will create 4 worker processes in total. Our suggested max number of worker "
            "in current system is 2",
            UserWarning,
        )
        warnings.warn("something else", UserWarning)
        return iter([1, 2])


def test_the_worker_count_warning_is_not_repeated_each_epoch():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(profiling.StepClock().batches(WarnsOnIter())) == [1, 2]
    assert [str(w.message) for w in caught] == ["something else"]  # the loader gave the first when it was built


def test_what_the_loop_does_between_steps_is_no_steps_time(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(profiling, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    def loader():
        for i in range(4):
            now[0] += 1.0  # each batch keeps the trainer waiting 1 s
            yield i

    timer = profiling.StepTimer()
    for batch in timer.batches(loader()):
        now[0] += 2.0  # each step works 2 s
        timer.step()
        now[0] += 10.0 if batch == 1 else 0.0  # then an evaluation, between two steps
    summary = timer.close()  # steps 2 and 3 counted (the first is warm-up), the evaluation in neither
    assert summary["step_ms"] == pytest.approx(3000) and summary["data_wait_frac"] == pytest.approx(1 / 3)


def test_the_clock_leaves_out_the_first_batch_and_the_first_step():
    clock = profiling.StepClock()
    assert list(clock.batches(range(6))) == list(range(6))
    assert clock.steps == 4  # spans 2->3 ... 5->6: the first batch's wait and the first step's warm-up are out
    assert set(clock.summary()) == {"data_wait_frac", "data_wait_ms", "step_ms", "first_batch_s"}
    assert profiling.StepClock().summary().keys() == {"first_batch_s"}  # no step: no ratio to report


def test_the_step_breakdown_splits_each_step_s_work_by_where_the_thread_was(monkeypatch):
    """--step_breakdown: after the data wait, on a core + queued for one + blocked = the step's work, from the
    thread's schedstat read where the clock reads its own time."""
    now, on_core, queued = [0.0], [0.0], [0.0]
    monkeypatch.setattr(profiling, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(profiling, "thread_times", lambda: (on_core[0], queued[0]))

    def loader():
        for i in range(5):
            now[0] += 1.0  # each batch: 1 s of waiting for input
            yield i

    timer = profiling.StepTimer(breakdown=True)
    for _ in timer.batches(loader()):
        now[0] += 4.0  # each step's work: 2 s computing, 1.5 s queued for a core, 0.5 s blocked
        on_core[0] += 2.0
        queued[0] += 1.5
        timer.step()
    summary = timer.close()
    assert summary["step_ms"] == pytest.approx(5000) and summary["data_wait_ms"] == pytest.approx(1000)
    assert (summary["on_core_ms"], summary["queued_ms"], summary["blocked_ms"]) == pytest.approx((2000, 1500, 500))
    assert "on_core_ms" not in profiling.StepTimer().close()  # off by default: the [final] line keeps its keys


def test_the_stand_in_device_makes_each_step_last_its_time_off_the_cores(monkeypatch):
    """--device_ms: the step's host work overlaps the device's time, and the rest is a wait (a sleep: no core), which
    the breakdown counts as waiting for the device, not as blocked."""
    now, on_core, slept = [0.0], [0.0], []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(profiling, "time", types.SimpleNamespace(perf_counter=lambda: now[0], sleep=sleep))
    monkeypatch.setattr(profiling, "thread_times", lambda: (on_core[0], 0.0))
    timer = profiling.StepTimer(breakdown=True, device_ms=50)
    for batch in timer.batches(range(5)):
        host = 0.08 if batch == 3 else 0.02  # this step's host work outlasts the device: no wait
        now[0] += host
        on_core[0] += host
        timer.step()
    summary = timer.close()
    assert slept == pytest.approx([0.03] * 4)  # 50 ms a step, 20 of them the host's own work
    # steps 2-4 counted (the first is warm-up, the last has no next batch): 50, 50 and 80 ms
    assert summary["device_wait_ms"] == pytest.approx(20) and summary["blocked_ms"] == pytest.approx(0)
    assert summary["step_ms"] == pytest.approx(60) and summary["on_core_ms"] == pytest.approx(40)


def test_thread_times_come_from_linux_schedstat_or_not_at_all(monkeypatch):
    times = profiling.thread_times()
    assert times is None or (len(times) == 2 and times[0] > 0 and times[1] >= 0)
    monkeypatch.setattr("builtins.open", lambda *a, **k: (_ for _ in ()).throw(FileNotFoundError(a[0])))
    assert profiling.thread_times() is None  # macOS, Windows: no split, and the clock's figures as before
    assert not profiling.StepClock(breakdown=True).breakdown
