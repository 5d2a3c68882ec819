"""save_model / load_model of a fitted TransformedImputer (per-column log / logit around a density imputer).

* round trip: every answer of the loaded model (single imputation by mean and by median, draws with
  a fixed seed, intervals, densities, the conditional's moments) is bit-identical to the original's
  on rows never seen in fit, for every wrapped imputer, with and without column names;
* oracle: the loaded model's intervals and draws of a log column are exp of the wrapped model's on
  log data, and of a logit column lower + width * expit(...) - the transforms really are rebuilt;
* properties (hypothesis, new rows and masks): observed entries come back bit for bit, answers of
  transformed columns stay strictly inside their bounds, loaded == original;
* bad files: an unknown transform kind, bounds that do not fit the kind, a damaged wrapped model,
  disagreeing column counts or names give a BadInputError naming the file and the field;
  an unfitted TransformedImputer is refused by save_model.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import expit
from sklearn.base import clone

from explorer.core.validation import BadInputError
from explorer.impute.dp_mixture import DPGMMImputer
from explorer.impute.factor import FactorAnalysisImputer, MFAImputer
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.impute.transformed import BoundCrossingWarning, ColumnTransform, TransformedImputer, suggest_transforms
from explorer.persistence import load_model, save_model

COLUMNS = ["ozone", "frac", "temp", "count"]
TRANSFORMS = {"ozone": "log", "frac": "logit", "count": ("log", -1)}  # temp: none


def _data(seed=0, n=120, rate=0.15):
    """Positive skewed, a fraction in (0, 1), an unbounded column and counts with zeros; MCAR gaps."""
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal([3.0, 0.0, 20.0, 1.0], [[0.5, 0.3, 1.0, 0.2], [0.3, 1.0, 0.5, 0.1],
                                                          [1.0, 0.5, 9.0, 0.3], [0.2, 0.1, 0.3, 0.5]], size=n)
    X = np.column_stack([np.exp(z[:, 0]), expit(z[:, 1]), z[:, 2], np.floor(np.exp(z[:, 3]) - 0.5).clip(0)])
    missing = rng.random(X.shape) < rate
    missing[missing.all(axis=1), 0] = False
    X[missing] = np.nan
    return X


INNER = {
    "gmm": lambda: GaussianMixtureImputer(n_components=2, random_state=0),
    "gmm_diag": lambda: GaussianMixtureImputer(n_components=2, covariance_type="diag", random_state=0),
    "dpgmm": lambda: DPGMMImputer(n_components=4, random_state=0),
    "fa": lambda: FactorAnalysisImputer(n_factors=1, random_state=0),
    "mfa": lambda: MFAImputer(n_components=2, n_factors=1, random_state=0),
}


def _fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence / suggestion notices are not what is tested here
        return est.fit(X)


def _quiet(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoundCrossingWarning)
        return f(*args, **kwargs)


def _same_answers(a, b, new):
    """Every answer of ``a`` and ``b`` on ``new`` is bit-identical."""
    assert np.array_equal(np.asarray(_quiet(a.transform, new)), np.asarray(_quiet(b.transform, new)))
    for level in (0.5, 0.95):
        (lo_a, hi_a), (lo_b, hi_b) = _quiet(a.interval, new, level), _quiet(b.interval, new, level)
        assert np.array_equal(np.asarray(lo_a), np.asarray(lo_b)) and np.array_equal(np.asarray(hi_a), np.asarray(hi_b))
    s_a = np.asarray(_quiet(a.sample, new, 4, random_state=7))
    s_b = np.asarray(_quiet(b.sample, new, 4, random_state=7))
    assert np.array_equal(s_a, s_b)
    assert np.array_equal(a.score_samples(new), b.score_samples(new))
    c_a, c_b = a.conditional(new), b.conditional(new)
    assert np.array_equal(c_a.mean(), c_b.mean())
    assert np.array_equal(c_a.median(), c_b.median())
    assert np.array_equal(c_a.variance(), c_b.variance())


@pytest.mark.parametrize("named", [True, False], ids=["frame", "array"])
@pytest.mark.parametrize("name", sorted(INNER))
def test_loaded_transformed_model_is_bit_identical_on_new_data(tmp_path, name, named):
    X = _data(seed=0)
    new = _data(seed=1, n=30)  # rows never seen in fit
    transforms = TRANSFORMS if named else {COLUMNS.index(k): v for k, v in TRANSFORMS.items()}
    if named:
        X, new = pd.DataFrame(X, columns=COLUMNS), pd.DataFrame(new, columns=COLUMNS)
    est = _fit(TransformedImputer(INNER[name](), transforms=transforms), X)
    loaded = load_model(save_model(est, tmp_path / "model.json"))
    assert type(loaded) is TransformedImputer and type(loaded.imputer_) is type(est.imputer_)
    p_est, p_new = est.get_params(deep=False), loaded.get_params(deep=False)
    assert p_est.pop("imputer").get_params() == p_new.pop("imputer").get_params()
    assert p_new == p_est and isinstance(p_new["transforms"][3 if not named else "count"], tuple)
    assert loaded.transforms_ == est.transforms_ and loaded._transforms == est._transforms
    assert loaded.n_features_in_ == 4
    if named:
        assert list(loaded.feature_names_in_) == COLUMNS and list(loaded.get_feature_names_out()) == COLUMNS
    else:
        assert not hasattr(loaded, "feature_names_in_")
    _same_answers(est, loaded, new)
    # point="median" reads the same saved model
    est.set_params(point="median")
    loaded.set_params(point="median")
    assert np.array_equal(np.asarray(est.transform(new)), np.asarray(loaded.transform(new)))


def test_oracle_loaded_intervals_and_draws_are_the_wrapped_models_back_transformed(tmp_path):
    """Independent of the original object: back-transform the loaded wrapped model's answers by hand."""
    X = pd.DataFrame(_data(seed=0), columns=COLUMNS)
    est = _fit(TransformedImputer(INNER["gmm"](), transforms=TRANSFORMS), X)
    loaded = load_model(save_model(est, tmp_path / "m.json"))
    new = _data(seed=2, n=40)
    missing = np.isnan(new)
    Y = new.copy()
    Y[:, 0] = np.log(new[:, 0])
    t = loaded.transforms_["frac"]
    Y[:, 1] = np.log(new[:, 1] - t.lower) - np.log(t.upper - new[:, 1])
    Y[:, 3] = np.log(new[:, 3] + 1.0)
    lo_y, hi_y = loaded.imputer_.conditional(Y).interval(0.9)
    lo, hi = _quiet(loaded.interval, new, 0.9)
    m = missing[:, 0]
    assert np.allclose(lo[m, 0], np.exp(lo_y[m, 0]), rtol=1e-12, atol=0)
    assert np.allclose(hi[m, 0], np.exp(hi_y[m, 0]), rtol=1e-12, atol=0)
    m = missing[:, 1]
    width = t.upper - t.lower
    assert np.allclose(hi[m, 1], t.lower + width * expit(hi_y[m, 1]), rtol=1e-12, atol=1e-15)
    m = missing[:, 3]
    assert np.allclose(lo[m, 3], np.exp(lo_y[m, 3]) - 1.0, rtol=1e-12, atol=1e-12)
    m = missing[:, 2]
    assert np.array_equal(lo[m, 2], lo_y[m, 2])  # untransformed column: the wrapped model's own interval
    draws_y = np.asarray(loaded.imputer_.sample(Y, n_imputations=3, random_state=5))
    draws = np.asarray(_quiet(loaded.sample, new, 3, random_state=5))
    m = missing[:, 0]
    assert np.allclose(draws[:, m, 0], np.exp(draws_y[:, m, 0]), rtol=1e-12, atol=0)
    # log-normal mean of a one-component conditional, closed form exp(mu + s^2 / 2), on a K = 1 model
    one = _fit(TransformedImputer(GaussianMixtureImputer(n_components=1, predictive="gaussian"),
                                  transforms={"ozone": "log"}), X)
    one = load_model(save_model(one, tmp_path / "one.json"))
    Y1 = new.copy()
    Y1[:, 0] = np.log(new[:, 0])
    cond = one.imputer_.conditional(Y1)
    mu, var = np.asarray(cond.mean()), np.asarray(cond.variance())
    m = missing[:, 0]
    assert np.allclose(np.asarray(one.transform(new))[m, 0], np.exp(mu[m, 0] + var[m, 0] / 2), rtol=1e-10, atol=0)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    X = pd.DataFrame(_data(seed=0), columns=COLUMNS)
    est = _fit(TransformedImputer(INNER["gmm"](), transforms=TRANSFORMS), X)
    path = save_model(est, tmp_path_factory.mktemp("model") / "transformed.json")
    return est, load_model(path), json.loads(path.read_text())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 15), rate=st.floats(0.05, 0.7))
