"""The interruption drill end to end (slow: it launches jobs), the spot calculator and the spot job's dry run."""

from __future__ import annotations

import json
import math
import re
import signal
import threading

import pytest
import torch
from conftest import TINY

from helpers.job_spec import Job, catalog_channels, parse_metric_line
from helpers.jobs import on_sagemaker
from helpers.local import drill, drill_verdict
from helpers.local.runner import LocalRunner
from helpers.planning import spot
from helpers.targets import resolve

from checkpointing import EXIT_STOPPED  # noqa: E402

# 1,200 rows in batches of 32: 37 steps, a checkpoint every 8, two evaluations
DRILL = {
    **TINY,
    "subset": 1200,
    "epochs": 1,
    "eval_subset": 300,
    "evals_per_epoch": 2,
    "checkpoint_every": 8,
    "threads": 1,
}


def check_segments(d: drill_verdict.Drill, every: int, forwarded: bool = False) -> None:
    """Each launch but the last was stopped mid-run by its interruption, and the next resumed where it should."""
    total = d.reference.metrics["steps"]
    assert d.segments[-1].status == "Completed" and d.segments[-1].last_step == total
    for before, after in zip(d.segments, d.segments[1:]):
        assert before.signalled_s is not None, "every launch but the last was interrupted by the drill"
        assert before.status == "Stopped" and before.last_step < total, "interrupted mid-run, not at the end"
        assert before.interruption.step <= before.last_step
        signal_saves = [step for _, step, reason, _ in before.saves if reason == "signal"]
        if before.interruption.signal == "SIGTERM" and forwarded:  # the script heard it: saved where it stopped
            assert signal_saves and after.resumed_from == before.last_step and before.lost_steps == 0
        else:  # SageMaker's SIGTERM stops at the container's first process; SIGKILL gives no warning at all
            assert not signal_saves
            assert after.resumed_from % every == 0 or after.resumed_from == before.resumed_from
            assert after.resumed_from <= before.last_step
            assert before.lost_steps == before.last_step - after.resumed_from
        assert not before.survivors


@pytest.mark.slow
@pytest.mark.long
def test_sigterm_and_sigkill_at_random_steps_resume_bit_identically(small_catalog, tmp_path):
    job = Job("drill-one", DRILL, catalog_channels(small_catalog), processes_per_host=1)
    d = drill.run_drill(job, resolve("local_cpu"), interruptions=2, seed=1, runs_dir=tmp_path)
    assert {s.interruption.signal for s in d.interruptions} == {"SIGTERM", "SIGKILL"}
    assert len(d.segments) == 3
    check_segments(d, DRILL["checkpoint_every"])
    assert d.comparison.identical, d.comparison.differences
    assert d.comparison.max_abs_diff == 0 and d.comparison.history_rows[0] > 30
    assert len(d.timeline()) == 3 and d.time_split()["interrupted"]["start-up"] > 0
    d.plot()

    # the same checkpoints under another learning rate: refused, with the difference named, before any training
    changed = Job("drill-one", {**d.job.hyperparameters, "lr": 1e-3}, job.channels, processes_per_host=1)
    refused = LocalRunner(tmp_path / "refused", echo=False, check=False, checkpoint_dir=d.checkpoint_dir).run(
        changed, resolve("local_cpu")
    )
    assert refused.status == "Failed"
    assert (
        "refusing to resume" in refused.failure_reason
        and "lr: 0.002 in the checkpoint, 0.001 now" in refused.failure_reason
    )
    assert not [h for h in refused.history if h["kind"] == "train"]


