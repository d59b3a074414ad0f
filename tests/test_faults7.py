"""Where round 7's hidden faults survived: a test for each property no test asserted, each with an oracle of its own
(a boundary written out here, a float64 formula, the safetensors library, transformers' collators' rule, NumPy).
`make mutants` holds a fault in each area (l-) that these tests kill."""
import json, math, os, shutil, subprocess, warnings
from dataclasses import replace
from pathlib import Path
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from bert_nb import KJV, BertEncoder, PCG32, WordPieceTokenizer, load_bert
from bert_nb.checks import check_int, check_like, check_p, check_real
from bert_nb.finetune import Classifier, load_classifier, save_classifier
from bert_nb.modernbert import ModernBertConfig, ModernBertForMLM, rope_tables, rotate
from bert_nb.modernbert_files import config_from_hf, hf_config, load_modernbert, save_modernbert
from bert_nb.speed import attend, decoded_loss
from bert_nb.tagging import IGNORE, TagCollator, align

@pytest.fixture(scope='module')
def tok(): return WordPieceTokenizer.from_vocab(KJV)

def shipped() -> BertEncoder:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the shipped model's MLM head is left out, and the load says so
        return load_bert(KJV, BertEncoder, pooler=True)

# ------------------------------------------------------------------------------------------- the public checks

up, down = (lambda x: math.nextafter(x, math.inf)), (lambda x: math.nextafter(x, -math.inf))

@pytest.mark.parametrize('open_lo', [False, True])
def test_check_real_on_both_sides_of_each_bound(open_lo):
    "[lo, hi], or (lo, hi] with open_lo: each bound in or out as its bracket says, the next float past it out."
    lo, hi = 0.25, 0.75
    for x in (up(lo), 0.5, down(hi), hi): assert check_real('r', x, lo, hi, open_lo) == x
    for x in (down(lo), up(hi)) + ((lo,) if open_lo else ()):
        with pytest.raises(ValueError, match=r'r must be a finite number in [\[(]0.25, 0.75\]'):
            check_real('r', x, lo, hi, open_lo)
    if not open_lo: assert check_real('r', lo, lo, hi) == lo

def test_check_p_takes_0_and_1_and_nothing_past_them():
    for p in (0, 0.0, up(0.0), down(1.0), 1, 1.0): assert check_p(p) == p
    for p in (down(0.0), -0.5, up(1.0), 2):
        with pytest.raises(ValueError, match=r'p must be in \[0, 1\]'): check_p(p)

def test_check_int_takes_lo_and_refuses_hi():
    assert check_int('n', 3, 3, 5) == 3 and check_int('n', 4, 3, 5) == 4
    for x in (2, 5):
        with pytest.raises(ValueError, match=r'n must be in \[3, 5\)'): check_int('n', x, 3, 5)

def test_check_like_integer_means_integer_or_bool():
    "integer=True: an integer or bool tensor; not a float, not a complex one (complex is neither); integer=False: any."
    ref = torch.zeros(2, 3, dtype=torch.long)
    for dt in (torch.int64, torch.int32, torch.uint8, torch.bool): check_like('m', torch.zeros(2, 3, dtype=dt), ref)
    for dt in (torch.float32, torch.bfloat16, torch.complex64):
        with pytest.raises(ValueError, match=f'm must be an integer or bool tensor, got {dt}'):
            check_like('m', torch.zeros(2, 3, dtype=dt), ref)
        check_like('m', torch.zeros(2, 3, dtype=dt), ref, integer=False)
    with pytest.raises(ValueError, match=r'm must have the shape of ids \(2, 3\), got \(3, 2\)'):
        check_like('m', torch.zeros(3, 2, dtype=torch.long), ref)

# ---------------------------------------------------------------------------------------- collators and heads

def test_a_bool_attention_mask_batches_as_its_0_1_form(tok):
    "transformers' collators take a bool attention_mask (a tokenizer's output, compared): the same batch as 0/1."
    feats = [align(tok, w, t) for w, t in ((['and', 'god', 'said'], [0, 1, 0]), (['let', 'there'], [1, 0]))]
    ints = [dict(f, attention_mask=[1] * len(f['input_ids'])) for f in feats]
    bools = [dict(f, attention_mask=[True] * len(f['input_ids'])) for f in feats]
    a, b = TagCollator(tok, 16)(ints), TagCollator(tok, 16)(bools)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    torch.testing.assert_close(a['attention_mask'], torch.tensor([[1] * 5, [1] * 4 + [0]]))

def test_an_attention_mask_of_2_is_refused(tok):
    f = align(tok, ['and', 'god', 'said'], [0, 1, 0])
    with pytest.raises(ValueError, match='attention_mask must be 0 or 1'):
        TagCollator(tok, 16)([dict(f, attention_mask=[1, 1, 2, 1, 1])])

def test_a_head_of_two_float_types_is_refused(tmp_path, tok):
    "classifier.weight float32 and .bias float64 in the file: refused by name, as one float type is the rule."
    from safetensors.torch import load_file, save_file
    d = save_classifier(Classifier(shipped(), 2, rng=PCG32(0)), tmp_path / 'c', tok, ['no', 'yes'])
    sd = load_file(d / 'model.safetensors')
    sd['classifier.bias'] = sd['classifier.bias'].double()
    save_file(sd, d / 'model.safetensors', metadata={'format': 'pt'})
    with pytest.raises(ValueError, match=r'classifier.weight .* must be of one float type, got .* torch.float32, '
                                         r'\(2,\) torch.float64'):
        load_classifier(d)

