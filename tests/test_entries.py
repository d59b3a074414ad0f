"""Values checked where they enter (#27): a run's directory claimed once, files written whole, and each bad JSON
file, vocabulary, checkpoint or argument refused where it comes in, in one line, with nothing written or lost."""
import json, os, shutil, stat, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
import forked
import torch
from bert_nb.bert import BertConfig, BertEncoder, BertForMLM, load_bert, save_bert
from bert_nb.data import prepare_data
from bert_nb.files import read_json, write_utf8, corpus_lines
from bert_nb.pretrain import fill, load_model
from bert_nb.rng import PCG32
from bert_nb.wordpiece import SPECIALS, WordPieceTokenizer
from saving import saving

EXE = Path(sys.executable).parent / 'bert-nb'
TINY = ['--vocab-size', '300', '--max-len', '32', '--batch-size', '8', '--d-model', '32', '--layers', '1', '--heads',
        '2', '--d-ff', '64', '--lr', '3e-3', '--evals', '2', '--quiet']

def cli(*args, cwd=None):
    return forked.run(*args, cwd=cwd)

def refused(r, says):
    "Exit status 2 and one line that says what is wrong, no traceback."
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and says in lines[0] and 'Traceback' not in r.stderr, r.stderr[-2000:]

@pytest.fixture(scope='module')
def run(corpus, tmp_path_factory) -> Path:
    "A finished tiny run: its directory."
    out = tmp_path_factory.mktemp('run') / 'r'
    r = cli('--corpus', corpus, '--steps', 4, '--out', out, *TINY)
    assert r.returncode == 0, r.stderr
    return out

# ------------------------------------------------------------------------------------- the run directory

