"""What the code must do where random tests cannot reach or the end result hides it: exact boundaries, dropout where it
belongs, the training loop's own batches, its clipping and streams, the corpus split and packing, fill's answers."""
import json
import numpy as np
import pytest
import torch
import bert_nb.run as runs
from bert_nb.bert import BertAttention, BertConfig, BertEncoder, BertForMLM, mlm_mask, special_ids
from bert_nb.pretrain import (RunArgs, evaluate, pack_rows, split_lines, read_corpus, fill, DEFAULT_CORPUS,
                              _step, MLMLoss, make_optimizer)
from bert_nb.run import train
from bert_nb.command import main
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer
from pcg_ref import RefPCG
from tol import U32, gamma
from test_masking import replay

def at_state(state: int, stream: int = 0) -> PCG32:
    g = PCG32(0, stream); g.state = state
    return g

def test_below_accepts_exactly_from_the_threshold():
    "State 0 outputs 0: below(2**32) (threshold 0) takes it; below(2**32 - 1) (threshold 1) rejects it."
    assert at_state(0).next_u32() == 0
    g, h = at_state(0), at_state(0)
    h.next_u32()
    assert g.below(2**32) == 0 and g == h                 # one draw
    g, ref = at_state(0), RefPCG(0)
    ref.state, ref.inc = 0, 1
    assert g.below(2**32 - 1) == ref.bounded(2**32 - 1) != 0 and g.state == ref.state  # the 0 outputs: rejected
    for n in (3, 2**31 + 1, 2**32 - 1):
        assert PCG32(1).below(n) == RefPCG(1).bounded(n), n

def test_ids_must_be_below_vocab():
    with pytest.raises(ValueError, match=r'ids must be in \[0, vocab=40\), got 40 at index \(2,\)'):
        mlm_mask(np.array([2, 5, 40, 3]), np.array([1, 0, 0, 1], bool), 4, 40, .5, PCG32(0))
    mlm_mask(np.array([2, 5, 39, 3]), np.array([1, 0, 0, 1], bool), 4, 40, .5, PCG32(0))  # the largest id is fine

def test_attention_weights_drop_out_in_training():
    "BertAttention alone: in training, dropout on the attention weights changes the output; in eval it does not."
    torch.manual_seed(0)
    att = BertAttention(BertConfig(50, d_model=16, n_heads=4, d_ff=32, dropout=0.5))
    h = torch.randn(2, 6, 16)
    att.eval(); a, b = att(h), att(h)
    assert torch.equal(a, b)
    att.train(); c = att(h)
    assert (c - a).abs().max() > 1e-3

@pytest.mark.parametrize('padded', [False, True])
def test_the_encoder_drops_attention_weights_out_in_training(padded):
    "The encoder's own path (appendix 14: every position, or the real tokens only) drops attention weights out too."
    torch.manual_seed(0)
    cfg = BertConfig(50, max_len=8, d_model=16, n_heads=4, n_layers=1, d_ff=32, dropout=0.0, attn_dropout=0.5)
    enc, ids = BertEncoder(cfg), torch.randint(5, 50, (2, 6))
    mask = torch.ones_like(ids); mask[1, 4:] = 0 if padded else 1
    enc.eval(); a, b = enc(ids, attn_mask=mask), enc(ids, attn_mask=mask)
    enc.train(); c = enc(ids, attn_mask=mask)
    assert torch.equal(a, b) and (c - a)[mask.bool()].abs().max() > 1e-3  # the only dropout: on the weights

@pytest.fixture(scope='module')
def tok() -> WordPieceTokenizer:
    return WordPieceTokenizer.train(read_corpus([DEFAULT_CORPUS])[:300], 300)

def test_split_is_disjoint_and_covers_every_line():
    lines = [f'line {i}' for i in range(1000)]
    train_lines, held = split_lines(lines, seed=3)
    assert len(held) == 20 and sorted(train_lines + held) == sorted(lines) and not set(train_lines) & set(held)
    assert train_lines == [l for l in lines if l in set(train_lines)]  # each in corpus order