@pytest.mark.slow
@pytest.mark.long
def test_ddp_run_with_a_forwarded_sigterm_resumes_bit_identically(small_catalog, tmp_path):
    """The best case: SIGTERM reaches both ranks, which agree on a step, save there and leave."""
    job = Job("drill-ddp", DRILL, catalog_channels(small_catalog), processes_per_host=2)
    plan = [drill_verdict.Interruption(9, "SIGTERM"), drill_verdict.Interruption(21, "SIGKILL")]
    d = drill.run_drill(job, resolve("local_cpu"), plan=plan, runs_dir=tmp_path, forward_sigterm=True)
    check_segments(d, DRILL["checkpoint_every"], forwarded=True)
    assert len(d.segments) == 3
    manifest = d.checkpoint_dir / next(p.name for p in d.checkpoint_dir.iterdir() if p.name.startswith("step-"))
    assert sorted(p.name for p in manifest.iterdir()) == ["manifest.json", "rank-00000.pt", "rank-00001.pt", "state.pt"]
    assert d.comparison.identical, d.comparison.differences


@pytest.mark.slow
@pytest.mark.long
def test_two_ranks_killed_three_times_mid_run_resume_bit_identically(small_catalog, tmp_path):
    """The case a new user tried: 2 ranks, a global batch of 32, 40 steps, a checkpoint every 5 steps and three
    interruptions. Every process of a launch dies with it (torchrun's workers run in sessions of their own), so
    each launch stops where it was interrupted and the next resumes from an earlier checkpoint."""
    hp = {**DRILL, "batch_size": 16, "subset": 1280, "checkpoint_every": 5}
    job = Job("drill-kill", hp, catalog_channels(small_catalog), processes_per_host=2)
    d = drill.run_drill(
        job, resolve("local_cpu"), interruptions=3, seed=20261123, runs_dir=tmp_path, kinds=("SIGKILL", "SIGTERM")
    )
    assert len(d.interruptions) == 3 and len(d.segments) == 4
    check_segments(d, hp["checkpoint_every"])
    assert sum(s.lost_steps for s in d.segments) > 0  # no notice reached the script: work was redone
    assert d.comparison.identical, d.comparison.differences


@pytest.mark.slow
@pytest.mark.long  # a whole drill (about 14 s): make long-check
def test_a_drill_whose_interruptions_do_not_interrupt_fails(small_catalog, tmp_path, monkeypatch):
    """As when a kill reached only torchrun and its workers trained on: the drill must not report success."""
    from helpers.local.containers import LocalJob

    monkeypatch.setattr(LocalJob, "kill", lambda self, host=None: None)  # the signal goes nowhere
    job = Job("drill-vacuous", DRILL, catalog_channels(small_catalog), processes_per_host=1)
    with pytest.raises(drill_verdict.DrillFailed, match="the signal did not stop it"):
        drill.run_drill(job, resolve("local_cpu"), plan=[drill_verdict.Interruption(7, "SIGKILL")], runs_dir=tmp_path)


def _worker_of_rank(launcher_pid: int, rank: int):
    """torchrun's worker process for ``rank`` (its direct child with that RANK in its environment)."""
    import psutil

    workers = [p for p in psutil.Process(launcher_pid).children(recursive=True) if p.environ().get("RANK") == str(rank)]
    assert len(workers) == 1, f"expected one worker of rank {rank} under torchrun, found {workers}"
    return workers[0]


def _kill(workers) -> None:
    import psutil

    for w in workers:
        try:
            w.kill()  # psutil checks it is still the same process (no pid reuse)
        except psutil.NoSuchProcess:
            pass


