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
from bert_nb.electra import Electra, SHARES, electra_loss, hf_electra, plot_rtd, sample, train_electra

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

# ------------------------------------------------------------------------------------------------ bad input (#43)

def test_sample_refuses_a_row_with_no_distribution():
    logits = torch.zeros(3, 5); logits[1, 2] = float('nan')
    rng = PCG32(0); state = (rng.state, rng.inc)
    with pytest.raises(ValueError, match='logits row 1 has no distribution'): sample(logits, rng)  # answered a token
    with pytest.raises(ValueError, match='logits row 0'): sample(torch.full((1, 5), -float('inf')), rng)
    with pytest.raises(ValueError, match=r'logits must be a float \(n, V\) tensor'): sample(torch.zeros(5), rng)
    assert (rng.state, rng.inc) == state  # no draw was taken

@pytest.mark.parametrize('change, match', [
    (dict(lam=float('nan')), 'lam must be a finite number'), (dict(lam=-1.0), r'lam must be a finite number in \[0'),
    (dict(attn=torch.zeros(3, 8, dtype=torch.bool)), 'attn_mask row 0 has no real token'),   # the loss was NaN
    (dict(label_at_pad=True), 'labels has a label at a padded position'),
    (dict(attn=torch.ones(3, 7, dtype=torch.bool)), r'attn_mask must have the shape of inputs \(3, 8\)'),
    (dict(rng=np.random.default_rng(0)), 'rng must be a PCG32')])
def test_electra_loss_refuses_what_has_no_loss(change, match):
    m = Electra(SMALL, rng=PCG32(0))
    ids, inputs, labels, attn = batch(0)
    if change.get('label_at_pad'): labels = labels.clone(); labels[1, 6] = 9  # row 1 is padded from position 5
    rng = change.get('rng', PCG32(1))
    with pytest.raises((ValueError, TypeError), match=match):
        electra_loss(m, inputs, labels, change.get('attn', attn), rng, lam=change.get('lam', 50.0))

@pytest.fixture(scope='module')
def kjv_rows():
    tok = WordPieceTokenizer.from_vocab(KJV)
    return tok, pack_rows(tok, [v.text for v in kjv_verses()[:50]], 16)[0]

@pytest.mark.parametrize('kw, match', [
    (dict(rows=np.zeros((0, 16), np.int64)), r'rows must be \(N >= 1'),                  # never returned
    (dict(batch_size=0), r'batch_size must be in \[1'), (dict(steps=-1), r'steps must be in \[1'),
    (dict(small_tok=True), "tok has 6 tokens, the model's vocab is"), (dict(lr=float('inf')), 'lr must be a finite'),
    (dict(p=1.5), r'p must be in \[0, 1\]'), (dict(lam=-2.0), 'lam must be a finite'),
    (dict(rows=np.full((4, 16), 10**6)), 'ids must be in'), (dict(order=None), 'order must be a PCG32')])
def test_train_electra_refuses_bad_runs_before_a_step(kjv_rows, kw, match):
    tok, rows = kjv_rows
    m = Electra(replace(SMALL, vocab=len(tok)), rng=PCG32(0)); before = [p.detach().clone() for p in m.parameters()]
    rng = PCG32(2); state = (rng.state, rng.inc)
    if kw.pop('small_tok', False): tok = WordPieceTokenizer.from_tokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'a'])
    args = dict(rows=rows, steps=2, tok=tok, rng=rng, order=PCG32(3)) | kw
    with pytest.raises((ValueError, TypeError), match=match):
        train_electra(m, args.pop('rows'), args.pop('steps'), args.pop('tok'), args.pop('rng'), args.pop('order'), **args)
    assert (rng.state, rng.inc) == state and all(torch.equal(a, b.detach()) for a, b in zip(before, m.parameters()))

def test_the_pair_and_its_plot_check_their_arguments():
    with pytest.raises(ValueError, match=r'gen_layers must be in \[1'): Electra(SMALL, gen_layers=0)
    with pytest.raises(TypeError, match='config must be a BertConfig'): Electra({'vocab': 40})
    with pytest.raises(ValueError, match="curves must be a dict with"): plot_rtd({'gen_acc': [0.1]})
    with pytest.raises(TypeError, match='model must be a Electra'): hf_electra(object())

def test_what_the_pair_is_given_is_what_it_fits(kjv_rows):
    """#56: a stream that is no PCG32, a batch larger than the rows, a step's stats against labels of another shape, a
    head of another width or a missing layer given to hf_electra, and a head of no width are refused by name."""
    from bert_nb.electra import RTDHead, rtd_stats
    with pytest.raises(TypeError, match='rng must be a PCG32'): Electra(SMALL, rng=5)
    with pytest.raises(ValueError, match=r'd must be in \[1'): RTDHead(-1)
    tok, rows = kjv_rows
    m = Electra(replace(SMALL, vocab=len(tok)), rng=PCG32(0))
    with pytest.raises(ValueError, match=f'batch_size must be at most the {len(rows)} rows'):
        train_electra(m, rows, 2, tok, PCG32(1), PCG32(2), batch_size=len(rows) + 1)
    ids, inputs, labels, attn = batch()
    out = electra_loss(Electra(SMALL, rng=PCG32(0)), inputs, labels, attn, PCG32(1))
    with pytest.raises(ValueError, match="labels must be a tensor of the step's shape"): rtd_stats(out, labels[:, :4], attn)
    with pytest.raises(ValueError, match="attn_mask must be a tensor of the step's shape"): rtd_stats(out, labels, attn[:2])
    other = labels.clone(); other[0, 1] = 9 if other[0, 1] == -100 else -100
    with pytest.raises(ValueError, match='labels pick'): rtd_stats(out, other, attn)
    wide = Electra(SMALL, rng=PCG32(0)); wide.rtd = RTDHead(SMALL.d_model + 1)
    with pytest.raises(ValueError, match='does not fit its config'): hf_electra(wide)
    short = Electra(SMALL, rng=PCG32(0)); del short.disc.layers[-1]
    with pytest.raises(ValueError, match='does not fit its config'): hf_electra(short)
