"""Files others can read (#36): a save's files and directories take the modes `open` and `mkdir` give under the
umask (safetensors wrote its weights 0600), another account loads the model, and one that may not read a file is
told so, not told that the file is corrupt."""
import json, os, re, stat, subprocess, sys, tempfile, textwrap
from pathlib import Path
import pytest
import torch
import torch.nn as nn
from bert_nb.bert import BertConfig, BertEncoder, BertForMLM, save_bert, save_parts
from bert_nb.finetune import Classifier, save_classifier
from bert_nb.rng import PCG32
from bert_nb.wordpiece import SPECIALS, WordPieceTokenizer

CFG = BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16)
TOK = WordPieceTokenizer.from_tokens(list(SPECIALS) + [f'w{i}' for i in range(35)])

class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.gen, self.disc, self.head = BertForMLM(CFG, PCG32(1)), BertEncoder(CFG, PCG32(2)), nn.Linear(8, 1)

def saves(root: Path, umask: int) -> list[Path]:
    "A BertForMLM, an encoder and a model of parts, saved under `umask`."
    old = os.umask(umask)
    try:
        return [save_bert(BertForMLM(CFG, PCG32(0)), root / 'mlm', TOK), save_bert(BertEncoder(CFG), root / 'enc'),
                save_parts(Pair(), root / 'parts', TOK),  # save_classifier wrote its weights 0600 (#43)
                save_classifier(Classifier(BertEncoder(CFG, pooler=True), 2), root / 'cls', TOK, ['a', 'b'])]
    finally: os.umask(old)

@pytest.mark.parametrize('umask', [0o022, 0o077, 0o002, 0o027])
def test_a_save_follows_the_umask(tmp_path, umask):
    for d in saves(tmp_path, umask):
        for p in [d, *d.rglob('*')]:
            want = (0o777 if p.is_dir() else 0o666) & ~umask  # what mkdir and open give under the umask
            assert stat.S_IMODE(p.stat().st_mode) == want, (p, oct(p.stat().st_mode), oct(want))

NOBODY = 65534
SYSTEM_PYTHON = '/usr/bin/python3'  # this project's interpreter lives under /root, which another account cannot enter
as_nobody = pytest.mark.skipif(os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
                               reason='needs root, to run a process as another account, and a system Python')

@as_nobody
def test_another_account_reads_every_file_of_a_save():
    "As uid 65534, every file of three saves opens and reads whole, and each safetensors header parses."
    root = Path(tempfile.mkdtemp()); os.chmod(root, 0o755)
    saves(root, 0o022)
    code = textwrap.dedent(f"""
        import json, pathlib, struct
        n = 0
        for p in sorted(pathlib.Path({str(root)!r}).rglob('*')):
            if not p.is_file(): continue
            data = p.read_bytes(); n += 1
            if p.suffix == '.safetensors': json.loads(data[8:8 + struct.unpack('<Q', data[:8])[0]])
        print(n)""")
    r = subprocess.run([SYSTEM_PYTHON, '-c', code], capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)))
    assert r.returncode == 0 and int(r.stdout) >= 10, r.stderr[-2000:]

def test_a_file_this_account_may_not_read_is_named_as_such(tmp_path, monkeypatch):
    "The reader says permission denied, with the mode, where it once said 'corrupt or truncated?'."
    import bert_nb.files as files
    from bert_nb.bert import load_bert
    (d,) = saves(tmp_path, 0o077)[:1]
    monkeypatch.setattr(files.os, 'access', lambda p, mode: not str(p).endswith('model.safetensors'))
    with pytest.raises(PermissionError, match=r'model.safetensors: permission denied: its mode is -rw-------'):
        load_bert(d)

@pytest.mark.parametrize('stored,says', [
    (lambda c: c.float(), 'got torch.float32 of shape'),                  # another dtype
    (lambda c: c.reshape(1, -1), 'got torch.uint8 of shape (1, '),        # another rank
    (lambda c: torch.tensor(300), 'got torch.int64 of shape ()'),         # a value, not bytes
    (lambda c: torch.tensor(10**12), 'got torch.int64 of shape ()'),      # bytes(10**12) would allocate a terabyte
    (lambda c: torch.zeros(0, dtype=torch.uint8), 'of shape (0,)'),
    (lambda c: torch.zeros(1 << 17, dtype=torch.uint8), 'of shape (131072,)')])
