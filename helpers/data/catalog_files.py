"""The files of a catalogue directory, read and checked: the ``id,title,category`` CSV parts, ``labels.json`` and
``manifest.json``. Every refusal is a :class:`CatalogError` that names the file, the line and what to do.
:mod:`catalog_generator.catalog` builds the directories."""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import os
import shlex
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import WorkshopError

COLUMNS = ("id", "title", "category")
CHECK_BYTES = 1 << 20  # check_channel reads this much of each CSV: catches a wrong encoding or header, even at 1 GB


@dataclass(frozen=True)
class Row:
    """One catalogue row: a product's id, its title and its category path."""

    id: str
    title: str
    category: str


class CatalogError(WorkshopError, ValueError):
    """Bad catalogue input; the message names the file, the row and what to do."""


def write_rows(path: Path, rows: Iterable[Row]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow((row.id, row.title, row.category))
            count += 1
    return count


def read_rows(path: str | os.PathLike, known_categories: Iterable[str] | None = None) -> list[Row]:
    """Read a catalogue CSV, failing on the first bad row with its file and line number."""
    path = Path(path)
    if not path.is_file():
        raise CatalogError(f"{path}: no such file. Build the catalogue with `python -m catalog_generator build`.")
    known = set(known_categories) if known_categories is not None else None
    try:  # utf-8-sig: Excel's "CSV UTF-8" starts with a byte-order mark that would stick to the first column's name
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            rows = list(_parse_rows(path, reader, known))
    except UnicodeDecodeError:
        raise CatalogError(_not_utf8(path)) from None
    except csv.Error as e:
        raise CatalogError(f"{path}, line {reader.line_num}: not readable as CSV ({e}).") from None
    if not rows:
        raise CatalogError(f"{path}: no rows after the header.")
    return rows


def _parse_rows(path: Path, reader, known: set[str] | None) -> Iterator[Row]:
    header = _check_header(path, next(reader, None))
    at = {name: header.index(name) for name in header}
    for line_no, fields in enumerate(reader, start=2):
        if len(fields) != len(header):
            raise CatalogError(
                f"{path}, line {line_no}: expected {len(header)} fields, found {len(fields)} "
                f"({fields!r}). Quote titles that contain commas."
            )
        title, category = fields[at["title"]].strip(), fields[at["category"]].strip()
        if not title or not category:
            raise CatalogError(f"{path}, line {line_no}: empty {'title' if not title else 'category'}.")
        if known is not None and category not in known:
            raise CatalogError(
                f"{path}, line {line_no}: unknown category {category!r}; "
                f"labels.json lists the categories this catalogue knows."
            )
        yield Row(fields[at["id"]] if "id" in at else f"line{line_no}", title, category)


def _check_header(path: Path, header: list[str] | None) -> list[str]:
    missing = [c for c in ("title", "category") if header is None or c not in header]
    if header is None or missing:
        raise CatalogError(
            f"{path}, line 1: missing column(s) {', '.join(missing)}; the header must name "
            f"{', '.join(COLUMNS)} (found {header})."
        )
    return header


def _not_utf8(path: str | os.PathLike) -> str:
    """Where ``path`` first stops being UTF-8, and how to convert it (found by a second, binary pass). The container
    has its twin in labs/src/catalog_data.py: the two rooms share no code."""
    offset = 0
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):  # a newline byte never sits inside a cp949 or UTF-8 character
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                return (
                    f"{path}, line {line_no} (byte {offset + e.start}): not UTF-8 text (byte "
                    f"0x{raw[e.start]:02x}). Save it as UTF-8, e.g. `iconv -f cp949 -t utf-8 {path} > "
                    f"utf8.csv` (latin-1: -f latin1), or in Excel: Save As > CSV UTF-8."
                )
            offset += len(raw)
    return f"{path}: not UTF-8 text. Save it as UTF-8 (e.g. `iconv -f cp949 -t utf-8`)."


def load_manifest(catalog_dir: str | os.PathLike) -> dict:
    path = Path(catalog_dir) / "manifest.json"
    fix = f"Build one with `python -m catalog_generator build --out {catalog_dir}`."
    if not path.is_file():
        raise CatalogError(f"{catalog_dir}: not a catalogue directory (no manifest.json). {fix}")
    manifest = _read_json(path, fix)
    if not isinstance(manifest, dict) or "source" not in manifest:
        raise CatalogError(f"{path}: not a manifest written by catalog_generator.catalog (no 'source'). {fix}")
    return manifest


