"""Render the notebooks: README.md from index.ipynb, outputs saved in place, the site's run in a kernel.

`nbdev_readme` needs Quarto, which cannot be installed here, so nbconvert renders the README.
Executing skips cells flagged with settings.ini's `tst_flags` (`#| slow`, `#| notest`): they keep
the outputs stored in the notebook, so the 5-minute run's plots still show. `--slow` reruns them and stores their
outputs with a digest of the code that drew each figure (`made_by`), which tests/test_layout.py checks.
"""
import argparse, base64, configparser, os, re, shutil, tempfile
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
    """README.md from the notebook: a shown cell as code and output; a hidden one (`#| echo: false`) as what it shows,
    printed text in a fence, Markdown as Markdown, a figure as a PNG in OUT's folder README_files/ (GitHub shows it
    there) with its alt text and caption."""
    nb = nbformat.read(nb_path, as_version=4)
    figures = out.parent / 'README_files'
    shutil.rmtree(figures, ignore_errors=True)
    cells = []
    for c in nb.cells:
        if c.cell_type == 'code':
            d = directives(c)
            if 'hide' in d or 'default_exp' in d: continue
            if d.get('echo:') == ['false']:
                outs = []  # consecutive printed outputs are one block, as Jupyter shows them
                for o in c.get('outputs', []):
                    if o.get('output_type') == 'stream' and outs and outs[-1].get('output_type') == 'stream':
                        outs[-1] = dict(outs[-1], text=outs[-1]['text'] + o['text'])
                    else: outs.append(o)
                shown = (_shown(o, d, figures, out.parent) for o in outs)
                cells += [nbformat.v4.new_markdown_cell(md) for md in shown if md]
                continue
            strip_directives(c)
        cells.append(c)
    nb.cells = cells
    nb.metadata['language_info'] = {'name': 'python'}  # nbdev_clean strips it; code fences need it
    body, _ = MarkdownExporter(exclude_input_prompt=True, exclude_output_prompt=True).from_notebook_node(nb)
    body = re.sub(r'\]\((\d\d[a-z]?_\w+\.ipynb|index\.ipynb)', r'](nbs/\1', body)  # chapter links, from the top of the repository
    out.write_text(body.rstrip('\n') + '\n')

def _shown(o, d: dict, figures: Path, top: Path) -> str:
    "One output of a hidden cell as README Markdown: printed text fenced, Markdown as it is, a PNG as a file."
    if o.get('output_type') == 'stream': return '```\n' + o['text'].rstrip('\n') + '\n```'
    data = o.get('data', {})
    if 'text/markdown' in data: return data['text/markdown']
    if 'image/png' in data:
        figures.mkdir(exist_ok=True)
        png = figures / f'figure-{len(list(figures.iterdir())) + 1}.png'
        png.write_bytes(base64.b64decode(data['image/png']))
        cap = ' '.join(d.get('fig-cap:', []))
        return f"![{' '.join(d.get('fig-alt:', []))}]({png.relative_to(top)})" + (f'\n\n*{cap}*' if cap else '')
    return ''

def execute(nb_path: Path):
    "Run the notebook's cells in a fresh shell in the notebook's folder; flagged cells keep their outputs."
    from execnb.nbio import read_nb
    from execnb.shell import CaptureShell
    nb = read_nb(nb_path)
    def skip(cell):
        if cell.cell_type != 'code': return True
        d = directives(cell)
        if skip_flags & set(d) or d.get('eval:', [''])[0].lower() == 'false': return True
        cell.outputs = []  # CaptureShell keeps a cell's old outputs when the new run prints nothing
        return False
    cwd = os.getcwd(); os.chdir(nb_path.parent)
    try: CaptureShell(nb_path).run_all(nb, exc_stop=True, preproc=skip)
    finally: os.chdir(cwd)
    return nb

