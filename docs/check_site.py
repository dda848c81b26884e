"""Check a built site as a reader would meet it; `make docs` runs it after `mkdocs build`.

Fails (exit status 1, one line per finding) on

- maths left as raw text: `$...$`, `$$...$$`, `\\(...\\)` or `\\[...\\]` outside the
  `arithmatex` elements that MathJax typesets (and outside code, scripts, styles);
- warnings or errors in the executed tutorials' output: any stderr output (but
  `fit`'s one-line "resuming from step N of M"), and any output text naming a
  `...Warning`, a `Traceback` or a `...Error:`;
- anything a page would fetch from another host (scripts, module imports,
  stylesheets, fonts, frames, images): the site must read offline;
- a page that has maths but no local MathJax to typeset it;
- a tutorial whose code plots (`plt.`) but whose output holds no image (the
  build ran with `MPLBACKEND` set, so the kernel's inline backend was off).

Usage: `python docs/check_site.py [SITE_DIR]` (default `site`).
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path


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


class _Page(HTMLParser):
    """Collects raw-maths findings and the text of every notebook output area."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, text never maths, output area)
        self.raw_math: list[str] = []
        self.outputs: list[tuple[bool, list[str]]] = []  # (is stderr, text pieces)
        self.has_math = False
        self.plots = False  # a code cell's source calls matplotlib
        self.images = 0  # images in output areas

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if "arithmatex" in classes:
            self.has_math = True
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
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if getattr(self, "_source", False) and "plt." in data:
            self.plots = True
        if any(output for _, _, output in self.stack) and self.outputs:
            self.outputs[-1][1].append(data)
        if not any(skip for _, skip, _ in self.stack):
            self.raw_math.extend(m.group(0) for m in _RAW_MATH.finditer(data))


def _short(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def check_page(html: str, name: str, *, has_mathjax: bool) -> list[str]:
    """The problems of one HTML page, one line each."""
    problems = []
    page = _Page()
    page.feed(html)
    page.close()
    for raw in page.raw_math:
        problems.append(f"{name}: maths not typeset (outside an arithmatex element): {_short(raw)}")
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


def check_site(site: Path) -> list[str]:
    """The problems of every HTML page under `site`."""
    if not (site / "index.html").is_file():
        return [f"{site}: no index.html; build the site first (mkdocs build)"]
    has_mathjax = (site / "assets" / "mathjax" / "MathJax.js").is_file()
    problems = []
    for path in sorted(site.rglob("*.html")):
        if "assets" in path.relative_to(site).parts:
            continue
        html = path.read_text(encoding="utf-8")
        problems += check_page(html, str(path.relative_to(site)), has_mathjax=has_mathjax)
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
    print(f"site check: {pages} pages OK (maths typeset, clean tutorial output, offline)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