def load_labels(path: str | os.PathLike) -> list[str]:
    """The categories of a ``labels.json``, in label-index order; it must be a list of distinct names."""
    path = Path(path)
    fix = "Rebuild the catalogue with `python -m catalog_generator build` (or `from-csv` for your own CSV)."
    labels = _read_json(path, fix)
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
        found = json.dumps(labels, ensure_ascii=False)
        raise CatalogError(f"{path}: must be a JSON list of category names, found {found[:80]}. {fix}")
    if len(set(labels)) < len(labels):
        twice = sorted(c for c, n in Counter(labels).items() if n > 1)
        raise CatalogError(
            f"{path}: lists {', '.join(map(repr, twice[:3]))} more than once; a label index needs "
            f"each category once. {fix}"
        )
    return labels


def _read_json(path: Path, fix: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"{path}: missing. {fix}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:  # a truncated copy or upload, or a hand edit
        raise CatalogError(f"{path}: not valid JSON ({e}). {fix}") from None


def load_split(catalog_dir: str | os.PathLike) -> tuple[list[Row], list[Row], list[str]]:
    """(train rows, validation rows, labels) of a catalogue directory, every file verified and validated."""
    root = Path(catalog_dir)
    verify_catalogue(root)
    labels = load_labels(root / "train" / "labels.json")
    train = [r for p in sorted((root / "train").glob("*.csv")) for r in read_rows(p, labels)]
    val = [r for p in sorted((root / "validation").glob("*.csv")) for r in read_rows(p, labels)]
    return train, val, labels


def check_part(path: Path, known: set[str] | None, head_bytes: int) -> int:
    """One CSV part of a channel, from its first ``head_bytes`` only: its encoding, header, field counts and
    categories (against ``known`` when given). Where the head is cut, its last, partial, line is left alone.
    Returns how many rows the head holds (0: a header and nothing else)."""
    with open(path, "rb") as f:
        head = f.read(head_bytes + 1)
    cut = len(head) > head_bytes
    try:  # not final at a cut: a character split by it is not an encoding error
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(head[:head_bytes], final=not cut)
    except UnicodeDecodeError:
        raise CatalogError(_not_utf8(path)) from None
    try:
        records = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise CatalogError(f"{path}: not readable as CSV ({e}).") from None
    header = _check_header(path, records[0] if records else None)
    category = header.index("category")
    rows = records[1:-1] if cut else records[1:]  # a cut leaves the last line partial
    for line_no, fields in enumerate(rows, start=2):
        if len(fields) != len(header):
            raise CatalogError(
                f"{path}, line {line_no}: expected {len(header)} fields, found {len(fields)} "
                f"({fields!r}). Quote titles that contain commas."
            )
        if known is not None and fields[category] not in known:  # exact, as the training script compares
            raise CatalogError(
                f"{path}, line {line_no}: category {fields[category]!r} is not in labels.json. Add "
                f"it there, or rebuild the catalogue with `python -m catalog_generator from-csv`."
            )
    return len(rows)


# ---------------------------------------------------------------------------------------------------- verified
def file_record(path: Path, rows: int | None = None) -> dict:
    """What the manifest records of a file it lists: its size, SHA-256 and (a CSV part) its rows."""
    record = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
    return record if rows is None else {**record, "rows": rows}


_HASHED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime): a lab and each of its jobs verify once


def _sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHED:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
        _HASHED[key] = digest.hexdigest()
    return _HASHED[key]


def rebuild_command(catalog_dir: str | os.PathLike, manifest: dict | None = None) -> str:
    """The one command that writes this catalogue again: its manifest's ``made_by``; for an older manifest, what its
    shards, source or rows say; the shipped catalogue's where the manifest says nothing."""
    manifest = manifest or {}
    made = manifest.get("made_by")
    if not made and manifest.get("shards", 1) > 1:  # an older manifest: how it was made, from what it says
        made = ["shards", "--rows", manifest.get("rows", 30000), "--shards", manifest["shards"]]
    elif not made and manifest.get("source") not in (None, "generator"):
        made = ["from-csv", manifest["source"]]
    made = made or ["build", "--rows", manifest.get("rows", 30000)]
    return shlex.join(["python", "-m", "catalog_generator", *map(str, made), "--out", str(catalog_dir)])


def verify_catalogue(catalog_dir: str | os.PathLike, only: str = "") -> dict:
    """The catalogue's manifest, once every file it lists (under ``only``, e.g. ``train/``) is there with the size,
    SHA-256 and rows it was written with, and no CSV part it does not list sits beside them. A damaged or partial
    catalogue is refused, naming the file, what is wrong and the command that rebuilds it."""
    root = Path(catalog_dir)
    fix = f"Rebuild it: {rebuild_command(root)}"
    if not (root / "manifest.json").is_file():
        raise CatalogError(f"{root}: not a catalogue directory (no manifest.json). {fix}")
    manifest = _read_json(root / "manifest.json", fix)
    fix = f"Rebuild it: {rebuild_command(root, manifest if isinstance(manifest, dict) else None)}"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files:
        raise CatalogError(f"{root / 'manifest.json'}: lists no files with their checksums (an older catalogue). {fix}")
    fix = f"The labs refuse a damaged catalogue rather than train on part of it. {fix}"
    for name, record in sorted(files.items()):
        if name.startswith(only) and (wrong := _damage(root / name, record)):
            raise CatalogError(f"{root / name} {wrong}. {fix}")
    for folder in {name.split("/")[0] for name in files if name.startswith(only)}:
        extra = sorted(p for p in (root / folder).glob("*.csv") if f"{folder}/{p.name}" not in files)
        if extra:
            raise CatalogError(f"{extra[0]} is not in the catalogue's manifest (a part of another catalogue?). {fix}")
    return manifest


