"""Each pitfall a chapter names, planted in the package's code (on every path it has), fails the course test the
chapter names for it: what `bert-nb course test` tells a learner who made that mistake."""
import pytest
from bert_nb import course

PITFALLS = [(ch.id, p) for ch in course.CHAPTERS.values() for p in ch.planted if p.pitfall]

@pytest.mark.parametrize('id,p', PITFALLS, ids=[p.ids[0] for _, p in PITFALLS])
def test_each_pitfall_fails_the_course_test_its_chapter_names(tmp_path, id, p):
    ch = course.chapter(id)
    path = course._planted_copy(tmp_path, ch.faults(p), ch.module)
    others = [n for n in course.describe(ch) if n != p.caught_by]
    (r,) = course.run_tests([course.course_tests(ch)], path, skip=others)
    assert r.name == p.caught_by and r.outcome == 'failed', r
