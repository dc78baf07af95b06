"""A job's hyperparameters against the options its entry script declares (as labs/src/options.py publishes them),
checked before launch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import hyperparameters as hp
from helpers.job_spec import SOURCE_DIR, Job


def test_the_options_a_script_takes_are_what_its_parser_declares():
    train, lm = hp.options(SOURCE_DIR / "train.py"), hp.options(SOURCE_DIR / "train_lm.py")
    assert train["bucket_by_length"] == hp.Option("bool") and train["batch_size"].type == "int"
    assert train["precision"].choices == ("auto", "fp32", "bf16", "fp16")
    assert train["model_size"].choices == ("base", "small", "tiny")  # sorted(CLASSIFIER_MODEL_SIZES), as argparse
    assert "reduce-overhead" in train["compile_mode"].choices
    assert train["profile"] == hp.Option("bool") and "profile_dir" in train  # profiling's flags are train.py's
    assert train["lr"].type == "float" and train["lr"].default == 1e-3 and train["compile_backend"].type == "str"
    assert train["train"].default == "/opt/ml/input/data/train"  # the container's default, not this machine's
    assert (
        "strategy" in lm
        and "tokenize" not in lm
        and lm["model_size"].choices == ("1b", "7b", "medium", "small", "tiny")
    )
    assert hp.options(SOURCE_DIR / "read_channel.py")["access"].choices == ("sequential", "random")
    assert hp.options(SOURCE_DIR / "sampling.py") is None  # a module, not an entry script: not described
    assert hp.options(SOURCE_DIR.parent.parent / "helpers" / "report.py") is None  # no options.py beside it


def test_the_schema_is_the_parsers_own_and_needs_no_torch(monkeypatch):
    """options.py --schema answers from the very parsers the scripts use, without importing torch (milliseconds)."""
    probe = (
        "import json, runpy, sys; sys.argv = ['options.py', '--schema', 'train.py']; "
        "runpy.run_path('options.py', run_name='__main__'); "
        "sys.stderr.write(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'transformers', 'numpy'))))"
    )
    done = subprocess.run(
        [sys.executable, "-B", "-c", probe],
        cwd=SOURCE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": ""},
    )
    assert done.returncode == 0 and json.loads(done.stderr) == [], done.stderr
    published = json.loads(done.stdout)
    assert set(published["scripts"]) == {"train.py"} and published["booleans"]["false"][-1] == ""
    assert published["scripts"]["train.py"]["model_sizes"]["base"] == [768, 6, 12, 3072]
    for name in [k for k in os.environ if k.startswith("SM_")]:
        monkeypatch.delenv(name)
    monkeypatch.syspath_prepend(str(SOURCE_DIR))
    import train  # the script's own parse gives the published defaults

    parsed = vars(train.parse_args([]))
    assert parsed.pop("unknown") == []
    assert {k: o["default"] for k, o in published["scripts"]["train.py"]["options"].items()} == parsed


def test_the_schema_is_read_once_per_source_dir(tmp_path, monkeypatch):
    calls = []
    run = hp._run_schema
    monkeypatch.setattr(hp, "_run_schema", lambda path: calls.append(path) or run(path))
    monkeypatch.setattr(hp, "_SCHEMAS", {})
    for _ in range(3):
        assert hp.mismatch(Job("x", {"epochs": 1})) is None and hp.options(SOURCE_DIR / "train_lm.py")
    assert len(calls) == 1


def test_a_users_own_script_is_not_checked(tmp_path):
    """No options.py beside it (or one that does not list it): the job launches as it would have, unchecked."""
    (tmp_path / "mine.py").write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr')\n")
    assert hp.options(tmp_path / "mine.py") is None
    assert hp.mismatch(Job("x", {"learning_rate": 1, "lr": "fast"}, source_dir=tmp_path, entry_point="mine.py")) is None
    (tmp_path / "options.py").write_text("print('a user module of their own, not ours')\n")
    assert hp.mismatch(Job("x", {"lr": "fast"}, source_dir=tmp_path, entry_point="mine.py")) is None


def test_a_broken_options_module_is_said_before_launch(tmp_path):
    (tmp_path / "train.py").write_text("import options\n")
    (tmp_path / "options.py").write_text("import sys\nif '--schema' in sys.argv:\n    raise SystemExit('no luck')\n")
    with pytest.raises(hp.SchemaError, match="no luck"):
        hp.mismatch(Job("x", {"lr": 1}, source_dir=tmp_path, entry_point="train.py"))


@pytest.mark.parametrize(
    "hyperparameters, says",
    [
        ({"bucket_by_lenght": True}, "no option 'bucket_by_lenght' (did you mean 'bucket_by_length'?)"),
        ({"epochs": None}, "epochs=None is not a float"),
        ({"batch_size": 6.5}, "batch_size=6.5 is not an int"),
        ({"compile": "maybe"}, "compile='maybe' is not true or false"),
        ({"model_size": "large"}, "model_size='large' is not one of base, small, tiny"),
    ],
)
def test_each_problem_is_named_with_its_fix(hyperparameters, says):
    problem = hp.mismatch(Job("x", hyperparameters))
    assert says in problem and "python train.py --help" in problem


def test_values_as_the_script_receives_them_pass():
    good = {
        "epochs": 1,
        "batch_size": "64",
        "lr": 2e-3,
        "compile": False,
        "fused_adamw": "True",
        "pad_to": 0,
        "precision": "bf16",
        "model_size": "tiny",
        "profile_schedule": "2,2,5",
        "profile_dir": "",
    }
    assert hp.mismatch(Job("x", good)) is None


# (entry script, option, a value that passes as a number but cannot train or run, the allowed value nearest to it,
# the range the check names)
CANNOT_TRAIN = [
    ("train.py", "lr", float("inf"), 1e-12, "a finite float > 0"),  # trained to a NaN model, "Completed"
    ("train.py", "lr", "nan", 1e-12, "a finite float > 0"),
    ("train.py", "lr", 0, 1e-12, "a finite float > 0"),
    ("train.py", "epochs", 0, 0.01, "a finite float > 0"),  # zero steps, "Completed"
    ("train.py", "max_steps", -1, 0, "an int >= 0"),  # 0: every epoch
    ("train.py", "batch_size", -4, 1, "an int >= 1"),  # "__len__() should return >= 0" once running
    ("train.py", "log_every", 0, 1, "an int >= 1"),  # a modulo by zero once running
    ("train.py", "dropout", 1, 0, "a finite float >= 0 and < 1"),
    ("train.py", "warmup_ratio", 1.5, 1, "a finite float >= 0 and <= 1"),
    ("train.py", "checkpoint_keep", 0, 1, "an int >= 1"),
    ("train.py", "dist_timeout_s", 0, 1, "an int >= 1"),
    ("train_lm.py", "max_steps", 0, 1, "an int >= 1"),  # train_lm.py counts steps, not epochs: 0 trains nothing
    ("train_lm.py", "block_size", 0, 1, "an int >= 1"),
    ("read_channel.py", "fraction", 0, 1, "a finite float > 0 and <= 1"),
    ("read_channel.py", "block_kb", 0, 1, "an int >= 1"),
]


@pytest.mark.parametrize("script, name, bad, edge, allowed", CANNOT_TRAIN)
def test_a_value_that_cannot_train_is_refused_before_launch_with_its_range(
    script, name, bad, edge, allowed, capsys, monkeypatch
):
    problem = hp.mismatch(Job("x", {name: bad}, entry_point=script))
    assert f"{name}={bad!r} is not {allowed}" in problem and f"python {script} --help" in problem
    assert hp.mismatch(Job("x", {name: edge}, entry_point=script)) is None
    # the script's own parser draws the same line (a job launched unchecked fails at once, saying the range)
    monkeypatch.syspath_prepend(str(SOURCE_DIR))
    import options

    parser = options.SCRIPTS[script][0]()
    assert vars(parser.parse_known_args([f"--{name}", str(edge)])[0])[name] == float(edge)
    with pytest.raises(SystemExit) as refused:
        parser.parse_known_args([f"--{name}", str(bad)])
    said = f"{refused.value.code} {capsys.readouterr().err}"  # container's ArgumentParser, or plain argparse's exit 2
    assert f"argument --{name}: {str(bad)!r} is out of range: it must be {allowed}" in said


@pytest.mark.parametrize(
    "name, means",
    [
        ("learning_rate", "lr"),
        ("num_train_epochs", "epochs"),
        ("per_device_train_batch_size", "batch_size"),
        ("max_seq_length", "max_length"),
        ("logging_steps", "log_every"),
        ("nb_epoch", "epochs"),  # HF Trainer, Keras
        ("Learning-Rate", "lr"),
        ("learnig_rate", "lr"),  # other case and dashes; a misspelt synonym
        ("bucket_by_lenght", "bucket_by_length"),  # a plain typo still goes to difflib
    ],
)
def test_another_frameworks_name_gets_the_scripts_name(name, means):
    """difflib alone finds nothing near 'learning_rate' among train.py's options: a synonym table comes first."""
    problem = hp.mismatch(Job("x", {name: 1}))
    assert f"no option {name!r} (did you mean {means!r}?): it would be ignored" in problem


def test_synonyms_take_the_name_the_entry_script_uses():
    lm = hp.options(SOURCE_DIR / "train_lm.py")
    assert hp.suggest("max_seq_length", lm) == "block_size"  # train_lm.py's sequence length
    assert hp.suggest("gradient_checkpointing", lm) == "activation_checkpointing"
    # a known meaning the script does not have: no look-alike ('gradient_checkpointing' is not 'checkpoint_dir')
    assert hp.suggest("gradient_checkpointing", hp.options(SOURCE_DIR / "train.py")) is None
    assert hp.suggest("num_train_epochs", lm) is None  # train_lm.py counts steps, not epochs
    assert hp.suggest("zzz", lm) is None


def test_every_synonym_means_an_option_one_of_the_scripts_has():
    scripts = set(hp.options(SOURCE_DIR / "train.py")) | set(hp.options(SOURCE_DIR / "train_lm.py"))
    assert {target for targets in hp.SYNONYMS.values() for target in targets} <= scripts
    assert not set(hp.SYNONYMS) & scripts  # a synonym is never itself an option
