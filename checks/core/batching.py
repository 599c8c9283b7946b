"""The checker's own batching (torch.func.vmap, is_grads_batched) without torch 2.0's fallback warning."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

# torch 2.0 warns wherever vmap runs an op it has no batching rule for one slice at a time (later releases say
# nothing): torch's cost inside the checker's batching, which the caller did not ask for and cannot act on.
_FALLBACK = "There is a performance drop because we have not yet implemented the batching rule"


@contextlib.contextmanager
def quiet_fallback() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_FALLBACK, category=UserWarning)
        yield
