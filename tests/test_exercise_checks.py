"""Each lab's check says, specifically, what is wrong with a typical wrong answer, and passes the right one."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from course.exercises import evaluate
from helpers.planning import instances

GIB = 2**30
P = 1.236e9  # a parameter count


def _two_by_two(**answers) -> dict:
    """Lab 03's 03.1: the job changed to two processes a node, its predictions, and what its run showed."""
    ran = {"status": "Completed", "reason": "", "instance_count": 2, "node_rank": 1, "processes_per_host": 2}
    ran.update(first_rank_on_algo_2=2, world_size=4)
    given = dict(my_processes_per_host=2, world_size=4, first_rank_on_algo_2=2, efa_types={"ml.p4d.24xlarge"}, ran=ran)
    return {**given, **answers}


def _request(backend: str = "nccl", p5: bool = True, toolkit: bool = False) -> dict:
    """The parts of a CreateTrainingJob request that lab 03's second check reads."""
    hps = {"backend": backend, **({"sagemaker_distributed_dataparallel_enabled": "true"} if toolkit else {})}
    return {
        "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-x"},
        "HyperParameters": hps,
        "InputDataConfig": [{"ChannelName": c} for c in ("train", "code", *(() if toolkit else ("sm_drivers",)))],
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge" if p5 else "ml.p4d.24xlarge", "InstanceCount": 2},
    }


def _ranks(strategy: str, param: float, grad: float, optimizer: float) -> dict:
    """Lab 04's run of one strategy, two ranks, as the tiny model's single process measures 3.85 + 3.85 + 7.71 MB."""
    rank = {"param_bytes": param * 3.85e6, "grad_bytes": grad * 3.85e6, "optimizer_bytes": optimizer * 7.71e6}
    return {"strategy": strategy, "ranks": [rank, rank]}


def _drill(rng: bool, same: bool = False) -> SimpleNamespace:
    """A drill of lab 06's job as the check reads it: its switch, its interruptions and its comparison."""
    comparison = SimpleNamespace(
        identical=same, tensors=40, identical_tensors=40 if same else 33, max_abs_diff=0.0 if same else 3e-3
    )
    return SimpleNamespace(
        job=SimpleNamespace(hyperparameters={"checkpoint_rng": rng}), interruptions=[1, 2], comparison=comparison
    )


def _four_ranks(batch: int | float, lr: float, steps: int = 64, gap: float = 4e-7, status: str = "Completed") -> dict:
    """Lab 02's answers and the two runs the check compares: the single process's 64 steps, and the four ranks'."""
    curve = [2.0 - 0.02 * i for i in range(8)]
    return dict(
        batch_size_4=batch,
        lr_4=lr,
        single={"steps": 64, "curve": curve},
        yours={"status": status, "reason": "", "steps": steps, "curve": [c + gap for c in curve]},
    )


def _loader(workers: int, persistent: bool, threads: int, ratio: float, tokenize="on_the_fly", wait=20.0) -> dict:
    """Lab 07's answers and the pair run with them: the starved run at 250 samples/s waiting 200 ms a step for data,
    the learner's at ``ratio`` x, waiting ``wait`` ms."""
    ran = {"tokenize": tokenize, "num_workers": workers, "persistent_workers": persistent, "threads": threads}
    return dict(
        my_num_workers=workers,
        my_persistent_workers=persistent,
        my_threads=threads,
        starved={"runs": [{"samples_per_sec": 250.0, "data_wait_ms": 200.0}] * 2, "hyperparameters": {}},
        yours={"runs": [{"samples_per_sec": 250.0 * ratio, "data_wait_ms": wait}] * 2, "hyperparameters": ran},
    )


def _second_job(score: float = 0.82, status: str = "Completed", reason: str = "") -> dict:
    """Lab 01's second job as the check reads it: the baseline scored 0.70, the first job 0.80 (CONTEXT)."""
    return {"status": status, "reason": reason, "val_macro_f1": score}


