"""One browser session's user data: uploaded on one page, offered by every page that can use it."""

from __future__ import annotations

import numpy as np

from explorer.ui.state.data_model import UPLOADED, DataModel
from explorer.ui.state.session_data import SessionData
from explorer.ui.components.data_controls import DataControls
from explorer.ui.pages.em_playground import EMPlayground
from explorer.ui.pages.variational import VariationalPlayground
from tests._text_checks import shown

CSV = b"a,b,c,d\n" + b"\n".join(f"{i},{(i * 7) % 11},{i % 5},{(i * 3) % 7 if i % 4 else ''}".encode()
                                 for i in range(1, 41)) + b"\n"


def test_an_upload_on_one_page_is_offered_by_the_others():
    session = SessionData()
    data_page = DataModel(dataset="iris", session=session)
    other = DataModel(dataset="wine", session=session)
    controls = DataControls(model=other)
    assert UPLOADED not in controls._dataset.options
    assert data_page.load_csv(CSV, "mine.csv") and data_page.dataset == UPLOADED
    assert other.dataset == "wine" and other.has_uploaded  # offered, not forced
    assert UPLOADED in controls._dataset.options
    other.dataset = UPLOADED
    assert other.data.name == "mine.csv" and other.data.n_samples == 40 and other.error == ""
    np.testing.assert_array_equal(other.data.missing, data_page.data.missing)


def test_a_new_upload_replaces_the_data_of_every_page_showing_uploaded():
    session = SessionData()
    a, b = DataModel(dataset="iris", session=session), DataModel(dataset="iris", session=session)
    a.load_csv(CSV, "first.csv")
    b.dataset = UPLOADED
    a.load_csv(b"x,y\n1,2\n3,4\n5,\n", "second.csv")
    assert b.data.name == "second.csv" and b.data.n_features == 2


def test_pages_without_a_shared_session_keep_their_uploads_to_themselves():
    a, b = DataModel(dataset="iris"), DataModel(dataset="iris")
    a.load_csv(CSV, "mine.csv")
    assert a.has_uploaded and not b.has_uploaded


def test_a_2d_page_draws_two_columns_of_wider_data_and_lets_the_user_pick_them():
    session = SessionData()
    DataModel(dataset="iris", session=session).load_csv(CSV, "mine.csv")
    page = EMPlayground(data_model=DataModel(dataset="ghahramani_bivariate", session=session))
    assert not page._pair_box.visible
    page.data_model.dataset = UPLOADED
    assert page.data_model.data.columns == ("a", "b") and page._pair_box.visible
    assert page._x_col.options == ["a", "b", "c", "d"] and "needs 2-D data" not in shown(page._alert)
    page._y_col.value = "d"
    assert page.data_model.data.columns == ("a", "d") and page.data_model.columns == ["a", "d"]
    page._x_col.value = "d"  # the same column twice: the pair swaps
    assert page.data_model.columns == ["d", "a"]
    page.player.step()
    assert page.em.iteration == 1 and page.em.error == ""


def test_the_variational_page_offers_the_session_upload():
    session = SessionData()
    DataModel(dataset="iris", session=session).load_csv(CSV, "mine.csv")
    page = VariationalPlayground(data_model=DataModel(dataset="three_blobs", session=session), n_components=3)
    assert UPLOADED in page._data_controls._dataset.options


def test_a_link_naming_uploaded_data_says_the_file_must_be_uploaded_again():
    m = DataModel(dataset="iris")
    m.dataset = UPLOADED  # what a shared link with dataset=uploaded does in a new session
    assert "upload the file again" in m.error.lower() and "cannot travel in a link" in m.error
    assert m.data.name == "iris" and m.suggestion["settings"] == {"dataset": "iris"}
    assert m.apply_suggestion() and m.dataset == "iris" and m.error == ""
