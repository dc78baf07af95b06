"""The product-title generator, the catalogue files and their validation."""

from __future__ import annotations

import csv
import json
import re
import statistics
import subprocess
import sys
from collections import Counter

import pytest
from conftest import REPO

from catalog_generator import catalog, taxonomy, titles
from helpers.data import catalog_files
from helpers.data.catalog_files import CatalogError


def test_same_seed_same_rows_and_different_seed_different_rows():
    a = list(titles.generate_rows(500, seed=3))
    assert a == list(titles.generate_rows(500, seed=3))
    assert a != list(titles.generate_rows(500, seed=4))


def test_streams_start_anywhere_deterministically():
    # shards are generated independently from (seed, start): regenerating one shard gives the same rows
    assert list(titles.generate_rows(50, seed=1, start=1000)) == list(titles.generate_rows(50, seed=1, start=1000))


@pytest.fixture(scope="module")
def rows():
    return list(titles.generate_rows(20000, seed=0))


@pytest.mark.slow
def test_titles_look_like_a_marketplace_feed(rows):
    titles = [r.title for r in rows]
    hangul = sum(bool(re.search("[가-힣]", t)) for t in titles) / len(titles)
    latin_only = sum(not re.search("[가-힣]", t) for t in titles) / len(titles)
    promo = sum("[무료배송]" in t for t in titles)
    assert 0.6 < hangul < 0.9 and 0.1 < latin_only < 0.4  # Korean, English and mixed titles
    assert promo > 100  # promo tags
    words = [len(t.split()) for t in titles]
    assert statistics.median(words) <= 6 and max(words) >= 12  # mostly short, with a long tail


def test_long_tail_across_verticals(rows):
    share = Counter(r.category.split(" > ")[0] for r in rows)
    assert share["fashion"] > 3 * share["beauty"] > 0 and share["beauty"] > share["life"] > 0
    leaves = Counter(r.category for r in rows)
    assert len(leaves) == len(titles.categories()) >= 40
    assert max(leaves.values()) > 20 * min(leaves.values())


def test_a_small_share_of_rows_is_ambiguous_or_mislabeled(rows):
    # a title naming another leaf's noun (and no noun of its own) is a mislabeled row
    nouns = {leaf.path: set(leaf.ko + leaf.en + leaf.confusable) for leaf in taxonomy.LEAVES}
    names_own = sum(any(n in r.title for n in nouns[r.category]) for r in rows) / len(rows)
    assert 0.85 < names_own < 0.99


def test_a_quarter_of_titles_name_a_second_product_as_a_modifier():
    """What lab 01's data section says: about 25% of titles carry another leaf's noun before (or, in English
    "A for B", after) their own head noun; the head decides the category."""
    gen = titles.TitleGenerator(7)
    made = [gen.row(i) for i in range(8000)]
    assert abs(gen.compounds / len(made) - titles.COMPOUND_RATE) < 0.02
    fors = [r.title for r in made if " for " in r.title]
    heads = {leaf.path: leaf.en for leaf in taxonomy.LEAVES}
    # in "A for B" the noun before "for" is the row's own (the few mislabeled rows aside)
    own = sum(
        any(t.split(" for ")[0].endswith(n) for n in heads[r.category]) for r in made for t in [r.title] if t in fors
    )
    assert fors and own / len(fors) > 0.9
    assert sum("용 " in r.title for r in made) > 100  # Korean's "B용 A": for B


@pytest.mark.slow
def test_build_writes_a_stratified_split_and_a_tokenizer(small_catalog):
    train, val, labels = catalog_files.load_split(small_catalog)
    assert labels == titles.categories()
    per_class_train, per_class_val = Counter(r.category for r in train), Counter(r.category for r in val)
    for c, n_val in per_class_val.items():
        total = n_val + per_class_train[c]
        assert n_val >= 1 and abs(n_val - 0.1 * total) <= 1
    assert set(per_class_val) == set(per_class_train)
    assert not {r.id for r in train} & {r.id for r in val}
    manifest = json.loads((small_catalog / "manifest.json").read_text())
    assert manifest["train_rows"] == len(train) and manifest["validation_rows"] == len(val)


def test_tokenizer_keeps_hangul_syllables_and_lowercases_latin(small_catalog):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(small_catalog / "train" / "tokenizer.json"))
    enc = tok.encode("[무료배송] 블랙 원피스 DRESS")
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]"
    assert "원피스" in enc.tokens or "원" in "".join(enc.tokens)
    assert not any("\u1100" <= ch <= "\u11ff" for t in enc.tokens for ch in t)  # no decomposed jamo
    assert "dress" in enc.tokens


