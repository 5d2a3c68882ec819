"""The pages' notebook layout (explorer/ui/components/notebook.py) and what keeps them live in Jupyter.

The browser side (JupyterLab, offline, Step / Play) is tests/browser/test_jupyterlab.py.
"""

from __future__ import annotations

import asyncio
import threading

import panel as pn
import param
import pytest
from bokeh.document import Document
from pyviz_comms import Comm

from explorer.ui.components import notebook as _notebook
from explorer.ui.components.notebook import NotebookPage, notebook_layout, settings_sections
from explorer.ui.pages.em_playground import EMPlayground
from explorer.ui.components.player import StepPlayer


def _sidebar_and_main():
    player = StepPlayer(models=[])
    sidebar = pn.Column("### Run", player, "### Model", pn.widgets.IntSlider(label="K"),
                        pn.pane.Markdown("Covariance"), pn.widgets.Select(options=["full"]),
                        "### Data", pn.widgets.Select(options=["iris"]))
    plots = [pn.Column(pn.pane.Markdown(f"plot {i}"), sizing_mode="stretch_width") for i in range(3)]
    main = pn.Column(pn.pane.Markdown("info"), pn.Row(*plots, sizing_mode="stretch_width"),
                     pn.Row(pn.pane.Markdown("a"), pn.pane.Markdown("b"), pn.pane.Markdown("c")),
                     sizing_mode="stretch_width")
    return sidebar, main


def test_sections_cut_at_headings():
    sidebar, _ = _sidebar_and_main()
    sections = settings_sections(sidebar)
    assert [s[0].object for s in sections] == ["### Run", "### Model", "### Data"]
    assert [len(s) for s in sections] == [2, 4, 2]  # "Covariance" is not a heading
    plain = pn.Column(pn.widgets.Select(), pn.widgets.Button())
    assert [len(s) for s in settings_sections(plain)] == [1, 1]  # no headings: one section per item


def test_run_controls_above_a_folded_card_and_plots_two_per_row():
    sidebar, main = _sidebar_and_main()
    before = (list(sidebar.objects), list(main.objects))
    page = notebook_layout(sidebar, main)
    assert isinstance(page, NotebookPage)
    run, card, body = page.objects
    assert isinstance(run, pn.FlexBox) and len(run.objects) == 1  # the player, without its heading
    assert isinstance(card, pn.Card) and card.collapsed and card.title == "Settings: Model · Data"
    grid = body.objects[1]
    assert isinstance(grid, pn.GridBox) and grid.ncols == 2 and grid.objects == main.objects[1].objects
    assert isinstance(body.objects[2], pn.Row)  # fixed-size items keep their row
    assert (list(sidebar.objects), list(main.objects)) == before  # the served sidebar and main are untouched


def test_without_run_controls_the_card_is_open():
    page = notebook_layout(pn.Column(pn.widgets.Select(), pn.widgets.Select()), pn.Column("main"))
    card = page.objects[0]
    assert isinstance(card, pn.Card) and not card.collapsed and card.title == "Settings"


def test_every_page_uses_it_and_the_player_is_found_in_its_section():
    view = EMPlayground()
    layout = view.__panel__()
    assert isinstance(layout, NotebookPage)
    buttons = [b.name for b in layout.objects[0].select(pn.widgets.Button)]
    assert "Step" in buttons and "Reset" in buttons
    assert layout.objects[2].objects[-1] is view.main.objects[-1]  # the same explanation pane, not a copy


@pytest.mark.parametrize(("comm", "inline", "expected"), [(None, True, None), (Comm(), False, None),
                                                          (Comm(), True, "/panel_dist/")])
def test_updates_load_stylesheets_from_the_jupyter_server_only_inline_in_a_notebook(monkeypatch, comm, inline,
                                                                                      expected):
    monkeypatch.setattr(pn.config, "inline", inline)
    monkeypatch.delenv("JUPYTERHUB_SERVICE_PREFIX", raising=False)
    doc = Document()
    NotebookPage(pn.pane.Markdown("x")).get_root(doc, comm=comm)
    assert doc._template_variables.get("dist_url") == expected


def test_dist_url_follows_the_jupyterhub_prefix(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/ada/")
    assert _notebook.jupyter_dist_url() == "/user/ada/panel_dist/"


class _SlowModel:
    """A model whose step takes longer than the player's period (a heavy page in a notebook)."""

    finished = False
    iteration = 0

    def step(self):
        import time

        time.sleep(0.06)
        self.iteration += 1
        return True

    try_step = step

    def reset(self):
        self.iteration = 0


def test_playing_outside_a_server_leaves_the_event_loop_free_for_pause():
    """In Jupyter a tick slower than the period must still let the kernel read the Pause click."""
    model = _SlowModel()
    player = StepPlayer(models=[model], period=20)
    seen = []

    async def main():
        player.playing = True

        async def other_work():  # stands for the kernel reading a comm message (the Pause click)
            for _ in range(5):
                await asyncio.sleep(0)
                seen.append(model.iteration)
            player.playing = False

        await asyncio.wait_for(other_work(), timeout=5)
        stopped_at = model.iteration
        await asyncio.sleep(0.3)
        return stopped_at

    result = []  # in a thread: a starved loop must fail the test, not hang it
    runner = threading.Thread(target=lambda: result.append(asyncio.run(main())), daemon=True)
    runner.start()
    runner.join(timeout=20)
    assert result, "the ticks never let the event loop run anything else (Pause could not arrive)"
    stopped_at = result[0]
    assert len(seen) == 5 and player.timer is None
    assert model.iteration == stopped_at  # paused: no tick after Pause


@pytest.mark.parametrize("comm", [None, Comm()])
def test_rewind_slider_sets_the_release_value_only_outside_jupyter(comm):
    """In Jupyter the browser sends a value_throttled set by the kernel back, late: Play would rewind."""
    from explorer.ui.pages.variational import _RewindSlider

    slider = _RewindSlider(start=0, end=10, value=0)
    model = slider.get_root(Document(), comm=comm)
    with param.edit_constant(slider):
        slider.param.update(value=7, value_throttled=7)  # as the page does after a tick
    assert model.value == 7
    assert model.value_throttled == (0 if comm is not None else 7)