def test_two_runs_on_one_out_one_gets_it(corpus, tmp_path):
    "Started together on one --out: one trains to the end, the other is refused in one line; no run is lost."
    out = tmp_path / 'o'
    procs = [subprocess.Popen([str(EXE), '--corpus', str(corpus), '--steps', '4', '--out', str(out), *TINY],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert sorted(rc for rc, _ in results) == [0, 2], results
    err = next(e for rc, e in results if rc == 2).strip().splitlines()
    assert len(err) == 1 and ('taken by a run' in err[0] or 'not empty' in err[0]), err
    assert (out / 'metrics.json').is_file() and (out / 'model' / 'model.safetensors').is_file()

def test_default_names_are_unique(corpus, tmp_path):
    "Two runs started in the same second without --out: two directories, both complete."
    procs = [subprocess.Popen([str(EXE), '--corpus', str(corpus), '--steps', '2', *TINY], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    runs = sorted((tmp_path / 'runs').iterdir())
    assert len(runs) == 2 and all((r / 'metrics.json').is_file() for r in runs)

def test_a_run_killed_before_its_first_checkpoint_resumes_from_the_start(run, tmp_path):
    "What a kill (or a full disk) at the first checkpoint leaves: --resume runs it from step 0, as a new run would."
    cut = tmp_path / 'cut'; cut.mkdir()
    shutil.copy(run / 'args.json', cut / 'args.json')
    (cut / '.resume.pt.0a1b2c3d.tmp').write_bytes(b'half a checkpoint')  # what a kill in _write_file leaves
    a = json.loads((cut / 'args.json').read_text()); a['out'] = str(cut)
    assert cli('--resume', cut, '--quiet').returncode == 0
    want, got = (json.loads((d / 'metrics.json').read_text()) for d in (run, cut))
    assert got['weight_digests'] == want['weight_digests'] and not (cut / '.resume.pt.0a1b2c3d.tmp').exists()
    refused(cli('--resume', cut), 'already complete')
    refused(cli('--resume', tmp_path), 'holds no run')

def test_a_run_directory_keeps_the_umask(run):
    "mkdtemp makes 0700 directories: the model directory is given the mode mkdir would have given it."
    umask = os.umask(0); os.umask(umask)
    assert stat.S_IMODE((run / 'model').stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((run / 'data').stat().st_mode) == 0o777 & ~umask

def test_saving_over_a_directory_keeps_its_mode(tmp_path):
    m = BertForMLM(BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16), rng=PCG32(0))
    d = tmp_path / 'm'; d.mkdir(); d.chmod(0o751)
    save_bert(m, d)
    assert stat.S_IMODE(d.stat().st_mode) == 0o751

def test_write_text_is_whole_or_nothing(tmp_path):
    "A write that fails half way (here: a character UTF-8 cannot encode) leaves the old file and no temporary."
    p = tmp_path / 'metrics.json'; p.write_text('old')
    with pytest.raises(UnicodeEncodeError): write_utf8(p, 'new \ud800')
    assert p.read_text() == 'old' and os.listdir(tmp_path) == ['metrics.json']

# ------------------------------------------------------------------------------- what a command is given

@pytest.mark.parametrize('option', ['--out', '--init', '--data', '--vocab', '--resume', '--corpus'])
def test_an_empty_path_is_refused(option, tmp_path):
    refused(cli(option, '', '--steps', 1, cwd=tmp_path), 'expected a path, got an empty string')
    assert not (tmp_path / 'runs').exists()

def test_steps_beyond_any_run_are_refused():
    refused(cli('--steps', 10**309), 'must be <= 1000000000000')

def test_a_model_whose_vocab_is_not_its_word_table(run, tmp_path):
    "--init, fill and eval check a model directory's vocabulary against its weights before anything runs."
    for cut in (2, -2):  # a vocab.txt shorter, then longer, than the model
        d = tmp_path / f'm{cut}'; shutil.copytree(run / 'model', d)
        tokens = (d / 'vocab.txt').read_text().splitlines()
        tokens = tokens[:cut] if cut < 0 else tokens + [f'extra{i}' for i in range(cut)]
        (d / 'vocab.txt').write_text('\n'.join(tokens) + '\n')
        says = f'its vocabulary has {len(tokens)} tokens but its word table 300 rows'
        refused(cli('--init', d, '--steps', 2, '--out', tmp_path / 'o', '--quiet'), says)
        refused(cli('fill', d, 'in the [MASK]'), says)
        refused(cli('eval', d, '--corpus', d / 'vocab.txt'), says)
        assert not (tmp_path / 'o').exists()

def test_warnings_are_one_line(corpus, tmp_path):
    r = cli('--corpus', corpus, '--steps', 2, '--out', tmp_path / 'o', *TINY)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 0 and len(lines) == 1 and lines[0].startswith('bert-nb: warning: the run did not learn')

def test_a_closed_pipe_ends_quietly(run):
    "`bert-nb fill ... | head -c 1`: no BrokenPipeError traceback."
    p = subprocess.run(f"'{EXE}' fill '{run}' 'and [MASK] said [MASK] [MASK] [MASK]' --top-k 50 | head -c 1",
                       shell=True, capture_output=True, text=True, timeout=120)
    assert p.stdout == '[' and 'Traceback' not in p.stderr and 'BrokenPipe' not in p.stderr, p.stderr

def test_nothing_to_mask_is_refused_before_training(tmp_path):
    """A corpus of literal [MASK]s: every token special, so the run would train on nothing; refused at the start,
    where its tokens are counted (#56: prepare wrote it, and only training refused it)."""
    c = tmp_path / 'masks.txt'; c.write_text('[MASK] [MASK]\n' * 200)
    refused(cli('--corpus', c, '--steps', 2, '--out', tmp_path / 'o', *TINY), 'yield only special tokens')
    assert not (tmp_path / 'o').exists()

# ------------------------------------------------------------------------------------------ JSON files

@pytest.mark.parametrize('text,says', [('[' * 100_000 + ']' * 100_000, 'nested too deeply'),
                                       ('{"vocab_size": ' + '9' * 5000 + '}', 'not valid JSON'),
                                       ('{"layer_norm_eps": Infinity}', 'Infinity is not a JSON number'),
                                       ('{"x": NaN}', 'NaN is not a JSON number')])
def test_json_that_is_not_strict_json(text, says, tmp_path):
    p = tmp_path / 'config.json'; p.write_text(text)
    with pytest.raises(ValueError, match=says): read_json(p)

def test_a_config_with_an_infinite_eps_is_refused(run, tmp_path):
    d = tmp_path / 'm'; shutil.copytree(run / 'model', d)
    c = (d / 'config.json').read_text().replace('"layer_norm_eps": 1e-12', '"layer_norm_eps": Infinity')
    assert 'Infinity' in c
    (d / 'config.json').write_text(c)
    with pytest.raises(ValueError, match='Infinity is not a JSON number'): load_bert(d)
    refused(cli('fill', d, 'the [MASK]'), 'Infinity is not a JSON number')

@pytest.mark.parametrize('setting,says', [({'corpus': [123]}, 'corpus must be a list of paths'),
                                          ({'batch_size': 0}, 'batch_size must be >= 1, got 0'),
                                          ({'mask_p': 2.0}, 'mask_p must be in (0, 1]'),
                                          ({'vocab_size': 40.0}, 'vocab_size must be int')])
def test_bad_settings_in_args_json(run, tmp_path, setting, says):
    d = tmp_path / 'r'; d.mkdir()
    a = json.loads((run / 'args.json').read_text()) | setting
    (d / 'args.json').write_text(json.dumps(a))
    refused(cli('--resume', d), says)

def test_a_checkpoint_whose_step_is_past_its_total(run, tmp_path):
    d = tmp_path / 'r'; shutil.copytree(run, d)
    (d / 'metrics.json').unlink()
    ck = torch.load(d / 'resume.pt', weights_only=True)
    for bad in (dict(step=99, total=4), dict(step='3'), dict(metrics={'train': []})):
        torch.save(ck | bad, d / 'resume.pt')
        refused(cli('--resume', d), 'is not a bert-nb resume checkpoint')

@pytest.mark.parametrize('ids', [[0, 1, 2, 3, 5], [0, 1, 2, 3, 3], [0, 1, 2, 3, None], [0, 1, 2, 3, '4']])
def test_tokenizer_json_ids_must_be_0_to_n(ids, tmp_path):
    "Gaps, duplicates, nulls or strings among the ids would be renumbered, shifting every later token."
    vocab = dict(zip(SPECIALS, ids))
    (tmp_path / 'tokenizer.json').write_text(json.dumps({'model': {'type': 'WordPiece', 'vocab': vocab}}))
    with pytest.raises(ValueError, match='must be the integers 0 to 4, each once'):
        WordPieceTokenizer.from_vocab(tmp_path)

def test_vocabulary_arguments():
    with pytest.raises(TypeError, match="token 5 must be a str"): WordPieceTokenizer.from_tokens([*SPECIALS, 7])
    with pytest.raises(TypeError, match="lowercase must be True, False or None, got 'no'"):
        WordPieceTokenizer.from_vocab('.', lowercase='no')

# ------------------------------------------------------------------------------------------------ fill

def test_fill_takes_numpy_ints_and_needs_a_position(run):
    model, tok = load_model(run)
    assert fill(model, tok, 'the [MASK]', np.int64(3)) == fill(model, tok, 'the [MASK]', 3)
    short = BertForMLM(BertConfig(len(tok), max_len=2, d_model=8, n_heads=2, n_layers=1, d_ff=16), rng=PCG32(0))
    with pytest.raises(ValueError, match='2 positions: none for a token'): fill(short, tok, 'the [MASK]')

# ----------------------------------------------------------------------------------------- the collator

@pytest.fixture(scope='module')
def tok(minilm_dir):
    return WordPieceTokenizer.from_vocab(minilm_dir)

@pytest.mark.parametrize('ids,error,says', [([101, 7.9, 102], TypeError, 'input_ids must be a flat sequence of ints'),
                                            (['101', '102'], TypeError, 'flat sequence of ints'),
                                            ([True, False], TypeError, 'flat sequence of ints'),
                                            ([[101, 102]], TypeError, 'flat sequence of ints'),
                                            ([101, 30522], ValueError, 'input_ids must be in [0, 30522), got 30522'),
                                            ([101, -1], ValueError, 'got -1')])
def test_the_collator_refuses_ids_that_are_not_ids(tok, ids, error, says):
    from bert_nb.data import MLMCollator
    for whole_word in (False, True):
        with pytest.raises(error, match=says.replace('[', r'\[').replace('(', r'\(').replace(')', r'\)')):
            MLMCollator(tok, whole_word=whole_word)([{'input_ids': ids}])

def test_the_collator_refuses_features_of_another_length(tok):
    from bert_nb.data import MLMCollator
    c = MLMCollator(tok, whole_word=True)
    with pytest.raises(ValueError, match='token_type_ids has 2 entries, input_ids 3'):
        c([{'input_ids': [101, 7, 102], 'token_type_ids': [0, 0]}])
    with pytest.raises(TypeError, match='word_ids must be a flat sequence of ints'):
        c([{'input_ids': [101, 7, 102], 'word_ids': [None, 'a', None]}])

def test_rows_without_word_ids_mask_by_pieces_not_as_one_word(tok):
    "A whole-word batch where some examples carry word_ids: the others are split into words by ## pieces."
    from bert_nb.data import MLMCollator
    text = ' '.join(['the quick brown fox jumps over the lazy dog'] * 6)
    ids = tok.encode(text)
    c = MLMCollator(tok, p=0.5, whole_word=True, seed=3)
    batch = c([{'input_ids': ids, 'word_ids': [None] + list(range(len(ids) - 2)) + [None]}] +
              [{'input_ids': ids} for _ in range(19)])
    picked = (batch['labels'] != -100)[1:, 1:-1]  # the rows without word_ids; every token is a word here
    assert picked.any(1).all() and not picked.all(1).any()  # some words picked in each row, never all

def test_the_batch_does_not_depend_on_the_container(tok):
    "The same ids as lists, NumPy arrays or torch tensors (datasets' formats): the same masks."
    from bert_nb.data import MLMCollator
    rows = [tok.encode(t) for t in ('in the beginning god created', 'and the earth was without form')]
    c = MLMCollator(tok, p=0.4)
    want = c([{'input_ids': r} for r in rows])
    for f in (np.array, torch.tensor):
        got = c([{'input_ids': f(r)} for r in rows])
        assert all(torch.equal(want[k], got[k]) for k in want)

def test_mlm_loader_needs_a_dataset(tok):
    from bert_nb.data import MLMCollator, mlm_loader
    with pytest.raises(TypeError, match='data must be a sized, indexable dataset'):
        mlm_loader((t for t in ['a', 'b']), MLMCollator(tok), 2)

# ----------------------------------------------------------------------------------------- mlm_mask, mlm_batch

def test_mlm_mask_and_mlm_batch_arguments(tok):
    from bert_nb.bert import mlm_batch, mlm_mask
    with pytest.raises(ValueError, match='rows of different lengths'):
        mlm_mask([[5, 6], [5]], [[0, 0], [0]], 103, 30522, 0.15, PCG32(0))
    meta = torch.zeros(2, 3, dtype=torch.long, device='meta')
    with pytest.raises(ValueError, match='a meta tensor holds no values'):
        mlm_mask(meta, torch.zeros(2, 3, dtype=torch.bool), 103, 30522, 0.15, PCG32(0))
    with pytest.raises(TypeError, match='tok must be a WordPieceTokenizer, got NoneType'):
        mlm_batch(None, ['a'], 8, 0.15, PCG32(0))
    with pytest.raises(ValueError, match=r'max_len must be in \[None, 2147483648\)'):
        mlm_batch(tok, ['a'], 2**64, 0.15, PCG32(0))

# ----------------------------------------------------------------------------------------- model directories

def test_weights_of_meta_tensors_are_refused(run, tmp_path):
    d = tmp_path / 'm'; shutil.copytree(run / 'model', d)
    sd = load_bert(d).state_dict()
    (d / 'model.safetensors').unlink()
    torch.save({k: torch.empty(v.shape, device='meta') for k, v in sd.items()}, d / 'pytorch_model.bin')
    with pytest.raises(ValueError, match='not a state dict of tensors with values'): load_bert(d)

def test_a_key_that_is_not_berts_is_dropped_when_not_strict(run, tmp_path):
    "load_bert(strict=False), and --init, drop and report a key they have no place for; strict refuses it."
    from safetensors.torch import load_file, save_file
    d = tmp_path / 'm'; shutil.copytree(run / 'model', d)
    sd = load_file(d / 'model.safetensors') | {'classifier.extra.weight': torch.zeros(2)}
    save_file(sd | {'foo.weight': torch.zeros(3)}, d / 'model.safetensors')
    with pytest.raises(ValueError, match="not BERT's: \\['foo.weight'\\]"): load_bert(d, BertForMLM)
    with pytest.warns(UserWarning, match='dropped'):
        m = load_bert(d, BertForMLM, strict=False)
    assert 'foo.weight' in m.load_report.dropped
    r = cli('--init', d, '--steps', 2, '--out', tmp_path / 'o', '--quiet', '--max-len', 16)
    assert r.returncode == 0 and 'foo.weight' in r.stdout, r.stderr

def test_an_old_config_without_a_class_loads_with_one_given(tmp_path):
    old = Path(__file__).parent / 'fixtures' / 'bert_nb_v1'
    d = tmp_path / 'old'; shutil.copytree(old, d)
    meta = json.loads((d / 'config.json').read_text()); want = meta.pop('class')
    (d / 'config.json').write_text(json.dumps(meta))
    with pytest.raises(ValueError, match='names no bert-nb model class'): load_bert(d)
    assert type(load_bert(d, cls=BertForMLM if want == 'BertForMLM' else None or BertForMLM)).__name__ == 'BertForMLM'

TWO_SIZES = '''
from bert_nb.bert import BertConfig, BertForMLM, save_bert
from bert_nb.rng import PCG32
models = [BertForMLM(BertConfig(40, max_len=8, d_model=d, n_heads=2, n_layers=1, d_ff=16), rng=PCG32(0)) for d in (8, 16)]
'''

def test_a_load_sees_one_whole_model_while_another_process_saves(tmp_path):
    "A saver swaps models of two sizes into one directory; every load gets one of them, whole."
    d = tmp_path / 'm'
    with saving(TWO_SIZES, 'save_bert', d): sizes = {load_bert(d, BertForMLM).config.d_model for _ in range(300)}
    assert sizes <= {8, 16}

def two_saves(kind):
    "Two models of `kind`, its save and its load: classifiers or taggers of 2 and 3 labels, ModernBERTs of width 8, 16."
    from bert_nb.finetune import Classifier, load_classifier, save_classifier
    from bert_nb.tagging import TokenClassifier, load_tagger, save_tagger
    from bert_nb.modernbert import ModernBertConfig, ModernBertForMLM
    from bert_nb.modernbert_files import load_modernbert, save_modernbert
    if kind == 'modernbert':
        cfg = lambda d: ModernBertConfig(40, d_model=d, n_heads=2, n_layers=2, d_ff=16, max_len=8)
        return [ModernBertForMLM(cfg(d), PCG32(d)) for d in (8, 16)], save_modernbert, load_modernbert
    tok = WordPieceTokenizer.from_tokens(list(SPECIALS) + [f'w{i}' for i in range(35)])
    cls, save, load = ((Classifier, save_classifier, load_classifier) if kind == 'classifier' else
                       (TokenClassifier, save_tagger, load_tagger))
    bert = lambda s: BertEncoder(BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16), PCG32(s),
                                 pooler=cls is Classifier)
    def saved(m, d): return save(m, d, tok, [f'label {i}' for i in range(m.classifier.out_features)])
    return [cls(bert(n), n, rng=PCG32(n)) for n in (2, 3)], saved, lambda d: load(d)[0]

@pytest.mark.parametrize('kind', ['classifier', 'tagger', 'modernbert'])
def test_a_save_that_lands_during_a_load_is_read_whole(tmp_path, monkeypatch, kind):
    """load_classifier, load_tagger and load_modernbert read a directory again when a save swapped it while they
    read, as load_bert does: they paired the old save's encoder (or config) with the new save's weights."""
    import bert_nb.finetune, bert_nb.modernbert_files
    (old, new), save, load = two_saves(kind)
    d = save(old, tmp_path / 'm')
    module = bert_nb.modernbert_files if kind == 'modernbert' else bert_nb.finetune  # 05's read_head reads 07's too
    real, reads = module.read_safetensors, []
    def read_as_a_save_lands(path):
        if not reads: save(new, d)
        reads.append(path); return real(path)
    monkeypatch.setattr(module, 'read_safetensors', read_as_a_save_lands)
    got, want = load(d).state_dict(), new.state_dict()
    assert got.keys() == want.keys() and all(torch.equal(v, want[k]) for k, v in got.items())
    assert len(reads) == 2  # the first read was of the save since replaced

@pytest.mark.parametrize('load', ['load_model', 'init_model', 'fill and eval'])
def test_a_model_and_its_vocabulary_come_from_one_save(tmp_path, monkeypatch, load):
    """load_model (and so fill and eval, BERT or ModernBERT) and --init's init_model read the weights and vocab.txt
    of one save: a save that landed between the two paired a model with the next save's vocabulary."""
    import bert_nb.arch as A, bert_nb.command as C, bert_nb.pretrain as P
    from bert_nb.modernbert import ModernBertConfig, ModernBertForMLM
    from bert_nb.modernbert_files import save_modernbert
    toks = [WordPieceTokenizer.from_tokens(list(SPECIALS) + [f'{c}{i}' for i in range(35)]) for c in 'ab']
    if load == 'fill and eval':  # a ModernBERT's; a BERT's goes through load_model
        cfg = ModernBertConfig(40, d_model=8, n_heads=2, n_layers=2, d_ff=16)
        old, new = (ModernBertForMLM(cfg, PCG32(s)) for s in (0, 1))
        save, module, name = save_modernbert, A, 'load_modernbert'
    else:
        cfg = BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16)
        old, new = (BertForMLM(cfg, PCG32(s)) for s in (0, 1))
        save, module, name = save_bert, P, 'load_bert'
    d = save(old, tmp_path / 'm', toks[0])
    real, reads = getattr(module, name), []
    def load_as_a_save_lands(*a, **kw):
        got = real(*a, **kw)
        if not reads: save(new, d, toks[1])  # same sizes, another vocabulary
        reads.append(1); return got
    monkeypatch.setattr(module, name, load_as_a_save_lands)
    model, tok = (P.load_model(d) if load == 'load_model' else C._load(str(d)) if load == 'fill and eval' else
                  (P.init_model(d), None))
    assert all(torch.equal(v, new.state_dict()[k]) for k, v in model.state_dict().items()) and len(reads) == 2
    assert tok is None or tok.tokens() == toks[1].tokens()

def test_names_too_long_to_extend_and_symlink_loops(tmp_path):
    m = BertForMLM(BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16), rng=PCG32(0))
    long = tmp_path / ('m' * 250)
    save_bert(m, long)
    assert torch.equal(load_bert(long).encoder.word_emb.weight, m.encoder.word_emb.weight)
    loop = tmp_path / 'loop'; loop.symlink_to(tmp_path / 'loop2'); (tmp_path / 'loop2').symlink_to(loop)
    with pytest.raises(ValueError, match='loop'): save_bert(m, loop)

def test_a_dead_saves_leftover_must_be_a_save_to_be_recovered(tmp_path):
    "A directory that merely has a save's name (no config.json) is not renamed into place."
    from bert_nb.files import _recover
    mine = tmp_path / '.m.new-999999999-x'; mine.mkdir(); (mine / 'notes.txt').write_text('mine')
    _recover(tmp_path / 'm')
    assert not (tmp_path / 'm').exists()

# ------------------------------------------------------------------------------------------ the command

def test_out_a_dangling_symlink_or_a_name_too_long(tmp_path):
    (tmp_path / 'dangling').symlink_to(tmp_path / 'nowhere')
    refused(cli('--out', tmp_path / 'dangling', '--steps', 1), 'is a symlink to nothing')
    refused(cli('--out', tmp_path / ('x' * 300), '--steps', 1, *TINY), 'File name too long')

def test_fill_text_that_is_not_utf8(run):
    r = subprocess.run([str(EXE).encode(), b'fill', str(run).encode(), b'the [MASK] \xff'], capture_output=True,
                       timeout=120)
    assert r.returncode == 2 and b'the text is not UTF-8' in r.stderr and b'Traceback' not in r.stderr

def test_the_memory_check_reads_ulimit():
    code = ('import resource; resource.setrlimit(resource.RLIMIT_AS, (2**36, resource.getrlimit(resource.RLIMIT_AS)[1]));'
            'from bert_nb.run import _memory_limit; print(_memory_limit())')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    assert int(out) <= 2**36

# ------------------------------------------------------------------------------------- what tools/audit.py found

def test_the_audits_findings(tok):
    "Each case tools/audit.py found silent or a traceback this round, now refused clearly (or right)."
    from bert_nb.bert import BertEncoder
    from bert_nb.files import corpus_files
    from bert_nb.wordpiece import train_vocab
    with pytest.raises(ValueError, match=r'ids must be in \[0, 30522\), got -1'): tok.decode([5, -1])
    with pytest.raises(ValueError, match='max_len must be an int >= 2'): tok.encode_batch(['a b'], max_len=0)
    with pytest.raises(ValueError, match='max_len must be an int >= 3'): tok.encode_batch([('a', 'b')], max_len=2)
    with pytest.raises(ValueError, match='vocab_size must be >= 5, got 0'): train_vocab({'ab': 2}, 0)
    with pytest.raises(ValueError, match='ln_eps must be > 0 and finite'): BertConfig(10, ln_eps=float('inf'))
    with pytest.raises(ValueError, match='no corpus given'): corpus_files([])
    enc = BertEncoder(BertConfig(60, max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32), rng=PCG32(0))
    assert enc(torch.zeros(0, 8, dtype=torch.long)).shape == (0, 8, 16)  # an empty batch: an empty answer

def test_a_full_disk_while_checkpointing_leaves_the_last_checkpoint(tmp_path, monkeypatch):
    "torch.save failing half way (ENOSPC): no temporary left, and the resume.pt before it untouched."
    import errno
    from bert_nb import rundir
    (tmp_path / 'resume.pt').write_bytes(b'the last checkpoint')
    def full(obj, f): f.write(b'half'); raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(rundir.torch, 'save', full)
    with pytest.raises(OSError, match='No space left'): rundir._save_state(tmp_path, {})
    assert os.listdir(tmp_path) == ['resume.pt'] and (tmp_path / 'resume.pt').read_bytes() == b'the last checkpoint'

def test_a_full_disk_at_a_checkpoint_says_so(tmp_path, monkeypatch):
    "torch's writer fails on a full disk with 'unexpected pos' (a RuntimeError): the run names the file (#36)."
    from bert_nb import rundir
    def short(obj, f): f.write(b'half'); raise RuntimeError('[enforce fail at inline_container.cc:672] . '
                                                                        'unexpected pos 576 vs 534')
    monkeypatch.setattr(rundir.torch, 'save', short)
    monkeypatch.setattr(rundir.shutil, 'disk_usage', lambda p: shutil._ntuple_diskusage(10, 10, 0))
    with pytest.raises(OSError, match=r'no space left on device for .*resume.pt: the checkpoint needs about'):
        rundir._save_state(tmp_path, {'w': torch.zeros(1000)})
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(rundir.shutil, 'disk_usage', lambda p: shutil._ntuple_diskusage(10**9, 0, 10**9))
    with pytest.raises(RuntimeError, match='unexpected pos'): rundir._save_state(tmp_path, {'w': torch.zeros(1000)})

def tmpfs(path: Path, size: str):
    "A small filesystem of its own at `path` (root only), or a skip."
    path.mkdir()
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size}', 'tmpfs', str(path)], capture_output=True)
    if r.returncode: pytest.skip(f'cannot mount a tmpfs here: {r.stderr.decode().strip()}')

