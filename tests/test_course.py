"""`bert-nb course`: the package's own code passes every course test and the course tests grade 1.0 as a learner's
tests; each pitfall planted fails the course test its chapter names; tests that check only shapes grade under the
pass mark, named by the pitfalls they miss; every bad input is one line and exit status 2."""
import re, shutil
from pathlib import Path
import pytest
from bert_nb import course
from bert_nb.command import main

COURSEWORK = Path(course.__file__).parent / 'coursework'

def solution(dir: Path, ch):
    "The package's own module as the learner's: its source, the relative imports made absolute."
    src = (Path(course.__file__).parent / f'{ch.module}.py').read_text()
    (dir / f'{ch.module}.py').write_text(re.sub(r'^from \.(\w+) import', r'from bert_nb.\1 import', src, flags=re.M))

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

def test_shares_misremembered():
    assert bert.ACTIONS == (0.9, 0.05, 0.05)  # wrong: fails on the right code, so it catches nothing
'''

def test_tests_of_shapes_only_grade_under_the_mark_and_are_told_the_pitfalls_they_miss(tmp_path, capsys):
    course.start('02', tmp_path)
    (tmp_path / 'tests' / 'test_bert.py').write_text(SHAPES)
    solution(tmp_path, course.chapter('02'))
    assert main(['course', 'check', '02', str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert re.search(r'grade 0\.[0-7]\d', out) and 'not passed yet' in out
    assert 'MISSED  pitfall  random and keep swapped' in out
    assert '1 fail on the right code' in out and 'test_shares_misremembered' in out
    assert "the rates look right; the batch differs from every other implementation" in out
    assert main(['course', 'diff', '02', str(tmp_path)]) == 2  # the answer waits for a passed check

def test_a_pitfall_missed_fails_the_check_whatever_the_grade():
    ch, ok = course.chapter('02'), [course.Result('test_x', 'passed')]
    caught = {p: 'test_x' for p in ch.planted}
    caught[ch.planted[2]] = ''  # random and keep swapped
    g = course.Grade(ch, ok, [], caught)
    assert g.score == 14 / 15 >= course.PASS and g.missed_pitfalls == [ch.planted[2]] and not g.passed
    caught[ch.planted[2]], caught[ch.planted[-1]] = 'test_x', ''  # a mistake that is no pitfall: still a pass
    assert course.Grade(ch, ok, [], caught).passed

def test_a_blank_test_file_grades_zero(tmp_path):
    course.start('00', tmp_path)
    solution(tmp_path, course.chapter('00'))
    g = course.check('00', tmp_path)
    assert g.score == 0 and not g.passed and len(g.missed_pitfalls) == 3

def test_not_written_yet_and_an_endless_loop_are_said_as_such(tmp_path, monkeypatch, capsys):
    course.start('00', tmp_path)
    assert main(['course', 'test', '00', str(tmp_path)]) == 1
    assert capsys.readouterr().out.count('not written yet') == 7
    stub = (tmp_path / 'rng.py').read_text()
    i = stub.index('raise NotImplementedError("sample_categorical')
    (tmp_path / 'rng.py').write_text(stub[:i] + 'while True: pass\n    ' + stub[i:])
    monkeypatch.setattr(course, 'TEST_S', 2)
    results = {r.name: r for r in course.run('00', tmp_path)}
    assert results['test_categorical_boundaries'].outcome == 'stopped'
    assert 'stopped after 2 s: a loop that never ends' in results['test_categorical_boundaries'].message
    assert all(r.outcome == 'todo' for n, r in results.items() if n != 'test_categorical_boundaries')

def test_a_loop_the_alarm_cannot_reach_ends_its_process(tmp_path, monkeypatch):
    """A loop in compiled code that holds the interpreter (a C loop over a range, 20 s or more) outlives the alarm;
    the course ends its process (without that, the alarm fires only when the loop ends, and says so)."""
    course.start('00', tmp_path)
    stub = (tmp_path / 'rng.py').read_text()
    i = stub.index('raise NotImplementedError("sample_categorical')
    (tmp_path / 'rng.py').write_text(stub[:i] + 'sum(range(10**9))\n    ' + stub[i:])
    monkeypatch.setattr(course, 'TEST_S', 1); monkeypatch.setattr(course, 'GRACE_S', 2)
    results = {r.name: r for r in course.run('00', tmp_path)}
    assert results['test_categorical_boundaries'].outcome == 'stopped'
    assert 'a loop the alarm could not reach' in results['test_categorical_boundaries'].message
    assert results['test_the_published_stream'].outcome == 'todo'  # what ran before it is kept

def refused(capsys, *argv) -> str:
    assert main(['course', *argv]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith('bert-nb: error: ')
    return err

def test_bad_input_is_one_line_and_exit_status_2(tmp_path, monkeypatch, capsys):
    d = str(tmp_path)
    assert 'no workspace for chapter 02' in refused(capsys, 'test', '02', d)
    assert 'chapter must be one of 00, 01, 02' in refused(capsys, 'start', '03', d)
    course.start('00', tmp_path)
    rng = tmp_path / 'rng.py'
    rng.write_text(rng.read_text() + '\n\ndef broken(:\n')
    assert re.search(r'rng\.py, line \d+: SyntaxError', refused(capsys, 'test', '00', d))
    assert 'holds work' in refused(capsys, 'start', '00', d)  # and it is left as it was
    assert 'def broken(' in rng.read_text()
    rng.write_text(course.stub(course.chapter('00')).replace('def sample_categorical(', 'def _gone('))
    assert 'has no sample_categorical' in refused(capsys, 'test', '00', d)
    rng.write_text('import time\nwhile True: time.sleep(1)\n')
    monkeypatch.setattr(course, 'IMPORT_S', 2)
    assert 'did not finish in 2 s' in refused(capsys, 'test', '00', d)
    rng.write_text('x = 1 / 0\n')
    assert re.search(r'rng\.py, line 1: ZeroDivisionError', refused(capsys, 'test', '00', d))
    solution(tmp_path, course.chapter('00'))
    assert 'jobs' in refused(capsys, 'check', '00', d, '--jobs', '0')
    (tmp_path / 'tests' / 'test_rng.py').write_text('from bert_nb.rng import PCG32\n\ndef test_x(): assert PCG32(1)\n')
    assert 'test_rng.py, line 1' in refused(capsys, 'check', '00', d)
    assert 'has not passed yet' in refused(capsys, 'diff', '00', d)
