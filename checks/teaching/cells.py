"""Every cell of a page, run in each dtype and on each device asked for, with no wrapper in the reader's code.

A page's hidden setup cell calls checks.each_cell(dtypes=("float32", "float64")). From then on, each cell
the kernel runs is also run, before the reader's own run, once per other (dtype, device): its source is
executed under torch.set_default_dtype(dtype) and `with torch.device(device)`, in a namespace of its own
(a shadow), with its output captured and dropped. A shadow executes every cell, so it evolves like the
reader's run: the x a later cell uses is the float64 x of the float64 shadow. Each shadow starts each cell
from the reader's random state (torch.randn then draws the same numbers, rounded to its dtype; other
samplers, such as a layer's uniform initialisation, may draw differently per dtype).

The reader's run is the one a person at a prompt gets: PyTorch's default dtype on the CPU; it must be one
of those asked for. checks.expect and checks.raises report their records here (report()); after the cell
the rows of all its runs are displayed together, one table per cell. Without each_cell (a plain prompt, a
script) each record is printed as one line of text instead, its verdict in colour in a terminal or a notebook.

An error in a shadow fails the cell, like one in the reader's run, with a note naming the dtype and device.
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.devices import resolve_devices
from ..core.dtypes import dtype_name, to_dtype
from ..core.errors import CheckInputError
from .records import Record
from .rows import Rows, in_colour, line

_active: Engine | None = None


def report(record: Record) -> None:
    """A check's record: into the current cell's rows when each_cell is active, else printed as a line (its
    mark and verdict in colour where the line is shown in colour: a terminal, a notebook)."""
    if _active is not None:
        _active.rows.append(record)
    else:
        print(line(record, colour=in_colour()))


def history() -> list[str]:
    """The sources of the cells run since each_cell, newest first (empty without it)."""
    return list(reversed(_active.sources)) if _active is not None else []


@dataclass
class Shadow:
    """One (dtype, device) run of every cell: its namespace and, on a GPU, its own random state."""

    dtype: str
    device: str
    # A copy of the reader's namespace as the first cell after the setup cell starts (what the setup cell
    # defined included); then its own.
    namespace: dict[str, Any] | None = None
    cuda_state: torch.Tensor | None = None


@dataclass
class Engine:
    shell: Any
    dtypes: list[str]
    devices: list[str]
    shadows: list[Shadow]
    rows: list[Record] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    _source: str = ""
    _count: int = 0

    def pre_run_cell(self, info: Any) -> None:
        self.rows.clear()
        self._source = self.shell.transform_cell(info.raw_cell)

    def run_shadows(self) -> None:
        """Run the current cell's source in every shadow (called first thing in the cell, see _Prepend)."""
        source, self._count = self._source, self._count + 1
        self.sources.append(source)
        from IPython.utils.capture import capture_output

        for shadow in self.shadows:
            if shadow.namespace is None:
                shadow.namespace = dict(self.shell.user_ns)
            filename = f"<checks: cell {self._count} in {shadow.dtype} on {shadow.device}>"
            # Kept where tracebacks and checks.teaching.provenance read a statement's source.
            linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
            code = compile(source, filename, "exec")
            default = torch.get_default_dtype()
            cuda = [torch.cuda.current_device()] if shadow.device == "cuda" else []
            try:
                with torch.random.fork_rng(devices=cuda), capture_output(display=True):
                    if shadow.cuda_state is not None:
                        torch.cuda.set_rng_state(shadow.cuda_state)
                    torch.set_default_dtype(to_dtype(shadow.dtype))
                    try:
                        with torch.device(shadow.device):
                            exec(code, shadow.namespace)
                    finally:
                        torch.set_default_dtype(default)
                        if cuda:
                            shadow.cuda_state = torch.cuda.get_rng_state()
            except Exception as error:
                error.add_note(f"(raised when checks.each_cell re-ran this cell in {shadow.dtype} on "
                               f"{shadow.device}; the reader's {dtype_name(default)} run comes after)")
                raise

    def post_run_cell(self, result: Any) -> None:
        if self.rows:
            order = {(device, dtype): n for n, (device, dtype) in
                     enumerate((d, t) for d in self.devices for t in self.dtypes)}
            labels = list(dict.fromkeys(record.check for record in self.rows))
            # A cell that names its own dtype (dtype=torch.float16) runs the same check in every shadow: one
            # row (the reader's, which comes last), as the ledger keeps one record per id.
            unique = list({record.id: record for record in self.rows}.values())
            rows = sorted(unique, key=lambda r: (labels.index(r.check), order.get((r.device, r.dtype), len(order))))
            from IPython.display import display

            # The reader's own run: PyTorch's default dtype on the CPU (each_cell refuses any other set-up).
            display(Rows(rows, reader=(dtype_name(torch.get_default_dtype()), "cpu")))
        self.rows.clear()


