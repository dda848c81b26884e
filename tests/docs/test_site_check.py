"""The site check (`docs/check_site.py`, run by `make docs`) and the maths hook.

These feed small hand-written pages to the functions the build uses; the full
site is built and checked once, by `make docs` (CI), never inside pytest.
"""

import importlib.util
from pathlib import Path


DOCS = Path(__file__).resolve().parents[2] / "docs"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_site = _load(DOCS / "check_site.py")
offline_math = _load(DOCS / "hooks" / "offline_math.py")
table_breaks = _load(DOCS / "hooks" / "table_breaks.py")
search_text = _load(DOCS / "hooks" / "search_text.py")


def problems(body: str) -> list[str]:
    return check_site.check_page(f"<html><body>{body}</body></html>", "page", has_mathjax=True)


def test_typeset_maths_code_and_scripts_pass():
    assert problems('<p>A <span class="arithmatex">\\(x^2\\)</span> and</p>') == []
    assert problems('<div class="arithmatex">\\[\\sum_i x_i\\]</div>') == []
    assert problems("<pre><code>cost = $a$ + \\(b\\)</code></pre>") == []
    assert problems("<script>var s = '$a$';</script><style>a{content:'$x$'}</style>") == []
    assert problems("<p>It costs $5 or more.</p>") == []


def test_raw_maths_is_reported():
    for raw in ("$x_t = a$", "$$y = 1$$", "\\(z\\)", "\\[w\\]"):
        found = problems(f"<p>so {raw} holds</p>")
        assert len(found) == 1 and "maths not typeset" in found[0], (raw, found)


def test_stray_dollars_beside_typeset_maths_are_reported():
    # What arithmatex makes of a `$$...$$` that is not a paragraph of its own
    # (a docstring's equation between two lines of text, one in a list item).
    maths = '<span class="arithmatex">\\(y_t = a\\)</span>'
    block = '<div class="arithmatex">\\[y_t = a\\]</div>'
    found = problems(f"<p>solves\n${maths}$\nwith one scan</p>")
    assert len(found) == 2 and all("stray `$`" in f for f in found), found
    assert len(problems(f"<li><p>through:</p>\n$ {block}\n<p>plus</p></li>")) == 1
    assert len(problems(f"<p>plus {maths} $ the penalty</p>")) == 1
    # a dollar away from the maths, or inside code beside it, is not one
    assert problems(f"<p>It costs $5, and {maths} holds.</p>") == []
    assert problems(f"<p><code>$</code>{maths}<code>$</code></p>") == []
    assert problems(f"<p>solves</p>\n{block}\n<p>with one scan</p>") == []


def test_tutorial_warnings_and_stderr_are_reported():
    stderr = '<div class="jp-OutputArea-output" data-mime-type="application/vnd.jupyter.stderr"><pre>{}</pre></div>'
    plain = '<div class="jp-OutputArea-output" data-mime-type="text/plain"><pre>{}</pre></div>'
    assert problems(plain.format("loss 0.12")) == []
    assert problems(stderr.format("train: resuming from step 400 of 1000")) == []
    assert len(problems(stderr.format("TqdmWarning: IProgress not found."))) == 1
    assert len(problems(stderr.format("something else"))) == 1
    assert len(problems(plain.format("UserWarning: x"))) == 1
    assert len(problems(plain.format("Traceback (most recent call last):"))) == 1
    assert len(problems(plain.format("ValueError: bad"))) == 1


def test_external_loads_are_reported():
    local = (
        '<script src="../assets/mathjax/MathJax.js"></script><a href="https://example.org">x</a>'
    )
    assert problems(local) == []
    for remote in (
        '<script src="https://cdn.example.org/mathjax.js"></script>',
        '<link rel="stylesheet" href="//cdn.example.org/x.css">',
        '<script type="module">await import("https://cdn.example.org/m.mjs")</script>',
        '<script src=""> </script>',
    ):
        assert problems(remote), remote


