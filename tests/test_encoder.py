"The encoder against float64 NumPy formulas written here (math.erf GELU, LayerNorm eps 1e-12, softmax over real keys)."
import math
import numpy as np
import pytest
import torch
from bert_nb.bert import BertAttention, BertConfig, BertLayer, BertEncoder, BertForMLM
from bert_nb.rng import PCG32
from pcg_ref import RefPCG
from tol import encoder_tol, loss_tol

CFG = BertConfig(vocab=61, max_len=24, d_model=24, n_heads=3, n_layers=2, d_ff=40, type_vocab=2, dropout=0.0)

def np_params(module):
    return {n: p.detach().double().numpy() for n, p in module.named_parameters()}

gelu = np.vectorize(lambda u: 0.5 * u * (1 + math.erf(u / math.sqrt(2))))
def ln(x, w, b): return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12) * w + b
def lin(x, P, n): return x @ P[n + '.weight'].T + P[n + '.bias']

def np_layer(P, pre, h, real, H):
    "One post-LN BERT layer; padded keys removed from every softmax."
    B, T, C = h.shape; hs = C // H
    out = np.zeros_like(h)
    for b in range(B):
        keys = np.flatnonzero(real[b])
        heads = []
        for i in range(H):
            sl = slice(i * hs, (i + 1) * hs)
            q, k, v = (lin(h[b], P, f'{pre}attn.{n}')[:, sl] for n in 'qkv')
            s = q @ k[keys].T / math.sqrt(hs)
            w = np.exp(s - s.max(1, keepdims=True)); w /= w.sum(1, keepdims=True)
            heads.append(w @ v[keys])
        a = ln(h[b] + lin(np.concatenate(heads, 1), P, f'{pre}attn.o'), P[f'{pre}attn_ln.weight'], P[f'{pre}attn_ln.bias'])
        out[b] = ln(a + lin(gelu(lin(a, P, f'{pre}ff_in')), P, f'{pre}ff_out'), P[f'{pre}ff_ln.weight'], P[f'{pre}ff_ln.bias'])
    return out

def np_encoder(P, ids, types, real, cfg, pre='encoder.'):
    T = ids.shape[1]
    h = ln(P[pre + 'word_emb.weight'][ids] + P[pre + 'pos_emb.weight'][:T] + P[pre + 'type_emb.weight'][types], P[pre + 'emb_ln.weight'], P[pre + 'emb_ln.bias'])
    for i in range(cfg.n_layers): h = np_layer(P, f'{pre}layers.{i}.', h, real, cfg.n_heads)
    return h

def np_logits(P, h):
    return ln(gelu(lin(h, P, 'head.dense')), P['head.ln.weight'], P['head.ln.bias']) @ P['encoder.word_emb.weight'].T + P['head.bias']

def random_model(cfg=CFG, seed=0, std=0.3):
    "Every parameter random (biases and the decoder bias too), float64, eval mode."
    torch.manual_seed(seed)
    m = BertForMLM(cfg).double().eval()
    with torch.no_grad():
        for p in m.parameters(): p.normal_(0, std)
    return m