def in_kernel(nb_path: Path, timeout: int = 600, slow: bool = False, extra: list[str] = ()):
    """The notebook run top to bottom in a real Jupyter kernel (ipykernel), as Run All does. Flagged cells are
    skipped and keep their stored outputs (nbclient's `skip-execution` tag), so the site shows the 5-minute run;
    with `slow` they run too. Every figure's PNG carries the size of its smallest text (tools/figmeta.py).
    `extra` cells run after the last, in the same kernel, and leave only their printed text, in
    `nb.metadata['extra_outputs']` (tests/test_exercises.py's trials). Raises CellExecutionError on a failing cell."""
    from nbclient import NotebookClient
    from traitlets.config import Config
    nb = nbformat.read(nb_path, as_version=4)
    flags = skip_flags - {'slow'} if slow else skip_flags
    skipped = [c for c in nb.cells if c.cell_type == 'code' and (flags & set(directives(c))
               or directives(c).get('eval:', [''])[0].lower() == 'false')]
    for c in skipped: c.metadata['tags'] = c.metadata.get('tags', []) + ['skip-execution']
    setup = nbformat.v4.new_code_cell(f"import sys; sys.path.insert(0, {str(root / 'tools')!r})\n"
                                      "import figmeta; figmeta.install(); del sys.path[0]")
    nb.cells.insert(0, setup)
    after = [nbformat.v4.new_code_cell(src) for src in extra]
    nb.cells.extend(after)
    sockets = tempfile.mkdtemp(prefix='nbrun-')  # IPC: TCP made the kernel warn of plain text on every run
    ipc = Config({'KernelManager': {'transport': 'ipc', 'ip': os.path.join(sockets, 'kernel')}})
    try: NotebookClient(nb, timeout=timeout, kernel_name='python3', config=ipc,
                        resources={'metadata': {'path': str(nb_path.parent)}}).execute()
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
        nb.cells.remove(setup)
        for c in after: nb.cells.remove(c)
    if extra: nb.metadata['extra_outputs'] = [''.join(o.get('text', '')) for c in after for o in c.outputs]
    for c in skipped: c.metadata['tags'].remove('skip-execution')
    return nb

def text_output(cell) -> str:
    "What a code cell printed and returned, as text (its figures aside)."
    out = []
    for o in cell.get('outputs', []):
        if o['output_type'] == 'stream': out.append(''.join(o['text']))
        elif o['output_type'] in ('execute_result', 'display_data') and 'image/png' not in o.get('data', {}):
            out.append(''.join(o.get('data', {}).get('text/plain', '')))
    return ''.join(out)

WARNING = re.compile(r'\w*Warning\b[^\n]{0,60}')  # a warning as Python prints it, with its first words

def kernel_warnings(nb) -> list[str]:
    "The warnings a reader's Jupyter shows: every code cell's stderr, hidden ones too (the site drops those)."
    return [w for c in nb.cells if c.cell_type == 'code' for o in c.get('outputs', []) if o.get('name') == 'stderr'
            for w in WARNING.findall(o.get('text', ''))]

def stale_outputs(stored, ran) -> list[str]:
    """The cells whose stored text output is not what their code prints now: a reader of the notebook would see
    numbers the code no longer makes. Cells stored without output, skipped cells, and cells whose output changes
    from run to run by nature (a time; marked `#| varies: why`) aside."""
    return [f"cell {a.get('id')}: stored {text_output(a).strip()[:120]!r}, now {text_output(b).strip()[:120]!r}"
            for a, b in zip(stored.cells, ran.cells) if _stale(a, b)]

def _stale(a, b) -> bool:
    "Cell `a`, as stored, holds a text output that `b`, the same cell run now, does not print."
    if a.cell_type != 'code' or not a.get('outputs') or 'skip-execution' in b.metadata.get('tags', []): return False
    return 'varies:' not in directives(a) and text_output(a).strip() != text_output(b).strip()

def refresh(nb_path: Path):
    """Run the notebook in a kernel and store the new outputs of the cells whose stored text output is stale, and
    of new cells (stored without output) that print now."""
    ran, nb = in_kernel(nb_path), nbformat.read(nb_path, as_version=4)
    new = lambda c, r: c.cell_type == 'code' and not c.get('outputs') and r.get('outputs')
    cells = [(c, r) for c, r in zip(nb.cells, ran.cells) if _stale(c, r) or new(c, r)]
    for c, r in cells: c.outputs = r.outputs
    nbformat.write(nb, nb_path)
    print(f'{nb_path}: stored the new outputs of {len(cells)} cell(s)')

