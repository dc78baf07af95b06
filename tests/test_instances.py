"""The instance catalogue: lookups with suggestions, feature support, dated prices, agreement with the SDK's tables."""

from __future__ import annotations

import re

import pytest

from helpers import errors, targets
from helpers.contract import sdk_driver_dir
from helpers.planning import instances


def test_lookup_gives_the_hardware():
    p4d = instances.lookup("ml.p4d.24xlarge")
    assert (p4d.gpus, p4d.gpu.model, p4d.gpu.memory_gib, p4d.vcpus, p4d.efa) == (8, "A100", 40, 96, True)
    assert p4d.gpu_memory_gib == 320 and p4d.bf16 and p4d.supports("efa")
    g5 = instances.lookup("ml.g5.12xlarge")
    assert (g5.gpus, g5.gpu.model, g5.family) == (4, "A10G", "g5")
    assert not instances.lookup("ml.g4dn.xlarge").bf16  # T4: no bf16
    assert instances.lookup("ML.G5.2XLARGE").name == "ml.g5.2xlarge"


@pytest.mark.parametrize(
    "typo, suggestion",
    [("ml.p4d.24xlarg", "ml.p4d.24xlarge"), ("ml.g5.2xlarg", "ml.g5.2xlarge"), ("ml.p4.24xlarge", "ml.p4d.24xlarge")],
)
def test_unknown_type_suggests_close_ones(typo, suggestion):
    with pytest.raises(instances.UnknownInstanceType, match=re.escape(repr(suggestion))):
        instances.lookup(typo)


def test_a_name_without_the_ml_prefix_is_named_exactly():
    with pytest.raises(instances.UnknownInstanceType, match=r"start with 'ml\.'.*'ml\.g5\.2xlarge'"):
        instances.lookup("g5.2xlarge")


def test_nothing_close_lists_the_families():
    with pytest.raises(instances.UnknownInstanceType) as err:
        instances.lookup("ml.zz9.huge")
    assert "Did you mean" not in str(err.value) and "g5" in str(err.value) and "p4d" in str(err.value)


def test_targets_resolve_uses_the_catalogue():
    t = targets.resolve("ml.p4d.24xlarge")
    assert (t.gpus, t.cpus, t.is_local) == (8, 96, False)
    with pytest.raises(errors.TargetError, match="ml.p4d.24xlarge"):  # UnknownInstanceType is a TargetError
        targets.resolve("ml.p4d.24xlarg")


def test_smddp_runs_on_exactly_three_types_and_not_p5_or_g():
    assert set(instances.supporting("smddp")) == {"ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"}
    for name in ("ml.p5.48xlarge", "ml.g5.48xlarge", "ml.p3.16xlarge"):
        assert not instances.lookup(name).supports("smddp")


def test_smddp_types_are_the_sdks_own_list_less_the_dropped_p3_16xlarge():
    from sagemaker.core.fw_utils import SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES

    sdk = set(SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES) - {"local_gpu", "ml.p3.16xlarge"}
    assert set(instances.supporting("smddp")) == sdk


def _sdk_list(name: str) -> set[str]:
    """A module-level list in the SDK's container drivers' common/utils.py, read without running that module (it
    installs a logging handler on import)."""
    import ast

    tree = ast.parse((sdk_driver_dir() / "common" / "utils.py").read_text())
    found = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    ]
    assert len(found) == 1, f"{name} not found once in the SDK's container drivers: the SDK changed, re-check EFA"
    return set(found[0])


def test_efa_types_are_where_the_sdks_drivers_turn_efa_on_for_nccl():
    sdk = _sdk_list("SM_EFA_NCCL_INSTANCES")
    assert set(instances.supporting("efa")) == sdk and instances.SAGEMAKER_EFA_NCCL == sdk
    # the drivers gate FI_PROVIDER=efa on that list, so it is the list that decides what a training job's NCCL uses
    drivers = sdk_driver_dir() / "distributed_drivers"
    for driver in ("torchrun_driver.py", "mpi_utils.py"):
        assert "if instance_type in SM_EFA_NCCL_INSTANCES" in (drivers / driver).read_text(), driver
    # EC2 has EFA hardware on these, but SageMaker's drivers do not enable it: plain network for a training job
    for name in ("ml.g5.12xlarge", "ml.g5.8xlarge", "ml.g6e.48xlarge", "ml.g4dn.16xlarge", "ml.p5en.48xlarge"):
        t = instances.lookup(name)
        assert not t.efa and not t.supports("efa") and "EFA" not in t.describe(), name
    assert instances.lookup("ml.g5.48xlarge").describe().endswith("100 Gb/s EFA, $20.36/h")
    # SMDDP runs over EFA: every type it supports is on the list
    assert set(instances.supporting("smddp")) <= sdk


