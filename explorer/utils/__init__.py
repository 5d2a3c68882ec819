"""Helpers shared by the estimators and the pages, with no model in them.

* :mod:`~explorer.utils.inputs`: the input adapters (array, DataFrame, DataArray, IncompleteData in; the
  same kind out);
* :mod:`~explorer.utils.random_state`: the ``random_state`` convention
  (:func:`~explorer.utils.random_state.check_random_state`);
* :mod:`~explorer.utils.progress`: ``callback`` / ``progress`` of a long fit;
* :mod:`~explorer.utils.workers`: process pools whose workers never outlive their parent;
* :mod:`~explorer.utils.memory`: giving the memory of closed sessions back to the operating system.
"""

__all__ = ["inputs", "memory", "progress", "random_state", "workers"]
