"""Adapters that let sciml's Equinox modules live inside other frameworks."""

from . import flax as flax