def _damage(path: Path, record: dict) -> str:
    """What is wrong with one file the manifest lists ("" when nothing is)."""
    rows = record.get("rows")
    holds = f" (the manifest records {rows:,} rows there)" if rows is not None else ""
    if not path.is_file():
        return f"is missing{holds}"
    if path.stat().st_size == record.get("bytes") and _sha256(path) == record.get("sha256"):
        return ""
    if rows is not None:
        try:
            with open(path, newline="", encoding="utf-8-sig") as f:
                found = sum(1 for _ in csv.reader(f)) - 1
        except UnicodeDecodeError:  # re-encoded (cp949 from Excel): where, rather than only that it changed
            return "changed since it was built: " + _not_utf8(path).split(": ", 1)[1]
        except csv.Error:
            found = None
        if found is not None and found != rows:
            return f"holds {max(found, 0):,} of the {rows:,} rows its manifest records: cut short or changed"
    return (
        f"is {path.stat().st_size:,} bytes with another SHA-256 than the manifest records: changed since it was built"
    )


def check_channel(path: str | os.PathLike, labels: Iterable[str] | None = None) -> None:
    """Check a local channel directory before a job is launched on it: what the training container would refuse
    only after start-up, raised here as a :class:`CatalogError`.

    Checked: in a catalogue's folder, every file of the channel against its manifest (sizes and SHA-256, whole
    files); labels.json; and the first ``CHECK_BYTES`` of each CSV for its encoding, header, field counts and
    categories (against ``labels`` when given, e.g. the train channel's for a validation channel, else against the
    channel's own labels.json). A directory with neither labels.json nor CSV parts holds other data and is left alone.
    """
    root = Path(path)
    if (root.parent / "manifest.json").is_file():  # a catalogue's folder: every file as its manifest lists it
        verify_catalogue(root.parent, only=f"{root.name}/")
    if not root.is_dir():
        raise CatalogError(
            f"{root}: not a directory. Build the catalogue with "
            f"`python -m catalog_generator build --out data/catalog`, or give the right path."
        )
    parts = sorted(p for p in root.glob("*.csv") if p.is_file())
    if (root / "labels.json").is_file():
        own = load_labels(root / "labels.json")
        labels = own if labels is None else labels
        if not parts:
            raise CatalogError(
                f"{root}: labels.json but no .csv parts beside it, so nothing to train on. Copy "
                f"the CSV parts there, or point the channel at the catalogue's train directory."
            )
    known = None if labels is None else set(labels)
    rows = sum(check_part(part, known, CHECK_BYTES) for part in parts)
    if parts and not rows:
        raise CatalogError(
            f"{root}: its CSV parts hold a header and no rows, so the job would have nothing to read here. "
            f"Rebuild the catalogue (`python -m catalog_generator build --out <folder>`) or copy its parts again."
        )
    if (root / "tokenizer.json").is_file():
        check_tokenizer(root / "tokenizer.json")


def check_tokenizer(path: Path) -> None:
    """A channel's tokenizer.json must be whole JSON (a cut-off upload or copy is the usual way it is not)."""
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CatalogError(
            f"{path}: not a whole tokenizer file ({err}): a copy or upload cut short? Rebuild the catalogue "
            f"(`python -m catalog_generator build --out <folder>`) or copy its tokenizer.json again."
        ) from None


def check_channels(channels: dict) -> None:
    """:func:`check_channel` on a job's local train and validation channels (``s3://`` ones are not here to read);
    one without labels.json of its own (validation) is checked against the categories of one that has them (train)."""
    # the channels the training script reads as a catalogue; another channel may hold any data
    local = {
        name: Path(src)
        for name, src in channels.items()
        if name in ("train", "validation") and not str(src).startswith("s3://")
    }
    with_labels = [p / "labels.json" for p in local.values() if (p / "labels.json").is_file()]
    labels = load_labels(with_labels[0]) if with_labels else None
    for name, path in local.items():
        try:
            check_channel(path, None if (path / "labels.json").is_file() else labels)
        except CatalogError as e:
            raise CatalogError(f"channel {name!r}: {e}") from None
