"""The conditional-density page on a mixed-type table (issue 21, point 2): a missing category as bars of its levels'
probabilities under the location model, a missing number as its conditional density; the state behind it."""

from __future__ import annotations

import base64
import html
import threading
import time

import numpy as np
import pandas as pd
import panel as pn
import pytest
from bokeh.document import Document

from explorer import MixedMixtureImputer
from explorer import datasets as ds
from explorer.ui.pages import conditional as conditional_page
from explorer.ui.pages.conditional import ConditionalView, mixed_tables
from explorer.ui.plots.conditional_frames import level_bars, level_text
from explorer.ui.plots.density_slices import LevelBars
from explorer.ui.session import SessionWorker
from explorer.ui.state.data_model import MIXED_NONE, DataModel, MixedDataModel, hide_cells
from explorer.ui.state.em_model import EMModel, LocationModel
from tests._fake_session import FakeDoc
from tests._text_checks import shown


def _view(dataset="penguins", **settings) -> ConditionalView:
    """The page with iris (K = 2, fitted) and then ``dataset`` chosen in its table selector."""
    view = ConditionalView(em_model=EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3),
                                            n_components=2))
    view.fit()
    view.mixed_model.param.update(**settings)
    view.mixed_model.data_model.dataset = dataset
    return view


def _go_to(view, column: str, hidden: bool = True) -> int:
    """Move the row slider to the first incomplete row whose ``column`` is missing (hidden by the page, or one of
    the table's own gaps); returns that row."""
    table = view.mixed_model.data_model
    j = list(table.data.columns).index(column)
    for pos, r in enumerate(view._rows):
        if pd.isna(table.data.iloc[r, j]) and bool(table.hidden[r, j]) == hidden:
            view.row_position = pos
            view.feature = column
            return int(r)
    raise AssertionError(f"no row with {column} missing")


@pytest.fixture(scope="module")
def penguins():
    view = _view()
    assert view.mixed_model.result is not None
    return view


# ----------------------------------------------------------------------------- the state
def test_the_hidden_cells_are_observed_cells_and_keep_the_dtypes():
    frame = ds.load_mixed("penguins")
    data, hidden = hide_cells(frame, 0.2, np.random.default_rng(0))
    assert not hidden.flags.writeable
    assert (hidden <= frame.notna().to_numpy()).all()  # only observed cells are hidden
    np.testing.assert_array_equal(data.isna().to_numpy(), frame.isna().to_numpy() | hidden)
    assert 0.15 < hidden.sum() / frame.notna().to_numpy().sum() < 0.25
    assert list(data.dtypes) == list(frame.dtypes) and list(data["sex"].cat.categories) == ["female", "male"]
    kept = ~data.isna().to_numpy()
    assert (data.astype(object).to_numpy()[kept] == frame.astype(object).to_numpy()[kept]).all()
    # a column never loses all its observed cells
    tiny = pd.DataFrame({"a": pd.Categorical(["u", None, None]), "x": [1.0, 2.0, 3.0]})
    for seed in range(20):
        out, _ = hide_cells(tiny, 0.5, np.random.default_rng(seed))
        assert out["a"].notna().any() and out["x"].notna().any()


def test_no_table_loads_nothing_and_a_table_has_its_rows():
    table = MixedDataModel()
    assert table.dataset == MIXED_NONE and table.data is None and len(table.incomplete_rows()) == 0
    table.dataset = "msleep"
    assert table.data.shape == (83, 9) and table.categorical == ["vore", "order", "conservation"]
    np.testing.assert_array_equal(table.incomplete_rows(), np.flatnonzero(table.data.isna().any(axis=1)))
    revision = table.revision
    table.hide_rate = 0.0
    assert table.revision == revision + 1 and not table.hidden.any()
    assert table.data.isna().sum().sum() == 136  # the table's own gaps only


def test_a_new_run_forgets_the_fit_and_a_stale_fit_is_dropped():
    model = LocationModel(data_model=MixedDataModel(dataset="penguins"), n_components=2)
    run = model.run_id
    assert model.fit(run_id=run) is not None and model.result.n_rows == 344
    model.n_components = 3
    assert model.run_id == run + 1 and model.result is None
    assert model.fit(run_id=run) is None and model.result is None  # a fit of the previous run
    # settings changed while fitting: the result is not kept
    fit = MixedMixtureImputer.fit

    def slow_fit(self, X, y=None):
        out = fit(self, X)
        model.seed = 7
        return out

    MixedMixtureImputer.fit = slow_fit
    try:
        assert model.fit() is None and model.result is None
    finally:
        MixedMixtureImputer.fit = fit
    assert model.fit() is not None


