"""The unpadded path (the encoder on the real tokens only) against the plain one (every layer on all B*T positions,
BertLayer.forward) on random padded batches: outputs at every real position and every gradient."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from bert_nb.bert import BertConfig, BertEncoder, BertForMLM
from bert_nb.rng import PCG32
from tol import encoder_tol, grad_tol, loss_tol

CFG = BertConfig(50, max_len=16, d_model=16, n_heads=4, n_layers=2, d_ff=32, dropout=0.0)
MODELS = {torch.float64: BertForMLM(CFG, PCG32(3)).double().eval(), torch.float32: BertForMLM(CFG, PCG32(3)).eval()}

@st.composite
def batches(draw):
    "(ids, mask, labels): rows of any length 0..T in any layout (trailing padding, left padding, holes), at least one real token."
    B, T = draw(st.integers(1, 5)), draw(st.integers(1, 16))
    layout = draw(st.sampled_from(['right', 'left', 'holes', 'full', 'one']))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    lens = torch.randint(0, T + 1, (B,), generator=g)
    pos = torch.arange(T)
    if layout == 'right': mask = pos < lens[:, None]
    elif layout == 'left': mask = pos >= T - lens[:, None]
    elif layout == 'holes': mask = torch.rand(B, T, generator=g) < 0.5
    elif layout == 'full': mask = torch.ones(B, T, dtype=torch.bool)
    else: mask = pos[None].expand(B, T) == 0  # all padding but one in every row
    mask[0, 0] = True
    ids = torch.randint(5, 50, (B, T), generator=g)
    labels = torch.where(mask & (torch.rand(B, T, generator=g) < 0.4), ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    return ids, mask.long(), labels

def plain(model, ids, mask):
    h = model.encoder.embed(ids)
    for layer in model.encoder.layers: h = layer(h, mask)
    return h

def grads(model, h, labels):
    model.zero_grad()
    r = labels != -100
    F.cross_entropy(model.head(h[r], model.encoder.word_emb.weight), labels[r]).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}

@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@settings(max_examples=40, deadline=None)
@given(b=batches())
def test_the_unpadded_path_equals_the_padded_one(dtype, b):
    ids, mask, labels = b
    model, r, T = MODELS[dtype], mask.bool(), ids.shape[1]
    want, got = plain(model, ids, mask), model.encoder(ids, attn_mask=mask)
    torch.testing.assert_close(got[r], want[r], rtol=0, atol=encoder_tol(CFG, T, dtype, want[r].abs().max().item()))
    assert (got[~r] == 0).all()  # padded positions hold zeros, as documented
    g_want, g_got = grads(model, want, labels), grads(model, got, labels)
    g_tol = grad_tol(CFG, T, ids.numel(), dtype, max(g.abs().max().item() for g in g_want.values()))
    for n in g_want: torch.testing.assert_close(g_got[n], g_want[n], rtol=0, atol=g_tol, msg=n)
    loss = model.loss(ids, None, mask, labels)  # the training step's path
    logits = model.head(want[labels != -100], model.encoder.word_emb.weight)
    torch.testing.assert_close(loss, F.cross_entropy(logits, labels[labels != -100]), rtol=0,
                               atol=loss_tol(CFG, T, dtype, logits.abs().max().item()))

def test_hidden_states_of_both_paths_agree():
    ids, mask, _ = torch.randint(5, 50, (3, 10)), torch.tensor([[1] * 10, [1] * 4 + [0] * 6, [1] + [0] * 9]), None
    m = MODELS[torch.float64]
    with torch.no_grad():
        fast = m.encoder(ids, attn_mask=mask, output_hidden_states=True).hidden_states
        slow = m.encoder(ids, attn_mask=mask, output_hidden_states=True, output_attentions=True).hidden_states  # padded
    r = mask.bool()
    for a, b in zip(fast, slow):
        torch.testing.assert_close(a[r], b[r], rtol=0, atol=encoder_tol(CFG, 10, torch.float64, b[r].abs().max().item()))

def attention64(q, k, v, bias):
    "softmax(q kᵀ/√(d/H) + M) v in float64, and the same with |v|: the size each output's float32 error is relative to."
    q, k, v = (x.detach().double() for x in (q, k, v))
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    w = (s if bias is None else s + bias.double()).softmax(-1)
    return w @ v, w @ v.abs()

def _graph(t: torch.Tensor) -> set[str]:
    "The names of the autograd nodes behind t."
    seen, todo = set(), [t.grad_fn]
    while todo:
        f = todo.pop()
        if f is not None and type(f).__name__ not in seen:
            seen.add(type(f).__name__); todo += [g for g, _ in f.next_functions]
    return seen

@pytest.mark.parametrize('T', [1, 7, 32, 128])
def test_bf16_training_attention_scores_run_in_float32(T):
    """Training in bf16 on a CPU, rows up to F32_ATTN_T: the formula, not SDPA (whose bf16 backward is ~4x slower
    here, #35), with the scores and their softmax in float32 and the weighted sum of the values in bf16 (#58). Against
    float64 from the same bf16 q, k, v (u = 2^-8, bf16's unit roundoff): the output rounds once (u of itself) after
    the weights round once (u of the weighted |v|), and float32's scores and sums add 2 gamma(64 + T) of that. The
    gradients likewise: each passes through at most two bf16 roundings of its absolute terms and its own."""
    from bert_nb.speed import attend
    from bert_nb.bert import _attn_bias
    from tol import gamma
    g = torch.Generator().manual_seed(T)
    q, k, v = (torch.randn(3, 2, T, 64, generator=g).bfloat16().requires_grad_() for _ in range(3))
    bias = _attn_bias(torch.arange(T) < torch.tensor([[T], [max(1, T // 2)], [1]]), torch.float32)
    y = attend(q, k, v, bias, 0.0)
    assert y.dtype == torch.bfloat16 and not any('ScaledDotProduct' in n for n in _graph(y))
    u, f = 2.0 ** -8, 2 * gamma(64 + T)
    exact, size = attention64(q, k, v, bias)
    assert ((y.double() - exact).abs() <= u * exact.abs() + (u + u * u + f) * size).all()
    up = torch.randn(y.shape, generator=g).bfloat16()
    y.backward(up)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    sc = 64 ** -0.5
    w = (q64 @ k64.transpose(-1, -2) * sc + bias.double()).softmax(-1)
    (w @ v64).backward(up.double())
    W, U, A = w.detach(), up.double().abs(), up.double().abs() @ v64.detach().abs().transpose(-1, -2)  # |dy| |v|ᵀ
    dS = W * (A + (W * A).sum(-1, keepdim=True))       # what the scores' gradient is relative to
    sizes = (sc * dS @ k64.detach().abs(), sc * dS.transpose(-1, -2) @ q64.detach().abs(), W.transpose(-1, -2) @ U)
    for x, ref, size in zip((q, k, v), (q64, k64, v64), sizes):
        assert ((x.grad.double() - ref.grad).abs() <= u * ref.grad.abs() + (2 * u + f) * size).all()
    assert torch.equal(attend(q, k, v, bias.bfloat16(), 0.0), y)  # a model in bf16 has its mask in bf16

def test_attention_elsewhere_is_sdpa_untouched():
    "float32 and float64, inference, and rows longer than F32_ATTN_T: SDPA as called, bit for bit (or its error)."
    from bert_nb.speed import attend, F32_ATTN_T
    g = torch.Generator().manual_seed(0)
    make = lambda T, dtype, grad: [torch.randn(2, 2, T, 16, generator=g).to(dtype).requires_grad_(grad) for _ in range(3)]
    for T, dtype, grad in [(32, torch.float32, True), (32, torch.float64, True), (32, torch.bfloat16, False),
                           (F32_ATTN_T + 1, torch.bfloat16, True)]:
        q, k, v = make(T, dtype, grad)
        try: want = F.scaled_dot_product_attention(q, k, v)
        except RuntimeError as e:  # bf16 SDPA under ATEN_CPU_CAPABILITY=default on an AMX CPU (torch 2.13: pack_vnni2)
            with pytest.raises(RuntimeError, match=str(e)[:40]): attend(q, k, v, None, 0.0)
            continue
        assert torch.equal(attend(q, k, v, None, 0.0), want), (T, dtype, grad)
