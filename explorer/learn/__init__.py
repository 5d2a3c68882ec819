"""Learning predictors from incomplete data (ghahramani1994 sections 4.3-4.4, Marlin chapter 6).

Every estimator here is a scikit-learn estimator whose ``X`` may contain NaN (a missing feature);
see :mod:`explorer.learn._base` for the input kinds and label conventions.
"""