# --------------------------------------------------------------------------------------------------- ModernBERT

SMALL = ModernBertConfig(vocab=64, d_model=16, n_heads=2, n_layers=3, d_ff=24, window=8, global_every=3)

@pytest.mark.parametrize('layer', ['full_attention', 'sliding_attention'])
def test_a_scaled_rope_is_refused_in_either_layer_type(layer):
    "transformers 5 writes RoPE per layer type; a scaled one (rope_type 'linear') in either is refused by name."
    d = hf_config(SMALL)
    assert config_from_hf(d) == SMALL  # the plain one reads back
    d['rope_parameters'][layer] = {'rope_type': 'linear', 'factor': 2.0, 'rope_theta': 10_000.0}
    says = f"only plain RoPE \\(rope_type 'default'\\) is built here, got rope_type 'linear' for {layer}"
    with pytest.raises(ValueError, match=says):
        config_from_hf(d)

def test_integer_weights_are_refused_even_of_one_type(tmp_path):
    "Every tensor int32 (one type, none a float): refused, as a mix of types is; the safetensors file itself is read."
    from safetensors.torch import load_file, save_file
    d = save_modernbert(ModernBertForMLM(SMALL, PCG32(0)), tmp_path / 'm')
    sd = load_file(d / 'model.safetensors')
    save_file({k: (v * 100).to(torch.int32) for k, v in sd.items()}, d / 'model.safetensors', metadata={'format': 'pt'})
    with pytest.raises(ValueError, match=r"the weights must be of one float type, got \['torch.int32'\]"):
        load_modernbert(d)

# ---------------------------------------------------------------------------------------- attention and the loss

@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float32])
def test_attention_drops_its_weights_in_training(dtype):
    """attend(p=0.5): each attention weight dropped at rate p and the others scaled by 1/(1-p); p=0: the weights
    themselves. With v the identity, the output is the weights (bf16 that trains on a CPU: its float32 formula;
    float32: SDPA); the oracle, softmax(q kᵀ/√d) in float64."""
    B, H, T = 2, 2, 16
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(B, H, T, T, generator=g).to(dtype).requires_grad_() for _ in range(2))
    v = torch.eye(T, dtype=dtype).repeat(B, H, 1, 1)
    w = torch.softmax(q.double() @ k.double().transpose(-1, -2) * T ** -0.5, -1)
    # bf16: the float32 weights rounded once to bf16 (2^-8 relative); float32: sums of T terms (tol's gamma)
    rtol = 2 ** -8 + 1e-5 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(attend(q, k, v, None, 0.0).double(), w, rtol=rtol, atol=1e-7)
    torch.manual_seed(0)
    out = attend(q, k, v, None, 0.5).double()
    kept = out != 0
    assert abs(kept.double().mean().item() - 0.5) < 0.08  # 1,024 weights: binomial, sd 0.016 (5 sd)
    torch.testing.assert_close(out[kept], 2 * w[kept], rtol=rtol, atol=1e-7)

def test_rope_under_bf16_autocast_gives_bf16_as_transformers_does():
    """Under bf16 autocast q and k are bf16 and the tables float32: the rotated q is bf16, within rounding of
    transformers' ModernBERT's, which turns in float32 and rounds once. Ours rounds the two products and their sum:
    with u = 2^-8, bf16's unit roundoff, u (|x cos| + |rot(x) sin|) for the products and u |sum| for each
    rounding of the sum, 3 u (|x cos| + |rot(x) sin|) apart at most."""
    from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb
    N, H, dh = 12, 2, 8
    cos, sin = rope_tables(torch.arange(N), dh, 10_000.0)  # float32, (N, 1, dh)
    x = torch.randn(N, H, dh, generator=torch.Generator().manual_seed(0)).bfloat16()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        ours = rotate(x, cos, sin)
        theirs, _ = apply_rotary_pos_emb(x.transpose(0, 1)[None], x.transpose(0, 1)[None], cos[None, :, 0],
                                         sin[None, :, 0])
    assert ours.dtype == torch.bfloat16 and theirs.dtype == torch.bfloat16
    theirs = theirs[0].transpose(0, 1)
    x1, x2 = x.double().chunk(2, -1)
    scale = (x.double() * cos.double()).abs() + (torch.cat([-x2, x1], -1) * sin.double()).abs()
    assert ((ours.double() - theirs.double()).abs() <= 3 * 2 ** -8 * scale).all()

