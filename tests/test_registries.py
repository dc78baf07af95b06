"""The workshop's extension points, each a registry that every reader must follow (docs/extending.md):

- a lab, registered once in ``course.manifest.LABS`` with its claims, its request checks and its real targets, has
  its notebook (with its stated time), its exercises and reference answers and its row in the README; and every
  table of those names registered labs only;
- a rule of the job checks is in its table (``COMMON``, or ``ONLY`` for its kind of target);
- an input mode of ``helpers.input_mode.MODES`` has a local stand-in, a job in lab 05's set, and a request that
  carries it;
- an instance type of the catalogue is planned by every planner (scaling, memory, cost, spot), its GPU's figures on
  the GPU's record.
"""

from __future__ import annotations

import inspect
import re

import pytest
from conftest import REPO

from course import exercises, lab, lab_time, manifest
from course.exercises import lab05
from helpers import input_mode
from helpers.aws import mode_comparison
from helpers.checks import common_rules, target_rules
from helpers.checks.findings import Where
from helpers.job_spec import DATA_DIR, Job
from helpers.jobs import on_sagemaker
from helpers.planning import cost, instances, memory, scaling, spot
from helpers.targets import Target, resolve
from sagemaker_standin import s3_inputs

README = (REPO / "README.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------- labs
def per_lab_tables() -> dict[str, set[str]]:
    """Every per-lab table outside the manifest, as the lab numbers it names."""
    return {
        "exercises (course/exercises/labNN.py)": {id.split(".")[0] for id in exercises.registry()},
        "reference answers (labs/solutions/)": {p.name[:2] for p in lab.SOLUTIONS_DIR.glob("[0-9][0-9]_*.py")},
        "the README's table of labs": set(re.findall(r"^\| `(\d\d)_\w+` \|", README, re.M)),
    }


def missing(one: lab.Lab) -> list[str]:
    """What a registered lab lacks, each named by the place to add it."""
    gaps = [name for name, numbers in per_lab_tables().items() if one.number not in numbers]
    entry = {"claims": one.claims, "request checks": one.requests, "real targets": one.targets}
    gaps += [f"its {part} in its entry in course/manifest.py" for part, there in entry.items() if not there]
    gaps += [
        f"real targets of its own (not lab {t.lab}'s) in course/manifest.py" for t in one.targets if t.lab != one.number
    ]
    if not one.notebook.is_file():
        return [f"its notebook {one.notebook.relative_to(REPO)}", *gaps]
    if lab_time.stated(one.notebook) is None:
        gaps.append("its stated time (**Time:** core path N min, with the deep dives M min.)")
    return sorted(set(gaps))


def test_the_registry_names_every_numbered_notebook_in_labs():
    assert [one.notebook for one in manifest.LABS] == lab.numbered_notebooks()
    assert [one.number for one in manifest.LABS] == [f"{i:02d}" for i in range(1, len(manifest.LABS) + 1)]


@pytest.mark.parametrize("one", manifest.LABS, ids=lambda one: one.stem)
def test_every_lab_is_in_every_per_lab_table(one):
    assert missing(one) == [], f"lab {one.stem} is registered in course/manifest.py but has no {missing(one)}"
    answers = lab.read_solutions(one.solutions)
    assert answers and {id[:2] for id in answers} == {one.number}, "its answers are its own exercises'"


def test_every_per_lab_table_names_registered_labs_only():
    registered = {one.number for one in manifest.LABS}
    strays = {name: sorted(numbers - registered) for name, numbers in per_lab_tables().items() if numbers - registered}
    assert not strays, f"tables naming labs that course/manifest.py does not register: {strays}"


def test_a_lab_missing_from_a_table_is_named_with_the_table():
    assert "its notebook labs/99_missing.ipynb" in missing(lab.Lab("99_missing"))
    assert "its claims in its entry in course/manifest.py" in missing(lab.Lab("99_missing"))


# ---------------------------------------------------------------------------------------------- check rules
def rules_in(module) -> set:
    """The module's rules: its public functions of (job, where)."""
    return {
        f
        for name, f in inspect.getmembers(module, inspect.isfunction)
        if f.__module__ == module.__name__
        and not name.startswith("_")
        and list(inspect.signature(f).parameters)[:2] == ["job", "where"]
    }


def test_every_rule_is_in_its_table():
    common, only = rules_in(common_rules), rules_in(target_rules)
    assert len(common) > 10 and len(only) > 5  # the finder finds the rules
    assert set(common_rules.COMMON) == common, "a rule of common_rules.py missing from COMMON (or listed twice)"
    assert {rule for rules in target_rules.ONLY.values() for rule in rules} == only, (
        "a rule of target_rules.py missing from ONLY"
    )
    assert len(common_rules.COMMON) == len(set(common_rules.COMMON))


def test_every_kind_of_target_has_its_rules():
    assert set(target_rules.ONLY) == {"local", "local_container", "sagemaker"}


# ---------------------------------------------------------------------------------------------- input modes
def test_every_input_mode_has_a_local_stand_in():
    assert set(s3_inputs.STAND_INS) == set(input_mode.MODES)
    # the stand-in knows nothing of the helpers: its own list of the modes whose channel is a file system's directory
    assert s3_inputs.FILE_SYSTEMS == {m.name for m in input_mode.MODES.values() if not m.reads_s3}


def test_every_input_mode_is_a_lab_05_job_and_an_answer_its_exercise_knows():
    base = Job("lab05", {"epochs": 1})
    fsx = {"file_system_id": "fs-0123456789abcdef0", "mount_name": "abcdef12"}
    per_mode = mode_comparison.sagemaker_jobs_per_mode(base, {"train": "s3://bucket/train/"}, fsx)
    assert list(per_mode) == list(input_mode.MODES)
    assert set(lab05.WANTED.values()) <= set(input_mode.MODES)


@pytest.mark.parametrize("mode", list(input_mode.MODES.values()), ids=lambda m: m.name)
def test_every_input_mode_is_carried_by_the_request(mode):
    """The real request, built offline by the SDK: each channel in the mode, as the service reads it."""
    data = {split: str(DATA_DIR / "catalog" / split) for split in ("train", "validation")}
    fsx = {
        "file_system_id": "fs-0123456789abcdef0",
        "mount_name": "abcdef12",
        "subnets": ["subnet-0123456789abcdef0"],
        "security_group_ids": ["sg-0123456789abcdef0"],
    }
    job = mode_comparison.sagemaker_jobs_per_mode(Job("lab05", {"epochs": 1}), data, fsx)[mode.name]
    request = on_sagemaker(job, resolve("ml.g6.xlarge"), echo=False).request
    channels = {c["ChannelName"]: c for c in request["InputDataConfig"]}
    for name in data:
        assert input_mode.of_channel(channels[name]) == mode.name
        assert channels[name]["InputMode"] == mode.request_mode


def test_an_unknown_mode_is_refused_by_name_with_the_modes_there_are():
    assert all(input_mode.unknown(name) is None for name in input_mode.MODES)
    for name, hint in input_mode.RETIRED.items():
        if name not in input_mode.MODES:
            assert f"not one of {', '.join(input_mode.MODES)}. {hint}" in (input_mode.unknown(name) or "")
    where = Where.local(Job("x"), Target("local_cpu", "local_cpu", 0, 2))
    refusals = list(common_rules.channel_modes(Job("x", channels={"train": "/d"}, input_mode="Tape"), where))
    assert refusals and "'Tape' is not one of" in refusals[0].message


# ---------------------------------------------------------------------------------------------- instance types
GPU_TYPES = sorted(name for name, spec in instances.CATALOGUE.items() if spec.gpu)


def test_every_gpu_model_has_one_set_of_figures():
    for model in {g.model for g in instances.GPUS}:
        same = {(g.peak_tflops, g.link, g.link_gbytes_per_s, g.bf16) for g in instances.GPUS if g.model == model}
        assert len(same) == 1, f"{model}: its memory variants disagree on {same}"
    unlisted = {spec.gpu.model for spec in instances.CATALOGUE.values() if spec.gpu and spec.gpu not in instances.GPUS}
    assert not unlisted, f"GPUs of catalogue types missing from helpers/planning/instances.py GPUS: {sorted(unlisted)}"


@pytest.mark.parametrize("name", GPU_TYPES)
def test_every_gpu_type_is_planned_by_every_planner(name):
    spec = instances.lookup(name)
    intra, inter = scaling.links(name)
    assert intra.gbytes_per_s > 0 and inter.gbytes_per_s > 0
    step = scaling.estimate_step_s(spec.gpu.model, 64)
    work = scaling.Workload(1_000_000, 64, step, 4 * scaling.DISTILBERT_BASE_PARAMS)
    assert scaling.predict(work, name, 2).train_h > 0
    assert name in scaling.step_label(name)
    assert memory.estimate("llama-1b", "fsdp", world=spec.gpus, instance_type=name).gpu_bytes > 0
    memory.recommend("llama-1b", name)  # a plan, or None where nothing fits: never an error
    if spec.price_per_hour is None:  # priced by the caller, and the planner says so before it is
        with pytest.raises(cost.UnknownPrice, match="pass price_per_hour="):
            cost.estimate(name, 1, max_runtime_s=3600)
        assert cost.estimate(name, 1, max_runtime_s=3600, price_per_hour=10.0).on_demand_usd == pytest.approx(10.0)
    else:
        assert cost.estimate(name, 1, max_runtime_s=3600).on_demand_usd == pytest.approx(spec.price_per_hour)
        assert spot.rework(name, 10, intervals_min=(30,))
