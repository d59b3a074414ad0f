"""The audit, kept: bad input to the API and the command line ends in a clear error that names the argument or the file
(exit status 2, one line, nothing written, for the command); killed saves leave the old or the new model; a copied run
resumes in the copy; torchrun ranks share one vocabulary and a frozen rank brings the run down."""
import bz2, gzip, json, os, random, shutil, signal, socket, subprocess, sys, textwrap, time, uuid, warnings
from pathlib import Path
import numpy as np
import pytest
import forked
import torch
from hypothesis import given, settings, strategies as st
import bert_nb.bert as bert
import bert_nb.command as command
import bert_nb.run as runs
from bert_nb.bert import (BertConfig, BertEncoder, BertForMLM, mlm_mask, hf_bert_encoder_sd, from_hf_pretrained,
                          save_bert, load_bert)
from bert_nb.pretrain import read_corpus, DEFAULT_CORPUS, RunArgs
from bert_nb.command import main
from bert_nb.run import train
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer

TINY = ['--vocab-size', '300', '--max-len', '32', '--batch-size', '8', '--d-model', '32', '--layers', '1', '--heads',
        '2', '--d-ff', '64', '--lr', '3e-3', '--evals', '2', '--quiet']
EXE = Path(sys.executable).parent / 'bert-nb'


@pytest.fixture(scope='module')
def stopped(corpus, tmp_path_factory) -> Path:
    "A run stopped (resumably) after 5 of its 12 steps."
    out = tmp_path_factory.mktemp('runs') / 'stopped'
    assert main(['--corpus', str(corpus), '--steps', '12', '--stop-at', '5', '--out', str(out)] + TINY) == 0
    assert not (out / 'metrics.json').exists()
    return out

def cli(*args, cwd=None, env=None):
    return forked.run(*args, cwd=cwd, env=env, timeout=180)

def refused(r, says):
    "Exit status 2 and one line that says what is wrong, no traceback."
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and says in lines[0] and 'Traceback' not in r.stderr, r.stderr[-2000:]

# ---------------------------------------------------------------------------------------------------- command line