# ----------------------------------------------------------------------------- the page on a mixed table
def test_the_bars_are_the_imputers_level_probabilities(penguins):
    view = penguins
    r = _go_to(view, "sex")
    table = view.mixed_model.data_model
    imputer = MixedMixtureImputer(n_components=3, covariance_type="full", max_iter=300, predictive="plugin",
                                  random_state=0).fit(table.data)
    expected = imputer.predict_proba(table.data)["sex"].iloc[r].to_numpy()
    bars = view.frames["levels"]["bars"]
    np.testing.assert_allclose(bars["proba"], expected, rtol=1e-12)
    assert bars["proba"].sum() == pytest.approx(1.0) and bars["levels"] == ["female", "male"]
    assert bars["best"] == int(np.argmax(expected))
    assert bars["truth"] == bars["levels"].index(str(table.complete.iloc[r]["sex"]))
    plot = view._levels
    np.testing.assert_allclose(plot.bars.data["top"], expected)
    assert list(plot.best.data["top"]) == [expected.max()]  # the most probable level is marked
    assert list(plot.truth.data["x"]) == [bars["truth"] + 1.0]
    assert plot.figure.xaxis.major_label_overrides == {1: "female", 2: "male"}
    assert plot.figure.title.text == f"row {r}: P(sex | observed)"
    assert view._pane_levels.visible and view._level_line.visible and not view._pane1d.visible
    best = bars["levels"][bars["best"]]
    assert shown(view._level_line).startswith(f"P(sex | observed): {best} {expected.max():.3f}")
    assert "true level" in shown(view._level_line)
    line = view._table.object.set_index("feature").loc["sex"]
    assert line["imputed"] == best and line["truth"] == str(table.complete.iloc[r]["sex"])
    # the weights given every observed cell of the row, categories included
    cm = imputer.conditional(table.data.iloc[[r]])
    np.testing.assert_allclose(view.frames["weights"]["posterior"], cm.weights[0], rtol=1e-10)
    np.testing.assert_allclose(view.frames["weights"]["prior"], imputer.weights_)


def test_a_real_gap_has_no_true_level(penguins):
    view = penguins
    _go_to(view, "sex", hidden=False)
    assert view.frames["levels"]["bars"]["truth"] is None and len(view._levels.truth.data["x"]) == 0
    assert "true level" not in shown(view._level_line)


def test_a_missing_number_shows_its_conditional_density_given_the_categories_too(penguins):
    view = penguins
    r = _go_to(view, "body_mass_g")
    table = view.mixed_model.data_model
    imputer = view.mixed_model.result.imputer
    cm = imputer.conditional(table.data.iloc[[r]])
    f = imputer.numeric_columns_.index("body_mass_g")
    s = view.frames["slice1d"]["slice"]
    np.testing.assert_allclose(s["density"], cm.marginal_pdf(0, f, s["grid"])[0], rtol=1e-10)
    assert s["mean"] == pytest.approx(cm.mean()[0, f]) and s["truth"] == table.complete.iloc[r]["body_mass_g"]
    assert view._pane1d.visible and not view._pane_levels.visible and not view._level_line.visible
    assert view.frames["slice1d"]["title"] == f"row {r}: p(body_mass_g | observed)"
    line = view._table.object.set_index("feature").loc["body_mass_g"]
    assert line["imputed"] == f"{cm.mean()[0, f]:.4g}" and line["95% interval"].startswith("[")


def test_the_page_switches_its_widgets_and_comes_back_to_the_numeric_data():
    view = _view("auto_mpg")
    assert view.mixed and "location model, K = 3" in view._status.object and "Converged" in view._status.object
    assert not view._numeric_data.visible and view._mixed_data_box.visible and view._mixed_box.visible
    assert not view._kind.visible and not view._em_box.visible and not view._downloads_box.visible
    assert not view._source.visible and not view._feature2.visible and view._mixed_intro.visible
    assert not view._intro.visible
    view.mixed_model.n_components = 2  # refitted at once (auto-refit)
    assert "K = 2" in view._status.object and len(view.frames["weights"]["posterior"]) == 2
    fit = view.mixed_model.result
    assert view.fit() and view.mixed_model.result is fit  # fitted already: fit() has nothing to do
    view._fit_button.clicks += 1  # the Fit button fits again (same seed: the same model)
    assert view.mixed_model.result is not fit and "K = 2" in view._status.object
    np.testing.assert_allclose(view.mixed_model.result.imputer.weights_, fit.imputer.weights_)
    view.mixed_model.data_model.dataset = MIXED_NONE
    assert not view.mixed and view._numeric_data.visible and view._em_box.visible and view._kind.visible
    assert not view._pane_levels.visible and view._pane1d.visible and view._intro.visible
    assert "location" not in view._status.object and "Converged" in view._status.object
    assert view.frames["slice1d"]["title"].startswith("row ")
    assert len(view._rows) == view.em_model.data_model.data.missing.any(axis=1).sum()


