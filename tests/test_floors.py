"""pyproject.toml's floors for the tools that read the event template admit only versions that accept it: the Studio
domain's HomeEfsFileSystemCreation is known to cfn-lint from 1.51.3 and to botocore from 1.43.13 (found by searching
each release's wheel from PyPI, 2026-11-27: cfn-lint's schemas under cfnlint/data/schemas/, botocore's
data/sagemaker/*/service-2.json; 1.51.2 and 1.43.12 lack it). Offline, a test cannot install the versions below a
floor, so it holds the floors to those findings and checks that the installed versions meet them and know the field.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import botocore.session
import cfnlint
import pytest
from conftest import REPO
from packaging.requirements import Requirement
from packaging.version import Version

FIELD = "HomeEfsFileSystemCreation"
FIRST_KNOWING = {"cfn-lint": "1.51.3", "botocore": "1.43.13"}  # the first releases with FIELD (module docstring)


def floor(name: str) -> Version:
    """The highest lower bound pyproject.toml puts on ``name`` (its dependencies and its test extra together)."""
    import tomllib  # Python 3.11+, as the test suite runs

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]
    bounds = [Version(s.version) for r in reqs if r.name == name for s in r.specifier if s.operator == ">="]
    assert bounds, f"pyproject.toml puts no floor on {name}"
    return max(bounds)


def test_the_template_uses_the_field_the_floors_are_for():
    assert f"{FIELD}: Disabled" in (REPO / "infra" / "workshop-account.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", FIRST_KNOWING)
def test_the_floor_is_the_first_release_that_knows_the_field_and_the_installed_one_meets_it(name):
    assert floor(name) >= Version(FIRST_KNOWING[name]), f"{name}'s floor admits releases that reject the template"
    assert Version(metadata.version(name)) >= floor(name)


def test_the_installed_botocore_has_the_field_in_create_domain():
    model = botocore.session.get_session().get_service_model("sagemaker")
    assert FIELD in model.operation_model("CreateDomain").input_shape.members


def test_the_installed_cfn_lint_s_domain_schema_has_the_field():
    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    providers = json.loads((schemas / "providers" / "us-east-1.json").read_text(encoding="utf-8"))
    domain = json.loads((schemas / "resources" / f"{providers['AWS::SageMaker::Domain']}.json").read_text("utf-8"))
    assert FIELD in domain["properties"]