def test_property_observed_unchanged_bounds_respected_loaded_equals_original(saved, seed, n, rate):
    est, loaded, _ = saved
    new = _data(seed=seed, n=n, rate=rate)
    obs = ~np.isnan(new)
    Xi = np.asarray(_quiet(loaded.transform, new))
    lo, hi = _quiet(loaded.interval, new, 0.95)
    draws = np.asarray(_quiet(loaded.sample, new, 3, random_state=seed))
    for out in (Xi, lo, hi, *draws):
        assert np.isfinite(out).all()
        assert np.array_equal(out[obs], new[obs])  # observed entries bit for bit
        assert (out[:, 0] > 0).all()  # log
        t = loaded.transforms_["frac"]
        assert ((out[:, 1] >= t.lower) & (out[:, 1] <= t.upper)).all()  # logit (expit may round onto a bound)
        assert (out[:, 3] > -1).all()  # log(x + 1)
    # the conditional median lies inside every equal-tailed interval (the mean need not)
    med = np.asarray(loaded.conditional(new).median())
    assert ((lo <= med) & (med <= hi)).all()
    assert np.array_equal(Xi, np.asarray(_quiet(est.transform, new)))
    assert np.array_equal(draws, np.asarray(_quiet(est.sample, new, 3, random_state=seed)))


