"""The imputers: scikit-learn estimators that fit a density to incomplete data and impute from it.

* :class:`~explorer.impute.gaussian_mixture.GaussianMixtureImputer`: a Gaussian mixture fitted by EM
  (ghahramani1994), ``n_components="auto"`` through :mod:`explorer.model_selection`;
* :class:`~explorer.impute.dp_mixture.DPGMMImputer`: the variational Dirichlet-process mixture (garriga2017);
* :class:`~explorer.impute.factor.FactorAnalysisImputer` and :class:`~explorer.impute.factor.MFAImputer`:
  factor analysis and mixtures of factor analysers, encoded exactly or by the Neumann series (antypas2023);
* :class:`~explorer.impute.transformed.TransformedImputer`: any of them on log / logit scales;
* :class:`~explorer.impute.mixed.MixedMixtureImputer`: a DataFrame with numeric and categorical (text, boolean)
  columns, by the location model (:mod:`explorer.core.mixtures.location_model`);
* :mod:`~explorer.impute.base`: what they share (input checks, ``transform`` / ``sample`` /
  ``conditional`` / ``score_samples``, the fit loop with progress).

The classes are loaded on first use (``import explorer.impute`` imports no estimator module).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "GaussianMixtureImputer": "explorer.impute.gaussian_mixture",
    "DPGMMImputer": "explorer.impute.dp_mixture",
    "FactorAnalysisImputer": "explorer.impute.factor",
    "MFAImputer": "explorer.impute.factor",
    "TransformedImputer": "explorer.impute.transformed",
    "MixedMixtureImputer": "explorer.impute.mixed",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module = importlib.import_module(_LAZY[name])
    except KeyError:
        raise AttributeError(f"module 'explorer.impute' has no attribute {name!r}") from None
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