def test_maths_without_local_mathjax_is_reported():
    html = '<p><span class="arithmatex">\\(x\\)</span></p>'
    assert check_site.check_page(html, "page", has_mathjax=False)


def test_hook_wraps_notebook_maths_and_passes_the_check():
    cell = (
        '<div class="jp-Cell jp-MarkdownCell"><div class="jp-RenderedMarkdown">'
        "<p>Map $a(x)$ to $u$, with</p>\n<p>$$-\\nabla\\cdot(a\\nabla u) = 1$$</p>"
        "<p>and <code>$not maths$</code>; it costs $5.</p></div></div>"
        '<div class="jp-OutputArea-output"><pre>$ls$</pre></div>'
    )
    assert len(problems(cell)) == 3  # $a(x)$, $u$ and the display equation
    wrapped = offline_math.wrap_notebook_math(cell)
    assert problems(wrapped) == []
    assert '<span class="arithmatex">\\(a(x)\\)</span>' in wrapped
    assert '<div class="arithmatex">\\[-\\nabla\\cdot(a\\nabla u) = 1\\]</div>' in wrapped
    assert "<code>$not maths$</code>" in wrapped and "<pre>$ls$</pre>" in wrapped


def test_hook_removes_cdn_loaders():
    page = (
        '<p>x</p><!-- Load mathjax -->\n<script src=""> </script>\n'
        '<script type="text/x-mathjax-config">MathJax.Hub.Config({});</script>\n'
        "<!-- End of mathjax configuration -->"
        '<script type="module">const d = document.querySelectorAll(".jp-Mermaid > pre");'
        'await import("https://cdn.example.org/mermaid.esm.min.mjs");</script><p>y</p>'
    )

    class File:
        src_uri = "tutorials/example.py"

    class Page:
        file = File()

    cleaned = offline_math.on_page_content(page, Page(), {}, None)
    assert cleaned == "<p>x</p><p>y</p>"
    assert problems(page) and problems(cleaned) == []


def test_long_code_in_tables_may_wrap_at_its_separators():
    test_id = "ssm/test_experiments.py::test_adding_learns_at_length_256"
    page = (
        f"<p><code>{test_id}</code></p>"
        f"<table><tr><td><code>{test_id}</code></td><td><code>sciml.operators</code></td>"
        "<td><code>x &lt;= a_long_name_with_many_parts</code></td></tr></table>"
    )
    out = table_breaks.break_long_code(page)
    assert out.startswith(f"<p><code>{test_id}</code></p>")  # outside a table: as it was
    assert (
        "<td><code>ssm/<wbr>test_<wbr>experiments.<wbr>py::<wbr>test_<wbr>adding_<wbr>"
        "learns_<wbr>at_<wbr>length_<wbr>256</code></td>"
    ) in out
    assert "<td><code>sciml.operators</code></td>" in out  # short code stays whole
    assert "&lt;= a_<wbr>long_<wbr>name" in out  # entities untouched
    assert out.replace("<wbr>", "") == page
    assert problems(out) == []


def test_search_previews_leave_the_notebook_furniture_out():
    # Before: every tutorial's preview began "In [1]: Copied! import jax".
    cell = (
        '<div class="jp-InputPrompt jp-InputArea-prompt">In&nbsp;[1]:</div>'
        '<div class="zeroclipboard-container"><span class="notice" hidden>Copied!</span></div>'
        '<div class="highlight"><pre>import jax</pre></div>'
        '<div class="jp-OutputPrompt jp-OutputArea-prompt">Out[1]:</div>'
    )
    marked = search_text.exclude_furniture(cell)
    assert marked.count('data-search-exclude="furniture"') == 3
    assert marked.replace('data-search-exclude="furniture" ', "") == cell
    index = 'var __index = {"docs": [%s]};'
    clean = '{"location": "a.html", "text": "import jax; model = FNO(...)"}'
    dirty = '{"location": "b.html", "text": "In\u00a0[1]: Copied! import jax"}'
    assert check_site.check_search_text(index % clean) == []
    (found,) = check_site.check_search_text(index % f"{clean}, {dirty}")
    assert found.startswith("search entry b.html: its preview holds notebook furniture")


