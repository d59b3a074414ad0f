"""`bert-nb course release --nbgrader`: nbgrader itself generates the assignment and autogrades a class's
submissions on a real sqlite gradebook."""
from pathlib import Path
import pytest
from bert_nb import course

def test_nbgrader_grades_a_class(tmp_path):
    "nbgrader itself, on a real sqlite gradebook: the package's solution full marks, the blank 0, a pitfall its tests."
    import json, os, subprocess, sys
    api = pytest.importorskip('nbgrader.api')
    out = course.release(tmp_path / 'class', ['02'])
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # its alembic
    nbgrader = lambda *a: subprocess.run([Path(sys.executable).parent / 'nbgrader', *a, '--log-level=ERROR'], cwd=out,
                                         env=env, check=True, capture_output=True)
    nbgrader('generate_assignment', 'ch02')
    released = (out / 'release' / 'ch02' / 'ch02.ipynb').read_text()  # the signatures stay, the bodies go
    assert 'def mlm_mask(' in released and 'class BertLayer(' in released and 'np.full_like(ids, -100)' not in released
    ch, swap = course.chapter('02'), course.chapter('02').planted[2]  # random and keep swapped, on both paths
    source = json.loads((out / 'source' / 'ch02' / 'ch02.ipynb').read_text())
    for f in ch.faults(swap):
        (cell,) = [c for c in source['cells'] if f.old in ''.join(c['source'])]
        cell['source'] = ''.join(cell['source']).replace(f.old, f.new).splitlines(True)
    subs = {'right': (out / 'source' / 'ch02' / 'ch02.ipynb').read_text(), 'swapped': json.dumps(source),
            'blank': (out / 'release' / 'ch02' / 'ch02.ipynb').read_text()}
    for who, text in subs.items():
        (out / 'submitted' / who / 'ch02').mkdir(parents=True)
        (out / 'submitted' / who / 'ch02' / 'ch02.ipynb').write_text(text)
    nbgrader('autograde', 'ch02')
    with api.Gradebook(f'sqlite:///{out}/gradebook.db') as gb:
        lost = {who: {g.name for g in gb.find_submission('ch02', who).notebooks[0].grades if g.score < g.max_score}
                for who in subs}
        scores = {who: gb.find_submission('ch02', who).score for who in subs}
    tests = set(course.describe(ch))
    assert scores == {'right': len(tests), 'swapped': len(tests) - len(lost['swapped']), 'blank': 0}
    # the oracle for what the swap loses: the course tests on the package with the same faults planted
    failing = {r.name for r in course.run_tests([course.course_tests(ch)],
                                                course._planted_copy(tmp_path / 'p', ch.faults(swap), 'bert'))
               if r.outcome == 'failed'}
    assert lost == {'right': set(), 'blank': tests, 'swapped': failing} and 'test_mask_follows_the_op_order' in failing
