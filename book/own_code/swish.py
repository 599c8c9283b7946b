"""Swish with a learnable slope, y = x · sigmoid(beta · x).

Swish is a custom autograd.Function: it computes the forward, and its
backward is written by hand from the derivatives

    dy/dx    = s + beta · x · s · (1 - s)      with s = sigmoid(beta · x)
    dy/dbeta = x² · s · (1 - s)

beta has one entry per feature (the last dimension of x), so its gradient
is summed over the batch. SwishBuggy is the same with a slip a tired
author makes: one factor x missing in dy/dbeta.
"""

import torch
from torch import nn


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(x, beta):
        return x * torch.sigmoid(beta * x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, beta = inputs
        ctx.save_for_backward(x, beta)

    @staticmethod
    def backward(ctx, grad_output):
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        slope = s * (1 - s)
        grad_x = grad_output * (s + beta * x * slope)
        grad_beta = (grad_output * x * x * slope).sum(dim=0)
        return grad_x, grad_beta


class SwishBuggy(Swish):
    @staticmethod
    def backward(ctx, grad_output):
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        slope = s * (1 - s)
        grad_x = grad_output * (s + beta * x * slope)
        grad_beta = (grad_output * x * slope).sum(dim=0)  # bug: x, not x²
        return grad_x, grad_beta


class SwishLayer(nn.Module):
    """A linear layer followed by Swish.

    The slope beta is a parameter, with one entry per output feature.
    """

    def __init__(self, features_in: int, features_out: int, swish=Swish):
        super().__init__()
        self.linear = nn.Linear(features_in, features_out)
        self.beta = nn.Parameter(torch.ones(features_out))
        self.swish = swish

    def forward(self, x):
        return self.swish.apply(self.linear(x), self.beta)