def padded_batch(B=3, T=11, V=61, seed=1):
    g = np.random.default_rng(seed)
    lens = [T, T - 4, 3][:B] + [T] * max(0, B - 3)
    ids = g.integers(5, V, (B, T)); types = np.zeros((B, T), np.int64); real = np.zeros((B, T), bool)
    for b, n in enumerate(lens):
        real[b, :n] = True; ids[b, n:] = 0; types[b, n // 2:n] = 1
    return torch.tensor(ids), torch.tensor(types), torch.tensor(real.astype(np.int64))

def test_layer_matches_the_formula():
    layer = BertLayer(CFG).double().eval()
    torch.manual_seed(3)
    with torch.no_grad():
        for p in layer.parameters(): p.normal_(0, 0.3)
    h = torch.randn(3, 9, 24, dtype=torch.float64)
    real = np.ones((3, 9), bool); real[1, 6:] = False; real[2, 2:] = False
    got = layer(h, torch.tensor(real)).detach().numpy()
    want = np_layer({'l.' + k: v for k, v in np_params(layer).items()}, 'l.', h.numpy(), real, CFG.n_heads)
    assert np.abs(got - want).max() < 1e-10
    with_bool = layer(h, torch.tensor(real)).detach().numpy()
    assert np.array_equal(got, with_bool)

@pytest.mark.parametrize('shape', [(3, 11), (1, 24), (4, 5)])
def test_model_against_formula(shape):
    m = random_model()
    ids, types, real = padded_batch(*shape)
    P = np_params(m)
    h = np_encoder(P, ids.numpy(), types.numpy(), real.numpy().astype(bool), CFG)
    got_h = m.encoder(ids, types, real).detach().numpy()
    r = real.numpy().astype(bool)
    assert np.abs(got_h - h)[r].max() < 1e-10
    assert (got_h[~r] == 0).all()  # padded positions are not computed: they hold zeros, as documented
    logits, _ = m(ids, types, real)
    assert np.abs(logits.detach().numpy() - np_logits(P, h))[r].max() < 1e-10
    with torch.no_grad(): assert torch.equal(m(ids, types, real)[0], logits)  # the in-place GELU path
    f = m.float()
    with torch.no_grad(): no_grad = f(ids, types, real)[0]
    assert torch.equal(no_grad, f(ids, types, real)[0].detach())

def test_padding_is_never_read():
    m = random_model().float()
    ids, types, real = padded_batch()
    h = m.encoder(ids, types, real)
    other = ids.clone(); other[real == 0] = 7
    other_types = types.clone(); other_types[real == 0] = 1
    h2 = m.encoder(other, other_types, real)
    assert torch.equal(h2, h)  # the real tokens' numbers take the same operations: not even rounding differs
    assert torch.isfinite(m.encoder(ids, types, torch.zeros_like(real))).all()

def test_reads_both_directions():
    m = random_model().float()
    ids = torch.tensor([[2, 10, 11, 12, 13, 3]])
    h = m.encoder(ids)
    last, first = ids.clone(), ids.clone(); last[0, 4] = 14; first[0, 1] = 14
    assert (m.encoder(last)[0, 0] - h[0, 0]).abs().max() > 1e-3   # the first position reads the last word
    assert (m.encoder(first)[0, 5] - h[0, 5]).abs().max() > 1e-3   # and the last reads the first

def test_token_types_are_added():
    m = random_model()
    ids = torch.tensor([[2, 10, 11, 3]])
    P = np_params(m)
    e = m.encoder.embed(ids, torch.tensor([[0, 0, 1, 1]]))[0].detach().numpy()
    want = ln(P['encoder.word_emb.weight'][[2, 10, 11, 3]] + P['encoder.pos_emb.weight'][:4] + P['encoder.type_emb.weight'][[0, 0, 1, 1]],
              P['encoder.emb_ln.weight'], P['encoder.emb_ln.bias'])
    assert np.abs(e - want).max() < 1e-12
    assert torch.equal(m.encoder(ids), m.encoder(ids, torch.zeros_like(ids)))
    assert (m.encoder(ids, torch.ones_like(ids)) - m.encoder(ids)).abs().max() > 1e-3

def test_loss_only_at_labelled_positions():
    m = random_model()
    ids, types, real = padded_batch()
    labels = torch.full_like(ids, -100); labels[0, 2] = 7; labels[1, 5] = 60; labels[2, 1] = 0
    logits, loss = m(ids, types, real, labels)
    x = logits.detach().numpy()
    want = np.mean([np.log(np.exp(x[b, t] - x[b, t].max()).sum()) + x[b, t].max() - x[b, t, y] for b, t, y in [(0, 2, 7), (1, 5, 60), (2, 1, 0)]])
    assert abs(loss.item() - want) < 1e-10
    assert abs(m.loss(ids, types, real, labels).item() - loss.item()) < 1e-10
    f = m.float()  # the two float32 paths (the labelled rows alone, all logits) within float32 rounding
    tol = loss_tol(CFG, ids.shape[1], torch.float32, np.abs(x).max())
    assert abs(f.loss(ids, types, real, labels).item() - f(ids, types, real, labels)[1].item()) <= tol
    none = torch.full_like(ids, -100)
    assert m(ids, types, real, none)[1].item() == 0.0 and m.loss(ids, types, real, none).item() == 0.0
    assert m(ids, types, real)[1] is None

def test_loss_gradients_match_forward():
    m = random_model()
    ids, types, real = padded_batch()
    labels = torch.where((torch.rand(ids.shape, generator=torch.Generator().manual_seed(0)) < 0.4) & real.bool(), ids, -100)
    g1 = torch.autograd.grad(m(ids, types, real, labels)[1], list(m.parameters()))
    g2 = torch.autograd.grad(m.loss(ids, types, real, labels), list(m.parameters()))
    for a, b in zip(g1, g2): torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    logits = m(ids, types, real)[0]  # the oracle: cross-entropy read off the full logits
    g3 = torch.autograd.grad(torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()), list(m.parameters()))
    for a, b in zip(g1, g3): torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)

