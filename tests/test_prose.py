"""Every number in a chapter's prose comes from a cell or from a JSON a cell reads (#57): each number of a markdown
cell, of a code comment and of a figure's caption or alt text, in every notebook (the README's index.ipynb and the
Results page too) is printed by one of the notebook's cells (as printed, or rounded to fewer decimals: 94.17% printed, 94.2% quoted) or written in one of its code cells (a share
there, 0.15, may be a percentage in the prose, 15%). A figure a cell reads from a bench/*.json counts once that
cell prints it: matched against every number of a JSON, at every scale, a made-up figure passed half the time (04's
electra.json, 6,893 numbers), so the JSON alone stands behind nothing. Appendix 14 quotes bench/step.json, which
each run of `make bench-step` rewrites: its prose has to be read again with it. What is not a measurement is left
out: formulas, code, links, years of citations, chapter and section numbers, the numbering of lists, issue numbers,
a split's name such as 80/10/10, file modes, versions and bit widths."""
import io, json, re, sys, tokenize
from pathlib import Path
import pytest

NBS = Path(__file__).resolve().parents[1] / 'nbs'
NUM = re.compile(r'(?<![\w.$\\^_{/-])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?!\w)')
NOT_MEASURED = [r'`[^`]*`', r'\$[^$]*\$',  # code, then formulas: a $ in code would pair with a formula's, hiding prose
                r'\]\(\d\d[a-z]?_\w+\.ipynb\)(?:, [\d.]+)+', r'\[\d\d[a-z]?\]\(\d\d[a-z]?_\w+\.ipynb\)',  # a chapter's number as its link
                r'\]\([^)]*\)',  # a link to a chapter and its sections, links
                r'\b(?:19|20)\d\d\b',  # years
                r'\b[Cc]hapters? \d\d(?:\s*(?:and|,|to)\s*\d\d)*', r'\b\d\d\'s\b', r'§\d+', r'\b\d\d[a-z]?_\w+',
                r'\b[Ss]ections? \d+(?:\.\d+)?(?:\s*(?:and|,|to)\s*\d+)*', r'#+ \d+(?:\.\d+)*\.?', r'(?m)^\d+\. ',
                r'\bappendix(?: A(?:\.\d+)?| \d\d\b)?', r'#\d+\b', r'\b\d+/\d+/\d+\b',  # appendices, issues, a split's name (80/10/10)
                r'\b0[0-7]{3}\b', r'\bLinux \d+\.\d+', r'\b\d+(?:-bit| bits)\b']  # file modes, versions, widths

def plain(n: str) -> str: return n.replace(',', '').replace('_', '')

def rounded(n: str) -> set[str]:
    "A printed number and its roundings to fewer decimals: what prose may quote of it."
    d = len(n.partition('.')[2])
    return {n} | {f'{float(n):.{k}f}' for k in range(d)}

def unsupported(path: Path) -> list[tuple[str, str, str]]:
    cells, known, shares = json.loads(path.read_text())['cells'], set(), set()
    for c in cells:
        if c['cell_type'] != 'code': continue
        src = ''.join(c['source'])
        for said in said_in_code(src): src = src.replace(said, ' ')  # what the code says of itself is checked
        written = [plain(n) for n in re.findall(r'\d[\d_,]*(?:\.\d+)?', src)]
        known |= set(written) | {n.split('.')[0] for n in written if re.fullmatch(r'\d+\.0+', n)}  # 300.0: 300
        shares |= {plain(f'{100 * float(n):.{d}f}') for n in written for d in range(3)}  # 0.15 in code, 15% in prose
        for o in c.get('outputs', []):
            printed = ''.join(o.get('text', '')) + ''.join(o.get('data', {}).get('text/plain', ''))
            known |= {r for m in NUM.finditer(printed) for r in rounded(plain(m[1]))}
    out = []
    for c in cells:
        text = ''.join(c['source']) if c['cell_type'] == 'markdown' else '\n'.join(said_in_code(''.join(c['source'])))
        for pat in NOT_MEASURED: text = re.sub(pat, ' ', text)
        out += [(c['id'], m[1], text[max(0, m.start() - 40):m.end() + 10].replace('\n', ' '))
                for m in NUM.finditer(text) if plain(m[1]) not in known
                and not (text[m.end():m.end() + 1] == '%' and plain(m[1]) in shares)]
    return out

