"""Each lab's check says, specifically, what is wrong with a typical wrong answer, and passes the right one."""

from __future__ import annotations

import pytest

from helpers.exercises import evaluate
from helpers.planning import instances

GIB = 2**30
P = 1.236e9  # a parameter count
PRE, ENV, MODEL = "/opt/ml/input/data/pretrained", "SM_CHANNEL_PRETRAINED", "/opt/ml/model"  # 01.1's answers
CASES = [
    # (exercise, answers, expected status, words the message must contain)
    ("01.1", dict(pretrained_dir=PRE, pretrained_env="SM_CHANNEL_PRETRAINED", model_dir=MODEL), "right", "unchanged"),
    ("01.1", dict(pretrained_dir=PRE + "/", pretrained_env="$SM_CHANNEL_PRETRAINED", model_dir=MODEL), "right", ""),
    ("01.1", dict(pretrained_dir="s3://b/pretrained", pretrained_env=ENV, model_dir=MODEL), "wrong", "is in S3"),
    (
        "01.1",
        dict(pretrained_dir="runs/jobs/x/algo-1/input/data/pretrained", pretrained_env=ENV, model_dir=MODEL),
        "wrong",
        "stand-in",
    ),
    (
        "01.1",
        dict(pretrained_dir="/opt/ml/input/data/train", pretrained_env=ENV, model_dir=MODEL),
        "wrong",
        "named after the channel",
    ),
    (
        "01.1",
        dict(pretrained_dir="/opt/ml/input/data", pretrained_env=ENV, model_dir=MODEL),
        "wrong",
        "one folder each",
    ),
    (
        "01.1",
        dict(pretrained_dir="/opt/ml/input/pretrained", pretrained_env=ENV, model_dir=MODEL),
        "wrong",
        "/opt/ml/input/data/X",
    ),
    ("01.1", dict(pretrained_dir=PRE, pretrained_env="SM_CHANNEL_pretrained", model_dir=MODEL), "wrong", "in capitals"),
    ("01.1", dict(pretrained_dir=PRE, pretrained_env="SM_HP_PRETRAINED", model_dir=MODEL), "wrong", "hyperparameters"),
    (
        "01.1",
        dict(pretrained_dir=PRE, pretrained_env="SM_PRETRAINED", model_dir=MODEL),
        "wrong",
        "sets no SM_PRETRAINED",
    ),
    ("01.1", dict(pretrained_dir=PRE, pretrained_env=ENV, model_dir="/opt/ml/output/data"), "wrong", "output.tar.gz"),
    ("01.1", dict(pretrained_dir=PRE, pretrained_env=ENV, model_dir="/opt/ml/checkpoints"), "wrong", "resuming"),
    ("01.1", dict(pretrained_dir=PRE, pretrained_env=ENV, model_dir="s3://b/model"), "wrong", "is in S3"),
    ("02.1", dict(global_batch_4=128, learning_rate_4=4e-3), "right", "linear scaling"),
    ("02.1", dict(global_batch_4=128, learning_rate_4=2e-3 * 2**0.5), "right", "square-root scaling"),
    ("02.1", dict(global_batch_4=32, learning_rate_4=4e-3), "wrong", "one rank's share"),
    ("02.1", dict(global_batch_4=128, learning_rate_4=2e-3), "wrong", "scale the learning rate"),
    ("02.1", dict(global_batch_4=128, learning_rate_4=3e-3), "wrong", "square root"),
    ("02.1", dict(global_batch_4=128.0, learning_rate_4=4e-3), "right", "128 rows a step"),  # 128.0 rows is 128
    ("02.1", dict(global_batch_4=128.5, learning_rate_4=4e-3), "wrong", "whole number"),
    ("03.1", dict(world_size_p5=16, first_rank_on_algo_2=8, efa_types={"ml.p4d.24xlarge"}), "right", "RANK 8"),
    ("03.1", dict(world_size_p5=16.0, first_rank_on_algo_2=8, efa_types=["ml.p4d.24xlarge"]), "right", "EFA on"),
    ("03.1", dict(world_size_p5=8, first_rank_on_algo_2=8, efa_types={"ml.p4d.24xlarge"}), "wrong", "one instance's"),
    ("03.1", dict(world_size_p5=16, first_rank_on_algo_2=0, efa_types={"ml.p4d.24xlarge"}), "wrong", "LOCAL_RANK"),
    ("03.1", dict(world_size_p5=16, first_rank_on_algo_2=1, efa_types={"ml.p4d.24xlarge"}), "wrong", "node rank x"),
    (
        "03.1",
        dict(world_size_p5=16, first_rank_on_algo_2=8, efa_types={"ml.p4d.24xlarge", "ml.g6e.48xlarge"}),
        "wrong",
        "the table's FI_PROVIDER column is empty there",
    ),
    ("03.1", dict(world_size_p5=16, first_rank_on_algo_2=8, efa_types=set()), "wrong", "1 more"),
    ("03.2", dict(smddp_types={"ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"}), "right", "torchrun"),
    ("03.2", dict(smddp_types={"ml.p4d.24xlarge", "ml.p5.48xlarge"}), "wrong", "P5 is not supported"),
    ("03.2", dict(smddp_types={"ml.p4d.24xlarge", "ml.g5.48xlarge"}), "wrong", "EFA column is True"),  # the table's
    ("03.2", dict(smddp_types={"ml.p4d.24xlarge", "ml.p3.16xlarge"}), "wrong", "dropped"),
    ("03.2", dict(smddp_types={"ml.p4d.24xlarge"}), "wrong", "2 more"),
    ("03.2", dict(smddp_types="ml.p4d.24xlarge"), "wrong", "a set"),
    ("04.1", dict(optimizer_gib_ddp=8 * P / GIB, optimizer_gib_zero1=P / GIB), "right", "8× less"),
    ("04.1", dict(optimizer_gib_ddp=P / GIB, optimizer_gib_zero1=P / GIB), "wrong", "whole optimizer state"),
    ("04.1", dict(optimizer_gib_ddp=12 * P / GIB, optimizer_gib_zero1=P / GIB), "wrong", "8 bytes"),
    ("04.1", dict(optimizer_gib_ddp=8 * P / GIB, optimizer_gib_zero1=8 * P / GIB), "wrong", "ZeRO-1 is exactly"),
    ("05.1", dict(mode_a="File", mode_b="FastFile", mode_c="FSx"), "right", "many jobs"),
    ("05.1", dict(mode_a="File", mode_b="File", mode_c="FSx"), "wrong", "2 TB"),
    ("05.1", dict(mode_a="File", mode_b="FastFile", mode_c="S3"), "wrong", "one of File, FastFile, FSx"),
    ("05.2", dict(copy_min_100mb=30.16, files_for_an_hour=122_353), "right", "first-byte waits"),
    ("05.2", dict(copy_min_100mb=60.3, files_for_an_hour=122_353), "wrong", "one connection's time"),
    ("05.2", dict(copy_min_100mb=1810, files_for_an_hour=122_353), "wrong", "looks like seconds"),
    ("05.2", dict(copy_min_100mb=30.16, files_for_an_hour=2353), "wrong", "for one connection"),
    ("05.2", dict(copy_min_100mb=30.16, files_for_an_hour=2.45e6), "wrong", "not yet"),
    ("05.2", dict(copy_min_100mb=30.16, files_for_an_hour=2.45), "wrong", "a file size"),
    ("06.1", dict(interval_min=(2 * 45 * 21600) ** 0.5 / 60), "right", "min"),
    ("06.1", dict(interval_min=(2 * 45 * 21600) ** 0.5), "wrong", "in seconds"),
    ("06.1", dict(interval_min=60), "wrong", "21600 s"),
    ("07.1", dict(my_tokenize="ahead", my_num_workers=2), "right", "tokenize once"),
    ("07.1", dict(my_tokenize="on_the_fly", my_num_workers=2), "wrong", "every epoch"),
    ("07.1", dict(my_tokenize="ahead", my_num_workers=0), "wrong", "while the GPU computes"),
    ("07.1", dict(my_tokenize="ahead", my_num_workers=8), "wrong", "leave none"),
]
CONTEXT = {
    "02.1": dict(per_rank_batch=32, base_batch=64, base_lr=2e-3),
    "03.1": dict(  # two rows of lab 03's driver table: what SageMaker's torchrun driver sets on each type
        gpus_per_instance=8,
        instance_count=2,
        driver_table=[
            {"instance type": "ml.p4d.24xlarge", "FI_PROVIDER": "efa", "network Gb/s": 400},
            {"instance type": "ml.g6e.48xlarge", "FI_PROVIDER": "", "network Gb/s": 400},
        ],
    ),
    "04.1": dict(params=P, gpus=8),
    "06.1": dict(save_s=45, interruptions_per_hour=1 / 6),
    "07.1": dict(gpus=1, cores_per_process=8),
}