def test_bad_corpus_files(tmp_path):
    "What is not text, whatever its name, or a damaged archive, or text without a token: exit 2, nothing written."
    (tmp_path / 'binary.txt').write_bytes(bytes(range(128, 256)) * 40)
    whole = gzip.compress(b'a verse of text\n' * 500)
    (tmp_path / 'cut.txt.gz').write_bytes(whole[: len(whole) // 2])
    (tmp_path / 'cut.txt').write_bytes(bz2.compress(b'a verse of text\n' * 500)[:60])  # bz2, by its bytes
    (tmp_path / 'z.txt').write_bytes(b'\x28\xb5\x2f\xfd' + bytes(60))
    (tmp_path / 'nul.txt').write_bytes(b'a verse\n\x00\x01\x02\n' * 20)
    (tmp_path / 'blank.txt').write_text('\u200b\u200b\n\u2060 \u200b\n' * 20)  # lines, but no token in any of them
    (tmp_path / 'empty').mkdir()
    for name, says in [('binary.txt', 'binary.txt is not UTF-8 text'), ('cut.txt.gz', 'cut.txt.gz cannot be read'),
                       ('cut.txt', 'cut.txt cannot be read'), ('z.txt', 'zstd-compressed'),
                       ('nul.txt', 'a NUL byte, line 2'), ('blank.txt', 'yield no tokens'),
                       ('empty', 'holds no files')]:
        refused(cli('--corpus', tmp_path / name, '--steps', 2, '--out', tmp_path / 'o', *TINY), says)
        assert not (tmp_path / 'o').exists()
        refused(cli('prepare', '--corpus', tmp_path / name, '--out', tmp_path / 'd'), says)
        assert not (tmp_path / 'd').exists() and not [p for p in tmp_path.iterdir() if p.name.startswith('.d.')]

def test_eval_with_a_bad_gz(stopped, tmp_path):
    (tmp_path / 'bad.gz').write_bytes(b'\x1f\x8b' + b'no gzip here')  # gzip's first bytes, then not gzip
    run = tmp_path / 'run'; shutil.copytree(stopped, run)
    assert main(['--resume', str(run), '--quiet']) == 0
    refused(cli('eval', run, '--corpus', tmp_path / 'bad.gz'), 'bad.gz cannot be read')

@pytest.mark.parametrize('args,says', [
    (['--sin-scale', 'inf'], 'argument --sin-scale: must be in'), (['--minutes', 'inf'], 'argument --minutes'),
    (['--minutes', '1e308'], 'argument --minutes'), (['--lr', 'nan'], 'argument --lr'),
    (['--evals', str(10**9)], 'argument --evals: must be <= 10000'),
    (['--seed', str(2**64)], 'argument --seed: must be <= 18446744073709551615'),
    (['--layers', str(10**6)], 'would need about'), (['--d-model', str(2**20), '--heads', '1'], 'would need about'),
    (['--d-ff', str(10**9)], 'would need about'), (['--max-len', str(10**9)], 'would need about'),
    (['--batch-size', str(10**9)], 'would need about'), (['--batch-size', str(10**5)], 'is more than the'), (['--l', '0.1'], 'unrecognized arguments: --l')])
def test_out_of_range_settings(args, says, corpus, tmp_path):
    refused(cli('--corpus', corpus, '--steps', 2, '--out', tmp_path / 'o', *TINY, *args), says)
    assert not (tmp_path / 'o').exists()

def test_a_budget_too_short_to_train_is_one_line(corpus, tmp_path):
    "--minutes 1e-6 trained a step at a learning rate of -1,048 x --lr and saved it, exit 0 (#43)."
    refused(cli('--corpus', corpus, '--minutes', '1e-6', '--out', tmp_path / 'o', *TINY), 'is too short to train')
    assert not (tmp_path / 'o').exists()

def test_compile_under_torchrun_is_refused(corpus, tmp_path):
    """A compiled step under DDP was never tried: refused by every process (they join the group before any check, so
    none is left waiting), before anything is written; and off by default."""
    r = subprocess.run(torchrun('--corpus', corpus, '--steps', 2, '--out', tmp_path / 'o', *TINY, '--compile'),
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS='1'), timeout=300)
    said = r.stderr.count('bert-nb: error: --compile is for one process')  # (two processes' lines may interleave)
    assert r.returncode != 0 and said == 2 and r.stderr.count('bert-nb: ') == 2, r.stderr[-2000:]
    assert not (tmp_path / 'o').exists() and RunArgs().compile is False

def test_bad_vocab_files(corpus, tmp_path):
    tok = WordPieceTokenizer.train(read_corpus([corpus]), 300)
    (tmp_path / 'dup.txt').write_text('\n'.join(tok.tokens() + [tok.tokens()[40]]) + '\n')
    (tmp_path / 'bin.txt').write_bytes(bytes(range(256)) * 4)
    refused(cli('--corpus', corpus, '--vocab', tmp_path / 'dup.txt', '--steps', 2, '--out', tmp_path / 'o', *TINY),
            'duplicated token')
    refused(cli('--corpus', corpus, '--vocab', tmp_path / 'bin.txt', '--steps', 2, '--out', tmp_path / 'o', *TINY),
            'not UTF-8 text')
    assert not (tmp_path / 'o').exists()

def test_bad_out(corpus, tmp_path, monkeypatch, capsys):
    (tmp_path / 'file').write_text('x')
    refused(cli('--corpus', corpus, '--steps', 2, '--out', tmp_path / 'file', *TINY), 'is not a directory')
    refused(cli('--corpus', corpus, '--steps', 2, '--out', tmp_path / 'file' / 'run', *TINY), 'which is a file')
    monkeypatch.setattr(command.os, 'access', lambda p, mode: False)  # as a read-only filesystem answers
    assert main(['--corpus', str(corpus), '--steps', '2', '--out', str(tmp_path / 'ro' / 'run')] + TINY) == 2
    assert 'is not writable' in capsys.readouterr().err and not (tmp_path / 'ro').exists()

def test_fill_top_k_beyond_the_vocabulary(stopped, tmp_path):
    run = tmp_path / 'run'; shutil.copytree(stopped, run)
    assert main(['--resume', str(run), '--quiet']) == 0
    refused(cli('fill', run, 'let there be [MASK]', '--top-k', 10**6), 'top_k must be in [1, 295]')

def test_resume_refuses_new_settings(stopped):
    for opt in (['--lr', '0.1'], ['--d-model', '64'], ['--batch-size', '4'], ['--seed', '3'], ['--steps', '3']):
        refused(cli('--resume', stopped, *opt), f'drop {opt[0]}')

def test_resume_with_damaged_files(stopped, tmp_path):
    args = json.loads((stopped / 'args.json').read_text())
    pt = (stopped / 'resume.pt').read_bytes()
    cases = [('resume.pt', pt[: len(pt) // 2], 'resume.pt is not a readable checkpoint'),
             ('resume.pt', np.random.default_rng(0).bytes(4096), 'resume.pt is not a readable checkpoint'),
             # a pickle's PROTO opcode with protocol 171: torch warned, then failed, and the one line was two
             ('resume.pt', b'\x80\xab' + bytes(4094), 'resume.pt is not a readable checkpoint'),
             ('resume.pt', b'', 'resume.pt is not a readable checkpoint'),
             ('args.json', '{not json', 'args.json is not valid JSON'),
             ('args.json', json.dumps(args | {'learning_rate': 1}), "unknown setting(s) ['learning_rate']"),
             ('args.json', json.dumps(args | {'d_model': 'big'}), 'd_model must be int'),
             ('args.json', json.dumps(args | {'d_model': 64}), 'resume.pt does not fit the model'),
             ('args.json', json.dumps([1, 2]), 'not run settings')]
    import io
    ck = torch.load(io.BytesIO(pt), weights_only=False); ck['data'] = 'the corpus'
    buf = io.BytesIO(); torch.save(ck, buf)  # a string where the data's signature belongs: an AttributeError
    cases.append(('resume.pt', buf.getvalue(), 'resume.pt is not a bert-nb resume checkpoint (the data it started on'))
    for name, data, says in cases:
        run = tmp_path / f'run-{uuid.uuid4().hex[:6]}'; shutil.copytree(stopped, run)
        (run / name).write_bytes(data) if isinstance(data, bytes) else (run / name).write_text(data)
        before = sorted(os.listdir(run))
        refused(cli('--resume', run), says)
        assert sorted(os.listdir(run)) == before and not (run / 'metrics.json').exists()

def test_resume_a_copy_in_the_copy(stopped, tmp_path):
    "--resume continues the run in the directory it is given, from any working directory."
    copy = tmp_path / 'elsewhere' / 'copy'; shutil.copytree(stopped, copy)
    r = cli('train', '--resume', 'copy', '--quiet', cwd=tmp_path / 'elsewhere')
    assert r.returncode == 0, r.stderr
    assert (copy / 'metrics.json').is_file() and json.loads((copy / 'metrics.json').read_text())['steps'] == 12
    assert not (stopped / 'metrics.json').exists() and not (stopped / 'model').exists()  # the original: untouched

def test_links_planted_in_a_run_are_replaced_not_written_through(stopped, tmp_path):
    "--resume wrote loss.png and the checkpoint through symlinks planted at o/loss.png, o/resume.pt.tmp (#43)."
    run = tmp_path / 'run'; shutil.copytree(stopped, run)
    victim = tmp_path / 'victim'; victim.write_bytes(b'not yours')
    planted = ['loss.png', 'mask_rates.png', 'attention_reach.png', 'resume.pt.tmp', '.resume.pt.0a1b2c3d.tmp']
    for name in planted: (run / name).symlink_to(victim)
    assert main(['--resume', str(run), '--quiet']) == 0
    assert victim.read_bytes() == b'not yours'
    for name in planted[:3]: assert not (run / name).is_symlink() and (run / name).read_bytes()[:4] == b'\x89PNG'
    assert not (run / planted[4]).exists()  # a temporary of ours, left by a kill: tidied (the link, not its target)

def test_a_run_is_resumable_from_its_start(corpus, tmp_path):
    "Interrupted at any point after training starts, a run leaves a checkpoint that --resume continues."
    out = tmp_path / 'run'
    # SIGINT as a terminal sends it: a suite started in the background (`make test &`) runs with SIGINT ignored,
    # which its children inherit, so the child gets the default handler back first
    p = subprocess.Popen([str(EXE), '--corpus', str(corpus), '--steps', '400', '--out', str(out), *TINY],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t = time.time()
    while not (out / 'resume.pt').exists() and time.time() - t < 120: time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and f'bert-nb train --resume {out}' in err, err[-2000:]
    ck = torch.load(out / 'resume.pt', weights_only=True)
    assert ck['step'] < 400
    r = cli('--resume', out, '--stop-at', ck['step'] + 1)
    assert r.returncode == 0, r.stderr

def test_a_diverged_run_stops(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(runs, '_step', lambda *a: float('nan'))
    a = RunArgs(corpus=[str(corpus)], vocab_size=300, batch_size=8, d_model=32, layers=1, heads=2, d_ff=64,
                minutes=None, steps=5, evals=1, out=str(tmp_path / 'run'))
    with pytest.raises(ValueError, match='the training loss is nan at step 1: the run diverged'):
        train(a, progress=False)
    assert not (tmp_path / 'run' / 'metrics.json').exists() and (tmp_path / 'run' / 'resume.pt').exists()

def test_metrics_last_so_a_finished_run_can_be_completed(stopped, tmp_path):
    "A kill after the model but before metrics.json: --resume writes what was missing."
    run = tmp_path / 'run'; shutil.copytree(stopped, run)
    assert main(['--resume', str(run), '--quiet']) == 0
    for f in ('metrics.json', 'loss.png', 'attention_reach.png'): (run / f).unlink()
    assert main(['--resume', str(run), '--quiet']) == 0
    assert all((run / f).is_file() for f in ('metrics.json', 'loss.png', 'attention_reach.png'))

# ------------------------------------------------------------------------------------------------------------ API

def test_api_bad_input():
    ids, sp = np.array([2, 5, 6, 3]), np.array([1, 0, 0, 1], bool)
    with pytest.raises(ValueError, match=r'vocab must be in \[1, 4294967297\)'): mlm_mask(ids, sp, 4, 2**32 + 1, .5, PCG32(0))
    with pytest.raises(ValueError, match='ids must be integers, got dtype torch.bfloat16'):
        mlm_mask(torch.tensor([[2., 5.]], dtype=torch.bfloat16), torch.zeros(1, 2, dtype=torch.bool), 4, 40, .5, PCG32(0))
    inputs, labels = mlm_mask([], [], 4, 40, .5, PCG32(0))                  # an empty list is no float array
    assert inputs.shape == labels.shape == (0,) and inputs.dtype == np.int64
    assert PCG32(7).below(np.int32(100)) == PCG32(7).below(100)
    cfg = BertConfig(np.int64(40), max_len=np.int32(8), d_model=np.int64(8), n_heads=np.int64(2), n_layers=np.int64(1),
                     d_ff=np.int16(16), dropout=np.float32(0.0))
    assert json.dumps(cfg.to_dict()) and all(type(v) in (int, float) for v in cfg.to_dict().values())
    with pytest.raises(ValueError, match='layer indices must run 0..1: 2 layers, one numbered 99999999999999999999'):  # refused at once, not enumerated
        hf_bert_encoder_sd({'encoder.layer.99999999999999999999.output.dense.weight': torch.zeros(1),
                            'encoder.layer.0.output.dense.weight': torch.zeros(1)})

def test_ids_and_labels_of_any_integer_dtype():
    m = BertForMLM(BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0), rng=PCG32(1))
    ids = torch.tensor([[2, 9, 17, 3]]); labels = torch.tensor([[-100, 9, -100, -100]])
    want_logits, want_loss = m(ids, labels=labels)
    for it in (torch.int8, torch.int16, torch.uint8, torch.int32):
        for lt in (torch.int16, torch.int32):
            logits, loss = m(ids.to(it), labels=labels.to(lt))
            assert torch.equal(logits, want_logits) and torch.equal(loss, want_loss)
            assert torch.equal(m.loss(ids.to(it), None, None, labels.to(lt)), m.loss(ids, None, None, labels))
    with pytest.raises(ValueError, match='labels must be token ids or -100, got a bool tensor'):
        m(ids, labels=labels > 0)

def test_corrupt_checkpoint_files(tmp_path):
    from transformers import BertConfig as HFConfig, BertModel
    d = tmp_path / 'hf'
    BertModel(HFConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=16)).save_pretrained(d)
    (d / 'model.safetensors').unlink()  # an older checkpoint: weights in a pickle
    (d / 'pytorch_model.bin').write_bytes(b'\x80\x04garbage' * 100)
    with pytest.raises(ValueError, match='pytorch_model.bin is not a readable weights-only PyTorch checkpoint'):
        from_hf_pretrained(d)
    (d / 'pytorch_model.bin').write_bytes(b'\x80\xab' + bytes(4094))  # PROTO 171: torch warned, then failed
    with warnings.catch_warnings(record=True) as seen, pytest.raises(ValueError, match='not a readable weights-only'):
        warnings.simplefilter('always'); from_hf_pretrained(d)
    assert not [w for w in seen if 'pickle protocol' in str(w.message)]  # the error alone says what is wrong
    torch.save([torch.zeros(2)], d / 'pytorch_model.bin')
    with pytest.raises(ValueError, match='pytorch_model.bin holds a list, not a state dict'): from_hf_pretrained(d)

def test_save_through_a_symlink_and_into_the_cwd(tmp_path, monkeypatch):
    a, b = (BertForMLM(BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16), rng=PCG32(s)) for s in (1, 2))
    (tmp_path / 'real').mkdir(); (tmp_path / 'link').symlink_to(tmp_path / 'real')
    save_bert(a, tmp_path / 'link'); save_bert(b, tmp_path / 'link')
    assert (tmp_path / 'link').is_symlink() and torch.equal(load_bert(tmp_path / 'real').head.bias, b.head.bias)
    monkeypatch.chdir(tmp_path / 'real')
    with pytest.raises(ValueError, match='is \\(or holds\\) the current directory'): save_bert(a, '.')
    with pytest.raises(ValueError, match='is \\(or holds\\) the current directory'): save_bert(a, tmp_path)

def test_stale_temporaries_are_cleaned(tmp_path):
    m = BertForMLM(BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16), rng=PCG32(1))
    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True, text=True)
    pid = int(dead.stdout)
    for kind in ('tmp', 'old'): (tmp_path / f'.m.{kind}-{pid}-abc_1234').mkdir()  # mkdtemp's: 8 characters
    (tmp_path / f'.m.tmp-{os.getpid()}-live1234').mkdir()  # a save in progress in a live process: kept
    save_bert(m, tmp_path / 'm')
    assert sorted(os.listdir(tmp_path)) == [f'.m.tmp-{os.getpid()}-live1234', 'm']