def said_in_code(src: str) -> list[str]:
    "What a code cell says in words: its comments, and its figure's caption and alt text (`#| fig-cap:`, `#| fig-alt:`)."
    said = [l.split(':', 1)[1] for l in src.splitlines() if l.startswith(('#| fig-cap:', '#| fig-alt:'))]
    try: said += [t.string[1:] for t in tokenize.generate_tokens(io.StringIO(src).readline)
                  if t.type == tokenize.COMMENT and not t.string.startswith('#|')]
    except (tokenize.TokenError, SyntaxError): pass  # IPython's own syntax (!, %): its comments unread
    return said

@pytest.mark.parametrize('stem', sorted(p.stem for p in NBS.glob('*.ipynb')))  # the README, chapters, appendices
def test_every_number_in_the_prose_comes_from_a_cell(stem):
    assert unsupported(NBS / f'{stem}.ipynb') == []

TRACKER = re.compile(r'(?<![\w&])#\d\d\b')  # #35, #58: an issue of the tracker (colours such as #888 are not)

def reader_texts() -> dict[str, str]:
    "Everything a reader sees: the README, the shipped model's card, and every notebook's cells and outputs."
    root = NBS.parent
    texts = {p: p.read_text() for p in (root / 'README.md', root / 'bert_nb' / 'models' / 'kjv' / 'README.md')}
    for path in sorted(NBS.glob('*.ipynb')):
        for c in json.loads(path.read_text())['cells']:
            outs = [''.join(o.get('text', '')) + ''.join(o.get('data', {}).get('text/plain', ''))
                    for o in c.get('outputs', [])]
            texts[f"{path.name} cell {c['id']}"] = ''.join(c['source']) + '\n'.join(outs)
    return texts

def test_no_tracker_number_reaches_a_reader():
    "A reader has no tracker: a reason is said, not cited as #58."
    assert {k: TRACKER.findall(t) for k, t in reader_texts().items() if TRACKER.search(t)} == {}

def prose_words(md: str) -> int:
    "Words of a Markdown text outside its code blocks, tables and HTML: what a reader reads as prose."
    md = re.sub(r'(?ms)^```.*?^```', ' ', md)                  # fenced code and printed output
    md = '\n'.join(l for l in md.splitlines() if not l.lstrip().startswith('|'))  # tables
    return len(re.findall(r'[A-Za-z0-9][\w\'’.-]*', re.sub(r'<[^>]+>|\]\([^)]*\)', ' ', md)))

def test_the_readme_reads_in_three_minutes():
    "At most 1,500 words of prose: what the project is, the two commands, where to go next; the rest is elsewhere."
    assert prose_words((NBS.parent / 'README.md').read_text()) <= 1500

def test_the_checks_of_the_front_door_can_fail():
    assert TRACKER.findall('since #58, not #888 or &#39;') == ['#58']
    assert prose_words('two words\n```\nnot these\n```\n| nor | these |\n[a link](not/this.md)') == 4

