"""MkDocs hook: execute the tutorials side by side instead of one after another.

mkdocs-jupyter executes a tutorial when its page is rendered, and MkDocs
renders pages in sequence, so the ten tutorials ran one at a time, each mostly
on one core. As soon as the files are known (`on_files`), this hook starts the
plugin's own conversion, `mkdocs_jupyter.convert.nb2html`, with the arguments
the plugin passes it, for every tutorial, in a pool of processes
(`SCIML_DOCS_JOBS`, default: the number of cores). When the plugin then asks
for a page's HTML, it gets what that process made. The same function with the
same arguments makes the same page, and a cell that raises (`allow_errors:
false`) still fails the build, with the cell's traceback.

A call whose arguments differ from those started here (another plugin version)
runs as before, in sequence. Each tutorial logs one line as it finishes
(`executed tutorials/dcdm.py (3 of 10, 2 min 05 s into the build)`), so a
build of several minutes is never silent.

The kernels talk to the build over local (IPC) sockets instead of TCP ports,
so no port is opened and no kernel logs "Kernel is running over TCP without
encryption" into the build's output: `on_files` writes a
`jupyter_nbconvert_config.py` into a folder of the build's own and puts it on
`JUPYTER_CONFIG_PATH` (the workers inherit it), setting
`KernelManager.transport = "ipc"` and a socket prefix per worker process (with
one shared prefix, kernels started side by side would pick the same socket
files and read each other's messages). `_stop` removes the folder.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import multiprocessing.pool
import os
import pathlib
import shutil
import tempfile
import time

import mkdocs_jupyter.convert as convert


log = logging.getLogger("mkdocs.hooks.parallel_tutorials")

# The plugin's settings that `on_pre_page` passes to `nb2html` (besides the path).
_PASSED = (
    "kernel_name",
    "theme",
    "allow_errors",
    "show_input",
    "no_input",
    "no_prompt",
    "remove_tag_config",
    "highlight_extra_classes",
    "include_requirejs",
    "custom_mathjax_url",
)
# Started first, so that the longest do not start last: seconds each took to
# execute alone on the 2-core CI machine (operators_darcy 107, dcdm 56, ssm 47,
# pararnn 37, insr 35; the other five 11 to 15). Others follow in page order.
_LONGEST_FIRST = ("operators_darcy.py", "dcdm.py", "ssm.py", "pararnn.py", "insr.py")
_sequential_nb2html = convert.nb2html
_pool: multiprocessing.pool.Pool | None = None
_started: dict[tuple[str, str], multiprocessing.pool.AsyncResult] = {}
_sockets: str | None = None  # the folder of the kernels' IPC sockets and their config
_IPC_CONFIG = """import os
c.KernelManager.transport = "ipc"
c.KernelManager.ip = os.path.join({folder!r}, f"kernel-{{os.getpid()}}")
"""


def _kernels_on_ipc() -> str:
    """A folder holding the config that puts this build's kernels on IPC
    sockets (a prefix per process), first on `JUPYTER_CONFIG_PATH`."""
    folder = tempfile.mkdtemp(prefix="sciml-docs-kernels-")
    config = _IPC_CONFIG.format(folder=folder)
    pathlib.Path(folder, "jupyter_nbconvert_config.py").write_text(config)
    paths = [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join([folder, *paths])
    return folder


def _key(path: str, kwargs: dict) -> tuple[str, str]:
    return path, repr(sorted(kwargs.items()))


def _nb2html(nb_path, **kwargs):
    started = _started.pop(_key(str(nb_path), kwargs), None)
    if started is None:
        log.info(f"executing {nb_path} in sequence (not started in parallel with these arguments)")
        return _sequential_nb2html(nb_path, **kwargs)
    return started.get()  # a cell's error is raised here, as in sequence


def on_files(files, config):
    global _pool, _sockets
    plugin = config.plugins.get("mkdocs-jupyter")
    if plugin is None or not plugin.config["execute"]:
        return files
    settings = {name: plugin.config[name] for name in _PASSED}
    tutorials = [
        f.abs_src_path
        for f in files
        if plugin.should_include(f)
        and not any(
            pathlib.PurePath(f.abs_src_path).match(p) for p in plugin.config["execute_ignore"]
        )
    ]
    if not tutorials:
        return files
    first = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    tutorials.sort(key=lambda path: first.get(pathlib.Path(path).name, len(first)))
    jobs = int(os.environ.get("SCIML_DOCS_JOBS", os.cpu_count() or 1))
    _stop()
    _sockets = _kernels_on_ipc()
    # Fresh interpreters, each importing `mkdocs_jupyter.convert` first: that
    # module adjusts nbconvert's heading ids, as it does in this process.
    _pool = multiprocessing.get_context("spawn").Pool(
        max(1, jobs), initializer=importlib.import_module, initargs=("mkdocs_jupyter.convert",)
    )
    done = _Progress(len(tutorials), pathlib.Path(config["docs_dir"]))
    for path in tutorials:
        kwargs = {"execute": True, **settings}
        _started[_key(path, kwargs)] = _pool.apply_async(
            _sequential_nb2html, (path,), kwargs, callback=done.line(path)
        )
    convert.nb2html = _nb2html
    log.info(f"executing {len(tutorials)} tutorials, {jobs} at a time")
    return files


class _Progress:
    """One log line per tutorial as it finishes (the pool's result thread calls it)."""

    def __init__(self, total: int, docs: pathlib.Path):
        self.total, self.docs, self.count = total, docs, 0
        self.start = time.monotonic()

    def line(self, path: str):
        def finished(_html) -> None:
            self.count += 1
            seconds = int(time.monotonic() - self.start)
            name = pathlib.Path(path).relative_to(self.docs).as_posix()
            log.info(
                f"executed {name} ({self.count} of {self.total}, "
                f"{seconds // 60} min {seconds % 60:02d} s into the build)"
            )

        return finished


def _stop(*_args, **_kwargs) -> None:
    """Ends the pool: at once after a failed build (a kernel whose worker is
    gone exits by itself), after the workers are idle otherwise."""
    global _pool, _sockets
    convert.nb2html = _sequential_nb2html
    unused = len(_started)
    _started.clear()
    if _pool is not None:
        if unused:
            _pool.terminate()
        else:
            _pool.close()
        _pool.join()
        _pool = None
    if _sockets is not None:
        shutil.rmtree(_sockets, ignore_errors=True)
        _sockets = None


on_post_build = _stop
on_build_error = _stop
