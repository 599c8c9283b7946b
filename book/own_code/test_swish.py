"""Tests of the hand-written Swish backward.

Every input's gradient is checked, in float32 and in float64.
"""

import pytest
import torch

import checks
from swish import Swish, SwishBuggy, SwishLayer

DTYPES = [torch.float32, torch.float64]


def batch(dtype):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=generator, dtype=dtype)
    beta = torch.tensor([0.5, 1.0, 2.0], dtype=dtype)
    return x, beta


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_swish_backward(dtype):
    checks.assert_gradients(Swish.apply, *batch(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_swish_buggy_backward(dtype):
    checks.assert_gradients(SwishBuggy.apply, *batch(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_swish_layer_parameters(dtype):
    torch.manual_seed(0)
    layer = SwishLayer(4, 3).to(dtype)
    x = torch.randn(6, 4, dtype=dtype)
    checks.assert_module_gradients(layer, lambda y: (y ** 2).mean(), x)