def test_a_real_full_disk_at_the_first_checkpoint(tmp_path, corpus):
    "The token files fit on the disk, the first checkpoint does not: one line, exit 2; then --resume, with room."
    tmpfs(tmp_path / 'small', '400k')
    try:
        out = tmp_path / 'small' / 'run'
        r = cli('--corpus', corpus, '--steps', 2, '--out', out, *TINY)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and 'no space left on device for' in lines[0], r.stderr[-2000:]
        assert f"{out / 'resume.pt'}: " in lines[0] and 'Traceback' not in r.stderr
        shutil.copytree(out, tmp_path / 'roomy')
    finally: subprocess.run(['umount', str(tmp_path / 'small')])
    r = cli('--resume', tmp_path / 'roomy', '--quiet')
    assert r.returncode == 0 and json.loads((tmp_path / 'roomy' / 'metrics.json').read_text())['steps'] == 2, r.stderr

def test_a_held_out_split_with_nothing_to_evaluate_is_refused_before_training(tmp_path):
    "A 2-line corpus trained and then could never finish: no evaluation picks a token of its held-out row (#36)."
    corpus = tmp_path / 'c.txt'
    corpus.write_text('in the beginning god created the heaven and the earth\nand the earth was without form\n')
    r = cli('--corpus', corpus, '--batch-size', 1, '--steps', 3, '--vocab-size', 60, '--max-len', 8, '--d-model', 16,
            '--layers', 1, '--heads', 2, '--d-ff', 32, '--out', tmp_path / 'o', '--quiet')
    refused(r, 'held-out row(s) at p = 0.15 picks none of their')
    assert not (tmp_path / 'o').exists()

