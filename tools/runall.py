"""Time each chapter's Run All as a reader meets it: a real Jupyter kernel at torch's default threads, every cell in
order except the `#| slow` ones (timed apart: the chapters say above each what it costs), optionally beside a
second busy process. Prints each notebook's time and its slowest cells, and any warning a cell printed, hidden
cells included (the site shows no hidden cell; Jupyter shows them all).

    python tools/runall.py [--busy] [NOTEBOOK ...]      # default: the chapters 00 to 05
"""
import argparse, os, subprocess, sys, time
from datetime import datetime
from pathlib import Path
import nbformat

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root / 'tools'))
from nbrun import directives, in_kernel, kernel_warnings  # noqa: E402

def seconds(cell) -> float:
    "The cell's wall time from nbclient's record: from the kernel's start on it to its reply."
    t = cell.metadata.get('execution', {})
    a, b = t.get('iopub.execute_input'), t.get('shell.execute_reply')
    return (datetime.fromisoformat(b.rstrip('Z')) - datetime.fromisoformat(a.rstrip('Z'))).total_seconds() if a and b else 0.0

def run(path: Path) -> tuple[float, list, list]:
    "(wall seconds, [(seconds, first line)] slowest first, [warnings printed]) for a Run All without slow cells."
    t = time.perf_counter()
    nb = in_kernel(path, timeout=1200)  # the site's own run: flagged cells skipped, each cell's times recorded
    wall = time.perf_counter() - t
    cells = sorted(((seconds(c), c.source.splitlines()[0][:70]) for c in nb.cells if c.cell_type == 'code'),
                   reverse=True)
    return wall, cells, kernel_warnings(nb)

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('notebooks', nargs='*', type=Path)
    p.add_argument('--busy', action='store_true', help='run beside one busy process (a core kept at 100%%)')
    a = p.parse_args()
    paths = a.notebooks or sorted((root / 'nbs').glob('0[0-5]_*.ipynb'))
    busy = subprocess.Popen([sys.executable, '-c', 'while True: pass']) if a.busy else None
    try:
        for path in paths:
            wall, cells, said = run(path)
            slow = sum('slow' in directives(c) for c in nbformat.read(path, as_version=4).cells if c.cell_type == 'code')
            print(f"{path.name}: {wall:6.1f} s ({os.cpu_count()} cores{', one busy' if busy else ', idle'}; "
                  f"{slow} slow cell(s) not run)", flush=True)
            for s, first in cells[:3]: print(f"    {s:6.1f} s  {first}")
            for w in said: print(f"    a warning: {w.strip()[:150]}")
    finally:
        if busy: busy.kill()

if __name__ == '__main__': main()
