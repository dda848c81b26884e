"""MkDocs hook: long code in table cells may wrap at its separators.

A table cell that holds a long name in code (a test id such as
`ssm/test_experiments.py::test_adding_learns_at_length_256`, a dotted path)
cannot wrap: code wraps only at spaces (`docs/stylesheets/extra.css`), so the
column grows as wide as the name and the table overflows the page. This hook
puts a `<wbr>` (a line-break opportunity, invisible otherwise) after each `/`,
`.`, `::` and `_` of code longer than `_LONG` characters inside a table, so the
browser wraps there when it must and short names stay whole.
"""

from __future__ import annotations

import re


_LONG = 24
_TABLE = re.compile(r"<table\b.*?</table>", re.DOTALL)
_CODE = re.compile(r"<code>([^<]+)</code>")
_AFTER = re.compile(r"(::|[/._])(?=[^/._:])")


def break_long_code(html: str) -> str:
    """`html` with `<wbr>` after the separators of long code in its tables."""

    def code(m: re.Match) -> str:
        text = m.group(1)
        if len(text) <= _LONG:
            return m.group(0)
        return "<code>" + _AFTER.sub(r"\1<wbr>", text) + "</code>"

    return _TABLE.sub(lambda t: _CODE.sub(code, t.group(0)), html)


def on_page_content(content: str, page, config, files) -> str:
    return break_long_code(content)