def test_the_fused_loss_under_float16_autocast_runs_in_float16():
    """Under float16 autocast the decoder's product runs in float16, as autocast makes it, not in bf16. The inputs
    are multiples of 1/8 in [-1, 1] and d = 16, so every logit is a multiple of 1/64 below 17: exact in float16
    (11 significant bits) and in float32's sums, not in bf16 (8 bits, steps of 1/16 above 8). The oracle: the same
    logits in float64 and their cross-entropy; ours differs by float32's softmax (a few units of 2^-24 on a loss of
    a few), its gradient by the float16 rounding of the softmax and of the product (2^-11 each, relative)."""
    g = torch.Generator().manual_seed(0)
    R, d, V, n = 64, 16, 40, 50
    grid = lambda *s: torch.randint(-8, 9, s, generator=g).float() / 8
    x, w, b = grid(R, d).requires_grad_(), grid(V, d).requires_grad_(), grid(V).requires_grad_()
    y = torch.randint(0, V, (R,), generator=g)
    y[n:] = -100  # the padding
    z = x.double() @ w.double().t() + b.double()
    assert (z * 64 == (z * 64).round()).all() and z.abs().max() < 17
    x64 = x.detach().double().requires_grad_()
    want = F.cross_entropy((x64 @ w.double().t() + b.double())[:n], y[:n])
    want_dx, = torch.autograd.grad(want, x64)
    with torch.autocast('cpu', dtype=torch.float16):
        got = decoded_loss(x, w, b, y, n)
    got_dx, = torch.autograd.grad(got, x)
    assert abs(got.item() - want.item()) < 1e-5 * want.item()
    p = torch.softmax(z[:n], 1) - F.one_hot(y[:n], V)  # n times the logits' gradient
    bound = 2 ** -11 * ((p.abs() @ w.double().abs()) / n + want_dx[:n].abs())
    assert ((got_dx[:n].double() - want_dx[:n]).abs() <= bound + 1e-12).all() and not got_dx[n:].any()

# ---------------------------------------------------------------------------------------------- runs and files

TINY = ['--max-len', '32', '--batch-size', '8', '--d-model', '32', '--layers', '1', '--heads', '2', '--d-ff', '64',
        '--lr', '3e-3', '--evals', '2', '--quiet']

@pytest.mark.parametrize('then', ['removed', 'changed'])
def test_an_init_run_resumes_from_its_own_checkpoint(corpus, tmp_path, then):
    """--init is read when a run starts; resumed, the run reads its own checkpoint: the --init directory removed or
    replaced since changes nothing. Oracle: the same run uninterrupted, weight for weight."""
    from bert_nb.command import main
    data = tmp_path / 'data'
    assert main(['prepare', '--corpus', str(corpus), '--out', str(data), '--vocab-size', '300']) == 0
    for seed in (0, 1):
        assert main(['train', '--data', str(data), '--steps', '2', '--seed', str(seed), '--out',
                     str(tmp_path / f'base{seed}'), *TINY]) == 0
    shutil.copytree(tmp_path / 'base0' / 'model', tmp_path / 'init')
    run = ['train', '--data', str(data), '--steps', '4', '--init', str(tmp_path / 'init'), '--batch-size', '8',
           '--evals', '2', '--quiet']
    assert main(run + ['--out', str(tmp_path / 'whole')]) == 0
    assert main(run + ['--out', str(tmp_path / 'parts'), '--stop-at', '2']) == 0
    shutil.rmtree(tmp_path / 'init')
    if then == 'changed': shutil.copytree(tmp_path / 'base1' / 'model', tmp_path / 'init')
    assert main(['train', '--resume', str(tmp_path / 'parts'), '--quiet']) == 0
    a, b = (json.loads((tmp_path / d / 'metrics.json').read_text()) for d in ('whole', 'parts'))
    assert a['weight_digests'] == b['weight_digests']

def test_a_temporary_that_appears_first_is_never_overwritten(tmp_path, monkeypatch):
    """write_utf8 writes a temporary beside its target: a file already at that name (planted, or another writer's)
    is left as it was and the write is refused, not truncated and renamed over the target."""
    import bert_nb.files as files
    (tmp_path / 'a.txt').write_text('old')
    monkeypatch.setattr(files.os, 'urandom', lambda n: bytes(n))  # the temporary's name, known in advance
    planted = tmp_path / f'.a.txt.{bytes(4).hex()}.tmp'
    planted.write_text('not yours')
    with pytest.raises(FileExistsError): files.write_utf8(tmp_path / 'a.txt', 'new')
    assert planted.read_text() == 'not yours' and (tmp_path / 'a.txt').read_text() == 'old'

def test_the_fused_loss_names_a_label_past_the_table_and_a_count_that_is_not_ns():
    "A label >= V, or -100 among the n real rows, or a real label past them: refused by name, not torch's IndexError."
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(64, 8, generator=g), torch.randn(10, 8, generator=g), torch.zeros(10)
    y = torch.randint(0, 10, (64,), generator=g)
    y[40:] = -100
    assert decoded_loss(x, w, b, y, 40).item() > 0
    for bad, n, says in ((10, 40, r'y must be in \[0, 10\), got 10'), (-100, 40, r'y must be in \[0, 10\), got -100'),
                         (None, 0, 'y must be -100 past its first n=0 rows .* got 40 labels there'),
                         (None, 39, 'y must be -100 past its first n=39 rows .* got 1 labels there')):
        z = y.clone()
        if bad is not None: z[5] = bad
        with pytest.raises(ValueError, match=says): decoded_loss(x, w, b, z, n)

