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
from nbclient import NotebookClient

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root / 'tools'))
from nbrun import directives, skip_flags  # noqa: E402

def seconds(cell) -> float:
    "The cell's wall time from nbclient's record: from the kernel's start on it to its reply."
    t = cell.metadata.get('execution', {})
    a, b = t.get('iopub.execute_input'), t.get('shell.execute_reply')
    return (datetime.fromisoformat(b.rstrip('Z')) - datetime.fromisoformat(a.rstrip('Z'))).total_seconds() if a and b else 0.0

def run(path: Path) -> tuple[float, list, list]:
    "(wall seconds, [(seconds, first line)] slowest first, [warnings printed]) for a Run All without slow cells."
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        if c.cell_type == 'code' and skip_flags & set(directives(c)):
            c.metadata['tags'] = c.metadata.get('tags', []) + ['skip-execution']
    t = time.perf_counter()
    NotebookClient(nb, timeout=1200, kernel_name='python3', record_timing=True,
                   resources={'metadata': {'path': str(path.parent)}}).execute()
    wall = time.perf_counter() - t
    cells = sorted(((seconds(c), c.source.splitlines()[0][:70]) for c in nb.cells if c.cell_type == 'code'),
                   reverse=True)
    said = [o.get('text', '') for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', [])
            if o.get('name') == 'stderr' and 'Warning' in o.get('text', '')]
    return wall, cells, said

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
