"""URL state (explorer/ui/url.py) and user-text escaping (explorer/ui/text.py), without a server."""

from __future__ import annotations

import html as _html

import param
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.ui.state.data_model import DataModel
from explorer.ui.text import html, md, shorten
from explorer.ui.url import MAX_SAFE_INTEGER, UrlState, UrlValueError, parse_value, read_query


class Knobs(param.Parameterized):
    seed = param.Integer(default=0, bounds=(0, 2**32 - 1))
    rate = param.Number(default=0.3, bounds=(0.0, 0.95))
    kind = param.Selector(default="a", objects=["a", "b", "<b>"])
    k = param.Selector(default=1, objects=[1, 2, 3])
    flag = param.Boolean(default=False)
    extra = param.Dict(default={})
    pair = param.Tuple(default=(1, 2))
    many = param.ListSelector(default=[], objects=["x", "y"])
    text = param.String(default="")


class FakeLocation:
    """What UrlState uses of Panel's Location: a ``search`` string it reads and writes."""

    def __init__(self, search: str = ""):
        self.search = search
        self.writes = 0

    def __setattr__(self, name, value):
        if name == "search" and "search" in self.__dict__:
            self.__dict__["writes"] += 1
        super().__setattr__(name, value)


# ----------------------------------------------------------------------------- parse_value
@pytest.mark.parametrize("name, raw, expected", [
    ("seed", "12", (12, "")),
    ("seed", "-3", (0, "is below the smallest allowed value 0; 0 is used")),
    ("rate", "7", (0.95, "is above the largest allowed value 0.95; 0.95 is used")),
    ("rate", "0.5", (0.5, "")),
    ("kind", "b", ("b", "")),
    ("kind", "<b>", ("<b>", "")),
    ("k", "2", (2, "")),
    ("flag", "TRUE", (True, "")),
    ("flag", "0", (False, "")),
    ("extra", '{"a": 1}', ({"a": 1}, "")),
    ("pair", "[3, 4]", ((3, 4), "")),
    ("many", '["y"]', (["y"], "")),
    ("text", "<script>", ("<script>", "")),
])
def test_parse_value_reads_each_kind_of_parameter(name, raw, expected):
    assert parse_value(Knobs.param[name], raw) == expected


@pytest.mark.parametrize("name, raw, reason", [
    ("seed", "9" * 400, "too large"),
    ("seed", str(MAX_SAFE_INTEGER + 1), "too large"),
    ("seed", "1.5", "not a whole number"),
    ("seed", "abc", "not a whole number"),
    ("rate", "nan", "not a finite number"),
    ("rate", "inf", "not a finite number"),
    ("rate", "x", "not a number"),
    ("kind", "c", "not one of the choices"),
    ("k", "4", "not one of the choices"),
    ("flag", "maybe", "not true or false"),
    ("extra", "[1]", "not a JSON object"),
    ("extra", "{", "not valid JSON"),
    ("many", '["z"]', "not offered"),
    ("text", "x" * 5000, "characters long"),
])
def test_parse_value_refuses_what_cannot_be_used(name, raw, reason):
    with pytest.raises(UrlValueError, match=reason):
        parse_value(Knobs.param[name], raw)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["seed", "rate", "kind", "k", "flag", "extra", "pair", "many", "text"]),
       raw=st.one_of(st.text(max_size=60), st.integers().map(str), st.floats().map(str)))
def test_any_text_is_refused_or_gives_a_value_the_parameter_accepts(name, raw):
    try:
        value, _ = parse_value(Knobs.param[name], raw)
    except UrlValueError:
        return
    Knobs(**{name: value})  # raises if the parameter would refuse the value


def test_read_query_keeps_raw_strings():
    assert read_query("?a=1&b=%3Cx%3E&c=&a=2") == {"a": "2", "b": "<x>", "c": ""}
    assert read_query("") == {}


# ----------------------------------------------------------------------------- UrlState
def test_apply_sets_valid_values_and_reports_the_others():
    knobs = Knobs()
    notices = UrlState(FakeLocation()).apply([(knobs, {"seed": "p.seed", "rate": "p.rate", "kind": "p.kind"})],
                                             {"p.seed": "9" * 400, "p.rate": "2", "p.kind": "b"})
    assert knobs.seed == 0 and knobs.rate == 0.95 and knobs.kind == "b"
    assert len(notices) == 2
    assert "p.seed" in notices[0] and "ignored" in notices[0] and "too large" in notices[0]
    assert "p.rate" in notices[1] and "0.95 is used" in notices[1]


