"""A job's hyperparameters against the options its entry script declares: read from the source, checked before launch."""
from __future__ import annotations

import pytest

from helpers import hyperparameters as hp
from helpers.jobs import SOURCE_DIR, Job


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

