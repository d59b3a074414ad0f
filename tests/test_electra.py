"""ELECTRA (#37): the sampling replayed by an independent PCG32 and a plain inverse CDF, the losses against float64
formulas, the labels against their definition, and the discriminator against transformers' own classes."""
from dataclasses import replace
import numpy as np
import pytest
import torch
from pcg_ref import RefPCG
from tol import encoder_tol
from bert_nb import BertConfig, PCG32, WordPieceTokenizer, KJV, kjv_verses, load_parts, mlm_mask, save_parts
from bert_nb.pretrain import pack_rows
from bert_nb.electra import Electra, SHARES, electra_loss, hf_electra, sample, train_electra

SMALL = BertConfig(40, max_len=16, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0)

def inverse_cdf(probs, u):
    "The smallest i with u < probs[0] + ... + probs[i], the sums taken left to right; the last index if none."
    total = 0.0
    for i, p in enumerate(probs):
        total += p
        if u < total: return i
    return len(probs) - 1

@pytest.mark.parametrize('seed', [0, 1, 2])
def test_sample_replays_one_uniform_a_row(seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(200, 30, generator=g) * 4
    probs = torch.softmax(logits.double(), -1).tolist()
    ref = RefPCG(seed, 5)
    want = [inverse_cdf(p, ref.uniform()) for p in probs]
    rng = PCG32(seed, 5)
    assert sample(logits, rng).tolist() == want
    assert rng.next_u32() == ref.random()  # the stream left after exactly one draw a row

def batch(seed=0, p=0.5):
    ids = np.array([[2, 7, 9, 11, 13, 8, 12, 3], [2, 5, 6, 7, 3, 0, 0, 0], [2, 30, 31, 32, 33, 34, 35, 3]])
    inputs, labels = mlm_mask(ids, ids < 5, 4, 40, p, PCG32(seed), shares=SHARES)
    return ids, torch.from_numpy(inputs), torch.from_numpy(labels), torch.from_numpy(ids != 0)

@pytest.mark.parametrize('seed', [0, 1, 2])
def test_loss_is_the_formula(seed):
    "MLM at the picked positions and RTD at every real token, in float64, on a pair in float64: the same sums."
    m = Electra(SMALL, rng=PCG32(seed)).double()
    ids, inputs, labels, attn = batch(seed)
    out = electra_loss(m, inputs, labels, attn, PCG32(seed, 9))
    picked = labels != -100
    gen = m.gen(inputs, None, attn)[0][picked]                     # the full logits, read at the picked rows
    mlm = -torch.log_softmax(gen, -1)[torch.arange(int(picked.sum())), labels[picked]].mean()
    z, y = out.logits[attn], out.replaced[attn].double()
    rtd = -(y * torch.log(torch.sigmoid(z)) + (1 - y) * torch.log(1 - torch.sigmoid(z))).mean()
    torch.testing.assert_close(out.mlm, mlm, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out.rtd, rtd, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out.loss, mlm + 50 * rtd, rtol=1e-12, atol=1e-12)

def test_the_discriminator_reads_the_originals_with_the_samples_in():
    "What D reads: the original token everywhere but the picked positions, which hold the generator's samples."
    m = Electra(SMALL, rng=PCG32(0))
    ids, inputs, labels, attn = batch(0)
    seen = {}
    m.disc.register_forward_pre_hook(lambda mod, args: seen.setdefault('ids', args[0].clone()))
    out = electra_loss(m, inputs, labels, attn, PCG32(3))
    picked = labels != -100
    samples = sample(out.gen_logits, PCG32(3))
    assert torch.equal(seen['ids'][~picked], torch.from_numpy(ids)[~picked])
    assert torch.equal(seen['ids'][picked], samples)
    assert torch.equal(out.replaced, seen['ids'] != torch.from_numpy(ids))  # replaced: differs from the original

def test_a_sample_equal_to_the_original_is_original():
    m = Electra(SMALL, rng=PCG32(0))
    with torch.no_grad(): m.gen.head.bias.fill_(-1e4)[7] = 1e4  # the generator always says 7
    ids = np.array([[2, 7, 7, 7, 9, 9, 9, 3]])
    inputs, labels = mlm_mask(ids, ids < 5, 4, 40, 0.9, PCG32(0), shares=SHARES)
    out = electra_loss(m, torch.from_numpy(inputs), torch.from_numpy(labels), torch.ones(1, 8, dtype=torch.bool),
                       PCG32(1))
    picked = torch.from_numpy(labels != -100)
    assert torch.equal(out.replaced, picked & torch.from_numpy(ids != 7))
    assert (picked & ~out.replaced).any() and out.replaced.any()

def test_no_gradient_through_the_sampling():
    "The RTD loss reaches the generator only through the shared tables, never through its layers or head."
    m = Electra(SMALL, rng=PCG32(0))
    _, inputs, labels, attn = batch(0)
    electra_loss(m, inputs, labels, attn, PCG32(1)).rtd.backward()
    assert all(p.grad is None for n, p in m.gen.named_parameters() if 'layers' in n or n.startswith('head'))
    assert m.gen.encoder.word_emb.weight.grad.abs().sum() > 0  # shared: D's loss trains it too

def test_the_pair_shares_its_tables_and_is_smaller():
    m = Electra(SMALL, gen_layers=1, gen_ff=16, rng=PCG32(0))
    for t in ('word_emb', 'pos_emb', 'type_emb'): assert getattr(m.disc, t) is getattr(m.gen.encoder, t)
    assert m.disc.emb_ln is not m.gen.encoder.emb_ln
    assert (m.gen.config.n_layers, m.gen.config.d_ff) == (1, 16)
    with pytest.raises(TypeError, match='config must be a BertConfig'): Electra({'vocab': 40})

def test_a_run_replays_and_a_seed_changes_it():
    tok = WordPieceTokenizer.from_vocab(KJV)
    rows, _ = pack_rows(tok, [v.text for v in kjv_verses()[:200]], 16)
    cfg = replace(SMALL, vocab=len(tok))
    def run(seed):
        m = Electra(cfg, rng=PCG32(seed))
        return train_electra(m, rows, 6, tok, PCG32(seed, 1), PCG32(seed, 2), batch_size=4), m
    (h1, m1), (h2, m2), (h3, _) = run(0), run(0), run(1)
    assert h1 == h2 and all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))
    assert h1['loss'] != h3['loss'] and len(h1['loss']) == 6