def test_text_that_is_not_utf8_text_is_refused(tmp_path):
    "UTF-16 (NULs between the letters, or a BOM that is not UTF-8): refused, not trained on."
    for name, data in (('le.txt', 'in the beginning\n'.encode('utf-16-le')), ('bom.txt', 'in the beginning\n'.encode('utf-16'))):
        (tmp_path / name).write_bytes(data * 50)
        refused(cli('prepare', '--corpus', tmp_path / name, '--out', tmp_path / 'o'), 'is not')
        assert not (tmp_path / 'o').exists()

def test_nothing_to_evaluate_and_a_vocabulary_of_specials(run, tmp_path):
    c = tmp_path / 'masks.txt'; c.write_text('[MASK] [MASK]\n' * 20)
    refused(cli('eval', run, '--corpus', c), 'nothing to evaluate')
    v = tmp_path / 'vocab.txt'; v.write_text('\n'.join(SPECIALS) + '\n')
    corpus = tmp_path / 'c.txt'; corpus.write_text('in the beginning\n' * 200)
    # every word [UNK]: refused as it is prepared (#43, PP14), no longer only at the first evaluation's masks
    refused(cli('--corpus', corpus, '--vocab', v, '--steps', 2, '--out', tmp_path / 'o', '--quiet'), 'yield only special tokens')
    assert not (tmp_path / 'o').exists()

