"Other shares, whole-word masking and the collator, against an op-order replay written from the chapter's definition."
import hashlib, math
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from bert_nb.bert import mlm_mask, BertConfig, BertForMLM, special_ids
from bert_nb.diagnostics import mask_shares, mask_chi2, word_mask_stats
from bert_nb.data import MLMCollator, mlm_loader, ForTrainer, batch_stream
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer
from pcg_ref import RefPCG
from test_masking import Plain, Script

def replay_words(ids, special, word_ids, mask_id, vocab, p, g, shares=(0.8, 0.1, 0.1)):
    "Whole-word masking as the chapter defines it, draw by draw, on the test's own generator."
    inputs, labels = np.array(ids, np.int64), np.full(np.shape(ids), -100, np.int64)
    rows = inputs.reshape(-1, inputs.shape[-1]) if inputs.ndim else inputs.reshape(1, 1)
    lab, ids2 = labels.reshape(rows.shape), np.asarray(ids).reshape(rows.shape)
    sp, wid = np.asarray(special).reshape(rows.shape), np.asarray(word_ids).reshape(rows.shape)
    for r in range(rows.shape[0]):
        words, prev = [], None   # runs of non-special positions with one word id
        for t in range(rows.shape[1]):
            if sp[r, t]: prev = None; continue
            if prev is None or wid[r, t] != prev: words.append([])
            words[-1].append(t); prev = wid[r, t]
        for w in words:
            if not g.uniform() < p: continue
            for t in w:
                lab[r, t] = ids2[r, t]
                u, total, a = g.uniform(), 0.0, 2
                for i, s in enumerate(shares):
                    total += s
                    if u < total: a = i; break
                if a == 0: rows[r, t] = mask_id
                elif a == 1: rows[r, t] = g.bounded(vocab)
    return inputs, labels

share_sets = st.sampled_from([(0.8, 0.1, 0.1), (0.85, 0.0, 0.15), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0),
                              (0.3, 0.3, 0.4)])

@settings(max_examples=120, deadline=None)
@given(st.integers(0, 4), st.integers(1, 60), st.sampled_from([5, 7, 1000, 30522, 2**31 + 1, 2**32]),
       st.floats(0, 1) | st.sampled_from([0.0, 0.15, 1.0]), share_sets, st.floats(0.05, 1), st.integers(0, 2**64 - 1),
       st.integers(0, 2**32 - 1))
def test_whole_words_replay(B, T, V, p, shares, new_word, seed, np_seed):
    g = np.random.default_rng(np_seed)
    ids, special = g.integers(0, min(V, 2**31), (B, T)), g.random((B, T)) < 0.2
    word_ids = np.cumsum(g.random((B, T)) < new_word, axis=1)
    rng, ref = PCG32(seed, 5), RefPCG(seed, 5)
    got = mlm_mask(ids, special, 4, V, p, rng, shares=shares, word_ids=word_ids)
    want = replay_words(ids, special, word_ids, 4, V, p, ref, shares)
    np.testing.assert_array_equal(got[0], want[0]); np.testing.assert_array_equal(got[1], want[1])
    assert rng.next_u32() == ref.random()  # the generator left where the op order leaves it

@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 80), st.sampled_from([7, 30522, 2**31 + 1]), st.floats(0, 1), share_sets,
       st.integers(0, 2**64 - 1))
def test_token_masking_with_other_shares_replays(B, T, V, p, shares, seed):
    g = np.random.default_rng(seed % 2**32)
    ids, special = g.integers(0, min(V, 2**31), (B, T)), g.random((B, T)) < 0.2
    every = np.arange(B * T).reshape(B, T)   # each position its own word: token masking
    rng, ref = PCG32(seed), RefPCG(seed)
    got = mlm_mask(ids, special, 4, V, p, rng, shares=shares)
    want = replay_words(ids, special, every, 4, V, p, ref, shares)
    np.testing.assert_array_equal(got[0], want[0]); np.testing.assert_array_equal(got[1], want[1])
    assert rng.next_u32() == ref.random()

