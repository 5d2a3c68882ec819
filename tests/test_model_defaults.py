"""explorer.ui.model_defaults: Bokeh's property defaults memoised per class read exactly as Bokeh reads them."""

from __future__ import annotations

import math

import panel as pn  # noqa: F401 - registers Panel's Bokeh models too
import pytest
from bokeh.core.properties import Override
from bokeh.core.property.descriptors import PropertyDescriptor
from bokeh.document import Document
from bokeh.model import Model
from bokeh.models import Line, Title
from bokeh.themes import Theme

from explorer.ui import model_defaults


@pytest.fixture(scope="module")
def original_get_default():
    model_defaults.install()
    assert model_defaults.installed()
    return PropertyDescriptor._get_default.__wrapped__


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, Model):  # an instance default: a new model of the same class per owner
        return type(a) is type(b) and a is not b
    if isinstance(a, (list, tuple)) and type(a) is type(b):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and type(a) is type(b):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _instances():
    for name, cls in sorted(Model.model_class_reverse_map.items()):
        if not getattr(cls, "__abstract__", False):
            yield name, cls


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_every_default_of_every_model_class_reads_as_bokeh_reads_it(original_get_default):
    checked = cached = 0
    for name, cls in _instances():
        try:
            obj, fresh = cls(), cls()
        except Exception:  # noqa: BLE001, S112 - classes that need arguments are left out
            continue
        for prop in sorted(cls.properties()):
            if prop in obj._property_values:
                continue
            descriptor = cls.lookup(prop)
            if not isinstance(descriptor, PropertyDescriptor) or not hasattr(descriptor, "_get"):
                continue  # aliases read through their target
            first, again = descriptor._get(obj), descriptor._get(obj)  # the second read may come from the cache
            expected = original_get_default(descriptor, fresh)
            assert _same(first, expected), (name, prop, first, expected)
            assert _same(again, expected), (name, prop, again, expected)
            checked += 1
            cached += (cls, prop) in PropertyDescriptor._get_default.cache
    assert checked > 5000 and cached > 2000  # the registry (Bokeh + Panel) was walked, and most reads are cached


def test_a_class_override_of_a_default_is_its_own(original_get_default):
    class ThickLine(Line):
        line_width = Override(default=7.5)

    assert Line().line_width == 1.0 and ThickLine().line_width == 7.5
    assert Line().line_width == 1.0 and ThickLine().line_width == 7.5  # both now from the cache


def test_a_theme_value_wins_over_the_cached_class_default(original_get_default):
    plain = Title()
    assert plain.text_font_size == original_get_default(Title.lookup("text_font_size"), Title())
    assert (Title, "text_font_size") in PropertyDescriptor._get_default.cache

    themed = Title()
    doc = Document()
    doc.theme = Theme(json={"attrs": {"Title": {"text_font_size": "31px"}}})
    doc.add_root(themed)
    assert themed.text_font_size == "31px"
    assert Title().text_font_size == plain.text_font_size  # the cache still serves unthemed titles
    doc.theme = Theme(json={})
    assert themed.text_font_size == plain.text_font_size  # theme removed: the class default again


def test_container_defaults_stay_per_instance(original_get_default):
    a, b = Line(), Line()
    a.tags.append("x")  # a container default is the instance's own, as in Bokeh
    assert b.tags == [] and a.tags == ["x"]
    assert (Line, "tags") not in PropertyDescriptor._get_default.cache


def test_install_is_once_per_process(original_get_default):
    assert model_defaults.install() is False
    assert PropertyDescriptor._get_default.__wrapped__ is original_get_default