class _Prepend(ast.NodeTransformer):
    """Puts `run the shadows` before a cell's first statement (an error there then fails the cell)."""

    CALL = '__import__("checks.teaching.cells", fromlist=["_"])._active.run_shadows()'

    def visit_Module(self, node: ast.Module) -> ast.Module:
        if _active is None or not node.body:
            return node
        call = ast.parse(self.CALL).body
        node.body = [*call, *node.body]
        return ast.fix_missing_locations(node)


def each_cell(dtypes: Sequence[str] = ("float32", "float64"), devices: Sequence[str] | str | None = None) -> None:
    """Run every following cell in each dtype and on each device (None: every device this machine has).

    Call it in a page's hidden setup cell, after the imports and before any tensor is made: a tensor made
    earlier would be one object shared by every dtype's run. It seeds torch with 0, so that a page's numbers
    (and its records' seed) are the same in every build.
    """
    global _active
    try:
        shell = get_ipython()  # type: ignore[name-defined]  # noqa: F821
    except NameError:
        raise CheckInputError("checks.each_cell runs each cell again per dtype and device, which needs IPython "
                              "(a notebook, or the book's build); at a plain prompt each check prints one line") from None
    if isinstance(dtypes, str):
        dtypes = [dtypes]
    names = [dtype_name(to_dtype(name)) for name in dtypes]
    places = resolve_devices(devices)
    reader = (dtype_name(torch.get_default_dtype()), "cpu")
    if reader[0] not in names or "cpu" not in places:
        raise CheckInputError(f"the reader's own run is {reader[0]} on the cpu (PyTorch's defaults): dtypes and "
                              f"devices must include them; got dtypes {names}, devices {places}")
    shared = [name for name, value in shell.user_ns.items()
              if isinstance(value, (torch.Tensor, torch.nn.Module)) and not name.startswith("_")]
    if shared:
        raise CheckInputError(f"checks.each_cell must come before any tensor or module is made ({', '.join(shared)} "
                              f"exist already, and every dtype's run would share them): call it right after the imports")
    stop()
    # A page's numbers reproduce from build to build: its random state starts from one seed, which every
    # record keeps (torch.initial_seed()); a cell that seeds torch itself overrides it.
    torch.manual_seed(0)
    engine = Engine(shell, names, places,
                    [Shadow(dtype, device) for device in places for dtype in names
                     if (dtype, device) != reader])
    shell.events.register("pre_run_cell", engine.pre_run_cell)
    shell.events.register("post_run_cell", engine.post_run_cell)
    shell.ast_transformers.append(_Prepend())
    _active = engine


def stop() -> None:
    """Undo each_cell: cells run once again, and checks print their lines."""
    global _active
    if _active is None:
        return
    shell = _active.shell
    shell.events.unregister("pre_run_cell", _active.pre_run_cell)
    shell.events.unregister("post_run_cell", _active.post_run_cell)
    shell.ast_transformers[:] = [item for item in shell.ast_transformers if not isinstance(item, _Prepend)]
    _active = None