def _modes(a: str, b: str, c: str) -> dict:
    """Exercise 05.1's answers, with the lab's ``this_run`` as a smoke run records it and the job the check ran in
    each mode chosen (FastFile's epochs job 8 s and 394 MB, File's 1.8 s and 88 MB, and so on)."""
    run = {"sequence": 3, "step_ms_per_mb": 50, "file_input_wait_s": 1.39, "fastfile_input_wait_s": 0.15}
    run |= {"fsx_input_wait_s": 1.4, "file_sequence_s": 13.0, "fastfile_sequence_s": 10.0, "fsx_sequence_s": 9.0}
    run |= {"file_sequence_mb": 118.2, "fastfile_sequence_mb": 118.2, "fsx_sequence_mb": 39.4, "small_epochs": 5}
    run |= {"small_data_epochs_file_s": 1.8, "small_data_epochs_fastfile_s": 8.3, "small_data_epochs_file_mb": 87.6}
    jobs = {
        ("a", "File"): (1.8, 87.6),
        ("a", "FastFile"): (8.3, 393.9),
        ("a", "FSx"): (2.1, 87.6),
        ("b", "File"): (4.6, 87.6),
        ("b", "FastFile"): (3.4, 78.8),
        ("b", "FSx"): (4.9, 87.6),
        ("c", "File"): (4.4, 87.6),
        ("c", "FastFile"): (3.3, 78.8),
        ("c", "FSx"): (2.9, 0.0),
    }
    yours = {}
    for key, mode in (("a", a), ("b", b), ("c", c)):
        seconds, mb = jobs.get((key, mode), (0.0, 0.0))
        yours[key] = {"mode": mode, "total_s": seconds, "mb": mb}
    return dict(mode_a=a, mode_b=b, mode_c=c, run=run, yours=yours)