def test_whole_word_worked_example():
    ids, special = np.array([2, 20, 21, 22, 6, 3]), np.array([1, 0, 0, 0, 0, 1], bool)
    rng = Script([0.05, 0.50, 0.85, 0.95, 0.30], [9])  # word 1: picked, then [MASK], random 9, kept; word 2: not
    inputs, labels = mlm_mask(ids, special, 4, 40, 0.15, rng, word_ids=[-1, 0, 0, 0, 1, -1])
    assert inputs.tolist() == [2, 4, 9, 22, 6, 3] and labels.tolist() == [-100, 20, 21, 22, -100, -100]
    assert rng.u == [] and rng.b == []
    rng = Script([0.05, 0.95, 0.2, 0.79, 0.20])        # shares 1/0/0: even u = 0.95 shows [MASK]
    inputs, labels = mlm_mask(ids, special, 4, 40, 0.15, rng, word_ids=[-1, 0, 0, 0, 1, -1], shares=(1, 0, 0))
    assert inputs.tolist() == [2, 4, 4, 4, 6, 3] and labels.tolist() == [-100, 20, 21, 22, -100, -100]

def test_rates_of_words_and_shares():
    x = np.array([[2] + [5 + PCG32(i).below(900) for i in range(62)] + [3]] * 8)
    sp = np.isin(x, [0, 1, 2, 3, 4]); wid = np.cumsum(PCG32(3).uniforms(x.size).reshape(x.shape) < 0.6, axis=1)
    for k, shares in enumerate([(0.8, 0.1, 0.1), (0.85, 0.0, 0.15), (0.5, 0.25, 0.25)]):
        s = word_mask_stats(x, sp, wid, 4, 1000, 0.2, PCG32(k), shares, n_batches=150)
        assert abs(s['picked_words'] / s['words'] - 0.2) < 4 * math.sqrt(0.2 * 0.8 / s['words'])
        assert mask_chi2(s) < -2 * math.log(1e-4), (shares, s['outcome'])
        np.testing.assert_allclose(mask_shares(1000, shares).sum(), 1)

def whole_words_both_ways(ids, special, word_ids, V, p, seed, shares=(0.8, 0.1, 0.1)):
    "The PCG32 path, the plain loop and the replay, all equal; the generator left where the op order leaves it."
    fast, slow, ref = PCG32(seed, 2), PCG32(seed, 2), RefPCG(seed, 2)
    a = mlm_mask(ids, special, 4, V, p, fast, shares=shares, word_ids=word_ids)
    b = mlm_mask(ids, special, 4, V, p, Plain(slow), shares=shares, word_ids=word_ids)
    want = replay_words(ids, special, word_ids, 4, V, p, ref, shares)
    for got in (a, b): np.testing.assert_array_equal(got[0], want[0]); np.testing.assert_array_equal(got[1], want[1])
    assert fast == slow and fast.next_u32() == ref.random()
    return a

def test_whole_words_at_the_exact_boundaries():
    "u == p does not pick the word; u == a share's cut takes the next action (as on the token path)."
    ids = np.array([[2, 20, 21, 22, 30, 31, 3], [2, 40, 41, 42, 43, 44, 3]]); special = np.isin(ids, [2, 3])
    words = np.array([[-1, 0, 0, 0, 1, 1, -1], [-1, 0, 1, 1, 1, 2, -1]])
    for seed in range(6):
        g = PCG32(seed, 2); first, second = g.next_u32() / 2**32, g.next_u32() / 2**32
        _, labels = whole_words_both_ways(ids, special, words, 500, first, seed)   # p == the first draw
        assert (labels[0, 1:4] == -100).all()                                      # word 0 not picked
        _, labels = whole_words_both_ways(ids, special, words, 500, (first * 2**32 + 0.5) / 2**32, seed)
        assert (labels[0, 1:4] == ids[0, 1:4]).all()                               # just above it: picked, whole
        for cut in ((second, 0.0, 1 - second), (0.0, second, 1 - second)):        # a cut == the first action draw
            shown, _ = whole_words_both_ways(ids, special, words, 500, 1.0, seed, shares=cut)
            assert shown[0, 1] == ids[0, 1]   # u == the cut: not [MASK] (nor a random id) but the next action, itself

def test_word_ids_need_not_increase():
    "A word is a run of one id: ids that go down or come back mark new words, as cumulative ids would."
    g = np.random.default_rng(1)
    ids = g.integers(5, 900, (3, 30)); special = np.zeros((3, 30), bool); special[:, [0, -1]] = True
    runs = np.cumsum(g.random((3, 30)) < 0.4, axis=1)
    for words in (runs, -runs, runs % 2, (runs * 7919) % 13):   # decreasing, alternating, shuffled labels
        assert ((words[:, 1:] != words[:, :-1]) == (runs[:, 1:] != runs[:, :-1])).all()  # the same runs
        for seed in range(3):
            a = whole_words_both_ways(ids, special, words, 900, 0.3, seed)
            b = mlm_mask(ids, special, 4, 900, 0.3, PCG32(seed, 2), word_ids=runs)
            np.testing.assert_array_equal(a[0], b[0]); np.testing.assert_array_equal(a[1], b[1])

