"""sciml: scientific machine learning in JAX.

Subpackages are imported on their own (`import sciml.training`,
`from sciml.operators import TFNO`), so importing `sciml` stays cheap.
"""

from importlib.metadata import PackageNotFoundError, version as _version


try:
    __version__ = _version("sciml-jax")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