@pytest.mark.parametrize('code', ['EBUSY', 'EXDEV'])
def test_saving_over_a_mount_point(tmp_path, monkeypatch, code):
    """A container volume (EBUSY) or a directory holding one (EXDEV) cannot be swapped out: one clear error, the
    model there untouched, no temporary directory left. The rename is made to fail as the kernel would."""
    import errno
    from bert_nb import files
    m = BertForMLM(BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16), rng=PCG32(0))
    d = save_bert(m, tmp_path / 'vol')
    before = (d / 'model.safetensors').read_bytes()
    def busy(a, b): raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))
    monkeypatch.setattr(files, '_exchange', busy)
    with pytest.raises(ValueError, match='is a mount point, or holds one'): save_bert(m, d)
    assert (d / 'model.safetensors').read_bytes() == before and os.listdir(tmp_path) == ['vol']

# ------------------------------------------------------------------------- #28: configs of other models, refused

@pytest.mark.parametrize('change,says', [({'is_decoder': True}, 'is_decoder must be False'),
                                         ({'add_cross_attention': True}, 'add_cross_attention must be False'),
                                         ({'architectures': ['BertLMHeadModel'], 'is_decoder': True}, 'is_decoder'),
                                         ({'architectures': ['RobertaModel']}, 'architectures must name BERT models')])