def test_suggested_and_given_column_transforms_round_trip(tmp_path):
    X = pd.DataFrame(_data(seed=0), columns=COLUMNS)
    with pytest.warns(UserWarning, match="applies"):
        est = TransformedImputer(GaussianMixtureImputer(random_state=0)).fit(X)
    loaded = load_model(save_model(est, tmp_path / "s.json"))
    assert loaded.transforms == "suggest" and loaded.transforms_ == est.transforms_
    assert {k: t.kind for k, t in loaded.transforms_.items()} == {k: t.kind for k, t in est.transforms_.items()}
    assert all(t.reason for t in loaded.transforms_.values())  # the reasons are kept
    new = _data(seed=3, n=20)
    _same_answers(est, loaded, new)
    # a dict of ColumnTransform objects (suggest_transforms, edited) as the parameter
    spec = suggest_transforms(X)
    spec["temp"] = ColumnTransform(None, reason="edited by hand")
    est2 = _fit(TransformedImputer(None, transforms=spec), X)
    loaded2 = load_model(save_model(est2, tmp_path / "d.json"))
    assert loaded2.imputer is None and loaded2.transforms == spec
    _same_answers(est2, loaded2, new)


def test_loaded_model_refits_like_the_original(tmp_path):
    """The saved parameters (with the wrapped template) rebuild the same estimator: a refit is identical."""
    X = pd.DataFrame(_data(seed=0), columns=COLUMNS)
    est = _fit(TransformedImputer(INNER["gmm"](), transforms=TRANSFORMS, margin=0.05), X)
    loaded = load_model(save_model(est, tmp_path / "m.json"))
    again = _fit(clone(loaded), X)
    _same_answers(est, again, _data(seed=4, n=20))


