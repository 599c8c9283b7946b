"""Benchmark: how long a clean build, a no-change rebuild and a rebuild after editing `checks` take.

Run from the repository root: `python benchmarks/build.py`. It copies the tracked files to a scratch
folder, so the working tree's own _build is left alone. Timings are printed, never asserted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUPYTER_BOOK = str(Path(sys.executable).with_name("jupyter-book"))


def build(project: Path, *extra: str) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run([JUPYTER_BOOK, "build", *extra, str(project)], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(project)})
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return elapsed, result.stdout


def main() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "book"
        for name in files:
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, project / name)
        clean, _ = build(project)
        unchanged, log = build(project)
        reread = "reading sources... [" in log
        (project / "checks" / "records.py").write_text((project / "checks" / "records.py").read_text() + "\n")
        edited, log_after_edit = build(project)
        chapters = log_after_edit.count("Executing notebook") or log_after_edit.count("Executing")
    print(f"clean build:                 {clean:6.1f} s")
    print(f"no-change rebuild:           {unchanged:6.1f} s (documents re-read: {'yes' if reread else 'none'})")
    print(f"rebuild after editing checks: {edited:6.1f} s (notebook executions logged: {chapters})")


if __name__ == "__main__":
    main()
