"""Chapter 02's course tests: the learner's `bert` module against the op order replayed on PCG32 transcribed from
the reference C code, and one layer, the encoder and the MLM head in float64 NumPy with the exact GELU.

Each test's docstring says what it checks, then (after the first sentence) why it matters downstream."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from bert_nb.rng import PCG32  # the chapter's dependency, from the package (chapter 00)
import bert as m
from course_refs import RefPCG, Script, gelu, ln, lin, np_layer

IDS, SPECIAL = np.array([2, 5, 6, 7, 3, 0]), np.array([True, False, False, False, True, True])

def test_hand_example_mlm_mask():
    """The worked example: five uniforms and one below, in the op order, give the inputs and labels worked out by
    hand. The labels are the original tokens at exactly the picked positions, whatever those positions show."""
    rng = Script([0.05, 0.50, 0.90, 0.10, 0.85], [9])
    inputs, labels = m.mlm_mask(IDS, SPECIAL, 4, 40, 0.15, rng)
    assert np.asarray(inputs).tolist() == [2, 4, 6, 9, 3, 0]
    assert np.asarray(labels).tolist() == [-100, 5, -100, 7, -100, -100]
    assert rng.u == [] and rng.b == []  # exactly five uniforms and one below

def replay(ids, special, mask_id, vocab, p, g):
    "The op order, one position at a time in C order, on the test's own generator."
    inputs, labels = np.array(ids, np.int64), np.full(np.shape(ids), -100, np.int64)
    for idx in np.ndindex(*np.shape(ids)):
        if special[idx] or not g.uniform() < p: continue
        labels[idx] = ids[idx]
        u = g.uniform()
        if u < 0.8: inputs[idx] = mask_id
        elif u < 0.9: inputs[idx] = g.bounded(vocab)
    return inputs, labels

def test_mask_follows_the_op_order():
    """A batch masked on PCG32 is the op order replayed draw for draw: the same inputs, labels and the stream left at
    the same place. Only then is the batch the same in every language, and a run resumable."""
    g0 = np.random.default_rng(0)
    ids = g0.integers(5, 1000, (4, 32)); ids[:, 0], ids[:, -1], ids[1, 20:] = 2, 3, 0
    special = np.isin(ids, [0, 1, 2, 3, 4])
    g, r = PCG32(42, 54), RefPCG(42, 54)
    for _ in range(2):  # consecutive batches continue the stream
        inputs, labels = m.mlm_mask(ids, special, 4, 1000, 0.3, g)
        want = replay(ids, special, 4, 1000, 0.3, r)
        assert np.array_equal(np.asarray(inputs), want[0]) and np.array_equal(np.asarray(labels), want[1])
    assert g.next_u32() == r.random()

CFG = dict(vocab=61, max_len=24, d_model=24, n_heads=3, n_layers=2, d_ff=40, type_vocab=2, dropout=0.0)

def params(module): return {n: p.detach().double().numpy() for n, p in module.named_parameters()}

def random_model(seed=0):
    "Every parameter random (biases and LayerNorms too, so that none can hide), float64, eval mode."
    torch.manual_seed(seed)
    model = m.BertForMLM(m.BertConfig(**CFG)).double().eval()
    with torch.no_grad():
        for p in model.parameters(): p.normal_(0, 0.3)
    return model

def padded_batch():
    g = np.random.default_rng(1)
    ids, types, real = g.integers(5, 61, (3, 11)), np.zeros((3, 11), np.int64), np.zeros((3, 11), bool)
    for b, n in enumerate([11, 7, 3]):
        real[b, :n] = True; ids[b, n:] = 0; types[b, n // 2:n] = 1
    return torch.tensor(ids), torch.tensor(types), torch.tensor(real.astype(np.int64))

def test_layer_matches_the_formula():
    """One layer is post-LN attention then the exact-GELU feed-forward, LayerNorm eps 1e-12, padded keys never read:
    float64 within 1e-10 of NumPy. Pretrained BERT weights only work with BERT's own formula."""
    layer = m.BertLayer(m.BertConfig(**CFG)).double().eval()
    torch.manual_seed(3)
    with torch.no_grad():
        for p in layer.parameters(): p.normal_(0, 0.3)
    h = torch.randn(3, 9, 24, dtype=torch.float64)
    real = np.ones((3, 9), bool); real[1, 6:] = False; real[2, 2:] = False
    got = layer(h, torch.tensor(real.astype(np.int64))).detach().numpy()
    want = np_layer({'l.' + k: v for k, v in params(layer).items()}, 'l.', h.numpy(), real, 3)
    assert np.abs(got - want)[real].max() < 1e-10