def test_transformers_reads_the_discriminator(tmp_path):
    "ElectraForPreTraining on hf_electra's weights, and BertModel on save_parts' disc/, in float64: the same sums."
    from transformers import BertModel, ElectraConfig, ElectraForPreTraining
    m = Electra(SMALL, rng=PCG32(4)).eval()
    with torch.no_grad():
        for p in m.parameters(): p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 0.1)
    save_parts(m, tmp_path / 'pair')
    back = load_parts(Electra(SMALL), tmp_path / 'pair').double().eval()
    config, sd = hf_electra(back)
    hf = ElectraForPreTraining(ElectraConfig(**{k: v for k, v in config.items() if k != 'model_type'}))
    hf.load_state_dict(sd)  # strict: every name in its place
    hf_bert = BertModel.from_pretrained(tmp_path / 'pair' / 'disc').double().eval()
    ids, _, _, attn = batch(0)
    x = torch.from_numpy(ids)
    with torch.no_grad():
        h = back.disc(x, None, attn)
        ours = back.rtd(h)
        theirs = hf.double().eval()(input_ids=x, attention_mask=attn.long()).logits
        theirs_h = hf_bert(input_ids=x, attention_mask=attn.long()).last_hidden_state
    head = replace(SMALL, n_layers=SMALL.n_layers + 1)  # the head's dense layer and logit: a chain under a layer's
    tol = lambda a: encoder_tol(head, x.shape[1], torch.float64, a.abs().max().item())
    torch.testing.assert_close(theirs[attn], ours[attn], rtol=0, atol=tol(ours[attn]))
    torch.testing.assert_close(theirs_h[attn], h[attn], rtol=0, atol=tol(h[attn]))
    assert config['architectures'] == ['ElectraForPreTraining'] and config['embedding_size'] == SMALL.d_model