def test_every_path_taking_helper_takes_a_str(tmp_path, tok):
    "A str is a path, as open() and load_bert take it; a number or bytes is refused by name."
    from bert_nb.bert import save_tokenizer
    from bert_nb.files import read_json, read_safetensors, read_whole, write_safetensors, write_utf8
    from bert_nb.finetune import read_head, save_head
    at = lambda name: str(tmp_path / name)
    write_utf8(at('a.json'), '{"a": 1}')
    assert read_json(at('a.json')) == {'a': 1} and (tmp_path / 'a.json').read_text() == '{"a": 1}'
    write_safetensors(at('w.safetensors'), {'w': torch.arange(3.0)})
    assert torch.equal(read_safetensors(at('w.safetensors'))['w'], torch.arange(3.0))
    (tmp_path / 't').mkdir(); save_tokenizer(tok, at('t'), 32)
    assert WordPieceTokenizer.from_vocab(tmp_path / 't' / 'vocab.txt').tokens() == tok.tokens()
    assert read_whole(at('t'), lambda d: d) == tmp_path / 't'
    model = Classifier(shipped(), 2, rng=PCG32(0))
    save_head(model, at('h'), tok, ['no', 'yes'], 'BertForSequenceClassification')
    _, head, labels, _ = read_head(at('h'), 'classifier', True)
    assert labels == ['no', 'yes'] and torch.equal(head['weight'], model.classifier.weight.detach())
    for f, name in ((lambda: read_json(3), 'path'), (lambda: write_utf8(b'x', 'x'), 'path'),
                    (lambda: read_whole(None, lambda d: d), 'dir')):
        with pytest.raises(TypeError, match=f'{name} must be a path'): f()

def test_init_of_a_modernbert_whose_vocabulary_does_not_fit_is_refused(corpus, tmp_path, capsys):
    "A ModernBERT directory whose vocab.txt has 25 tokens for a word table of 64 rows: exit 2 by name, as BERT's."
    from bert_nb.command import main
    from bert_nb.wordpiece import SPECIALS
    d = save_modernbert(ModernBertForMLM(SMALL, PCG32(0)), tmp_path / 'm')
    (d / 'vocab.txt').write_text('\n'.join(list(SPECIALS) + list('abcdefghijklmnopqrst')) + '\n')
    assert main(['train', '--corpus', str(corpus), '--init', str(d), '--steps', '2', '--out', str(tmp_path / 'o'),
                 '--quiet']) == 2
    err = capsys.readouterr().err
    assert f'{d}: its vocabulary has 25 tokens but its word table 64 rows' in err and not (tmp_path / 'o').exists()

# ------------------------------------------------------------------- the page's JavaScript, in node (ports/js)

JS = Path(__file__).parents[1] / 'ports' / 'js'
node = pytest.mark.skipif(shutil.which('node') is None, reason='node is not installed')

def js(tmp_path: Path, body: str, data=None):
    """Run `body` in node as a module, with ports/js's exports imported and `data` (JSON) as DATA; what it assigns to
    `out` comes back through JSON (numbers as strings, so that NaN, the infinities and -0 survive)."""
    (tmp_path / 'data.json').write_text(json.dumps(data))
    imports = '\n'.join(f"import * as {m} from '{(JS / f'{m}.mjs').as_uri()}';" for m in ('bert', 'play', 'wordpiece'))
    code = f"""{imports}
import {{ readFileSync }} from 'node:fs';
const DATA = JSON.parse(readFileSync({json.dumps(str(tmp_path / 'data.json'))}, 'utf8'));
const str = (x) => typeof x === 'number' ? (Object.is(x, -0) ? '-0' : String(x)) : x;
let out;
try {{ {body} }} catch (e) {{ out = {{ error: e.message }}; }}
process.stdout.write(JSON.stringify(out, (k, v) => typeof v === 'number' ? str(v) : v));"""
    r = subprocess.run(['node', '--input-type=module', '-e', code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)

def safetensors_bytes(header: dict, data: bytes) -> bytes:
    h = json.dumps(header).encode()
    return len(h).to_bytes(8, 'little') + h + data

@node
def test_the_page_widens_float16_as_numpy_does(tmp_path):
    "Subnormals, ±0, ±inf, NaN and normal numbers of a float16 file: exactly NumPy's float16 → float64."
    from safetensors.numpy import save
    bits = np.array([0x0000, 0x8000, 0x0001, 0x0003, 0x03ff, 0x8001, 0x0400, 0x3c00, 0xc000, 0x7bff, 0x7c00, 0xfc00,
                     0x7e00, 0x3555], np.uint16)
    (tmp_path / 'h.safetensors').write_bytes(save({'h': bits.view(np.float16)}))
    got = js(tmp_path, f"out = Array.from(bert.readSafetensors(readFileSync('{tmp_path / 'h.safetensors'}')).h.data);")
    want = bits.view(np.float16).astype(np.float64)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = float(g)
        assert (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w)), (g, w)

