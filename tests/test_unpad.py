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

@pytest.mark.parametrize('T', [1, 7, 32, 128])
def test_bf16_training_attention_runs_in_float32(T):
    """Training in bf16 on a CPU, rows up to F32_ATTN_T: float32 SDPA, its output rounded once to bf16 (unit roundoff
    2^-8) and float32's error besides (scores of 64 terms, sums of T: 2 gamma(64 + T) of the weighted |v|); its
    gradients are float32 SDPA's rounded to bf16 (SDPA's bf16 kernel computes others, and ~4x slower)."""
    from bert_nb.speed import attend
    from bert_nb.bert import _attn_bias
    from tol import gamma
    g = torch.Generator().manual_seed(T)
    q, k, v = (torch.randn(3, 2, T, 64, generator=g).bfloat16().requires_grad_() for _ in range(3))
    bias = _attn_bias(torch.arange(T) < torch.tensor([[T], [max(1, T // 2)], [1]]), torch.float32)
    y = attend(q, k, v, bias, 0.0)
    exact, size = attention64(q, k, v, bias)
    assert y.dtype == torch.bfloat16
    assert ((y.double() - exact).abs() <= 2 ** -8 * exact.abs() + 2 * gamma(64 + T) * size).all()
    up = torch.randn(y.shape, generator=g).bfloat16()
    y.backward(up)
    f32 = [x.detach().float().requires_grad_() for x in (q, k, v)]
    F.scaled_dot_product_attention(*f32, attn_mask=bias).backward(up.float())
    for ours, ref in zip((q, k, v), f32): assert torch.equal(ours.grad, ref.grad.bfloat16())
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