def test_a_causal_or_roberta_config_is_refused(run, tmp_path, change, says):
    "A BertLMHeadModel (is_decoder) loaded as a BertForMLM was off by 2.9e-2; a RoBERTa without model_type loaded too."
    d = tmp_path / 'm'; shutil.copytree(run / 'model', d)
    c = json.loads((d / 'config.json').read_text()) | change
    if 'RobertaModel' in c.get('architectures', []): c.pop('model_type')
    (d / 'config.json').write_text(json.dumps(c))
    with pytest.raises(ValueError, match=says): load_bert(d)

def test_an_attention_dropout_of_its_own_is_kept(run, tmp_path):
    "attention_probs_dropout_prob unlike hidden_dropout_prob was dropped, so a load and a save changed the config."
    from transformers import BertConfig as HFConfig
    d = tmp_path / 'm'; shutil.copytree(run / 'model', d)
    c = json.loads((d / 'config.json').read_text()) | {'attention_probs_dropout_prob': 0.25, 'hidden_dropout_prob': 0.1}
    (d / 'config.json').write_text(json.dumps(c))
    m = load_bert(d)
    assert m.config.attn_dropout == 0.25 and m.encoder.layers[0].attn.dropout == 0.25
    save_bert(m, tmp_path / 'again')
    hf = HFConfig.from_pretrained(tmp_path / 'again')
    assert (hf.attention_probs_dropout_prob, hf.hidden_dropout_prob) == (0.25, 0.1)
    assert BertConfig(10, dropout=0.1, attn_dropout=0.1) == BertConfig(10, dropout=0.1)  # one form for one model

