"""No main-report line over MAX_LINE characters: a reviewer reads the markdown source as well as its
rendering, and a 1,300-character table row is read by neither. Prose is folded at spaces (a markdown paragraph
or list item continues on the next line); a table row still too long moves its longest cells, one by one, into
numbered notes under its table. The appendix is folded alike (7 of its prose lines ran 404-1,071 characters).
Lines inside a ``` fence are left whole."""

from __future__ import annotations

import textwrap

MAX_LINE = 400
_CELL_REF = "note {}"


def fold(md: str, limit: int = MAX_LINE) -> str:
    out: list[str] = []
    table: list[str] = []
    fenced = False  # inside a ``` block: a line of code or data is left as it is
    for line in md.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or line.lstrip().startswith("```"):
            out += [*(fit_table(table, limit) if table else []), line]
            table = []
            continue
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            out += fit_table(table, limit)
            table = []
        out += fold_prose(line, limit)
    return "\n".join(out + (fit_table(table, limit) if table else []))


def fold_prose(line: str, limit: int = MAX_LINE) -> list[str]:
    """A long line as several: headings and code are left whole (they are short by construction)."""
    if len(line) <= limit or line.lstrip().startswith(("#", "```", "<")):
        return [line]
    body = line.lstrip()
    lead = line[:len(line) - len(body)]
    indent = lead + ("  " if body.startswith(("- ", "* ")) else "")
    return textwrap.wrap(line, width=limit, subsequent_indent=indent, break_long_words=True,
                         break_on_hyphens=False, drop_whitespace=True)


def fit_table(rows: list[str], limit: int = MAX_LINE) -> list[str]:
    """The table with every row within `limit`: a row's longest cells become "note N", their text a numbered
    note under the table."""
    notes: list[str] = []
    fitted = []
    for row in rows:
        cells, moved = row.strip().strip("|").split(" | "), False
        while len(_row(cells)) > limit and max(len(c) for c in cells) > len(_CELL_REF.format(len(notes) + 1)):
            i = max(range(len(cells)), key=lambda k: len(cells[k]))
            notes.append(cells[i].strip())
            cells[i], moved = _CELL_REF.format(len(notes)), True
        fitted.append(_row(cells) if moved else row)
    if not notes:
        return rows
    listed = [ln for i, text in enumerate(notes, 1) for ln in fold_prose(f"- note {i}: {text}", limit)]
    return [*fitted, "", *listed]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.strip() for c in cells) + " |"
