"""Sphinx extension for readers: each page says where its numbers came from, plots suit any screen, and
no page loads a script twice.

The line naming Python, torch and the devices is written into every page when the HTML is written, from
the process building the book (the one that executes the chapters). Its text is a config value with
rebuild="html", so a build under another Python, torch or set of devices rewrites every page: the line is
never left over from an earlier build.
"""

from __future__ import annotations

import html
import platform
from typing import Any

import torch
from sphinx.application import Sphinx
from sphinx.config import Config

from .devices import available_devices, device_name

LINE_CLASS = "checks-build-environment"


def environment_line(devices: list[str] | None = None) -> str:
    """One sentence naming Python, torch and each device the checks ran on, with its hardware."""
    present = available_devices() if devices is None else devices
    hardware = ", ".join(f"{device} ({device_name(device)})" for device in present)
    return (f"Numbers on this page were computed when the book was built, with Python "
            f"{platform.python_version()} and PyTorch {torch.__version__}, on {hardware}.")


def environment_html(line: str) -> str:
    return f'<p class="{LINE_CLASS}">{html.escape(line)}</p>'


def insert_after_title(body: str, fragment: str) -> str:
    """The fragment right after the page's first heading, or at the top when the page has none."""
    end = body.find("</h1>")
    if end < 0:
        return fragment + body
    end += len("</h1>")
    return body[:end] + fragment + body[end:]


def unique_scripts(scripts: list[Any]) -> list[Any]:
    """The page's scripts, each once.

    sphinx-thebe 0.3.1 under Sphinx 7.4 adds its inline configuration script twice (once with filename
    None, once with ''), so Sphinx's own de-duplication misses it and every page declares the same
    `const` twice: an uncaught SyntaxError in the browser.
    """
    seen = set()
    kept = []
    for script in scripts:
        key = (getattr(script, "filename", script) or "", getattr(script, "priority", None),
               tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    return kept


def _set_line(app: Sphinx, config: Config) -> None:
    config.checks_build_environment = environment_line()


def _on_page(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    if "script_files" in context:
        context["script_files"] = unique_scripts(context["script_files"])
    # Only the book's own pages: search, genindex and the like are not computed from anything.
    if doctree is None or "body" not in context:
        return
    context["body"] = insert_after_title(context["body"], environment_html(app.config.checks_build_environment))


def setup(app: Sphinx) -> dict:
    app.add_config_value("checks_build_environment", "", "html")
    app.connect("config-inited", _set_line)
    # reader.css lies in the package's static folder, which checks.sphinxext adds to the build.
    app.setup_extension("checks.sphinxext")
    app.connect("html-page-context", _on_page)
    app.add_css_file("reader.css")
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