def test_the_tokenizer_does_not_import_torch():
    code = 'import sys, bert_nb.wordpiece; print("torch" in sys.modules)'
    assert subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout == 'False\n'

def test_p_0_is_a_plain_collator(tok):
    "For fine-tuning: the texts tokenised and padded, nothing masked, no label."
    from bert_nb.data import MLMCollator
    texts = ['in the beginning', ('and the earth', 'was without form')]
    b = MLMCollator(tok, p=0)(texts)
    want = tok.encode_batch([texts[0], tuple(texts[1])])
    assert b['input_ids'][0, :len(want[0].ids)].tolist() == want[0].ids
    assert b['input_ids'][1].tolist() == want[1].ids and (b['labels'] == -100).all()

def test_a_full_disk_at_args_json_names_it_not_its_temporary(tmp_path, corpus):
    "The run directory could be made, its args.json not: the message named '.run.args-<pid>', a temporary (#36)."
    tmpfs(tmp_path / 'small', '64k')
    try:
        with open(tmp_path / 'small' / 'filler', 'wb') as f:  # every page taken
            with pytest.raises(OSError): f.write(b'\0' * 2**20); f.flush()
        out = tmp_path / 'small' / 'run'
        r = cli('--corpus', corpus, '--steps', 2, '--out', out, *TINY)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
        assert f"cannot write {out / 'args.json'}: No space left on device" in lines[0] and '.args-' not in lines[0]
        assert sorted(os.listdir(tmp_path / 'small')) == ['filler']  # no run directory, no temporary left
    finally: subprocess.run(['umount', str(tmp_path / 'small')])

def test_of_runs_started_together_on_one_directory_exactly_one_claims_it(tmp_path):
    "Eight processes claim one --out at once, twenty times: one wins, with its own args.json whole; the rest are refused."
    import multiprocessing as mp
    ctx = mp.get_context('fork')
    for trial in range(20):
        out, go, said = tmp_path / f'run{trial}', ctx.Barrier(8), ctx.Queue()
        procs = [ctx.Process(target=_claim_after, args=(out, go, seed, said)) for seed in range(8)]
        for p in procs: p.start()
        got = [said.get(timeout=60) for _ in procs]
        for p in procs: p.join()
        won = [seed for seed, why in got if why is None]
        assert len(won) == 1, got
        assert json.loads((out / 'args.json').read_text())['seed'] == won[0] and os.listdir(out) == ['args.json']
        assert all('was taken by a run started at the same time' in why or 'exists and is not empty' in why
                   for _, why in got if why is not None), got
    assert sorted(os.listdir(tmp_path)) == sorted(f'run{t}' for t in range(20))  # no temporary left beside them

def _claim_after(out, go, seed, said):
    from bert_nb.rundir import _claim
    from bert_nb.pretrain import RunArgs
    go.wait()
    try: _claim(out, RunArgs(seed=seed, out=str(out)))
    except ValueError as e: said.put((seed, str(e))); return
    said.put((seed, None))


# -------------------------------------------------------------------------------------------- the audit's smaller finds (#43)

def test_encodings_are_names_python_gives_and_decode_errors_name_the_file(tmp_path):
    (tmp_path / 'le.txt').write_bytes('in the beginning\n'.encode('utf-16-le') * 20)  # no BOM
    with pytest.raises(ValueError, match=r'le.txt is not utf-16 text \(UTF-16 stream does not start with BOM\)'):
        list(corpus_lines([tmp_path / 'le.txt'], 'utf-16'))  # a bare UnicodeError, naming no file
    assert len(list(corpus_lines([tmp_path / 'le.txt'], 'utf-16-le'))) == 20
    for enc in ('utf-8\n', ' utf-8', 'idna', 'punycode', 'rot13', 'klingon', None):
        with pytest.raises(ValueError, match='encoding must be a text encoding, named as Python names it'):
            list(corpus_lines([tmp_path / 'le.txt'], enc))

