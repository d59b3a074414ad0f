"""`bert-nb course` on the package's own code: it passes every course test, the course tests as a learner's grade 1.0
for chapters 00, 01 and 02, and each pitfall planted fails the course test its chapter names for it."""
import shutil
from pathlib import Path
import pytest
from bert_nb import course
from test_course import COURSEWORK, solution

@pytest.fixture(scope='module')
def solved(tmp_path_factory):
    "A workspace of chapters 00-02 holding the package's code, and the course tests as the learner's tests."
    d = tmp_path_factory.mktemp('course')
    for ch in course.CHAPTERS.values():
        course.start(ch.id, d)
        solution(d, ch)
        shutil.copy(COURSEWORK / f'test_{ch.module}.py', d / 'tests')
    shutil.copy(COURSEWORK / 'course_refs.py', d / 'tests')
    return d

@pytest.mark.parametrize('id', list(course.CHAPTERS))
def test_the_package_passes_every_course_test_and_its_tests_grade_one(solved, id):
    before = {p: p.read_bytes() for p in solved.rglob('*') if p.is_file() and '.course' not in p.parts}
    results = course.run(id, solved)
    assert results and all(r.outcome == 'passed' for r in results), [r for r in results if r.outcome != 'passed']
    assert {p: p.read_bytes() for p in solved.rglob('*') if p.is_file() and '.course' not in p.parts} == before
    g = course.check(id, solved, jobs=2)
    assert g.score == 1.0 and g.passed and not g.wrong, course.show_grade(g)
    if id == '00':  # the diff, once the check has passed: the package's code beside itself
        assert '# PCG32: the same' in course.diff(id, solved)

PITFALLS = [(ch.id, p) for ch in course.CHAPTERS.values() for p in ch.planted if p.pitfall]

@pytest.mark.parametrize('id,p', PITFALLS, ids=[p.ids[0] for _, p in PITFALLS])
def test_each_pitfall_fails_the_course_test_its_chapter_names(tmp_path, id, p):
    ch = course.chapter(id)
    path = course._planted_copy(tmp_path, ch.faults(p), ch.module)
    others = [n for n in course.describe(ch) if n != p.caught_by]
    (r,) = course.run_tests([course.course_tests(ch)], path, skip=others)
    assert r.name == p.caught_by and r.outcome == 'failed', r
