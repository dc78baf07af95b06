"""Generated blocks in a hand-written file: the text between two markers is rewritten from code, the rest is kept.
The facilitator's guide marks its blocks ``<!-- generated:NAME -->`` ... ``<!-- /generated:NAME -->``; the event
template ``# generated:NAME`` ... ``# /generated:NAME``."""

from __future__ import annotations

import re
from collections.abc import Callable

HTML = ("<!-- generated:{name} -->", "<!-- /generated:{name} -->")
YAML = ("# generated:{name}", "# /generated:{name}")


def rewrite(text: str, blocks: dict[str, Callable[[], str]], markers: tuple[str, str], what: str) -> str:
    """``text`` with each block of ``blocks`` rewritten between its ``markers``; a missing block names itself."""
    opening, closing = markers
    for name, make in blocks.items():
        start, end = re.escape(opening.format(name=name)), re.escape(closing.format(name=name))
        pattern = re.compile(rf"(^[ \t]*{start}(?![\w-])[^\n]*\n)(.*?)(^[ \t]*{end}(?![\w-]))", re.S | re.M)
        if not pattern.search(text):
            raise ValueError(f"{what} has no block {opening.format(name=name)} ... {closing.format(name=name)}")
        body = make()
        text = pattern.sub(_between(body if body.endswith("\n") else body + "\n"), text)
    return text


def _between(body: str) -> Callable[[re.Match[str]], str]:
    """A block's replacement: its two markers, ``body`` between them."""
    return lambda m: m.group(1) + body + m.group(3)