def test_bind_reads_only_its_own_bindings_and_then_writes_changes():
    """The gallery's menu lag: binding a new page must not re-read the (stale) query into earlier objects."""
    loc = FakeLocation("?page=a")
    url = UrlState(loc)
    menu, page = Knobs(), Knobs()
    assert url.bind([(menu, {"kind": "page"})]) == []
    assert menu.kind == "a"
    menu.kind = "b"  # the user picks another page: the URL follows
    assert read_query(loc.search)["page"] == "b"
    loc.search = "?page=a&b.seed=5"  # a stale query (the browser's copy lagging behind)
    url.bind([(page, {"seed": "b.seed"})])
    assert page.seed == 5
    assert menu.kind == "b"  # not re-read
    assert read_query(loc.search) == {"page": "a", "b.seed": "5"}


def test_write_adds_no_history_entry_without_a_change():
    loc = FakeLocation("?x=1")
    url = UrlState(loc)
    url.write({"x": "1"})
    assert loc.writes == 0
    url.write({"x": "2"})
    assert loc.writes == 1 and loc.search == "?x=2"


def test_url_state_outside_a_server_does_nothing():
    knobs = Knobs()
    url = UrlState(None)
    assert url.bind([(knobs, {"seed": "seed"})]) == [] and not url.active
    knobs.seed = 3  # no location: nothing to write, no error


def test_close_stops_writing():
    loc = FakeLocation("")
    url = UrlState(loc)
    knobs = Knobs()
    url.bind([(knobs, {"seed": "seed"})])
    url.close()
    url.close()  # idempotent
    knobs.seed = 9
    assert read_query(loc.search)["seed"] == "0"


def test_a_data_model_refuses_a_huge_seed_from_a_link():
    dm = DataModel(dataset="iris", mechanism="mcar", rate=0.2)
    notices = UrlState(FakeLocation()).apply([(dm, {"data_seed": "data_seed", "mask_seed": "mask_seed"})],
                                             {"data_seed": "9" * 400, "mask_seed": str(2**40)})
    assert dm.data_seed == 0 and dm.mask_seed == 2**32 - 1
    assert "too large" in notices[0] and "largest allowed value" in notices[1]
    assert dm.error == "" and dm.data is not None


# ----------------------------------------------------------------------------- escaping
PAYLOADS = ["<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "**bold** _it_ `code`",
            "[link](javascript:alert(1))", "a & b < c > d \"e\" 'f'", "# heading\n\n- item"]


@pytest.mark.parametrize("text", PAYLOADS)
def test_md_renders_user_text_literally(text):
    """Rendered by Panel's own Markdown renderer, the escaped text shows exactly the user's characters."""
    from panel.pane.markup import Markdown

    # the pane sends its HTML escaped once more (the browser unescapes it into innerHTML)
    rendered = _html.unescape(Markdown(md(text))._transform_object(md(text))["object"])
    assert "<script" not in rendered and "<img" not in rendered and "<a " not in rendered
    assert "<strong>" not in rendered and "<em>" not in rendered and "<code>" not in rendered
    assert "<h1" not in rendered and "<li>" not in rendered
    shown = _html.unescape(rendered.replace("<p>", "").replace("</p>", "")).strip()
    assert shown == " ".join(text.split())


def test_html_escapes_markup():
    assert html("<b>&'\"") == "&lt;b&gt;&amp;&#x27;&quot;"
    assert shorten("x" * 100, 10) == "x" * 9 + "\u2026" and shorten("abc") == "abc"


def test_writes_wait_until_the_page_is_loaded():
    """Before the browser has loaded the page its own address wins: writes are kept and sent at load."""
    loc = FakeLocation("?seed=-5")
    url = UrlState(loc, loaded=False)
    knobs = Knobs()
    assert "0 is used" in url.bind([(knobs, {"seed": "seed", "rate": "rate"})])[0]
    assert loc.writes == 0 and knobs.seed == 0
    loc.search = "?seed=-5&other=1"  # what the browser reports when it connects
    url._on_load()
    assert read_query(loc.search) == {"seed": "0", "other": "1", "rate": "0.3"}  # the URL says what is shown


def test_request_arguments_are_raw_strings_last_value_wins():
    from explorer.ui.url import request_arguments

    args = {"page": [b"em_playground"], "x": [b"1", b"2"], "empty": [], "u": [b"\xc3\xa9t\xc3\xa9"], "s": "plain"}
    assert request_arguments(args) == {"page": "em_playground", "x": "2", "u": "été", "s": "plain"}
    assert request_arguments(None) == {}


def test_a_session_made_by_its_websocket_reads_the_request_arguments():
    """With --num-procs 2 the websocket may reach another process than the GET: that process creates the
    session from the token, whose location has no query yet; the page must still be the one asked for."""
    loc = FakeLocation("")
    state = UrlState(loc, loaded=False, arguments={"page": "neumann", "neumann.seed": "3"})
    assert state.query() == {"page": "neumann", "neumann.seed": "3"}
    # the address bar wins once it has a query, and after the page has loaded
    loc.search = "?page=variational"
    assert state.query() == {"page": "variational"}
    loc.search = ""
    state._on_load()
    assert state.query() == {}
