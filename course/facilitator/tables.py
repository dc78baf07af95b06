"""The facilitator guide's small formatting pieces, shared by the modules that write its generated blocks."""

from __future__ import annotations


def markdown(rows: list[dict]) -> str:
    """Rows of dicts as a Markdown table, the first row's keys as its columns."""
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows]
    return "\n".join(lines)


def money(usd: float) -> str:
    return f"${usd:,.2f}"
