"""Render the notebooks: README.md from index.ipynb, outputs saved in place, the site's run in a kernel.

`nbdev_readme` needs Quarto, which cannot be installed here, so nbconvert renders the README.
Executing skips cells flagged with settings.ini's `tst_flags` (`#| slow`, `#| notest`): they keep
the outputs stored in the notebook, so the 5-minute run's plots still show.
"""
import argparse, configparser, os, re
from pathlib import Path
import nbformat
from nbconvert import MarkdownExporter

root = Path(__file__).resolve().parents[1]
cfg = configparser.ConfigParser(); cfg.read(root/'settings.ini')
skip_flags = set(cfg['DEFAULT']['tst_flags'].split())

def directives(cell) -> dict:
    "The `#| name args` lines at the top of a code cell."
    out = {}
    for line in cell.source.splitlines():
        if not line.startswith('#|'): break
        name, *args = line[2:].split()
        out[name] = args
    return out

def strip_directives(cell):
    lines = cell.source.splitlines()
    cell.source = '\n'.join(l for l in lines if not l.startswith('#|')).strip('\n')

def readme(nb_path: Path, out: Path):
    nb = nbformat.read(nb_path, as_version=4)
    cells = []
    for c in nb.cells:
        if c.cell_type == 'code':
            d = directives(c)
            if 'hide' in d or 'default_exp' in d: continue
            if d.get('echo:') == ['false']:  # a figure: the README has no place for its image, so it points to it
                where = f"[{nb_path.name}]({nb_path.name})"
                c = nbformat.v4.new_markdown_cell(f"(The figure is in {where} and on the site's home page.)")
            else: strip_directives(c)
        cells.append(c)
    nb.cells = cells
    nb.metadata['language_info'] = {'name': 'python'}  # nbdev_clean strips it; code fences need it
    body, _ = MarkdownExporter(exclude_input_prompt=True, exclude_output_prompt=True).from_notebook_node(nb)
    body = re.sub(r'\]\((\d\d_\w+\.ipynb|index\.ipynb)', r'](nbs/\1', body)  # chapter links, from the top of the repository
    out.write_text(body.rstrip('\n') + '\n')

def execute(nb_path: Path, slow: bool = False):
    "Run the notebook's cells in a fresh shell in the notebook's folder; flagged cells keep their outputs unless `slow`."
    from execnb.nbio import read_nb
    from execnb.shell import CaptureShell
    nb = read_nb(nb_path)
    flags = skip_flags - {'slow'} if slow else skip_flags
    def skip(cell):
        if cell.cell_type != 'code': return True
        d = directives(cell)
        if flags & set(d) or d.get('eval:', [''])[0].lower() == 'false': return True
        cell.outputs = []  # CaptureShell keeps a cell's old outputs when the new run prints nothing
        return False
    cwd = os.getcwd(); os.chdir(nb_path.parent)
    try: CaptureShell(nb_path).run_all(nb, exc_stop=True, preproc=skip)
    finally: os.chdir(cwd)
    return nb

def in_kernel(nb_path: Path, timeout: int = 600):
    """The notebook run top to bottom in a real Jupyter kernel (ipykernel), as Run All does. Flagged cells are
    skipped and keep their stored outputs (nbclient's `skip-execution` tag), so the site shows the 5-minute run.
    Raises CellExecutionError on a failing cell."""
    from nbclient import NotebookClient
    nb = nbformat.read(nb_path, as_version=4)
    skipped = [c for c in nb.cells if c.cell_type == 'code' and (skip_flags & set(directives(c))
               or directives(c).get('eval:', [''])[0].lower() == 'false')]
    for c in skipped: c.metadata['tags'] = c.metadata.get('tags', []) + ['skip-execution']
    NotebookClient(nb, timeout=timeout, kernel_name='python3', resources={'metadata': {'path': str(nb_path.parent)}}).execute()
    for c in skipped: c.metadata['tags'].remove('skip-execution')
    return nb

def inplace(nb_paths, slow=False):
    from execnb.nbio import write_nb
    for p in nb_paths: write_nb(execute(p, slow), p); print(f'executed {p}')

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument('--readme', nargs=2, metavar=('NB', 'OUT'))
    g.add_argument('--inplace', action='store_true')
    ap.add_argument('--slow', action='store_true', help='with --inplace: run the slow cells too, storing their outputs')
    ap.add_argument('nbs', nargs='*', type=Path)
    a = ap.parse_args()
    if a.readme: readme(Path(a.readme[0]), Path(a.readme[1]))
    else: inplace(a.nbs, a.slow)
