"""The checker library: what a test suite imports. It needs torch and numpy, nothing else.

checker (check_jacobian, assert_gradients, check_module), numerical (finite-difference estimates),
tolerances and compare (allowances with their reasons, torch.testing-style mismatch reports), errors,
dtypes, devices, validate and indices (argument checks and small helpers shared by the above).
Nothing here imports checks.teaching or checks.build.
"""
