"""One small, fast configuration of each public imputer, shared by the tests that run every one of them."""

from __future__ import annotations

from explorer.impute.dp_mixture import DPGMMImputer
from explorer.impute.factor import FactorAnalysisImputer, MFAImputer
from explorer.impute.gaussian_mixture import GaussianMixtureImputer

#: Unfitted; tests ``clone`` them before fitting
ESTIMATORS = [
    GaussianMixtureImputer(n_components=2, random_state=0),
    DPGMMImputer(n_components=4, max_iter=30, random_state=0),
    FactorAnalysisImputer(random_state=0),
    MFAImputer(n_components=2, max_iter=50, random_state=0),
]
IDS = [type(e).__name__ for e in ESTIMATORS]
