"""Names keep working where users imported them: every public name of the last release still imports from the module
it was in, a name that moved gives a DeprecationWarning that names its new home (and is the same object), and a name
that never was there is still an ImportError. The list of names is the last release's own (tests/fixtures), not
today's __all__."""
import json, subprocess, sys, warnings
from importlib import import_module
from pathlib import Path
import pytest

RELEASE = json.loads((Path(__file__).parent / 'fixtures' / 'release_names.json').read_text())['modules']
MOVED = {('bert_nb.modernbert', n): 'bert_nb.modernbert_files'
         for n in ('hf_state_dict', 'hf_config', 'config_from_hf', 'save_modernbert', 'load_modernbert')}
MOVED |= {('bert_nb.command', n): home for home, names in  # the run's modules, out of the command's
          [('bert_nb.run', ('LEARNED', 'weights_digest', 'MaskTally', 'frequency_baseline', 'train', 'plot_losses',
                            'write_plots')), ('bert_nb.budget', ('FINISH', 'BEAT_S', 'MARGIN'))] for n in names}

@pytest.mark.parametrize('module', sorted(RELEASE))
def test_every_name_of_the_last_release_imports(module):
    m = import_module(module)
    for name in RELEASE[module]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            exec(f'from {module} import {name}', {})  # as a program of the last release wrote it
        said = [str(w.message) for w in caught if w.category is DeprecationWarning]
        if (home := MOVED.get((module, name))) is None:
            assert said == [], (module, name)
            continue
        assert said == [f'{module}.{name} moved to {home}.{name}: import it from {home}'], said
        assert caught[0].filename == '<string>'  # the warning points at the importing line, not at the package
        with pytest.deprecated_call(): assert getattr(m, name) is getattr(import_module(home), name)

def test_the_list_is_the_release_not_today():
    """The fixture holds the five names that left bert_nb.modernbert's __all__ since, and the ten that left
    bert_nb.command's: it was not rewritten from today's."""
    from bert_nb import command, modernbert
    assert {n for n in RELEASE['bert_nb.command'] if n not in command.__all__} == \
        {n for m, n in MOVED if m == 'bert_nb.command'}
    gone = {n for n in RELEASE['bert_nb.modernbert'] if n not in modernbert.__all__}
    assert gone == {n for m, n in MOVED if m == 'bert_nb.modernbert'} and sum(map(len, RELEASE.values())) == 244

def test_a_name_that_never_was_there_is_still_an_error():
    with pytest.raises(ImportError, match='load_bert'): exec('from bert_nb.modernbert import load_bert', {})
    with pytest.raises(ImportError, match='load_bert'): exec('from bert_nb.command import load_bert', {})
    import bert_nb.modernbert as m
    with pytest.raises(AttributeError, match="module 'bert_nb.modernbert' has no attribute 'nothing'"): m.nothing

def test_the_old_home_imports_without_its_new_one():
    "The new home imports the old one, so the old imports the new only when a moved name is asked for: no cycle."
    code = ("import sys, warnings; warnings.simplefilter('error'); import bert_nb.modernbert as m; "
            "assert 'bert_nb.modernbert_files' not in sys.modules; "
            "warnings.simplefilter('ignore'); from bert_nb.modernbert import save_modernbert; "
            "assert 'bert_nb.modernbert_files' in sys.modules; print('ok')")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.stdout.strip() == 'ok', r.stderr
