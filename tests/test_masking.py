"mlm_mask, special_ids and mlm_batch against a replay of the op order on an independent PCG32."
import math
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from bert_nb.rng import PCG32
from bert_nb.bert import mlm_mask, special_ids, mlm_batch
from bert_nb.wordpiece import WordPieceTokenizer
from pcg_ref import RefPCG

def replay(ids, special, mask_id, vocab, p, g):
    "The op order as the issue states it, on the test's own generator."
    inputs, labels = np.array(ids, np.int64), np.full(np.shape(ids), -100, np.int64)
    for idx in np.ndindex(*np.shape(ids)):  # C order
        if special[idx]: continue
        if not g.uniform() < p: continue
        labels[idx] = ids[idx]
        u = g.uniform()
        if u < 0.8: inputs[idx] = mask_id
        elif u < 0.8 + 0.1: inputs[idx] = g.bounded(vocab)
    return inputs, labels

class Script:
    "Scripted draws; any draw beyond the script fails the test."
    def __init__(self, uniforms, belows=()): self.u, self.b = list(uniforms), list(belows)
    def uniform(self):
        if not self.u: raise AssertionError('an extra uniform() draw')
        return self.u.pop(0)
    def below(self, n):
        if not self.b: raise AssertionError(f'an extra below({n}) draw')
        return self.b.pop(0)

EX_IDS, EX_SPECIAL = np.array([2, 5, 6, 7, 3, 0]), np.array([True, False, False, False, True, True])

def test_hand_example_mlm_mask():
    rng = Script([0.05, 0.50, 0.90, 0.10, 0.85], [9])
    inputs, labels = mlm_mask(EX_IDS, EX_SPECIAL, 4, 40, 0.15, rng)
    assert inputs.tolist() == [2, 4, 6, 9, 3, 0]
    assert labels.tolist() == [-100, 5, -100, 7, -100, -100]
    assert rng.u == [] and rng.b == []  # exactly five uniforms and one below

def test_keep_action_still_predicts():
    inputs, labels = mlm_mask(EX_IDS, EX_SPECIAL, 4, 40, 0.15, Script([0.10, 0.95, 0.5, 0.5]))
    assert inputs.tolist() == EX_IDS.tolist()
    assert labels.tolist() == [-100, 5, -100, -100, -100, -100]

def test_random_can_be_mask_or_itself():
    inputs, labels = mlm_mask(EX_IDS, EX_SPECIAL, 4, 40, 0.15, Script([0.0, 0.85, 0.0, 0.85, 0.0, 0.8999], [4, 6, 7]))
    assert inputs.tolist() == [2, 4, 6, 7, 3, 0] and labels.tolist() == [-100, 5, 6, 7, -100, -100]

def test_boundaries_of_the_draws():
    # u == p is not picked; the action boundaries 0.8 and 0.9 belong to the next action
    inputs, labels = mlm_mask(EX_IDS, EX_SPECIAL, 4, 40, 0.15, Script([0.15, 0.0, 0.8, 0.0, 0.9], [11]))
    assert inputs.tolist() == [2, 5, 11, 7, 3, 0] and labels.tolist() == [-100, -100, 6, 7, -100, -100]

def check_replay(ids, special, mask_id, vocab, p, seed, stream=0):
    g, ref = PCG32(seed, stream), RefPCG(seed, stream)
    inputs, labels = mlm_mask(ids, special, mask_id, vocab, p, g)
    want_in, want_lab = replay(ids, special, mask_id, vocab, p, ref)
    np.testing.assert_array_equal(inputs, want_in)
    np.testing.assert_array_equal(labels, want_lab)
    assert g.next_u32() == ref.random()  # the stream is left exactly where the op order leaves it
    return inputs, labels

def bert_like(B, T, V, g):
    "[CLS] tokens [SEP] [PAD]... rows of random lengths, ids drawn from a NumPy generator."
    ids = np.zeros((B, T), np.int64)
    for b, n in enumerate(g.integers(2, T + 1, B)):
        ids[b, :n] = np.r_[2, g.integers(5, V, n - 2), 3]
    return ids, np.isin(ids, [0, 1, 2, 3, 4])

def test_mask_follows_the_op_order():
    ids, special = bert_like(4, 32, 1000, np.random.default_rng(0))
    inputs, labels = check_replay(ids, special, 4, 1000, 0.15, seed=42, stream=54)
    assert (labels != -100).any() and (inputs == 4).any()