@settings(max_examples=60, deadline=None)
@given(st.integers(0, 5), st.integers(0, 40), st.sampled_from([5, 6, 100, 30522, 2**32]), st.floats(0, 1),
       st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1))
def test_masking_invariants(B, T, V, p, seed, np_seed):
    "Labels only at non-special positions and equal to the original there; elsewhere the input shows the original."
    g = np.random.default_rng(np_seed)
    ids, special = g.integers(0, min(V, 2**31), (B, T)), g.random((B, T)) < 0.3
    keep = ids.copy(), special.copy()
    inputs, labels = mlm_mask(ids, special, 4, V, p, PCG32(seed))
    picked = labels != -100
    assert not (picked & special).any() and (labels[picked] == ids[picked]).all()
    assert (inputs[~picked] == ids[~picked]).all() and ((inputs >= 0) & (inputs < V)).all()
    assert np.array_equal(ids, keep[0]) and np.array_equal(special, keep[1])  # the caller's arrays untouched

# ---------------------------------------------------------------------------------------------- killed saves

CHILD = textwrap.dedent('''
    import sys, torch
    import bert_nb.files as files
    from bert_nb.bert import BertConfig, BertForMLM, save_bert
    from bert_nb.rng import PCG32
    if sys.argv[2] == 'fallback': files._exchange = lambda a, b: False   # as where RENAME_EXCHANGE is missing
    cfg = BertConfig(3000, max_len=64, d_model=64, n_heads=2, n_layers=2, d_ff=128)
    models = [BertForMLM(cfg, rng=PCG32(s)) for s in (1, 2)]
    print('ready', flush=True)
    i = 0
    while True:
        save_bert(models[i % 2], sys.argv[1]); i += 1
''')

