"""The checker library: what a test suite imports. It needs torch and numpy, nothing else.

checker (check_jacobian, assert_gradients, check_module) runs a check's stages, each in a module named for
it: signature (what a check differentiates: complex inputs as real and imaginary parts, integer and
non-tensor arguments held fixed, a sample, second order's vector–Jacobian product), autograd (autograd's
Jacobian in reverse or forward mode, with forward's jvp machinery in forward), estimate (the adaptive
Richardson search), allowance (how far autograd may be from the estimate), confirm (mismatches at smaller
steps and in independent windows, the kink test), verdict (the one place an outcome is decided; its
vocabulary in outcome), report and message (CheckReport and its words). Beside them: properties (not
mutated, reentrant, undefined output gradients, batched), fast (random projections), numerical
(finite-difference estimates), tolerances and compare (allowances with their reasons, torch.testing-style
mismatch reports), errors, dtypes, devices, validate and indices, and pytest_plugin (the fixture
check_gradients, registered under the pytest11 entry point).
Nothing here imports checks.teaching or checks.sphinx.
"""