@pytest.mark.parametrize('shape,V,p', [((64,), 30522, 0.15), ((3, 5, 7), 50, 0.5), ((2, 100), 7, 1.0), ((8, 16), 2**31 + 1, 0.3),
                                      ((5, 9), 6, 0.0), ((1, 1), 6, 1.0), ((0, 4), 10, 0.15), ((4, 64), 2**32, 0.2)])
def test_replay_shapes_vocabs_rates(shape, V, p):
    g = np.random.default_rng(1)
    ids = g.integers(0, V, shape)
    special = g.random(shape) < 0.2
    check_replay(ids, special, V // 2, V, p, seed=7)

def test_replay_all_special_and_vocab_one():
    check_replay(np.zeros((3, 4), np.int64), np.ones((3, 4), bool), 0, 1, 0.5, seed=3)
    check_replay(np.zeros((3, 4), np.int64), np.zeros((3, 4), bool), 0, 1, 0.5, seed=3)

def test_consecutive_batches_continue_the_stream():
    ids, special = bert_like(4, 16, 100, np.random.default_rng(5))
    g, ref = PCG32(9), RefPCG(9)
    for _ in range(3):
        got = mlm_mask(ids, special, 4, 100, 0.15, g)
        want = replay(ids, special, 4, 100, 0.15, ref)
        np.testing.assert_array_equal(got[0], want[0]); np.testing.assert_array_equal(got[1], want[1])

@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(1, 6), st.integers(0, 40), st.sampled_from([2, 3, 30522, 2**31 + 1]),
       st.floats(0, 1), st.integers(0, 2**32 - 1))
def test_replay_property(seed, B, T, V, p, np_seed):
    g = np.random.default_rng(np_seed)
    ids = g.integers(0, V, (B, T))
    check_replay(ids, g.random((B, T)) < 0.3, V - 1, V, p, seed)

def test_torch_in_torch_out_and_inputs_untouched():
    ids, special = bert_like(4, 32, 500, np.random.default_rng(2))
    t_ids, t_special = torch.tensor(ids, dtype=torch.int32), torch.tensor(special)
    keep_ids, keep_sp = t_ids.clone(), t_special.clone()
    inputs, labels = mlm_mask(t_ids, t_special, 4, 500, 0.5, PCG32(1))
    assert isinstance(inputs, torch.Tensor) and inputs.dtype == torch.int64 and labels.dtype == torch.int64
    assert torch.equal(t_ids, keep_ids) and torch.equal(t_special, keep_sp)
    n_ids, n_sp = ids.copy(), special.copy()
    a, b = mlm_mask(ids, special, 4, 500, 0.5, PCG32(1))
    assert np.array_equal(ids, n_ids) and np.array_equal(special, n_sp)
    assert np.array_equal(a, inputs.numpy()) and np.array_equal(b, labels.numpy())

def test_mask_rates():
    V, p = 30522, 0.15
    ids, special = bert_like(32, 128, V, np.random.default_rng(3))
    g, picked, elig, counts = PCG32(11), 0, 0, np.zeros(3)
    for _ in range(20):
        inputs, labels = mlm_mask(ids, special, 4, V, p, g)
        m = labels != -100
        assert not (m & special).any()
        picked += m.sum(); elig += (~special).sum()
        shown = inputs[m]
        counts += [(shown == 4).sum(), ((shown != 4) & (shown != ids[m])).sum(), (shown == ids[m]).sum()]
    assert abs(picked / elig - p) < 4 * math.sqrt(p * (1 - p) / elig)
    exp = np.array([0.8 + 0.1 / V, 0.1 * (V - 2) / V, 0.1 + 0.1 / V]) * counts.sum()
    chi2 = ((counts - exp) ** 2 / exp).sum()
    assert chi2 < -2 * math.log(1e-4), (counts, exp)