@node
def test_the_page_widens_int8_rows_by_their_scale_as_numpy_does(tmp_path):
    """The snapshots' int8 rows (tools/kjv.py): each q times its row's float32 scale, rounded to float32 once, is
    NumPy's float32 product exactly; an int8 matrix without its scale, or with one of the wrong length, is refused."""
    from safetensors.numpy import save
    q = np.array([[-128, -1, 0, 1, 127], [5, -7, 100, -100, 3], [0, 0, 0, 0, 0]], np.int8)
    scale = np.array([0.1, 3.3e-3, 0.0], np.float32)  # 0.1 and 3.3e-3 round in float32: the product rounds again
    (tmp_path / 'q.safetensors').write_bytes(save({'w': q, 'w.scale': scale, 'b': np.ones(3, np.float32)}))
    got = js(tmp_path, f"const t = bert.readSafetensors(readFileSync('{tmp_path / 'q.safetensors'}')); "
                       "out = { names: Object.keys(t).sort(), w: Array.from(t.w.data), shape: t.w.shape };")
    assert got['names'] == ['b', 'w'] and [int(n) for n in got['shape']] == [3, 5]
    assert [float(v) for v in got['w']] == (q.astype(np.float32) * scale[:, None]).astype(np.float64).ravel().tolist()
    for bad in ({'w': q}, {'w': q, 'w.scale': scale[:2]}):
        (tmp_path / 'bad.safetensors').write_bytes(save(bad))
        got = js(tmp_path, f"out = bert.readSafetensors(readFileSync('{tmp_path / 'bad.safetensors'}'));")
        assert 'w is int8 without a float32 scale a row (w.scale)' in got['error'], got

@node
@pytest.mark.parametrize('case', ['past the data', 'longer than its shape', 'shorter than its shape'])
def test_the_page_refuses_the_offsets_the_safetensors_library_refuses(tmp_path, case):
    """A tensor ending past the data section (though inside the file, header included), or whose bytes are not
    exactly shape × 4: refused by the page with its own message, as the safetensors library refuses the bytes."""
    from safetensors.numpy import load
    offsets, data = {'past the data': ([0, 8], bytes(4)), 'longer than its shape': ([0, 12], bytes(12)),
                     'shorter than its shape': ([0, 4], bytes(4))}[case]
    raw = safetensors_bytes({'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': offsets}}, data)
    (tmp_path / 'w.safetensors').write_bytes(raw)
    with pytest.raises(Exception): load(raw)  # the oracle refuses these bytes
    got = js(tmp_path, f"out = bert.readSafetensors(readFileSync('{tmp_path / 'w.safetensors'}'));")
    assert got == {'error': 'w lies outside the file or does not fit its shape: the file is cut short or corrupt'}

SIZES = ['vocab_size', 'hidden_size', 'num_hidden_layers', 'num_attention_heads', 'intermediate_size',
         'max_position_embeddings', 'type_vocab_size']

@node
@pytest.mark.parametrize('key', SIZES)
def test_the_page_refuses_a_size_of_0_as_python_does(tmp_path, key):
    "A config.json with a size of 0: one message from the page; BertConfig refuses the same dict."
    from bert_nb.bert import BertConfig
    config = json.loads((KJV / 'config.json').read_text()) | {key: 0}
    with pytest.raises(ValueError, match='must be in \\[1, inf\\)'): BertConfig.from_hf(config)
    got = js(tmp_path, f"out = new bert.BertMLM(DATA, bert.readSafetensors(readFileSync('{KJV / 'model.safetensors'}')));",
             config)
    assert got == {'error': f'config.json: {key} must be a whole number >= 1'}

def load_js(m: str = 'm') -> str:
    "JavaScript that opens the shipped model as the page does, into `m`."
    return (f"const {m} = play.loadModel({{config: readFileSync('{KJV / 'config.json'}', 'utf8'), "
            f"vocab: readFileSync('{KJV / 'vocab.txt'}', 'utf8'), "
            f"safetensors: readFileSync('{KJV / 'model.safetensors'}')}});")

@node
def test_the_pages_fill_probabilities_are_fills_as_floats(tmp_path, tok):
    """fill sets the specials' probabilities to 0 after the softmax over the whole vocabulary, and does not share
    their mass out. The page computes in float64 from the file's float32 weights, so the oracle is fill of the same
    weights in float64: the two differ by float64's rounding (tests/tol's bound, 2 |Δz| p), under a tenth of the
    specials' share of p, which renormalising would add."""
    from bert_nb import BertForMLM
    from bert_nb.bert import special_ids
    from bert_nb.pretrain import fill
    from tol import encoder_tol
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = load_bert(KJV, BertForMLM).double().eval()
    texts = ['And God said, Let there be [MASK]: and there was light.', 'In the [MASK] God created the heaven.']
    got = js(tmp_path, load_js() + "out = DATA.map((ids) => play.fillIds(m, ids, 5));",
             [tok.encode(t)[1:-1] for t in texts])
    for text, page in zip(texts, got):
        ids = torch.tensor([tok.encode(text)])
        with torch.no_grad(): z = model(ids)[0][0][ids[0] == tok.mask_id][0]
        dz = encoder_tol(model.config, ids.shape[1], torch.float64, z.abs().max().item())
        specials = torch.softmax(z, 0)[special_ids(tok)].sum().item()
        (ours,) = fill(model, tok, text, 5)
        assert [w for w, _ in page[0]] == [w for w, _ in ours]
        for (_, p), (_, q) in zip(page[0], ours):
            assert abs(float(p) - q) <= 2 * dz * q < specials * q / 10, (p, q, dz, specials)