CASES = [
    # (exercise, answers, expected status, words the message must contain)
    ("01.1", dict(pretrained_channel="pretrained", beats_baseline=True, yours=_second_job()), "right", "unchanged"),
    ("01.1", dict(pretrained_channel=" Pretrained", beats_baseline=True, yours=_second_job()), "right", "SM_MODEL_DIR"),
    (
        "01.1",
        dict(pretrained_channel="model", beats_baseline=True, yours=_second_job(0.05)),
        "wrong",
        "from random weights: macro-F1 0.050 after a few steps, against the baseline's 0.700",
    ),
    ("01.1", dict(pretrained_channel="model", beats_baseline=False, yours=_second_job(0.05)), "wrong", "never reads"),
    (
        "01.1",
        dict(pretrained_channel="train", beats_baseline=True, yours=_second_job(0.0, "Failed", "no titles in train")),
        "wrong",
        "replaces the job's own train channel",
    ),
    ("01.1", dict(pretrained_channel="pretrained", beats_baseline=False, yours=_second_job()), "wrong", "it did: "),
    (
        "01.1",
        dict(pretrained_channel="SM_CHANNEL_PRETRAINED", beats_baseline=True, yours=_second_job()),
        "wrong",
        "a variable the container sets",
    ),
    ("01.1", dict(pretrained_channel="/opt/ml/model", beats_baseline=True, yours=_second_job()), "wrong", "a path"),
    (
        "01.1",
        dict(pretrained_channel="pretrained", beats_baseline="yes", yours=_second_job()),
        "wrong",
        "True or False",
    ),
    ("01.1", dict(pretrained_channel="pretrained", beats_baseline=True, yours=None), "wrong", "local target"),
    ("02.1", _four_ranks(64, 3e-3), "right", "64 steps and a largest loss gap of 4e-07"),
    ("02.1", _four_ranks(256, 3e-3, steps=16), "wrong", "took 16 optimizer steps, the single process 64"),
    ("02.1", _four_ranks(64, 1.2e-2, gap=0.21), "wrong", "the largest gap is 0.21"),
    ("02.1", _four_ranks(66, 3e-3, status="Failed"), "wrong", "split evenly across the 4 ranks"),
    ("02.1", {**_four_ranks(64, 3e-3), "yours": None}, "wrong", "target = 'local'"),
    ("02.1", _four_ranks(64.0, 3e-3), "wrong", "whole number"),
    ("03.1", _two_by_two(), "right", "4 processes, and algo-2's first is RANK 2"),
    ("03.1", _two_by_two(world_size=4.0, efa_types=["ml.p4d.24xlarge"]), "right", "EFA on ml.p4d.24xlarge"),
    ("03.1", _two_by_two(world_size=2), "wrong", "one node's processes"),
    ("03.1", _two_by_two(world_size=8), "wrong", "logged world_size=4; you wrote 8"),
    ("03.1", _two_by_two(first_rank_on_algo_2=0), "wrong", "LOCAL_RANK"),
    ("03.1", _two_by_two(first_rank_on_algo_2=1), "wrong", "node_rank=1, nproc_per_node=2"),
    ("03.1", _two_by_two(my_processes_per_host=4), "wrong", "two processes on each node"),
    ("03.1", _two_by_two(ran=None), "wrong", "local target"),
    ("03.1", _two_by_two(ran={"status": "Failed", "reason": "boom", "instance_count": 2}), "wrong", "boom"),
    (
        "03.1",
        _two_by_two(efa_types={"ml.p4d.24xlarge", "ml.g6e.48xlarge"}),
        "wrong",
        "the table's FI_PROVIDER column is empty there",
    ),
    ("03.1", _two_by_two(efa_types=set()), "wrong", "1 more"),
    ("03.2", dict(my_distribution="torchrun", my_backend="nccl", my_request=_request()), "right", "backwards"),
    ("03.2", dict(my_distribution="torchrun", my_backend="auto", my_request=_request("auto")), "right", "torchrun"),
    ("03.2", dict(my_distribution="smddp", my_backend="smddp", my_request=None), "wrong", "does not run SMDDP"),
    ("03.2", dict(my_distribution="torchrun", my_backend="smddp", my_request=_request("smddp")), "wrong", "fall back"),
    ("03.2", dict(my_distribution="torchrun", my_backend="nccl", my_request=None), "wrong", "no request"),
    ("03.2", dict(my_distribution="torchrun", my_backend="nccl", my_request=_request(p5=False)), "wrong", "another"),
    (
        "03.2",
        dict(my_distribution="torchrun", my_backend="nccl", my_request=_request(toolkit=True)),
        "wrong",
        "toolkit",
    ),
    ("03.2", dict(my_distribution="mpi", my_backend="nccl", my_request=None), "wrong", "launcher"),
    ("04.1", dict(my_strategy="zero", measured=_ranks("zero", 1, 1, 0.5)), "right", "ZeRO-1: 11.55 MB"),
    ("04.1", dict(my_strategy="ddp", measured=_ranks("ddp", 1, 1, 1)), "wrong", "does not fit"),
    ("04.1", dict(my_strategy="tp", measured=_ranks("tp", 0.795, 0.795, 0.795)), "wrong", "does not fit"),
    ("04.1", dict(my_strategy="fsdp", measured=_ranks("fsdp", 0.5, 0.5, 0.5)), "wrong", "all-gather"),
    ("04.1", dict(my_strategy="pp", measured=_ranks("pp", 0.5, 0.5, 0.5)), "wrong", "bubble"),
    ("04.1", dict(my_strategy="zero", measured=_ranks("fsdp", 0.5, 0.5, 0.5)), "wrong", "run the cell"),
    ("04.1", dict(my_strategy="zero", measured=None), "wrong", "no run to read"),
    ("04.1", dict(my_strategy="zero1", measured=None), "wrong", "pick one of"),
    ("05.1", _modes("File", "FastFile", "FSx"), "right", "your job, the sequence's next: FSx 2.9 s, 0 MB"),
    ("05.1", _modes("File", "FastFile", "FSx"), "right", "your job: File 1.8 s, 88 MB from the store for 5 epochs"),
    ("05.1", _modes("FastFile", "FastFile", "FSx"), "wrong", "your job read the shards for 5 epochs: FastFile 8.3 s"),
    ("05.1", _modes("FastFile", "FastFile", "FSx"), "wrong", "File's job above copied once"),
    ("05.1", _modes("FSx", "FastFile", "FSx"), "wrong", "FSx bills at least 1.2 TiB a month"),
    ("05.1", _modes("File", "File", "FSx"), "wrong", "File's 3 jobs took 13.0 s and FastFile's 10.0 s"),
    ("05.1", _modes("File", "FSx", "FSx"), "wrong", "a copy with a monthly bill"),
    ("05.1", _modes("File", "FastFile", "File"), "wrong", "jobs above fetched 118 MB from the store, FSx's 39"),
    ("05.1", _modes("File", "FastFile", "FastFile"), "wrong", "the sequence's next in FastFile mode: FastFile 3.3 s"),
    ("05.1", _modes("File", "FastFile", "S3"), "wrong", "one of File, FastFile, FSx"),
    ("05.1", {**_modes("File", "FastFile", "FSx"), "run": None}, "wrong", "no run to read"),
    ("05.1", {**_modes("File", "FastFile", "FSx"), "yours": None}, "wrong", "your jobs did not run"),
    ("05.2", dict(copy_min_100mb=30.16, files_for_an_hour=122_353), "right", "first-byte waits"),
    ("05.2", dict(copy_min_100mb=60.3, files_for_an_hour=122_353), "wrong", "one connection's time"),
    ("05.2", dict(copy_min_100mb=1810, files_for_an_hour=122_353), "wrong", "looks like seconds"),
    ("05.2", dict(copy_min_100mb=30.16, files_for_an_hour=2353), "wrong", "for one connection"),
    ("05.2", dict(copy_min_100mb=30.16, files_for_an_hour=2.45e6), "wrong", "not yet"),
    ("05.2", dict(copy_min_100mb=30.16, files_for_an_hour=2.45), "wrong", "a file size"),
    ("06.1", dict(checkpoint_rng=False, bit_identical=False, your_drill=_drill(False)), "right", "7 of 40"),
    (
        "06.1",
        dict(checkpoint_rng=False, bit_identical=True, your_drill=_drill(False)),
        "wrong",
        "measured a difference",
    ),
    ("06.1", dict(checkpoint_rng=True, bit_identical=True, your_drill=_drill(True)), "wrong", "set it to False"),
    ("06.1", dict(checkpoint_rng=False, bit_identical=False, your_drill=None), "wrong", "target = 'local'"),
    ("06.1", dict(checkpoint_rng=False, bit_identical=False, your_drill=_drill(True)), "wrong", "on"),
    ("06.1", dict(checkpoint_rng=False, bit_identical=True, your_drill=_drill(False, same=True)), "wrong", "dropout"),
    ("06.1", dict(checkpoint_rng="no", bit_identical=False, your_drill=_drill(False)), "wrong", "True or False"),
    ("07.1", _loader(3, True, 1, ratio=1.92), "right", "1.92x the starved run's"),
    ("07.1", _loader(3, True, 1, ratio=1.92), "right", "3 workers that persist and 1 trainer thread on 3 cores"),
    ("07.1", _loader(2, False, 1, ratio=1.52), "right", "waited for data 20 ms a step, the starved ones 200 ms"),
    ("07.1", _loader(4, False, 1, ratio=1.0), "wrong", "4 want more cores than the job has"),
    ("07.1", _loader(2, True, 2, ratio=1.5), "wrong", "the workers leave 1 core for the trainer"),
    ("07.1", _loader(2, True, 2, ratio=1.5), "wrong", "nothing was measured"),
    ("07.1", _loader(1, False, 1, ratio=1.04), "wrong", "more workers, each on a core, decode more batches at once"),
    ("07.1", _loader(0, False, 3, ratio=0.8, wait=250.0), "wrong", "with 0 workers the trainer decodes each batch"),
    (
        "07.1",
        _loader(1, False, 1, ratio=1.04),
        "wrong",
        "1.04x the starved run's samples/s on average (260 against 250; pairs: 1.04x, 1.04x)",
    ),
    ("07.1", {**_loader(2, False, 1, ratio=1.5), "yours": None}, "wrong", "target = 'local'"),
    ("07.1", {**_loader(2, False, 1, ratio=1.5), "my_num_workers": 1}, "wrong", "other settings"),
    ("07.1", _loader(2, False, 1, ratio=1.5, tokenize="ahead"), "wrong", "other settings"),
    ("07.1", {**_loader(2, False, 1, ratio=1.5), "my_persistent_workers": "yes"}, "wrong", "True or False"),
    ("07.1", {**_loader(2, False, 1, ratio=1.5), "my_threads": 0}, "wrong", "1 or more"),
]
CONTEXT = {
    "02.1": dict(base_batch=64, base_lr=3e-3),
    "01.1": dict(baseline_macro_f1=0.70, first_macro_f1=0.80),
    "03.1": dict(  # two rows of lab 03's driver table: what SageMaker's torchrun driver sets on each type
        driver_table=[
            {"instance type": "ml.p4d.24xlarge", "FI_PROVIDER": "efa", "network Gb/s": 400},
            {"instance type": "ml.g6e.48xlarge", "FI_PROVIDER": "", "network Gb/s": 400},
        ],
    ),
    "04.1": dict(budget_mb=0.77 * 15.41),
    "07.1": dict(cores=3),
}


