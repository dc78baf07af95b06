"""The generated blocks of infra/workshop-account.yaml: the Studio attendees' profiles and the spaces' sizing.

CloudFormation has no loops, so the template holds MAX_ATTENDEES user profiles in groups of ATTENDEE_STEP, each group
behind a condition that holds when the StudioUsers parameter reaches it. (Groups, not one condition per count:
cfn-lint's time grows steeply with the number of values one parameter is compared with: 2.7 s for 8, 15 s for 20,
over 3 minutes for 40.) The spaces' default storage and instance type are computed here from measured figures
(update the constants, then rewrite the template):

    python infra/workshop_account.py --write    # rewrite the generated blocks of workshop-account.yaml
    python infra/workshop_account.py --check    # exit 1 if they differ from what this writes (the tests check too)
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

TEMPLATE = Path(__file__).resolve().with_name("workshop-account.yaml")

MAX_ATTENDEES = 40
ATTENDEE_STEP = 5  # StudioUsers takes multiples of this; spare profiles cost nothing
DEFAULT_ATTENDEES = 10
PROFILE_NAME = "attendee-{:02d}"  # the attendee prefix of their jobs and S3 keys (helpers.aws.account)

# --- A space's home directory (its EBS volume): what the workshop puts there, in MB ----------------------------------
# Measured 2026-11-25 on a fresh clone of commit 010941b (`du -sm`).
CLONE_MB = 7  # the clone, .git included (its data/ is 3 MB of that: the catalogue is committed)
SMOKE_RUN_MB = 132  # runs/ after one smoke run of every lab: jobs 60, lab 05's data 44, lab 06's drills 28, labs 2
RERUN_MB = 88  # what each further run of every lab adds: new job and drill folders (lab 05's data is made once)
LAB_PASSES = 5  # runs of every lab kept in a day: a first smoke run, the core path, the exercise, a deep dive, a retry
# What `make studio` adds under the home directory: the `added_mb` of `make studio-twin`'s report
# (docs/studio-twin.json, 2026-11-25: 147.1 MB). When the twin measures a new figure, update it here and run --write.
STUDIO_INSTALL_MB = 147
STUDIO_INSTALL_MEASURED = True
FREE_FRACTION = 0.2  # kept free: a full volume stops JupyterLab saving notebooks
MIN_SPACE_GB = 5  # the API's minimum (DefaultEbsStorageSettings)
MAX_SPACE_GB = 100  # what an attendee may grow their space to (the domain's MaximumEbsVolumeSizeInGb)


def space_footprint_mb() -> int:
    return CLONE_MB + STUDIO_INSTALL_MB + SMOKE_RUN_MB + (LAB_PASSES - 1) * RERUN_MB


def space_storage_gb() -> int:
    """The spaces' default EBS size: the footprint with FREE_FRACTION kept free, in whole GB, at least the minimum."""
    return max(MIN_SPACE_GB, math.ceil(space_footprint_mb() / (1 - FREE_FRACTION) / 1024))


def storage_arithmetic() -> str:
    install = f"{STUDIO_INSTALL_MB} MB `make studio`" + ("" if STUDIO_INSTALL_MEASURED else " (provisional)")
    need = space_footprint_mb()
    return (
        f"{CLONE_MB} MB clone + {install} + {SMOKE_RUN_MB} MB first run of the labs + "
        f"{LAB_PASSES - 1} x {RERUN_MB} MB more runs = {need} MB; "
        f"with {FREE_FRACTION:.0%} kept free {need / (1 - FREE_FRACTION) / 1024:.1f} GB, "
        f"at least {MIN_SPACE_GB} (the API's minimum): {space_storage_gb()} GB"
    )


# --- The spaces' JupyterLab instance --------------------------------------------------------------------------------
# Each lab in smoke size on the 2-core (2 physical cores, no SMT) machine the tests run on, 2026-11-25, sampled every
# 0.2 s: the peak PSS of the lab runner's processes (runner, kernel, launcher, training processes, SeaweedFS), and the
# training processes a lab runs at once (labs 02 and 04: torchrun with 2 ranks; lab 05: the store beside the reader;
# lab 07: the trainer beside its data-loader workers). Busy cores peaked at 1.9 of 2 (labs 01, 05 and 07).
LAB_PEAK_MB = {"01": 833, "02": 1216, "03": 1014, "04": 1224, "05": 1023, "06": 611, "07": 765}
LAB_PROCESSES = {"01": 1, "02": 2, "03": 1, "04": 2, "05": 2, "06": 1, "07": 2}
# JupyterLab's server, Studio's extensions and the kernels an attendee leaves open beside the running lab: the guide's
# earlier whole-run measurement put the runner at 2.3 GiB resident and found 8 GiB comfortable, 4 GiB not.
MIN_MEMORY_GIB = 8


@dataclass(frozen=True)
class JupyterLabType:
    name: str
    vcpus: int
    cores: int  # physical cores: 2 vCPUs are one core's two hyperthreads
    memory_gib: int
    burstable: bool = False  # t3: full speed only while CPU credits last (a t3.large's baseline is 30% of a vCPU)


# Cheapest first, among the Studio JupyterLab types the template offers
JUPYTERLAB_TYPES = (
    JupyterLabType("ml.t3.large", 2, 1, 8, burstable=True),
    JupyterLabType("ml.m5.large", 2, 1, 8),
    JupyterLabType("ml.m5.xlarge", 4, 2, 16),
    JupyterLabType("ml.m6i.xlarge", 4, 2, 16),
    JupyterLabType("ml.m5.2xlarge", 8, 4, 32),
)


