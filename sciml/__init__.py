"""sciml: scientific machine learning in JAX.

Subpackages are imported on their own (`import sciml.training`,
`from sciml.operators import TFNO`), so importing `sciml` stays cheap.
"""

__version__ = "0.1.0"