def made_by(source: str) -> str:
    """A digest of what drew a slow cell's figures: the cell's code (not its directives, such as the caption) and every
    function of bert_nb its `plot_*` calls reach. Stored beside the figures when the slow cells run, so that a test
    sees a figure older than its code."""
    source = '\n'.join(l for l in source.splitlines() if not l.startswith('#|'))
    import ast, hashlib, importlib, inspect, sys, textwrap
    sys.path.insert(0, str(root))
    defs = {}
    for m in [importlib.import_module(f'bert_nb.{p.stem}') for p in sorted((root / 'bert_nb').glob('[a-z]*.py'))]:
        for name, obj in vars(m).items():
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == m.__name__:
                defs[name] = inspect.getsource(obj)
    names = lambda src: {n.id for n in ast.walk(ast.parse(textwrap.dedent(src))) if isinstance(n, ast.Name)}
    todo, seen = {n for n in names(source) if n.startswith('plot_')} & defs.keys(), set()
    while todo:  # the names the code uses (not words in its strings: metrics['train'] is not train())
        seen.add(name := todo.pop())
        todo |= names(defs[name]) & defs.keys() - seen
    return hashlib.sha256('\n'.join([source] + [defs[n] for n in sorted(seen)]).encode()).hexdigest()[:16]

def keep(c, r):
    "Store cell `r`'s outputs (the same cell, run now) in `c`, each figure stamped with the digest of its code."
    for o in r.outputs:
        if 'image/png' in o.get('data', {}): o.metadata.setdefault('image/png', {})['made_by'] = made_by(c.source)
    c.outputs = r.outputs

def run_slow(nb_path: Path):
    "Run the notebook with its slow cells in a kernel and store those cells' outputs, each figure stamped `made_by`."
    ran = in_kernel(nb_path, timeout=1800, slow=True)
    nb = nbformat.read(nb_path, as_version=4)
    for c, r in zip(nb.cells, ran.cells):
        if c.cell_type == 'code' and 'slow' in directives(c):
            keep(c, r)
    nbformat.write(nb, nb_path)
    print(f'ran the slow cells of {nb_path}')

def store(nb_path: Path):
    """Run the notebook in a kernel as the site's build runs it (one thread) and store every output, each figure
    stamped `made_by`, so that the notebook shows its numbers and figures where a reader opens it (GitHub, Jupyter);
    the slow cells keep theirs. The site's build then fails on any stored text the code no longer prints, and
    tests/test_figures.py on any figure older than its code."""
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    ran, nb = in_kernel(nb_path), nbformat.read(nb_path, as_version=4)
    for c, r in zip(nb.cells, ran.cells):
        if c.cell_type != 'code' or skip_flags & set(directives(c)): continue
        keep(c, r)
    nbformat.write(nb, nb_path)
    print(f'{nb_path}: stored every output')

def check(nb_paths) -> int:
    """Run each notebook in a kernel as the site's build does (two at a time, one thread each) and print every stored
    output that the code prints otherwise here; 1 when any does. Run it under another kernel set (KERNELS in the
    Makefile) to find the outputs that hold on one CPU only."""
    from concurrent.futures import ThreadPoolExecutor
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    def one(p): return [f'{p.stem}: {s}' for s in stale_outputs(nbformat.read(p, as_version=4), in_kernel(p))]
    with ThreadPoolExecutor(2) as ex: found = [s for ss in ex.map(one, nb_paths) for s in ss]
    print('\n'.join(found) if found else f'{len(nb_paths)} notebooks: every stored output printed again')
    return int(bool(found))

def inplace(nb_paths):
    from execnb.nbio import write_nb
    for p in nb_paths: write_nb(execute(p), p); print(f'executed {p}')

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument('--readme', nargs=2, metavar=('NB', 'OUT'))
    g.add_argument('--inplace', action='store_true', help='run the notebooks (not their slow cells), store outputs')
    g.add_argument('--slow', action='store_true', help="run the notebooks in a kernel, store their slow cells' outputs")
    g.add_argument('--refresh', action='store_true', help='run the notebooks in a kernel, store the stale outputs')
    g.add_argument('--store', action='store_true', help='run the notebooks in a kernel, store every output')
    g.add_argument('--check', action='store_true', help='run the notebooks in a kernel, list the stale outputs')
    ap.add_argument('nbs', nargs='*', type=Path)
    a = ap.parse_args()
    if a.readme: readme(Path(a.readme[0]), Path(a.readme[1]))
    elif a.slow: [run_slow(p) for p in a.nbs]
    elif a.refresh: [refresh(p) for p in a.nbs]
    elif a.store: [store(p) for p in a.nbs]
    elif a.check: raise SystemExit(check(a.nbs))
    else: inplace(a.nbs)
