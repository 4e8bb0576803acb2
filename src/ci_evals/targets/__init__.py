"""Targets produce a Trajectory per sample. Kinds are registered lazily in :mod:`ci_evals._util.registry`."""

from ci_evals.targets.base import Target

__all__ = ["Target"]
