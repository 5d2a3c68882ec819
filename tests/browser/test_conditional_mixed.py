"""The served "Conditional density slices" page on a mixed-type table (issue 21, point 2): a missing categorical cell
drawn as bars of its levels' probabilities under the location model, in headless chromium at 1440 x 900."""

from __future__ import annotations

import numpy as np

from explorer import MixedMixtureImputer
from explorer.ui.pages.conditional import mixed_tables
from explorer.ui.state.data_model import MixedDataModel
from tests.browser._helpers import select_option, wait_for_title
from tests.browser.test_conditional import STATUS, status_text, wait_until

# the bars of the figure whose title contains ``text``: every quad's tops, the tick labels, the star, the title
BARS_JS = """(text) => {
  const fig = [...Bokeh.documents[0].all_models].find(
      m => m.type == 'Figure' && m.title && typeof m.title.text == 'string' && m.title.text.includes(text));
  if (!fig) return null;
  const col = (r, k) => {
    const d = r.data_source.data;
    return Array.from((d instanceof Map ? d.get(k) : d[k]) || []);
  };
  const quads = fig.renderers.filter(r => r.glyph && r.glyph.type == 'Quad');
  const stars = fig.renderers.filter(r => r.glyph && r.glyph.type == 'Scatter');
  const o = fig.below.find(a => a.type == 'LinearAxis').major_label_overrides;
  const labels = o instanceof Map ? Object.fromEntries(o) : o;
  return {title: fig.title.text, tops: quads.map(r => col(r, 'top')), labels: labels,
          star: stars.map(r => col(r, 'x'))};
}"""


def test_a_missing_category_of_a_mixed_table_is_drawn_as_bars(serve_app, new_page, watch_errors, wait_for_bokeh,
                                                               screenshot):
    url = serve_app({"conditional": "apps/conditional.py"})
    page = new_page(viewport={"width": 1440, "height": 900})
    errors = watch_errors(page)
    page.goto(f"{url}/conditional")
    wait_for_bokeh(page)
    page.get_by_text(STATUS).wait_for()
    wait_for_title(page, "row 0: p(")

    # the penguins: the location model is fitted on the session's worker, then the first incomplete row is shown,
    # row 1, whose island the page hid (so its true level is known)
    labels = {v: k for k, v in mixed_tables().items()}
    select_option(page, "penguins:", labels["penguins"])
    wait_until(lambda: "location model, K = 3" in status_text(page) and STATUS.search(status_text(page)), page)
    wait_for_title(page, "row 1: P(island | observed)")
    page.wait_for_function("() => window.location.search.includes('mixed_dataset=penguins')")
    wait_for_bokeh(page)

    # the bars are the imputer's P(island | the rest of row 1)
    table = MixedDataModel(dataset="penguins")
    imputer = MixedMixtureImputer(n_components=3, covariance_type="full", max_iter=300, predictive="plugin",
                                  random_state=0)  # the page shows the fit (its LocationModel is plug-in)
    expected = imputer.fit(table.data).predict_proba(table.data)["island"].iloc[1].to_numpy()
    bars = page.evaluate(BARS_JS, "P(island | observed)")
    assert bars["title"] == "row 1: P(island | observed)"
    all_bars, best = bars["tops"]
    np.testing.assert_allclose(all_bars, expected, rtol=1e-9)
    assert abs(sum(all_bars) - 1) < 1e-9
    assert best == [max(expected)]  # the most probable level, darker
    assert bars["labels"] == {"1": "Biscoe", "2": "Dream", "3": "Torgersen"}
    truth = ["Biscoe", "Dream", "Torgersen"].index(str(table.complete.iloc[1]["island"]))
    assert bars["star"] == [[truth + 1.0]]  # the true level, starred
    line = page.locator(".level-line p").first
    line.get_by_text("P(island | observed):", exact=False).wait_for()
    assert "true level: Torgersen" in line.inner_text()
    # the sidebar shows the table's settings and the location model's, not the numeric ones
    page.get_by_text("Cells hidden at random", exact=False).wait_for()
    # (the numeric settings are hidden by the same update, which can land a moment after the mixed ones show)
    page.get_by_text("Mechanism", exact=True).first.wait_for(state="hidden", timeout=20_000)
    page.wait_for_timeout(300)  # let the canvas repaint
    assert screenshot(page, "conditional_mixed").exists()  # docs/pages.md's picture (scripts/refresh_screenshots.sh)

    # a row with a real gap in a category and numbers missing: the category first, a number on request
    select_option(page, "msleep:", labels["msleep"])
    wait_until(lambda: "location model" in status_text(page) and STATUS.search(status_text(page)), page)
    wait_for_title(page, "row 0: p(sleep_rem | observed)")  # row 0 misses numbers only: their density
    select_option(page, "sleep_rem", "brainwt")
    wait_for_title(page, "row 0: p(brainwt | observed)")

    # back to the numeric data: the Gaussian mixture's page as it was
    select_option(page, "penguins:", labels["none"])
    wait_for_title(page, "row 0: p(")
    wait_until(lambda: STATUS.search(status_text(page)) and "location" not in status_text(page), page)
    page.get_by_text("Mechanism", exact=True).first.wait_for()
    wait_for_bokeh(page)
    errors.assert_none()


def test_a_link_to_a_mixed_table_opens_it(serve_app, new_page, watch_errors, wait_for_bokeh):
    url = serve_app({"conditional": "apps/conditional.py"})
    page = new_page(viewport={"width": 1440, "height": 900})
    errors = watch_errors(page)
    page.goto(f"{url}/conditional?mixed_dataset=msleep&mixed_n_components=2")
    wait_for_bokeh(page)
    wait_until(lambda: "location model, K = 2" in status_text(page) and STATUS.search(status_text(page)), page)
    wait_for_title(page, "row 0: p(sleep_rem | observed)")
    page.get_by_text("Cells hidden at random", exact=False).wait_for()
    errors.assert_none()
