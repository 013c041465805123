"""Tables and paragraphs written as plain text, with ``rich`` (when installed and stdout is a terminal), or as Markdown."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import IO, Any


class Table:
    def __init__(self, title: str, headers: Sequence[str], right: Sequence[bool] | None = None) -> None:
        self.title = title
        self.headers = list(headers)
        self.right = list(right) if right is not None else [False] * len(headers)
        self.rows: list[list[str]] = []

    def add(self, *cells: Any) -> None:
        self.rows.append([str(c) for c in cells])


def _plain(table: Table) -> list[str]:
    widths = [len(h) for h in table.headers]
    for row in table.rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, table.right)]
        return "  " + "  ".join(parts).rstrip()

    out = [table.title, line(table.headers), "  " + "  ".join("-" * w for w in widths)]
    out.extend(line(row) for row in table.rows)
    return out


def _markdown_table(table: Table) -> list[str]:
    def escape(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    out = [f"### {table.title}", "", "| " + " | ".join(escape(h) for h in table.headers) + " |"]
    out.append("|" + "|".join("---:" if r else "---" for r in table.right) + "|")
    out.extend("| " + " | ".join(escape(c) for c in row) + " |" for row in table.rows)
    out.append("")
    return out


class Writer:
    """Paragraphs and tables to plain text, rich, or Markdown."""

    def __init__(self, out: IO[str], style: str) -> None:
        self.out = out
        self.style = style  # "plain", "rich" or "markdown"
        self._console: Any = None
        if style == "rich":
            from rich.console import Console  # optional extra: ragtrace[cli]

            self._console = Console(file=out, width=max(100, shutil.get_terminal_size((120, 40)).columns))

    def heading(self, text: str) -> None:
        if self.style == "markdown":
            self.out.write(f"## {text}\n\n")
        elif self._console is not None:
            from rich.text import Text

            self._console.rule(Text(text))
        else:
            self.out.write(f"{text}\n{'=' * len(text)}\n")

    def line(self, text: str = "") -> None:
        if self._console is not None:
            self._console.print(text, markup=False, highlight=False)
        else:
            self.out.write(text + "\n")

    def bullets(self, items: Sequence[str]) -> None:
        for item in items:
            self.line(f"- {item}")
        self.line()

    def table(self, table: Table) -> None:
        if self.style == "markdown":
            self.out.write("\n".join(_markdown_table(table)) + "\n")
        elif self._console is not None:
            from rich.table import Table as RichTable
            from rich.text import Text

            # Text(), not str: trace text like "[1] why?" must never be read as rich markup
            rich_table = RichTable(title=Text(table.title), title_justify="left")
            for header, right in zip(table.headers, table.right):
                rich_table.add_column(Text(header), justify="right" if right else "left")
            for row in table.rows:
                rich_table.add_row(*(Text(cell) for cell in row))
            self._console.print(rich_table, markup=False, highlight=False)
        else:
            self.out.write("\n".join(_plain(table)) + "\n\n")


def choose_style(out: IO[str], markdown: bool, plain: bool) -> str:
    if markdown:
        return "markdown"
    if plain:
        return "plain"
    try:
        interactive = out.isatty()
    except (AttributeError, ValueError):
        interactive = False
    if interactive:
        try:
            import rich  # noqa: F401

            return "rich"
        except ImportError:
            pass
    return "plain"