def test_the_check_finds_a_number_no_cell_gives(tmp_path):
    "A sentence that quotes a figure no cell prints is caught; the same figure printed by a cell is not."
    nb = {'cells': [{'cell_type': 'markdown', 'id': 'a', 'source': ['It learns 47.3% of the blanks.']},
                    {'cell_type': 'code', 'id': 'b', 'source': ['print(acc)'],
                     'outputs': [{'output_type': 'stream', 'text': ['47.4%']}]}]}
    (tmp_path / 'x.ipynb').write_text(json.dumps(nb))
    assert [n for _, n, _ in unsupported(tmp_path / 'x.ipynb')] == ['47.3']
    nb['cells'][1]['outputs'][0]['text'] = ['accuracy 47.3%']
    (tmp_path / 'x.ipynb').write_text(json.dumps(nb))
    assert unsupported(tmp_path / 'x.ipynb') == []
    nb['cells'][1]['outputs'][0]['text'] = ['accuracy 47.31%']  # rounded in the prose: the same figure
    (tmp_path / 'x.ipynb').write_text(json.dumps(nb))
    assert unsupported(tmp_path / 'x.ipynb') == []

def test_a_figure_a_cell_reads_but_does_not_print_is_caught(tmp_path, monkeypatch):
    "A JSON a cell reads stands behind no number of the prose: only what a cell prints does."
    (tmp_path / 'bench').mkdir(); (tmp_path / 'nbs').mkdir()
    (tmp_path / 'bench' / 'r.json').write_text(json.dumps({'acc': [0.473, 0.468]}))
    read = "r = json.loads(Path('../bench/r.json').read_text())"
    nb = {'cells': [{'cell_type': 'markdown', 'id': 'a', 'source': ['It learns 47.3% of the blanks.']},
                    {'cell_type': 'code', 'id': 'b', 'source': [read], 'outputs': []}]}
    (tmp_path / 'nbs' / 'x.ipynb').write_text(json.dumps(nb))
    monkeypatch.setattr(sys.modules[__name__], 'NBS', tmp_path / 'nbs')  # where the JSON was looked for
    assert [n for _, n, _ in unsupported(tmp_path / 'nbs' / 'x.ipynb')] == ['47.3']

def test_a_share_in_code_is_a_percentage_in_prose_only(tmp_path):
    "0.15 in a code cell stands behind '15%' in the prose, not behind a bare 15 (a count is not a share)."
    nb = {'cells': [{'cell_type': 'markdown', 'id': 'a', 'source': ['It picks 15% of the tokens, 15 of 100.']},
                    {'cell_type': 'code', 'id': 'b', 'source': ['p = 0.15'], 'outputs': []}]}
    (tmp_path / 'x.ipynb').write_text(json.dumps(nb))
    assert [n for _, n, _ in unsupported(tmp_path / 'x.ipynb')] == ['15', '100']

def test_a_dollar_in_code_hides_no_prose(tmp_path):
    "A $ inside a code span is code, not half of a formula: the figures after it are still checked."
    nb = {'cells': [{'cell_type': 'markdown', 'id': 'a', 'source': ['Run `echo $HOME` first. It learns 47.3% of them, '
                                                                  'and $x^2$ is a formula.']}]}
    (tmp_path / 'x.ipynb').write_text(json.dumps(nb))
    assert [n for _, n, _ in unsupported(tmp_path / 'x.ipynb')] == ['47.3']

def test_a_comment_or_an_alt_text_vouches_for_nothing(tmp_path):
    "A number in a comment or a figure's alt text is checked as prose is; a comment does not make its own number known."
    code = '#| fig-alt: Bars near 0.956.\nplot(x)  # 47.3% of the blanks'
    nb = {'cells': [{'cell_type': 'markdown', 'id': 'a', 'source': ['It learns 47.3% of the blanks.']},
                    {'cell_type': 'code', 'id': 'b', 'source': [code], 'outputs': []}]}
    (tmp_path / 'x.ipynb').write_text(json.dumps(nb))
    assert sorted(n for _, n, _ in unsupported(tmp_path / 'x.ipynb')) == ['0.956', '47.3', '47.3']
    nb['cells'][1]['outputs'] = [{'output_type': 'stream', 'text': ['47.3% and 0.956']}]
    (tmp_path / 'x.ipynb').write_text(json.dumps(nb))
    assert unsupported(tmp_path / 'x.ipynb') == []