BAD = [
    (dict(ids=EX_IDS + 40), ValueError, 'ids must be in'), (dict(ids=EX_IDS - 3), ValueError, 'got -1'),
    (dict(ids=EX_IDS.astype(float)), ValueError, 'ids must be integers'), (dict(ids=EX_IDS.astype(bool)), ValueError, 'ids must be integers'),
    (dict(special_mask=EX_SPECIAL[:4]), ValueError, 'special_mask must have the shape'),
    (dict(special_mask=EX_SPECIAL.astype(float)), ValueError, 'special_mask must be bool'),
    (dict(p=1.5), ValueError, 'p must be in \\[0, 1\\], got 1.5'), (dict(p=-0.1), ValueError, 'p must'), (dict(p=float('nan')), ValueError, 'got nan'),
    (dict(p='0.1'), TypeError, 'p must be a number'),
    (dict(mask_id=40), ValueError, 'mask_id must be in \\[0, 40\\), got 40'), (dict(mask_id=-1), ValueError, 'mask_id'),
    (dict(vocab=0), ValueError, 'vocab must be in \\[1, '), (dict(vocab=2.5), TypeError, 'vocab must be an int'),
    (dict(rng=object()), TypeError, 'rng must have a uniform'), (dict(rng=np.random.default_rng(0)), TypeError, 'rng must have a below'),
]

@pytest.mark.parametrize('change,exc,msg', BAD)
def test_validation(change, exc, msg):
    args = dict(ids=EX_IDS, special_mask=EX_SPECIAL, mask_id=4, vocab=40, p=0.15, rng=PCG32(0)) | change
    before = [a.copy() for a in (EX_IDS, EX_SPECIAL)]
    with pytest.raises(exc, match=msg): mlm_mask(**args)
    assert all(np.array_equal(a, b) for a, b in zip((EX_IDS, EX_SPECIAL), before))

@pytest.fixture(scope='module')
def tok(minilm_dir): return WordPieceTokenizer.from_vocab(minilm_dir / 'vocab.txt')

def test_special_ids(tok):
    assert special_ids(tok) == [0, 100, 101, 102, 103]
    small = WordPieceTokenizer.train(['a b c'] * 5, 30)
    assert special_ids(small) == [0, 1, 2, 3, 4]

TEXTS = ['The cat sat on the mat.', ('Where did the cat sit?', 'On the mat, of course.'), 'Short.', 'Héllo wörld, 中文!']

def test_batch_p0_is_plain_tokenization(tok, minilm_dir):
    from transformers import BertTokenizerFast
    ref = BertTokenizerFast(str(minilm_dir / 'vocab.txt'))
    b = mlm_batch(tok, TEXTS, max_len=64, p=0.0, rng=PCG32(0))
    singles = [ref(t)['input_ids'] if isinstance(t, str) else ref(*t)['input_ids'] for t in TEXTS]
    types = [ref(t)['token_type_ids'] if isinstance(t, str) else ref(*t)['token_type_ids'] for t in TEXTS]
    T = max(map(len, singles))
    assert b['input_ids'].shape == (4, T) and all(v.dtype == np.int64 for v in b.values())
    assert set(b) == {'input_ids', 'token_type_ids', 'attention_mask', 'labels'}
    for row, (s, ty) in enumerate(zip(singles, types)):
        assert b['input_ids'][row].tolist() == s + [0] * (T - len(s))
        assert b['token_type_ids'][row].tolist() == ty + [0] * (T - len(s))
        assert b['attention_mask'][row].tolist() == [1] * len(s) + [0] * (T - len(s))
    assert (b['labels'] == -100).all()

def test_batch_pair_token_types(tok):
    b = mlm_batch(tok, [('a b', 'c d e')], max_len=64, p=0.0, rng=PCG32(0))
    assert b['token_type_ids'].tolist() == [[0, 0, 0, 0, 1, 1, 1, 1]]  # [CLS] a b [SEP] | c d e [SEP]

def test_batch_p1_labels_every_real_token(tok):
    b = mlm_batch(tok, TEXTS, max_len=64, p=1.0, rng=PCG32(4))
    plain = mlm_batch(tok, TEXTS, max_len=64, p=0.0, rng=PCG32(4))['input_ids']
    special = np.isin(plain, [0, 100, 101, 102, 103])
    assert (b['labels'][special] == -100).all()
    assert (b['labels'][~special] == plain[~special]).all()

def test_mlm_batch_from_text(tok):
    b = mlm_batch(tok, TEXTS, max_len=64, p=0.3, rng=PCG32(8, 2))
    plain = mlm_batch(tok, TEXTS, max_len=64, p=0.0, rng=PCG32(0))['input_ids']
    ref = RefPCG(8, 2)
    want_in, want_lab = replay(plain, np.isin(plain, [0, 100, 101, 102, 103]), 103, len(tok), 0.3, ref)
    assert (b['input_ids'] == want_in).all() and (b['labels'] == want_lab).all()

