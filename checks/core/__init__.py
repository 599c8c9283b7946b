"""The checker library: what a test suite imports. It needs torch and numpy, nothing else.

checker (check_jacobian, assert_gradients, check_module), signature (what a check differentiates: complex
inputs as real and imaginary parts, integer and non-tensor arguments held fixed, a sample, second order's
vector–Jacobian product), forward (forward-mode Jacobians), properties (not mutated, reentrant, undefined
output gradients, batched), numerical (finite-difference estimates), tolerances and compare (allowances with
their reasons, torch.testing-style mismatch reports), errors, dtypes, devices, validate and indices
(argument checks and small helpers shared by the above), and pytest_plugin (the fixture check_gradients,
registered under the pytest11 entry point).
Nothing here imports checks.teaching or checks.sphinx.
"""
