"""How long AWS patches the images the labs run on: a dated table from the Deep Learning Containers repository.

``dlc_support.json`` beside this module, rebuilt from a checkout of ``aws/deep-learning-containers``::

    python -m helpers.aws.image_support --refresh /tmp/dlc     # rewrites dlc_support.json, dated
    python -m helpers.aws.image_support                          # prints the table

Every dry run prints its image's :func:`status`; preflight notes one past its end of patch, after which AWS ships no
fixes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

SUPPORT_FILE = Path(__file__).with_name("dlc_support.json")
_TAG_VERSION = re.compile(r":(\d+\.\d+)(?:\.\d+)?-")


@dataclass(frozen=True)
class Support:
    """One image's support window, as the table has it (None when the table does not know the image)."""

    image: str
    pytorch: str | None  # major.minor
    ga: dt.date | None
    eop: dt.date | None
    newest: str  # the newest PyTorch version the table lists with dates
    source: str  # where the dates come from, with the snapshot's date

    def past(self, today: dt.date) -> bool:
        return self.eop is not None and today > self.eop

    def describe(self, today: dt.date | None = None) -> str:
        today = today or dt.date.today()
        if self.eop is None:
            return f"no support dates on file ({self.source})"
        if self.past(today):
            return f"past its end of patch, {self.eop} ({self.source})"
        return f"patched until {self.eop} ({self.source})"


def load(path: Path = SUPPORT_FILE) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def status(image_uri: str, table: dict | None = None) -> Support:
    """The support window of a SageMaker PyTorch image (a framework DLC or an SMP image, which is built on one)."""
    table = table or load()
    versions = table["pytorch"]
    newest = max(versions, key=lambda v: tuple(int(x) for x in v.split(".")))
    source = f"DLC support data of {table['snapshot_date']}"
    m = _TAG_VERSION.search(image_uri.rsplit("/", 1)[-1])
    version = m.group(1) if m else None
    entry = versions.get(version) if version else None
    if "smdistributed-modelparallel" in image_uri and entry:
        source += "; an SMP image has its PyTorch's dates"
    ga, eop = (dt.date.fromisoformat(entry["ga"]), dt.date.fromisoformat(entry["eop"])) if entry else (None, None)
    return Support(image_uri, version, ga, eop, newest, source)


# ---------------------------------------------------------------------------------------------- refresh
def refresh(dlc: Path) -> dict:
    """The table, read from a checkout of aws/deep-learning-containers."""
    import yaml  # a maintainer's command: PyYAML comes with the test extra

    dlc = Path(dlc)
    legacy = yaml.safe_load((dlc / "docs/src/legacy/legacy_support.yml").read_text())
    versions = {str(e["version"]): {"ga": str(e["ga"]), "eop": str(e["eop"])} for e in legacy["pytorch"]}
    for path in sorted((dlc / "docs/src/data/pytorch-training").glob("*-gpu-sagemaker.yml")):
        entry = yaml.safe_load(path.read_text())
        versions[str(entry["version"])] = {"ga": str(entry["ga"]), "eop": str(entry["eop"])}
    images: dict[str, dict] = {}  # 2.11 on: repository "pytorch", Amazon Linux 2023, tags the SDK does not know
    for path in sorted((dlc / "docs/src/data/pytorch").glob("*-sagemaker.yml")):
        entry = yaml.safe_load(path.read_text())
        version = str(entry["version"])
        versions[version] = {"ga": str(entry["ga"]), "eop": str(entry["eop"])}
        short = min(entry["tags"], key=len)  # "2.13-cu133-amzn2023-sagemaker", not "2.13.0-..."
        images.setdefault(version, {"python": entry["python"]})[entry["accelerator"]] = f"pytorch:{short}"
    newer = []  # released images the support data does not list yet (a new build and naming)
    for path in sorted((dlc / ".github/config/image/pytorch").glob("*-sagemaker-cuda.yml")):
        meta = yaml.safe_load(path.read_text())["metadata"]
        if ".".join(meta["framework_version"].split(".")[:2]) not in versions:
            newer.append(meta["prod_image"])
    head = subprocess.run(
        ["git", "-C", str(dlc), "log", "-1", "--format=%h %cs"], capture_output=True, text=True, check=False
    ).stdout.split()
    return {
        "source": "aws/deep-learning-containers support data (docs/src/legacy/legacy_support.yml, "
        "docs/src/data/pytorch-training, docs/src/data/pytorch, docs/reference/region_availability.md)",
        "snapshot": head[0] if head else "",
        "snapshot_date": head[1] if len(head) > 1 else dt.date.today().isoformat(),
        "pytorch": dict(sorted(versions.items(), key=lambda kv: tuple(int(x) for x in kv[0].split(".")))),
        "images": images,
        "accounts": _accounts((dlc / "docs/reference/region_availability.md").read_text()),
        "released_without_dates": newer,
    }


def _accounts(markdown: str) -> dict[str, str]:
    """Region -> the ECR account of the DLCs, from the first table of region_availability.md."""
    table = markdown.split("## Deep Learning Containers", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\|[^|]+\| ([a-z]{2}(?:-[a-z]+)+-\d) \| (\d{12}) \|$", table, re.MULTILINE))


def table_rows(table: dict | None = None) -> list[dict]:
    table = table or load()
    return [{"PyTorch": v, "GA": d["ga"], "end of patch": d["eop"]} for v, d in table["pytorch"].items()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m helpers.aws.image_support", description=__doc__.split("\n\n")[0])
    ap.add_argument("--refresh", type=Path, metavar="DLC_CHECKOUT", help="rebuild the table from a checkout")
    a = ap.parse_args(argv)
    if a.refresh:
        table = refresh(a.refresh)
        SUPPORT_FILE.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {SUPPORT_FILE} ({len(table['pytorch'])} versions, snapshot {table['snapshot_date']})")
    table = load()
    print(f"{table['source']}, snapshot {table['snapshot']} of {table['snapshot_date']}")
    for row in table_rows(table):
        print(f"  PyTorch {row['PyTorch']:>5}  GA {row['GA']}  end of patch {row['end of patch']}")
    if table["released_without_dates"]:
        print(f"  released, no dates published yet: {', '.join(table['released_without_dates'])}")


if __name__ == "__main__":
    main()
