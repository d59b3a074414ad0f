"""`bert-nb course` on the package's own code: it passes every course test, and the project's own tests of a chapter,
taken as a learner's, grade 1.0 for chapters 00, 01 and 02 (the same faults `make mutants` runs them against)."""
import re, shutil
from pathlib import Path
import pytest
from bert_nb import course
from test_course import solution

@pytest.fixture(scope='module')
def solved(tmp_path_factory):
    "A workspace of chapters 00-02 holding the package's code."
    d = tmp_path_factory.mktemp('course')
    for ch in course.CHAPTERS.values():
        course.start(ch.id, d)
        solution(d, ch)
    return d

@pytest.mark.parametrize('id', list(course.CHAPTERS))
def test_the_package_passes_every_course_test_and_the_learners_files_stay_as_they_were(solved, id):
    before = {p: p.read_bytes() for p in solved.rglob('*') if p.is_file()}
    results = course.run(id, solved)
    assert results and all(r.outcome == 'passed' for r in results), [r for r in results if r.outcome != 'passed']
    assert {p: p.read_bytes() for p in solved.rglob('*') if p.is_file()} == before

TESTS = Path(__file__).parent
PROJECT = {'00': ['test_rng.py'], '01': ['test_wordpiece.py'],
           '02': ['test_masking.py', 'test_encoder.py', 'test_checkpoints.py']}

@pytest.mark.parametrize('id', list(PROJECT))
def test_the_projects_own_tests_as_a_learners_grade_one(tmp_path, id):
    "The project's tests of the chapter, importing the chapter's module by its own name as a learner's do."
    ch = course.chapter(id)
    course.start(id, tmp_path)
    solution(tmp_path, ch)
    for f in ['conftest.py', 'pcg_ref.py', 'tol.py']: shutil.copy(TESTS / f, tmp_path / 'tests' / f)
    shutil.copytree(TESTS / 'fixtures', tmp_path / 'tests' / 'fixtures')
    for f in PROJECT[id]:
        text = re.sub(rf'\bbert_nb\.{ch.module}\b', ch.module, (TESTS / f).read_text())
        (tmp_path / 'tests' / f'test_{ch.module}_{f[5:]}').write_text(text)
    (tmp_path / 'tests' / f'test_{ch.module}.py').unlink()  # the starting file, empty
    g = course.check(id, tmp_path, jobs=2)
    assert not g.wrong and g.score == 1.0 and g.passed, course.show_grade(g)
    if id == '00':  # the diff, once the check has passed: the package's code beside itself
        assert '# PCG32: the same' in course.diff(id, tmp_path)
