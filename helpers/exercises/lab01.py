"""Lab 01's exercise: the container contract. A job gets one more channel: where does the script find it, under
which variable, and where must the model go for SageMaker to keep it?"""

from __future__ import annotations

import posixpath
from pathlib import Path, PurePath

from helpers.contract import HostConfig, Layout, container_env
from helpers.exercises import exercise, expect

CHANNEL = "pretrained"  # the channel the exercise adds; train.py's --pretrained reads it (options.py)
OPT_ML = "/opt/ml"


def contract(channels: tuple[str, ...] = ("train", "validation", CHANNEL)) -> dict[str, str]:
    """The ``SM_*`` variables a SageMaker container sets for a one-host job with these channels, at ``/opt/ml``:
    the same function the local runner lays its jobs out with, rooted where the real container has it."""
    cfg = HostConfig("lab01-single", "algo-1", ["algo-1"], "ml.g6.xlarge", dict.fromkeys(channels, "File"))
    return container_env(Layout(Path(OPT_ML)), cfg, num_gpus=1, num_cpus=4)


def _path(name: str, answer: object) -> str:
    expect(
        isinstance(answer, (str, PurePath)),
        f'{name}: give the path as a string, e.g. "/opt/...", not {type(answer).__name__}.',
    )
    text = str(answer).strip()
    expect(
        not text.startswith("s3://"),
        f"{name}: {text} is in S3. The script never reads or writes S3 itself: SageMaker brings each channel into "
        "the container before train.py starts (File mode copies it, FastFile streams it) and uploads the model "
        "folder after it ends, so the script sees only local folders. Which one?",
    )
    expect(
        "algo-1" not in text and "runs/" not in text,
        f"{name}: {text} is this machine's stand-in: the local runner lays the container's tree out under "
        f"runs/jobs/<job>/algo-1/. On SageMaker the same tree starts at {OPT_ML}.",
    )
    expect(
        text == OPT_ML or text.startswith(OPT_ML + "/"),
        f"{name}: {text} is outside the container's {OPT_ML}, where every path of the contract starts.",
    )
    return posixpath.normpath(text)


@exercise("01.1", "The container contract: one more channel", minutes=4)
def container_contract(pretrained_dir, pretrained_env, model_dir):
    """Where a new channel's files are, which variable names them, and where the model must be saved."""
    env = contract()
    variable = f"SM_CHANNEL_{CHANNEL.upper()}"
    want_dir, want_model = env[variable], env["SM_MODEL_DIR"]

    got = _path("pretrained_dir", pretrained_dir)
    data = env["SM_INPUT_DATA_DIR"]
    expect(
        got != data,
        f"pretrained_dir: {got} holds every channel, one folder each (SM_INPUT_DATA_DIR): which folder is the "
        f"{CHANNEL} channel's?",
    )
    expect(
        got not in (env["SM_CHANNEL_TRAIN"], env["SM_CHANNEL_VALIDATION"]),
        f"pretrained_dir: {got} is the {posixpath.basename(got)} channel's folder. Each channel gets a folder named "
        "after the channel itself.",
    )
    expect(
        got != want_model,
        f"pretrained_dir: {got} is where the job's own model goes out. What a job reads comes in as a channel, "
        f"under {data}/.",
    )
    expect(
        got == want_dir,
        f"pretrained_dir: {got} is not where SageMaker puts a channel. A channel named X lands in {data}/X.",
    )

    expect(
        isinstance(pretrained_env, str),
        f'pretrained_env: give the variable\'s name as a string, e.g. "SM_...", not {type(pretrained_env).__name__}.',
    )
    name = pretrained_env.strip().lstrip("$")
    expect(
        name.upper() != variable or name == variable,
        f"pretrained_env: {name} is upper-cased in the container: SM_CHANNEL_ and the channel's name in capitals.",
    )
    expect(
        not name.startswith("SM_HP_"),
        "pretrained_env: SM_HP_* variables carry hyperparameters (and arrive as --key value too); a channel's "
        "folder is in SM_CHANNEL_<NAME>.",
    )
    expect(
        name not in ("SM_CHANNEL_TRAIN", "SM_CHANNEL_VALIDATION", "SM_INPUT_DATA_DIR", "SM_CHANNELS"),
        f"pretrained_env: {name} is {env.get(name, 'set')}: not the {CHANNEL} channel's folder.",
    )
    expect(
        name == variable,
        f"pretrained_env: SageMaker sets no {name}. It names each channel's folder in one variable per channel, "
        "SM_CHANNEL_ followed by the channel's name in capitals.",
    )

    out = _path("model_dir", model_dir)
    expect(
        out not in (env["SM_OUTPUT_DATA_DIR"], env["SM_OUTPUT_DIR"]),
        f"model_dir: SageMaker uploads {env['SM_OUTPUT_DATA_DIR']} too, but as output.tar.gz, for figures and "
        f"logs. The model belongs in its own folder, packed as model.tar.gz, which a deployment or the next job "
        "picks up.",
    )
    expect(
        out != f"{OPT_ML}/checkpoints",
        "model_dir: checkpoints are copied to S3 only when the job has a checkpoint configuration, and they are for "
        "resuming a stopped job (lab 06), not for the finished model.",
    )
    expect(
        out == want_model,
        f"model_dir: {out} is not uploaded when the job ends. SageMaker packs one folder as model.tar.gz: the one "
        "SM_MODEL_DIR names.",
    )
    return (
        f"a channel named {CHANNEL} lands in {want_dir} and {variable} says so; SageMaker uploads {want_model} "
        f"(SM_MODEL_DIR) as model.tar.gz. train.py's --pretrained already defaults to {variable} (options.py): "
        "adding the channel to the job is all it takes, the script is unchanged."
    )
