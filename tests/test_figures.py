"""checks.figures: the shared style, and the text size each figure records for the browser tests."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402 (after choosing the backend)
from PIL import Image  # noqa: E402

from checks import figures  # noqa: E402

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
