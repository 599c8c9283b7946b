"""The teaching API the book's chapters import (through `import checks`).

Data flows one way: expectations (the derivative written first) -> planning (checks written down) ->
execute (checks observes f itself) / witness (runs the reader's own PyTorch) -> records (handed to the
collector at execution, for the ledger) -> results, display and tables (what a page shows). plan ties them
together for a chapter: plan(...), Plan.run(code), witness(...). library turns the checker library's reports
(check_jacobian, assert_gradients, check_module) into records: importing this package subscribes it to
checks.core.observers. higher (Jacobians and Hessians), precision, sensitivity, mutants and figures serve
single chapters. Built on checks.core; never imports checks.sphinx.
"""

from .library import subscribe

subscribe()