def test_batch_truncation(tok, minilm_dir):
    from transformers import BertTokenizerFast
    ref = BertTokenizerFast(str(minilm_dir / 'vocab.txt'))
    long = ' '.join(['word'] * 50)
    b = mlm_batch(tok, [long, 'short text', (long, 'the pair part')], max_len=16, p=0.0, rng=PCG32(0))
    assert b['input_ids'].shape == (3, 16)
    assert b['input_ids'][0, -1] == 102 and b['input_ids'][2, -1] == 102
    assert b['input_ids'][2].tolist() == ref(long, 'the pair part', truncation=True, max_length=16)['input_ids']
    assert b['input_ids'][1].tolist()[:4] == [101, 2460, 3793, 102]
    # T is the longest item when that is under max_len
    assert mlm_batch(tok, ['a b', 'c'], max_len=128, p=0.0, rng=PCG32(0))['input_ids'].shape == (2, 4)

@pytest.mark.parametrize('kw,exc', [(dict(texts=[]), ValueError), (dict(max_len=1), ValueError), (dict(texts=[('a', 'b')], max_len=2), ValueError),
                                    (dict(p=2.0), ValueError), (dict(p=float('nan')), ValueError), (dict(texts='a text'), TypeError), (dict(texts=[3]), TypeError)])
def test_batch_errors(tok, kw, exc):
    args = dict(texts=['a b c'], max_len=8, p=0.15, rng=PCG32(0)) | kw
    with pytest.raises(exc): mlm_batch(tok, **args)

# --- the NumPy fast path (rng is a PCG32) against the plain loop (any other rng), generator state included ---

class Plain:
    "A PCG32 behind another type: mlm_mask must take the plain loop for it."
    def __init__(self, g): self.g = g
    def uniform(self): return self.g.uniform()
    def below(self, n): return self.g.below(n)

def fast_vs_loop(ids, special, mask_id, V, p, seed, stream=0, **kw):
    fast, slow = PCG32(seed, stream), PCG32(seed, stream)
    a = mlm_mask(ids, special, mask_id, V, p, fast, **kw)
    b = mlm_mask(ids, special, mask_id, V, p, Plain(slow), **kw)
    np.testing.assert_array_equal(a[0], b[0]); np.testing.assert_array_equal(a[1], b[1])
    assert fast == slow  # the same generator state afterwards
    assert fast.next_u32() == slow.next_u32()

shapes = st.lists(st.integers(0, 9), min_size=1, max_size=3).map(tuple) | st.tuples(st.integers(1, 3), st.integers(100, 700))
vocabs = st.sampled_from([1, 2, 3, 7, 30522, 2**31 + 1, 2**32 - 1, 2**32]) | st.integers(1, 2**32)

@settings(max_examples=150, deadline=None)
@given(shapes, vocabs, st.floats(0, 1) | st.sampled_from([0.0, 0.15, 1.0, 2**-32, 1 - 2**-32]), st.floats(0, 1), st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1))
def test_fast_path_equals_loop(shape, V, p, special_rate, seed, np_seed):
    g = np.random.default_rng(np_seed)
    ids = g.integers(0, V, shape)
    fast_vs_loop(ids, g.random(shape) < special_rate, int(g.integers(0, V)), V, p, seed)

@settings(max_examples=40, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1), st.integers(0, 2**64 - 1))
def test_fast_path_follows_the_action_shares(x, y, seed):
    # any split of a picked position's draw (zero shares included) must agree with the loop
    lo, hi = sorted((x, y))
    shares = (lo, hi - lo, 1 - hi)
    ids, special = bert_like(3, 50, 1000, np.random.default_rng(seed % 2**32))
    fast_vs_loop(ids, special, 4, 1000, 0.5, seed, shares=shares)

def test_fast_path_long_rejection_runs():
    # V = 2**31 + 1: below() rejects almost half of all outputs, so blocks often run short and are retried
    g = np.random.default_rng(0)
    for seed in range(20):
        ids = g.integers(0, 2**31 + 1, (4, 64))
        fast_vs_loop(ids, np.zeros((4, 64), bool), 0, 2**31 + 1, 1.0, seed)

def test_fast_path_consecutive_batches():
    ids, special = bert_like(8, 128, 30522, np.random.default_rng(1))
    fast, slow = PCG32(5), PCG32(5)
    for _ in range(5):
        a, b = mlm_mask(ids, special, 103, 30522, 0.15, fast), mlm_mask(ids, special, 103, 30522, 0.15, Plain(slow))
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and fast == slow

