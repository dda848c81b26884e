"""What each problem's HDF5 file says about itself (`solvers.generate`, format 2).

One description per problem: for every array `make_dataset` returns, where the
channel axis goes, the names of the axes, the names and units of the channels,
and for the whole file the grid convention and the numerical scheme. All the
problems are nondimensional (unit domain, unit time), so every unit is
`"1"` (dimensionless) unless the problem defines its own.

The reader (`sciml.data`) depends only on what is written to the file, never on
this module: the attributes are the contract.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class ArrayLayout:
    """How one array of `make_dataset` is stored.

    - `axes`: the stored axes, comma separated (e.g. `"sample, channel, x, y"`).
    - `channel_axis`: where a channel axis of length 1 is inserted into the array
      `make_dataset` returns (`None`: stored as returned).
    - `fields`: names of the channels (or of the entries of a parameter axis).
    - `units`: units of the values, one per field.
    """

    axes: str
    channel_axis: int | None
    fields: tuple[str, ...]
    units: tuple[str, ...]


_PERIODIC = "periodic, x_i = i/s for i = 0..s-1 (right endpoint excluded)"
_NODES = "nodes x_i = i/(s-1) for i = 0..s-1 (both endpoints included: the boundary)"
_TIMES = ArrayLayout("time", None, ("t",), ("1",))


def _spatial(dim: int) -> str:
    return ", ".join("xyz"[:dim])


def describe(problem: str, params: dict[str, Any]) -> dict[str, Any]:
    """The file attributes and array layouts of `problem` run with `params`.

    **Returns:** `{"grid": str, "domain": str, "scheme": str, "arrays": {key: ArrayLayout}}`.
    """
    if problem == "navier_stokes":
        return {
            "grid": _PERIODIC + " on each axis",
            "domain": "unit square [0, 1)^2, periodic",
            "scheme": "pseudo-spectral, 2/3-rule dealiasing; Crank-Nicolson (viscosity) "
            "+ Heun (advection, forcing), second order in dt",
            "arrays": {
                "inputs": ArrayLayout("sample, channel, x, y", 1, ("vorticity",), ("1",)),
                "outputs": ArrayLayout("sample, time, channel, x, y", 2, ("vorticity",), ("1",)),
                "times": _TIMES,
            },
        }
    if problem == "burgers":
        return {
            "grid": _PERIODIC,
            "domain": "unit interval [0, 1), periodic",
            "scheme": "pseudo-spectral, 2/3-rule dealiasing; ETDRK4 (Kassam-Trefethen "
            "contour integrals), fourth order in dt",
            "arrays": {
                "inputs": ArrayLayout("sample, channel, x", 1, ("u",), ("1",)),
                "outputs": ArrayLayout("sample, time, channel, x", 2, ("u",), ("1",)),
                "times": _TIMES,
            },
        }
    if problem == "heat":
        scheme = (
            "implicit Euler (exact sine-transform solve)"
            if params.get("method", "implicit") == "implicit"
            else "explicit Euler"
        )
        theta = ("T0", "T_left", "T_right", "T_bottom", "T_top")
        return {
            "grid": _NODES + " on each axis",
            "domain": "unit square [0, 1]^2, Dirichlet boundary",
            "scheme": f"5-point finite differences; {scheme}",
            "arrays": {
                "inputs": ArrayLayout("sample, parameter", None, theta, ("1",) * 5),
                "outputs": ArrayLayout("sample, time, channel, x, y", 2, ("temperature",), ("1",)),
                "times": _TIMES,
            },
        }
    if problem == "darcy":
        return {
            "grid": _NODES + " on each axis",
            "domain": "unit square [0, 1]^2, u = 0 on the boundary",
            "scheme": "second-order finite differences in conservation form, harmonic-mean "
            "face coefficients; sparse direct solve (SuperLU)",
            "arrays": {
                "inputs": ArrayLayout("sample, channel, x, y", 1, ("permeability",), ("1",)),
                "outputs": ArrayLayout("sample, channel, x, y", 1, ("pressure",), ("1",)),
            },
        }
    if problem == "poisson":
        axes = "sample, channel, " + _spatial(int(params.get("dim", 2)))
        return {
            "grid": "cell-centred voxels, x_i = (i + 1/2)/s for i = 0..s-1",
            "domain": "unit cube [0, 1]^dim, labels FLUID=0, SOLID=1 (Neumann), AIR=2 "
            "(Dirichlet p = 0); outside the grid counts as SOLID",
            "scheme": "h^2-scaled 5-point (2-D) / 7-point (3-D) Laplacian; sparse direct "
            "solve, minimum-norm on closed components",
            "arrays": {
                "inputs": ArrayLayout(axes, 1, ("rhs",), ("1",)),
                "outputs": ArrayLayout(axes, 1, ("pressure",), ("1",)),
                "labels": ArrayLayout(axes, 1, ("label",), ("FLUID=0, SOLID=1, AIR=2",)),
            },
        }
    raise ValueError(f"no file layout for problem {problem!r}.")