@pytest.mark.parametrize('mode', ['exchange', 'fallback'])
def test_killed_saves_leave_the_old_or_the_new_model(tmp_path, mode):
    cfg = BertConfig(3000, max_len=64, d_model=64, n_heads=2, n_layers=2, d_ff=128)
    rows = [BertForMLM(cfg, rng=PCG32(s)).encoder.word_emb.weight[:4] for s in (1, 2)]
    d, rnd = tmp_path / 'm', random.Random(0)
    for kill in range(4):
        p = subprocess.Popen([sys.executable, '-c', CHILD, str(d), mode], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == 'ready'
        time.sleep(rnd.uniform(0.05, 0.6))
        p.kill(); p.wait()
        if not d.exists() and kill == 0 and not any(tmp_path.glob('.m.new-*')): continue  # killed before a first save
        back = load_bert(d).encoder.word_emb.weight[:4]   # finishes a swap cut between its renames, if one was
        assert any(torch.equal(back, w) for w in rows), 'a mix of two models'
    save_bert(BertForMLM(cfg, rng=PCG32(1)), d)
    assert sorted(os.listdir(tmp_path)) == ['m']          # no temporary directory left behind

# -------------------------------------------------------------------------------------------------- torchrun

def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def torchrun(*args, env=None):
    script = Path(__file__).parents[1] / 'bert_nb' / 'command.py'
    return [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2', '--master_addr', '127.0.0.1',
            '--master_port', str(free_port()), str(script), 'train', *map(str, args)]

def test_resume_with_another_number_of_processes(corpus, tmp_path):
    out = tmp_path / 'ddp'
    r = subprocess.run(torchrun('--corpus', corpus, '--steps', 6, '--stop-at', 2, '--out', out, *TINY),
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS='1'), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    refused(cli('--resume', out), 'was trained by 2 process(es): resume it with as many (not 1)')

def test_resume_with_more_processes_than_the_run_had(stopped, tmp_path):
    "A run of one process resumed by two: refused on every rank (each would take up another rank's shard and stream)."
    run = tmp_path / 'run'; shutil.copytree(stopped, run)
    r = subprocess.run(torchrun('--resume', run), capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS='1'), timeout=300)
    assert r.returncode != 0 and 'was trained by 1 process(es): resume it with as many (not 2)' in r.stderr, r.stderr[-2000:]
    assert '[rank' not in r.stderr and not (run / 'metrics.json').exists()