def test_the_config_a_trainer_save_holds_is_checked_before_it_is_decoded(tmp_path, stored, says):
    "What transformers' Trainer saves for a ForTrainer: the config rides in the weights, as JSON bytes (#36)."
    from safetensors.torch import save_file
    from bert_nb.bert import load_bert
    from bert_nb.data import ForTrainer
    sd = {k: v.contiguous() for k, v in ForTrainer(BertForMLM(CFG, PCG32(0))).state_dict().items()}
    (tmp_path / 'm').mkdir()
    save_file(sd, tmp_path / 'm' / 'model.safetensors')
    assert isinstance(load_bert(tmp_path / 'm'), BertForMLM)  # as saved: loads
    save_file(sd | {'bert_nb_config': stored(sd['bert_nb_config'])}, tmp_path / 'm' / 'model.safetensors')
    with pytest.raises(ValueError, match=r'model.safetensors: bert_nb_config must be the config as JSON bytes'):
        load_bert(tmp_path / 'm')
    with pytest.raises(ValueError, match=re.escape(says)): load_bert(tmp_path / 'm')

def test_a_users_directory_that_looks_like_a_save_is_left_alone(tmp_path):
    "load_bert of a missing m deleted `.m.new-<dead pid>-keep` and the notes in it (#36); a save's own leftovers go."
    from bert_nb.bert import load_bert
    mine = tmp_path / '.m.new-999999999-keep'; mine.mkdir(); (mine / 'notes.txt').write_text('mine')
    (mine / 'config.json').write_text('{}')  # even one that holds a config: not renamed into place either
    dead = tmp_path / '.m.tmp-999999999-abc_1234'; dead.mkdir()  # what a killed save leaves: 8 of mkdtemp's
    with pytest.raises(FileNotFoundError, match='no model directory'): load_bert(tmp_path / 'm')
    assert (mine / 'notes.txt').read_text() == 'mine' and not dead.exists() and not (tmp_path / 'm').exists()

def test_a_killed_prepare_leaves_nothing_for_long(tmp_path):
    "Its temporary directory carries its process id; the next prepare beside it removes it once that is gone."
    from bert_nb.data import prepare_data
    (tmp_path / 'c.txt').write_text('in the beginning god created the heaven and the earth\n' * 200)
    dead = tmp_path / '.d.tmp-999999999-abcdefgh'; dead.mkdir(); (dead / 'train.bin').write_bytes(b'\0' * 10)
    prepare_data([tmp_path / 'c.txt'], tmp_path / 'd', vocab_size=60, say=lambda *_: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['c.txt', 'd']

@pytest.mark.parametrize('special', ['fifo', '/dev/zero', '/dev/null'])
def test_a_corpus_that_is_not_a_regular_file_is_named_as_such(tmp_path, special):
    "A FIFO or a device was reported as 'no corpus file' (it exists; it is not a file a corpus can be read from twice)."
    from bert_nb.files import corpus_files
    p = tmp_path / 'fifo' if special == 'fifo' else Path(special)
    if special == 'fifo': os.mkfifo(p)
    with pytest.raises(ValueError, match=re.escape(f'corpus {p} is not a regular file or a directory')):
        corpus_files([p])
    exe = Path(sys.executable).parent / 'bert-nb'
    r = subprocess.run([str(exe), 'prepare', '--corpus', str(p), '--out', str(tmp_path / 'd')], capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and 'is not a regular file or a directory' in r.stderr and not (tmp_path / 'd').exists()

def test_prepare_into_a_place_it_cannot_write_says_so_before_reading(tmp_path):
    "It named its temporary (`.d.tmp-<pid>-...`) after reading, counting and merging the whole corpus (#36)."
    (tmp_path / 'ro').mkdir()
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'ro,size=64k', 'tmpfs', str(tmp_path / 'ro')], capture_output=True)
    if r.returncode: pytest.skip(f'cannot mount a read-only tmpfs here: {r.stderr.decode().strip()}')
    try:
        exe = Path(sys.executable).parent / 'bert-nb'
        (tmp_path / 'c.txt').write_text('in the beginning god created the heaven and the earth\n' * 100)
        for args in (['prepare', '--corpus', tmp_path / 'c.txt', '--out', tmp_path / 'ro' / 'd'],
                     ['--corpus', tmp_path / 'c.txt', '--steps', '1', '--out', tmp_path / 'ro' / 'o', '--quiet']):
            r = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=120)
            assert r.returncode == 2 and f"{tmp_path / 'ro'} is not writable" in r.stderr, r.stderr
            assert r.stdout == '' and '.tmp-' not in r.stderr  # nothing read, no temporary named
    finally: subprocess.run(['umount', str(tmp_path / 'ro')])