@node
def test_a_drawn_mask_of_a_text_with_specials_is_mlm_batchs(tmp_path, tok):
    "[UNK], [MASK] and [PAD] typed in a text are specials: never picked, as mlm_batch (its special_ids) leaves them."
    from bert_nb.bert import mlm_batch
    texts = ['And [UNK] said [MASK], let [PAD] there be light and there was light', '[PAD] [MASK] [UNK] amen']
    cases = [(t, seed, p) for t in texts for seed, p in ((0, 1.0), (7, 0.5), (3, 0.9))]
    got = js(tmp_path, load_js() + "out = DATA.map(([t, seed, p]) => play.drawMask(m, t, seed, p));", cases)
    for (text, seed, p), (inputs, labels) in zip(cases, got):
        b = mlm_batch(tok, [text], 32, p, PCG32(seed))
        assert [int(i) for i in inputs] == b['input_ids'][0].tolist()
        assert [int(l) for l in labels] == b['labels'][0].tolist()

@node
def test_a_crlf_vocabulary_gives_the_lf_ones_ids(tmp_path):
    "vocab.txt with CRLF line ends (as a Windows editor saves it): the LF file's ids, in the page and in Python."
    lines = (KJV / 'vocab.txt').read_text().splitlines()
    (tmp_path / 'crlf.txt').write_bytes(('\r\n'.join(lines) + '\r\n').encode())
    texts = ['And God said, Let there be light.', 'Amen. [MASK] the LORD']
    want = [WordPieceTokenizer.from_vocab(KJV / 'vocab.txt').encode(t) for t in texts]
    assert [WordPieceTokenizer.from_vocab(tmp_path / 'crlf.txt').encode(t) for t in texts] == want
    got = js(tmp_path, f"const wp = wordpiece.WordPiece.fromVocabText(readFileSync('{tmp_path / 'crlf.txt'}', 'utf8'));"
                       "out = DATA.map((t) => wp.encode(t));", texts)
    assert [[int(i) for i in ids] for ids in got] == want

@node
def test_the_page_strips_accents_after_lowercasing_as_python_does(tmp_path):
    """Capitals with accents or odd lower cases (İ, ẞ, ǅ, accented Greek and Cyrillic): the page's ids are
    WordPieceTokenizer.encode's, with a vocabulary that holds their pieces (the hard strings of test_port_wordpiece
    meet a vocabulary where most of them are [UNK]). Lower-casing a character at a time before or after NFD and
    the marks' removal gives the same text for every code point below U+30000 (tried one by one in node), so
    the order of the two is not what this pins down."""
    import unicodedata
    words = ['İstanbul', 'ẞtraße', 'ǅemal', 'Ώρα', 'Ἄνθρωπος', 'Ёлка', 'Йод', 'Ǻngel', 'Ȫ']
    both = set()
    for w in words:
        for s in (unicodedata.normalize('NFD', w.lower()), unicodedata.normalize('NFD', w).lower()):
            s = ''.join(c for c in s if unicodedata.category(c) != 'Mn')
            both |= set(s) | {s}
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + sorted(both) + [f'##{c}' for c in sorted(both) if len(c) == 1]
    (tmp_path / 'vocab.txt').write_text('\n'.join(vocab) + '\n')
    want = [WordPieceTokenizer.from_vocab(tmp_path / 'vocab.txt').encode(w) for w in words]
    assert sum(i == 1 for ids in want for i in ids) < len(words)  # the vocabulary holds their pieces: few [UNK]
    got = js(tmp_path, f"const wp = wordpiece.WordPiece.fromVocabText(readFileSync('{tmp_path / 'vocab.txt'}', 'utf8'));"
                       "out = DATA.map((t) => wp.encode(t));", words)
    assert [[int(i) for i in ids] for ids in got] == want

# ---------------------------------------------------- the public surfaces added since the last release (l30-l52)

def test_save_tokenizer_writes_what_transformers_slow_tokenizer_reads(tmp_path):
    """A cased vocabulary saved with save_tokenizer: transformers' BertTokenizer (vocab.txt and tokenizer_config.json,
    not our tokenizer.json) gives our ids and knows the model's length."""
    from transformers import BertTokenizer
    from bert_nb.bert import save_tokenizer
    from bert_nb.wordpiece import SPECIALS
    tokens = list(SPECIALS) + ['God', 'god', 'said', 'Said', 'let', 'Let', 'there', 'be', 'light', ',', '.']
    for lowercase in (False, True):
        tok, d = WordPieceTokenizer.from_tokens(tokens, lowercase=lowercase), tmp_path / f'lower{lowercase}'
        d.mkdir(); save_tokenizer(tok, d, 32)
        theirs = BertTokenizer.from_pretrained(str(d))
        text = 'God said, Let there be light. And god Said'
        assert theirs(text)['input_ids'] == tok.encode(text) and theirs.model_max_length == 32

def test_check_ids_returns_a_copy_and_check_type_refuses_none():
    "check_ids' result never shares memory with the caller's array; check_type(None) is refused like any wrong type."
    from bert_nb.checks import check_ids, check_token_ids, check_type
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = check_ids(a, 10)
    assert not np.shares_memory(a, b) and (b == a).all()
    with pytest.raises(TypeError, match='tok must be a WordPieceTokenizer, got NoneType'):
        check_type('tok', None, WordPieceTokenizer)
    for dt in (torch.uint8, torch.int8, torch.int16):  # what an embedding lookup cannot take: widened
        got = check_token_ids(torch.tensor([[1, 2, 3]], dtype=dt), 10)
        assert got.dtype == torch.int64 and got.tolist() == [[1, 2, 3]]

