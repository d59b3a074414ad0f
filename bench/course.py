"""Chapter 02's `bert-nb course check` against its promise (within 2 minutes on 2 cores), for the three reference
learners: the chapter's course tests as their tests, tests of shapes only, and the blank starting file. Each runs
in a workspace holding the package's own code as the learner's module (bench/course.json; about 3 minutes)."""
import re, shutil, sys, tempfile, time
from pathlib import Path
from common import RUN, machine, save
from bert_nb import course

TARGET_S = 120
SHAPES = '''import numpy as np, torch
import bert
from bert_nb.rng import PCG32

def test_mask_shapes():
    ids = np.arange(5, 37).reshape(4, 8)
    inputs, labels = bert.mlm_mask(ids, ids < 0, 4, 40, 0.15, PCG32(0))
    assert inputs.shape == labels.shape == ids.shape

def test_model_shapes():
    m = bert.BertForMLM(bert.BertConfig(vocab=40, max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32))
    assert m(torch.zeros(2, 8, dtype=torch.long))[0].shape == (2, 8, 40)
'''

def grade(case: str, jobs: int) -> dict:
    "One learner's check of chapter 02: the grade, what it missed and the seconds it took."
    with tempfile.TemporaryDirectory() as d:
        d, ch = Path(d), course.chapter('02')
        course.start('02', d)
        src = (Path(course.__file__).parent / 'bert.py').read_text()
        (d / 'bert.py').write_text(re.sub(r'^from \.(\w+) import', r'from bert_nb.\1 import', src, flags=re.M))
        if case == 'the course tests':
            for f in ('test_bert.py', 'course_refs.py'): shutil.copy(course.COURSEWORK / f, d / 'tests' / f)
        elif case == 'shapes only': (d / 'tests' / 'test_bert.py').write_text(SHAPES)
        t = time.perf_counter()
        g = course.check('02', d, jobs=jobs)
        s = time.perf_counter() - t
    missed = [course.FAULT[p.ids[0]].what for p in g.missed_pitfalls]
    return dict(case=case, grade=round(g.score, 3), caught=sum(map(bool, g.caught.values())), planted=len(g.caught),
                pitfalls_missed=len(missed), passed=g.passed, seconds=round(s, 1))

if __name__ == '__main__':
    jobs = 2
    print(f"chapter 02's check, {jobs} planted mistakes at a time  [{machine()}]")
    rows = [grade(c, jobs) for c in ('the course tests', 'shapes only', 'the blank file')]
    for r in rows:
        print(f"  {r['case']:<18} grade {r['grade']:.2f} ({r['caught']} of {r['planted']} caught, "
              f"{r['pitfalls_missed']} pitfalls missed): {r['seconds']:.0f} s (target <= {TARGET_S} s)")
    RUN['course'] = dict(chapter='02', jobs=jobs, target_s=TARGET_S, cases=rows)
    save('course')
    if any(r['seconds'] > TARGET_S for r in rows): sys.exit(1)
