"""MkDocs hook: typeset maths offline, on API pages and executed tutorials alike.

- Copies MathJax (shipped by the `jupyter-server-mathjax` package of the `docs`
  extra) into `site/assets/mathjax/`, where `mkdocs.yml`'s `extra_javascript`
  loads it with `javascripts/mathjax-config.js`. No page loads a script from
  another host, so the site builds and reads without a network.
- Tutorials are notebooks rendered by mkdocs-jupyter (nbconvert), which leaves
  markdown maths as raw `$...$` / `$$...$$` text and adds its own MathJax
  loader pointing at a CDN (or at nothing). This hook removes that loader and
  wraps the maths of markdown cells in the `arithmatex` spans and divs that
  pymdownx.arithmatex writes on the other pages (and drops the template's
  mermaid loader, which would import from a CDN), so one MathJax configuration
  serves every page and `docs/check_site.py` can check them all the same way.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path


_NBCONVERT_MATHJAX = re.compile(
    r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL
)
# mkdocs-jupyter's template also adds a module script that imports mermaid from
# a CDN when a page has mermaid diagrams; the tutorials have none, and a site
# that reads offline loads nothing from another host.
_MERMAID_LOADER = re.compile(
    r"<script type=\"module\">(?:(?!</script>).)*?jp-Mermaid(?:(?!</script>).)*</script>", re.DOTALL
)
_TAG = re.compile(r"(<[^>]*>)")
_SKIP = ("pre", "code", "script", "style", "textarea", "svg")
_VOID = (
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
)
_MATH = re.compile(
    r"(?<![\\$])\$\$(?P<d1>.+?)\$\$"  # $$ display $$
    r"|\\\[(?P<d2>.+?)\\\]"  # \[ display \]
    r"|(?<![\\$])\$(?P<i1>[^\s$](?:[^$]*?[^\s\\$])?)\$(?!\$)"  # $inline$ (no space inside the $)
    r"|\\\((?P<i2>.+?)\\\)",  # \( inline \)
    re.DOTALL,
)


def mathjax_source() -> Path:
    """The MathJax directory inside the installed `jupyter-server-mathjax`.

    Found without importing the package (its `__init__` imports Jupyter Server).
    """
    spec = importlib.util.find_spec("jupyter_server_mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the docs build needs `jupyter-server-mathjax` (it ships MathJax, which the "
            "site serves itself); install the docs extra: pip install -e '.[docs]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def _wrap_math(text: str) -> str:
    def repl(m: re.Match) -> str:
        if m.group("d1") is not None or m.group("d2") is not None:
            tex = m.group("d1") if m.group("d1") is not None else m.group("d2")
            return f'<div class="arithmatex">\\[{tex}\\]</div>'
        tex = m.group("i1") if m.group("i1") is not None else m.group("i2")
        return f'<span class="arithmatex">\\({tex}\\)</span>'

    return _MATH.sub(repl, text)


def wrap_notebook_math(content: str) -> str:
    """Wrap the maths in the markdown cells of nbconvert HTML in arithmatex spans.

    Only text inside elements of class `jp-RenderedMarkdown` is touched, never
    text inside `pre`, `code`, `script`, `style` or an existing `arithmatex`
    element.
    """
    out = []
    stack: list[tuple[str, bool, bool]] = []  # (tag, is markdown cell, text is never maths)
    for part in _TAG.split(content):
        if not part.startswith("<"):
            in_markdown = any(md for _, md, _ in stack)
            skipped = any(skip for _, _, skip in stack)
            out.append(_wrap_math(part) if in_markdown and not skipped else part)
            continue
        out.append(part)
        name = re.match(r"<(/?)\s*([a-zA-Z][a-zA-Z0-9]*)", part)
        if name is None or part.endswith("/>"):  # comments, doctypes, self-closing tags
            continue
        closing, tag = name.group(1) == "/", name.group(2).lower()
        if tag in _VOID:
            continue
        if closing:
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] == tag:
                    del stack[i:]
                    break
        else:
            stack.append((tag, "jp-RenderedMarkdown" in part, tag in _SKIP or "arithmatex" in part))
    return "".join(out)


def _is_notebook(page) -> bool:
    return page.file.src_uri.startswith("tutorials/") and page.file.src_uri.endswith(".py")


def on_page_content(content: str, page, config, files) -> str:
    if not _is_notebook(page):
        return content
    content = _NBCONVERT_MATHJAX.sub("", content)
    content = _MERMAID_LOADER.sub("", content)
    return wrap_notebook_math(content)


def on_post_build(config) -> None:
    # MathJax 2 as jupyter-server-mathjax ships it (about 11 MB): the combined
    # configuration `TeX-AMS-MML_HTMLorMML-full` holds the TeX input and the
    # HTML-CSS output, which loads the STIX-Web fonts from fonts/.
    target = Path(config["site_dir"]) / "assets" / "mathjax"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(mathjax_source(), target)