@pytest.mark.slow
def test_the_tokenizer_is_the_same_from_one_process_to_the_next():
    """The library's trainer alone gives a different vocabulary per process (hash-map order, tokenizers#1794), so
    a test's catalogue, and what a model learns from it, changed from run to run. Two fresh processes, one answer;
    and every word-inner piece listed up front is an ordinary token, not a special one."""
    script = (
        "from catalog_generator import catalog, titles\n"
        "rows = [r.title for r in titles.generate_rows(4000, 7, 0)]\n"
        "print(catalog.train_tokenizer(rows, 1500).to_str())\n"
    )
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True).stdout
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    saved = json.loads(runs[0])
    assert [t["content"] for t in saved["added_tokens"]] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert any(t.startswith("##") and len(t) > 3 for t in saved["model"]["vocab"])  # it merged pieces too


@pytest.mark.slow
def test_shards_are_stratified_within_each_shard(tmp_path):
    out = catalog.shards(tmp_path / "big", rows=6000, n_shards=3, seed=1, vocab_size=1000, tokenizer_rows=2000)
    parts = sorted((out / "train").glob("part-*.csv"))
    assert len(parts) == 3 and len(sorted((out / "validation").glob("part-*.csv"))) == 3
    manifest = catalog_files.load_manifest(out)
    train, val, _ = catalog_files.load_split(out)
    assert len(train) + len(val) == 6000 == manifest["train_rows"] + manifest["validation_rows"]
    assert 0.08 < len(val) / 6000 < 0.11


def _write_csv(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_malformed_row_names_file_and_line_and_writes_nothing(tmp_path):
    src = _write_csv(
        tmp_path / "mine.csv",
        ["id", "title", "category"],
        [["1", "블랙 원피스", "dress"], ["2", "no category here"], ["3", "x", "y"]],
    )
    out = tmp_path / "out"
    with pytest.raises(CatalogError, match=r"mine\.csv, line 3: expected 3 fields, found 2"):
        catalog.from_csv(src, out)
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_missing_column_is_named(tmp_path):
    src = _write_csv(tmp_path / "mine.csv", ["id", "name", "category"], [["1", "x", "dress"]])
    with pytest.raises(CatalogError, match=r"mine\.csv, line 1: missing column\(s\) title"):
        catalog.from_csv(src, tmp_path / "out")


def test_class_too_small_for_a_stratified_split_is_named(tmp_path):
    rows = [[str(i), f"블랙 원피스 {i}", "dress"] for i in range(30)] + [["99", "rare thing", "rare"]] * 3
    src = _write_csv(tmp_path / "mine.csv", ["id", "title", "category"], rows)
    out = tmp_path / "out"
    with pytest.raises(CatalogError, match=r"'rare' \(3 rows\)"):
        catalog.from_csv(src, out)
    assert not out.exists()


@pytest.mark.slow
def test_a_failed_rebuild_keeps_the_previous_catalogue(tmp_path, monkeypatch):
    out = catalog.build(tmp_path / "cat", rows=12000, seed=2, vocab_size=800)
    before = (out / "train" / "part-00000.csv").read_bytes()

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(catalog, "train_tokenizer", boom)
    with pytest.raises(RuntimeError):
        catalog.build(out, rows=12000, seed=3, vocab_size=800)
    assert (out / "train" / "part-00000.csv").read_bytes() == before


@pytest.mark.slow
def test_from_csv_round_trip(tmp_path, small_catalog):
    train, _, _ = catalog_files.load_split(small_catalog)
    src = tmp_path / "mine.csv"
    catalog_files.write_rows(src, train)
    out = catalog.from_csv(src, tmp_path / "mine")
    t2, v2, labels = catalog_files.load_split(out)
    assert len(t2) + len(v2) == len(train) and labels == sorted({r.category for r in train})


@pytest.mark.slow
def test_the_shipped_catalogue_is_what_the_build_command_makes(tmp_path):
    """The README's command regenerates data/catalog byte for byte, tokenizer included."""
    from helpers.job_spec import DATA_DIR

    shipped = DATA_DIR / "catalog"
    rebuilt = catalog.build(tmp_path / "catalog", rows=30000, seed=0, vocab_size=8000)
    files = sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(rebuilt) for p in rebuilt.rglob("*") if p.is_file())
    assert [f for f in files if (shipped / f).read_bytes() != (rebuilt / f).read_bytes()] == []


def test_shipped_catalogue_is_small_and_valid():
    from helpers.job_spec import DATA_DIR

    root = DATA_DIR / "catalog"
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert size < 5_000_000
    train, val, labels = catalog_files.load_split(root)
    assert len(train) > 20000 and len(val) > 2000 and len(labels) == len(titles.categories())
