"""Check a built site as a reader would meet it; `make docs` runs it after `mkdocs build`.

Fails (exit status 1, one line per finding) on

- maths left as raw text: `$...$`, `$$...$$`, `\\(...\\)` or `\\[...\\]` outside the
  `arithmatex` elements that MathJax typesets (and outside code, scripts, styles);
- a stray `$` right before or after an `arithmatex` element: what arithmatex
  leaves of a `$$...$$` it did not take for a display block (one not in a
  paragraph of its own), which reads as `$` signs around the typeset maths;
- warnings or errors in the executed tutorials' output: any stderr output (but
  `fit`'s one-line "resuming from step N of M"), and any output text naming a
  `...Warning`, a `Traceback` or a `...Error:`;
- anything a page would fetch from another host (scripts, module imports,
  stylesheets, fonts, frames, images): the site must read offline;
- a page that has maths but no local MathJax to typeset it;
- a tutorial whose code plots (`plt.`) but whose output holds no image (the
  build ran with `MPLBACKEND` set, so the kernel's inline backend was off);
- a site that cannot be read from disk (`site/index.html` opened in a browser):
  a link (navigation or text) to a folder, which a browser shows as a directory
  listing, or to a file that is not there; a navigation link that is not an
  HTML file; a search box without its offline index (`search/search_index.js`,
  written by mkdocs-material's `offline` plugin) or without the local Web
  Worker shim that runs the search from `file://`;
- search previews that hold a notebook's furniture (`In [1]:` prompts, the
  copy button's "Copied!") instead of the page's text.

Usage: `python docs/check_site.py [SITE_DIR]` (default `site`).
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


_SKIP_TAGS = {"script", "style", "pre", "code", "textarea", "svg", "kbd", "samp"}
_VOID = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
    "source", "track", "wbr",
}  # fmt: skip
_RAW_MATH = re.compile(
    r"\$\$.+?\$\$|\\\(.+?\\\)|\\\[.+?\\\]|(?<![\w$])\$[^\s$](?:[^$]*?[^\s$\\])?\$(?![\w$])",
    re.DOTALL,
)
# stderr lines that are information by design, not trouble: `fit` announces a
# resumed run on stderr (the getting-started tutorial shows resuming).
_STDERR_ALLOWED = re.compile(r"^\w+: resuming from step \d+ of \d+$")
_OUTPUT_TROUBLE = re.compile(r"\b\w*Warning\b|\bTraceback\b|\b\w+Error:")
_EXTERNAL = [
    re.compile(r"<(?:script|link|img|iframe|source|embed|object)\b[^>]*?\b(?:src|href|data)\s*=\s*[\"']?(?:https?:)?//", re.I),
    re.compile(r"\bimport\s*\(\s*[\"'](?:https?:)?//", re.I),
    re.compile(r"\bimport\s+[^;\"']*?from\s*[\"'](?:https?:)?//", re.I),
    re.compile(r"@import\s+(?:url\()?\s*[\"']?(?:https?:)?//", re.I),
    re.compile(r"url\(\s*[\"']?(?:https?:)?//", re.I),
    re.compile(r"[\"'](?:https?:)?//[^\"'\s]+\.(?:m?js|css|woff2?|ttf|otf)(?:\?[^\"'\s]*)?[\"']", re.I),
]  # fmt: skip
_EMPTY_SCRIPT = re.compile(r"<script\b[^>]*\bsrc\s*=\s*[\"']\s*[\"']", re.I)
# What makes the search box work from disk: the index inlined into a script
# (the offline plugin), and the Web Worker shim, loaded from the site itself.
SEARCH_INDEX_SCRIPT = Path("search") / "search_index.js"
_WORKER_SHIM = "iframe-worker"


class _Page(HTMLParser):
    """Collects raw-maths findings and the text of every notebook output area."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, text never maths, output area)
        self.raw_math: list[str] = []
        self.stray_dollars: list[str] = []  # text beside maths that starts or ends with `$`
        self._math_depths: list[int] = []  # stack depths of the open arithmatex elements
        self._text_before = ""  # the text right before the current tag, "" after a tag
        self._after_math = False  # the last tag closed an arithmatex element
        self.outputs: list[tuple[bool, list[str]]] = []  # (is stderr, text pieces)
        self.has_math = False
        self.plots = False  # a code cell's source calls matplotlib
        self.images = 0  # images in output areas
        self.links: list[tuple[str, bool]] = []  # (href of an <a>, is a navigation link)
        self.scripts: list[str] = []  # src of every <script>
        self.has_search = False  # the page has mkdocs-material's search box

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "a" and attrs.get("href") is not None:
            self.links.append((attrs["href"], "md-nav__link" in classes))
        if tag == "script" and attrs.get("src"):
            self.scripts.append(attrs["src"])
        if attrs.get("data-md-component") == "search":
            self.has_search = True
        if "arithmatex" in classes:
            self.has_math = True
            if self._text_before.rstrip().endswith("$"):
                self.stray_dollars.append(self._text_before.strip()[-40:] + "<maths>")
            self._math_depths.append(len(self.stack))
        self._text_before, self._after_math = "", False
        skip = (
            tag in _SKIP_TAGS
            or "arithmatex" in classes
            or "clipboard-copy-txt" in classes  # a code cell's source, hidden, for copying
            or any(c.startswith("MathJax") for c in classes)
        )
        output = "jp-OutputArea-output" in classes
        if tag == "img" and any(out for _, _, out in self.stack):
            self.images += 1
        self._source = "clipboard-copy-txt" in classes
        if output:
            stderr = attrs.get("data-mime-type") == "application/vnd.jupyter.stderr"
            self.outputs.append((stderr, []))
        if tag not in _VOID:
            self.stack.append((tag, skip, output))

    def handle_endtag(self, tag):
        self._text_before, self._after_math = "", False
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                while self._math_depths and self._math_depths[-1] >= i:
                    self._math_depths.pop()
                    self._after_math = True
                return

    def handle_data(self, data):
        if self._after_math and data.lstrip().startswith("$"):
            self.stray_dollars.append("<maths>" + data.strip()[:40])
        self._text_before, self._after_math = data, False
        if getattr(self, "_source", False) and "plt." in data:
            self.plots = True
        if any(output for _, _, output in self.stack) and self.outputs:
            self.outputs[-1][1].append(data)
        if not any(skip for _, skip, _ in self.stack):
            self.raw_math.extend(m.group(0) for m in _RAW_MATH.finditer(data))