def test_fill_with_a_vocabulary_not_the_models_is_refused():
    "Its answers were ids with no token: None (#36)."
    from bert_nb.pretrain import fill
    m = BertForMLM(CFG, PCG32(0))
    small = WordPieceTokenizer.from_tokens(list(SPECIALS) + [f'w{i}' for i in range(20)])
    with pytest.raises(ValueError, match="tok has 25 tokens but the model's word table 40 rows"):
        fill(m, small, 'w1 [MASK] w2')
    assert all(isinstance(t, str) for t, _ in fill(m, TOK, 'w1 [MASK] w2')[0])

def test_a_save_into_a_directory_holding_a_mount_point(tmp_path):
    "shutil.Error, a traceback, when a subdirectory of the model directory was a mount (#36): one clear error now."
    from bert_nb.bert import load_bert
    m = BertForMLM(CFG, PCG32(0))
    d = save_bert(m, tmp_path / 'm'); before = (d / 'model.safetensors').read_bytes()
    (d / 'vol').mkdir()
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', str(d / 'vol')], capture_output=True)
    if r.returncode: pytest.skip(f'cannot mount a tmpfs here: {r.stderr.decode().strip()}')
    try:
        (d / 'vol' / 'x.txt').write_text('on the volume')
        with pytest.raises(ValueError, match='is a mount point, or holds one, which a save cannot swap out'):
            save_bert(BertForMLM(CFG, PCG32(1)), d)
        assert (d / 'model.safetensors').read_bytes() == before and (d / 'vol' / 'x.txt').read_text() == 'on the volume'
        assert sorted(p.name for p in tmp_path.iterdir()) == ['m']  # no temporary left beside it
    finally: subprocess.run(['umount', str(d / 'vol')])
    assert isinstance(load_bert(d), BertForMLM)

@pytest.mark.parametrize('encoding', ['latin-1', 'utf-16', 'cp1252'])
def test_a_corpus_in_another_encoding(tmp_path, encoding):
    "A Latin-1 or UTF-16 corpus was refused as 'not UTF-8' with no way to read it (#36): --encoding, as open takes."
    from bert_nb.files import corpus_lines
    text = 'café crème brûlée, à la française\n' * 200
    (tmp_path / 'c.txt').write_bytes(text.encode(encoding))
    with pytest.raises(ValueError, match=r'c.txt is not UTF-8 text .*\(--encoding\)'): list(corpus_lines([tmp_path / 'c.txt']))
    assert list(corpus_lines([tmp_path / 'c.txt'], encoding))[0] == 'café crème brûlée, à la française'
    exe = Path(sys.executable).parent / 'bert-nb'
    run = lambda *a: subprocess.run([str(exe), *map(str, a)], capture_output=True, text=True, timeout=300)
    r = run('--corpus', tmp_path / 'c.txt', '--encoding', encoding, '--vocab-size', 60, '--steps', 2, '--max-len', 16,
            '--batch-size', 4, '--d-model', 16, '--layers', 1, '--heads', 2, '--d-ff', 32, '--evals', 1, '--quiet',
            '--out', tmp_path / 'run')
    assert r.returncode == 0, r.stderr[-1500:]
    assert json.loads((tmp_path / 'run' / 'args.json').read_text())['encoding'] == encoding
    words = (tmp_path / 'run' / 'vocab.txt').read_text(encoding='utf-8').split()
    assert {'cafe', 'brulee', 'francaise'} <= set(words)  # read as the text it is (uncased BERT strips accents)