def _head_inputs(rows=64, d=8, V=50, dtype=torch.float64, seed=3, n=None):
    "x, w, b and labels y: the first n rows real (all if n is None), the padding after them labelled -100."
    g = torch.Generator().manual_seed(seed)
    x, w, b = (torch.randn(*s, generator=g, dtype=dtype).requires_grad_() for s in ((rows, d), (V, d), (V,)))
    y = torch.randint(0, V, (rows,), generator=g)
    if n is not None: y[n:] = -100
    return x, w, b, y

@pytest.mark.parametrize('n', [0, 1, 37, 64])
def test_the_decoder_and_its_loss_in_one_step_are_the_formula(n):
    """The float32/float64 step's fused decoder and loss against NumPy: the loss and the gradients of the rows, the
    word table and the bias; the rows past n (the padding to a multiple of 64, labelled -100) take no part."""
    from bert_nb.speed import decoded_loss
    x, w, b, y = _head_inputs()
    y[n:] = -100
    loss = decoded_loss(x, w, b, y, n)
    gx, gw, gb = torch.autograd.grad(loss, (x, w, b))
    X, W, B, Y = x.detach().numpy()[:n], w.detach().numpy(), b.detach().numpy(), y.numpy()[:n]
    z = X @ W.T + B
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    assert abs(loss.item() - ((lse - z[np.arange(n), Y]).sum() / max(n, 1))) < 1e-12
    d = np.exp(z - lse[:, None]); d[np.arange(n), Y] -= 1; d /= max(n, 1)
    for ours, want in ((gx[:n], d @ W), (gw, d.T @ X), (gb, d.sum(0))):
        np.testing.assert_allclose(ours.numpy(), want, rtol=0, atol=1e-12)
    assert torch.count_nonzero(gx[n:]) == 0

def test_the_fused_loss_backward_twice_and_without_a_gradient():
    """The node computes the logits' gradient in its forward and only reads it in the backward: a second backward
    (retain_graph) gives the same gradients again; without autograd the loss is the same number."""
    from bert_nb.speed import decoded_loss
    x, w, b, y = _head_inputs(n=40)
    loss = decoded_loss(x, w, b, y, 40)
    first = torch.autograd.grad(loss, (x, w, b), retain_graph=True)
    for a, c in zip(first, torch.autograd.grad(loss, (x, w, b))): assert torch.equal(a, c)
    with torch.no_grad(): assert abs(decoded_loss(x, w, b, y, 40).item() - loss.item()) < 1e-12

@pytest.mark.parametrize('scale', [1, 300])  # 300: logits in the thousands, where the label's p underflows to 0
def test_the_fused_loss_where_the_labels_probability_underflows(scale):
    """The loss is read off the softmax as -log p_y, except where p_y is below 2^-100: there by the log-softmax, so
    a row whose label is thousands of logits below the best keeps its loss (float64's formula, within 1e-12 of it)
    where -log p_y would be inf."""
    from bert_nb.speed import decoded_loss
    x, w, b, y = _head_inputs()
    x = (x.detach() * scale).requires_grad_()
    loss = decoded_loss(x, w, b, y, 64)
    z = (x @ w.T + b).detach().numpy()
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    want = (lse - z[np.arange(64), y.numpy()]).mean()
    assert np.isfinite(loss.item()) and abs(loss.item() - want) <= 1e-12 * max(1, abs(want))
    if scale > 1: assert want > 1000

def _ce_tol(z: torch.Tensor, loss: float) -> float:
    """How far two float32 computations of a mean cross-entropy from the same logits z may differ: each row's
    log-sum-exp sums V terms (within gamma(V) of their sum, 1 to V, so of log V after the log) and is shifted by the
    largest logit, the mean sums the rows (gamma(n) of the loss); twice that, for two computations."""
    from tol import gamma
    n, V = z.shape
    return 2 * (gamma(V) * (1 + z.abs().max().item()) + gamma(n) * abs(loss))

