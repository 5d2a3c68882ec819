"""The model of the "Decision surfaces" page (explorer.ui.state.decision_model) and its view's text."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import log_loss

from explorer.core.validation import BadInputError
from explorer.learn.methods import METHODS, stepped_methods
from explorer.ui.state.decision_model import (
    GRID_SIZE,
    TEST_PER_CLASS,
    DecisionModel,
    EMClassifierRun,
    fit_method,
    load_classification,
    scores_of,
    surface_of,
)


@pytest.fixture(scope="module")
def model():
    return DecisionModel(dataset="mix", method="lr_zero", n_per_class=30)


def _check_proba(p, shape):
    assert p.shape == shape
    assert np.all(p >= 0) and np.all(p <= 1)
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, atol=1e-9)


def test_surface_shapes_and_probabilities(model):
    s = model.refresh_surface()
    assert s is not None and model.surface is s
    _check_proba(s.proba, (GRID_SIZE, GRID_SIZE, 2))
    _check_proba(s.proba_y_only, (GRID_SIZE, 2))
    _check_proba(s.proba_x_only, (GRID_SIZE, 2))
    assert s.xs.shape == s.ys.shape == (GRID_SIZE,)
    (x0, x1), (y0, y1) = model.data.xlim, model.data.ylim
    assert x0 < s.xs[0] < s.xs[-1] < x1 and y0 < s.ys[0] < s.ys[-1] < y1
    assert 0 <= s.test_error <= 100 and s.test_loss > 0
    assert s.revision == model.revision


def test_strips_are_the_method_s_own_treatment_of_a_missing_feature(model):
    """Oracle: with zero imputation, P(c | y only) is the classifier at x = 0 (and P(c | x only) at y = 0)."""
    data = model.data
    est = fit_method("lr_zero", data, seed=0)
    s = surface_of(est.predict_proba, data, "lr_zero")
    np.testing.assert_allclose(s.proba_y_only, est.predict_proba(np.c_[np.zeros(GRID_SIZE), s.ys]), atol=1e-12)
    np.testing.assert_allclose(s.proba_x_only, est.predict_proba(np.c_[s.xs, np.zeros(GRID_SIZE)]), atol=1e-12)
    # and the grid is P(c | x, y) at the cell centres, rows = y
    j, i = 7, 41
    np.testing.assert_allclose(s.proba[j, i], est.predict_proba([[s.xs[i], s.ys[j]]])[0], atol=1e-12)


def test_scores_match_scikit_learn():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), size=50)
    y = rng.integers(0, 3, size=50)
    loss, err = scores_of(p, y)
    assert loss == pytest.approx(log_loss(y, p, labels=[0, 1, 2]), rel=1e-12)
    assert err == pytest.approx(100 * np.mean(p.argmax(axis=1) != y))
    # a zero probability of the true class is floored, not infinite
    assert np.isfinite(scores_of(np.array([[1.0, 0.0]]), np.array([1]))[0])


def test_synthetic_sets_follow_the_thesis_protocol():
    d = load_classification("overlap", n_per_class=20, mechanism="patterns")
    assert d.X_train.shape == (40, 2) and d.X_test.shape == (2 * TEST_PER_CLASS, 2)
    assert np.bincount(d.y_train).tolist() == [20, 20]
    miss = np.isnan(d.X_train)
    assert not miss.all(axis=1).any()  # the thesis's patterns never hide both features
    assert 0 < miss[:, 0].sum() and 0 < miss[:, 1].sum()
    np.testing.assert_array_equal(d.X_train[~miss], d.X_train_complete[~miss])  # observed values unchanged


def test_tables_are_split_per_class_and_standardised():
    d = load_classification("iris", mechanism="mcar", rate=0.2)
    assert d.columns == ("petal_length", "petal_width") and d.classes == ("0", "1", "2")
    assert np.bincount(d.y_test).tolist() == [17, 17, 17] and len(d.y_train) == 99
    np.testing.assert_allclose(np.nanmean(d.X_train, axis=0), 0.0, atol=0.25)  # standardised before amputation
    assert d.standardised
    hep = load_classification("hepatitis", mechanism="none")  # its own gaps, kept
    assert np.isnan(hep.X_train).any()


def test_table_has_every_method():
    m = DecisionModel(dataset="simple", n_per_class=10, method="lr_mean")
    rev = m.revision
    assert list(m.table["method"]) == list(METHODS) and set(m.table["status"]) == {"pending"}
    table = m.refresh_table()
    assert list(table["method"]) == list(METHODS)
    failed = table[table["status"] != "done"]
    assert failed.empty, failed[["method", "status"]].to_string()
    assert table["loss"].between(0, 5).all() and table["error_pct"].between(0, 60).all()
    assert m.table_progress() == (len(METHODS), len(METHODS))
    # a row computed for older data is dropped
    assert not m.publish_row(table.iloc[0].to_dict() | {"loss": 99.0}, rev - 1)
    assert m.table["loss"].max() < 99


def test_stepped_em_run_never_decreases_and_follows_the_data():
    name = stepped_methods()[0]
    m = DecisionModel(dataset="overlap", n_per_class=30, method=name)
    run = EMClassifierRun(model=m)
    assert run.method == name and run.iteration == 0
    objectives = [run.state.objective]
    for _ in range(8):
        if not run.step():
            break
        objectives.append(run.state.objective)
    assert run.iteration == len(objectives) - 1 >= 1
    assert np.all(np.diff(objectives) >= -1e-9 * np.abs(objectives[:-1]).max())
    s = run.surface()
    _check_proba(s.proba, (GRID_SIZE, GRID_SIZE, 2))
    assert s.iteration == run.iteration
    # oracle: P(c | y only) is the exact marginal of the class Gaussians on y (K = 1 per class)
    if METHODS[name].label.endswith("K = 1 per class"):
        st = run.state
        cov = np.asarray(st.full_covariances()) if hasattr(st, "full_covariances") else np.asarray(st.covariances)
        prior = st.weights @ st.label_probs
        dens = np.stack([norm.pdf(s.ys, st.means[k, 1], np.sqrt(cov[k, 1, 1])) for k in range(2)], axis=1)
        owner = st.label_probs.argmax(axis=1)
        expected = np.zeros((GRID_SIZE, 2))
        for k in range(len(st.weights)):
            expected[:, owner[k]] += st.weights[k] * dens[:, k]
        expected /= expected.sum(axis=1, keepdims=True)
        assert prior.shape == (2,)
        np.testing.assert_allclose(s.proba_y_only, expected, atol=1e-8)
    m.dataset = "simple"  # new data: a new run from iteration 0
    assert run.iteration == 0 and run.revision == m.revision


def test_bad_settings_give_clear_errors():
    with pytest.raises(BadInputError, match="Unknown data set 'nope'"):
        load_classification("nope")
    with pytest.raises(BadInputError, match="Column 'petal' is not in the data"):
        load_classification("iris", x_column="petal")
    with pytest.raises(BadInputError, match="both 'sepal_width'; choose two different columns"):
        load_classification("iris", x_column="sepal_width", y_column="sepal_width")
    with pytest.raises(BadInputError, match="No file has been uploaded"):
        load_classification("uploaded")
    m = DecisionModel(dataset="iris", method="lr_mean")
    before, rev = m.data, m.revision
    m.x_column = "nope"
    assert "Column 'nope' is not in the data" in m.error
    assert m.data is before and m.revision == rev  # the previous data stay
    m.x_column = "sepal_length"
    assert m.error == "" and m.data.columns == ("sepal_length", "petal_width")
    m.dataset = "wine"  # another table: its own default columns, not iris's
    assert m.error == "" and m.x_column == "" and m.data.columns == ("flavanoids", "color_intensity")
    m.param.update(dataset="iris", x_column="sepal_width")  # a link sets both at once: both are kept
    assert m.data.columns == ("sepal_width", "petal_width")
    with pytest.raises(ValueError):
        m.dataset = "not-a-data-set"
    with pytest.raises(BadInputError, match="Unknown method"):
        m.compute_surface(method="perceptron")


def test_uploads_need_a_class_column_and_are_shown_escaped():
    from explorer.ui.pages.decision_surface import DecisionView

    rng = np.random.default_rng(1)
    rows = ["<script>alert(1)</script>,b**old**,label"] + [
        f"{a:.3f},{b:.3f},{int(c)}" for a, b, c in zip(rng.normal(size=40), rng.normal(size=40), np.arange(40) % 2)]
    m = DecisionModel(dataset="simple", method="lr_mean")
    view = DecisionView(model=m, score_table=False)
    assert m.load_csv("\n".join(rows).encode(), "evil<img src=x onerror=alert(2)>.csv")
    assert m.dataset == "uploaded" and m.data.columns == ("<script>alert(1)</script>", "b**old**")
    assert m.class_columns == ["label"] and m.data.classes == ("0", "1")
    view._update_text()
    shown = view._info.object
    assert "<script>" not in shown and "&lt;script&gt;" in shown and "<img" not in shown
    assert "b\\*\\*old\\*\\*" in shown
    # a file with no column that can be a class
    cont = "a,b\n" + "\n".join(f"{x:.4f},{y:.4f}" for x, y in rng.normal(size=(30, 2)))
    assert m.load_csv(cont.encode(), "plain.csv") is False
    assert "No column of 'plain.csv' can be the class" in m.error


def test_an_upload_with_a_text_class_column_names_its_classes():
    """A CSV as a data scientist has it: the class as text ('Adelie'), other text columns, NA gaps, R's row names.
    The first text column becomes the class (codes with the levels as names), the numbers are the axes, a text column
    with too many levels is left out; the legend says the names, escaped."""
    from explorer import datasets as ds
    from explorer.ui.pages.decision_surface import DecisionView

    frame = ds.load_mixed("penguins")
    frame["tag"] = [f"<b>id{i}</b>" for i in range(len(frame))]  # an identifier: not a class, not a feature
    m = DecisionModel(dataset="simple", method="lr_mean")
    view = DecisionView(model=m, score_table=False)
    assert m.load_csv(frame.to_csv(na_rep="NA").encode(), "penguins.csv"), m.error
    assert m.dataset == "uploaded" and m.class_column == "species"
    assert m.data.classes == ("Adelie", "Chinstrap", "Gentoo")
    assert m.data.columns == ("bill_length_mm", "bill_depth_mm")  # numbers first: the default axes
    assert "tag" not in m.all_columns and {"island", "sex"} <= set(m.class_columns)
    n_train = {c: int((m.data.y_train == k).sum()) for k, c in enumerate(m.data.classes)}
    counts = frame["species"].value_counts()
    assert all(0 < n_train[c] < counts[c] for c in m.data.classes)  # a stratified split of the real labels
    m.class_column = "island"
    assert m.data.classes == ("Biscoe", "Dream", "Torgersen") and not m.error
    view._update_text()
    assert "class Biscoe" in view._legend.object
    # a second upload of numbers only: the names of the first do not leak onto it
    rng = np.random.default_rng(0)
    rows = ["a,b,label"] + [f"{x:.3f},{y:.3f},{k % 3}" for k, (x, y) in enumerate(rng.normal(size=(45, 2)))]
    assert m.load_csv("\n".join(rows).encode(), "codes.csv") and m.data.classes == ("0", "1", "2")
    # text columns none of which can be a class
    rows = ["a,b,name"] + [f"{x:.3f},{y:.3f},n{k}" for k, (x, y) in enumerate(rng.normal(size=(45, 2)))]
    assert m.load_csv("\n".join(rows).encode(), "names.csv") is False
    assert "cannot be the class" in m.error and "'name'" in m.error


def test_fits_and_scores_are_shared_between_sessions(monkeypatch):
    """Equal data (another session's model with the same settings) reuse a surface and a table row."""
    from explorer.ui.state import decision_model

    a = DecisionModel(dataset="overlap", n_per_class=15, data_seed=3, method="lr_mean")
    b = DecisionModel(dataset="overlap", n_per_class=15, data_seed=3, method="lr_mean")
    assert a.data is not b.data and a.data.fingerprint == b.data.fingerprint
    assert DecisionModel(dataset="overlap", n_per_class=15, data_seed=4).data.fingerprint != a.data.fingerprint
    fits = []
    fit_surface = decision_model.fit_surface
    monkeypatch.setattr(decision_model, "fit_surface", lambda *args: (fits.append(args[0]), fit_surface(*args))[1])
    first = a.refresh_surface()
    b.load()  # a new revision of the same data
    second = b.refresh_surface()
    assert fits == ["lr_mean"]  # fitted once
    assert second.revision == b.revision and first.revision == a.revision
    np.testing.assert_array_equal(second.proba, first.proba)
    row = decision_model.shared_score("lr_zero", a.data, 0)
    monkeypatch.setattr(decision_model, "score_method", lambda *a, **k: pytest.fail("scored again"))
    assert decision_model.known_score("lr_zero", b.data, 0) == row == decision_model.shared_score("lr_zero", b.data, 0)
    row["loss"] = -1.0  # a caller's copy: the shared row is not changed
    assert decision_model.known_score("lr_zero", b.data, 0)["loss"] != -1.0
    assert decision_model.known_score("lr_zero", b.data, 1) is None  # another seed is another fit
