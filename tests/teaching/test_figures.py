"""checks.teaching.figures: the shared style, and the text size each figure records for the browser tests."""

from __future__ import annotations

import base64
import io
import re

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402 (after choosing the backend)
from PIL import Image  # noqa: E402

from checks.teaching import figures  # noqa: E402

PHONE_COLUMN_PX = 342  # the text column at 390 px, measured in chromium
CAPTION_PX = 16  # a figure caption's text there


def test_a_figure_in_the_style_records_its_smallest_text_and_reads_on_a_phone() -> None:
    with matplotlib.rc_context():
        figures.use()
        figure, axes = plt.subplots()
        axes.plot([1, 2, 3], label="a series")
        axes.set_xlabel("step h")
        axes.legend()
        with Image.open(io.BytesIO(base64.b64decode(figures.png(figure)))) as image:
            recorded, width = image.text[figures.TEXT_SIZE_KEY], image.width
        plt.close(figure)
    points, dpi = figures.recorded_text_size(recorded)
    assert points == figures.STYLE["xtick.labelsize"]
    rendered = points * dpi / 72 * min(1.0, PHONE_COLUMN_PX / width)
    assert rendered >= CAPTION_PX, f"{rendered:.1f} px text at 390 px, under the caption's {CAPTION_PX} px"


def test_hidden_and_empty_texts_do_not_count() -> None:
    figure, axes = plt.subplots()
    axes.set_title("")
    axes.text(0, 0, "tiny", fontsize=3, visible=False)
    axes.set_xlabel("label", fontsize=11)
    assert figures.smallest_text_points(figure) <= 11
    assert figures.smallest_text_points(figure) > 3
    plt.close(figure)


def test_log_ticks_write_decades_in_plain_text_at_the_tick_size() -> None:
    figure, axes = plt.subplots()
    axes.loglog([1e-16, 1.0], [1e-8, 1e-1])
    figures.log_ticks(axes)
    figure.draw_without_rendering()
    low, high = axes.get_xlim()
    labels = [label.get_text() for label in axes.get_xticklabels() if low <= label.get_position()[0] <= high]
    # No mathtext superscript (set smaller than the tick label): the exponent is as large as the digits.
    assert labels and all(re.fullmatch(r"1e-?\d+", label) for label in labels), labels
    assert "1e-16" in labels and "1e0" in labels and len(labels) <= 6
    plt.close(figure)
