"""The ``random_state`` convention of every estimator: scikit-learn's, with numpy Generators.

:func:`check_random_state` turns ``random_state`` (None, a non-negative int or a
:class:`numpy.random.Generator`) into the Generator a fit draws from; :data:`RANDOM_STATE_DOC` is the
paragraph every estimator's docstring quotes. (Not :func:`sklearn.utils.check_random_state`, which gives the
legacy ``RandomState``.)
"""

from __future__ import annotations

import numbers

import numpy as np

from explorer.core.validation import BadInputError

__all__ = ["RANDOM_STATE_DOC", "check_random_state"]


#: The ``random_state`` convention of every estimator (scikit-learn's), quoted in their docstrings.
RANDOM_STATE_DOC = """random_state : int, numpy.random.Generator or None, default None
        Seed of the random initialisation, following scikit-learn's convention: an int makes every
        ``fit`` reproducible (also after :func:`sklearn.base.clone`); a Generator is used as is and its
        state is consumed, so successive fits (and clones made after a fit, which copy the consumed
        state) differ; None draws fresh entropy at every fit."""


def check_random_state(random_state, name: str = "random_state") -> np.random.Generator:
    """The Generator of ``random_state`` (scikit-learn's convention, see :data:`RANDOM_STATE_DOC`).

    An int gives a new ``default_rng(seed)`` (reproducible), a Generator is returned itself (shared,
    its state consumed), None gives fresh entropy; anything else is a clear error.
    """
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool) and random_state >= 0:
        return np.random.default_rng(int(random_state))
    raise BadInputError(
        f"{name} must be None, a non-negative int or a numpy.random.Generator; got {random_state!r}. "
        "(numpy.random.RandomState is not supported: use numpy.random.default_rng(seed).)"
    )
