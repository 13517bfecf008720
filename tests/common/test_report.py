"""opt.common.report: a Markdown table keeps a hostile cell's text as text."""

from __future__ import annotations

from opt.common.report import markdown_table, md_text


def test_a_cell_from_a_file_cannot_break_the_table_or_open_a_tag():
    cell = "converged | <script>alert(1)</script>\nnext line"
    out = markdown_table(["reason", "n"], [[cell, 3]])
    lines = out.splitlines()
    assert len(lines) == 3  # header, rule, one row: the line break did not split the row
    row = lines[2]
    assert "<script>" not in row and "&lt;script>" in row
    assert row.count(" | ") == 1  # the only unescaped separator is between the two cells
    assert "converged \\| " in row and "next line" in row
    assert md_text("HP0->HP32, ready_set rank") == "HP0->HP32, ready_set rank"  # plain text
