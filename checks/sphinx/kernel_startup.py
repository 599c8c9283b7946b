"""Run by each chapter's kernel at start (PYTHONSTARTUP, which IPython's kernel honours): subscribes the
teaching side to the checker library's reports (checks.teaching.library), so that every check_jacobian,
assert_gradients or check_module call the chapter makes reaches the ledger, even before the chapter imports
the teaching API, and records the chapter's own torch.autograd.gradcheck and gradgradcheck calls the same
way (library.watch_gradcheck). It binds no name in the chapter's namespace: a visible cell still imports
what it uses."""

__import__("checks.teaching.library", fromlist=["watch_gradcheck"]).watch_gradcheck()