def _short(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _local_target(href: str) -> str | None:
    """The path part of a link into the site itself; None for another host or this page."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    return unquote(parts.path)


def _resolve(path: str, here: Path, site: Path) -> Path:
    """A local link's file: against the site's root when absolute, else the page's folder."""
    return site / path.lstrip("/") if path.startswith("/") else here / path


def check_links(page: _Page, name: str, site: Path) -> list[str]:
    """A page read from disk: its links land on files, its search box works.

    `name` is the page's path relative to `site`.
    """
    problems = []
    here = (site / name).parent
    for href, nav in page.links:
        path = _local_target(href)
        if path is None:
            continue
        target = _resolve(path, here, site)
        if path.endswith("/") or target.is_dir():
            problems.append(
                f"{name}: link {href!r} goes to a folder (from disk a browser shows a directory "
                "listing; set use_directory_urls: false)"
            )
        elif not target.is_file():
            problems.append(f"{name}: link {href!r} goes to a file that is not in the site")
        elif nav and target.suffix != ".html":
            problems.append(f"{name}: navigation link {href!r} is not an HTML page")
    if page.has_search:
        shims = [
            src for src in page.scripts if _WORKER_SHIM in src and _local_target(src) is not None
        ]
        if not (site / SEARCH_INDEX_SCRIPT).is_file():
            problems.append(
                f"{name}: has a search box but the site has no {SEARCH_INDEX_SCRIPT.as_posix()} "
                "(enable mkdocs-material's offline plugin), so search needs a web server"
            )
        if not shims or not all(_resolve(_local_target(s), here, site).is_file() for s in shims):
            problems.append(
                f"{name}: has a search box but loads no local {_WORKER_SHIM} shim "
                "(extra.polyfills), so search does not run from disk"
            )
    return problems


def check_page(html: str, name: str, *, has_mathjax: bool, site: Path | None = None) -> list[str]:
    """The problems of one HTML page, one line each.

    With `site` (the built site's folder, `name` relative to it), also the
    links and the search box as met from disk (see `check_links`).
    """
    problems = []
    page = _Page()
    page.feed(html)
    page.close()
    if site is not None:
        problems += check_links(page, name, site)
    for raw in page.raw_math:
        problems.append(f"{name}: maths not typeset (outside an arithmatex element): {_short(raw)}")
    for text in page.stray_dollars:
        problems.append(
            f"{name}: a stray `$` beside typeset maths (a `$$` block needs a paragraph of "
            f"its own: blank lines around it): {_short(text)}"
        )
    for stderr, pieces in page.outputs:
        text = "".join(pieces)
        lines = [line for line in text.splitlines() if line.strip()]
        if stderr and not all(_STDERR_ALLOWED.match(line.strip()) for line in lines):
            problems.append(f"{name}: a tutorial cell wrote to stderr: {_short(text)}")
        elif m := _OUTPUT_TROUBLE.search(text):
            problems.append(f"{name}: tutorial output shows {m.group(0)!r}: {_short(text)}")
    for pattern in _EXTERNAL:
        for m in pattern.finditer(html):
            start = max(m.start() - 40, 0)
            problems.append(
                f"{name}: loads something from another host (the site must read offline): "
                f"{_short(html[start : m.end() + 60])}"
            )
    if _EMPTY_SCRIPT.search(html):
        problems.append(f"{name}: a <script> with an empty src")
    if page.plots and page.images == 0:
        problems.append(
            f"{name}: the tutorial plots but shows no figure (build with MPLBACKEND unset)"
        )
    if page.has_math and not has_mathjax:
        problems.append(f"{name}: has maths but the site has no assets/mathjax/MathJax.js")
    return problems


_FURNITURE = re.compile(r"Copied!|\bIn(?:\s|&nbsp;|\u00a0)*\[[\s\d]*\]:")


def check_search_text(index: str) -> list[str]:
    """The search entries (of `search_index.js`'s text) whose text holds a
    notebook prompt or the copy button's label."""
    import json

    data = json.loads(index[index.index("{") : index.rindex("}") + 1])
    return [
        f"search entry {doc['location']}: its preview holds notebook furniture "
        f"({_short(_FURNITURE.search(doc['text']).group(0), 20)!r})"
        for doc in data.get("docs", [])
        if _FURNITURE.search(doc.get("text", ""))
    ]


def check_site(site: Path) -> list[str]:
    """The problems of every HTML page under `site`."""
    if not (site / "index.html").is_file():
        return [f"{site}: no index.html; build the site first (mkdocs build)"]
    has_mathjax = (site / "assets" / "mathjax" / "MathJax.js").is_file()
    problems = []
    index = site / SEARCH_INDEX_SCRIPT
    if index.is_file() and not index.read_text(encoding="utf-8").startswith("var __index"):
        problems.append(f"{index}: not the inlined search index the search box reads from disk")
    elif index.is_file():
        problems += check_search_text(index.read_text(encoding="utf-8"))
    for path in sorted(site.rglob("*.html")):
        if "assets" in path.relative_to(site).parts:
            continue
        html = path.read_text(encoding="utf-8")
        name = path.relative_to(site).as_posix()
        problems += check_page(html, name, has_mathjax=has_mathjax, site=site)
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    site = Path(argv[0] if argv else "site")
    problems = check_site(site)
    for line in problems:
        print(line)
    pages = sum(1 for p in site.rglob("*.html") if "assets" not in p.relative_to(site).parts)
    if problems:
        print(f"site check: {len(problems)} problem(s) in {site}", file=sys.stderr)
        return 1
    print(
        f"site check: {pages} pages OK (maths typeset, clean tutorial output, offline, "
        "links and search work from disk)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