def test_under_autocast_the_loss_is_autograds():
    """Under bf16 autocast the decoder's product is bf16 (autocast's choice) and the loss float32: autograd's
    cross-entropy of those logits, to float32's rounding (the node reads it off the softmax), and gradients in the
    parameters' dtype."""
    from bert_nb.speed import decoded_loss
    x, w, b, y = _head_inputs(dtype=torch.float32, n=40)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        loss = decoded_loss(x, w, b, y, 40)
        z = torch.nn.functional.linear(x, w, b)[:40].float()
        want = torch.nn.functional.cross_entropy(z, y[:40])
    assert loss.dtype == torch.float32 and abs(loss.item() - want.item()) <= _ce_tol(z, want.item())
    assert all(g.dtype == torch.float32 for g in torch.autograd.grad(loss, (x, w, b)))

@pytest.mark.parametrize('rows', [torch.float32, torch.bfloat16])  # bf16: what the head's transform gives it
def test_under_autocast_the_fused_gradients_are_autograds_within_bf16(rows):
    """Under bf16 autocast the decoder and its loss take the fused node too (#58), and its gradients equal
    autograd's within bf16's arithmetic. Both sides multiply the same bf16 rows and table; each rounds the gradient
    of the logits to bf16 once (autograd after the 1/n, the node before it) and each product's output once, and the
    node rounds its bf16 rows' gradient once more
    after the 1/n: five roundings of u = 2^-8 in all, each relative to at most the sum of the absolute terms,
    |D| |W| (float32's own sums are 2^16 times finer)."""
    from bert_nb.speed import decoded_loss
    x, w, b, y = _head_inputs(rows=128, d=16, V=300, dtype=torch.float32, n=100)
    x = x.detach().to(rows).requires_grad_()
    n, F_ = 100, torch.nn.functional
    with torch.autocast('cpu', dtype=torch.bfloat16):
        loss = decoded_loss(x, w, b, y, n)
        z = F_.linear(x, w, b)
        want = torch.autograd.grad(F_.cross_entropy(z[:n].float(), y[:n]), (x, w, b))
    assert type(loss.grad_fn).__name__ == '_DecodedLossBackward'
    ours = torch.autograd.grad(loss, (x, w, b))
    Z = z.detach().double()[:n]                  # the bf16 logits both sides read
    D = torch.softmax(Z, 1); D[torch.arange(n), y[:n]] -= 1; D = D.abs() / n
    X, W = x.detach().bfloat16().double()[:n], w.detach().bfloat16().double()
    u = 2.0 ** -8
    assert [g.dtype for g in ours] == [rows, torch.float32, torch.float32] and torch.count_nonzero(ours[0][n:]) == 0
    pairs = ((ours[0][:n], want[0][:n], D @ W.abs()), (ours[1], want[1], D.T @ X.abs()), (ours[2], want[2], D.sum(0)))
    for o, wt, bound in pairs: assert ((o - wt).double().abs() <= 5 * u * bound).all()

def test_a_bf16_model_gets_a_float32_loss():
    "Weights in bf16 (no autocast): the loss is float32, from the bf16 logits, as for autocast's."
    from bert_nb.speed import decoded_loss
    x, w, b, y = (t.bfloat16() if t.is_floating_point() else t
                  for t in _head_inputs(dtype=torch.float32, n=40))
    loss = decoded_loss(x, w, b, y, 40)
    z = torch.nn.functional.linear(x, w, b)[:40].float()
    want = torch.nn.functional.cross_entropy(z, y[:40])
    assert loss.dtype == torch.float32 and abs(loss.item() - want.item()) <= _ce_tol(z, want.item())