def test_read_json_is_strict_json(tmp_path):
    "NaN, Infinity and -Infinity are no JSON numbers (RFC 8259): refused, though Python's json takes them by default."
    from bert_nb.files import read_json
    for word in ('NaN', 'Infinity', '-Infinity'):
        (tmp_path / 'c.json').write_text(f'{{"lr": {word}}}')
        assert json.loads((tmp_path / 'c.json').read_text())['lr'] != 0  # the library's default: taken
        with pytest.raises(ValueError, match=f'is not valid JSON: {word} is not a JSON number'):
            read_json(tmp_path / 'c.json')

def test_tune_loops_last_batch_still_trains():
    """n = 10 in batches of 4: three steps an epoch, the last of 2 examples. The schedule (linear decay to 0 at the
    last step's end, written out: (steps - s) / (steps - warmup)) leaves the last step a learning rate of
    1/(steps - warmup) of the peak, so it moves the weights."""
    from bert_nb.finetune import tune_loop
    model = torch.nn.Linear(3, 1)
    x, seen = torch.randn(10, 3, generator=torch.Generator().manual_seed(0)), []
    def loss_of(idx):
        seen.append((len(idx), model.weight.detach().clone()))
        return model(x[idx]).pow(2).mean()
    losses = tune_loop(model, 10, loss_of, epochs=2, batch_size=4, lr=0.1, warmup=0.1, weight_decay=0.0, seed=0)
    assert len(losses) == 6 and [k for k, _ in seen] == [4, 4, 2] * 2
    assert not torch.equal(seen[-1][1], model.weight.detach())  # the last step changed the weights

def test_labelled_rows_pads_to_the_next_multiple_of_64_only():
    "0, 64 and 65 labelled positions: 0, 64 and 128 rows (ceil(n / 64) · 64), the padding pointing at row 0."
    from bert_nb.speed import labelled_rows
    for n, rows in ((0, 0), (1, 64), (64, 64), (65, 128)):
        labels = torch.full((2, 70), -100)
        labels.view(-1)[torch.arange(n) * 2] = 7
        at, k = labelled_rows(labels)
        assert k == n and len(at) == rows and at[:n].tolist() == (torch.arange(n) * 2).tolist() and not at[n:].any()

def test_write_safetensors_marks_its_file_as_pytorchs(tmp_path):
    "The 'format': 'pt' metadata transformers looks for, read back by the safetensors library itself."
    from safetensors import safe_open
    from bert_nb.files import write_safetensors
    write_safetensors(tmp_path / 'w.safetensors', {'w': torch.ones(2)})
    with safe_open(str(tmp_path / 'w.safetensors'), 'pt') as f: assert f.metadata() == {'format': 'pt'}

def test_a_saved_heads_labels_read_back_in_transformers_config(tmp_path, tok):
    "id2label and label2id of a saved classifier agree, label by label, as transformers' config reads them."
    from transformers import AutoConfig
    from bert_nb.finetune import save_head
    labels = ['law', 'prophets', 'writings']
    save_head(Classifier(shipped(), 3, rng=PCG32(0)), tmp_path / 'h', tok, labels, 'BertForSequenceClassification')
    c = AutoConfig.from_pretrained(str(tmp_path / 'h'))
    assert [c.id2label[i] for i in range(3)] == labels and [c.label2id[l] for l in labels] == [0, 1, 2]

# ------------------------------------------------------------------ three faults for every new surface (l58-l102)

def test_check_real_refuses_what_is_not_finite():
    "Finite, as its message says: inf is <= the default hi (inf) and NaN compares false, so each is refused by name."
    for x in (math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError, match='r must be a finite number in'): check_real('r', x)

def test_ids_and_labels_are_refused_where_pytorch_refuses_them():
    """A bool tensor is no batch of ids; a label below 0 other than -100 is one cross_entropy(ignore_index=-100)
    cannot take (its own error: the oracle that such a label is an error), and a bool is no label: each refused."""
    from bert_nb.checks import check_labels, check_token_ids
    with pytest.raises(ValueError, match='ids must be a 2-D integer tensor, got Tensor torch.bool'):
        check_token_ids(torch.ones(1, 3, dtype=torch.bool), 10)
    ref, bad = torch.zeros(1, 3, dtype=torch.long), torch.tensor([[-100, 2, -1]])
    with pytest.raises((IndexError, RuntimeError)):  # PyTorch's: target -1 is out of bounds
        F.cross_entropy(torch.zeros(3, 10), bad[0], ignore_index=-100)
    with pytest.raises(ValueError, match=r'labels must be -100 or in \[0, 10\), got -1'): check_labels(bad, ref, 10)
    with pytest.raises(ValueError, match='labels must be token ids or -100, got a bool tensor'):
        check_labels(torch.ones(1, 3, dtype=torch.bool), ref, 10)

def test_read_json_refuses_nesting_pythons_parser_cannot_follow(tmp_path):
    "A file nested deeper than Python's recursion limit: json.loads raises RecursionError; read_json names the file."
    from bert_nb.files import read_json
    (tmp_path / 'deep.json').write_text('[' * 200_000 + ']' * 200_000)
    with pytest.raises(RecursionError): json.loads((tmp_path / 'deep.json').read_text())
    with pytest.raises(ValueError, match='deep.json is not valid JSON: nested too deeply'): read_json(tmp_path / 'deep.json')

