"""explorer.export (imputations to CSV / Parquet / netCDF and back) and explorer.persistence (fitted models to JSON
and back).

Round trips compare exactly (``np.array_equal``, bit-for-bit floats); the netCDF and CSV files are
also read by plain xarray / pandas (the oracle: what a user's own tools see). Models: a loaded
model must give bit-identical ``transform``, ``score_samples`` and ``conditional`` results on new
data, for every imputer class; damaged or hostile files give a clear BadInputError.
"""

from __future__ import annotations

import json
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from explorer.core.validation import BadInputError
from explorer.export import export_imputations, read_imputations, to_dataset, to_long_frame
from explorer.impute.dp_mixture import DPGMMImputer
from explorer.impute.factor import FactorAnalysisImputer, MFAImputer
from explorer.impute.gaussian_mixture import GaussianMixtureImputer
from explorer.persistence import load_model, save_model

SUFFIXES = (".csv", ".parquet", ".nc")


def _data(seed=0, n=40, d=4, rate=0.2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d) * 3
    missing = rng.random((n, d)) < rate
    missing[missing.all(axis=1), 0] = False
    X[missing] = np.nan
    return X, missing


def _imputations(seed=0, n=7, d=3, m=4):
    """Awkward floats (tiny, huge, 0.1+0.2, negative zero) with a mask and m draws that keep observed values."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-300, 300, size=(n, d))
    X[0, 0], X[1, 1] = 0.1 + 0.2, -0.0
    missing = rng.random((n, d)) < 0.4
    S = np.repeat(X[None], m, axis=0)
    S[:, missing] = rng.normal(size=(m, int(missing.sum())))
    return X, S, missing


# ============================================================================ imputations
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_round_trip_is_exact(tmp_path, suffix):
    X, S, missing = _imputations()
    columns = ["Ozone", "Température", "wind speed"]
    index = ["r0", "r1", "r2", "r3", "r4", "r5", "r6"]
    path = export_imputations(tmp_path / f"out{suffix}", X, S, missing, columns=columns, index=index)
    got = read_imputations(path)
    assert np.array_equal(got.imputed, X) and got.imputed.dtype == np.float64
    assert np.array_equal(got.samples, S)
    assert np.array_equal(got.missing, missing) and got.missing.dtype == bool
    assert got.columns == columns
    assert got.index == index
    assert not np.isnan(got.imputed).any() and not np.isnan(got.samples).any()
    assert np.signbit(got.imputed[1, 1])  # -0.0 stays -0.0


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_single_imputation_only(tmp_path, suffix):
    X, _, _ = _imputations()
    got = read_imputations(export_imputations(tmp_path / f"a{suffix}", X))
    assert np.array_equal(got.imputed, X)
    assert got.samples is None and got.missing is None
    assert got.columns == ["x0", "x1", "x2"] and got.index == list(range(7))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    X=arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 4)),
             elements=st.floats(allow_nan=False, allow_infinity=False, width=64)),
    m=st.integers(0, 3),
    suffix=st.sampled_from((".csv", ".nc")),
)
def test_round_trip_property(tmp_path, X, m, suffix):
    """Any finite float64 table (subnormals, +-1.8e308) and m draws come back bit for bit."""
    missing = np.zeros(X.shape, dtype=bool)
    missing[::2, 0] = True
    S = np.repeat(X[None], m, axis=0) if m else None
    if m:
        S[:, missing] = np.arange(m * int(missing.sum()), dtype=float).reshape(m, -1) * np.pi
    path = export_imputations(tmp_path / f"p{suffix}", X, S, missing)
    got = read_imputations(path)
    assert got.imputed.tobytes() == X.tobytes()
    assert np.array_equal(got.missing, missing)
    assert (got.samples is None) if not m else got.samples.tobytes() == S.tobytes()


def test_files_as_plain_tools_see_them(tmp_path):
    """Oracle: pandas and xarray alone read the layout the module docstring promises."""
    X, S, missing = _imputations(m=2)
    export_imputations(tmp_path / "a.csv", X, S, missing, columns=["a", "b", "c"])
    from explorer.export import _EXACT_FLOATS

    df = pd.read_csv(tmp_path / "a.csv", **_EXACT_FLOATS)
    assert list(df.columns) == ["imputation", "row", "a", "b", "c", "missing:a", "missing:b", "missing:c"]
    assert sorted(df.imputation.unique()) == [0, 1, 2]
    assert np.array_equal(df[df.imputation == 0][["a", "b", "c"]].to_numpy(), X)
    assert np.array_equal(df[df.imputation == 2][["a", "b", "c"]].to_numpy(), S[1])
    assert np.array_equal(df[df.imputation == 1][["missing:a", "missing:b", "missing:c"]].to_numpy(), missing)

    export_imputations(tmp_path / "a.nc", X, S, missing, columns=["a", "b", "c"])
    with xr.open_dataset(tmp_path / "a.nc", engine="scipy") as ds:
        assert dict(ds.sizes) == {"row": 7, "column": 3, "imputation": 2}
        assert ds["samples"].dims == ("imputation", "row", "column")
        assert list(ds["imputation"].values) == [1, 2]
        assert ds["missing"].dtype == bool
        assert np.array_equal(ds["samples"].sel(imputation=2, column="b").values, S[1][:, 1])


def test_dataframe_gives_columns_and_index(tmp_path):
    X, S, missing = _imputations()
    frame = pd.DataFrame(X, columns=["p", "q", "r"], index=[10, 20, 30, 40, 50, 60, 70])
    got = read_imputations(export_imputations(tmp_path / "f.parquet", frame, S, missing))
    assert got.columns == ["p", "q", "r"] and got.index == [10, 20, 30, 40, 50, 60, 70]
    pd.testing.assert_frame_equal(got.to_frame(), frame.rename_axis("row"))


def test_fitted_imputer_to_file_keeps_observed_values(tmp_path):
    """The real path: fit, transform, sample, export, read back: observed entries equal the data bit for bit."""
    X, missing = _data()
    imp = GaussianMixtureImputer(n_components=2, random_state=0).fit(X)
    Xi, S = np.asarray(imp.transform(X)), np.asarray(imp.sample(X, n_imputations=5, random_state=1))
    for suffix in SUFFIXES:
        got = read_imputations(export_imputations(tmp_path / f"r{suffix}", Xi, S, missing))
        assert np.array_equal(got.imputed[~missing], X[~missing])
        assert all(np.array_equal(s[~missing], X[~missing]) for s in got.samples)
        assert np.isfinite(got.imputed).all() and np.isfinite(got.samples).all()
        # the draws differ from one another on the missing entries (they are draws, not copies)
        assert not np.array_equal(got.samples[0][missing], got.samples[1][missing])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"path": "out.txt"}, "unknown file type '.txt'"),
        ({"path": "out"}, "no suffix"),
        ({"samples": np.zeros((2, 6, 3))}, r"samples must have shape \(m, 7, 3\)"),
        ({"samples": np.zeros((7, 3))}, "samples must have shape"),
        ({"missing": np.zeros((7, 2), bool)}, r"missing has shape \(7, 2\)"),
        ({"missing": np.full((7, 3), 2)}, "missing must be boolean"),
        ({"columns": ["a", "b"]}, "2 column name"),
        ({"columns": ["a", "a", "b"]}, "repeated"),
        ({"index": [0, 1]}, "2 row label"),
        ({"index": [0, 0, 1, 2, 3, 4, 5]}, "unique"),
        ({"columns": ["a", "row", "b"]}, "clash"),
        ({"columns": ["a", "missing:b", "b"]}, "clash"),
    ],
)
def test_bad_arguments_are_clear_errors(tmp_path, kwargs, match):
    X, _, _ = _imputations()
    kwargs = dict(kwargs)
    path = tmp_path / kwargs.pop("path", "out.csv")
    with pytest.raises(BadInputError, match=match):
        export_imputations(path, X, **kwargs)
    assert not path.exists()


def test_nan_and_altered_observed_values_are_refused(tmp_path):
    X, S, missing = _imputations()
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(BadInputError, match="NaN or infinite.*column 'x1'.*not the incomplete data"):
        export_imputations(tmp_path / "a.nc", bad)
    S2 = S.copy()
    S2[1][~missing] += 1.0
    with pytest.raises(BadInputError, match="imputation 2 differs from X_imputed on observed entries"):
        export_imputations(tmp_path / "a.nc", X, S2, missing)
    S3 = S.copy()
    S3[0, 0, 0] = np.inf
    with pytest.raises(BadInputError, match="samples has 1 NaN or infinite"):
        export_imputations(tmp_path / "a.nc", X, S3)
    assert not (tmp_path / "a.nc").exists()


def test_reading_foreign_or_absent_files(tmp_path):
    with pytest.raises(BadInputError, match="no such file"):
        read_imputations(tmp_path / "absent.csv")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(BadInputError, match="not written by export_imputations"):
        read_imputations(tmp_path / "other.csv")


def test_to_dataset_and_long_frame_shapes():
    X, S, missing = _imputations(m=3)
    ds = to_dataset(X, S, missing)
    assert ds["imputed"].shape == (7, 3) and ds["samples"].shape == (3, 7, 3)
    frame = to_long_frame(X, S, missing)
    assert len(frame) == 4 * 7 and frame["imputation"].tolist() == [0] * 7 + [1] * 7 + [2] * 7 + [3] * 7


# ============================================================================ models
def _fitted(cls_name, X, **extra):
    makers = {
        "gmm": lambda: GaussianMixtureImputer(n_components=2, random_state=0, **extra),
        "gmm_diag": lambda: GaussianMixtureImputer(n_components=2, covariance_type="diag", random_state=0, **extra),
        "dpgmm": lambda: DPGMMImputer(n_components=5, random_state=0, **extra),
        "fa": lambda: FactorAnalysisImputer(n_factors=1, random_state=0, **extra),
        "mfa": lambda: MFAImputer(n_components=2, n_factors=1, random_state=0, **extra),
        "mfa_bootstrap": lambda: MFAImputer(n_components=2, n_factors=1, predictive="bootstrap", n_posterior_draws=3,
                                            random_state=0, **extra),
        "mfa_neumann": lambda: MFAImputer(n_components=2, n_factors=1, solver="neumann", n_terms=20,
                                          random_state=0, **extra),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence on the small data is not what is tested here
        return makers[cls_name]().fit(X)


MODELS = ("gmm", "gmm_diag", "dpgmm", "fa", "mfa", "mfa_bootstrap", "mfa_neumann")


@pytest.mark.parametrize("name", MODELS)
def test_loaded_model_is_bit_identical_on_new_data(tmp_path, name):
    X, _ = _data(seed=0)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    est = _fitted(name, frame)
    path = save_model(est, tmp_path / "model.json")
    loaded = load_model(path)
    assert type(loaded) is type(est)
    assert loaded.get_params() == est.get_params()
    assert list(loaded.feature_names_in_) == ["a", "b", "c", "d"]
    new, _ = _data(seed=1, n=25)  # rows never seen in fit
    new = pd.DataFrame(new, columns=["a", "b", "c", "d"])
    assert np.array_equal(np.asarray(loaded.transform(new)), np.asarray(est.transform(new)))
    assert np.array_equal(loaded.score_samples(new), est.score_samples(new))
    c_est, c_new = est.conditional(new), loaded.conditional(new)
    assert np.array_equal(c_new.mean(), c_est.mean())
    assert np.array_equal(c_new.variance(), c_est.variance())
    lo1, hi1 = c_est.interval(0.9)
    lo2, hi2 = c_new.interval(0.9)
    assert np.array_equal(lo1, lo2) and np.array_equal(hi1, hi2)
    assert np.array_equal(np.asarray(loaded.sample(new, 3, random_state=7)), np.asarray(est.sample(new, 3, random_state=7)))
    # the file is standard JSON: no NaN / Infinity tokens, no pickle
    text = path.read_text()
    json.loads(text, parse_constant=lambda tok: pytest.fail(f"non-standard JSON token {tok}"))
    assert "history_" not in json.loads(text)["fitted"]


def test_dpgmm_training_rows_only_on_request(tmp_path):
    X, _ = _data()
    est = _fitted("dpgmm", X, weights="responsibilities")
    with pytest.warns(UserWarning, match="include_training_data"):
        save_model(est, tmp_path / "a.json")
    doc = json.loads((tmp_path / "a.json").read_text())
    assert "resp_" not in doc["fitted"] and "_fit_X" not in doc["fitted"]
    assert set(doc["not_saved"]) >= {"resp_", "_fit_X", "history_"}
    save_model(est, tmp_path / "b.json", include_training_data=True)
    full = load_model(tmp_path / "b.json")
    assert np.array_equal(np.asarray(full.transform(X)), np.asarray(est.transform(X)))
    assert np.array_equal(full.resp_, est.resp_)
    # without the training rows the loaded model uses predictive weights (documented), which differ here
    lean = load_model(tmp_path / "a.json")
    predictive = est.set_params(weights="predictive")
    assert np.array_equal(np.asarray(lean.transform(X)), np.asarray(predictive.transform(X)))


def test_generator_random_state_is_saved_as_none(tmp_path):
    X, _ = _data()
    est = GaussianMixtureImputer(random_state=np.random.default_rng(0)).fit(X)
    with pytest.warns(UserWarning, match="Generator"):
        save_model(est, tmp_path / "m.json")
    assert load_model(tmp_path / "m.json").random_state is None


def test_save_refuses_unfitted_and_foreign_estimators(tmp_path):
    from sklearn.impute import SimpleImputer

    with pytest.raises(BadInputError, match="not fitted"):
        save_model(GaussianMixtureImputer(), tmp_path / "m.json")
    with pytest.raises(BadInputError, match="save_model saves"):
        save_model(SimpleImputer().fit([[1.0], [2.0]]), tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.fixture(scope="module")
def saved_gmm(tmp_path_factory):
    X, _ = _data()
    path = tmp_path_factory.mktemp("model") / "gmm.json"
    save_model(_fitted("gmm", X), path)
    return json.loads(path.read_text())


def _tamper(doc, edit):
    doc = json.loads(json.dumps(doc))
    edit(doc)
    return doc


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d.update(format="something-else"), "not a model file"),
        (lambda d: d.update(format_version=2), "format version 2"),
        (lambda d: d.update({"class": "os.system"}), "unknown model class 'os.system'"),
        (lambda d: d.update({"class": "SimpleImputer"}), "unknown model class"),
        (lambda d: d["params"].update(evil=1), r"unknown parameter\(s\) \['evil'\]"),
        (lambda d: d["fitted"].update(fit={"kind": "int", "value": 1}), "'fit' is not a fitted attribute"),
        (lambda d: d["fitted"].update(__class__={"kind": "int", "value": 1}), "not a fitted attribute name"),
        (lambda d: d["fitted"].update(_private={"kind": "int", "value": 1}), "not a fitted attribute name"),
        (lambda d: d["fitted"].pop("means_"), r"lacks the fitted attribute\(s\) \['means_'\]"),
        (lambda d: d["fitted"]["means_"].update(shape=[3, 4]), r"8 value\(s\) for shape \(3, 4\)"),
        (lambda d: d["fitted"]["means_"].update(shape=[1, 8], data=d["fitted"]["means_"]["data"]),
         r"means_ must be a float array of shape \(2, 4\)"),
        (lambda d: d["fitted"]["means_"]["data"].__setitem__(0, "nan"), "means_ holds NaN"),
        (lambda d: d["fitted"]["means_"]["data"].__setitem__(0, "import os"), "is not a number"),
        (lambda d: d["fitted"]["means_"].update(dtype="object"), "unknown dtype 'object'"),
        (lambda d: d["fitted"]["weights_"]["data"].__setitem__(0, 5.0), "sum to 1"),
        (lambda d: d["fitted"].update(x_={"kind": "pickle", "value": "gASV"}), "unknown or malformed"),
        (lambda d: d["fitted"].update(x_={"kind": "spec", "type": "Popen", "fields": {}}), "unknown settings type"),
        (lambda d: d["fitted"].update(n_features_in_={"kind": "int", "value": 9}), "means_ must be a float array"),
    ],
)
def test_tampered_files_give_clear_errors(tmp_path, saved_gmm, edit, match):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(_tamper(saved_gmm, edit)))
    with pytest.raises(BadInputError, match=match):
        load_model(path)


def test_non_json_files_are_never_executed(tmp_path):
    class Boom:
        def __reduce__(self):
            return (open, (str(tmp_path / "pwned"), "w"))

    (tmp_path / "p.json").write_bytes(pickle.dumps(Boom()))
    with pytest.raises(BadInputError, match="not valid JSON|cannot read"):
        load_model(tmp_path / "p.json")
    assert not (tmp_path / "pwned").exists()
    (tmp_path / "nan.json").write_text('{"format": NaN}')
    with pytest.raises(BadInputError, match="non-standard JSON"):
        load_model(tmp_path / "nan.json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BadInputError, match="not valid JSON|not a model file"):
        load_model(tmp_path / "deep.json")
    with pytest.raises(BadInputError, match="no such model file"):
        load_model(tmp_path / "absent.json")


def test_model_settings_dataclass_round_trips(tmp_path):
    """A prior given as a settings object (NIWPrior) is saved as its fields and rebuilt equal."""
    em_gmm = pytest.importorskip("explorer.core.mixtures.em_gmm")
    if not hasattr(em_gmm, "NIWPrior"):
        pytest.skip("no NIWPrior in this explorer")
    X, _ = _data()
    prior = em_gmm.NIWPrior(kappa=0.5, dof=7.0, scale=np.eye(4).tolist())
    est = GaussianMixtureImputer(n_components=2, prior=prior, random_state=0).fit(X)
    loaded = load_model(save_model(est, tmp_path / "m.json"))
    assert loaded.prior == prior and loaded.prior_ == est.prior_
    assert np.array_equal(np.asarray(loaded.transform(X)), np.asarray(est.transform(X)))


def test_save_and_load_model_through_the_old_path_warn(tmp_path):
    """explorer.export.save_model / load_model moved to explorer.persistence; the old names warn for one release."""
    import explorer.export as export
    import explorer.persistence as persistence

    with pytest.warns(DeprecationWarning, match="explorer.persistence.save_model"):
        assert export.save_model is persistence.save_model
    with pytest.warns(DeprecationWarning, match="explorer.persistence.load_model"):
        from explorer.export import load_model as old_load  # noqa: F401
    with pytest.raises(AttributeError):
        export.no_such_name


@pytest.mark.parametrize("cls_name", ["FactorAnalysisImputer", "MFAImputer"])
def test_a_factor_model_saved_before_predictive_existed_loads_with_plug_in_draws(tmp_path, cls_name):
    """A file written before ``predictive`` / ``n_posterior_draws`` existed (no parameter draws in it) loads with
    today's defaults (``predictive="draws"``) but samples and conditions on its fitted parameters (plug-in): it
    neither fails nor invents draws; ``transform`` is the saved fit's."""
    from explorer.impute import factor

    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 5)) @ rng.normal(size=(5, 5))
    X[rng.random(X.shape) < 0.2] = np.nan
    kwargs = {"n_factors": 2} | ({"n_components": 2} if cls_name == "MFAImputer" else {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(factor, cls_name)(random_state=0, predictive="plugin", max_iter=50, **kwargs).fit(X)
    save_model(model, tmp_path / "new.json")
    doc = json.loads((tmp_path / "new.json").read_text())
    for name in ("predictive", "n_posterior_draws"):
        del doc["params"][name]
    del doc["fitted"]["predictive_"]
    assert not any(k.startswith("posterior_") for k in doc["fitted"])
    (tmp_path / "old.json").write_text(json.dumps(doc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = load_model(tmp_path / "old.json")
    assert old.predictive == "draws" and not hasattr(old, "predictive_")
    np.testing.assert_array_equal(old.transform(X), model.transform(X))
    got, plug_in = old.conditional(X), model.conditional(X)  # the model was fitted with predictive="plugin"
    np.testing.assert_allclose(got.mean(), plug_in.mean(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.interval(0.95)[0], plug_in.interval(0.95)[0], rtol=1e-10, atol=1e-10)
    draws = old.sample(X, n_imputations=3, random_state=0)
    assert np.all(np.isfinite(draws)) and np.array_equal(
        draws[:, ~np.isnan(X)], np.broadcast_to(X[~np.isnan(X)], (3, (~np.isnan(X)).sum())))
