"""The deep conjugate direction method (DCDM) for large sparse SPD systems.

A conjugate-direction Krylov-like iteration whose search directions come from a
trained convolutional network approximating `A⁻¹` up to scale (Kaneda et al.,
"A Deep Conjugate Direction Method for Iteratively Solving Linear Systems",
ICML 2023).
"""

from ._iteration import a_norm_error as a_norm_error, solve as solve
