"""The chapters read as chapters (#24): short code cells, and code lines that fit the site's code column."""
import json, re
from pathlib import Path
import pytest

NBS = Path(__file__).resolve().parents[1] / 'nbs'
CHAPTER, APPENDIX = 30, 40  # lines of code in a cell (directive lines such as `#| export` not counted)
WIDTH = 110                 # characters in a code line: the site's code column holds 125 at 1280 px (docs_check)

def code_cells(path: Path) -> list[list[str]]:
    "Each code cell's lines, without its directive lines."
    cells = json.loads(path.read_text())['cells']
    return [[l for l in ''.join(c['source']).splitlines() if not l.startswith('#|')]
            for c in cells if c['cell_type'] == 'code']

def first_line(lines: list[str]) -> str:
    return next((l for l in lines if l.startswith(('def ', 'class '))), lines[0] if lines else '')

NOTEBOOKS = sorted(NBS.glob('*.ipynb'))

@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.stem)
def test_cells_are_short(path):
    limit = APPENDIX if path.stem[:2] >= '10' else CHAPTER  # 00-09 and index: chapters; 10 and on: appendices
    long = [(first_line(c), len(c)) for c in code_cells(path) if len(c) > limit]
    assert not long, f'{path.name}: cells over {limit} lines: {long}'

@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.stem)
def test_code_lines_fit_the_column(path):
    wide = [l for c in code_cells(path) for l in c if len(l) > WIDTH]
    assert not wide, f'{path.name}: code lines over {WIDTH} characters: {wide[:3]}'

def test_the_checks_can_fail(tmp_path):
    "A 31-line chapter cell and a 111-character line are caught; a 40-line appendix cell passes."
    cell = lambda lines: {'cell_type': 'code', 'source': '#| export\n' + '\n'.join(lines)}
    (tmp_path / '05_x.ipynb').write_text(json.dumps({'cells': [cell([f'x{i} = {i}' for i in range(31)])]}))
    with pytest.raises(AssertionError, match='cells over 30 lines'): test_cells_are_short(tmp_path / '05_x.ipynb')
    (tmp_path / '06_x.ipynb').write_text(json.dumps({'cells': [cell(['x = ' + '1' * 107])]}))
    with pytest.raises(AssertionError, match='over 110 characters'):
        test_code_lines_fit_the_column(tmp_path / '06_x.ipynb')
    (tmp_path / '15_x.ipynb').write_text(json.dumps({'cells': [cell([f'x{i} = {i}' for i in range(40)])]}))
    test_cells_are_short(tmp_path / '15_x.ipynb')

def test_every_notebook_is_on_the_site():
    "A page is built from tools/site.py's CHAPTERS but reached from mkdocs.yml's nav: 07 was built and left out of it."
    import ast
    tree = ast.parse((NBS.parent / 'tools' / 'site.py').read_text())
    chapters = next(ast.literal_eval(n.value) for n in tree.body
                    if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == 'CHAPTERS')
    nav = (NBS.parent / 'mkdocs.yml').read_text()
    stems = sorted(p.stem for p in NBS.glob('*.ipynb'))
    assert stems == sorted(chapters)
    assert [s for s in stems if s != 'index' and f': {s}.md' not in nav] == []

def test_ci_checks_the_outputs_under_a_second_kernel_set():
    """The site's build, which compares every stored output with what the code prints, runs in `make test` under KERNELS:
    torch's, MKL's and oneDNN's AVX2 paths, so an output that holds on one CPU's rounding only fails in CI; then the pages in Chromium, and pytest."""
    make = (NBS.parent / 'Makefile').read_text()
    kernels = next(l for l in make.splitlines() if l.startswith('KERNELS :='))
    for var in ('ATEN_CPU_CAPABILITY=', 'MKL_ENABLE_INSTRUCTIONS=', 'ONEDNN_MAX_CPU_ISA='): assert var in kernels
    recipe = lambda target: make.split(f'\n{target}:', 1)[1].split('\n\n', 1)[0]
    test = recipe('test').splitlines()
    assert test[-2].startswith('\t$(KERNELS) $(MAKE)') and 'docs' in test[-2].split(), test
    assert test[-1].split()[-2:] == ['pages', 'pytest'], test
    assert 'tools/docs_check.py' in recipe('pages') and 'tests/' in recipe('pytest')
    assert 'make test' in (NBS.parent / '.ci' / 'run').read_text()

def test_outputs_that_vary_say_why():
    "A cell exempt from the stale-output check names its reason; one that varies with the CPU asserts what holds."
    for path in NOTEBOOKS:
        for c in json.loads(path.read_text())['cells']:
            src = ''.join(c['source'])
            if c['cell_type'] != 'code' or '#| varies:' not in src: continue
            why = src.split('#| varies:', 1)[1].splitlines()[0].split()
            assert len(why) >= 3, f'{path.name}: a varies cell without its reason: {src[:80]!r}'
            if 'CPU' in why: assert 'assert ' in src or 'test_eq(' in src, f'{path.name}: {src[:80]!r} checks nothing'

LATER = ['electra', 'finetune', 'modernbert', 'tagging']  # the chapters after 03, built on the package's public names

@pytest.mark.parametrize('mod', LATER)
def test_later_chapters_import_public_names_only(mod):
    "A later chapter's module imports no underscored name, from the package or any other module."
    import ast
    tree = ast.parse((NBS.parent / 'bert_nb' / f'{mod}.py').read_text())
    private = [f'{n.module}.{a.name}' for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               for a in n.names if a.name.startswith('_')]
    reached = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
               and n.attr.startswith('_') and not n.attr.startswith('__')
               and isinstance(n.value, ast.Name) and n.value.id in ('bert_nb', 'files', 'checks', 'speed', 'bert')]
    assert not private and not reached, (mod, private, reached)

def test_later_chapters_figures_fit_a_phone():
    """A figure of 04-07 is at most 800 px wide, so that its text is not 4 px on a 390 px phone (#57): side-by-side
    panels are stacked. Only the verses of 07's plot_cases, lines of text, are wider."""
    import base64, struct
    wide = []
    for path in sorted(NBS.glob('0[4-7]_*.ipynb')):
        for c in json.loads(path.read_text())['cells']:
            for o in c.get('outputs', []):
                png = o.get('data', {}).get('image/png')
                if png is None or 'plot_cases(' in ''.join(c['source']): continue
                w = struct.unpack('>I', base64.b64decode(png)[16:20])[0]
                if w > 800: wide.append((path.stem, c['id'], w))
    assert wide == [], wide

STRING = r"'[^']*'|\"[^\"]*\""  # what a line quotes is not its code
CLOCK = re.compile(r'\bassert\b[^\n#]*\b(?:time|monotonic|perf_counter)\(\)\s*-')  # an assert on seconds elapsed

def test_no_test_asserts_a_quiet_machines_seconds():
    """A test that guards against a hang bounds an event (the command answered, the process ended) or waits with a
    limit far above any machine's time; an assert on the seconds elapsed fails a correct run on a loaded machine."""
    found = [f'{p.name}:{i}' for p in sorted(NBS.parent.glob('tests/*.py'))
             for i, l in enumerate(p.read_text().splitlines(), 1) if CLOCK.search(re.sub(STRING, "''", l))]
    assert found == [] and CLOCK.search('assert p.returncode and time.time() - t1 < 15')  # it can fail