def test_bound_crossing_warning_survives_the_round_trip(tmp_path):
    """An untransformed non-negative column keeps its natural bound 0: the loaded model warns as the original."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.exponential(1.0, 200), rng.normal(0, 1, 200)])
    X[::4, 0] = np.nan
    est = _fit(TransformedImputer(GaussianMixtureImputer(), transforms=None), X)
    loaded = load_model(save_model(est, tmp_path / "m.json"))
    assert loaded.transforms_[0] == ColumnTransform(None, 0.0, None, "given")
    for model in (est, loaded):
        with pytest.warns(BoundCrossingWarning, match="column 0|go below 0"):
            model.interval(X, 0.95)


def test_dpgmm_inside_with_training_rows(tmp_path):
    X = _data(seed=0)
    est = _fit(TransformedImputer(DPGMMImputer(n_components=4, weights="responsibilities", random_state=0),
                                  transforms={0: "log"}), X)
    with pytest.warns(UserWarning, match="include_training_data"):
        save_model(est, tmp_path / "lean.json")
    full = load_model(save_model(est, tmp_path / "full.json", include_training_data=True))
    assert np.array_equal(np.asarray(_quiet(full.transform, X)), np.asarray(_quiet(est.transform, X)))


def test_file_is_standard_json_without_pickle(saved):
    _, _, doc = saved
    text = json.dumps(doc)
    json.loads(text, parse_constant=lambda tok: pytest.fail(f"non-standard JSON token {tok}"))
    assert doc["class"] == "TransformedImputer" and doc["format_version"] == 1
    assert [c["kind"] for c in doc["transforms"]] == ["log", "logit", None, "log"]
    assert [c["column"] for c in doc["transforms"]] == COLUMNS
    assert doc["imputer"]["class"] == "GaussianMixtureImputer" and "means_" in doc["imputer"]["fitted"]


def test_unfitted_or_unsupported_transformed_imputers_are_refused(tmp_path):
    with pytest.raises(BadInputError, match="TransformedImputer is not fitted"):
        save_model(TransformedImputer(), tmp_path / "m.json")

    class MyMixture(GaussianMixtureImputer):
        pass

    est = _fit(TransformedImputer(MyMixture(), transforms={0: "log"}), _data())
    with pytest.raises(BadInputError, match="wraps a MyMixture|imputer parameter is a MyMixture"):
        save_model(est, tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


def _edit_column(j, **fields):
    return lambda d: d["transforms"][j].update(fields)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (_edit_column(0, kind="sqrt"), r"transforms\[0\] \(column 'ozone'\) has the unknown transform kind 'sqrt'"),
        (_edit_column(0, kind="exec"), "unknown transform kind 'exec'; known: log, logit"),
        (_edit_column(1, lower=0.9, upper=0.1), r"transforms\[1\] \(column 'frac'\) is a logit transform, which "
                                                "needs lower < upper"),
        (_edit_column(1, upper=None), "logit transform, which needs lower < upper"),
        (_edit_column(0, upper=5.0), "log transform, which needs a lower bound and no upper"),
        (_edit_column(0, lower="nan"), r"transforms\[0\] \(column 'ozone'\)\.lower must be a finite number"),
        (_edit_column(0, lower=True), "lower must be a finite number"),
        (_edit_column(2, column="pressure"), "labelled 'pressure'"),
        (_edit_column(2, evil=1), "must be an object with the fields kind, lower, upper, reason"),
        (lambda d: d["transforms"].pop(), r"'transforms' lists 3 column\(s\) for 4 feature\(s\)"),
        (lambda d: d.pop("transforms"), "lacks the 'params', 'transforms' or 'imputer' section"),
        (lambda d: d.update(n_features_in=5), "n_features_in is 5 but the wrapped model has 4"),
        (lambda d: d.update(feature_names=["a", "b", "c", "d"]), "differ from the wrapped model's"),
        (lambda d: d["imputer"]["fitted"]["means_"].update(shape=[4, 2]),
         r"means_ must be a float array of shape \(2, 4\).*in the 'imputer' section"),
        (lambda d: d["imputer"].update({"class": "TransformedImputer"}), "unknown model class.*'imputer' section"),
        (lambda d: d["params"].update(point="mode"), "params.point must be one of"),
        (lambda d: d["params"].update(margin=0.9), r"params\.margin must be a number in \(0, 0.5\)"),
        (lambda d: d["params"].update(evil=1), r"unknown parameter\(s\) \['evil'\] for TransformedImputer"),
        (lambda d: d["params"]["imputer"].update({"class": "os.system"}), "params.imputer must be null or"),
        (lambda d: d["params"]["imputer"]["params"].update(evil=1), r"\['evil'\].*in params\.imputer"),
        (lambda d: d["params"]["transforms"]["items"].append(["x", 3]), r"params\.transforms\['x'\] = 3 is not"),
        (lambda d: d["params"].update(transforms=[1, 2]), "params.transforms must be 'suggest', null or a list"),
    ],
)
def test_tampered_transformed_files_give_clear_errors(tmp_path, saved, edit, match):
    doc = json.loads(json.dumps(saved[2]))
    edit(doc)
    path = tmp_path / "bad_model.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BadInputError, match=match) as info:
        load_model(path)
    assert "bad_model.json" in str(info.value)  # which file


def test_fit_callback_is_saved_as_none(tmp_path):
    """A progress callback (a function) cannot be written as JSON: saved as None with a warning, model intact."""
    seen = []
    inner = GaussianMixtureImputer(n_components=2, random_state=0, callback=seen.append)
    est = _fit(TransformedImputer(inner, transforms={0: "log"}), _data())
    assert seen  # the callback ran during fit
    with pytest.warns(UserWarning, match="callback is a function"):
        path = save_model(est, tmp_path / "m.json")
    loaded = load_model(path)
    assert loaded.imputer.callback is None and loaded.imputer_.callback is None
    assert np.array_equal(np.asarray(_quiet(loaded.sample, _data(seed=5, n=10), 2, random_state=1)),
                          np.asarray(_quiet(est.sample, _data(seed=5, n=10), 2, random_state=1)))
