"""Regenerates the shipped PTD perturbations: `python -m sciml.ssm.make_ptd`.

```
python -m sciml.ssm.make_ptd [--sizes 2 4 8 16 32 64 128] [--out FILE]
```

Optimises `E` for each state size with `optimize_perturbation`'s defaults
(deterministic: fixed seed, CPU, float64), writes them to `FILE` (default: the
package's `ptd_perturbations.npz`, keys `N2`, `N4`, …) and prints one line per
size: condition number of `Ṽ`, `‖E‖₂/‖A‖₂`, the largest real part of the
spectrum, the worst-case transfer-function distance to HiPPO-LegS and the time
taken. N = 128 takes several minutes on a laptop CPU.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from ._hippo import hippo_legs
from ._ptd import DATA_FILE, PTD_DEFAULTS, optimize_perturbation
from ._transfer import transfer_distance


DEFAULT_SIZES = (2, 4, 8, 16, 32, 64, 128)


def summarize(N: int, E: np.ndarray) -> dict[str, float]:
    """Condition number, relative size, stability and transfer distance of a perturbation."""
    A, B = hippo_legs(N)
    w, V = np.linalg.eig(A + E)
    V = V / np.linalg.norm(V, axis=0)
    return {
        "N": N,
        "kappa": float(np.linalg.cond(V)),
        "relative_size": float(np.linalg.norm(E, 2) / np.linalg.norm(A, 2)),
        "max_real": float(np.max(w.real)),
        "n_real_eigenvalues": int(np.sum(np.abs(w.imag) < 1e-9 * np.linalg.norm(A, 2))),
        "transfer_distance": transfer_distance(w, V, np.linalg.solve(V, B)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sciml.ssm.make_ptd", description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--out", type=Path, default=DATA_FILE)
    args = parser.parse_args(argv)
    arrays = {}
    for N in args.sizes:
        start = time.perf_counter()
        E = optimize_perturbation(N)
        record = summarize(N, E)
        record["seconds"] = round(time.perf_counter() - start, 1)
        print(json.dumps(record), flush=True)
        arrays[f"N{N}"] = E
    settings = np.array(json.dumps(PTD_DEFAULTS))
    np.savez_compressed(args.out, settings=settings, **arrays)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
