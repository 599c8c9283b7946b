"""Sphinx extension for readers: each page says where its numbers came from, plots suit any screen, no
page loads a script twice, and the mathematics renders without the internet.

The line naming Python, torch and the devices is written into every page when the HTML is written, from
the process building the book (the one that executes the chapters). Its text is a config value with
rebuild="html", so a build under another Python, torch or set of devices rewrites every page: the line is
never left over from an earlier build. Writing it asks torch, so the build keeps the line it wrote on this
machine (checks.sphinx.machine) and a build that reads nothing again need not import torch.

MathJax comes from the site itself (`_static/mathjax/`, copied from the django-static-mathjax package, which
ships MathJax 3's files and needs no Django), not from a CDN: a local build read offline shows formulas,
not TeX source.

The site declares an icon (a nabla, `favicon.svg` in the package's static folder) unless the book names its
own (`html.favicon`): without one, a browser asks every site for /favicon.ico and logs the 404.
"""

from __future__ import annotations

import html
import platform
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.builders.html import StandaloneHTMLBuilder
from sphinx.config import Config
from sphinx.ext.mathjax import MATHJAX_URL
from sphinx.util.fileutil import copy_asset

from . import machine

LINE_CLASS = "checks-build-environment"
MATHJAX_FOLDER = "mathjax"
MATHJAX_ENTRY = "tex-mml-chtml.js"  # the bundle Sphinx loads from the CDN by default
# What that bundle loads at run time: TeX extensions, fonts, the menu and its accessibility tools. Left
# out: the speech rule engine (sre, 4 MB), needed only for the menu's spoken-math explorer.
MATHJAX_PARTS = (MATHJAX_ENTRY, "input", "output/chtml", "adaptors", "ui", "a11y")


def environment_line(devices: list[str] | None = None) -> str:
    """One sentence naming Python, torch and each device the checks ran on, with its hardware."""
    import torch

    from ..core.devices import available_devices
    from ..teaching.environment import device_name, environment

    present = available_devices() if devices is None else devices
    hardware = ", ".join(f"{device} ({device_name(device)})" for device in present)
    # The settings every record of the page shares; a failed check's record repeats only what differs.
    shared = environment(seed=0)
    return (f"Numbers on this page were computed when the book was built, with Python "
            f"{platform.python_version()} and PyTorch {torch.__version__} (default dtype "
            f"{shared['default_dtype']}) under {shared['os']}, on {hardware}.")


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
    config.checks_build_environment = machine.remembered(app.doctreedir, "environment line", environment_line)


def mathjax_source() -> Path:
    """MathJax 3's es5 folder, as the django-static-mathjax package installs it."""
    import mathjax  # the django-static-mathjax distribution; imports nothing of Django

    return Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"


def _local_mathjax(app: Sphinx, config: Config) -> None:
    if config.mathjax_path == MATHJAX_URL:  # a book that chose another MathJax keeps it
        config.mathjax_path = f"{MATHJAX_FOLDER}/{MATHJAX_ENTRY}"


FAVICON = Path(__file__).resolve().parent / "_static" / "favicon.svg"


def _favicon(app: Sphinx, config: Config) -> None:
    if not config.html_favicon:  # a book that chose its own icon keeps it
        config.html_favicon = str(FAVICON)


def _copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    """Copy MathJax into the site's _static (files already identical are left alone)."""
    if exception is not None or not isinstance(app.builder, StandaloneHTMLBuilder):
        return
    if app.config.mathjax_path != f"{MATHJAX_FOLDER}/{MATHJAX_ENTRY}":
        return
    source, target = mathjax_source(), Path(app.outdir, "_static", MATHJAX_FOLDER)
    for part in MATHJAX_PARTS:
        destination = (target / part).parent if (source / part).is_file() else target / part
        destination.mkdir(parents=True, exist_ok=True)
        copy_asset(source / part, destination)


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
    app.connect("config-inited", _local_mathjax)
    app.connect("config-inited", _favicon)
    app.connect("build-finished", _copy_mathjax)
    # reader.css lies in the package's static folder, which checks.sphinx.sphinxext adds to the build.
    app.setup_extension("checks.sphinx.sphinxext")
    app.connect("html-page-context", _on_page)
    app.add_css_file("reader.css")
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