@pytest.mark.slow
def test_sigterm_to_one_rank_stops_every_rank_at_the_same_step(small_catalog, tmp_path):
    """A spot notice need not reach every rank at once (each host gets its own): the rank that saw SIGTERM must
    bring the others along, through the stop flag all ranks reduce each step, or they would hang waiting for it."""
    hp = {**DRILL, "log_every": 1, "checkpoint_every": 1000}  # no periodic save: the only one is the signal's
    events, hung, workers, live = [], [], [], None

    def give_up() -> None:  # ranks that disagree on the stop step wait in mismatched collectives for gloo's 30 min
        hung.append(True)
        _kill(workers)

    guard = threading.Timer(60, give_up)
    guard.daemon = True

    def signal_rank_1_once_training_runs(host: str, line: str) -> None:
        row = parse_metric_line(line)
        if row and row["kind"] == "train" and not events:  # rank 0 logged a step: both ranks are in the loop
            workers.extend(_worker_of_rank(live.procs["algo-1"].pid, rank) for rank in (0, 1))
            workers[1].send_signal(signal.SIGTERM)
            guard.start()
            events.append(("signalled", row["step"]))
        elif row and row["kind"] == "checkpoint" and row.get("event") == "saved":
            events.append(("saved", row["step"], row["reason"]))

    ckpt_dir = tmp_path / "checkpoints"
    runner = LocalRunner(
        tmp_path / "jobs", echo=False, check=False, on_line=signal_rank_1_once_training_runs, checkpoint_dir=ckpt_dir
    )
    live = runner.start(
        Job("one-rank-sigterm", hp, catalog_channels(small_catalog), processes_per_host=2), resolve("local_cpu")
    )
    try:
        result = live.wait()
    finally:
        guard.cancel()
    assert not hung, "the ranks did not stop at the same step: they hung and were killed after 60 s"
    (_, signalled_at), *saves = events
    assert len(saves) == 1, (events, result.log_tail)
    _, step, reason = saves[0]
    assert reason == "signal" and signalled_at <= step < hp["checkpoint_every"]  # rank 0 stopped for rank 1's signal
    assert [p.name for p in ckpt_dir.iterdir()] == [f"step-{step:08d}"]
    saved = ckpt_dir / f"step-{step:08d}"
    manifest = json.loads((saved / "manifest.json").read_text())
    assert manifest["step"] == step and manifest["world"] == 2
    assert sorted(manifest["files"]) == ["rank-00000.pt", "rank-00001.pt", "state.pt"]
    for rank_file in ("rank-00000.pt", "rank-00001.pt"):
        assert torch.load(saved / rank_file, weights_only=True)["progress"]["step"] == step
    assert max(h["step"] for h in result.history if h["kind"] == "train") == step
    assert not [h for h in result.history if h["kind"] == "final"]
    # both ranks left with the script's "stopped" code; torchrun, not signalled itself, reports them as failed
    report = "\n".join(result.log_tail)
    assert sorted(re.findall(r"rank\s+:\s+(\d+)", report)) == ["0", "1"], result.log_tail
    assert re.findall(r"exitcode\s+:\s+(-?\d+)", report) == [str(EXIT_STOPPED)] * 2, result.log_tail


def test_interruption_plan_is_random_but_reproducible():
    plan = drill_verdict.plan_interruptions(40, 4, seed=5)
    assert plan == drill_verdict.plan_interruptions(40, 4, seed=5) != drill_verdict.plan_interruptions(40, 4, seed=6)
    steps = [i.step for i in plan]
    assert steps == sorted(steps) and all(b - a >= 1 for a, b in zip(steps, steps[1:])) and 2 <= steps[0]
    assert steps[-1] < 40 and sorted(i.signal for i in plan) == ["SIGKILL", "SIGKILL", "SIGTERM", "SIGTERM"]
    with pytest.raises(ValueError, match="do not fit"):
        drill_verdict.plan_interruptions(10, 8)
    with pytest.raises(ValueError, match="kinds"):
        drill_verdict.plan_interruptions(40, 2, kinds=("SIGHUP",))


def test_drill_refuses_a_job_that_does_not_checkpoint_before_launching(tmp_path):
    with pytest.raises(ValueError, match="checkpoint_every"):
        drill.run_drill(Job("x", dict(TINY)), resolve("local_cpu"), runs_dir=tmp_path)
    with pytest.raises(ValueError, match="local"):
        drill.run_drill(Job("x", {**TINY, "checkpoint_every": 5}), resolve("ml.g5.2xlarge"), runs_dir=tmp_path)
    assert not list(tmp_path.iterdir())


