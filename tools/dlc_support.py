"""How long AWS patches the images the labs run on: the dated table ``helpers/aws/dlc_support.json``, rebuilt from a
checkout of ``aws/deep-learning-containers`` (a maintainer's command; the helpers read the table,
:func:`helpers.aws.images.support`)::

    python tools/dlc_support.py --refresh /tmp/dlc     # rewrites helpers/aws/dlc_support.json, dated
    python tools/dlc_support.py                          # prints the table
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
from pathlib import Path

from helpers.aws.images import SUPPORT_FILE, support_table


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
    table = table or support_table()
    return [{"PyTorch": v, "GA": d["ga"], "end of patch": d["eop"]} for v, d in table["pytorch"].items()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python tools/dlc_support.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--refresh", type=Path, metavar="DLC_CHECKOUT", help="rebuild the table from a checkout")
    a = ap.parse_args(argv)
    if a.refresh:
        table = refresh(a.refresh)
        SUPPORT_FILE.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {SUPPORT_FILE} ({len(table['pytorch'])} versions, snapshot {table['snapshot_date']})")
    table = support_table()
    print(f"{table['source']}, snapshot {table['snapshot']} of {table['snapshot_date']}")
    for row in table_rows(table):
        print(f"  PyTorch {row['PyTorch']:>5}  GA {row['GA']}  end of patch {row['end of patch']}")
    if table["released_without_dates"]:
        print(f"  released, no dates published yet: {', '.join(table['released_without_dates'])}")


if __name__ == "__main__":
    main()
