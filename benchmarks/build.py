"""Benchmark: how long building the book takes, beside the floor of kernel starts, imports and Sphinx.

Run from the repository root: `python benchmarks/build.py [--repeat N]`. It copies the working tree's
files (tracked, and untracked ones git does not ignore) to two scratch folders, so the working tree's own
_build is left alone: the book as it is, and the floor book, the same book with every executed chapter cut
to its title and one `import torch, checks` cell: kernel starts, imports and Sphinx, no checks. The floor is
built twice, one chapter after another (CHECKS_BUILD_PROCESSES=1) and several at a time as the book is (the
default, one kernel per core). The book is built clean twice: with its cache folder (checks.cached,
.checks-cache) emptied first, then again, reading back what the first stored, as a contributor's clean build
does.

The chapters' own computation is work, not overhead, so the clean build is shown beside the parallel floor
plus that work divided among the cores: each chapter's execution time in the clean build less its floor
chapter's (a kernel start and the imports), summed, over the number of kernels at a time. It prints both
clean builds and both floors (the fastest of N clean builds each, alternated), that sum, the no-change
rebuild, the rebuilds after editing one chapter, the notebook writer (code that only writes pages and
notebooks: no chapter executed) and `checks` (with how many chapters each executed), the clean build's
execution time per chapter, and the load average, since the machine may be shared. Timings are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from myst_nb.core.read import is_myst_markdown_notebook

from checks.sphinx.sphinxext import CACHE_FOLDER

ROOT = Path(__file__).resolve().parents[1]
JUPYTER_BOOK = str(Path(sys.executable).with_name("jupyter-book"))
EXECUTED = re.compile(r"(\S+?\.(?:md|ipynb)): Executed notebook in ([0-9.]+) seconds")
FLOOR_CELL = "```{code-cell} ipython3\nimport torch, checks\n```\n"


def build(project: Path, *extra: str, processes: int | None = None) -> tuple[float, str]:
    """Time `jupyter-book build`, as a contributor runs it, on a copy of the book; its log for counting."""
    env = {**os.environ, "PYTHONPATH": str(project)}
    env.pop("CHECKS_BUILD_PROCESSES", None)
    if processes is not None:
        env["CHECKS_BUILD_PROCESSES"] = str(processes)
    start = time.perf_counter()
    result = subprocess.run([JUPYTER_BOOK, "build", *extra, str(project)], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return elapsed, result.stdout


def copy_book(target: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    for name in listed:
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


def cut_to_floor(project: Path) -> int:
    """Cut every executed chapter to its front matter, its title and one import cell; how many were cut."""
    cut = 0
    for chapter in sorted((project / "book").glob("*.md")):
        text = chapter.read_text(encoding="utf-8")
        if chapter.name.startswith("_") or not is_myst_markdown_notebook(text):  # _*.md are never built
            continue
        _, front, body = text.split("---\n", 2)
        title = next(line for line in body.splitlines() if line.startswith("# "))
        chapter.write_text(f"---\n{front}---\n{title}\n\n{FLOOR_CELL}", encoding="utf-8")
        cut += 1
    return cut


def clean_build(project: Path, processes: int | None = None) -> tuple[float, str]:
    shutil.rmtree(project / "_build", ignore_errors=True)
    return build(project, processes=processes)


def touch(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")


def chapter_times(log: str) -> list[tuple[str, float]]:
    return sorted(((Path(path).stem, float(seconds)) for path, seconds in EXECUTED.findall(log)),
                  key=lambda item: -item[1])


def every_run(builds: list[tuple[float, str]]) -> str:
    return "" if len(builds) == 1 else f"; runs: {', '.join(f'{seconds:.1f}' for seconds, _ in builds)} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="clean builds of each book; the fastest counts")
    arguments = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch:
        floor_book = copy_book(Path(scratch) / "floor")
        cut = cut_to_floor(floor_book)
        book = copy_book(Path(scratch) / "book")
        floors, parallel_floors, colds, warms = [], [], [], []
        for _ in range(arguments.repeat):  # alternated, so a change in the machine's load hits all alike
            floors.append(clean_build(floor_book, processes=1))
            parallel_floors.append(clean_build(floor_book))
            shutil.rmtree(book / CACHE_FOLDER, ignore_errors=True)
            colds.append(clean_build(book))
            warms.append(clean_build(book))  # checks.cached reads back what the cold build stored
        floor, _ = min(floors)
        parallel_floor, parallel_log = min(parallel_floors)
        cold, cold_log = min(colds)
        clean, clean_log = min(warms)
        unchanged, log = min(build(book) for _ in range(3))
        reread = "reading sources... [" in log
        edited_chapter = "small-function"
        touch(book / "book" / f"{edited_chapter}.md")
        one_chapter, one_log = build(book)
        touch(book / "checks" / "sphinx" / "notebooks.py")  # writes notebooks only: outside the fingerprint
        writer_edit, writer_log = build(book)
        touch(book / "checks" / "__init__.py")  # code a chapter's kernel runs: in the fingerprint
        checks_edit, checks_log = build(book)
    chapters = chapter_times(clean_log)
    processes = re.search(r"\((\d+) at a time\)", clean_log)
    kernels = int(processes.group(1)) if processes else os.cpu_count() or 1
    floor_chapters = dict(chapter_times(parallel_log))
    # Each chapter's own computation: its execution beyond its floor chapter's kernel start and imports.
    own = sum(max(0.0, seconds - floor_chapters.get(name, 0.0)) for name, seconds in chapters)
    print(f"load average (1, 5, 15 min): before {', '.join(f'{x:.2f}' for x in load_before)}; "
          f"after {', '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    print(f"clean build:                  {clean:6.1f} s ({len(chapters)} chapters executed, "
          f"{processes.group(1) if processes else '?'} at a time, checks.cached results of the build below read "
          f"back{every_run(warms)})")
    print(f"clean build, cold cache:      {cold:6.1f} s (no {CACHE_FOLDER}: every cached result computed"
          f"{every_run(colds)})")
    print(f"floor (sequential):           {floor:6.1f} s ({cut} chapters cut to one `import torch, checks` cell, "
          f"one at a time{every_run(floors)})")
    floor_processes = re.search(r"\((\d+) at a time\)", parallel_log)
    print(f"floor (parallel):             {parallel_floor:6.1f} s (the same, "
          f"{floor_processes.group(1) if floor_processes else '?'} at a time{every_run(parallel_floors)})")
    print(f"parallel floor + chapters' own computation / kernels: {parallel_floor:.1f} + {own:.1f} / {kernels} = "
          f"{parallel_floor + own / kernels:.1f} s (beside the clean build's {clean:.1f} s)")
    print(f"no-change rebuild:            {unchanged:6.1f} s (fastest of 3; documents re-read: "
          f"{'yes' if reread else 'none'})")
    print(f"rebuild after editing {edited_chapter}: {one_chapter:6.1f} s "
          f"(chapters executed: {', '.join(name for name, _ in chapter_times(one_log)) or 'none'})")
    print(f"rebuild after editing the notebook writer: {writer_edit:6.1f} s "
          f"(chapters executed: {len(chapter_times(writer_log))})")
    print(f"rebuild after editing checks: {checks_edit:6.1f} s "
          f"(chapters executed: {len(chapter_times(checks_log))})")
    print(f"clean build, execution time per chapter, each beside the others running "
          f"(sum {sum(s for _, s in chapters):.1f} s):")
    for name, seconds in chapters:
        print(f"  {name:28s} {seconds:6.1f} s")


if __name__ == "__main__":
    main()
