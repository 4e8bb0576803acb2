"""Grader kinds. Each module defines a ``Grader`` subclass with its own spec model; the kinds
are registered lazily in :mod:`ci_evals._util.registry`."""

from ci_evals.graders.base import Grader

__all__ = ["Grader"]
