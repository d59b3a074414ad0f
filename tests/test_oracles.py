"""Where the newest code's faults hide (#36), each checked against an oracle written here from the definition, at the
size where a fault shows: the split and the vocabulary on the whole bundled corpus, each rank's rows, the epoch order
across epoch ends and batch sizes that do not divide the rows, and the order a resume continues."""
import numpy as np
import pytest
from bert_nb.data import TokenRows
from bert_nb.pretrain import Batches, DEFAULT_CORPUS, ORDER, SPLIT, read_corpus, split_lines
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer, train_vocab, word_counts
from pcg_ref import RefPCG

@pytest.fixture(scope='module')
def kjv() -> list[str]:
    return read_corpus([DEFAULT_CORPUS])

def fisher_yates(n: int, g: RefPCG) -> list[int]:
    "The definition: for i from n - 1 down to 1, swap i with a bounded draw below i + 1."
    idx = list(range(n))
    for i in range(n - 1, 0, -1):
        j = g.bounded(i + 1); idx[i], idx[j] = idx[j], idx[i]
    return idx

@pytest.mark.parametrize('seed', [0, 3])
def test_the_split_of_the_whole_corpus(kjv, seed):
    "2% of 31,102 verses held out (622), the first of a Fisher-Yates shuffle on the SPLIT stream, in corpus order."
    train, held = split_lines(kjv, seed)
    picked = sorted(fisher_yates(len(kjv), RefPCG(seed, SPLIT))[:round(0.02 * len(kjv))])
    assert len(held) == 622 and held == [kjv[i] for i in picked]
    out = set(picked)
    assert train == [l for i, l in enumerate(kjv) if i not in out]

def test_the_vocabulary_is_trained_on_the_training_lines_alone(kjv, tmp_path):
    "prepare's vocabulary, on the whole corpus: the trainer run on the training lines by the oracle split, not all."
    from bert_nb.data import prepare_data
    d = prepare_data([DEFAULT_CORPUS], tmp_path / 'd', vocab_size=2000, say=lambda *_: None)
    held = set(sorted(fisher_yates(len(kjv), RefPCG(0, SPLIT))[:622]))
    train_lines = [l for i, l in enumerate(kjv) if i not in held]
    want = train_vocab(word_counts(train_lines), 2000)
    assert WordPieceTokenizer.from_vocab(d).tokens() == want
    assert want != train_vocab(word_counts(kjv), 2000)  # at this size the held-out lines would change it

@pytest.mark.parametrize('world', [2, 3])
def test_each_rank_takes_every_world_th_row(world):
    "Ranks' rows: disjoint, together every row once, rank r's the rows r, r + world, ... (an odd count of rows)."
    tok = WordPieceTokenizer.from_tokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(20)])
    stream = np.arange(5, 5 + 20).repeat(50)[:997]  # 997 tokens: 34 rows of 30, the last short
    rows = TokenRows(stream, 32, tok)
    every = {tuple(r) for r in rows.take(np.arange(len(rows)))[0].tolist()}
    shards = [rows.subset(slice(rank, None, world)) for rank in range(world)]
    for rank, s in enumerate(shards):
        want = rows.take(np.arange(rank, len(rows), world))[0]
        assert np.array_equal(s.take(np.arange(len(s)))[0], want)
    assert sum(len(s) for s in shards) == len(rows) == 34 and len(every) > 1

