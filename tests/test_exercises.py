"""Each exercise's checking cell accepts the right answer and rejects a wrong one (#34), run in its notebook's own
state: the notebook runs as nbdev_test runs it, then the cell runs again with an answer in place of its `None`."""
import os
from pathlib import Path
import pytest
from execnb.shell import CaptureShell
from execnb.nbio import read_nb

NBS = Path(__file__).resolve().parents[1] / 'nbs'
# notebook -> [(the answer line of a checking cell, a right answer, a wrong one)], as Python source
ANSWERS = {
    '00_rng': [('rejected = None', '1', '2'), ('mine = None', 'demo', 'demo[::-1]')],
    '01_wordpiece': [('pieces = None', "['una', '##ff', '##able']", "['una', '##ffa', '##ble']"),
                     ('counts, first = None, None', "{'cd': 1, 'ab': 1}, ('a', '##b')", "{'cd': 1, 'ab': 1}, ('c', '##d')")],
    '02_bert': [('touched, whole = None, None', '0.386, 0.0034', '0.15, 0.15'), ('predicted = None', '1.0', '0.8')],
    '03_pretrain': [('at15, at50 = None, None', '(lab15 != -100).sum().item(), (lab50 != -100).sum().item()', '72, 72')],
    '04_electra': [('always_original = None', '0.865', '0.85'), ('by_sampling, by_argmax = None, None', '0.1, 0.0', '0.9, 0.1')],
    '05_finetune': [('share = None', 'majority(verse_task("section"))', '1 / 6'),
                    ('rates = None', '[5e-5, 3e-5, 2e-5]', '[1e-3, 1e-4]')],
}

def run(stem: str) -> CaptureShell:
    "The notebook run as nbdev_test runs it (slow cells skipped), its state kept."
    shell, nb, cwd = CaptureShell(), read_nb(NBS / f'{stem}.ipynb'), os.getcwd()
    skip = lambda c: c.cell_type != 'code' or any(l.startswith(('#| slow', '#| notest')) for l in c.source.splitlines())
    os.chdir(NBS)
    try: shell.run_all(nb, exc_stop=True, preproc=skip)
    finally: os.chdir(cwd)
    return shell, nb

@pytest.mark.parametrize('stem', ANSWERS)
def test_checking_cells_accept_the_right_answer_and_reject_a_wrong_one(stem):
    shell, nb = run(stem)
    for line, right, wrong in ANSWERS[stem]:
        cell = next(c for c in nb.cells if c.cell_type == 'code' and line in c.source)
        for answer, ok in ((right, True), (wrong, False)):
            shell.exc = None
            shell.run(cell.source.replace(line, line.replace('None, None', answer).replace('None', answer)))
            assert (shell.exc is None) == ok, (stem, line, answer, shell.exc)
