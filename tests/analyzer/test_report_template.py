"""The report page's template is compiled once per user (Jinja's bytecode cache in the temp
folder), and still works where that folder cannot be written."""

from __future__ import annotations

import tempfile

import jinja2
import pytest
from iotrace_analyzer.outputs import report_page


@pytest.fixture
def fresh_template():
    report_page._template.cache_clear()
    yield
    report_page._template.cache_clear()


def test_the_page_template_is_compiled_once_per_user(tmp_path, monkeypatch, fresh_template):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    first = report_page._template()
    assert len(list(tmp_path.glob("_jinja2-cache-*/__jinja2_*.cache"))) == 1
    report_page._template.cache_clear()  # as the next run of the analyzer: loaded, not compiled
    with monkeypatch.context() as m:
        m.setattr(jinja2.Environment, "compile", lambda *a, **k: pytest.fail("compiled again"))
        again = report_page._template()
    assert again is not first and again.blocks.keys() == first.blocks.keys()
    assert len(list(tmp_path.glob("_jinja2-cache-*/__jinja2_*.cache"))) == 1


def test_a_temp_folder_that_cannot_be_used_compiles_each_time(tmp_path, monkeypatch, fresh_template):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "a-file" / "tmp"))  # no folder can be made there
    compiled = []
    compile_ = jinja2.Environment.compile
    monkeypatch.setattr(jinja2.Environment, "compile", lambda *a, **k: compiled.append(1) or compile_(*a, **k))
    assert report_page._template() is not None and compiled == [1]