@pytest.mark.parametrize('n,b', [(10, 3), (7, 7), (5, 8), (100, 32)])
def test_the_epoch_order(n, b):
    "Batches: each epoch a Fisher-Yates permutation on the ORDER stream, its end filled from the next epoch."
    g, ref = PCG32(4, ORDER), RefPCG(4, ORDER)
    want = [i for _ in range(6) for i in fisher_yates(n, ref)]
    batches = Batches(n, b, g)
    got = [i for _ in range(len(want) // b) for i in batches.next().tolist()]
    assert got == want[:len(got)]
    for e in range(len(got) // n): assert sorted(got[e * n:(e + 1) * n]) == list(range(n))  # each row once an epoch

def test_a_resumed_order_continues_where_it_stopped():
    "state() after any number of batches, loaded into a fresh Batches: the same batches from there on."
    a = Batches(13, 5, PCG32(1, ORDER))
    for k in range(7):
        s = a.state()
        b = Batches(13, 5, PCG32(99, ORDER)); b.load(s)
        assert [b.next().tolist() for _ in range(4)] == [a.next().tolist() for _ in range(4)], k

@pytest.mark.parametrize('n,b,k', [(10, 3, 7), (5, 8, 4), (100, 32, 30), (9, 4, 1)])
def test_each_epoch_draws_its_shift_after_its_order(n, b, k):
    """Batches(n_shifts=k): each epoch its Fisher-Yates permutation, then its shift, a bounded draw below k (none for
    k = 1: shift 0), on the ORDER stream; `shifts` gives each row of a batch its own epoch's shift."""
    ref, order, shift = RefPCG(4, ORDER), [], []
    for _ in range(8):
        order += fisher_yates(n, ref)
        shift += [ref.bounded(k) if k > 1 else 0] * n
    batches, got, got_shifts = Batches(n, b, PCG32(4, ORDER), k), [], []
    while len(got) + b <= 6 * n:  # within the epochs replayed
        got += batches.next().tolist(); got_shifts += batches.shifts.tolist()
    assert got == order[:len(got)] and got_shifts == shift[:len(got)]
    assert len(got) >= 2 * n and (k == 1 or len(set(got_shifts)) > 1)  # epochs apart, shifts apart

def test_a_resumed_order_continues_with_its_shifts():
    "state() then load(): the same batches and the same shifts from there on, a shift an epoch as before."
    a = Batches(13, 5, PCG32(1, ORDER), 30)
    for k in range(9):
        s = a.state()
        b = Batches(13, 5, PCG32(99, ORDER), 30); b.load(s)
        for _ in range(4):
            assert b.next().tolist() == a.next().tolist() and b.shifts.tolist() == a.shifts.tolist(), k

def test_a_shifted_row_is_the_stream_from_its_row_start_plus_its_shift():
    "take(idx, shift): [CLS], the body's max_len - 2 tokens of the stream from idx * body + shift, [SEP]; one a row."
    tok = WordPieceTokenizer.from_tokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(995)])
    stream = 5 + np.arange(995)  # each token its place: a row says where it was cut
    rows, body = TokenRows(stream, 16, tok), 14
    idx, shift = np.array([0, 3, 70, 71]), np.array([13, 0, 5, 9])  # 72 rows: 70 ends early, 71 (one token) is empty
    ids, lens = rows.take(idx, shift)
    for r, (i, s) in enumerate(zip(idx.tolist(), shift.tolist())):
        want = stream[i * body + s:i * body + s + body].tolist()
        assert ids[r, :lens[r]].tolist() == [2] + want + [3] and (ids[r, lens[r]:] == 0).all(), (i, s)
    assert lens.tolist() == [16, 16, 2 + 995 - 70 * 14 - 5, 2] and np.array_equal(rows.take(idx, 5)[0][2], ids[2])

def test_the_mask_rate_statistics_are_the_counts_of_the_masks(tmp_path):
    """What the mask-rate figures draw, counted here from mlm_mask's own output on the same stream: the picked share
    per batch, the three outcomes, the pick rate per position; and the exact shares from the definition."""
    from bert_nb.bert import mlm_mask
    from bert_nb.diagnostics import mask_stats
    ids = np.array([[2] + list(range(5, 45)) + [3, 0, 0], [2] + list(range(45, 50)) * 8 + [3, 0, 0]])
    sp, V, p, n = np.isin(ids, [0, 2, 3]), 100, 0.3, 60
    s = mask_stats(ids, sp, 4, V, p, PCG32(5), n_batches=n)
    g, share, outcome, per = PCG32(5), [], np.zeros(3, np.int64), np.zeros(ids.shape)
    for _ in range(n):
        shown, lab = mlm_mask(ids, sp, 4, V, p, g)
        L = lab != -100
        share.append(L.sum() / (~sp).sum()); per += L
        outcome += [(shown[L] == 4).sum(), ((shown[L] != 4) & (shown[L] != ids[L])).sum(), (shown[L] == ids[L]).sum()]
    assert np.allclose(s['picked_share'], share) and (s['outcome'] == outcome).all()
    assert np.allclose(s['pick_rate'], per / n) and s['eligible'] == (~sp).sum() == 80
    # a random id is drawn from all V: 1 in V of them is [MASK], 1 in V the token itself
    assert np.allclose(s['expected'], [0.8 + 0.1 / V, 0.1 * (V - 2) / V, 0.1 + 0.1 / V])