def test_smp_types():
    assert set(instances.supporting("smp")) == {
        "ml.p4d.24xlarge",
        "ml.p4de.24xlarge",
        "ml.p5.48xlarge",
        "ml.p5e.48xlarge",
    }


def test_supporting_is_cheapest_first_with_unpriced_last():
    names = instances.supporting("smp")
    prices = [instances.lookup(n).price_per_hour for n in names]
    assert prices[-1] is None and prices[:-1] == sorted(prices[:-1])


def test_gpu_counts_and_memory_agree_with_the_sdks_table():
    from sagemaker.core import instance_types_gpu_info

    sdk = instance_types_gpu_info.retrieve("us-east-1")
    compared = 0
    for name, spec in instances.CATALOGUE.items():
        if name in sdk:
            compared += 1
            assert sdk[name]["Count"] == spec.gpus, name
            # the SDK counts usable MiB (a 24 GiB A10G shows 22.4 GiB on g5.48xlarge): within 10%
            assert abs(sdk[name]["TotalGpuMemoryInMiB"] / 1024 - spec.gpu_memory_gib) <= 0.1 * spec.gpu_memory_gib
    assert compared >= 15


def test_every_price_is_dated_with_a_source():
    for spec in instances.CATALOGUE.values():
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", spec.price_as_of), spec.name
        assert "us-east-1" in spec.price_source or "US East" in spec.price_source
        assert spec.price_per_hour is None or spec.price_per_hour > 0
    # bigger sizes of a family cost more per hour
    g5 = [
        instances.lookup(f"ml.g5.{s}").price_per_hour for s in ("xlarge", "2xlarge", "4xlarge", "12xlarge", "48xlarge")
    ]
    assert g5 == sorted(g5)


def test_non_gpu_accelerators_are_named():
    trn = instances.lookup("ml.trn1.32xlarge")
    assert trn.gpus == 0 and "Trainium" in trn.describe() and not trn.supports("gpu")


def test_describe_and_table():
    assert (
        instances.lookup("ml.p4d.24xlarge").describe()
        == "ml.p4d.24xlarge: 8 x A100 40 GiB, 96 vCPU, 1152 GiB, 400 Gb/s EFA, $25.25/h"
    )
    assert "no price on file" in instances.lookup("ml.p5e.48xlarge").describe()
    rows = instances.table(["ml.g5.2xlarge", "ml.p4d.24xlarge"])
    assert [r["instance_type"] for r in rows] == ["ml.g5.2xlarge", "ml.p4d.24xlarge"]
    assert rows[1]["smddp"] and rows[1]["smp"] and not rows[0]["smddp"] and rows[1]["gpu_memory_gib"] == 40
    assert len(instances.table()) == len(instances.CATALOGUE)


@pytest.mark.slow
def test_every_catalogue_entry_is_a_training_instance_type_of_the_api():
    """A type the API does not take for training fails CreateTrainingJob's validation: the catalogue offers none."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    training = set(model.shape_for("TrainingInstanceType").enum)
    assert not set(instances.CATALOGUE) - training, sorted(set(instances.CATALOGUE) - training)
    for name in ("ml.m5.8xlarge", "ml.m5.16xlarge"):  # EC2 sizes that SageMaker training does not offer
        assert name not in training and name not in instances.CATALOGUE
        with pytest.raises(instances.UnknownInstanceType):
            instances.lookup(name)


def test_the_cheapest_is_computed_from_the_catalogue():
    one_bf16, four_bf16 = instances.cheapest(1, bf16=True), instances.cheapest(4, bf16=True)
    assert one_bf16.name == "ml.g6.xlarge" and four_bf16.name == "ml.g6.12xlarge"  # L4s undercut the A10G types
    assert instances.cheapest(4).name == "ml.g4dn.12xlarge"  # T4s are cheaper still, without bf16
    for t in instances.CATALOGUE.values():
        if t.price_per_hour is not None and t.bf16 and t.gpus >= 1:
            assert t.price_per_hour >= one_bf16.price_per_hour
    assert instances.cheapest(8, feature="smddp").name == "ml.p4d.24xlarge"
    with pytest.raises(instances.UnknownInstanceType, match="no priced instance type"):
        instances.cheapest(64)