@pytest.mark.parametrize('shape', [(0,), (0, 5), (3, 0), (2, 0, 4)])
def test_fast_path_empty(shape):
    fast_vs_loop(np.zeros(shape, np.int64), np.zeros(shape, bool), 1, 10, 0.5, 1)
    g = PCG32(1); before = g.copy()
    inputs, labels = mlm_mask(np.zeros(shape, np.int64), np.zeros(shape, bool), 1, 10, 0.5, g)
    assert inputs.shape == labels.shape == shape and g == before  # nothing drawn

def test_fast_path_all_special():
    ids, special = np.arange(12).reshape(3, 4), np.ones((3, 4), bool)
    g = PCG32(2); before = g.copy()
    inputs, labels = mlm_mask(ids, special, 1, 20, 1.0, g)
    assert (inputs == ids).all() and (labels == -100).all() and g == before

def test_a_pcg32_subclass_keeps_the_loop():
    # the fast path knows PCG32's stream; a subclass may change what uniform() returns, so it gets the loop
    class Loud(PCG32):
        def uniform(self): return 0.0
    ids, special = bert_like(2, 16, 100, np.random.default_rng(0))
    inputs, labels = mlm_mask(ids, special, 4, 100, 0.15, Loud(1))
    assert (labels[~special] == ids[~special]).all()  # uniform() == 0.0 picks every position and chooses [MASK]
    assert (inputs[~special] == 4).all()

def test_fast_path_boundary_u_equal_p():
    # p set to exactly the first output / 2**32: u == p is *not* picked (the op order picks u < p)
    for seed in range(5):
        g = PCG32(seed); p = g.next_u32() / 2**32
        ids, special = bert_like(2, 40, 500, np.random.default_rng(seed))
        special[:, :] = False
        fast_vs_loop(ids, special, 4, 500, p, seed)
        inputs, labels = mlm_mask(ids, special, 4, 500, p, PCG32(seed))
        assert labels.reshape(-1)[0] == -100
        above = (PCG32(seed).next_u32() + 0.5) / 2**32  # p just above the first output: picked
        fast_vs_loop(ids, special, 4, 500, above, seed)
        assert mlm_mask(ids, special, 4, 500, above, PCG32(seed))[1].reshape(-1)[0] != -100

def test_fast_path_boundary_action_cut():
    # the first cut set to exactly the second output: u == cut belongs to the next action
    for seed in range(5):
        g = PCG32(seed); g.next_u32(); c = g.next_u32() / 2**32
        shares = (c, (1 - c) / 2, 1 - c - (1 - c) / 2)
        ids, special = bert_like(2, 40, 500, np.random.default_rng(seed)); special[:, :] = False
        fast_vs_loop(ids, special, 4, 500, 1.0, seed, shares=shares)

@pytest.mark.parametrize('n', [1, 2, 7, 100])
def test_fast_path_retries_a_short_block(n):
    import bert_nb.bert as bert
    ids, special = bert_like(3, 60, 2**31 + 1, np.random.default_rng(n))
    for p in (0.15, 1.0):
        fast, slow = PCG32(n), PCG32(n)
        a = bert._mask_pcg(ids, special, 4, 2**31 + 1, p, fast, n=n)
        b = mlm_mask(ids, special, 4, 2**31 + 1, p, Plain(slow))
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and fast == slow

def test_a_pick_rate_figure_draws_the_rates_it_is_given():
    "A float tensor reaches the figure as its values (it once arrived as zeros, and the heatmap showed 0 everywhere)."
    from bert_nb.diagnostics import plot_pick_rate
    rate, special = torch.tensor([[0.0, 0.1, 0.25], [0.0, 0.2, 0.0]], dtype=torch.float64), torch.tensor([[1, 0, 0], [1, 0, 1]]).bool()
    fig = plot_pick_rate(rate, special, 0.15)
    drawn = fig.axes[0].images[0].get_array()
    assert drawn[0, 1] == 0.1 and drawn[0, 2] == 0.25 and drawn[1, 1] == 0.2 and drawn.mask[special.numpy()].all()
    assert fig.axes[1].lines[0].get_xdata().tolist() == [0.175, 0.2]   # each row's mean over its eligible positions
    with pytest.raises(ValueError, match='ids must be integers, got dtype torch.float32'):
        mlm_mask(torch.tensor([[2., 5.]]), torch.zeros(1, 2, dtype=torch.bool), 4, 40, .5, PCG32(0))