def test_tutorial_without_its_figures_is_reported():
    source = '<div class="clipboard-copy-txt">plt.plot(x)</div>'
    output = '<div class="jp-OutputArea-output"><img src="data:image/png;base64,AAAA"></div>'
    assert problems(source + output) == []
    assert problems(source + output.replace('AAAA">', 'AAAA"/>')) == []  # <img ... />
    found = problems(source + '<div class="jp-OutputArea-output"><pre>[]</pre></div>')
    assert len(found) == 1 and "no figure" in found[0]


def _site(tmp_path: Path, page: str, *, index: str | None = "var __index = {}") -> Path:
    """A two-page site: `index.html` holding `page`'s body, and `tutorials/a.html`."""
    (tmp_path / "tutorials").mkdir(parents=True)
    (tmp_path / "tutorials" / "a.html").write_text("<html><body>a</body></html>")
    (tmp_path / "javascripts").mkdir()
    (tmp_path / "javascripts" / "iframe-worker-shim.js").write_text("")
    if index is not None:
        (tmp_path / "search").mkdir()
        (tmp_path / "search" / "search_index.js").write_text(index)
    (tmp_path / "index.html").write_text(f"<html><body>{page}</body></html>")
    return tmp_path


_SEARCH = (
    '<script src="javascripts/iframe-worker-shim.js"></script>'
    '<div data-md-component="search"></div>'
)


def test_site_read_from_disk_passes(tmp_path):
    page = (
        '<a class="md-nav__link" href="tutorials/a.html#top">A</a>'
        '<a href="https://example.org/">x</a><a href="#here">y</a>' + _SEARCH
    )
    assert check_site.check_site(_site(tmp_path, page)) == []


def test_links_to_folders_and_missing_files_are_reported(tmp_path):
    page = (
        '<a class="md-nav__link" href="tutorials/">A</a>'
        '<a class="md-nav__link" href="tutorials">B</a>'
        '<a href="api/online.md">C</a>'
        '<a class="md-nav__link" href="javascripts/iframe-worker-shim.js">D</a>'
    )
    found = check_site.check_site(_site(tmp_path, page))
    assert len(found) == 4, found
    assert "folder" in found[0] and "folder" in found[1]
    assert "not in the site" in found[2] and "not an HTML page" in found[3]


def test_search_that_needs_a_server_is_reported(tmp_path):
    found = check_site.check_site(_site(tmp_path, _SEARCH, index=None))
    assert len(found) == 1 and "search_index.js" in found[0], found
    no_shim = '<div data-md-component="search"></div>'
    found = check_site.check_site(_site(tmp_path / "b", no_shim))
    assert len(found) == 1 and "iframe-worker" in found[0], found
    found = check_site.check_site(_site(tmp_path / "c", _SEARCH, index="{}"))
    assert len(found) == 1 and "inlined search index" in found[0], found


def test_equinox_modules_get_their_signature_on_the_api_pages():
    # An equinox.Module's `__init__` is generated from its fields, which static
    # analysis does not see; the griffe extension writes it in (defaults as
    # Python sees them, annotations from the fields), once per class.
    import griffe

    extension = _load(DOCS / "hooks" / "griffe_signatures.py").GeneratedInit()
    pkg = griffe.load(
        "sciml.pararnn",
        extensions=griffe.Extensions(extension),
        search_paths=[str(DOCS.parent)],
    )
    newton = {p.name: p for p in pkg["Newton"].parameters}
    assert newton["max_steps"].default == "20" and str(newton["max_steps"].annotation) == "int"
    assert newton["rtol"].default == "None" and newton["linear"].default == "AutoScan()"
    assert [p.name for p in pkg["Fallback"].parameters] == ["self", "primary", "backup"]
    assert [p.name for p in pkg["AbstractSolver"].parameters] == []  # never built: none
    # a class with its own __init__ in the source keeps it
    assert "key" in [p.name for p in pkg["ParaGRU"].parameters]