def test_write_utf8_refuses_a_lone_surrogate_and_leaves_no_file(tmp_path):
    "UTF-8 has no encoding of U+D800 (Python's own encoder refuses it): nothing is written, not even a temporary."
    from bert_nb.files import write_utf8
    with pytest.raises(UnicodeEncodeError): 'a\ud800'.encode('utf-8')
    with pytest.raises(UnicodeEncodeError): write_utf8(tmp_path / 'x.txt', 'a\ud800')
    assert list(tmp_path.iterdir()) == []

def test_safetensors_helpers_keep_every_dtype(tmp_path):
    "What write_safetensors writes, the safetensors library reads with its dtypes; what it wrote, read_safetensors reads so."
    from safetensors.torch import load_file, save_file
    from bert_nb.files import read_safetensors, write_safetensors
    t = {'b': torch.tensor([1.5, -2.25]).bfloat16(), 'h': torch.tensor([0.1, 3.0]).half(),
         'd': torch.tensor([0.1], dtype=torch.float64), 'i': torch.tensor([7, -8], dtype=torch.int32)}
    write_safetensors(tmp_path / 'ours.safetensors', t)
    save_file(t, str(tmp_path / 'theirs.safetensors'))
    for got in (load_file(str(tmp_path / 'ours.safetensors')), read_safetensors(tmp_path / 'theirs.safetensors')):
        assert {k: v.dtype for k, v in got.items()} == {k: v.dtype for k, v in t.items()}
        assert all(torch.equal(got[k], t[k]) for k in t)

def test_tune_loop_trains_a_model_given_in_eval_mode():
    "Dropout acts only in training mode (PyTorch's rule): a model handed over in eval mode is tuned in training mode."
    from bert_nb.finetune import tune_loop
    model, modes = torch.nn.Sequential(torch.nn.Dropout(0.5), torch.nn.Linear(3, 1)).eval(), []
    def loss_of(idx):
        modes.append(model.training)
        return model(torch.ones(len(idx), 3)).pow(2).mean()
    tune_loop(model, 4, loss_of, epochs=1, batch_size=2, lr=0.1, warmup=0.1, weight_decay=0.0, seed=0)
    assert modes == [True, True]

def test_a_transformers_4_config_keeps_its_rope_thetas():
    "transformers 4 wrote global_rope_theta and local_rope_theta, no rope_parameters: both are read, neither the default."
    d = hf_config(SMALL)
    for k in ('rope_parameters', 'layer_types'): d.pop(k)
    d |= dict(global_rope_theta=50_000.0, local_rope_theta=5_000.0, global_attn_every_n_layers=3)
    c = config_from_hf(d)
    assert (c.theta_global, c.theta_local) == (50_000.0, 5_000.0)

def test_an_encoders_weights_carry_transformers_modernbertmodels_names():
    "ModernBertModel's own state dict is the oracle: an encoder's names have no 'model.' in front."
    from transformers import ModernBertConfig as TheirConfig, ModernBertModel
    from bert_nb.modernbert import ModernBertEncoder
    from bert_nb.modernbert_files import hf_state_dict
    theirs = ModernBertModel(TheirConfig(**hf_config(SMALL)))
    assert sorted(hf_state_dict(ModernBertEncoder(SMALL))) == sorted(theirs.state_dict())

def test_load_modernbert_gives_a_model_in_eval_mode(tmp_path):
    "As transformers' from_pretrained does: no module left in training mode, so two calls give the same logits."
    from bert_nb.modernbert import ModernBertEncoder
    save_modernbert(ModernBertForMLM(replace(SMALL, dropout=0.5), PCG32(0)), tmp_path / 'm')
    for cls in (None, ModernBertEncoder):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            model = load_modernbert(tmp_path / 'm', cls)
        assert not any(m.training for m in model.modules())

def test_the_books_digest_is_of_their_content(tmp_path, monkeypatch):
    """The same books written another way (indented) are the books; Genesis 1 and 2 swapped (31 and 25 verses) keep
    every count and misplace the verses of both: refused. The oracle is the table itself, rewritten here."""
    import bert_nb.data as D
    books = json.loads(D.KJV_BOOKS.read_text())
    (tmp_path / 'indented.json').write_text(json.dumps(books, indent=2))
    monkeypatch.setattr(D, 'KJV_BOOKS', tmp_path / 'indented.json')
    verses = D.kjv_verses()
    assert len(verses) == 31_102 and (verses[30].chapter, verses[31].chapter, verses[31].verse) == (1, 2, 1)
    swapped = [[b, list(c)] for b, c in books]
    genesis = swapped[0][1]
    genesis[0], genesis[1] = genesis[1], genesis[0]  # 31 and 25 verses: the same total
    assert genesis[0] != genesis[1]
    (tmp_path / 'swapped.json').write_text(json.dumps(swapped))
    monkeypatch.setattr(D, 'KJV_BOOKS', tmp_path / 'swapped.json')
    with pytest.raises(ValueError, match='is not the table of books the package ships'): D.kjv_verses()