def test_a_table_without_gaps_says_so_and_a_failed_fit_is_readable(monkeypatch):
    view = _view("abalone", n_components=2)
    view.source = "custom row"  # left over from the numeric data: not where the message goes
    view.mixed_model.data_model.hide_rate = 0.0  # abalone has no gap of its own
    assert len(view._rows) == 0 and view._row.disabled
    assert "No cell of this table is missing" in shown(view._row_info) and not view._custom_error.visible
    view.mixed_model.data_model.hide_rate = 0.1
    assert len(view._rows) > 0 and not view._row.disabled and "Converged" in view._status.object

    def broken(self, X, y=None):
        raise np.linalg.LinAlgError("matrix is not positive definite")

    monkeypatch.setattr(MixedMixtureImputer, "fit", broken)
    view.mixed_model.n_components = 3
    assert view._em_error.visible and "could not be fitted: matrix is not positive definite" in shown(view._em_error)
    assert "No model" in view._status.object and "No fitted model" not in shown(view._row_info)
    assert view._pane1d.visible and not view._pane_levels.visible and len(view.frames["weights"]["prior"]) == 0


def test_many_levels_are_slanted_and_a_frame_only_changes_data():
    """Issue 19: the bars' figure is made once; rows, features, K and the hidden cells change its data only."""
    view = _view("msleep")
    doc = Document()
    doc.add_root(pn.panel(view).get_root(doc))
    _go_to(view, "vore")
    before = {m.id for m in doc.models}
    figure = {m.id for m in view._levels.figure.references()}
    _go_to(view, "conservation")
    assert view._levels.figure.xaxis.major_label_orientation == "horizontal"
    _go_to(view, "brainwt")
    view.mixed_model.n_components = 2
    view.mixed_model.data_model.hide_rate = 0.2
    _go_to(view, "order")
    assert len(view.frames["levels"]["bars"]["levels"]) == 19
    assert view._levels.figure.xaxis.major_label_orientation == 0.8
    assert {m.id for m in doc.models} == before and {m.id for m in view._levels.figure.references()} == figure


def test_level_names_and_columns_are_text_wherever_they_are_shown(monkeypatch):
    level, column = "<b>x</b>", "<i>kind</i>"
    rng = np.random.default_rng(0)
    kind = rng.choice([level, "plain"], size=80)
    frame = pd.DataFrame({column: pd.Categorical(kind, categories=sorted({level, "plain"})),
                          "u": np.where(kind == level, 0.0, 4.0) + rng.normal(size=80), "v": rng.normal(size=80)},
                         index=pd.Index([f"<img src=x onerror=alert({i})>" for i in range(80)], name="name"))
    monkeypatch.setattr(ds, "load_mixed", lambda name: frame.copy())
    view = _view("penguins", n_components=2)
    view.mixed_model.data_model.hide_rate = 0.3
    _go_to(view, column)
    assert view.feature == column
    line = view._level_line.object
    assert "<b>" not in line and "<i>" not in line and level in shown(line) and column in shown(line)
    assert "<img" not in view._row_info.object and "<img src=x" in shown(view._row_info)
    # the table: pandas escapes every cell (the pane then escapes the whole HTML once more for its srcdoc)
    table = html.unescape(view._table._transform_object(view._table.object)["object"])
    assert "<b>x</b>" not in table and "<i>kind</i>" not in table and "&lt;b&gt;x&lt;/b&gt;" in table
    # Bokeh draws tick labels and titles as canvas text: the raw strings are what the reader sees
    assert level in view._levels.figure.xaxis.major_label_overrides.values()
    assert view._levels.figure.title.text.endswith(f"P({column} | observed)")