def shortfalls(t: JupyterLabType) -> list[str]:
    """Why ``t`` does not run the labs as measured (empty: it does)."""
    why = []
    procs = max(LAB_PROCESSES.values())
    labs = [lab for lab, n in LAB_PROCESSES.items() if n > t.cores]
    if labs:
        why.append(
            f"{t.cores} physical core for the {procs} processes labs {', '.join(labs)} run at once: they would "
            f"share it (the lab times were measured on 2 cores)"
        )
    if t.burstable:
        why.append("burstable: a lab's sustained CPU use spends its credits, then it runs at a fraction of a core")
    if t.memory_gib < MIN_MEMORY_GIB:
        why.append(f"{t.memory_gib} GiB of memory, under {MIN_MEMORY_GIB}")
    return why


def jupyterlab_instance() -> JupyterLabType:
    """The cheapest JupyterLab type with no shortfall."""
    return next(t for t in JUPYTERLAB_TYPES if not shortfalls(t))


# --- The generated blocks -------------------------------------------------------------------------------------------
def _condition(n: int) -> str:
    """The condition of attendee n's profile: the domain exists and StudioUsers reaches n's group."""
    first = (n - 1) // ATTENDEE_STEP * ATTENDEE_STEP + 1
    return "CreateStudio" if first == 1 else f"Attendees{first:02d}To{first + ATTENDEE_STEP - 1:02d}"


def studio_parameters() -> str:
    chosen = jupyterlab_instance()
    counts = ", ".join(f'"{n}"' for n in range(ATTENDEE_STEP, MAX_ATTENDEES + 1, ATTENDEE_STEP))
    users = (
        f"With WithStudio, how many attendee profiles the domain gets ({PROFILE_NAME.format(1)} ... "
        f"{PROFILE_NAME.format(MAX_ATTENDEES)}), in steps of {ATTENDEE_STEP}: round up (a spare profile costs "
        f"nothing). Each profile's name is the attendee prefix of that person's jobs and S3 keys."
    )
    instance = (
        f"With WithStudio, the spaces' default JupyterLab instance: {chosen.name} has {chosen.cores} physical cores "
        f"({chosen.vcpus} vCPUs) and {chosen.memory_gib} GiB, the cheapest here that runs two training processes "
        f"side by side (docs/facilitator.md, Studio)."
    )
    storage = (
        "With WithStudio, each space's default EBS volume in GB (its home directory): "
        + storage_arithmetic().replace("`", "")
        + "."
    )
    return f"""\
  StudioUsers:
    Type: String
    Default: "{DEFAULT_ATTENDEES}"
    AllowedValues: [{counts}]
    Description: {json.dumps(users)}
  StudioInstanceType:
    Type: String
    Default: {chosen.name}
    AllowedValues: [{", ".join(t.name for t in JUPYTERLAB_TYPES)}]
    Description: {json.dumps(instance)}
  StudioStorageGb:
    Type: Number
    Default: {space_storage_gb()}
    MinValue: {MIN_SPACE_GB}
    MaxValue: {MAX_SPACE_GB}
    Description: {json.dumps(storage)}
"""


def studio_attendee_conditions() -> str:
    """A chain: group k exists when group k - 1 does and StudioUsers is not the count that ends group k - 1."""
    firsts = range(ATTENDEE_STEP + 1, MAX_ATTENDEES + 1, ATTENDEE_STEP)
    return "".join(
        f'  {_condition(n)}: !And [!Condition {_condition(n - 1)}, !Not [!Equals [!Ref StudioUsers, "{n - 1}"]]]\n'
        for n in firsts
    )


def studio_attendee_profiles() -> str:
    blocks = []
    for n in range(1, MAX_ATTENDEES + 1):
        blocks.append(
            f"""\
  StudioAttendee{n:02d}:
    Type: AWS::SageMaker::UserProfile
    Condition: {_condition(n)}
    Properties:
      DomainId: !GetAtt StudioDomain.DomainId
      UserProfileName: {PROFILE_NAME.format(n)}
      Tags: [{{Key: workshop, Value: !Ref AWS::StackName}}]
"""
        )
    return "\n".join(blocks)


BLOCKS = {
    "studio-parameters": studio_parameters,
    "studio-attendee-conditions": studio_attendee_conditions,
    "studio-attendee-profiles": studio_attendee_profiles,
}


def render(text: str) -> str:
    """``text`` with every ``# generated:NAME`` ... ``# /generated:NAME`` block rewritten."""
    for name, make in BLOCKS.items():
        pattern = re.compile(rf"(^ *# generated:{name}\b[^\n]*\n)(.*?)(^ *# /generated:{name}\b)", re.S | re.M)
        if not pattern.search(text):
            raise ValueError(f"the template has no block '# generated:{name}' ... '# /generated:{name}'")
        body = make()
        text = pattern.sub(lambda m, body=body: m.group(1) + body + m.group(3), text)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python infra/workshop_account.py", description=__doc__.split("\n\n")[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", action="store_true", help=f"rewrite the generated blocks of {TEMPLATE.name}")
    what.add_argument("--check", action="store_true", help="exit 1 if the template's generated blocks are stale")
    a = ap.parse_args(argv)
    text = TEMPLATE.read_text(encoding="utf-8")
    if a.check:
        if render(text) != text:
            print(f"{TEMPLATE.name} is stale: run python infra/workshop_account.py --write", file=sys.stderr)
            return 1
        return 0
    TEMPLATE.write_text(render(text), encoding="utf-8")
    print(f"wrote {TEMPLATE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
