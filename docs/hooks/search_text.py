"""MkDocs hook: the search index holds a tutorial's text, not its furniture.

mkdocs-jupyter draws an `In [1]:` prompt beside every code cell and a copy
button whose hidden label is "Copied!", and the search plugin indexed both,
so each tutorial's search preview began `In [1]: Copied! import jax`. The
search plugin leaves out any element marked `data-search-exclude` (and
removes the mark from the page it writes); this hook marks those three.
"""

from __future__ import annotations

import re


_FURNITURE = re.compile(r'<div class="(zeroclipboard-container|jp-InputPrompt|jp-OutputPrompt)\b')


def exclude_furniture(html: str) -> str:
    """`html` with the notebook prompts and copy buttons kept out of the search index."""
    return _FURNITURE.sub(
        lambda m: f'<div data-search-exclude="furniture" class="{m.group(1)}', html
    )


def on_page_content(content: str, page, config, files) -> str:
    return exclude_furniture(content)