@pytest.mark.parametrize('n_lines', [1, 7, 40])
def test_packed_rows_hold_every_token_in_order(tok, n_lines):
    lines = read_corpus([DEFAULT_CORPUS])[:n_lines]
    rows, lens = pack_rows(tok, lines, max_len=16)
    body = [t for r, n in zip(rows, lens) for t in r[1:n - 1].tolist()]
    assert body == [t for l in lines for t in tok.encode(l)[1:-1]]
    assert (rows[:, 0] == tok.cls_id).all() and all(r[n - 1] == tok.sep_id for r, n in zip(rows, lens))
    assert all((r[n:] == tok.pad_id).all() for r, n in zip(rows, lens))

def test_fill_never_answers_a_special_token(tok):
    m = BertForMLM(BertConfig(len(tok), max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32), rng=PCG32(1)).eval()
    with torch.no_grad(): m.head.bias[special_ids(tok)] = 50.0  # the model would rather say [PAD], [UNK], ...
    top = fill(m, tok, 'and god said [MASK] there be light', top_k=5)[0]
    assert len(top) == 5 and not {w for w, _ in top} & {'[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'}

def test_the_training_loop_masks_its_batches_in_the_op_order(tok, tmp_path, monkeypatch):
    "Every batch train() builds: no special or padded position picked, and the op order on the rank's stream."
    seen, real = [], runs._masked
    def spy(ids, n, tok_, p, rng, device):
        out = real(ids, n, tok_, p, rng, device)
        if p == 0.4: seen.append(out[:3])
        return out
    monkeypatch.setattr(runs, '_masked', spy)
    (tmp_path / 'c.txt').write_text('\n'.join(read_corpus([DEFAULT_CORPUS])[:30]))  # ~40 rows: 6 batches of 8
    a = RunArgs(corpus=[str(tmp_path / 'c.txt')], vocab_size=300, max_len=24, batch_size=8, d_model=16, layers=1,
                heads=2, d_ff=32, mask_p=0.4, minutes=None, steps=6, evals=1, seed=5, out=str(tmp_path / 'run'))
    # ... cover a whole epoch, so the last row, the one with padding, is among them
    tok_ = WordPieceTokenizer.from_vocab(train(a, progress=False) / 'vocab.txt')
    assert len(seen) == 6
    ref = RefPCG(5, 0)  # rank 0 masks from stream 0
    for ids, inputs, labels in seen:
        special = np.isin(ids, special_ids(tok_))
        assert not ((labels != -100) & special).any()
        want = replay(ids, special, tok_.mask_id, len(tok_), 0.4, ref)
        assert np.array_equal(inputs, want[0]) and np.array_equal(labels, want[1])
    assert any((ids == tok_.pad_id).any() for ids, _, _ in seen)  # the padded row was among them, and never picked

