"""Every benchmark's figures say where and when they were measured: the machine, a commit of this repository's history
measured with a clean tree, and the date. A JSON of rows (recipe.json's list, a 'runs' list) says it for each row, or
once at its top for all of them. Figures stored before the benchmarks recorded a commit carry the commit that stored
them, found in the git history, and say so (`recovered`)."""
import datetime, json, re, subprocess
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
JSONS = sorted((ROOT / 'bench').glob('*.json'))

def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(['git', *args], cwd=ROOT, capture_output=True, text=True)

HISTORY = git('rev-parse', 'HEAD').returncode == 0  # a wheel's or an archive's copy has none to check against

def records(d) -> list[dict]:
    "What carries a provenance: each row over the top's, or the top."
    rows = d if isinstance(d, list) else d.get('runs') if isinstance(d.get('runs'), list) else None
    top = {} if isinstance(d, list) else {k: d[k] for k in ('machine', 'commit', 'date', 'recovered') if k in d}
    return [top | r for r in rows] if rows is not None else [top]

def problems(rec: dict) -> list[str]:
    "What a record's provenance lacks or gets wrong, against the repository's history."
    out = [f'no {k}' for k in ('machine', 'commit', 'date') if not rec.get(k)]
    if out: return out
    c, day = str(rec['commit']), str(rec['date'])
    if not re.fullmatch(r'[0-9a-f]{7,40}', c): return [f'commit {c!r} is not a clean commit']  # -dirty, unknown
    if not re.fullmatch(r'\d{4}-\d\d-\d\d', day): return [f'date {day!r} is not YYYY-MM-DD']
    if datetime.date.fromisoformat(day) > datetime.date.today(): out.append(f'date {day} is in the future')
    if HISTORY:
        if git('merge-base', '--is-ancestor', c, 'HEAD').returncode != 0:
            return out + [f'commit {c} is not in the history of HEAD']
        made = git('log', '-1', '--format=%cs', c).stdout.strip()
        if day < made: out.append(f'measured {day}, before its commit {c} was made ({made})')
    return out

@pytest.mark.parametrize('path', JSONS, ids=lambda p: p.stem)
def test_every_figure_names_its_machine_commit_and_date(path):
    found = {p for rec in records(json.loads(path.read_text())) for p in problems(rec)}
    assert found == set()

def test_the_check_can_fail():
    head = git('rev-parse', '--short=7', 'HEAD').stdout.strip() if HISTORY else 'a1b2c3d'
    today = datetime.date.today().isoformat()
    assert problems({'machine': 'm', 'commit': head, 'date': today}) == []
    assert problems({'machine': 'm', 'commit': f'{head}-dirty', 'date': today}) == [
        f"commit '{head}-dirty' is not a clean commit"]
    assert problems({'machine': 'm', 'date': today}) == ['no commit']
    assert problems({'machine': 'm', 'commit': head, 'date': '2999-01-01'}) == ['date 2999-01-01 is in the future']
    rows = records({'machine': 'top', 'runs': [{'commit': head, 'date': today}, {'acc': 0.5}]})
    assert rows[0]['machine'] == 'top' and problems(rows[1]) == ['no commit', 'no date']
    if HISTORY:
        assert problems({'machine': 'm', 'commit': '16204eb', 'date': today}) == [
            'commit 16204eb is not in the history of HEAD']  # a branch's commit that never landed
        assert problems({'machine': 'm', 'commit': head, 'date': '2026-01-01'})[0].startswith('measured 2026-01-01')

def test_the_benchmarks_record_it_through_one_function():
    "Each script that writes a JSON takes its machine, commit and date from common.provenance() (or save())."
    writers = [p for p in sorted((ROOT / 'bench').glob('*.py')) if re.search(r'\.write_text\(json\.dumps', p.read_text())]
    assert writers and [p.name for p in writers if 'provenance()' not in p.read_text()] == []
