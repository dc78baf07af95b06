"""A job's hyperparameters against the options its entry script declares: read from the source, checked before launch."""
from __future__ import annotations

import pytest

from helpers import hyperparameters as hp
from helpers.job import SOURCE_DIR, Job


def test_the_options_a_script_takes_are_read_from_its_source():
    train, lm = hp.options(SOURCE_DIR / "train.py"), hp.options(SOURCE_DIR / "train_lm.py")
    assert train["bucket_by_length"] == hp.Option("bool") and train["batch_size"] == hp.Option("int")
    assert train["precision"].choices == ("auto", "fp32", "bf16", "fp16")  # a literal list
    assert train["model_size"].choices == ("tiny", "small", "base")  # sorted(MODEL_SIZES), a dict in train.py
    assert "reduce-overhead" in train["compile_mode"].choices  # fastpath.COMPILE_MODES, in a sibling module
    assert train["profile"] == hp.Option("bool") and "profile_dir" in train  # added by profiling.add_arguments
    assert "strategy" in lm and "tokenize" not in lm  # importing train's functions does not take its options
    assert hp.options(SOURCE_DIR.parent.parent / "helpers" / "baseline.py") is None  # no argparse: not checked


@pytest.mark.parametrize("hyperparameters, says", [
    ({"bucket_by_lenght": True}, "no option 'bucket_by_lenght' (did you mean 'bucket_by_length'?)"),
    ({"epochs": None}, "epochs=None is not a float"),
    ({"batch_size": 6.5}, "batch_size=6.5 is not an int"),
    ({"compile": "maybe"}, "compile='maybe' is not true or false"),
    ({"model_size": "large"}, "model_size='large' is not one of tiny, small, base"),
])
def test_each_problem_is_named_with_its_fix(hyperparameters, says):
    problem = hp.check(Job("x", hyperparameters))
    assert says in problem and "python train.py --help" in problem


def test_values_as_the_script_receives_them_pass():
    good = {"epochs": 1, "batch_size": "64", "lr": 2e-3, "compile": False, "fused_adamw": "True", "pad_to": 0,
            "precision": "bf16", "model_size": "tiny", "profile_schedule": "2,2,5", "profile_dir": ""}
    assert hp.check(Job("x", good)) is None



@pytest.mark.parametrize("name, means", [
    ("learning_rate", "lr"), ("num_train_epochs", "epochs"), ("per_device_train_batch_size", "batch_size"),
    ("max_seq_length", "max_length"), ("logging_steps", "log_every"), ("nb_epoch", "epochs"),  # HF Trainer, Keras
    ("Learning-Rate", "lr"), ("learnig_rate", "lr"),  # other case and dashes; a misspelt synonym
    ("bucket_by_lenght", "bucket_by_length"),  # a plain typo still goes to difflib
])
def test_another_frameworks_name_gets_the_scripts_name(name, means):
    """difflib alone finds nothing near 'learning_rate' among train.py's options: a synonym table comes first."""
    problem = hp.check(Job("x", {name: 1}))
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