def test_a_step_clips_the_gradient_norm(tok, monkeypatch):
    m = BertForMLM(BertConfig(len(tok), max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32), rng=PCG32(2))
    opt = make_optimizer(m, 1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    norms, real = [], opt.step
    def step(*a, **k):
        norms.append(torch.norm(torch.stack([p.grad.norm() for p in m.parameters() if p.grad is not None])).item())
        return real(*a, **k)
    monkeypatch.setattr(opt, 'step', step)
    class Big(torch.nn.Module):  # a loss a thousand times too large: its gradient norm is far above 1
        def __init__(self): super().__init__(); self.m = m
        def forward(self, *args): return 1000 * self.m.loss(*args)
    ids = torch.tensor([[2, 10, 11, 12, 3]]); labels = torch.tensor([[-100, 10, 11, 12, -100]])
    _step(Big(), opt, sched, (ids, None, None, labels))
    # clipped to norm 1: the norm is computed twice (a sum of n squares each time) and each entry scaled once
    n = sum(p.numel() for p in m.parameters())
    assert norms and norms[0] <= 1.0 + 2 * gamma(n) + U32

def test_resume_equals_uninterrupted_with_dropout(tmp_path):
    "Dropout draws from torch's generator: a resumed run restores it, and matches a run that was not stopped."
    (tmp_path / 'c.txt').write_text('\n'.join(read_corpus([DEFAULT_CORPUS])[:300]))
    args = ['--corpus', str(tmp_path / 'c.txt'), '--steps', '8', '--vocab-size', '300', '--max-len', '24', '--batch-size',
            '8', '--d-model', '16', '--layers', '1', '--heads', '2', '--d-ff', '32', '--dropout', '0.3', '--evals', '2',
            '--quiet']
    assert main(args + ['--out', str(tmp_path / 'whole')]) == 0
    vocab = ['--vocab', str(tmp_path / 'whole' / 'vocab.txt')]
    assert main(args + vocab + ['--out', str(tmp_path / 'w2')]) == 0
    assert main(args + vocab + ['--out', str(tmp_path / 'cut'), '--stop-at', '3']) == 0
    assert main(['--resume', str(tmp_path / 'cut'), '--quiet']) == 0
    digest = lambda d: json.loads((tmp_path / d / 'metrics.json').read_text())['weight_digests']
    assert digest('cut') == digest('w2')

def test_learning_rate_schedule():
    "Linear warmup from the first step (never 0), 1 at the end of warmup, linear decay to 0 at the last step."
    from bert_nb.pretrain import lr_factor
    assert [lr_factor(s, 10, 4) for s in range(10)] == [0.25, 0.5, 0.75, 1.0, 1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6]
    assert lr_factor(10, 10, 4) == 0.0 and lr_factor(0, 1, 1) == 1.0

@pytest.mark.parametrize('margin, learned', [(0.05, False), (0.16, True)])
def test_learned_means_15_points_above_always_guessing_the_commonest_token(corpus, tmp_path, monkeypatch, margin, learned):
    "A baseline `margin` under the run's final accuracy: 5 points above it is not learning, 16 points is."
    import warnings
    seen, evaluate = [], runs.evaluate
    def recording(*a, **kw):
        seen.append(evaluate(*a, **kw)); return seen[-1]
    monkeypatch.setattr(runs, 'evaluate', recording)
    monkeypatch.setattr(runs, 'frequency_baseline', lambda tok, rows: ('the', seen[-1]['acc'] - margin))
    a = RunArgs(corpus=[str(corpus)], vocab_size=300, batch_size=8, d_model=32, layers=1, heads=2, d_ff=64, steps=3,
                minutes=None, evals=1, out=str(tmp_path / 'run'))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter('always')
        train(a, progress=False)
    assert json.loads((tmp_path / 'run' / 'metrics.json').read_text())['learned'] is learned
    assert any('did not learn' in str(w.message) for w in said) is not learned

@pytest.mark.parametrize('training', [True, False])
def test_evaluate_leaves_the_model_as_it_found_it(tok, training):
    "evaluate switches dropout off for its own batches and gives the model back in the mode it came in."
    rows, lens = pack_rows(tok, read_corpus([DEFAULT_CORPUS])[:20], max_len=16)
    cfg = BertConfig(len(tok), max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.5)
    m = BertForMLM(cfg, rng=PCG32(2))
    m.train(training)
    a = evaluate(m, tok, rows, lens, seed=0)
    assert m.training == training and all(x.training == training for x in m.modules())
    assert evaluate(m, tok, rows, lens, seed=0) == a  # dropout off inside: the same figures twice

def test_evaluate_masks_at_0_15_from_the_eval_stream(tok):
    "The held-out blanks: mlm_mask at p = 0.15 on PCG32(seed, EVAL), 64 rows at a time, whatever the training rate."
    from bert_nb.pretrain import EVAL
    rows, lens = pack_rows(tok, read_corpus([DEFAULT_CORPUS])[:200], max_len=16)
    m = BertForMLM(BertConfig(len(tok), max_len=16, d_model=16, n_heads=2, n_layers=1, d_ff=32), rng=PCG32(2))
    g, n = PCG32(3, EVAL), 0
    for i in range(0, len(rows), 64):  # the oracle: the op order's own call, batch by batch
        ids = rows[i:i + 64]
        n += int((mlm_mask(ids, np.isin(ids, special_ids(tok)), tok.mask_id, len(tok), 0.15, g)[1] != -100).sum())
    assert evaluate(m, tok, rows, lens, seed=3)['n'] == n and len(rows) > 64
