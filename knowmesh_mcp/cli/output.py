"""Printing shared by the commands: a table of columns, and a progress bar on a terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> str:
    """Columns as wide as their widest cell (ids and answer ids have no fixed length), two spaces
    apart; the last column is not padded. `right`: the columns aligned right (numbers)."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    return "\n".join(table_line(cells, widths, right) for cells in [header, *rows])


def table_line(cells: Sequence[str], widths: Sequence[int], right: Sequence[int]) -> str:
    """One row of `table`: each cell padded to its column's width but the last."""
    fitted = [
        cell.rjust(width) if index in right else cell.ljust(width)
        for index, (cell, width) in enumerate(zip(cells, widths))
    ]
    return "  ".join(fitted[:-1] + [cells[-1]])


class ProgressBar:
    """A one-line progress bar, redrawn in place: `bar(done, total, what=None)`.

    A total of None shows a counter; `what` names a later phase's unit (e.g. "nodes indexed" after
    "rows"), which starts a line of its own. `drawn` says whether the line needs ending."""

    WIDTH = 30

    def __init__(self, stream: TextIO, unit: str) -> None:
        self.stream = stream
        self.unit = unit
        self.drawn = False

    def __call__(self, done: int, total: int | None, what: str | None = None) -> None:
        if what is not None and what != self.unit:
            self.stream.write("\n")
            self.unit = what
        if total is None:
            self.stream.write(f"\r{done} {self.unit}")
        else:
            filled = self.WIDTH * done // total if total else self.WIDTH
            self.stream.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total} {self.unit}")
        self.stream.flush()
        self.drawn = True


def progress_bar(stream: TextIO, *, unit: str = "nodes") -> ProgressBar | None:
    """A progress bar on a terminal; None (silent) when the stream is a pipe or file."""
    return ProgressBar(stream, unit) if stream.isatty() else None
