"""Prepares the wheels the GPU machine lacks, and prints the command to run there.

usage: python -m benchmarks.gpu.carry [--dest .gpu-carry] [--max-mib 60]

The GPU machine has Python 3.12 with jax (CUDA), equinox, optax, flax,
optimistix, lineax, diffrax, orbax, h5py, matplotlib, scipy, tqdm, jaxtyping
and PyTorch, and no network. This downloads, for CPython 3.12 on manylinux
x86-64 (`pip download --only-binary=:all: --no-deps`, pure-Python wheels
too), what the suite needs beyond that: `NEEDED`, pinned (pyzmq, pyamg,
ml-collections, tensorboardX, neuraloperator 2.0.0, and requests, which
`import neuralop` needs but neuraloperator does not declare) and every
requirement they pull in (read from each wheel's metadata, markers evaluated
for that machine), except the packages in `PREINSTALLED` and `LEFT_OUT`. It checks that
every carried wheel's requirements are carried or preinstalled, that the
folder and the working tree together stay under the 64 MiB that travel, and
prints the one lease command (`lease_command`): the suite installs the folder's
wheels itself (`benchmarks.gpu._lease.install`: pure-Python wheels first, each
failure named in the affected rows' notes) and runs every row inside 540 s.

`wandb`, which neuraloperator lists, is left out (it and its own requirements
would not fit; neuraloperator imports it only when it is installed), so
neuraloperator itself is installed with `--no-deps`, after its other
requirements.
"""

from __future__ import annotations

import argparse
import email.parser
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement


ROOT = Path(__file__).resolve().parents[2]
# pinned: the versions the suite is tested with here; requests: `import neuralop`
# imports it (its dataset downloads) without declaring it
NEEDED = (
    "ml-collections==1.1.0",
    "pyzmq==27.3.0",
    "pyamg==5.4.1",
    "neuraloperator==2.0.0",
    "requests==2.34.2",
    "tensorboardX==2.6.5",
)
INSTALL_WITHOUT_DEPS = ("neuraloperator",)
PREINSTALLED = (
    "jax",
    "jaxlib",
    "equinox",
    "optax",
    "flax",
    "optimistix",
    "lineax",
    "diffrax",
    "orbax-checkpoint",
    "h5py",
    "matplotlib",
    "scipy",
    "numpy",
    "tqdm",
    "jaxtyping",
    "torch",
    "protobuf",
)
PREINSTALLED_PREFIXES = ("nvidia-", "jax-cuda")
LEFT_OUT = ("wandb",)
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
# the GPU machine, for requirement markers
MARKERS = {
    "python_version": "3.12",
    "python_full_version": "3.12.0",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "extra": "",
}
LIMIT_MIB = 64


def canonical(name: str) -> str:
    """The normalised distribution name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_preinstalled(name: str) -> bool:
    name = canonical(name)
    return name in map(canonical, PREINSTALLED) or name.startswith(PREINSTALLED_PREFIXES)


def wheel_name(path: Path) -> str:
    """The canonical distribution name of a wheel file."""
    return canonical(path.name.split("-")[0])


def requirements(wheel: Path) -> list[Requirement]:
    """The wheel's `Requires-Dist` entries that apply on the GPU machine (no extras)."""
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        message = email.parser.Parser().parsestr(archive.read(meta).decode())
    out = []
    for line in message.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(MARKERS):
            out.append(req)
    return out


def download(requirement: str, dest: Path) -> Path:
    """Downloads one wheel (no dependencies) for CPython 3.12 / manylinux x86-64."""
    before = set(dest.glob("*.whl"))
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    command += ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    subprocess.run([*command, "--dest", str(dest), requirement], check=True)
    name = canonical(Requirement(requirement).name)
    new = [w for w in set(dest.glob("*.whl")) - before if wheel_name(w) == name]
    found = new or [w for w in dest.glob("*.whl") if wheel_name(w) == name]
    if not found:
        raise RuntimeError(f"pip download {requirement!r} left no wheel in {dest}")
    return found[0]


