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
