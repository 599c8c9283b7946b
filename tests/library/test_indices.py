"""checks.core.indices.unravel: numpy's and torch's unravel_index answer, without the sympy import torch's costs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from checks.core.indices import unravel

from ..conftest import ROOT


@pytest.mark.parametrize("shape", [(), (1,), (7,), (2, 3), (3, 1, 4), (2, 2, 2, 2)])
def test_unravel_is_numpy_s_unravel_index(shape: tuple[int, ...]) -> None:
    for flat in range(max(1, torch.Size(shape).numel())):
        assert unravel(flat, shape) == tuple(int(i) for i in np.unravel_index(flat, shape))


@pytest.mark.parametrize(("flat", "shape"), [(-1, (3,)), (3, (3,)), (1, ()), (0, (0,)), (0, (2, 0))])
def test_a_position_outside_the_tensor_is_refused(flat: int, shape: tuple[int, ...]) -> None:
    with pytest.raises(IndexError, match="outside a tensor of shape"):
        unravel(flat, shape)


def test_a_failing_check_does_not_import_sympy() -> None:
    # A fresh process: this one imported sympy long ago. The record names its worst element, and the folded
    # form of a long input lists the worst elements by index. (torch before 2.1 imports sympy itself.)
    program = ("import sys, torch\n"
               "before = 'sympy' in sys.modules\n"
               "import checks\n"
               "from checks.teaching.records import FOLD_LIMIT\n"
               "wrong = checks.Expectation('(x*x).sum()', lambda x: (x * x).sum(), '3*x', lambda x: 3 * x, 'a slip')\n"
               "record = checks.plan(wrong, [float(i) for i in range(FOLD_LIMIT + 1)]).run().one()\n"
               "assert not record.passed and record.worst_index == [FOLD_LIMIT]\n"
               "assert record.to_dict()['observed_gradient']['worst'][0]['index'] == [FOLD_LIMIT]\n"
               "print(before, 'sympy' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    before, after = run.stdout.split()
    assert after == before
