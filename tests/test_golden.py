"""The golden vectors shipped in bert_nb/golden: Python still reproduces every one, and the JavaScript port
(ports/js/replay.mjs, written from the op order's definition) replays them bit for bit."""
import hashlib, importlib.resources, json, shutil, subprocess
from pathlib import Path
import numpy as np
import pytest
from bert_nb.bert import mlm_mask, mlm_batch, BertConfig, BertForMLM
from bert_nb.rng import PCG32, sample_categorical, normal_init
from bert_nb.wordpiece import WordPieceTokenizer

GOLDEN = json.loads((importlib.resources.files('bert_nb') / 'golden' / 'golden.json').read_text())
PORT = Path(__file__).parents[1] / 'ports' / 'js' / 'replay.mjs'

def gen(c) -> PCG32:
    g = PCG32(int(c.get('seed', 0)), int(c['stream']))
    if 'state' in c: g.state = int(c['state'])
    return g

def test_pcg32_and_its_draws():
    for c in GOLDEN['pcg32']: g = gen(c); assert [g.next_u32() for _ in c['outputs']] == c['outputs'], c
    for c in GOLDEN['uniform']: g = gen(c); assert [g.uniform() for _ in c['values']] == c['values']
    for c in GOLDEN['below']:
        g = gen(c)
        assert [g.below(c['n']) for _ in c['values']] == c['values'] and g.state == int(c['state_after']), c
    for c in GOLDEN['categorical']: assert sample_categorical(c['probs'], c['u']) == c['index'], c
    for c in GOLDEN['normal_init']:
        np.testing.assert_array_equal(normal_init(gen(c), c['shape'], c['std']).ravel(), np.float32(c['values']))

@pytest.mark.parametrize('i', range(len(GOLDEN['masking'])))
def test_masking(i):
    c = GOLDEN['masking'][i]
    shape, g = tuple(c['shape']), gen(c)
    w = np.array(c['word_ids'], np.int64).reshape(shape) if 'word_ids' in c else None
    inputs, labels = mlm_mask(np.array(c['ids'], np.int64).reshape(shape), np.array(c['special'], bool).reshape(shape),
                              c['mask_id'], c['vocab'], c['p'], g, shares=c['shares'], word_ids=w)
    assert inputs.ravel().tolist() == c['inputs'] and labels.ravel().tolist() == c['labels']
    assert g.state == int(c['state_after'])

def test_mlm_batch(minilm_dir):
    c = GOLDEN['mlm_batch'][0]
    tok = WordPieceTokenizer.from_vocab(minilm_dir)
    b = mlm_batch(tok, [tuple(t) if isinstance(t, list) else t for t in c['texts']], c['max_len'], c['p'], gen(c))
    for k in ('input_ids', 'token_type_ids', 'attention_mask', 'labels'): assert b[k].tolist() == c[k], k

def test_initial_weights():
    c = GOLDEN['init'][0]
    m = BertForMLM(BertConfig(**c['config']), rng=gen(c))
    got = {n: hashlib.sha256(p.detach().numpy().astype('<f4').tobytes()).hexdigest() for n, p in m.named_parameters()}
    assert got == c['sha256']

def test_initial_weights_replay_from_the_schema():
    "The schema's rule, followed by hand: the matrices in `order` from one stream, every other parameter 0 or 1."
    c = GOLDEN['init'][0]
    g, digest = gen(c), lambda a: hashlib.sha256(np.asarray(a, '<f4').tobytes()).hexdigest()
    for e in c['order']: assert digest(normal_init(g, tuple(e['shape']), 0.02)) == c['sha256'][e['name']], e['name']
    m = BertForMLM(BertConfig(**c['config']))
    drawn = {e['name'] for e in c['order']}
    for n, p in m.named_parameters():
        if n in drawn: continue
        fill = 1.0 if n.endswith('ln.weight') else 0.0  # LayerNorm weights; every bias
        assert digest(np.full(tuple(p.shape), fill)) == c['sha256'][n], n
    assert list(c['sha256']) == [n for n, _ in m.named_parameters()]

def test_rows_pin_whole_words():
    "One layout as 1-D, 2-D and 3-D: words split at every row end, so the three cases differ, each as Python has it."
    cases = GOLDEN['masking'][-3:]
    assert [c['shape'] for c in cases] == [[24], [4, 6], [2, 3, 4]] and len({str(c['ids']) for c in cases}) == 1
    assert len({tuple(c['labels']) for c in cases}) == 3

def run_port(port: Path):
    return subprocess.run(['node', str(port)], capture_output=True, text=True, timeout=120)

@pytest.mark.skipif(shutil.which('node') is None, reason='no node on PATH: the JavaScript port cannot run here')
def test_the_javascript_port_replays_every_vector():
    r = run_port(PORT)
    n = len(GOLDEN['pcg32']) + len(GOLDEN['uniform']) + len(GOLDEN['below']) + len(GOLDEN['categorical']) + \
        len(GOLDEN['masking']) + len(GOLDEN['mlm_batch'])
    assert r.returncode == 0 and r.stdout.strip().endswith(f'{n} passed, 0 failed'), r.stdout[-2000:]

@pytest.mark.skipif(shutil.which('node') is None, reason='no node on PATH: the JavaScript port cannot run here')
@pytest.mark.parametrize('change', [('if (special[i]) continue;', 'if (special[i]) { rng.uniform(); continue; }'),
                                    ('if (r >= threshold) return r % n;', 'if (r > threshold) return r % n;'),
                                    ('!wordIds || i % rowLength === 0 ||', '!wordIds ||')])  # words across rows
def test_one_draw_off_in_the_port_fails(tmp_path, change):
    "The check can fail: one draw more (or one output taken differently) and the port no longer replays."
    src = (PORT.parent / 'mask.mjs').read_text()  # the generator and the op order; replay.mjs imports them
    assert src.count(change[0]) == 1
    (tmp_path / 'mask.mjs').write_text(src.replace(change[0], change[1]))
    port = tmp_path / 'replay.mjs'
    port.write_text(PORT.read_text().replace("new URL('../../bert_nb/golden/golden.json', import.meta.url)",
                                             repr(str(PORT.parents[2] / 'bert_nb/golden/golden.json'))))
    r = run_port(port)
    assert r.returncode == 1 and 'MISMATCH' in r.stdout, r.stdout[-1000:]
