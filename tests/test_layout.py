"""The chapters read as chapters (#24): short code cells, and code lines that fit the site's code column."""
import json
from pathlib import Path
import pytest

NBS = Path(__file__).resolve().parents[1] / 'nbs'
CHAPTER, APPENDIX = 30, 40  # lines of code in a cell (directive lines such as `#| export` not counted)
WIDTH = 110                 # characters in a code line: what tools/docs_check.py measures on the site
# Cells still over the limit, each named by its notebook and its first definition. Splitting one of these classes
# means moving methods into functions the class calls; the list may only shrink (the last test says when it can).
LONG = {('00_rng', 'class PCG32:'), ('01_wordpiece', 'class WordPieceTokenizer:')}

def code_cells(path: Path) -> list[list[str]]:
    "Each code cell's lines, without its directive lines."
    cells = json.loads(path.read_text())['cells']
    return [[l for l in ''.join(c['source']).splitlines() if not l.startswith('#|')]
            for c in cells if c['cell_type'] == 'code']

def first_def(lines: list[str]) -> str:
    return next((l for l in lines if l.startswith(('def ', 'class '))), lines[0] if lines else '')

def named(key: tuple[str, str], lines: list[str]) -> bool: return first_def(lines).startswith(key[1])

NOTEBOOKS = sorted(NBS.glob('*.ipynb'))

@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.stem)
def test_cells_are_short(path):
    limit = APPENDIX if path.stem[:2] >= '10' else CHAPTER  # 00-09 and index: chapters; 10 and on: appendices
    long = [(first_def(c), len(c)) for c in code_cells(path) if len(c) > limit
            and not any(k[0] == path.stem and named(k, c) for k in LONG)]
    assert not long, f'{path.name}: cells over {limit} lines: {long}'

@pytest.mark.parametrize('path', NOTEBOOKS, ids=lambda p: p.stem)
def test_code_lines_fit_the_column(path):
    wide = [l for c in code_cells(path) for l in c if len(l) > WIDTH]
    assert not wide, f'{path.name}: code lines over {WIDTH} characters: {wide[:3]}'

def test_the_long_list_only_shrinks():
    "Every entry of LONG names a cell that is still over its limit: a cell split is taken off the list."
    stale = []
    for stem, name in sorted(LONG):
        path = NBS / f'{stem}.ipynb'
        limit = APPENDIX if stem[:2] >= '10' else CHAPTER
        if not any(named((stem, name), c) and len(c) > limit for c in code_cells(path)): stale.append((stem, name))
    assert not stale, f'split now, take them off LONG: {stale}'

def test_the_check_can_fail(tmp_path):
    "A 31-line chapter cell is caught; a 40-line appendix cell passes."
    cell = lambda n: {'cell_type': 'code', 'source': '#| export\n' + '\n'.join(f'x{i} = {i}' for i in range(n))}
    (tmp_path / '05_x.ipynb').write_text(json.dumps({'cells': [cell(31)]}))
    assert [len(c) for c in code_cells(tmp_path / '05_x.ipynb')] == [31]
    with pytest.raises(AssertionError, match='cells over 30 lines'): test_cells_are_short(tmp_path / '05_x.ipynb')
    (tmp_path / '15_x.ipynb').write_text(json.dumps({'cells': [cell(40)]}))
    test_cells_are_short(tmp_path / '15_x.ipynb')
