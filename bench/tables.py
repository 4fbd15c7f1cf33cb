"""Plain-text tables and numbers of the benchmarks' console reports."""

from __future__ import annotations

from typing import Any


def _f(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 1 or value == 0 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers, *[[_f(cell) for cell in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for number, row in enumerate(cells):
        line = "  ".join(
            cell.rjust(width) if i and _numeric(cell) else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        lines.append("  " + line.rstrip())
        if number == 0:
            lines.append("  " + "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _numeric(cell: str) -> bool:
    return cell == "-" or cell.replace(",", "").replace(".", "").isdigit()


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction:.0%}"