def test_binary_read_in_a_one_byte_encoding_is_refused(tmp_path):
    "latin-1 decodes any bytes: binary without a NUL byte was trained on (#43). Text with a tab or a form feed is text."
    for n in (2, 400):  # 510 bytes: told at its end; 100 KB: told once 1% of 64 K characters are control
        (tmp_path / 'b.bin').write_bytes(bytes(range(1, 256)) * n)
        with pytest.raises(ValueError, match=r'b.bin is not text: [\d,]+ of its first [\d,]+ characters are control'):
            list(corpus_lines([tmp_path / 'b.bin'], 'latin-1'))
    (tmp_path / 't.txt').write_text('caf\xe9\tcr\xe8me\x0c\n' * 100, encoding='latin-1')
    assert len(list(corpus_lines([tmp_path / 't.txt'], 'latin-1'))) == 100

def test_a_vocabulary_token_must_be_a_piece_of_a_word():
    for bad in ('a\x00b', 'a b', '\t', ''):
        with pytest.raises(ValueError, match='is empty or holds whitespace or a control character'):
            WordPieceTokenizer.from_tokens([*SPECIALS, 'x', bad])

def test_prepare_data_needs_a_callback_and_a_word(tmp_path):
    (tmp_path / 'c.txt').write_text('zzz qqq\n' * 50)
    with pytest.raises(TypeError, match='say must be a function of one line'):  # PP15: a traceback at its first call
        prepare_data([tmp_path / 'c.txt'], tmp_path / 'd', say=None)
    WordPieceTokenizer.from_tokens([*SPECIALS, 'a', '##b']).save(tmp_path)
    with pytest.raises(ValueError, match="train lines yield only special tokens"):  # PP14: prepared without a word
        prepare_data([tmp_path / 'c.txt'], tmp_path / 'd', vocab=tmp_path / 'vocab.txt', say=lambda s: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['c.txt', 'vocab.txt']

def test_kjv_books_with_a_chapter_that_is_not_a_count(tmp_path, monkeypatch):
    "KV08: a chapter's verse count that is not an int ended in a TypeError from string concatenation."
    import bert_nb.data as data
    books = json.loads(Path(data.KJV_BOOKS).read_text()); books[0][1][0] = '31'
    (tmp_path / 'books.json').write_text(json.dumps(books))
    monkeypatch.setattr(data, 'KJV_BOOKS', tmp_path / 'books.json')
    with pytest.raises(ValueError, match=r'is not a list of \[book, \[verses of each chapter\]\]'): data.kjv_verses()

def test_kjv_books_with_two_chapters_swapped(tmp_path, monkeypatch):
    "#56: two chapters' counts swapped keep every count and the total, and placed every verse after them wrongly."
    import bert_nb.data as data
    books = json.loads(Path(data.KJV_BOOKS).read_text()); g = books[0][1]; g[0], g[1] = g[1], g[0]
    (tmp_path / 'books.json').write_text(json.dumps(books))
    monkeypatch.setattr(data, 'KJV_BOOKS', tmp_path / 'books.json')
    with pytest.raises(ValueError, match='is not the table of books the package ships'): data.kjv_verses()

def test_prepare_refuses_lines_of_special_tokens_only(tmp_path):
    "#56: a corpus of '[CLS] [SEP] [MASK]' lines was prepared, and train refused it only later: nothing to mask."
    (tmp_path / 'c.txt').write_text('[CLS] [SEP] [MASK]\n' * 50)
    with pytest.raises(ValueError, match='yield only special tokens'):
        prepare_data([tmp_path / 'c.txt'], tmp_path / 'd', say=lambda s: None)
    assert not (tmp_path / 'd').exists()

def test_write_dir_needs_a_writer(tmp_path):
    from bert_nb.files import write_dir
    with pytest.raises(TypeError, match='write must be a function'): write_dir(tmp_path / 'm', None)
    assert not (tmp_path / 'm').exists() and list(tmp_path.iterdir()) == []

def test_the_encoder_refuses_a_mask_of_twos_and_meta_ids():
    enc = BertEncoder(BertConfig(60, max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32), rng=PCG32(0))
    ids = torch.randint(5, 60, (2, 8))
    with pytest.raises(ValueError, match=r'attn_mask must be in \[0, 2\), got 2'): enc(ids, None, torch.full_like(ids, 2))
    with pytest.raises(ValueError, match='ids is a meta tensor'): enc(ids.to('meta'))

def test_parts_and_corpora_of_the_wrong_kind():
    "load_parts(None, ...) was an AttributeError; a str for tok was read as a tokenizer of len(str) tokens."
    import torch.nn as nn
    from bert_nb.bert import load_parts, save_parts
    class P(nn.Module):
        def __init__(self): super().__init__(); self.a = BertForMLM(BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16))
    with pytest.raises(TypeError, match='model must be a Module, got NoneType'): load_parts(None, 'anywhere')
    with pytest.raises(TypeError, match='tok must be a WordPieceTokenizer, got str'): save_parts(P(), 'anywhere', 'abc')
    with pytest.raises(TypeError, match='paths must be a path or a list of paths, got NoneType'): prepare_data(None, 'anywhere')
    assert not Path('anywhere').exists()
