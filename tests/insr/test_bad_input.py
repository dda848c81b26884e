"""Bad input fails early with the argument's name; failing steps are flagged."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sciml import insr
from sciml.solution import RESULTS


def fourier_field():
    c = jnp.zeros((1, 9)).at[0, 1].set(1.0)
    return insr.FourierBasis(4, -2.0, 2.0, coefficients=c)


PROBLEM = insr.Advection1D(periodic=True)


def test_unknown_integrator_and_problem():
    with pytest.raises(ValueError, match="`integrator` must be"):
        insr.integrate(fourier_field(), "midpoint", PROBLEM, 0.0, 1.0, 0.1, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`problem` must be"):
        insr.integrate(
            fourier_field(), insr.Midpoint(), "advection", 0.0, 1.0, 0.1, key=jax.random.key(0)
        )


@pytest.mark.parametrize("dt", [0.0, -0.1, float("nan")])
def test_non_positive_dt(dt):
    with pytest.raises(ValueError, match="`dt`"):
        insr.integrate(
            fourier_field(), insr.Midpoint(), PROBLEM, 0.0, 1.0, dt, key=jax.random.key(0)
        )


def test_interval_not_whole_number_of_steps():
    with pytest.raises(ValueError, match="whole number of steps"):
        insr.integrate(
            fourier_field(), insr.Midpoint(), PROBLEM, 0.0, 1.0, 0.3, key=jax.random.key(0)
        )


def test_field_output_dimension_must_match():
    field = insr.SIREN(1, 2, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"`field0` must map a point \(1,\) to \(1,\)"):
        insr.integrate(field, insr.Midpoint(), PROBLEM, 0.0, 1.0, 0.1, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`field`"):
        insr.fit_initial(
            insr.SIREN(2, 1, key=jax.random.key(0)),
            PROBLEM,
            insr.AdamSolver(),
            key=jax.random.key(0),
        )


def _poisoned(field, value=jnp.nan):
    """`field` with one weight of its first floating-point array set to `value`."""
    leaves, treedef = jax.tree_util.tree_flatten(field)
    i = next(i for i, x in enumerate(leaves) if eqx.is_inexact_array(x))
    leaves[i] = leaves[i].at[(0,) * leaves[i].ndim].set(value)
    return jax.tree_util.tree_unflatten(treedef, leaves)


def test_non_finite_initial_weights_are_refused_before_any_step():
    # Before: optimistix's "Nonfinite values detected" from inside the first solve
    # (integrate), or a failed step result with no word about the weights (step).
    key = jax.random.key(0)
    bad = _poisoned(fourier_field())
    message = r"the weights of `{}` must be finite: `{}\.coefficients` must be finite, got 1 NaN"
    with pytest.raises(ValueError, match=message.format("field0", "field0")):
        insr.integrate(bad, insr.Midpoint(), PROBLEM, 0.0, 0.2, 0.1, key=key)
    with pytest.raises(ValueError, match=message.format("field", "field")):
        insr.fit_initial(bad, PROBLEM, insr.AdamSolver(), key=key)
    with pytest.raises(ValueError, match=message.format("field", "field")):
        insr.Midpoint().step(bad, PROBLEM, 0.0, 0.1, key=key)
    # the two integrators with a step of their own
    velocity, pressure = _flow_fields()
    with pytest.raises(ValueError, match=r"weights of `field` must be finite: .* 0 NaN and 1 inf"):
        insr.Splitting(pressure).step(
            _poisoned(velocity, jnp.inf), insr.TaylorGreen2D(), 0.0, 0.1, key=key
        )
    elastic = insr.SIREN(2, 2, width=8, hidden_layers=1, key=key)
    with pytest.raises(ValueError, match=r"weights of `field` must be finite: `field\.layers"):
        insr.IncrementalPotential().step(
            _poisoned(elastic), insr.Elasticity2D.scene("column"), 0.0, 0.05, key=key
        )


@pytest.mark.parametrize("key", [0, None, np.zeros(3, np.uint32)])
def test_integrate_and_fit_initial_need_a_prng_key(untyped, key):
    # Before: JAX's "invalid PRNG key data" / "unexpected PRNG key type".
    message = r"`key` must be a JAX PRNG key such as `jax.random.key\(0\)`"
    with pytest.raises(TypeError, match=message):
        insr.integrate(fourier_field(), insr.Midpoint(), PROBLEM, 0.0, 0.2, 0.1, key=key)
    with pytest.raises(TypeError, match=message):
        insr.fit_initial(fourier_field(), PROBLEM, insr.AdamSolver(), key=key)


def test_bad_solver_options():
    with pytest.raises(ValueError, match="`n_points`"):
        insr.LeastSquaresSolver(collocation=insr.Collocation(n_points=0))
    with pytest.raises(ValueError, match="`n_points`"):
        insr.LeastSquaresSolver(collocation=insr.Collocation(n_points=-1, n_grid=10))
    with pytest.raises(ValueError, match="`optimiser`"):
        insr.LeastSquaresSolver(optimiser="lm")
    with pytest.raises(ValueError, match="`loss_rtol`"):
        insr.LeastSquaresSolver(stopping=insr.Stopping(loss_rtol=1.0))
    with pytest.raises(ValueError, match="`factor`"):
        insr.AdamSolver(factor=2.0)


def test_each_concern_refuses_its_own_bad_combinations():
    """The points (`Collocation`), the stopping rule (`Stopping`) and the
    solver that combines them each refuse what they own, naming it."""
    with pytest.raises(ValueError, match="`quadrature` replaces the problem's grid"):
        insr.Collocation(quadrature=np.zeros((5, 1)), n_grid=16)
    with pytest.raises(ValueError, match="`grad_rtol` must be in"):
        insr.Stopping(grad_rtol=1.5)
    message = r"`collocation.rounds` \(5\) must not exceed `stopping.max_steps` \(4\)"
    with pytest.raises(ValueError, match=message):
        insr.LeastSquaresSolver(
            collocation=insr.Collocation(rounds=5), stopping=insr.Stopping(max_steps=4)
        )
    for name in ("collocation", "stopping"):
        for solver in (insr.LeastSquaresSolver, insr.AdamSolver):
            with pytest.raises(ValueError, match=rf"`{name}` must be an insr\."):
                solver(**{name: dict(n_points=10)})
    # Adam draws fresh points every iteration and stops on its learning-rate plateau
    for points in (dict(rounds=2), dict(n_heldout=10), dict(overfit_rtol=0.1)):
        with pytest.raises(ValueError, match="AdamSolver draws fresh points every iteration"):
            insr.AdamSolver(collocation=insr.Collocation(**points))
    for rule in ("loss_tol", "loss_rtol", "grad_rtol"):
        with pytest.raises(ValueError, match="AdamSolver stops on its learning-rate plateau"):
            insr.AdamSolver(stopping=insr.Stopping(**{rule: 0.5}))


def test_a_monitor_must_declare_itself():
    """An object with a `run` method is not taken for a monitor: `integrate`
    asks for an `AbstractMonitor` (as `sciml.training.ChunkedRun` is)."""

    class Lookalike:
        def run(self, state, key, advance, *, total, fingerprint=None):
            return state, 0

    with pytest.raises(ValueError, match="`monitor` must be an AbstractMonitor"):
        insr.integrate(
            fourier_field(),
            insr.Midpoint(),
            PROBLEM,
            0.0,
            0.2,
            0.1,
            key=jax.random.key(0),
            monitor=Lookalike(),
        )
    with pytest.raises(ValueError, match="`omega0`"):
        insr.SIREN(1, 1, omega0=0.0, key=jax.random.key(0))


def test_diverging_step_is_flagged_with_its_residual():
    # Adam at learning rate 10 blows the linear field's objective up within 5 iterations
    solver = insr.AdamSolver(
        collocation=insr.Collocation(n_points=64),
        stopping=insr.Stopping(max_steps=5),
        learning_rate=10.0,
    )
    run = eqx.filter_jit(insr.integrate)
    sol = run(
        fourier_field(),
        insr.Midpoint(solver),
        PROBLEM,
        0.0,
        0.2,
        0.1,
        key=jax.random.key(0),
        throw=False,
    )
    assert sol.result == RESULTS.insr_objective_increased
    step = np.asarray(sol.stats["step_result"])
    assert np.all(step == int(RESULTS.insr_objective_increased._value))
    assert np.all(np.asarray(sol.stats["loss"]) > np.asarray(sol.stats["loss_initial"]))
    assert int(sol.stats["num_failed_steps"]) == 2
    with pytest.raises(Exception, match="larger objective than at its warm start"):
        run(fourier_field(), insr.Midpoint(solver), PROBLEM, 0.0, 0.2, 0.1, key=jax.random.key(0))


def test_step_cap_is_reported():
    # a tiny learning rate never reaches the plateau stop rule within 3 iterations
    solver = insr.AdamSolver(
        collocation=insr.Collocation(n_points=64),
        stopping=insr.Stopping(max_steps=3),
        learning_rate=1e-6,
        min_lr=1e-8,
    )
    sol = insr.integrate(
        fourier_field(),
        insr.Midpoint(solver),
        PROBLEM,
        0.0,
        0.1,
        0.1,
        key=jax.random.key(0),
        throw=False,
    )
    assert sol.result == RESULTS.nonlinear_max_steps_reached
    assert int(sol.stats["iterations"][0]) == 3


def test_taylor_green_and_splitting_options():
    pressure = insr.FourierBasis(2, -1.0, 1.0, in_size=2, out_size=1)
    with pytest.raises(
        ValueError, match=r"`projection` must be StrongProjection\(\) or VariationalProjection\(\)"
    ):
        insr.Splitting(pressure, projection="weak")
    # the names of the configs stand for the modules
    assert insr.Splitting(pressure, projection="variational").projection == (
        insr.VariationalProjection()
    )
    assert insr.Splitting(pressure).projection == insr.StrongProjection()
    with pytest.raises(ValueError, match="`viscosity` must be a finite number >= 0"):
        insr.TaylorGreen2D(-0.1)
    with pytest.raises(ValueError, match=r"`pressure` must map a point \(2,\) to \(1,\)"):
        insr.Splitting(insr.FourierBasis(2, -1.0, 1.0, in_size=2, out_size=2))
    with pytest.raises(ValueError, match="`solver` must be"):
        insr.Splitting(pressure, "lm")
    velocity = insr.FourierBasis(2, -1.0, 1.0, in_size=2, out_size=1)
    with pytest.raises(ValueError, match=r"`field0` must map a point \(2,\) to \(2,\)"):
        insr.integrate(
            velocity,
            insr.Splitting(pressure),
            insr.TaylorGreen2D(),
            0.0,
            0.1,
            0.05,
            key=jax.random.key(0),
        )
    message = "Advection1D cannot be stepped with Splitting; use ExplicitEuler or ImplicitEuler or"
    with pytest.raises(ValueError, match=message):
        insr.integrate(
            fourier_field(),
            insr.Splitting(pressure),
            PROBLEM,
            0.0,
            0.1,
            0.05,
            key=jax.random.key(0),
        )


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"mass": 0.0}, "`mass`"),
        ({"mass": -1.0}, "`mass`"),
        ({"a": 0.0}, "`a`"),
        ({"b": -1.0}, "`b`"),
        ({"force": (1.0,)}, "`force`"),
        ({"contact_stiffness": 0.0}, "`contact_stiffness`"),
        ({"n_force_steps": 0}, "`n_force_steps`"),
        ({"lower": (1.0, 1.0), "upper": (-1.0, 2.0)}, "`lower`"),
        ({"constraints": ("left",)}, "`constraints`"),
    ],
)
def test_elasticity_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        insr.Elasticity2D(**kwargs)


def test_elasticity_bad_scene_face_and_field():
    with pytest.raises(ValueError, match="`name` must be one of"):
        insr.Elasticity2D.scene("bounce")
    with pytest.raises(ValueError, match="'stretch' was renamed 'roller_stretch'"):
        insr.Elasticity2D.scene("stretch")
    with pytest.raises(ValueError, match="`face` must be one of"):
        insr.Roller("front")
    problem = insr.Elasticity2D.scene("free_fall")
    step = insr.IncrementalPotential()
    with pytest.raises(ValueError, match=r"`field0` must map a point \(2,\) to \(2,\)"):
        insr.integrate(
            insr.SIREN(2, 3, key=jax.random.key(0)),
            step,
            problem,
            0.0,
            0.1,
            0.1,
            key=jax.random.key(0),
        )
    with pytest.raises(ValueError, match="`dt`"):
        insr.integrate(
            insr.SIREN(2, 2, key=jax.random.key(0)),
            step,
            problem,
            0.0,
            0.1,
            0.0,
            key=jax.random.key(0),
        )
    with pytest.raises(ValueError, match="Advection1D cannot be stepped with IncrementalPotential"):
        insr.integrate(fourier_field(), step, PROBLEM, 0.0, 0.1, 0.1, key=jax.random.key(0))
    with pytest.raises(ValueError, match="quasi-static"):
        insr.integrate(
            insr.SIREN(2, 2, key=jax.random.key(0)),
            insr.IncrementalPotential(quasi_static=True),
            problem,
            0.0,
            0.1,
            0.1,
            key=jax.random.key(0),
        )


def _flow_fields():
    velocity = insr.FourierBasis(2, -1.0, 1.0, in_size=2, out_size=2)
    return velocity, insr.FourierBasis(2, -1.0, 1.0, in_size=2, out_size=1)


def test_a_problem_refuses_an_integrator_it_does_not_support():
    """Taylor–Green stepped without the pressure projection, elasticity by a
    residual of `∂ₜu = F(u)`: refused by `integrate` before any step, with the
    problem, the integrator and what to use instead."""
    velocity, _ = _flow_fields()
    elastic = insr.SIREN(2, 2, width=8, hidden_layers=1, key=jax.random.key(0))
    cases = [
        (velocity, insr.Midpoint(), insr.TaylorGreen2D(), "TaylorGreen2D", "Midpoint", "Splitting"),
        (
            elastic,
            insr.ImplicitEuler(),
            insr.Elasticity2D.scene("column"),
            "Elasticity2D",
            "ImplicitEuler",
            "IncrementalPotential",
        ),
    ]
    for field, integrator, problem, name, used, supported in cases:
        message = rf"{name} cannot be stepped with {used}; use {supported} \(`{used}.problems`: "
        with pytest.raises(ValueError, match=message):
            insr.integrate(field, integrator, problem, 0.0, 0.1, 0.05, key=jax.random.key(0))


def test_a_problem_accepts_the_integrators_it_supports():
    """The same calls with a supported integrator pass the check (traced only)."""
    velocity, pressure = _flow_fields()
    elastic = insr.SIREN(2, 2, width=8, hidden_layers=1, key=jax.random.key(0))
    solver = insr.LeastSquaresSolver(
        collocation=insr.Collocation(n_points=16, n_boundary=8), stopping=insr.Stopping(max_steps=1)
    )
    cases = [
        (velocity, insr.Splitting(pressure, solver), insr.TaylorGreen2D()),
        (elastic, insr.IncrementalPotential(solver), insr.Elasticity2D.scene("column")),
        (fourier_field(), insr.Midpoint(solver), PROBLEM),
    ]
    for field, integrator, problem in cases:
        out = eqx.filter_eval_shape(
            insr.integrate, field, integrator, problem, 0.0, 0.1, 0.05, key=jax.random.key(0)
        )
        assert out.stats["loss"].shape == (2,)
