"""The API reference page: every public name of the checker library documented from its docstring, with a
typed signature; the page is a reference page, not a chapter (it executes nothing)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import checks
from checks.sphinx.apidoc import escape, fields

from ..helpers import page
from ..toc import API, REFERENCE, ROOT, toc_chapters, toc_files

SOURCE = (ROOT / f"{API}.md").read_text(encoding="utf-8")
DOCUMENTED = set(re.findall(r"^\.\. auto(?:function|class|exception|module):: ([\w.]+)", SOURCE, re.MULTILINE))


def library_names() -> list[str]:
    """checks' public names that the checker library (checks.core) defines: the teaching API is not listed."""
    return [name for name in checks.__all__ if getattr(checks, name).__module__.startswith("checks.core")]


def test_every_public_name_of_the_library_and_the_plugin_is_documented() -> None:
    missing = [name for name in library_names() if f"checks.{name}" not in DOCUMENTED]
    assert not missing, f"book/api.md does not document: {missing}"
    plugin = importlib.import_module("checks.core.pytest_plugin")
    fixtures = {f"checks.core.pytest_plugin.{name}" for name in ("check_gradients", "grad_dtype", "grad_device")}
    assert fixtures <= DOCUMENTED
    assert "checks.core.pytest_plugin" in DOCUMENTED and plugin.__doc__


def test_the_api_page_is_in_the_toc_as_a_reference_page_not_a_chapter() -> None:
    assert API in toc_files() and API in REFERENCE and API not in toc_chapters()


def test_name_and_description_lists_become_field_lists() -> None:
    docstring = ["Compare.", "", "mode       -- reverse or", "              forward", "kinks -- test them",
                 "After the list."]
    assert fields(docstring) == ["Compare.", "", ":mode: reverse or forward", ":kinks: test them", "",
                                 "After the list."]
    assert escape("f(x, *inputs) at |x|") == "f(x, \\*inputs) at \\|x\\|"


def test_the_built_page_shows_each_name_with_a_typed_signature(book_html: Path) -> None:
    soup = page(book_html, f"{API}.html")
    ids = {dt.get("id") for dt in soup.select("dl.py > dt")}
    assert DOCUMENTED - {"checks.core.pytest_plugin"} <= ids, DOCUMENTED - ids
    signature = " ".join(soup.select_one("dt#checks\\.check_jacobian").get_text().split())
    for parameter in ("order: int = 1", "atol: float | None = None", "sample: int | None = None",
                      "nondet_tol: float = 0.0", "→ CheckReport"):
        assert parameter in signature, signature
    fields_shown = [" ".join(th.get_text().split()) for th in soup.select("dt#checks\\.check_jacobian + dd dl.field-list > dt")]
    assert {"Mode:", "Order:", "Atol, rtol:", "Sample:", "Nondet_tol:"} <= set(fields_shown), fields_shown


def test_coming_from_gradcheck_names_every_argument_of_gradcheck_and_gradgradcheck() -> None:
    import inspect

    import torch

    table = SOURCE.split("(api-from-gradcheck)=", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(\w+)", table))
    arguments = {name for check in (torch.autograd.gradcheck, torch.autograd.gradgradcheck)
                 for name in inspect.signature(check).parameters} - {"func", "inputs"}
    assert arguments <= named, f"Coming from gradcheck omits {sorted(arguments - named)}"