@pytest.mark.parametrize("id, answers, status, words", CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_check(id, answers, status, words):
    got, message = evaluate(id, **answers, **CONTEXT.get(id, {}))
    assert (got, words in message) == (status, True), message


def test_lab07_answers_that_overrun_the_cores_are_wrong_before_anything_is_measured():
    from course.exercises import lab07

    answers = _loader(2, True, 2, ratio=1.46)  # the answer a learner once got "right" for, on a 1-core budget
    assert not lab07.fits(2, 2, cores=1) and lab07.fits(0, 1, cores=1) and not lab07.fits("2", 1, cores=4)
    assert lab07.fits(1, 1, cores=1) and lab07.fits(2, 1, cores=2) and lab07.fits(0, 2, cores=2)  # the device waits
    got, message = evaluate("07.1", **{**answers, "yours": None, "starved": None}, cores=1)
    assert got == "wrong" and "2 want more cores than the job has" in message and "nothing was measured" in message


def test_lab07_on_one_core_a_worker_is_the_choice_and_as_fast_as_the_starved_run_is_right():
    """On one core the starved run's own settings fit (a worker beside the trainer's thread, which waits for the
    device), one worker is right at the starved run's pace, and none is wrong: the device idles while it decodes."""
    got, message = evaluate("07.1", **_loader(1, True, 1, ratio=1.02), cores=1)
    assert got == "right" and "On 1 core one worker is all that fits, as in the starved run" in message, message
    got, message = evaluate("07.1", **_loader(0, False, 1, ratio=0.86, wait=250.0), cores=1)
    assert got == "wrong" and "the device has nothing to do" in message and "250 ms" in message, message
    got, message = evaluate("07.1", **_loader(1, True, 1, ratio=0.7), cores=1)
    assert got == "wrong" and "the target on 1 core is 0.8x" in message, message


def test_lab07_from_two_cores_one_worker_more_than_the_starved_run_must_show():
    got, message = evaluate("07.1", **_loader(1, True, 1, ratio=1.03), cores=2)
    assert got == "wrong" and "the target on 2 cores is 1.3x" in message, message
    got, message = evaluate("07.1", **_loader(2, True, 1, ratio=1.7), cores=2)
    assert got == "right" and "Each worker decodes on a core of its own" in message, message


def test_the_smddp_answer_follows_the_catalogue():
    assert {"ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"} <= set(instances.supporting("smddp"))


def _as_numpy(value):
    """An answer as numpy computes it: its whole numbers as numpy.int64, its fractions as numpy.float32."""
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return np.int64(value) if isinstance(value, int) else np.float32(value)


@pytest.mark.parametrize(
    "id, answers",
    [(id, answers) for id, answers, status, _ in CASES if status == "right"],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_right_answer_computed_with_numpy_is_right(id, answers):
    numpy_answers = {name: _as_numpy(value) for name, value in answers.items()}
    got, message = evaluate(id, **numpy_answers, **CONTEXT.get(id, {}))
    assert got == "right", message


def test_a_right_answer_in_a_0_d_array_is_right():
    import numpy as np

    got, message = evaluate("05.2", copy_min_100mb=np.array(30.16), files_for_an_hour=np.array(122_353))
    assert got == "right", message


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "id, answers",
    [
        ("02.1", {**_four_ranks(64, 3e-3), "lr_4": NAN}),
        ("05.2", dict(copy_min_100mb=NAN, files_for_an_hour=122_353)),
        ("05.2", dict(copy_min_100mb=30.16, files_for_an_hour=INF)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_nan_or_infinite_answer_is_told_it_is_not_a_number(id, answers):
    import numpy as np

    as_numpy = {k: np.float64(v) if isinstance(v, float) else v for k, v in answers.items()}
    for given in (answers, as_numpy):
        got, message = evaluate(id, **given, **CONTEXT.get(id, {}))
        assert got == "wrong" and "not a number: check for a division by zero" in message, message


@pytest.mark.parametrize("cores, ratio", [(1, 0.79), (1, 0.81), (2, 1.29), (2, 1.31), (4, 1.31)])
def test_lab07_records_how_far_above_its_bar_the_answer_landed_and_the_margin_is_that_bar(tmp_path, cores, ratio):
    """07.1 records its pairs' mean over the target for the job's cores; the lab's exercise margin (held outside
    the runs' spread by tests/test_lesson_margins.py) is the check's own bar, so the margin and the grade agree."""
    from course import lessons
    from helpers import report

    figures = tmp_path / "figures.json"
    with pytest.MonkeyPatch.context() as env:
        env.setenv(report.FIGURES_ENV, str(figures))
        got, message = evaluate("07.1", **_loader(min(cores, 2), True, 1, ratio=ratio), cores=cores)
    recorded = json.loads(figures.read_text())
    (margin,) = lessons.BY_STEM["07_profiling"].exercise_margins.values()
    assert recorded["exercise_07_1_over_target"] == pytest.approx(ratio / (1.3 if cores >= 2 else 0.8), abs=1e-4)
    assert (got == "right") == margin(recorded), (got, message, recorded)