def test_binary_stays_refused_and_an_unknown_encoding_is_named(tmp_path):
    from bert_nb.files import corpus_lines
    (tmp_path / 'b').write_bytes(bytes(range(256)) * 4)  # every byte decodes in Latin-1: the NUL still tells
    with pytest.raises(ValueError, match='is not text: a NUL byte'): list(corpus_lines([tmp_path / 'b'], 'latin-1'))
    for bad in ('klingon', 'rot13', 3):
        with pytest.raises(ValueError, match='encoding must be a text encoding, named as Python names it'):
            list(corpus_lines([tmp_path / 'b'], bad))

def test_a_load_sees_a_swap_that_reused_the_inode(tmp_path, monkeypatch):
    "A load racing two saves failed once in 159 (#36): the new directory can take the old one's freed inode number."
    import bert_nb.bert as B
    d = save_bert(BertForMLM(CFG, PCG32(0)), tmp_path / 'm')
    reads, real = [], B._load_dir
    def read_while_swapped(*a):  # as if a save swapped in a new directory under the same inode number
        reads.append(1)
        if len(reads) == 1: os.chmod(d, 0o755)  # the inode's ctime moves, its number stays
        return real(*a)
    monkeypatch.setattr(B, '_load_dir', read_while_swapped)
    assert isinstance(B.load_bert(d), BertForMLM) and len(reads) == 2  # read again, not trusted


# ------------------------------------------------------------------------------------------ writes stay in place (#43)

WRITERS = {'save_file', 'save', 'savefig', 'write_text', 'write_bytes', 'tofile'}  # (f.write: f was opened, above)

def test_every_writer_goes_through_files_create():
    """Every call of the package that writes a file: `_create` (a new file: O_EXCL, O_NOFOLLOW, the umask's mode) in
    files.py, or a writer handed the open file by `_write_file` / `_create` (`lambda f: torch.save(state, f)`).
    A `save_file(path)`, `torch.save(obj, path)`, `open(path, 'w')` or `path.write_text` anywhere else fails here:
    such a writer follows a link planted at `path`, and safetensors' leaves the file 0600."""
    import ast, bert_nb
    bad = []
    for py in sorted(Path(bert_nb.__file__).parent.glob('*.py')):
        tree = ast.parse(py.read_text())
        handed = set()  # names bound to a file that _create or _write_file opened
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, 'id', None) == '_write_file':
                handed |= {a.arg for l in node.args if isinstance(l, ast.Lambda) for a in l.args.args}
            if isinstance(node, ast.withitem) and getattr(getattr(node.context_expr, 'func', None), 'id', None) == '_create':
                handed.add(node.optional_vars.id)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call): continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, 'id', None)
            if name == 'open' and isinstance(f, ast.Name):
                mode = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else 'r'
                if set(mode) & set('wax+'): bad.append(f'{py.name}:{node.lineno} open(..., {mode!r})')
            elif name == 'open' and getattr(f.value, 'id', None) == 'os':  # os.open: in _create alone (or devnull)
                if py.name != 'files.py' and not {'O_RDONLY', 'devnull'} & set(re.findall(r'\w+', ast.unparse(node))):
                    bad.append(f'{py.name}:{node.lineno} os.open')
            elif name in WRITERS:
                target = node.args[1] if name in ('save', 'save_file') and len(node.args) > 1 else \
                    node.args[0] if node.args and name in ('savefig', 'tofile') else \
                    f.value if isinstance(f, ast.Attribute) else None
                if name == 'save' and getattr(getattr(f, 'value', None), 'id', None) not in ('torch', 'np'): continue
                if not (isinstance(target, ast.Name) and target.id in handed):
                    bad.append(f'{py.name}:{node.lineno} {ast.unparse(node)[:80]}')
    assert bad == []

def test_a_part_named_by_a_path_is_refused(tmp_path):
    "save_parts wrote a part whose module name was an absolute path at that path, outside the save (#43)."
    for name in (str(tmp_path / 'outside'), 'a/b'):
        m = nn.Module(); m.add_module(name, BertEncoder(CFG))
        with pytest.raises(ValueError, match=re.escape(f"part {name!r} is not a plain name")):
            save_parts(m, tmp_path / 'save')
        assert sorted(os.listdir(tmp_path)) == []