@pytest.mark.parametrize('kw,exc,msg', [(dict(shares=(0.5, 0.5)), ValueError, 'shares must be 3 numbers'),
                                        (dict(shares=(0.9, 0.2, -0.1)), ValueError, 'shares must be'),
                                        (dict(shares='abc'), TypeError, 'shares must be 3 numbers'),
                                        (dict(word_ids=[0, 1]), ValueError, 'word_ids must have the shape'),
                                        (dict(word_ids=[0.5, 1, 2, 3]), ValueError, 'word_ids must be integers')])
def test_bad_shares_and_words(kw, exc, msg):
    with pytest.raises(exc, match=msg): mlm_mask([2, 5, 6, 3], [1, 0, 0, 1], 4, 40, .5, PCG32(0), **kw)

# ------------------------------------------------------------------------------------------------------ the collator

@pytest.fixture(scope='module')
def tok(minilm_dir): return WordPieceTokenizer.from_vocab(minilm_dir)

LINES = [f'verse {i}: and god saw the light, that it was good; unaffable tokenizers' for i in range(40)]

def test_collator_batches(tok):
    col = MLMCollator(tok, p=0.4, seed=3, whole_word=True)
    feats = [{'input_ids': tok.encode(t)} for t in LINES[:4]]
    b = col(feats)
    assert set(b) == {'input_ids', 'token_type_ids', 'attention_mask', 'labels'} and b['labels'].dtype == torch.int64
    keys = [','.join(map(str, f['input_ids'])) for f in feats]
    stream = int.from_bytes(hashlib.sha256('|'.join(keys).encode()).digest()[:8], 'little')  # as the chapter says
    assert batch_stream(keys) == stream
    ids = torch.full((4, b['input_ids'].shape[1]), tok.pad_id)
    for r, f in enumerate(feats): ids[r, :len(f['input_ids'])] = torch.tensor(f['input_ids'])
    pieces = np.array([t.startswith('##') for t in tok.tokens()])
    special = np.isin(ids.numpy(), [0, 100, 101, 102, 103])
    words = np.cumsum(~pieces[ids.numpy()] | special, axis=1)
    want = replay_words(ids.numpy(), special, words, tok.mask_id, len(tok), 0.4, RefPCG(3, stream))
    np.testing.assert_array_equal(b['input_ids'].numpy(), want[0]); np.testing.assert_array_equal(b['labels'].numpy(), want[1])
    assert torch.equal(b['attention_mask'].sum(1), torch.tensor([len(f['input_ids']) for f in feats]))
    with pytest.raises(ValueError, match='at least one example'): col([])
    with pytest.raises(ValueError, match='more than max_len=8'): MLMCollator(tok, max_len=8)(feats)
    with pytest.raises(ValueError, match="a dict with 'text' or 'input_ids'"): col([{'ids': [1, 2]}])
    with pytest.raises(ValueError, match="all of a batch alike"): col([feats[0], {'text': 'a cat'}, {'n': 1}])

def epochs(tok, **kw):
    dl = mlm_loader(LINES, MLMCollator(tok, seed=5, whole_word=True), batch_size=8, shuffle=True, seed=2, **kw)
    return [(b['input_ids'], b['labels']) for _ in range(2) for b in dl]

def test_data_loader_workers_give_the_same_batches(tok):
    one = epochs(tok, num_workers=0)
    for kw in (dict(num_workers=2), dict(num_workers=2, persistent_workers=True)):
        other = epochs(tok, **kw)
        assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(one, other)), kw
    streams = {tuple(b[1].flatten().tolist()) for b in one}
    assert len(streams) == len(one)  # no two batches masked alike, epoch 1 included