def test_level_bars_and_their_text():
    frame = level_bars(["a", "b", "c"], [0.2, 0.5, 0.3], truth="c")
    assert frame["best"] == 1 and frame["truth"] == 2
    assert level_bars(["a"], [1.0], truth="zz")["truth"] is None  # a level the model does not know
    with pytest.raises(ValueError):
        level_bars(["a", "b"], [1.0])
    text = shown(level_text("col", frame))
    assert text == "P(col | observed): b 0.500 · c 0.300 · a 0.200 — true level: c (P = 0.300)"
    many = level_bars([f"l{i}" for i in range(12)], np.full(12, 1 / 12))
    assert shown(level_text("c", many, max_levels=3)).endswith("… 9 more")
    bars = LevelBars()
    bars.update({"bars": level_bars([], np.zeros(0)), "xlabel": "x", "title": "none"})
    assert len(bars.bars.data["top"]) == 0 and bars.figure.xaxis.major_label_overrides == {1: ""}


def test_the_selector_offers_every_mixed_table():
    options = mixed_tables()
    assert list(options.values()) == [MIXED_NONE] + [info.name for info in ds.list_mixed()]
    view = ConditionalView(em_model=EMModel(data_model=DataModel(dataset="iris"), n_components=2), auto_fit=False)
    assert view._table_choice.options == options and not view.mixed and not view._mixed_data_box.visible
    assert view.mixed_model.data_model.data is None  # nothing loaded until a table is chosen


# ----------------------------------------------------------------------------- served: the session's worker
def test_a_served_fit_of_the_table_runs_on_the_sessions_worker(monkeypatch):
    doc = FakeDoc()
    monkeypatch.setattr(conditional_page, "served_doc", lambda: doc)
    worker = SessionWorker.of(doc)
    try:
        view = ConditionalView(em_model=EMModel(data_model=DataModel(dataset="iris"), n_components=2),
                               auto_fit=False)
        doc.run_callbacks()
        threads = []
        fit = LocationModel.fit
        monkeypatch.setattr(LocationModel, "fit", lambda self, run_id=None: (
            threads.append(threading.current_thread().name), fit(self, run_id))[1])
        view.auto_fit = True
        view.mixed_model.data_model.dataset = "penguins"
        assert view._progress.visible and view._status.object.startswith("Fitting the location model")
        deadline = time.monotonic() + 60
        while worker.jobs_done < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert threads == ["explorer-session-worker"] and view._progress.visible  # drawn on the loop only
        doc.run_callbacks()
        assert "Converged" in view._status.object and not view._progress.visible and "levels" in view.frames
    finally:
        worker.stop()


# ----------------------------------------------------------------------------- an uploaded CSV with text columns
HEP_LIKE = (b",outcome,age,sex,bilirubin,albumin\n1,live,30,female,1.0,4.0\n2,live,50,male,0.9,NA\n"
            b"3,die,78,male,?,4.0\n4,live,31,NA,0.7,4.0\n5,die,34,female,1.0,NA\n6,live,34,female,0.9,4.0\n7,die,51,male,NA,3.5\n"
            b"8,live,23,female,1.0,4.2\n9,live,39,male,0.7,4.4\n10,die,30,female,1.5,3.9\n")


def test_a_csv_with_text_columns_is_read_as_a_table_with_categories():
    from explorer.ui.state.data_model import read_table_with_categories

    frame = read_table_with_categories(HEP_LIKE)
    assert list(frame.columns) == ["outcome", "age", "sex", "bilirubin", "albumin"]  # R's row names: the index
    assert str(frame["sex"].dtype) == "category" and list(frame["sex"].cat.categories) == ["female", "male"]
    assert frame["sex"].isna().sum() == 1 and frame["bilirubin"].isna().sum() == 2  # NA and ? are gaps
    assert read_table_with_categories(b"a,b\n1,2\n3,4\n") is None  # numbers only: the numeric upload's
    assert read_table_with_categories(b"") is None and read_table_with_categories(b"\x00\xff\x00") is None


