"""The pytest plugin `bert-nb course` runs every test under: each test stopped after BERT_NB_COURSE_TIMEOUT seconds
by an alarm, what happened to each written as JSON to BERT_NB_COURSE_REPORT (a body not written yet told from a
failure), the test under way named in REPORT.now (where the alarm cannot reach, in compiled code, the course ends
the process), and the tests named in BERT_NB_COURSE_SKIP left out."""
import json, os, signal

class Stopped(Exception): "A test that ran past its time: a loop that never ends, most likely."

_results, _errors = {}, []
_limit = float(os.environ.get('BERT_NB_COURSE_TIMEOUT') or 0)
_out = os.environ.get('BERT_NB_COURSE_REPORT')

def _stop(*_): raise Stopped(f"stopped after {_limit:g} s: a loop that never ends?")

def pytest_collection_modifyitems(items):
    skip = set(os.environ.get('BERT_NB_COURSE_SKIP', '').split())
    items[:] = [i for i in items if i.name.split('[')[0] not in skip]

def pytest_runtest_setup(item):
    if _out:  # where the course looks when a test outlives its alarm
        with open(_out + '.now', 'w') as f: f.write(item.nodeid)
    if _limit: signal.signal(signal.SIGALRM, _stop); signal.setitimer(signal.ITIMER_REAL, _limit)

def pytest_runtest_teardown(item, nextitem):
    if _limit: signal.setitimer(signal.ITIMER_REAL, 0)

def _line(e: BaseException) -> str: return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]

def pytest_runtest_makereport(item, call):
    if call.excinfo is None or item.nodeid in _results: return
    e = call.excinfo.value
    kind = ('todo' if isinstance(e, NotImplementedError) else 'stopped' if isinstance(e, Stopped)
            else 'skipped' if call.excinfo.typename == 'Skipped' else 'failed')
    where = next((f"{os.path.basename(str(t.path))}, line {t.lineno + 1}" for t in reversed(call.excinfo.traceback)
                  if not str(t.path).endswith(('course_refs.py', 'course_plugin.py'))), '')
    _results[item.nodeid] = dict(outcome=kind, message=f"{type(e).__name__}: {_line(e)}", where=where)

def pytest_runtest_logreport(report):
    if report.when == 'call' and report.passed: _results.setdefault(report.nodeid, dict(outcome='passed'))
    if report.when == 'teardown': _save()  # each result kept as it comes: the course may end the process

def pytest_collectreport(report):
    if report.failed: _errors.append(report.longreprtext[-2000:])

def _save():
    if _out:
        with open(_out + '.part', 'w') as f: json.dump(dict(tests=_results, errors=_errors), f)
        os.replace(_out + '.part', _out)  # whole, even if the process ends while it writes

def pytest_sessionfinish(session): _save()
