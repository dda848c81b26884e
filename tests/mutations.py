"""The mutation audit: one-line breaks of the package and the tests that must catch them.

Each `Break` names a file, one line of it as it is and as broken, the tests
that must fail under the break, and the margin they caught it by when it was
last run (the value a broken line gives against the test's tolerance). The
script applies each break in a temporary copy of the checkout and runs its
tests there (one process, no workers):

    .venv/bin/python tests/mutations.py --list          # the breaks, one a line
    .venv/bin/python tests/mutations.py                 # every break: a Markdown table
    .venv/bin/python tests/mutations.py pararnn-window  # the breaks whose name holds a word

A break whose tests all pass is "MISSED" and the script exits 1; a break whose
original line is no longer in its file is "STALE" (update the list with the
code). Not collected by pytest (not a `test_*.py` file) and not run in CI:
each break runs its tests afresh, minutes in all.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Break:
    name: str
    file: str
    original: str  # one line or consecutive lines (compared without indentation), found once
    mutated: str  # what replaces them (each line takes the indentation of the original's first)
    tests: tuple[str, ...]  # pytest arguments: node ids or files (and `-k` / `-m` filters)
    margin: str  # what the tests measured under the break, against their tolerance


BREAKS = [
    # item 1: a windowed solve that reads its result from the last window only
    Break(
        "pararnn-window-last-only",
        "sciml/pararnn/_solve.py",
        "return hs, _worst(results), {k: _WORST[k](v) for k, v in stats.items()}",
        "return hs, results[-1], {k: v[-1] for k, v in stats.items()}",
        ("tests/pararnn/test_newton.py::test_the_worst_window_names_the_result",),
        "first window failed: result `successful`, expected `recurrence_max_steps_reached` "
        "(states 0.038 off, tolerance of the test's reading 0.03)",
    ),
    # item 2: the message MAC compared on part of its bytes, or not in constant time
    Break(
        "transport-mac-first-16-bytes",
        "sciml/transport/_wire.py",
        "if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES]), mac):",
        "if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES])[:16], mac[:16]):",
        ("tests/online/test_wire.py::test_the_whole_mac_is_compared_in_constant_time",),
        "decode accepts a flip of MAC byte 16 (did not raise; expected `auth`)",
    ),
    Break(
        "transport-mac-first-byte",
        "sciml/transport/_wire.py",
        "if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES]), mac):",
        "if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES])[:1], mac[:1]):",
        ("tests/online/test_wire.py::test_the_whole_mac_is_compared_in_constant_time",),
        "decode accepts a flip of MAC byte 1 (did not raise; expected `auth`)",
    ),
    Break(
        "transport-mac-not-constant-time",
        "sciml/transport/_wire.py",
        "if not hmac.compare_digest(_mac(secret, data[: len(data) - MAC_BYTES]), mac):",
        "if _mac(secret, data[: len(data) - MAC_BYTES]) != bytes(mac):",
        ("tests/online/test_wire.py::test_the_whole_mac_is_compared_in_constant_time",),
        "`hmac.compare_digest` never called (expected one call with the 32-byte digest)",
    ),
    # item 3: a lease row whose timeout ignores the time left
    Break(
        "gpu-lease-timeout-ignores-time-left",
        "benchmarks/gpu/_suite.py",
        "timeout = min(budget, left)",
        "timeout = budget",
        (
            "tests/benchmarks/test_gpu_suite.py"
            "::test_a_row_longer_than_the_time_left_is_stopped_inside_the_limit",
        ),
        "the row's timeout 30 s (test allows <= 2 s); the lease ran 31 s against a 17-s limit",
    ),
    # item 4: the S4-PTD optimiser keeping the iterate of least condition number
    Break(
        "ssm-ptd-best-by-kappa-alone",
        "sciml/ssm/_ptd.py",
        'value = aux["kappa"] + gamma * aux["size"] + transfer_weight * aux["transfer"]',
        'value = aux["kappa"]',
        ("tests/ssm/test_ptd.py::test_sizes_not_shipped_are_computed_and_cached",),
        "N = 6 transfer distance 0.0827 against the bound 0.07 (measured 0.0629)",
    ),
    # item 5: solver jobs that stop setting the BLAS thread variables
    Break(
        "online-jobs-blas-threads-unset",
        "sciml/online/_launch.py",
        "out[var] = str(threads)",
        "pass",
        (
            "tests/online/test_worker.py::test_local_jobs_get_their_thread_count_and_the_secret",
            "tests/online/test_slurm.py"
            "::test_submit_passes_options_and_keeps_the_secret_off_the_command_line",
        ),
        "local: OMP/OPENBLAS/MKL_NUM_THREADS '16' (the trainer's), expected '1' and '3'; "
        "Slurm: '16', expected '2'; exact check",
    ),
    Break(
        "online-jobs-blas-threads-not-overriding",
        "sciml/online/_launch.py",
        "out[var] = str(threads)",
        "out.setdefault(var, str(threads))",
        (
            "tests/online/test_worker.py::test_local_jobs_get_their_thread_count_and_the_secret",
            "tests/online/test_slurm.py"
            "::test_submit_passes_options_and_keeps_the_secret_off_the_command_line",
        ),
        "the trainer's '16' kept, expected the launcher's count; exact check",
    ),
    Break(
        "online-jobs-xla-threads",
        "sciml/online/_launch.py",
        'out["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={threads}"',
        'out["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"',
        (
            "tests/online/test_worker.py::test_local_jobs_get_their_thread_count_and_the_secret",
            "tests/online/test_slurm.py"
            "::test_submit_passes_options_and_keeps_the_secret_off_the_command_line",
        ),
        "`intra_op_parallelism_threads=N` missing from XLA_FLAGS; exact check",
    ),
    # item 6: documented defaults and dtype / rounding arguments, area by area
    Break(
        "data-batches-shuffle-default",
        "sciml/data/_batches.py",
        "shuffle: bool = True,",
        "shuffle: bool = False,",
        ("tests/data/test_data.py",),
        "epoch order 0..9 against the written permutation of seed (7, epoch); exact",
    ),
    Break(
        "data-batches-drop-last-default",
        "sciml/data/_batches.py",
        "drop_last: bool = False,",
        "drop_last: bool = True,",
        ("tests/data/test_data.py",),
        "2 batches an epoch instead of 3; exact",
    ),
    Break(
        "data-normalizer-eps-default",
        "sciml/data/_normalizer.py",
        "cls, x: Any, *, channel_axis: int = 1, eps: float = 1e-8, dtype: Any = None",
        "cls, x: Any, *, channel_axis: int = 1, eps: float = 1e-3, dtype: Any = None",
        ("tests/data/test_data.py",),
        "std of the 1e-3 channel doubled against rtol 1e-12",
    ),
    Break(
        "data-normalizer-statistics-in-float32",
        "sciml/data/_normalizer.py",
        "mean = x.mean(axis=others, dtype=np.float64)",
        "mean = x.mean(axis=others, dtype=np.float32)",
        ("tests/data/test_data.py",),
        "float32 round-off in the means (~1e-7 relative) against rtol 1e-12",
    ),
    Break(
        "data-normalizer-dtype-default",
        "sciml/data/_normalizer.py",
        "dtype = x.dtype if dtype is None else dtype",
        "dtype = np.float32 if dtype is None else dtype",
        ("tests/data/test_data.py",),
        "float32 statistics (~1e-7 relative) against rtol 1e-12",
    ),
    Break(
        "training-adam-eps-default",
        "sciml/training/_settings.py",
        "eps: float = 1e-8",
        "eps: float = 1e-6",
        ("tests/experiments/test_defaults.py", "tests/training/test_optim.py"),
        "Adam on 1e-7 gradients: 1.9e-3 off after 3 steps (of 2.1e-3) against rtol 1e-6",
    ),
    Break(
        "training-adam-b2-default",
        "sciml/training/_settings.py",
        "b2: float = 0.999",
        "b2: float = 0.99",
        ("tests/experiments/test_defaults.py", "tests/training/test_optim.py"),
        "Adam on gradients of ~10 against optax.adam: off by more than rtol 1e-6",
    ),
    Break(
        "training-sgd-momentum-default",
        "sciml/training/_settings.py",
        "momentum: float = 0.9",
        "momentum: float = 0.0",
        ("tests/experiments/test_defaults.py", "tests/training/test_optim.py"),
        "SGD 1.4e-3 off after 3 steps (of 3e-3) against rtol 1e-6",
    ),
    Break(
        "training-step-decay-factor-default",
        "sciml/training/_settings.py",
        "decay_factor: float = 0.1",
        "decay_factor: float = 0.5",
        ("tests/experiments/test_defaults.py", "tests/training/test_optim.py"),
        "rate 5e-4 after the boundary, expected 1e-4 (rtol 1e-6)",
    ),
    Break(
        "training-keep-checkpoints-default",
        "sciml/training/_settings.py",
        "keep_checkpoints: int = 3",
        "keep_checkpoints: int = 2",
        ("tests/experiments/test_defaults.py", "tests/training/test_fit.py"),
        "checkpoints [16, 20] kept, expected [12, 16, 20]; exact",
    ),
    Break(
        "training-log-every-default",
        "sciml/training/_settings.py",
        "log_every: int = 10",
        "log_every: int = 5",
        ("tests/experiments/test_defaults.py", "tests/training/test_fit.py"),
        "records at [4, 5, 8, 10, 12, 15, ...], expected [4, 8, 10, 12, 16, 20]; exact",
    ),
    Break(
        "operators-lp-order-default",
        "sciml/operators/_losses.py",
        "p: Real = 2.0,",
        "p: Real = 1.0,",
        ("tests/operators/test_losses.py",),
        "the float32 loss against its float64 reference written with p = 2: off past the tolerance",
    ),
    Break(
        "operators-lp-reduction-default",
        "sciml/operators/_losses.py",
        'p: Real = 2.0,\nchannels: int | None = None,\nreduction: str = "sum",',
        'p: Real = 2.0,\nchannels: int | None = None,\nreduction: str = "mean",',
        ("tests/operators/test_losses.py",),
        "the mean of 4 samples against their written sum (4x)",
    ),
    Break(
        "operators-fno-skip-default",
        "sciml/operators/_fno.py",
        'fno_skip: str = "linear",',
        'fno_skip: str = "identity",',
        ("tests/operators/test_fno.py",),
        "697,185 parameters against neuraloperator's 701,281; exact",
    ),
    Break(
        "operators-channel-mlp-skip-default",
        "sciml/operators/_fno.py",
        'channel_mlp_skip: str = "soft-gating",',
        'channel_mlp_skip: str = "identity",',
        ("tests/operators/test_fno.py",),
        "701,153 parameters against neuraloperator's 701,281; exact",
    ),
    Break(
        "ssm-s4d-dt-max-default",
        "sciml/ssm/_s4d.py",
        "dt_max: float = 1e-1,",
        "dt_max: float = 1e-2,",
        ("tests/ssm/test_layers.py", "tests/ssm/test_init.py"),
        "largest of 64 steps 8.3e-3, expected above 5e-2",
    ),
    Break(
        "ssm-s4d-discretization-default",
        "sciml/ssm/_s4d.py",
        'discretization: str = "zoh",',
        'discretization: str = "bilinear",',
        ("tests/ssm/test_layers.py",),
        "bilinear output 0.20 off the ZOH loop (measured 4e-16) against atol 1e-12",
    ),
    Break(
        "ssm-s5-dt-min-default",
        "sciml/ssm/_s5.py",
        "dt_min: float = 1e-3,",
        "dt_min: float = 1e-4,",
        ("tests/ssm/test_layers.py", "tests/ssm/test_init.py"),
        "smallest of 64 steps 1.1e-4, expected >= 1e-3",
    ),
    Break(
        "ssm-s4d-b-clip-default",
        "sciml/ssm/_init.py",
        "N: int, b_scale: float = 1.0, b_clip: float | None = 2.0",
        "N: int, b_scale: float = 1.0, b_clip: float | None = None",
        ("tests/ssm/test_init.py",),
        "unclipped B against the written clip at 2; exact",
    ),
    Break(
        "pararnn-newton-max-steps-default",
        "sciml/pararnn/_newton.py",
        "max_steps: int = eqx.field(static=True, default=20)",
        "max_steps: int = eqx.field(static=True, default=5)",
        ("tests/pararnn/test_newton.py", "tests/pararnn/test_solvers.py"),
        "5 Newton steps stop before the dense cell converges: the solve raises",
    ),
    Break(
        "pararnn-float32-tolerance",
        "sciml/pararnn/_solvers.py",
        "_TOLERANCES = {8: 1e-12, 4: 1e-5, 2: 1e-2}",
        "_TOLERANCES = {8: 1e-12, 4: 1e-4, 2: 1e-2}",
        ("tests/pararnn/test_newton.py", "tests/pararnn/test_solvers.py"),
        "float32 Newton against the scan: error past the test's bound for GRU, LSTM, a dense cell",
    ),
    Break(
        "pararnn-float64-tolerance",
        "sciml/pararnn/_solvers.py",
        "_TOLERANCES = {8: 1e-12, 4: 1e-5, 2: 1e-2}",
        "_TOLERANCES = {8: 1e-10, 4: 1e-5, 2: 1e-2}",
        ("tests/pararnn/test_newton.py", "tests/pararnn/test_solvers.py"),
        "residual 2.06e-12 against the bound 1e-12",
    ),
    Break(
        "insr-siren-omega0-default",
        "sciml/insr/_siren.py",
        "omega0: float = 30.0,",
        "omega0: float = 10.0,",
        ("tests/insr/test_fields.py",),
        "largest hidden weight 0.031 against the bound sqrt(6/64)/30 = 0.0102",
    ),
    Break(
        "dcdm-rtol-default",
        "sciml/dcdm/_solver.py",
        "rtol: Any = eqx.field(static=True, default=1e-6, converter=_as_float)",
        "rtol: Any = eqx.field(static=True, default=1e-4, converter=_as_float)",
        ("tests/dcdm/test_solver.py", "tests/dcdm/test_lineax.py"),
        "DCDM() != DCDM(rtol=1e-6, atol=0.0); exact",
    ),
    Break(
        "dcdm-max-steps-default",
        "sciml/dcdm/_solver.py",
        "max_steps: int = eqx.field(static=True, default=100)",
        "max_steps: int = eqx.field(static=True, default=1000)",
        ("tests/dcdm/test_solver.py", "tests/dcdm/test_lineax.py"),
        "DCDM() != DCDM(max_steps=100); exact",
    ),
    Break(
        "dcdm-n-orthogonal-default",
        "sciml/dcdm/_solver.py",
        "n_orthogonal: int = eqx.field(static=True, default=2)",
        "n_orthogonal: int = eqx.field(static=True, default=1)",
        ("tests/dcdm/test_solver.py", "tests/dcdm/test_lineax.py"),
        "DCDM() != DCDM(n_orthogonal=2); exact",
    ),
    Break(
        "online-firo-reads-default",
        "sciml/online/_buffers.py",
        "reads: int = 1",
        "reads: int = 2",
        ("tests/online/test_buffers.py",),
        "reads 2, expected 1; the read sample stays (size 1, expected 0)",
    ),
    Break(
        "online-firo-watermark-default",
        "sciml/online/_buffers.py",
        "watermark: int = 0",
        "watermark: int = 1",
        ("tests/online/test_buffers.py",),
        "watermark 1, expected 0; exact",
    ),
    Break(
        "online-reservoir-replacement-default",
        "sciml/online/_reservoir.py",
        'replacement: str = "seen"',
        'replacement: str = "uniform"',
        ("tests/online/test_buffers.py",),
        "an unread sample replaced (the 'seen' rule never does)",
    ),
    Break(
        "transport-status-chars",
        "sciml/transport/_wire.py",
        "MAX_STATUS_CHARS = 2000",
        "MAX_STATUS_CHARS = 20000",
        ("tests/online/test_wire.py",),
        "a 20,000-character status overflows the 16,384-byte header",
    ),
    Break(
        "transport-header-cap",
        "sciml/transport/_wire.py",
        "MAX_HEADER_BYTES = 16384",
        "MAX_HEADER_BYTES = 65536",
        ("tests/online/test_wire.py",),
        "a header of 16,385+ bytes accepted by encode (did not raise)",
    ),
    Break(
        "checks-finite-object-arrays",
        "sciml/_checks.py",
        'if getattr(dtype, "kind", "O") not in "biu":  # `[1.0, None]`: dtype object',
        'if getattr(dtype, "kind", "O") not in "biuOU":',
        ("tests/checks/test_checks.py",),
        "[1.0, None] passes (did not raise TypeError)",
    ),
    Break(
        "solvers-darcy-alpha-default",
        "solvers/darcy.py",
        "alpha: float = 2.0",
        "alpha: float = 2.5",
        ("tests/solvers/test_darcy.py",),
        "17 of 289 nodes flipped against the written FNO field; exact",
    ),
    Break(
        "solvers-heat-dt-default",
        "solvers/heat.py",
        "diffusivity: float = 1.0\ndt: float = 1e-3",
        "diffusivity: float = 1.0\ndt: float = 2e-3",
        ("tests/solvers/test_heat.py",),
        "record times 0.005, 0.01 no longer whole steps of dt: ValueError",
    ),
    Break(
        "gpu-lease-limit",
        "benchmarks/gpu/_lease.py",
        "LEASE_LIMIT_S = 540.0",
        "LEASE_LIMIT_S = 600.0",
        ("tests/benchmarks/test_gpu_suite.py", "-m", "not slow"),
        "600 against the documented 540; exact",
    ),
    Break(
        "gpu-h100-factor",
        "benchmarks/gpu/_rows.py",
        "H100_FACTOR = 1.3",
        "H100_FACTOR = 1.0",
        ("tests/benchmarks/test_gpu_suite.py", "-m", "not slow"),
        "h200(100) = 100 against 130; exact",
    ),
    Break(
        "gpu-stop-grace",
        "benchmarks/gpu/_suite.py",
        "STOP_GRACE_S = 10.0  # between SIGTERM and SIGKILL",
        "STOP_GRACE_S = 1.0",
        ("tests/benchmarks/test_gpu_suite.py", "-m", "not slow"),
        "(1, 6) against (10, 15); exact",
    ),
    Break(
        "transport-step-range",
        "sciml/transport/_wire.py",
        "if not 0 <= step < schema.n_steps:",
        "if not 0 <= step <= schema.n_steps:",
        ("tests/online/test_wire.py",),
        "step n_steps accepted (did not raise `step`)",
    ),
    Break(
        "transport-resent-step-accepted",
        "sciml/transport/_receiver.py",
        "if key in self._accepted_set:",
        "if False:",
        ("tests/online/test_transport.py::test_restarted_run_and_restored_ids_are_duplicates",),
        "0 duplicates counted, expected 7",
    ),
    Break(
        "transport-replayed-open-accepted",
        "sciml/transport/_receiver.py",
        "if key in self._announced:",
        "if False:",
        (
            "tests/online/test_transport.py"
            "::test_replayed_opens_and_closes_are_duplicates_that_reach_no_callback",
        ),
        "the replayed open reaches the callback: the wait for 'no callback' times out",
    ),
    Break(
        "recurrence-auto-scan-on-gpu",
        "sciml/recurrence/_linear.py",
        '"gpu": AssociativeScan(),',
        '"gpu": SequentialScan(),',
        ("tests/recurrence",),
        "SequentialScan on 'gpu', expected AssociativeScan; exact",
    ),
    Break(
        "insr-adam-learning-rate-default",
        "sciml/insr/_adam.py",
        "learning_rate: float = eqx.field(static=True, default=1e-4)",
        "learning_rate: float = eqx.field(static=True, default=1e-3)",
        ("tests/insr/test_stopping.py",),
        "1e-3 against the paper's 1e-4; exact",
    ),
    Break(
        "insr-collocation-points-default",
        "sciml/insr/_collocation.py",
        "n_points: int = eqx.field(static=True, default=2000)",
        "n_points: int = eqx.field(static=True, default=1000)",
        ("tests/insr/test_stopping.py",),
        "1000 against 2000; exact",
    ),
    Break(
        "online-study-max-attempts-default",
        "sciml/online/_study.py",
        "max_attempts: int = 3",
        "max_attempts: int = 2",
        ("tests/online/test_study.py",),
        "2 against 3; exact",
    ),
    # the sparse Newton of the clamped-stretch reference with half its Hessian
    Break(
        "fem-newton-half-hessian",
        "solvers/hyperelastic_fem.py",
        "self.hessian = jax.jit(lambda u: hessian(u[dofs], grads))",
        "self.hessian = jax.jit(lambda u: 0.5 * hessian(u[dofs], grads))",
        (
            "tests/solvers/test_hyperelastic_fem.py"
            "::test_newton_converges_quadratically_on_the_clamped_stretch",
        ),
        "not converged in 50 iterations (orders of the last steps 1.00, needs ≥ 1.7)",
    ),
    # a lifted field that ignores the load ramp: the clamp is met at full load only
    Break(
        "insr-lift-ignores-load",
        "sciml/insr/_lifting.py",
        "return load * self.lift(x) + self.factor(x) * self.network(x)",
        "return self.lift(x) + self.factor(x) * self.network(x)",
        (
            "tests/insr/test_constraints.py::test_lifted_field_meets_the_clamped_stretch_to_round_off",
        ),
        "the right face at u_x = 2 at load 0.25, expected 0.5 to 1e-15",
    ),
    # a researcher's fourth day: float32 models under x64, TensorBoard's purge, batch_fn's call
    Break(
        "ssm-c-drawn-in-float64",
        "sciml/ssm/_diagonal.py",
        "re, im = jax.random.normal(key, (2, *shape), dtype) * math.sqrt(0.5)  # keeps `dtype`",
        "re, im = jax.random.normal(key, (2, *shape), dtype) * np.sqrt(0.5)",
        ("tests/checks/test_float32_under_x64.py::test_a_float32_s4d_stays_float32",),
        "C float64 in a float32 S4D under x64",
    ),
    Break(
        "events-resume-purges-nothing",
        "sciml/training/_events.py",
        "self.purge_step = step + 1",
        "return",
        ("tests/training/test_events.py",),
        "TensorBoard shows steps 40 and 50 twice (old and new values)",
    ),
    Break(
        "fit-batch-fn-call-unchecked",
        "sciml/training/_fit.py",
        "_check_batch_fn(batch_fn)",
        "pass",
        ("tests/training/test_bad_input.py::test_batch_fn_of_one_argument_is_told_its_call",),
        "Python's 'takes 1 positional argument but 2 were given' instead of the call shown",
    ),
]


def apply(root: Path, brk: Break) -> bool:
    """Applies `brk` under `root`; False if its original lines are not found exactly once."""
    path = root / brk.file
    lines = path.read_text().splitlines(keepends=True)
    want = [line.strip() for line in brk.original.strip().splitlines()]
    found = [
        i
        for i in range(len(lines) - len(want) + 1)
        if [line.strip() for line in lines[i : i + len(want)]] == want
    ]
    if len(found) != 1:
        return False
    (i,) = found
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    new = [indent + line.strip() + "\n" for line in brk.mutated.strip().splitlines()]
    lines[i : i + len(want)] = new
    path.write_text("".join(lines))
    return True


def checkout_copy(target: Path) -> None:
    """The tracked and untracked-but-not-ignored files of the checkout, copied to `target`."""
    names = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, names):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            (target / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / os.fsdecode(name))


def run(brk: Break, scratch: Path) -> tuple[str, str]:
    """`(verdict, failing tests)` of one break, in a fresh copy under `scratch`."""
    root = scratch / brk.name
    checkout_copy(root)
    if not apply(root, brk):
        return "STALE", ""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *brk.tests],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    shutil.rmtree(root, ignore_errors=True)
    out = proc.stdout.splitlines()
    failed = [line.split()[1] for line in out if line.startswith("FAILED ")]
    if proc.returncode == 1 and failed:
        first = next((line[1:].strip() for line in out if line.startswith("E ")), "")
        names = ", ".join(name.split("::")[-1] for name in failed)
        return "caught", f"{names} ({first[:160]})"
    if proc.returncode == 0:
        return "MISSED", ""
    return f"error (pytest exit {proc.returncode})", proc.stdout[-300:].replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("words", nargs="*", help="run only the breaks whose name holds a word")
    parser.add_argument("--list", action="store_true", help="list the breaks and exit")
    args = parser.parse_args(argv)
    chosen = [b for b in BREAKS if not args.words or any(w in b.name for w in args.words)]
    if not chosen:
        parser.error(f"no break's name holds any of {args.words}")
    if args.list:
        for brk in chosen:
            print(f"{brk.name}: {brk.file}: {brk.original!r} -> {brk.mutated!r}")
        return 0
    print("| break | file | verdict | failing tests | margin |")
    print("| --- | --- | --- | --- | --- |")
    missed = False
    with tempfile.TemporaryDirectory(prefix="sciml-mutations-") as scratch:
        for brk in chosen:
            verdict, failing = run(brk, Path(scratch))
            missed |= verdict != "caught"
            failing = failing.replace("|", "\\|")
            print(f"| {brk.name} | {brk.file} | {verdict} | {failing} | {brk.margin} |", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
