"""The download buttons of the Data & mechanism and Conditional pages, clicked in headless chromium.

Each click is captured with ``page.expect_download()`` and the file parsed back (CSV with pandas,
Parquet with pyarrow, netCDF with xarray's scipy engine): the observed entries equal the data's,
no NaN. Screenshots go to /tmp (not committed) for a look at the buttons' placement.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import xarray as xr

from explorer.ui.state.data_model import DataModel

from tests.browser._helpers import wait_for_title

SHOTS = Path("/tmp/explorer-download-shots")
EXACT = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


def _iris(mechanism: str, rate: float):
    """The data the page shows by default (the same seeds: the pages' DataModel defaults)."""
    return DataModel(dataset="iris", mechanism=mechanism, rate=rate).data


def _download(page, button_name: str) -> tuple[str, bytes]:
    button = page.get_by_role("button", name=button_name)
    button.scroll_into_view_if_needed()
    with page.expect_download(timeout=30_000) as info:
        button.click()
    download = info.value
    return download.suggested_filename, Path(download.path()).read_bytes()


def _check_long_table(frame: pd.DataFrame, data, m: int) -> None:
    columns = list(data.columns)
    assert list(frame.columns[:2]) == ["imputation", "row"]
    assert sorted(frame.imputation.unique()) == list(range(m + 1))
    obs = ~data.missing
    for k in range(m + 1):
        block = frame[frame.imputation == k][columns].to_numpy(dtype=float)
        assert np.isfinite(block).all()
        assert np.array_equal(block[obs], data.values[obs])


def test_data_page_downloads(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"data_mechanism": "apps/data_mechanism.py"})
    page = new_page(viewport={"width": 1440, "height": 900}, accept_downloads=True)
    errors = watch_errors(page)
    page.goto(f"{url}/data_mechanism")
    wait_for_bokeh(page)
    wait_for_title(page, "Missingness matrix (by pattern)")
    data = _iris("nmar_lowest", 0.3)
    page.get_by_text("GaussianMixtureImputer()").first.wait_for()  # the note says what imputes

    # masked data (CSV, the default format): the gaps are empty cells
    name, content = _download(page, "Masked data (with gaps)")
    assert name == "iris_nmar_lowest_masked.csv"
    masked = pd.read_csv(io.BytesIO(content), **EXACT)
    assert list(masked.columns) == list(data.columns)
    assert np.array_equal(np.isnan(masked.to_numpy()), data.missing)

    # m = 3 imputations as Parquet
    page.get_by_role("button", name="Parquet").click()
    m_input = page.get_by_label("Multiple imputations m")
    m_input.fill("3")
    m_input.press("Enter")
    page.wait_for_timeout(300)
    name, content = _download(page, "m imputations")
    assert name == "iris_nmar_lowest_imputed_m3.parquet"
    _check_long_table(pq.read_table(io.BytesIO(content)).to_pandas(), data, 3)
    page.get_by_text(re.compile(r"Last file: iris_nmar_lowest_imputed_m3\.parquet")).wait_for()
    SHOTS.mkdir(parents=True, exist_ok=True)
    screenshot(page, "downloads_data_mechanism", directory=SHOTS)
    screenshot(page.locator(".downloads").first, "downloads_data_mechanism_card", directory=SHOTS)
    errors.assert_none()


def test_conditional_page_downloads(serve_app, new_page, watch_errors, wait_for_bokeh, screenshot):
    url = serve_app({"conditional": "apps/conditional.py"})
    page = new_page(viewport={"width": 1440, "height": 900}, accept_downloads=True)
    errors = watch_errors(page)
    page.goto(f"{url}/conditional")
    wait_for_bokeh(page)
    page.get_by_text(re.compile(r"(Converged after|Stopped at max_iter) \d+ iterations?")).wait_for()
    wait_for_title(page, "row 0: p(")
    data = _iris("mcar", 0.3)

    # netCDF with the imputation dimension, m = 5 (the default)
    page.get_by_role("button", name="netCDF").click()
    page.wait_for_timeout(300)
    name, content = _download(page, "m imputations")
    assert name == "iris_mcar_em_K3_imputed_m5.nc"
    ds = xr.open_dataset(io.BytesIO(content), engine="scipy").load()
    assert ds["samples"].dims == ("imputation", "row", "column") and ds.sizes["imputation"] == 5
    assert [str(c) for c in ds["column"].values] == list(data.columns)
    obs = ~data.missing
    for values in (ds["imputed"].values, *ds["samples"].values):
        assert np.isfinite(values).all() and np.array_equal(values[obs], data.values[obs])
    assert np.array_equal(ds["missing"].values.astype(bool), data.missing)

    # the single imputation as CSV
    page.get_by_role("button", name="CSV").click()
    page.wait_for_timeout(300)
    name, content = _download(page, "Imputed data")
    assert name == "iris_mcar_em_K3_imputed.csv"
    _check_long_table(pd.read_csv(io.BytesIO(content), **EXACT), data, 0)
    page.get_by_text("the EM mixture shown (K = 3").last.wait_for()
    SHOTS.mkdir(parents=True, exist_ok=True)
    screenshot(page, "downloads_conditional", directory=SHOTS)
    screenshot(page.locator(".downloads").first, "downloads_conditional_card", directory=SHOTS)
    errors.assert_none()