def test_expected_time_without_interruptions_is_the_work_plus_saving():
    a = spot.SpotAssumptions(interruptions_per_hour=0, save_s=36)
    assert spot.expected_hours(10, 1.0, a) == pytest.approx(10 + 10 * 0.01)
    assert spot.expected_hours(10, None, a) == 10


def test_checkpoints_beat_restarting_from_scratch_and_youngs_interval_is_near_the_best():
    a = spot.SpotAssumptions(interruptions_per_hour=0.2, save_s=60, restart_s=300)
    never = spot.expected_hours(20, None, a)
    best = spot.best_interval_h(a)
    x, y = spot.interval_curve(20, a, points=400)
    assert never > 2 * 20 and min(y) < 20 * 1.2
    assert spot.expected_hours(20, best, a) == pytest.approx(min(y), rel=0.01)
    assert spot.expected_hours(20, best, a) < spot.expected_hours(20, best / 8, a)
    assert spot.expected_hours(20, best, a) < spot.expected_hours(20, best * 8, a)
    notice = spot.SpotAssumptions(interruptions_per_hour=0.2, save_s=60, restart_s=300, saves_on_notice=True)
    assert spot.expected_hours(20, 4.0, notice) < spot.expected_hours(20, 4.0, a)


def test_rework_table_prices_the_catalogue_and_spot_can_lose_its_discount():
    rows = spot.rework("ml.p4d.24xlarge", 24, a=spot.SpotAssumptions(saving=0.3, interruptions_per_hour=0.5))
    assert rows[0]["on-demand $"] == pytest.approx(24 * 25.2513, abs=0.01)
    never = rows[-1]
    assert never["checkpoint every"] == "never" and never["spot $"] > never["on-demand $"]  # spot costs MORE
    assert min(r["spot $"] for r in rows) < rows[0]["on-demand $"]
    table = spot.compare_instances(
        {"ml.g5.2xlarge": 10, "ml.p4d.24xlarge": 1}, instance_types=("ml.g5.2xlarge", "ml.p4d.24xlarge")
    )
    assert [r["instance"] for r in table] == ["ml.g5.2xlarge", "ml.p4d.24xlarge"]
    assert table[0]["on-demand $"] == pytest.approx(15.2) and table[0]["price as of"]
    with pytest.raises(ValueError, match="saving"):
        spot.SpotAssumptions(saving=1.2)
    assert math.isinf(spot.best_interval_h(spot.SpotAssumptions(interruptions_per_hour=0)))


def test_spot_without_checkpoints_costs_more_than_on_demand_exactly_past_its_break_even():
    """Lab 06 says where spot without checkpoints stops paying: the rework table itself turns there."""
    a = spot.SpotAssumptions()
    even = spot.no_checkpoint_break_even_h(a)
    (shorter,), (longer,) = (
        spot.rework("ml.g6.xlarge", w, intervals_min=(None,), a=a) for w in (0.9 * even, 1.1 * even)
    )
    assert shorter["spot $"] < shorter["on-demand $"] and longer["spot $"] > longer["on-demand $"]
    assert math.isinf(spot.no_checkpoint_break_even_h(spot.SpotAssumptions(interruptions_per_hour=0)))


def test_spot_job_dry_run_has_managed_spot_stopping_condition_and_checkpoint_config():

    job = Job(
        "lab06-spot",
        {**TINY, "checkpoint_every": 200},
        catalog_channels(),
        spot=True,
        checkpoints=True,
        max_runtime_s=3600,
        max_wait_s=7200,
    )
    dry = on_sagemaker(job, resolve("ml.g5.2xlarge"), echo=False)
    r = dry.request
    assert r["EnableManagedSpotTraining"] is True
    assert r["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert r["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
    assert r["CheckpointConfig"]["S3Uri"].startswith("s3://") and "lab06-spot" in r["CheckpointConfig"]["S3Uri"]
    assert r["HyperParameters"]["checkpoint_every"] == "200"
    assert dry.estimate.spot and "spot" in str(dry)