def test_trainer_trains_bert_for_mlm(tok, tmp_path):
    from transformers import Trainer, TrainingArguments
    import transformers; transformers.utils.logging.set_verbosity_error()
    model = BertForMLM(BertConfig(len(tok), max_len=32, d_model=32, n_heads=2, n_layers=1, d_ff=64), rng=PCG32(0))
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=20, per_device_train_batch_size=8, learning_rate=3e-3,
                             dataloader_num_workers=2, report_to=[], save_strategy='no', logging_steps=5,
                             remove_unused_columns=False, disable_tqdm=True, use_cpu=True, seed=0)
    trainer = Trainer(model=ForTrainer(model), args=args, train_dataset=LINES * 5,
                      data_collator=MLMCollator(tok, p=0.15, max_len=32))
    out = trainer.train()
    losses = [h['loss'] for h in trainer.state.log_history if 'loss' in h]
    assert out.global_step == 20 and all(math.isfinite(l) for l in losses) and losses[-1] < losses[0]

@pytest.mark.parametrize('n', [1, 2, 7, 100])
def test_whole_words_retry_a_short_block(n):
    "The first block of draws is too short (n draws): the path takes a longer one and still equals the loop."
    import bert_nb.bert as bert
    g = np.random.default_rng(n)
    ids, special = g.integers(0, 2**31, (3, 60)), g.random((3, 60)) < 0.1
    starts = bert._word_starts(np.cumsum(g.random((3, 60)) < 0.5, axis=1), special)
    for p in (0.15, 1.0):
        fast, slow = PCG32(n, 4), PCG32(n, 4)
        got = bert._mask_pcg_words(ids, special, 4, 2**31 + 1, p, fast, (0.8, 0.1, 0.1), starts, n=n)
        want = bert._mask_loop(ids, special, 4, 2**31 + 1, p, slow, (0.8, 0.1, 0.1), starts)  # the definition
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and fast == slow

def test_collator_options(tok):
    "Every option reaches the batch: p, seed, shares, max_len, pad_to_multiple_of, pairs, keys and given word ids."
    pairs = [('and god saw the light', 'that it was good'), ('unaffable tokenizers', 'in the beginning')]
    col = MLMCollator(tok, p=0.5, seed=9, shares=(0.5, 0.2, 0.3), max_len=12, pad_to_multiple_of=8)
    b = col([{'text': t, 'key': f'k{i}'} for i, t in enumerate(pairs)])
    encs = [tok.encode_batch([t], max_len=12)[0] for t in pairs]  # truncated to 12, longest first
    T = 16                                                          # 12 rounded up to a multiple of 8
    assert b['input_ids'].shape == (2, T) and all(len(e.ids) == 12 for e in encs)
    ids, types = np.full((2, T), tok.pad_id), np.zeros((2, T), np.int64)
    for r, e in enumerate(encs): ids[r, :12], types[r, :12] = e.ids, e.type_ids
    special = np.isin(ids, special_ids(tok))
    want = mlm_mask(ids, special, tok.mask_id, len(tok), 0.5, PCG32(9, batch_stream(['k0', 'k1'])), shares=(0.5, 0.2, 0.3))
    np.testing.assert_array_equal(b['input_ids'].numpy(), want[0]); np.testing.assert_array_equal(b['labels'].numpy(), want[1])
    np.testing.assert_array_equal(b['token_type_ids'].numpy(), types)
    assert types[:, :12].any() and b['attention_mask'].sum().item() == 24
    # whole words from the examples' own word ids (not from ##): one id over several tokens is one word
    feats = [{'input_ids': [101, 2000, 2001, 2002, 2003, 102], 'word_ids': [None, 0, 0, 0, 1, None]},
             {'input_ids': [101, 2004, 2005, 102], 'word_ids': [None, 7, 7, None]}]
    ww = MLMCollator(tok, p=0.5, seed=1, whole_word=True)(feats)
    ids = np.array([[101, 2000, 2001, 2002, 2003, 102], [101, 2004, 2005, 102, 0, 0]])
    words = np.array([[-1, 0, 0, 0, 1, -1], [-1, 7, 7, -1, -1, -1]])
    keys = [','.join(map(str, f['input_ids'])) for f in feats]
    want = replay_words(ids, np.isin(ids, special_ids(tok)), words, tok.mask_id, len(tok), 0.5, RefPCG(1, batch_stream(keys)))
    np.testing.assert_array_equal(ww['input_ids'].numpy(), want[0]); np.testing.assert_array_equal(ww['labels'].numpy(), want[1])
    picked = ww['labels'].numpy() != -100
    assert (picked[0, 1:4] == picked[0, 1]).all() and picked[1, 1] == picked[1, 2]  # whole words, all or nothing
    assert MLMCollator(tok, p=0.5, seed=2)(feats)['labels'].ne(ww['labels']).any()    # another seed, other masks
