"""What ``helpers.report`` records is what a claim can be held to."""

from __future__ import annotations

import json

from helpers import report


def test_a_figure_marked_unrounded_is_recorded_at_full_precision(tmp_path, monkeypatch):
    path = tmp_path / "figures.json"
    monkeypatch.setenv(report.FIGURES_ENV, str(path))
    said = report.says("gap {gap:g}", gap=report.unrounded(4.76837158203125e-07), other=0.123456)
    kept = json.loads(path.read_text())
    assert kept["gap"] == 4.76837158203125e-07 and kept["gap"] != 0  # rounded to 4 decimals it would read 0.0
    assert kept["other"] == 0.1235  # every other float is rounded as before
    assert str(said) == "gap 4.76837e-07"