def prepare(dest: Path) -> dict[str, Path]:
    """Downloads `NEEDED` and their requirements into `dest` (emptied first);
    returns `{distribution: wheel}`."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    wheels: dict[str, Path] = {}
    queue = list(NEEDED)
    while queue:
        requirement = queue.pop(0)
        name = canonical(Requirement(requirement).name)
        if name in wheels or is_preinstalled(name) or name in map(canonical, LEFT_OUT):
            continue
        wheels[name] = download(requirement, dest)
        queue += [str(req) for req in requirements(wheels[name])]
    return wheels


def unmet(wheels: dict[str, Path]) -> list[str]:
    """Requirements of carried wheels that are neither carried nor preinstalled
    (nor left out on purpose), or whose carried version does not satisfy them."""
    versions = {name: path.name.split("-")[1] for name, path in wheels.items()}
    missing = []
    for name, path in wheels.items():
        for req in requirements(path):
            dep = canonical(req.name)
            if is_preinstalled(dep) or dep in map(canonical, LEFT_OUT):
                continue
            if dep not in versions or not req.specifier.contains(versions[dep], prereleases=True):
                missing.append(f"{name} needs {req}")
    return missing


def size_mib(paths) -> float:
    return sum(p.stat().st_size for p in paths if p.is_file()) / 2**20


def tree_mib() -> float:
    """The working tree that travels: tracked and untracked files git does not ignore."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    return size_mib(ROOT / name for name in out.decode().split("\0") if name)


def install_command(dest: str, wheels: dict[str, Path]) -> str:
    """Installs the carried packages offline; neuraloperator without its requirements."""
    resolved = sorted(n for n in wheels if n not in INSTALL_WITHOUT_DEPS)
    alone = " ".join(f"{dest}/{wheels[n].name}" for n in INSTALL_WITHOUT_DEPS if n in wheels)
    # the variable lets pip install into a system Python marked externally managed
    # (PEP 668); an older pip ignores it
    pip = "PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --no-index"
    return f"{pip} --find-links {dest} {' '.join(resolved)} && {pip} --no-deps {alone}"


def run_commands(dest: str, wheels: dict[str, Path]) -> list[str]:
    """One command per part (the older procedure, two commands of 420 s each):
    install (a failure is logged, the suite still runs and notes the missing
    packages in its rows), then the part."""
    install = install_command(dest, wheels)
    return [
        f"mkdir -p $OUT/{part} && ({install}) > $OUT/{part}/pip.txt 2>&1; "
        f"PYTHONPATH=. python3 -m benchmarks.gpu --part {part} --out $OUT/{part}"
        for part in ("speed", "paper")
    ]


def lease_command(dest: str) -> str:
    """The one command of a lease: the suite installs the carried wheels itself
    and runs every row, those with no committed GPU result first, inside 540 s."""
    return f"PYTHONPATH=. python3 -m benchmarks.gpu --lease --carry {dest} --out $OUT"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dest", default=".gpu-carry", help="folder, relative to the checkout")
    parser.add_argument("--max-mib", type=float, default=LIMIT_MIB, help="folder + tree limit")
    args = parser.parse_args(argv)
    dest = ROOT / args.dest
    wheels = prepare(dest)
    problems = unmet(wheels)
    carried, tree = size_mib(dest.glob("*")), tree_mib()
    for path in sorted(wheels.values()):
        print(f"{path.stat().st_size / 2**20:7.2f} MiB  {path.name}")
    print(f"carried {carried:.1f} MiB + working tree {tree:.1f} MiB (limit {args.max_mib:g} MiB)")
    if problems:
        print("unmet requirements:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    if carried + tree > args.max_mib:
        print(f"too large: {carried + tree:.1f} MiB > {args.max_mib:g} MiB", file=sys.stderr)
        return 1
    print(f"\nOn the GPU machine (carry {args.dest}), from the checkout, in one command:\n")
    print(lease_command(args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
