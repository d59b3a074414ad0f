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

def test_worked_example():
    rng = Script([0.05, 0.50, 0.90, 0.10, 0.85], [9])
    inputs, labels = mlm_mask(EX_IDS, EX_SPECIAL, 4, 40, 0.15, rng)
    assert inputs.tolist() == [2, 4, 6, 9, 3, 0]
    assert labels.tolist() == [-100, 5, -100, 7, -100, -100]
    assert rng.u == [] and rng.b == []  # exactly five uniforms and one below

def test_kept_token_is_labelled():
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

def test_replay_4x32():
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

def test_rates():
    V, p, n = 30522, 0.15, 0
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
def test_errors(change, exc, msg):
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

def test_batch_masking_is_one_mlm_mask_call(tok):
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