def test_model_matches_the_formula():
    """The whole model (word + position + token-type embeddings, every layer, the MLM head decoding with the word
    table plus its own bias) is the float64 formula at the real positions. The loss and every figure rest on it."""
    model = random_model()
    ids, types, real = padded_batch()
    P, r = params(model), real.numpy().astype(bool)
    h = ln(P['encoder.word_emb.weight'][ids.numpy()] + P['encoder.pos_emb.weight'][:11]
           + P['encoder.type_emb.weight'][types.numpy()], P['encoder.emb_ln.weight'], P['encoder.emb_ln.bias'])
    for i in range(CFG['n_layers']): h = np_layer(P, f'encoder.layers.{i}.', h, r, 3)
    want = ln(gelu(lin(h, P, 'head.dense')), P['head.ln.weight'], P['head.ln.bias']) @ P['encoder.word_emb.weight'].T
    logits = model(ids, types, real)[0].detach().numpy()
    assert np.abs(logits - (want + P['head.bias']))[r].max() < 1e-9

def test_padding_is_never_read():
    """What sits at padded positions changes nothing at the real ones. A batch pads its rows to one length: a model
    that reads the padding gives a sentence other answers in another batch."""
    model = random_model()
    ids, types, real = padded_batch()
    other, other_types = ids.clone(), types.clone()
    other[real == 0], other_types[real == 0] = 7, 1
    r = real.bool()
    assert torch.allclose(model.encoder(other, other_types, real)[r], model.encoder(ids, types, real)[r], atol=1e-12)

def test_reads_both_directions():
    """The first position reads the last word and the last reads the first: no causal mask. A blank is filled from
    both sides of it: that is what makes BERT bidirectional."""
    model = random_model()
    ids = torch.tensor([[2, 10, 11, 12, 13, 3]])
    h = model.encoder(ids)
    last, first = ids.clone(), ids.clone(); last[0, 4] = 14; first[0, 1] = 14
    assert (model.encoder(last)[0, 0] - h[0, 0]).abs().max() > 1e-3
    assert (model.encoder(first)[0, 5] - h[0, 5]).abs().max() > 1e-3

def test_token_types_are_added():
    """Token type 1 changes the encoding; type 0 is what no types means. A pair's two segments are told apart only by
    the token-type embeddings."""
    model = random_model()
    ids = torch.tensor([[2, 10, 11, 3]])
    assert torch.equal(model.encoder(ids), model.encoder(ids, torch.zeros_like(ids)))
    assert (model.encoder(ids, torch.ones_like(ids)) - model.encoder(ids)).abs().max() > 1e-3

def test_decoder_is_tied_and_has_a_bias():
    """The MLM head decodes with the word table itself (one parameter, and the loss's gradient reaches it through the
    decoder) plus a bias of its own, one per token. transformers' checkpoints tie them; untied, the table learns
    only from the input side."""
    model = random_model()
    ids, types, real = padded_batch()
    at = real.bool()
    F.cross_entropy(model(ids, types, real)[0][at], ids[at]).backward()
    table = model.encoder.word_emb.weight
    assert model.head.bias.shape == (61,) and model.head.bias.grad.abs().sum() > 0
    unseen = sorted(set(range(61)) - set(ids.flatten().tolist()))  # not in the input: reached through the decoder only
    assert unseen and table.grad[unseen].abs().sum() > 0
    assert not any(p is table for n, p in model.named_parameters() if n.startswith('head.'))  # one table, not two

def test_save_and_load_are_exact(tmp_path):
    """save_bert then load_bert gives the same parameters bit for bit and the same logits. A checkpoint that comes
    back approximately is a different model: resumed runs and shared models drift."""
    model = random_model().float()
    m.save_bert(model, tmp_path / 'm')
    back = m.load_bert(tmp_path / 'm', m.BertForMLM).eval()
    for (n, p), (n2, q) in zip(model.named_parameters(), back.named_parameters()):
        assert n == n2 and torch.equal(p, q)
    ids, types, real = padded_batch()
    assert torch.equal(model(ids, types, real)[0], back(ids, types, real)[0])

def test_transformers_agrees():
    """A transformers BertForMaskedLM's weights, loaded with load_hf_bert, give its logits within float64 rounding.
    The chapter's encoder is BERT only if every pretrained checkpoint means the same thing in it."""
    t = pytest.importorskip('transformers')
    torch.manual_seed(0)
    cfg = t.BertConfig(vocab_size=61, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                       intermediate_size=40, max_position_embeddings=24, attn_implementation='eager')
    hf = t.BertForMaskedLM(cfg).double().eval()
    with torch.no_grad():
        for p in hf.parameters(): p.add_(torch.randn_like(p) * 0.1)
    ours = m.load_hf_bert(m.BertForMLM(m.BertConfig(**CFG)).double(), hf.state_dict()).eval()
    ids, types, real = padded_batch()
    want = hf(input_ids=ids, token_type_ids=types, attention_mask=real).logits
    r = real.bool()
    assert (ours(ids, types, real)[0] - want)[r].abs().max() < 1e-9