def test_a_table_given_to_the_mixed_model_is_its_uploaded_choice():
    from explorer.ui.state.data_model import MIXED_UPLOADED, read_table_with_categories

    frame = read_table_with_categories(HEP_LIKE)
    table = MixedDataModel(hide_rate=0.2, mask_seed=3)
    assert table.use_table(frame, "hep.csv") and table.dataset == MIXED_UPLOADED and table.uploaded_name == "hep.csv"
    assert table.data.shape == frame.shape and not table.error
    own = frame.isna().to_numpy()
    assert table.hidden.any() and not (table.hidden & own).any()  # hidden cells are observed cells of the file
    observed = ~own & ~table.hidden
    for j, col in enumerate(frame.columns):  # observed values are never altered
        np.testing.assert_array_equal(table.data[col].to_numpy()[observed[:, j]], frame[col].to_numpy()[observed[:, j]])
    revision = table.revision
    table.hide_rate = 0.0  # the settings apply to the uploaded table as to the built-in ones
    assert table.revision > revision and not table.hidden.any() and table.data.isna().sum().sum() == own.sum()
    # a second upload replaces the first (the selector already says "uploaded")
    assert table.use_table(frame.iloc[:6], "six.csv") and table.data.shape[0] == 6 and table.uploaded_name == "six.csv"
    # a table too small to use: the error says so and the shown table stays
    assert not table.use_table(frame.iloc[:1], "one.csv")
    assert "one.csv" in table.error and table.data.shape[0] == 6
    # a link naming the uploaded table in a session without one: a readable error, nothing loaded
    fresh = MixedDataModel(dataset=MIXED_UPLOADED)
    assert fresh.data is None and "No table with categories has been uploaded" in fresh.error


def test_the_conditional_page_takes_an_uploaded_csv_with_text_columns():
    """The page's upload routes a CSV with text columns to the location model (the numeric data stay as they were);
    a CSV of numbers still goes to the numeric model."""
    from explorer.ui.state.data_model import MIXED_UPLOADED

    view = ConditionalView(em_model=EMModel(data_model=DataModel(dataset="iris", mechanism="mcar", rate=0.3),
                                            n_components=2))
    view.fit()
    view.controls._on_upload(type("E", (), {"new": {"name": "hep <b>.csv", "size": len(HEP_LIKE),
                                                      "data": base64.b64encode(HEP_LIKE).decode()}})())
    table = view.mixed_model.data_model
    assert view.mixed and table.dataset == MIXED_UPLOADED and table.uploaded_name == "hep <b>.csv"
    assert view.em_model.data_model.dataset == "iris" and not view.em_model.data_model.error
    label = next(k for k, v in view._table_choice.options.items() if v == MIXED_UPLOADED)
    assert label == "uploaded hep <b>.csv: 10 rows, categories outcome, sex"  # a Select option: text, not markup
    assert view.mixed_model.result is not None  # the location model was fitted (here and now, no server)
    assert view.mixed_model.result.imputer.n_components_ >= 1
    # the table's own upload (the numeric controls are hidden while a table is shown): another table replaces it
    view._on_table_upload(type("E", (), {"new": {"name": "five.csv", "size": len(HEP_LIKE),
                                                   "data": base64.b64encode(b"\n".join(HEP_LIKE.split(b"\n")[:6]))
                                                   .decode()}})())
    assert view.mixed and table.uploaded_name == "five.csv" and table.data.shape[0] == 5
    # a CSV of numbers goes to the numeric model, and the page shows it
    csv = b"x,y\n1,2\n2,?\n3,5\n4,3\n5,7\n6,1\n"
    view._on_table_upload(type("E", (), {"new": {"name": "num.csv", "size": len(csv),
                                                   "data": base64.b64encode(csv).decode()}})())
    assert not view.mixed and view.em_model.data_model.dataset == "uploaded"
    assert not view.em_model.data_model.error and view.em_model.data_model.data.n_features == 2
    # and on the numeric controls too
    view.controls._on_upload(type("E", (), {"new": {"name": "num2.csv", "size": len(csv),
                                                      "data": base64.b64encode(csv).decode()}})())
    assert not view.mixed and view.em_model.data_model.dataset == "uploaded" and not view.em_model.data_model.error
    # a file refused in the browser for its size: the numeric data say so, nothing else changes
    view.controls._on_upload(type("E", (), {"new": {"name": "big.csv", "size": 50 * 2**20, "data": None}})())
    assert "big.csv" in view.em_model.data_model.error and view.em_model.data_model.data.n_features == 2


def test_a_link_to_an_uploaded_table_says_to_upload_one():
    """mixed_dataset=uploaded in a link, in a session without an upload: the selector shows that choice (not another
    one) and the error says what to do."""
    from explorer.ui.state.data_model import MIXED_UPLOADED

    view = ConditionalView()
    view.mixed_model.data_model.dataset = MIXED_UPLOADED
    assert view._table_choice.value == MIXED_UPLOADED
    label = next(k for k, v in view._table_choice.options.items() if v == MIXED_UPLOADED)
    assert label == "uploaded: no file uploaded in this session"
    assert "No table with categories has been uploaded" in view.mixed_model.data_model.error