def test_a_frozen_rank_brings_the_run_down(corpus, tmp_path):
    """A peer stopped with SIGSTOP: the other rank gives up after --timeout (10 s), and the run ends, non-zero.
    Once that rank has exited the stopped one is continued: torchrun's SIGTERM then lands at once, where a
    process left stopped would cost torchrun's fixed 30 s grace before its SIGKILL, and tell us nothing more."""
    out, mark = tmp_path / 'ddp', uuid.uuid4().hex
    env = dict(os.environ, OMP_NUM_THREADS='1', BERT_NB_TEST_MARK=mark)
    p = subprocess.Popen(torchrun('--corpus', corpus, '--steps', 100000, '--out', out, '--timeout', 10, *TINY),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    t0 = time.time()
    while not (out / 'resume.pt').exists() and time.time() - t0 < 120: time.sleep(0.1)
    def rank(r: int) -> int | None:
        for proc in Path('/proc').glob('[0-9]*'):
            try: e = (proc / 'environ').read_bytes().split(b'\0')
            except OSError: continue
            if f'BERT_NB_TEST_MARK={mark}'.encode() in e and f'RANK={r}'.encode() in e: return int(proc.name)
        return None
    pid0, pid1 = rank(0), rank(1)
    assert pid0 and pid1, 'ranks not found'
    os.kill(pid1, signal.SIGSTOP); t1 = time.time()
    try:
        while Path(f'/proc/{pid0}').exists() and time.time() - t1 < 120: time.sleep(0.1)
        assert not Path(f'/proc/{pid0}').exists(), 'rank 0 still waits for its stopped peer'
        os.kill(pid1, signal.SIGCONT)
        p.wait(timeout=120)
        assert p.returncode != 0  # p.wait bounds the time: 12 times --timeout
    finally:
        for q in (pid1, p.pid):
            try: os.kill(q, signal.SIGKILL)
            except ProcessLookupError: pass

@pytest.fixture(scope='module')
def prepared(corpus, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp('nodes') / 'data'
    assert main(['prepare', '--corpus', str(corpus), '--out', str(d), '--vocab-size', '300']) == 0
    return d

def launch(cwd: Path | list[Path], *args: list, timeout: float, sizes: list = TINY[2:], **env) -> list[subprocess.Popen]:
    """Two torchrun launchers on 127.0.0.1 (--nnodes 2, a process each), node i with the command line args[i], in
    `cwd` (or in cwd[i]: two machines' own copies of the same paths)."""
    cwds = cwd if isinstance(cwd, list) else [cwd] * len(args)
    port, script = free_port(), Path(__file__).parents[1] / 'bert_nb' / 'command.py'
    return [subprocess.Popen([sys.executable, '-m', 'torch.distributed.run', '--nnodes', '2', '--nproc_per_node', '1',
                              '--node_rank', str(i), '--master_addr', '127.0.0.1', '--master_port', str(port),
                              str(script), 'train', *sizes, '--timeout', str(timeout), *map(str, a)],
                             cwd=cwds[i], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS='1', **env)) for i, a in enumerate(args)]

def two_nodes(cwd: Path | list[Path], *args: list, timeout: float = 20, sizes: list = TINY[2:]
              ) -> list[subprocess.CompletedProcess]:
    procs = launch(cwd, *args, timeout=timeout, sizes=sizes)
    try: return [subprocess.CompletedProcess(p.args, p.wait(timeout=timeout + 60), *p.communicate()) for p in procs]
    finally:
        for p in procs: p.kill()

@pytest.mark.parametrize('node1,says', [
    (['--steps', 4], 'rank 1 on {host} was given --steps 4 and rank 0 on {host} --steps 6'),  # both hung (#43)
    (['--steps', 6, '--seed', 3], 'was given --seed 3 and rank 0 on {host} --seed 0'),       # two streams, mixed
    (['--steps', 6, '--d-model', 64], 'was given --d-model 64'),                              # worker tracebacks
    (['--steps', 6, '--stop-at', 2], 'was given --stop-at 2'),
    (['--steps', 6, '--data', 'missing'], 'rank 1 on {host}: --data missing is not prepared data'),  # node 0 waited
    (['--steps', 6, '--data', 'bad'], 'bad/meta.json is not valid JSON'),
    (['--steps', '-1'], 'rank 1 on {host}: argument --steps: must be >= 1, got -1')])
def test_nodes_agree_on_their_arguments_or_all_stop(prepared, tmp_path, node1, says):
    """Each node's command line is its own: one refused, or given other settings, stops every node at once with
    the same line (the worker's exit status 2, within --timeout), where one node waited for the other until killed."""
    (tmp_path / 'bad').mkdir(); (tmp_path / 'bad' / 'meta.json').write_text('{not json')
    shutil.copytree(prepared, tmp_path / 'data')
    # At once, not after --timeout: each node names the disagreement, where a node left waiting would have said that
    # its peer stopped answering (a clock's bound here failed a correct run on a loaded machine, at 20.4 s).
    nodes = two_nodes(tmp_path, ['--data', 'data', '--steps', 6, '--out', 'o'],
                      ['--data', 'data', *node1, '--out', 'o'] if '--data' not in node1 else [*node1, '--out', 'o'])
    for r in nodes:
        ours = [l for l in r.stderr.splitlines() if l.startswith('bert-nb: ')]
        assert r.returncode != 0 and len(ours) == 1 and says.format(host=socket.gethostname()) in ours[0], r.stderr[-3000:]
        assert 'exitcode  : 2' in r.stderr and '[rank' not in r.stderr  # no worker's traceback
    assert not (tmp_path / 'o').exists()

def test_nodes_agree_on_the_init_model_or_all_stop(prepared, tmp_path):
    """--init is read on each node from its own copy: copies that hold other weights stop every node with one line
    (both exited 0, node 1 trained on node 0's weights, broadcast at the start)."""
    for i in (0, 1):
        node = tmp_path / f'node{i}'; node.mkdir(); shutil.copytree(prepared, node / 'data')
        assert main(['train', '--data', str(node / 'data'), '--steps', '2', '--seed', str(i), '--out',
                     str(node / 'run'), '--quiet', *TINY[2:]]) == 0  # two models of one shape, other weights
    args = ['--data', 'data', '--steps', 4, '--init', 'run/model', '--out', 'o', '--batch-size', 8]  # sizes: --init's
    for r in two_nodes([tmp_path / 'node0', tmp_path / 'node1'], args, args, sizes=[]):
        ours = [l for l in r.stderr.splitlines() if l.startswith('bert-nb: ')]
        assert r.returncode != 0 and len(ours) == 1 and 'rank 1 on' in ours[0], r.stderr[-3000:]
        assert 'holds another --init model than rank 0' in ours[0] and '[rank' not in r.stderr
    assert not (tmp_path / 'node0' / 'o').exists() and not (tmp_path / 'node1' / 'o').exists()
    shutil.rmtree(tmp_path / 'node1' / 'run'); shutil.copytree(tmp_path / 'node0' / 'run', tmp_path / 'node1' / 'run')
    assert [r.returncode for r in two_nodes([tmp_path / 'node0', tmp_path / 'node1'], args, args, timeout=60,
                                            sizes=[])] == [0, 0]  # the same copy on each: it trains

def test_a_node_that_dies_stops_the_other_with_one_line(prepared, tmp_path):
    "A worker killed mid-run: the other node's worker stops at once (a reset connection) or within --timeout."
    mark, run = uuid.uuid4().hex, ['--data', prepared, '--steps', 100000, '--out', tmp_path / 'o']
    procs = launch(tmp_path, run, run, timeout=10, BERT_NB_TEST_MARK=mark)
    try:
        t0 = time.time()
        while not (tmp_path / 'o' / 'resume.pt').exists() and time.time() - t0 < 120: time.sleep(0.1)
        worker = next(int(p.name) for p in Path('/proc').glob('[0-9]*') if _has(p, f'BERT_NB_TEST_MARK={mark}', 'RANK=1'))
        os.kill(worker, signal.SIGKILL)
        err = procs[0].communicate(timeout=120)[1]  # a hang's guard: 12 times --timeout; the line says which event
        ours = [l for l in err.splitlines() if l.startswith('bert-nb: ')]
        assert len(ours) == 1 and 'a peer process stopped answering' in ours[0], err[-3000:]
    finally:
        for p in procs: p.kill()

def _has(proc: Path, *env: str) -> bool:
    try: e = (proc / 'environ').read_bytes().split(b'\0')
    except OSError: return False
    return all(v.encode() in e for v in env)

def test_a_swap_cut_between_its_two_renames_is_finished(tmp_path):
    "Without RENAME_EXCHANGE a save renames twice; killed between, the complete new model is renamed into place."
    m = BertForMLM(BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16), rng=PCG32(3))
    save_bert(m, tmp_path / 'staging')
    dead = int(subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True,
                              text=True).stdout)
    (tmp_path / 'staging').rename(tmp_path / f'.m.new-{dead}-abc12345')  # the new model, complete, not in place
    assert torch.equal(load_bert(tmp_path / 'm').head.bias, m.head.bias)
    assert sorted(os.listdir(tmp_path)) == ['m']
