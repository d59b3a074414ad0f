"""A family of models is one object (appendix 12e's `Arch`): the run and the command find it by `--arch` or by a model
directory's config.json and never test which family they hold, so a family registered from outside trains, saves and
fills through `bert-nb` with no change to their code. Bad families are refused by name."""
import ast, dataclasses, json, re
from pathlib import Path
import pytest
import bert_nb.arch
from bert_nb.arch import ARCHS, Arch, BertArch, find_arch, register
from bert_nb.command import main
from bert_nb.run import train
from bert_nb.pretrain import RunArgs

class Tiny(BertArch):
    "A toy family: chapter 02's BERT with one layer whatever --layers says, and --layers refused."
    name = 'tiny'
    refuses = {'--layers': "is fixed: a tiny model has one layer"}
    def config(self, a, vocab, pad_id=0): return dataclasses.replace(super().config(a, vocab, pad_id), n_layers=1)

@pytest.fixture
def tiny():
    arch = register(Tiny())
    yield arch
    del ARCHS['tiny']

def test_a_registered_family_trains_saves_and_fills_through_the_command(tiny, corpus, tmp_path, capsys):
    out = tmp_path / 'run'
    assert main(['train', '--arch', 'tiny', '--corpus', str(corpus), '--steps', '3', '--evals', '1',
                 '--out', str(out), '--quiet']) == 0
    config = json.loads((out / 'model' / 'config.json').read_text())
    assert config['num_hidden_layers'] == 1 and RunArgs().layers != 1  # the family's config, not --layers'
    assert json.loads((out / 'args.json').read_text())['arch'] == 'tiny'
    capsys.readouterr()
    assert main(['fill', str(out / 'model'), 'in the beginning god created the [MASK]']) == 0
    assert len(re.findall(r'\d\.\d{3}', capsys.readouterr().out)) == 5  # five answers with their probabilities
    assert main(['train', '--arch', 'tiny', '--layers', '2', '--corpus', str(corpus), '--steps', '1']) == 2
    assert "--layers is fixed: a tiny model has one layer" in capsys.readouterr().err

@pytest.mark.parametrize('arch, error, says', [
    (BertArch, TypeError, 'arch must be an Arch, got type'),
    (type('Upper', (BertArch,), {'name': 'Tiny'})(), ValueError, "lowercase letters, digits and '-', got 'Tiny'"),
    (type('Unnamed', (BertArch,), {'name': ''})(), ValueError, "got ''"),
    (type('Again', (BertArch,), {'name': 'bert'})(), ValueError, "an arch named 'bert' is registered already")])
def test_register_refuses_what_is_no_new_family(arch, error, says):
    before = dict(ARCHS)
    with pytest.raises(error, match=re.escape(says)): register(arch)
    assert ARCHS == before  # nothing registered, nothing replaced

def test_an_unknown_family_is_refused_by_name_before_a_run_starts(tmp_path):
    with pytest.raises(ValueError, match="arch must be one of bert, modernbert, got 'gpt'"): find_arch('gpt')
    out = tmp_path / 'run'
    with pytest.raises(ValueError, match="got 'gpt'"): train(RunArgs(arch='gpt', steps=1, out=str(out)))
    assert not out.exists()  # refused before the run's directory was claimed

ROOMS = ['command', 'run', 'rundir', 'nodes', 'budget']  # the command line and the run's modules

def test_the_run_and_the_command_hold_no_test_of_a_family():
    "No function or class of the run's modules or of the command names a family: they ask its Arch, in arch.py."
    home = Path(bert_nb.arch.__file__).parent
    tree = ast.parse((home / 'arch.py').read_text())
    families = {n.name for n in tree.body if isinstance(n, ast.ClassDef)
                and any(isinstance(b, ast.Name) and b.id == 'Arch' for b in n.bases)}
    assert families == {'BertArch', 'ModernBertArch'}
    text = ''
    for room in ROOMS:
        source = (home / f'{room}.py').read_text()
        lines = source.splitlines()
        code = [n for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        text += '\n'.join('\n'.join(lines[n.lineno - 1:n.end_lineno]) for n in code) + '\n'
    assert 'def _model(' in text and 'def _take_init(' in text and 'def _load(' in text  # what is searched
    for bad in (r"arch\s*==", r"'modernbert'", r"ModernBert\w*\b", r"isinstance\([^)]*ForMLM", r"_is_modern"):
        assert not re.search(bad, text), bad
