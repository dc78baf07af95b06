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


def test_a_headline_sentence_is_what_the_lab_runner_prints_for_the_lab(tmp_path, monkeypatch):
    from course.run_labs import LabRun, headline, write_summary

    figures = tmp_path / "figures.json"
    monkeypatch.setenv(report.FIGURES_ENV, str(figures))
    report.says("An hour costs ${usd:.2f}.", usd=1.127)  # a set-up figure: recorded, not the lab's result
    said = report.says("The network beats the baseline by {margin:+.1f} points.", margin=5.91, headline=True)
    kept = json.loads(figures.read_text())
    assert kept[report.RESULT] == said.text == "The network beats the baseline by +5.9 points."
    run = LabRun("01_single_gpu", "ok", 1.0, "", kept)
    assert headline(run) == said.text
    assert headline(LabRun("03_smddp", "ok", 1.0, "", {"usd": 1.127})) == "usd=1.127"  # none: its first figures
    write_summary([run], tmp_path, {})
    row = (tmp_path / "summary.md").read_text().splitlines()[2]
    assert f"| {said.text} | usd=1.127, margin=5.91 |" in row