def test_logits_keep_their_graph():
    "forward's loss decodes the labelled rows on its own; the returned logits still back-propagate, as without labels."
    m = random_model()
    ids, types, real = padded_batch()
    labels = torch.full_like(ids, -100); labels[0, 2] = 7
    w = torch.randn(ids.shape + (CFG.vocab,), dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with_labels, loss = m(ids, types, real, labels)
    g1 = torch.autograd.grad((with_labels * w).sum(), list(m.parameters()))
    g2 = torch.autograd.grad((m(ids, types, real)[0] * w).sum(), list(m.parameters()))
    for a, b in zip(g1, g2): assert torch.equal(a, b)
    assert loss.requires_grad

def test_decoder_is_tied_and_has_a_bias():
    m = BertForMLM(BertConfig(50, n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=10))
    names = [n for n, _ in m.named_parameters()]
    layer = [f'encoder.layers.0.attn.{x}.{y}' for x in 'qkvo' for y in ('weight', 'bias')] + \
        [f'encoder.layers.0.{x}.{y}' for x in ('attn_ln', 'ff_in', 'ff_out', 'ff_ln') for y in ('weight', 'bias')]
    assert names == ['encoder.word_emb.weight', 'encoder.pos_emb.weight', 'encoder.type_emb.weight', 'encoder.emb_ln.weight', 'encoder.emb_ln.bias'] + \
        layer + ['head.bias', 'head.dense.weight', 'head.dense.bias', 'head.ln.weight', 'head.ln.bias']
    assert not any('decoder' in n for n in m.state_dict())
    assert m.head.bias.shape == (50,) and m.encoder.layers[0].ff_in.weight.shape == (32, 16)
    m = m.double().eval()  # deterministic, and float64 to check each change against its formula
    ids = torch.tensor([[2, 5, 3]])
    with torch.no_grad():
        before = m(ids)[0]
        x = m.head.transform(m.encoder(ids))  # what the decoder reads (word 7 is not in ids: x stays)
        v = torch.randn(16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        m.encoder.word_emb.weight[7] += v     # only the word table changes ...
        after = m(ids)[0]
        m.head.bias[9] += 0.5                 # the decoder's own bias: added to its word's logit only
        shifted = m(ids)[0]
    tol = encoder_tol(m.config, 3, torch.float64, before.abs().max().item())
    torch.testing.assert_close(after[..., 7] - before[..., 7], x @ v, rtol=0, atol=tol)  # ... and logit 7 moves by x.v
    assert (x @ v).abs().min() > 100 * tol                                                 # (which is not ~0)
    assert torch.equal(after[..., :7], before[..., :7]) and torch.equal(after[..., 8:], before[..., 8:])
    torch.testing.assert_close(shifted[..., 9] - after[..., 9], torch.full((1, 3), 0.5, dtype=torch.float64),
                               rtol=0, atol=tol)
    assert torch.equal(shifted[..., :9], after[..., :9]) and torch.equal(shifted[..., 10:], after[..., 10:])

def test_init_like_transformers():
    torch.manual_seed(0)
    m = BertForMLM(BertConfig(3000, d_model=64, n_heads=4, n_layers=2, d_ff=128))
    sd = m.state_dict()
    for n, p in sd.items():
        if n.endswith('ln.weight'): assert (p == 1).all(), n
        elif p.dim() == 1: assert (p == 0).all(), n
        else:  # n draws from N(0, 0.02): the mean's sd is 0.02/sqrt(n), the sd's about 0.02/sqrt(2n); 6 sd each side
            k = p.numel()
            assert abs(p.std().item() - 0.02) < 6 * 0.02 / math.sqrt(2 * k) and abs(p.mean().item()) < 6 * 0.02 / math.sqrt(k), n

def test_init_from_pcg32_in_named_parameter_order():
    cfg = BertConfig(20, max_len=6, d_model=8, n_heads=2, n_layers=1, d_ff=12)
    m = BertForMLM(cfg, rng=PCG32(77, 5))
    r = RefPCG(77, 5)
    def normals(n):
        out = []
        for _ in range((n + 1) // 2):
            u1, u2 = r.random() / 2**32, r.random() / 2**32
            rad = math.sqrt(-2 * math.log(1 - u1))
            out += [rad * math.cos(2 * math.pi * u2), rad * math.sin(2 * math.pi * u2)]
        return np.float32(0.02 * np.array(out[:n]))
    for n, p in m.named_parameters():
        if p.dim() == 2: np.testing.assert_array_equal(p.detach().numpy().reshape(-1), normals(p.numel()), err_msg=n)
    assert torch.equal(BertForMLM(cfg, rng=PCG32(77, 5)).head.dense.weight, m.head.dense.weight)

def test_dropout_only_in_training():
    m = BertForMLM(BertConfig(50, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.5))
    ids = torch.tensor([[2, 5, 6, 3]])
    m.eval(); assert torch.equal(m(ids)[0], m(ids)[0])
    m.train(); assert not torch.equal(m(ids)[0], m(ids)[0])

@pytest.mark.parametrize('kw,msg', [(dict(vocab=0), 'vocab'), (dict(d_model=10, n_heads=3), 'multiple of n_heads'), (dict(dropout=1.0), 'dropout'),
                                    (dict(dropout=-0.1), 'dropout'), (dict(ln_eps=0.0), 'ln_eps'), (dict(max_len=0), 'max_len'), (dict(n_layers=0), 'n_layers'),
                                    (dict(d_ff=0), 'd_ff'), (dict(type_vocab=0), 'type_vocab'), (dict(n_heads=0), 'n_heads')])
def test_config_errors(kw, msg):
    with pytest.raises(ValueError, match=msg): BertConfig(**({'vocab': 10} | kw))

def test_config_dict_roundtrip():
    c = BertConfig(100, n_layers=3, dropout=0.0)
    assert BertConfig.from_dict(c.to_dict()) == c
    import json; assert json.loads(json.dumps(c.to_dict())) == c.to_dict()
    with pytest.raises(ValueError, match='unknown'): BertConfig.from_dict({'vocab': 3, 'bogus': 1})

@pytest.mark.parametrize('call,msg', [
    (lambda m: m(torch.tensor([2, 5, 3])), 'ids must be a 2-D integer tensor'),
    (lambda m: m(torch.tensor([[2., 5., 3.]])), 'ids must be a 2-D integer tensor'),
    (lambda m: m(np.array([[2, 5, 3]])), 'ids must be a 2-D integer tensor'),
    (lambda m: m(torch.tensor([[2, 61, 3]])), 'ids must be in \\[0, 61\\), got 61'),
    (lambda m: m(torch.tensor([[2, -1, 3]])), 'got -1'),
    (lambda m: m(torch.zeros(1, 25, dtype=torch.long)), 'max_len'),
    (lambda m: m(torch.tensor([[2, 5, 3]]), torch.tensor([[0, 2, 0]])), 'token_type_ids must be in \\[0, 2\\), got 2'),
    (lambda m: m(torch.tensor([[2, 5, 3]]), torch.tensor([[0, 0]])), 'token_type_ids must have the shape'),
    (lambda m: m(torch.tensor([[2, 5, 3]]), None, torch.tensor([[1, 1]])), 'attn_mask must have the shape'),
    (lambda m: m(torch.tensor([[2, 5, 3]]), None, None, torch.tensor([[-100, 5]])), 'labels must have the shape'),
    (lambda m: m(torch.tensor([[2, 5, 3]]), None, None, torch.tensor([[-100, 61, -100]])), 'labels must be -100 or in \\[0, 61\\), got 61'),
    (lambda m: m(torch.tensor([[2, 5, 3]]), None, None, torch.tensor([[-1, 5, -100]])), 'got -1'),
    (lambda m: m.loss(torch.tensor([[2, 5, 3]]), None, None, torch.tensor([[-100, 99, -100]])), 'labels must be'),
])
def test_input_errors(call, msg):
    with pytest.raises(ValueError, match=msg): call(BertForMLM(CFG))

def test_config_type_error():
    with pytest.raises(TypeError, match='BertConfig'): BertEncoder({'vocab': 10})
    with pytest.raises(TypeError, match='BertConfig'): BertForMLM(10)

def test_attention_probabilities_are_the_softmax_sdpa_computes():
    "BertAttention.probs writes out softmax(q k^T / sqrt(head size) + bias): rows of 1, padded keys 0, SDPA's output."
    torch.manual_seed(1)
    att = BertAttention(BertConfig(50, d_model=16, n_heads=4, d_ff=32)).double().eval()
    h = torch.randn(2, 5, 16, dtype=torch.float64); real = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    bias = torch.zeros(2, 1, 1, 5, dtype=torch.float64).masked_fill(real[:, None, None, :] == 0, torch.finfo(torch.float64).min)
    w = att.probs(h, bias)
    q, k, v = (lin(h).view(2, 5, 4, 4).transpose(1, 2) for lin in (att.q, att.k, att.v))
    want = torch.softmax(q @ k.transpose(-1, -2) / 2.0 + bias, -1)        # head size 4: sqrt 2
    torch.testing.assert_close(w, want, rtol=0, atol=1e-12)
    assert (w[1, :, :, 3:] == 0).all()
    torch.testing.assert_close(att.o((w @ v).transpose(1, 2).reshape(2, 5, 16)), att(h, bias), rtol=0, atol=1e-12)