@pytest.mark.parametrize("id, answers, status, words", CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_check(id, answers, status, words):
    got, message = evaluate(id, **answers, **CONTEXT.get(id, {}))
    assert (got, words in message) == (status, True), message


def test_the_cpu_branch_of_the_loader_check():
    status, message = evaluate("07.1", my_tokenize="ahead", my_num_workers=3, gpus=0, cores_per_process=1)
    assert status == "wrong" and "take cores from the model" in message


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
        ("02.1", dict(global_batch_4=128, learning_rate_4=NAN)),
        ("04.1", dict(optimizer_gib_ddp=NAN, optimizer_gib_zero1=P / GIB)),
        ("05.2", dict(copy_min_100mb=NAN, files_for_an_hour=122_353)),
        ("05.2", dict(copy_min_100mb=30.16, files_for_an_hour=INF)),
        ("06.1", dict(interval_min=-INF)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_nan_or_infinite_answer_is_told_it_is_not_a_number(id, answers):
    import numpy as np

    for given in (answers, {k: np.float64(v) for k, v in answers.items()}):
        got, message = evaluate(id, **given, **CONTEXT.get(id, {}))
        assert got == "wrong" and "not a number: check for a division by zero" in message, message


@pytest.mark.parametrize(
    "id, answers, context, status, words",
    [
        # the labs pass their own real_target's figures: 4 GPUs (lab 04), one GPU with 4 vCPUs (lab 07)
        (
            "04.1",
            dict(optimizer_gib_ddp=8 * P / GIB, optimizer_gib_zero1=2 * P / GIB),
            dict(gpus=4),
            "right",
            "4× less",
        ),
        ("04.1", dict(optimizer_gib_ddp=8 * P / GIB, optimizer_gib_zero1=P / GIB), dict(gpus=4), "wrong", "4 ranks"),
        ("07.1", dict(my_tokenize="ahead", my_num_workers=2), dict(gpus=1, cores_per_process=4), "right", "spare"),
        ("07.1", dict(my_tokenize="ahead", my_num_workers=4), dict(gpus=1, cores_per_process=4), "wrong", "4 cores"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_checks_follow_the_lab_s_real_target(id, answers, context, status, words):
    got, message = evaluate(id, **answers, **{**CONTEXT.get(id, {}), **context})
    assert (got, words in message) == (status, True), message


def test_the_copy_check_says_what_was_written_and_how_many_connections():
    got, message = evaluate("05.2", copy_min_100mb=12.0, files_for_an_hour=122_353)
    assert got == "wrong" and "you wrote 12" in message and "`connections` (2)" in message, message
