"""Lab 01's bar and its slice: the TF-IDF baseline's predictions, the titles whose modifier names a second product
(the generator's own record, replayed), a job's saved model read back, and the two scored side by side."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import REPO

from catalog_generator import catalog, titles
from course import manifest
from helpers.data import baseline, catalog_files
from helpers.data.catalog_files import Row
from helpers.planning import instances

DATA = REPO / "data" / "catalog"


def test_the_slice_is_the_generator_s_own_record_of_titles_with_a_modifier():
    train, val, _ = catalog_files.load_split(DATA)
    marked = titles.modifier_ids(DATA, val)
    assert marked <= {r.id for r in val}
    assert 0.2 < len(marked) / len(val) < 0.3  # COMPOUND_RATE, less the titles the generator emptied of nouns
    # English "A for B" is made only with a modifier: every such validation title is in the slice
    phrased = {r.id for r in val if " for " in r.title}
    assert phrased and phrased <= marked


def test_the_slice_of_a_sharded_catalogue_replays_each_shard(tmp_path):
    out = catalog.shards(tmp_path / "big", rows=2000, n_shards=3, vocab_size=200, tokenizer_rows=500)
    _, val, _ = catalog_files.load_split(out)
    share = len(titles.modifier_ids(out, val)) / len(val)
    assert 0.15 < share < 0.35


def test_a_catalogue_the_generator_did_not_make_has_no_slice(tmp_path):
    src = tmp_path / "mine.csv"
    rows = [Row(f"r{i}", f"title {i} 원피스", cat) for i in range(20) for cat in ("a", "b")]
    catalog_files.write_rows(src, rows)
    out = catalog.from_csv(src, tmp_path / "mine", vocab_size=100)
    with pytest.raises(catalog_files.CatalogError, match="generator"):
        titles.modifier_ids(out, catalog_files.load_split(out)[1])


def test_an_edited_row_is_refused_by_name():
    _, val, _ = catalog_files.load_split(DATA)
    edited = Row(val[0].id, val[0].title + " 니트", val[0].category)
    with pytest.raises(catalog_files.CatalogError, match=val[0].id):
        titles.modifier_ids(DATA, [edited])


def test_the_baseline_keeps_a_prediction_per_validation_row():
    result = baseline.tfidf_baseline(DATA, max_train_rows=3000)
    _, val, labels = catalog_files.load_split(DATA)
    assert len(result.predictions) == len(val) and set(result.predictions) <= set(labels)
    assert sum(p == r.category for p, r in zip(result.predictions, val)) / len(val) == pytest.approx(result.accuracy)


def test_by_slice_scores_each_part_and_the_whole():
    rows = [Row("a", "t", "x"), Row("b", "t", "y"), Row("c", "t", "x"), Row("d", "t", "y")]
    table = baseline.by_slice(
        rows, {"baseline": ["x", "x", "x", "y"], "network": ["x", "y", "y", "y"]}, {"a", "b"}, "xy"
    )
    on, off, every = table
    assert (on["rows"], off["rows"], every["rows"]) == (2, 2, 4)
    assert (on["baseline accuracy"], on["network accuracy"]) == (0.5, 1.0)
    assert (off["baseline accuracy"], off["network accuracy"]) == (1.0, 0.5)
    assert every["network accuracy"] == 0.75 and on["network macro-F1"] == 1.0


def test_a_saved_model_is_read_back_as_train_py_saved_it(tmp_path):
    import torch
    from transformers import DistilBertConfig, DistilBertForSequenceClassification, PreTrainedTokenizerFast

    labels = json.loads((DATA / "train" / "labels.json").read_text(encoding="utf-8"))
    tokenizer_file = DATA / "train" / "tokenizer.json"
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file), pad_token="[PAD]", unk_token="[UNK]")
    torch.manual_seed(0)
    config = DistilBertConfig(
        vocab_size=len(tokenizer), dim=32, n_layers=1, n_heads=2, hidden_dim=64, num_labels=len(labels)
    )
    model = DistilBertForSequenceClassification(config).eval()
    model.save_pretrained(tmp_path)  # what train.py's save() writes, beside its tokenizer and labels
    shutil.copy(tokenizer_file, tmp_path)
    (tmp_path / "labels.json").write_text(json.dumps(labels, ensure_ascii=False), encoding="utf-8")
    titles = [r.title for r in catalog_files.load_split(DATA)[1][:40]]
    got = baseline.predict(tmp_path, titles, max_length=64, batch_size=16)  # batches padded to different widths
    with torch.no_grad():
        want = [
            labels[model(**tokenizer(t, return_tensors="pt", return_token_type_ids=False)).logits.argmax()]
            for t in titles
        ]
    assert got == want


def test_lab_01_s_real_target_is_the_catalogue_s_cheapest_with_a_bf16_gpu():
    notebook = manifest.registered("01").notebook
    cell = next(
        c
        for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        if "parameters" in c["metadata"].get("tags", [])
    )
    assert 'real_target = "' + instances.cheapest(1, bf16=True).name + '"' in "".join(cell["source"])
