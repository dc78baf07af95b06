"""Lab 01's exercise: a second job that starts from the model the first one saved. The learner names the channel
that carries it in and predicts the new job's score; the check reads what that job measured."""

from __future__ import annotations

from course.exercises import exercise, expect

CHANNEL = "pretrained"  # train.py's --pretrained reads SM_CHANNEL_PRETRAINED (options.py)
DATA_CHANNELS = ("train", "validation")


def _channel(name: object) -> str:
    expect(
        isinstance(name, str) and name.strip(),
        f'pretrained_channel: give the channel\'s name as a string, e.g. "something", not {name!r}.',
    )
    text = str(name).strip()
    expect(
        not text.upper().startswith("SM_"),
        f"pretrained_channel: {text} is a variable the container sets. A channel is named by the key of the job's "
        "channels; SageMaker then sets SM_CHANNEL_<NAME> itself.",
    )
    expect(
        "/" not in text,
        f"pretrained_channel: {text} is a path. A channel is named by the key of the job's channels; SageMaker "
        "then puts its files in /opt/ml/input/data/<name>.",
    )
    return text


@exercise("01.1", "The container contract: a job that starts from a saved model", minutes=5)
def start_from_saved_model(pretrained_channel, beats_baseline, yours, baseline_macro_f1, first_macro_f1):
    """The channel that brings the first job's model folder into a second job, and whether that job, after a few
    steps, beats the baseline: ``yours`` is what the second job measured (status, reason, val_macro_f1)."""
    channel = _channel(pretrained_channel)
    expect(
        isinstance(beats_baseline, bool),
        f"beats_baseline is your prediction, True or False, not {beats_baseline!r}.",
    )
    expect(yours is not None, "no second job ran: run the lab on a local target, then this cell again.")
    if channel in DATA_CHANNELS:
        expect(
            False,
            f"a channel named {channel} replaces the job's own {channel} channel: the job found the model folder "
            f"where it reads its titles ({yours['status']}: {yours['reason'] or 'no titles'}). Give the model a "
            "channel of its own.",
        )
    expect(
        yours["status"] == "Completed",
        f"the second job did not complete ({yours['status']}): {yours['reason']}",
    )
    score = yours["val_macro_f1"]
    expect(
        score is not None,
        "the second job completed but recorded no macro-F1 (its log has no [eval] line): read its log, then run "
        "this cell again.",
    )
    started_trained = score > baseline_macro_f1
    if channel.lower() != CHANNEL:
        expect(
            not started_trained,
            f"the job started from the saved model, but through {channel}: check the job's channels.",
        )
        expect(
            False,
            f"the job ran, but from random weights: macro-F1 {score:.3f} after a few steps, against the baseline's "
            f"{baseline_macro_f1:.3f}. Your channel arrived as SM_CHANNEL_{channel.upper()}, in "
            f"/opt/ml/input/data/{channel}, and train.py never reads it: which variable does its --pretrained "
            "default to (options.py, above)?",
        )
    expect(
        beats_baseline == started_trained,
        (
            f"it did: macro-F1 {score:.3f} after a few steps, against the baseline's {baseline_macro_f1:.3f}. It "
            f"started from the weights the first job saved (which ended at {first_macro_f1:.3f}), not from random "
            "ones, which need far more steps."
            if started_trained
            else f"it did not: macro-F1 {score:.3f}, against the baseline's {baseline_macro_f1:.3f}. Read its log: "
            "did train.py load the saved model?"
        ),
    )
    return (
        f"the first job's model left through SM_MODEL_DIR (/opt/ml/model, model.tar.gz on SageMaker) and came into "
        f"the second through a channel named {CHANNEL}: /opt/ml/input/data/{CHANNEL}, named by "
        f"SM_CHANNEL_{CHANNEL.upper()}, which --pretrained reads. It scored {score:.3f} after a few steps, against "
        f"the baseline's {baseline_macro_f1:.3f}: the contract carried the weights, and the script is unchanged."
    )
