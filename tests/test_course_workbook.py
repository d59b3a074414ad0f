"""The notebook `bert-nb course start` writes beside a learner's module runs top to bottom on it, its checks under
every section reading the learner's code (here the package's own, as a learner's)."""
import pytest
from bert_nb import course
from test_course_grade import solved

RUN_NB = '''import sys
from execnb.nbio import read_nb
from execnb.shell import CaptureShell
nb = read_nb(sys.argv[1])
nb.cells = [c for c in nb.cells if not (c.cell_type == 'code' and '#| slow' in c.source)]  # as nbdev_test runs
CaptureShell().run_all(nb, exc_stop=True)
'''

@pytest.mark.parametrize('id', list(course.CHAPTERS))
def test_the_workspaces_notebook_runs_top_to_bottom_on_the_learners_code(solved, id):
    "Its checks, each section's, run on the module beside it (here the package's code, as a learner's)."
    import os, subprocess, sys
    nb = solved / course.chapter(id).notebook
    r = subprocess.run([sys.executable, '-c', RUN_NB, str(nb)], cwd=solved, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(solved)))
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
