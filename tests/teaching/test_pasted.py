"""A converted chapter's visible code, pasted in order into a plain Python (no IPython, no setup cell), runs,
and each check prints one line a person reads (issue 28). Exercise templates (skip-execution) are left out:
their blanks are the reader's to fill."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ..book.test_plain_code import cells
from .test_checks_share import CONVERTED, PLAIN_NUMERICAL


def pasted(chapter: str) -> list[str]:
    """The check lines python prints for the chapter's visible code, pasted in order; it must run, print
    every check as a line that passed or failed as declared, and show none of checks' objects (PyTorch prints
    its graph nodes as <PowBackward0 object at 0x...>; none of checks' own objects may)."""
    code = "\n\n".join(cell.python() for cell in cells(chapter) if cell.visible and "skip-execution" not in cell.tags)
    result = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith(("✓", "✗", "?"))]
    assert lines and "<checks." not in result.stdout, result.stdout
    assert all(line.startswith("✓ pass") or "as declared" in line for line in lines), result.stdout
    return lines


@pytest.mark.parametrize("chapter", CONVERTED)
def test_the_visible_code_runs_at_a_plain_prompt_and_prints_lines(chapter: str) -> None:
    lines = pasted(chapter)
    assert all("(float32, cpu)" in line for line in lines), lines


@pytest.mark.parametrize("chapter", PLAIN_NUMERICAL)
def test_a_numerical_chapter_s_visible_code_runs_at_a_plain_prompt(chapter: str) -> None:
    # These chapters name dtypes themselves (float16, float64): each line says which it ran in (an integer
    # count, such as batch norm's num_batches_tracked, its own dtype).
    lines = pasted(chapter)
    assert all(re.search(r"\((float16|bfloat16|float32|float64|int64), cpu\)", line) for line in lines), lines
