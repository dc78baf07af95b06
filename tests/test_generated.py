"""The one renderer of generated blocks, which the facilitator's guide and the event template share."""

from __future__ import annotations

import pytest

from course import generated


def test_a_block_is_rewritten_between_its_markers_and_nothing_else_changes():
    text = (
        "intro\n<!-- generated:a -->\nold\n<!-- /generated:a -->\n<!-- generated:ab -->\nkept\n<!-- /generated:ab -->\n"
    )
    out = generated.rewrite(text, {"a": lambda: "new"}, generated.HTML, "the guide")
    assert out == text.replace("old", "new")  # "ab" is another block, not a longer "a"
    yaml = "x:\n  # generated:roles (do not edit)\n  old: 1\n  # /generated:roles\ny: 2\n"
    assert generated.rewrite(yaml, {"roles": lambda: "  new: 2\n"}, generated.YAML, "t") == yaml.replace(
        "old: 1", "new: 2"
    )


def test_a_missing_block_is_named():
    with pytest.raises(ValueError, match="the guide has no block <!-- generated:b --> ... <!-- /generated:b -->"):
        generated.rewrite("no blocks here\n", {"b": lambda: "x"}, generated.HTML, "the guide")
