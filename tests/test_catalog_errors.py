"""Bad catalogue input, on both sides: ``catalog_generator.catalog`` (building, loading, the pre-launch channel check)
and the container's ``catalog_data`` — a clear error naming the file and the fix, before anything is written or
launched."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

from catalog_generator import catalog
from helpers.data import catalog_files
from helpers.data.catalog_files import CatalogError

from catalog_data import DataError, read_channel, read_labels  # noqa: E402

LABELS = ["fashion > dress", "beauty > 립스틱"]
ROWS = [[f"p{i}", f"매트 립스틱 {i}" if i % 2 else f"블랙 원피스 {i}", LABELS[i % 2]] for i in range(24)]


def write_csv(path, rows=ROWS, header=("id", "title", "category"), encoding="utf-8"):
    with open(path, "w", newline="", encoding=encoding) as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def make_channel(root, rows=ROWS, labels=LABELS, encoding="utf-8"):
    """A train channel as a catalogue holds it: a CSV part and labels.json."""
    root.mkdir(parents=True, exist_ok=True)
    write_csv(root / "part-00000.csv", rows, encoding=encoding)
    (root / "labels.json").write_text(json.dumps(labels, ensure_ascii=False), encoding="utf-8")
    return root


def cli(*argv):
    """``python -m catalog_generator`` in this process: (exit code, its message)."""
    with pytest.raises(SystemExit) as e:
        catalog.main([str(a) for a in argv])
    return e.value.code


# ---------------------------------------------------------------------------------------------- --out (data loss)


def test_out_directory_that_is_not_a_catalogue_is_refused_untouched(tmp_path):
    src, out = write_csv(tmp_path / "mine.csv"), tmp_path / "photos"
    out.mkdir()
    (out / "holiday.jpg").write_bytes(b"\xff\xd8 precious")
    code = cli("from-csv", src, "--out", out, "--vocab-size", 100)
    assert code.startswith("error: --out ") and "not a catalogue written by catalog_generator.catalog" in code
    assert "\n" not in code and "new directory" in code
    assert [p.name for p in out.iterdir()] == ["holiday.jpg"]
    assert (out / "holiday.jpg").read_bytes() == b"\xff\xd8 precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.csv", "photos"]  # no staging directory left


def test_out_with_someone_elses_manifest_is_refused(tmp_path):
    out = tmp_path / "webapp"
    out.mkdir()
    (out / "manifest.json").write_text('{"name": "my app", "icons": []}')
    with pytest.raises(CatalogError, match="not a catalogue written by catalog_generator.catalog"):
        catalog.build(out, rows=12000, vocab_size=100)
    assert [p.name for p in out.iterdir()] == ["manifest.json"]


def test_out_that_is_a_file_is_refused_untouched(tmp_path):
    out = tmp_path / "report.txt"
    out.write_text("keep me")
    assert cli("build", "--rows", 12000, "--out", out).startswith(f"error: --out {out} is a file")
    with pytest.raises(CatalogError, match="is a file"):
        catalog.shards(out, rows=100, n_shards=2)
    assert out.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["report.txt"]


def test_rebuilding_a_catalogue_or_building_into_an_empty_directory_works(tmp_path):
    src, out = write_csv(tmp_path / "mine.csv"), tmp_path / "mine"
    out.mkdir()  # empty: nothing to lose
    catalog.from_csv(src, out, seed=0, vocab_size=100)
    write_csv(src, ROWS + [["extra", "레드 원피스", LABELS[0]]])
    catalog.from_csv(src, out, seed=1, vocab_size=100)  # as the Makefile and labs rebuild data/catalog
    assert catalog_files.load_manifest(out)["rows"] == len(ROWS) + 1


# ---------------------------------------------------------------------------------------------- encodings


@pytest.mark.parametrize(
    "encoding, title, first_bad", [("cp949", "블랙 원피스", 0), ("latin-1", "robe café", 8)], ids=["cp949", "latin-1"]
)
def test_csv_not_in_utf8_names_file_line_byte_and_iconv(tmp_path, encoding, title, first_bad):
    src = write_csv(tmp_path / "mine.csv", [["1", "ok", "dress"], ["2", title, "dress"]], encoding=encoding)
    byte = len(b"id,title,category\r\n1,ok,dress\r\n2,") + first_bad
    with pytest.raises(CatalogError, match=rf"mine\.csv, line 3 \(byte {byte}\): not UTF-8.*iconv -f cp949 -t utf-8"):
        catalog_files.read_rows(src)


def test_from_csv_command_reports_a_cp949_file_in_one_line_without_traceback(tmp_path):
    src = write_csv(tmp_path / "mine.csv", ROWS, encoding="cp949")
    done = subprocess.run(
        [sys.executable, "-m", "catalog_generator.catalog", "from-csv", str(src), "--out", str(tmp_path / "o")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"error: {src}, line 2 (byte 22): not UTF-8")
    assert not (tmp_path / "o").exists()


def test_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    src = write_csv(tmp_path / "mine.csv", encoding="utf-8-sig")  # Excel's "CSV UTF-8"
    assert src.read_bytes().startswith(b"\xef\xbb\xbfid,")
    assert catalog_files.read_rows(src)[0].id == "p0"
    make_channel(tmp_path / "train", encoding="utf-8-sig")
    catalog_files.check_channel(tmp_path / "train")
    titles, targets = read_channel(tmp_path / "train", LABELS)
    assert titles[0] == ROWS[0][1] and len(titles) == len(ROWS)


# ---------------------------------------------------------------------------------------------- labels.json

BROKEN_LABELS = {
    "truncated": ('["fashion > dress", "beauty > 립', "not valid JSON"),
    "not a list": ('{"fashion > dress": 0}', "must be a JSON list of category names"),
    "not strings": ('["fashion > dress", 7]', "must be a JSON list of category names"),
    "empty": ("[]", "must be a JSON list of category names"),
    "missing": (None, "missing"),
}


@pytest.mark.parametrize("case", BROKEN_LABELS)
def test_broken_labels_json_names_the_file_and_the_rebuild(tmp_path, case):
    """In a catalogue, labels.json no longer matches its manifest's record (the notebook side refuses it by name
    with the command that rebuilds it); on the container's side, and in a channel outside a catalogue, its
    content is what is wrong."""
    text, problem = BROKEN_LABELS[case]
    train = make_channel(tmp_path / "cat" / "train")
    files = {f"train/{p.name}": catalog_files.file_record(p) for p in train.iterdir()}
    (tmp_path / "cat" / "manifest.json").write_text(json.dumps({"source": "generator", "files": files}))
    labels = train / "labels.json"
    labels.unlink() if text is None else labels.write_text(text, encoding="utf-8")
    expected = rf"{re.escape(str(labels))}: {problem}.*python -m catalog_generator build"
    in_catalogue = rf"{re.escape(str(labels))} (is missing|is \d+ bytes with another SHA-256).*Rebuild it: python -m"
    with pytest.raises(CatalogError, match=in_catalogue):
        catalog_files.load_split(tmp_path / "cat")
    with pytest.raises(CatalogError, match=in_catalogue):
        catalog_files.check_channel(train)
    with pytest.raises(DataError, match=expected):
        read_labels(train)
    if text is not None:  # outside a catalogue; without labels.json a channel is checked as a validation channel
        alone = tmp_path / "alone"
        shutil.copytree(train, alone)
        with pytest.raises(CatalogError, match=rf"{re.escape(str(alone / 'labels.json'))}: {problem}"):
            catalog_files.check_channel(alone)


def test_a_category_listed_twice_is_refused(tmp_path):
    train = make_channel(tmp_path / "train", labels=[*LABELS, LABELS[0]])
    with pytest.raises(CatalogError, match="'fashion > dress' more than once"):
        catalog_files.check_channel(train)


# ---------------------------------------------------------------------------------------------- command-line values


@pytest.mark.parametrize(
    "argv, complaint",
    [
        (["build", "--rows", "0"], "argument --rows: 0 is too small: use at least 1"),
        (["build", "--rows", "-5"], "argument --rows: -5 is too small"),
        (["shards", "--rows", "100", "--shards", "0"], "argument --shards: 0 is too small"),
        (["build", "--vocab-size", "-3"], "argument --vocab-size: -3 is too small: use at least 100"),
        (["build", "--vocab-size", "0"], "argument --vocab-size: 0 is too small"),
        (["shards", "--rows", "1e6"], "argument --rows: '1e6' is not a whole number"),
    ],
    ids=["rows-0", "rows-negative", "shards-0", "vocab-negative", "vocab-0", "rows-not-whole"],
)
def test_bad_numbers_are_refused_before_anything_is_written(tmp_path, capsys, argv, complaint):
    assert cli(*argv, "--out", tmp_path / "out") == 2
    assert complaint in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("rows, n_shards", [(9, 4), (5, 0), (0, 3)])
def test_shards_that_would_be_empty_are_refused(tmp_path, rows, n_shards):
    with pytest.raises(CatalogError, match="rows"):
        catalog.shards(tmp_path / "big", rows=rows, n_shards=n_shards, vocab_size=100)
    assert not list(tmp_path.iterdir())


def test_zero_rows_or_a_tiny_vocabulary_is_refused_by_the_functions_too(tmp_path):
    with pytest.raises(CatalogError, match="rows=0"):
        catalog.build(tmp_path / "cat", rows=0)
    with pytest.raises(CatalogError, match="vocab_size=5: use at least 100"):
        catalog.from_csv(write_csv(tmp_path / "mine.csv"), tmp_path / "cat", vocab_size=5)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.csv"]


# ---------------------------------------------------------------------------------------------- check_channel


def test_check_channel_passes_catalogue_channels_and_leaves_other_data_alone(tmp_path):
    train = make_channel(tmp_path / "train")
    validation = tmp_path / "validation"
    validation.mkdir()
    write_csv(validation / "part-00000.csv", ROWS[:4])
    assert catalog_files.check_channel(train) is None
    catalog_files.check_channel(validation)  # no labels.json: header, encoding and fields only
    catalog_files.check_channel(validation, labels=LABELS)
    other = tmp_path / "tokens"
    other.mkdir()
    (other / "shard-00000.bin").write_bytes(b"\xff\xfe\x00binary")
    (other / "meta.json").write_text("{not json")
    catalog_files.check_channel(other)
    (tmp_path / "empty").mkdir()
    catalog_files.check_channel(tmp_path / "empty")


BAD_PARTS = {
    "cp949": (dict(encoding="cp949"), r"line 2 \(byte 22\): not UTF-8"),
    "no title column": (dict(header=("id", "name", "category")), "line 1: "),
    "unknown category": (dict(rows=[*ROWS[:3], ["x", "후드티", "fashion > hoodie"]]), "line 5: .*'fashion > hoodie'"),
    "unquoted comma": (dict(rows=[*ROWS[:2], ["x", "블랙", "원피스", LABELS[0]]]), "line 4: expected 3 fields"),
}


@pytest.mark.parametrize("case", BAD_PARTS)
def test_check_channel_refuses_what_the_container_would_refuse(tmp_path, case):
    options, where = BAD_PARTS[case]
    train = make_channel(tmp_path / "train")
    part = write_csv(train / "part-00001.csv", **{"rows": ROWS, **options})
    with pytest.raises(CatalogError, match=rf"{re.escape(str(part))}, {where}"):
        catalog_files.check_channel(train)
    with pytest.raises(DataError, match=rf"{re.escape(str(part))}, {where}"):
        read_channel(train, LABELS)


def test_check_channel_uses_the_given_labels_for_a_channel_without_its_own(tmp_path):
    validation = tmp_path / "validation"
    validation.mkdir()
    write_csv(validation / "part-00000.csv", [["1", "후드티", "fashion > hoodie"]])
    with pytest.raises(CatalogError, match=r"line 2: category 'fashion > hoodie' is not in labels\.json"):
        catalog_files.check_channel(validation, labels=LABELS)


def test_check_channel_refuses_labels_without_csv_parts_and_a_missing_directory(tmp_path):
    train = make_channel(tmp_path / "train")
    (train / "part-00000.csv").unlink()
    with pytest.raises(CatalogError, match="labels.json but no .csv parts"):
        catalog_files.check_channel(train)
    with pytest.raises(CatalogError, match="not a directory"):
        catalog_files.check_channel(tmp_path / "nowhere")


def test_check_channel_reads_only_the_head_of_each_part(tmp_path, monkeypatch):
    train = make_channel(tmp_path / "train")
    head = (train / "part-00000.csv").read_bytes()
    cut = next(i for i in range(60, len(head)) if 0x80 <= head[i] < 0xC0)  # inside a Hangul character, mid-record
    monkeypatch.setattr(catalog_files, "CHECK_BYTES", cut)
    with open(train / "part-00000.csv", "ab") as f:
        f.write("late,블랙,fashion > hoodie\r\n".encode() + "late,블랙,fashion > dress\r\n".encode("cp949"))
    catalog_files.check_channel(train)  # neither the split character nor the bad rows past the head are an error
    monkeypatch.setattr(catalog_files, "CHECK_BYTES", 1 << 20)
    with pytest.raises(CatalogError, match="not UTF-8"):
        catalog_files.check_channel(train)


def test_a_cut_short_tokenizer_is_refused_naming_the_file_on_both_sides(tmp_path):
    """A tokenizer.json copied or uploaded only in part: the pre-launch check names the file and the fix, and the
    container, if it gets one all the same, says the same instead of the library's bare 'EOF while parsing'."""
    from catalog_data import load_tokenizer

    whole = (REPO / "data" / "catalog" / "train" / "tokenizer.json").read_text(encoding="utf-8")
    channel = make_channel(tmp_path / "train")
    (channel / "tokenizer.json").write_text(whole[: len(whole) // 2], encoding="utf-8")
    with pytest.raises(CatalogError, match=r"tokenizer.json: not a whole tokenizer file .*copy its tokenizer.json"):
        catalog_files.check_channels({"train": channel})
    with pytest.raises(DataError, match=r"tokenizer.json: not a tokenizer file the tokenizers library can read"):
        load_tokenizer(str(channel / "tokenizer.json"))
    (channel / "tokenizer.json").write_text(whole, encoding="utf-8")
    catalog_files.check_channels({"train": channel})  # the whole file passes
    assert load_tokenizer(str(channel / "tokenizer.json")).vocab_size > 100


def test_a_channel_of_headers_only_is_refused_on_both_sides(tmp_path):
    """An empty validation split (every part a header, no rows): the pre-launch check names the directory, and the
    container does too, instead of failing deep inside the tokenizer ('list index out of range')."""
    channel = make_channel(tmp_path / "validation", rows=[])
    with pytest.raises(CatalogError, match=r"validation: its CSV parts hold a header and no rows"):
        catalog_files.check_channels({"train": make_channel(tmp_path / "train"), "validation": channel})
    with pytest.raises(DataError, match=r"validation: its .csv files hold a header and no rows"):
        read_channel(str(channel), LABELS)


def test_the_rebuild_command_of_an_older_manifest_is_the_one_that_made_it():
    """A manifest from before the checksums has no ``made_by``: its rows and shards say how it was made."""
    assert catalog_files.rebuild_command("big", {"rows": 2000, "shards": 3}).startswith(
        "python -m catalog_generator shards --rows 2000 --shards 3 --out big"
    )
    assert "from-csv mine.csv" in catalog_files.rebuild_command("mine", {"source": "mine.csv", "shards": 1})
    assert "build --rows 30000" in catalog_files.rebuild_command("data/catalog", {"source": "generator"})


def test_the_rebuild_command_makes_a_sharded_catalogue_again_tokenizer_included(tmp_path):
    """A catalogue whose tokenizer learned from fewer titles than the default (lab 05's) is made again, byte for
    byte, by the command its refusal prints: the command carries --tokenizer-rows."""
    import shlex

    from catalog_generator import catalog

    first = catalog.shards(tmp_path / "first", rows=2000, n_shards=2, vocab_size=300, tokenizer_rows=500)
    command = catalog_files.rebuild_command(first, catalog_files.load_manifest(first))
    assert "--tokenizer-rows 500" in command, command
    argv = shlex.split(command.replace(str(first), str(tmp_path / "again")))
    assert argv[:3] == ["python", "-m", "catalog_generator"]
    catalog.main(argv[3:])
    files = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    again = sorted(p.relative_to(tmp_path / "again").as_posix() for p in (tmp_path / "again").rglob("*") if p.is_file())
    assert files == again
    assert [f for f in files if (first / f).read_bytes() != (tmp_path / "again" / f).read_bytes()] == []
