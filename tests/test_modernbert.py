"""ModernBERT (chapter 06) against independent oracles: a float64 NumPy formula of rotary attention, a brute-force
banded softmax over the whole square, and transformers' own ModernBERT classes on the same weights."""
import json, math, warnings
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from bert_nb import KJV, PCG32, WordPieceTokenizer, load_bert
from bert_nb.modernbert import (GeGLU, ModernBertClassifier, ModernBertConfig, ModernBertEncoder, ModernBertForMLM,
                                band_bias, layout, local_attention, rope_tables, rotate)
from bert_nb.modernbert_files import config_from_hf, hf_config, hf_state_dict, load_modernbert, save_modernbert
from tol import encoder_tol, grad_tol, loss_tol
from saving import edited

transformers = pytest.importorskip('transformers')
from transformers import (AutoModelForMaskedLM, AutoModelForSequenceClassification, ModernBertConfig as HFConfig,
                          ModernBertForMaskedLM, ModernBertForSequenceClassification, ModernBertModel)
import transformers.models.modernbert.modeling_modernbert as hf_mb

# window 6 < rows of 17: the band matters; 5 layers: global, local, local, global, local
CFG = ModernBertConfig(vocab=53, d_model=24, n_heads=3, n_layers=5, d_ff=20, window=6, global_every=3, max_len=64)

def rows(B=3, T=17, seed=1, lens=(17, 11, 4)):
    "(ids, attn_mask): a full row and padded ones; padding holds id 0."
    g = torch.Generator().manual_seed(seed)
    mask = (torch.arange(T) < torch.tensor(lens[:B])[:, None]).long()
    return torch.randint(3, CFG.vocab, (B, T), generator=g).masked_fill(mask == 0, 0), mask

def random_model(cls=ModernBertForMLM, seed=0, std=0.3, cfg=CFG):
    "Every weight random, the norms' gains and the decoder's bias too, float64, eval mode."
    torch.manual_seed(seed)
    m = cls(cfg).double().eval()
    with torch.no_grad():
        for p in m.parameters(): p.normal_(0, std)
    return m

# --- a float64 formula of rotary attention, written here from the paper's equations -------------------------
def np_rotate(x, pos, theta):
    "Each pair (x_i, x_(i+dh/2)) turned by pos·θ^(-2i/dh), as a 2x2 rotation."
    dh = x.shape[-1]; h = dh // 2
    out = np.empty_like(x)
    for i in range(h):
        a = pos * theta ** (-2 * i / dh)
        c, s = np.cos(a), np.sin(a)
        out[..., i], out[..., i + h] = x[..., i] * c - x[..., i + h] * s, x[..., i] * s + x[..., i + h] * c
    return out

def np_ln(x, w, eps=1e-5): return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w
gelu = np.vectorize(lambda u: 0.5 * u * (1 + math.erf(u / math.sqrt(2))))

def np_encoder(P, ids, real, c):
    "The whole encoder, row by row over its real tokens, each softmax over the keys that the layer may read."
    out = np.zeros((*ids.shape, c.d_model))
    H, dh = c.n_heads, c.d_model // c.n_heads
    for b in range(ids.shape[0]):
        n = int(real[b].sum()); pos = np.arange(n, dtype=np.float64)
        x = np_ln(P['tok_emb.weight'][ids[b, :n]], P['emb_norm.weight'])
        for l in range(c.n_layers):
            pre = f'layers.{l}.'
            a = x if l == 0 else np_ln(x, P[pre + 'attn_norm.weight'])
            q, k, v = np.split(a @ P[pre + 'attn.Wqkv.weight'].T, 3, -1)
            theta, near = (c.theta_global, n) if l % c.global_every == 0 else (c.theta_local, c.window // 2)
            may = np.abs(pos[:, None] - pos[None]) <= near
            heads = []
            for h in range(H):
                sl = slice(h * dh, (h + 1) * dh)
                s = np_rotate(q[:, sl], pos, theta) @ np_rotate(k[:, sl], pos, theta).T / math.sqrt(dh)
                s = np.where(may, s, -np.inf)
                w = np.exp(s - s.max(1, keepdims=True)); w /= w.sum(1, keepdims=True)
                heads.append(w @ v[:, sl])
            x = x + np.concatenate(heads, 1) @ P[pre + 'attn.Wo.weight'].T
            m = np_ln(x, P[pre + 'mlp_norm.weight']) @ P[pre + 'mlp.Wi.weight'].T
            x = x + (gelu(m[:, :c.d_ff]) * m[:, c.d_ff:]) @ P[pre + 'mlp.Wo.weight'].T
        out[b, :n] = np_ln(x, P['final_norm.weight'])
    return out

def test_encoder_equals_the_float64_formula_of_rotary_banded_attention():
    enc = random_model(ModernBertEncoder)
    ids, mask = rows()
    P = {k: v.numpy() for k, v in enc.state_dict().items()}
    want = np_encoder(P, ids.numpy(), mask.numpy(), CFG)
    got = enc(ids, mask).detach().numpy()
    tol = encoder_tol(CFG, 17, torch.float64, np.abs(want).max())
    assert np.abs(got - want).max() <= tol, (np.abs(got - want).max(), tol)
    assert not got[mask.numpy() == 0].any()  # padding comes back as zeros

def test_rope_matches_the_rotation_formula_and_scores_depend_on_distance_only():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 2, 16, dtype=torch.float64, generator=g)
    pos = torch.tensor([0, 1, 5, 64, 1000, 8191, 50_000])
    for theta in (10_000.0, 160_000.0):
        got = rotate(x, *rope_tables(pos, 16, theta, torch.float64)).numpy()
        want = np_rotate(x.numpy(), pos.numpy().astype(np.float64)[:, None], theta)
        assert np.abs(got - want).max() < 1e-10  # angles up to 5e4 rad: cos/sin of a float64 angle, not less
    q, k = torch.randn(2, 16, dtype=torch.float64, generator=g)
    score = lambda m, n: (rotate(q[None, None], *rope_tables(torch.tensor([m]), 16, 1e4, torch.float64))
                          * rotate(k[None, None], *rope_tables(torch.tensor([n]), 16, 1e4, torch.float64))).sum()
    assert abs(score(3, 10) - score(4003, 4010)) < 1e-12 * 16 * q.abs().max() * k.abs().max() * 100

@pytest.mark.parametrize('w,c,lens', [(3, 4, (19, 11)), (2, 32, (5, 1, 40)), (64, 64, (300, 77)), (1, 3, (2,))])
def test_local_attention_equals_a_brute_force_banded_softmax(w, c, lens):
    row = torch.cat([torch.full((n,), r) for r, n in enumerate(lens)])
    N, H, dh = len(row), 2, 8
    g = torch.Generator().manual_seed(w * 100 + c)
    q, k, v = torch.randn(3, N, H, dh, dtype=torch.float64, generator=g)
    got = local_attention(q, k, v, band_bias(row, w, c, torch.float64), w)
    i, j = np.arange(N)[:, None], np.arange(N)[None]
    may = (np.abs(i - j) <= w) & (row.numpy()[:, None] == row.numpy()[None])
    for h in range(H):
        s = q[:, h].numpy() @ k[:, h].numpy().T / math.sqrt(dh)
        s = np.where(may, s, -np.inf)
        p = np.exp(s - s.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
        assert np.abs(got[:, h].numpy() - p @ v[:, h].numpy()).max() < 1e-12

def test_geglu_is_gelu_of_one_half_times_the_other():
    ff = GeGLU(6, 5).double()
    x = torch.randn(4, 6, dtype=torch.float64)
    W, Wo = ff.Wi.weight.detach().numpy(), ff.Wo.weight.detach().numpy()
    want = (gelu(x.numpy() @ W[:5].T) * (x.numpy() @ W[5:].T)) @ Wo.T
    assert np.abs(ff(x).detach().numpy() - want).max() < 1e-13

# --- transformers' ModernBERT on the same weights --------------------------------------------------------------
def hf_twin(model, tmp_path, auto=AutoModelForMaskedLM):
    save_modernbert(model, tmp_path / 'ours')
    return auto.from_pretrained(tmp_path / 'ours', dtype=torch.float64, attn_implementation='sdpa').eval()

@pytest.mark.parametrize('padded', [False, True])
def test_logits_loss_and_gradients_equal_transformers(hf_rope_float64, tmp_path, padded):
    ours = random_model()
    theirs = hf_twin(ours, tmp_path)
    assert type(theirs) is ModernBertForMaskedLM
    ids, mask = rows()
    if not padded: mask = torch.ones_like(mask)
    g = torch.Generator().manual_seed(2)
    labels = torch.where(torch.rand(ids.shape, generator=g) < 0.3, ids, -100).masked_fill(mask == 0, -100)
    logits, loss = ours(ids, mask, labels)
    z = theirs(input_ids=ids, attention_mask=mask).logits
    their_loss = F.cross_entropy(z.flatten(0, 1), labels.flatten())  # in float64: transformers' is float32
    real = mask.bool()
    scale = z[real].abs().max().item()
    assert (logits[real] - z[real]).abs().max() <= encoder_tol(CFG, 17, torch.float64, scale)
    assert abs(loss.item() - their_loss.item()) <= loss_tol(CFG, 17, torch.float64, scale)
    loss.backward(); their_loss.backward()
    mine = {k: v.grad for k, v in zip(hf_state_dict(ours), [p for _, p in _ordered(ours)])}
    theirs_g = {k: p.grad for k, p in theirs.named_parameters()}
    big = max(v.abs().max().item() for v in theirs_g.values())
    tol = grad_tol(CFG, 17, int(real.sum()), torch.float64, big)
    for k, v in theirs_g.items(): assert (mine[k] - v).abs().max() <= tol, k

def _ordered(model):
    "Parameters in hf_state_dict's order (its values are the parameters' data; gradients live on the parameters)."
    by_ptr = {p.data_ptr(): (n, p) for n, p in model.named_parameters()}
    return [by_ptr[v.data_ptr()] for v in hf_state_dict(model).values()]

def test_float32_agrees_with_transformers_as_it_ships(tmp_path):
    "No patching: transformers' float32 rotary against ours (float64 angles, rounded): float32 agreement."
    ours = random_model(std=0.1).float()
    theirs = AutoModelForMaskedLM.from_pretrained(save_modernbert(ours, tmp_path / 'm'), attn_implementation='sdpa')
    ids, mask = rows()
    real = mask.bool()
    z = theirs.eval()(input_ids=ids, attention_mask=mask).logits
    assert (ours(ids, mask)[0][real] - z[real]).abs().max() < 1e-4 * z.abs().max()

def test_transformers_directory_loads_with_its_report(hf_rope_float64, tmp_path):
    hc = HFConfig(**{k: v for k, v in hf_config(CFG).items() if k not in ('global_rope_theta', 'local_rope_theta')},
                  cls_token_id=1, sep_token_id=2, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(5)
    theirs = ModernBertForMaskedLM(hc).double().eval()
    theirs.save_pretrained(tmp_path / 'hf')
    ours = load_modernbert(tmp_path / 'hf')
    assert type(ours) is ModernBertForMLM and ours.encoder.tok_emb.weight.dtype == torch.float64
    assert ours.load_report.dropped == [] and ours.load_report.initialised == []
    ids, mask = rows()
    real = mask.bool()
    z = theirs(input_ids=ids, attention_mask=mask).logits
    assert (ours(ids, mask)[0][real] - z[real]).abs().max() <= encoder_tol(CFG, 17, torch.float64, z.abs().max())
    ModernBertModel(hc).save_pretrained(tmp_path / 'base')  # keys without 'model.'
    enc = load_modernbert(tmp_path / 'base')
    assert type(enc) is ModernBertEncoder and enc.load_report.dropped == []
    with pytest.warns(UserWarning, match='initialised'):
        mlm = load_modernbert(tmp_path / 'base', ModernBertForMLM)
    assert sorted(mlm.load_report.initialised) == ['decoder.bias', 'head.dense.weight', 'head.norm.weight']

def test_save_writes_what_transformers_reads_and_comes_back_bit_for_bit(tmp_path):
    tok = WordPieceTokenizer.from_vocab(KJV)
    cfg = ModernBertConfig(len(tok), d_model=32, n_heads=4, n_layers=3, d_ff=40, pad_id=tok.pad_id)
    m = ModernBertForMLM(cfg, PCG32(3))
    save_modernbert(m, tmp_path / 'm', tok)
    assert {'config.json', 'model.safetensors', 'vocab.txt', 'tokenizer.json'} <= {p.name for p in (tmp_path / 'm').iterdir()}
    back = load_modernbert(tmp_path / 'm')
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), back.state_dict().values()))
    assert back.encoder.tok_emb.weight is not back.bias  # and the decoder still reads the word table:
    ids = torch.tensor([tok.encode('in the beginning god created the heaven')])
    assert torch.equal(back(ids)[0], m.eval()(ids)[0])
    config = json.loads((tmp_path / 'm' / 'config.json').read_text())
    assert config['architectures'] == ['ModernBertForMaskedLM'] and config['cls_token_id'] == tok.cls_id
    from transformers import AutoTokenizer
    assert AutoTokenizer.from_pretrained(tmp_path / 'm')('in the beginning')['input_ids'] == tok.encode('in the beginning')

def test_bert_and_modernbert_directories_are_refused_by_each_other(tmp_path):
    with pytest.raises(ValueError, match="'bert' model, not ModernBERT: load it with load_bert"):
        load_modernbert(KJV)
    save_modernbert(ModernBertEncoder(CFG), tmp_path / 'mb')
    with pytest.raises(ValueError, match="model_type must be 'bert'"): load_bert(tmp_path / 'mb')

@pytest.mark.parametrize('pooling', ['cls', 'mean'])
def test_classifier_equals_transformers_sequence_classification(hf_rope_float64, tmp_path, pooling):
    clf = ModernBertClassifier(random_model(ModernBertEncoder), ['a', 'b', 'c'], pooling, rng=PCG32(1)).double()
    theirs = hf_twin(clf.eval(), tmp_path, AutoModelForSequenceClassification)
    assert type(theirs) is ModernBertForSequenceClassification and theirs.config.classifier_pooling == pooling
    ids, mask = rows()
    z = theirs(input_ids=ids, attention_mask=mask).logits
    assert (clf(ids, mask) - z).abs().max() <= 2 * encoder_tol(CFG, 17, torch.float64, z.abs().max())
    theirs.save_pretrained(tmp_path / 'hf')  # and back: their directory, our classifier
    back = load_modernbert(tmp_path / 'hf')
    assert type(back) is ModernBertClassifier and back.labels == ['a', 'b', 'c'] and back.pooling == pooling
    assert torch.equal(back(ids, mask), clf(ids, mask))
    with pytest.raises(ValueError, match='holds a ModernBertClassifier, not a ModernBertForMLM'):
        load_modernbert(tmp_path / 'hf', ModernBertForMLM)

# --- the unpadding -------------------------------------------------------------------------------------------
def test_a_padded_batch_gives_each_row_what_it_gives_alone():
    enc = random_model(ModernBertEncoder, std=0.1)
    ids, mask = rows()
    h = enc(ids, mask)
    for r, n in enumerate(mask.sum(1).tolist()):
        assert (h[r, :n] - enc(ids[r:r + 1, :n])[0]).abs().max() < 1e-12
    assert torch.equal(enc(ids.masked_fill(mask == 0, 9), mask), h)

def test_layout_computes_the_band_not_the_square():
    c = ModernBertConfig(10, d_model=8, n_heads=2, n_layers=1, window=128)
    b = layout(c, torch.zeros(1, 8192, dtype=torch.long), None, torch.float32)
    assert tuple(b.band.shape) == (128, 1, 64, 192)  # 8,192 queries in blocks of 64, each over 192 keys

def test_padding_row_of_the_word_table_gets_no_gradient_from_padding():
    m = random_model(std=0.1)
    ids, mask = rows()
    m.loss(ids, torch.ones_like(mask), torch.where(ids > 0, ids, -100)).backward()  # padding read as real tokens
    g = m.encoder.tok_emb.weight.grad
    assert g is not None and g[CFG.pad_id].abs().sum() > 0  # the decoder's share (it predicts [PAD] too) ...
    m.zero_grad()
    m.encoder(ids, torch.ones_like(mask)).sum().backward()
    assert m.encoder.tok_emb.weight.grad[CFG.pad_id].abs().sum() == 0  # ... but the lookup's is none: padding_idx

def test_dropout_trains_and_eval_is_deterministic():
    m = ModernBertForMLM(ModernBertConfig(53, d_model=24, n_heads=3, n_layers=2, d_ff=20, window=6, dropout=0.3))
    ids, mask = rows()
    m.train()
    assert not torch.equal(m(ids, mask)[0], m(ids, mask)[0])
    m.eval()
    assert torch.equal(m(ids, mask)[0], m(ids, mask)[0])

# --- bad input -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('kw,msg', [
    (dict(vocab=0), 'vocab must be in'), (dict(vocab=10, d_model=30, n_heads=4), 'even head size'),
    (dict(vocab=10, window=5), 'window must be even'), (dict(vocab=10, global_every=0), 'global_every'),
    (dict(vocab=10, pad_id=10), 'pad_id'), (dict(vocab=10, theta_local=0.5), 'theta_local'),
    (dict(vocab=10, dropout=1.0), 'dropout'), (dict(vocab=10, ln_eps=0.0), 'ln_eps'),
    (dict(vocab=10.0), 'vocab'), (dict(vocab=True), 'vocab')])
def test_config_refuses_what_it_cannot_build(kw, msg):
    with pytest.raises((TypeError, ValueError), match=msg): ModernBertConfig(**kw)

def test_calls_refuse_bad_ids_masks_and_labels():
    m = ModernBertForMLM(CFG)
    ids, mask = rows()
    with pytest.raises(ValueError, match='ids must be a 2-D integer'): m(ids.float())
    with pytest.raises(ValueError, match='ids must be in'): m(ids + CFG.vocab)
    with pytest.raises(ValueError, match='attn_mask must have the shape'): m(ids, mask[:, :5])
    with pytest.raises(ValueError, match='attn_mask must be in'): m(ids, mask * 2)
    with pytest.raises(ValueError, match='labels must be -100 or in'): m(ids, mask, ids + CFG.vocab)
    with pytest.raises(TypeError, match='config must be a ModernBertConfig'): ModernBertEncoder(dict(vocab=3))
    enc = ModernBertEncoder(CFG)
    for bad, msg in [(1, 'labels must be in'), (10**9, 'labels must be in'), (['a', 'a'], 'distinct'),
                     (['a', ''], 'labels must be'), ('ab', 'labels must be')]:
        with pytest.raises(ValueError, match=msg): ModernBertClassifier(enc, bad)
    with pytest.raises(ValueError, match='pooling'): ModernBertClassifier(enc, 2, pooling='max')
    with pytest.raises(ValueError, match='dropout'): ModernBertClassifier(enc, 2, dropout=1.5)
    with pytest.raises(TypeError, match='rng must be a PCG32'): ModernBertClassifier(enc, 2, rng=0)

def test_ids_of_any_integer_type_read_as_bert_reads_them():
    "uint8 and int16 ids (a tokenizer's compact arrays) give int64's logits, as 02's BertEncoder does; meta ids are refused."
    m, (ids, mask) = random_model(ModernBertEncoder), rows()
    want = m(ids, mask)
    for dtype in (torch.uint8, torch.int16, torch.int32):
        assert torch.equal(m(ids.to(dtype), mask), want), dtype
    with pytest.raises(ValueError, match='ids is a meta tensor'): m(ids.to('meta'))

def test_save_refuses_other_models_and_mismatched_tokenizers(tmp_path):
    with pytest.raises(TypeError, match='model must be a ModernBertEncoder'): save_modernbert(torch.nn.Linear(2, 2), tmp_path / 'x')
    tok = WordPieceTokenizer.from_vocab(KJV)
    with pytest.raises(ValueError, match='tok has'): save_modernbert(ModernBertEncoder(CFG), tmp_path / 'x', tok)
    with pytest.raises(TypeError, match='tok must be a WordPieceTokenizer'): save_modernbert(ModernBertEncoder(CFG), tmp_path / 'x', 'vocab.txt')
    assert not (tmp_path / 'x').exists()  # refused before anything was written

@pytest.mark.parametrize('change,msg', [
    (dict(model_type='roberta'), "'roberta' model, not ModernBERT"), (dict(norm_bias=True), 'norm_bias=True'),
    (dict(hidden_activation='gelu_pytorch_tanh'), 'hidden_activation'),
    (dict(layer_types=['full_attention', 'sliding_attention'] * 2 + ['sliding_attention']), 'layer_types'),
    (dict(rope_parameters={'full_attention': {'rope_type': 'linear', 'factor': 2.0, 'rope_theta': 1e4}}), 'rope_type'),
    (dict(mlp_dropout=0.1), 'one dropout rate'), (dict(local_attention=7), 'window must be even'),
    (dict(hidden_size=None), 'bad config')])
def test_load_refuses_configs_it_cannot_build(tmp_path, change, msg):
    save_modernbert(ModernBertEncoder(CFG), tmp_path / 'm')
    p = tmp_path / 'm' / 'config.json'
    p.write_text(json.dumps(json.loads(p.read_text()) | change))
    with pytest.raises(ValueError, match=msg): load_modernbert(tmp_path / 'm')

def test_load_refuses_weights_that_do_not_fit(tmp_path):
    from safetensors.torch import load_file, save_file
    save_modernbert(ModernBertForMLM(CFG), tmp_path / 'm')
    f = tmp_path / 'm' / 'model.safetensors'
    sd = load_file(f)
    for change, msg in [({'model.layers.9.mlp.Wi.weight': torch.zeros(1)}, 'unknown'),
                        ({'model.final_norm.weight': torch.zeros(3)}, 'resized'),
                        ({'decoder.weight': torch.zeros(CFG.vocab, CFG.d_model)}, 'not the word table')]:
        save_file(sd | change, f)
        with pytest.raises(ValueError, match=msg): load_modernbert(tmp_path / 'm')
    save_file({k: v for k, v in sd.items() if 'layers.1.' not in k}, f)
    with pytest.raises(ValueError, match='missing'): load_modernbert(tmp_path / 'm')
    with pytest.raises(TypeError, match='cls must be'): load_modernbert(tmp_path / 'm', torch.nn.Linear)

def test_config_round_trips_through_transformers_dict():
    c = ModernBertConfig(100, d_model=48, n_heads=6, n_layers=7, d_ff=64, window=16, global_every=2,
                         theta_global=5e4, theta_local=2e3, max_len=512, dropout=0.1, ln_eps=1e-6, pad_id=3)
    assert config_from_hf(hf_config(c)) == c
    assert config_from_hf(HFConfig(**hf_config(c)).to_dict()) == c  # as transformers itself writes it

def test_init_scales_each_residual_branchs_last_matrix():
    "N(0, 0.02) everywhere, and std 0.02 / √(2L) for the attention's and the GeGLU's output matrices."
    c = ModernBertConfig(100, d_model=64, n_heads=4, n_layers=8, d_ff=96)
    enc = ModernBertEncoder(c, PCG32(0))
    for l in enc.layers:
        assert abs(l.attn.Wqkv.weight.std().item() / 0.02 - 1) < 0.05
        for w in (l.attn.Wo.weight, l.mlp.Wo.weight): assert abs(w.std().item() / (0.02 / 4) - 1) < 0.05

def test_the_low_level_functions_refuse_what_they_cannot_compute():
    x = torch.zeros(4, 2, 8)
    with pytest.raises(ValueError, match='dh must be even'): rope_tables(torch.arange(4), 7, 1e4)
    with pytest.raises(ValueError, match='pos must be a 1-D'): rope_tables(torch.zeros(2, 2), 8, 1e4)
    with pytest.raises(TypeError, match='theta'): rope_tables(torch.arange(4), 8, 'big')
    with pytest.raises(ValueError, match="x's last size"): rotate(x, *rope_tables(torch.arange(4), 4, 1e4))
    with pytest.raises(ValueError, match='row must be a 1-D integer'): band_bias(torch.zeros(4), 2, 4, torch.float32)
    with pytest.raises(ValueError, match='c must be in'): band_bias(torch.zeros(4, dtype=torch.long), 2, 0, torch.float32)
    bias = band_bias(torch.zeros(4, dtype=torch.long), 2, 4, torch.float32)
    with pytest.raises(ValueError, match='q, k, v must be'): local_attention(x, x[:3], x, bias, 2)
    with pytest.raises(ValueError, match='q, k, v must be'): local_attention(x, x, x, bias, 3)
    assert local_attention(x, x, x, bias, 2).shape == x.shape

# --- bert-nb train --arch modernbert: the same command, budget and files -------------------------------------
TINY = ['--vocab-size', '300', '--max-len', '32', '--batch-size', '8', '--d-model', '32', '--layers', '3',
        '--heads', '2', '--d-ff', '96', '--lr', '3e-3', '--evals', '2', '--quiet', '--arch', 'modernbert']

@pytest.fixture(scope='module')
def modern_run(corpus, tmp_path_factory):
    from bert_nb.command import main
    out = tmp_path_factory.mktemp('runs') / 'modern'
    assert main(['--corpus', str(corpus), '--steps', '30', '--out', str(out)] + TINY) == 0
    return out

def test_train_arch_modernbert_writes_a_modernbert_both_libraries_read(modern_run):
    m = json.loads((modern_run / 'metrics.json').read_text())
    assert m['config']['d_ff'] == 64 and m['steps'] == 30  # GeGLU 2/3 of --d-ff: BERT's parameters
    assert json.loads((modern_run / 'args.json').read_text())['arch'] == 'modernbert'
    assert not (modern_run / 'attention_reach.png').exists()  # BERT's figure; chapter 06 draws ModernBERT's
    losses = [l for _, _, l in m['train']]
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    ours = load_modernbert(modern_run / 'model')
    assert type(ours) is ModernBertForMLM and ours.config.n_layers == 3 and ours.config.max_len == 32
    theirs = AutoModelForMaskedLM.from_pretrained(modern_run / 'model').eval()
    ids = torch.tensor([WordPieceTokenizer.from_vocab(modern_run / 'model').encode('and god said')])
    assert (ours(ids)[0] - theirs(input_ids=ids).logits).abs().max() < 1e-4

def test_eval_and_fill_read_a_modernbert_run(modern_run, capsys):
    from bert_nb.command import main
    assert main(['eval', str(modern_run)]) == 0
    got = json.loads(capsys.readouterr().out)
    want = json.loads((modern_run / 'metrics.json').read_text())['held_out']
    assert got == {k: want[k] for k in ('loss', 'acc', 'n')}  # the same weights, masks and operations
    assert main(['fill', str(modern_run), 'and god said , let there be [MASK] .', '--top-k', '3']) == 0
    assert capsys.readouterr().out.startswith('[MASK] 1:')

def test_a_modernbert_run_resumes_bit_for_bit(corpus, modern_run, tmp_path):
    from bert_nb.command import main
    args = ['--corpus', str(corpus), '--steps', '8', '--vocab', str(modern_run / 'vocab.txt')] + TINY
    assert main(args + ['--out', str(tmp_path / 'whole')]) == 0
    assert main(args + ['--out', str(tmp_path / 'parts'), '--stop-at', '3']) == 0
    assert main(['train', '--resume', str(tmp_path / 'parts'), '--quiet']) == 0
    a, b = (load_modernbert(tmp_path / d / 'model') for d in ('whole', 'parts'))
    for (n, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()): assert torch.equal(x, y), n

@pytest.mark.parametrize('extra,says', [(['--sin-pos'], "--sin-pos is BERT's"),
                                        (['--heads', '3', '--d-model', '33'], 'bad model settings')])
def test_train_arch_modernbert_refuses_what_it_cannot_build(corpus, tmp_path, capsys, extra, says):
    from bert_nb.command import main
    assert main(['--corpus', str(corpus), '--steps', '2', '--out', str(tmp_path / 'o')] + TINY + extra) == 2
    assert says in capsys.readouterr().err and not (tmp_path / 'o').exists()

def test_train_window_is_the_local_layers_reach_both_libraries_read(corpus, tmp_path):
    """--window 8: the saved model's local layers read 4 tokens on each side, as bert-nb and transformers load it
    (transformers' sliding window, its own code, agrees with ours on rows of 32, longer than the window)."""
    from bert_nb.command import main
    out = tmp_path / 'w8'
    assert main(['--corpus', str(corpus), '--steps', '3', '--window', '8', '--out', str(out)] + TINY) == 0
    assert json.loads((out / 'args.json').read_text())['window'] == 8
    ours = load_modernbert(out / 'model')
    assert ours.config.window == 8
    theirs = AutoModelForMaskedLM.from_pretrained(out / 'model', attn_implementation='eager').eval()
    assert theirs.config.local_attention == 8
    ids = torch.tensor([WordPieceTokenizer.from_vocab(out / 'model').encode(' '.join(['and god said'] * 8))[:32]])
    assert (ours(ids)[0] - theirs(input_ids=ids).logits).abs().max() < 1e-4

@pytest.mark.parametrize('extra,says', [(['--arch', 'bert', '--window', '16'], "--window is ModernBERT's"),
                                        (['--window', '15'], 'argument --window: must be even'), (['--window', '0'], 'must be >= 2')])
def test_train_refuses_a_window_it_cannot_build(corpus, tmp_path, capsys, extra, says):
    from bert_nb.command import main
    assert main(['--corpus', str(corpus), '--steps', '2', '--out', str(tmp_path / 'o')] + TINY + extra) == 2
    assert says in capsys.readouterr().err and not (tmp_path / 'o').exists()

RUN = ['--steps', '4', '--max-len', '32', '--batch-size', '8', '--lr', '3e-3', '--evals', '2', '--quiet']

def test_init_continues_a_modernbert_and_resumes_bit_for_bit(corpus, modern_run, tmp_path):
    """--init of a ModernBERT's directory continues it: its architecture and sizes from its config.json (--d-ff
    back as the command spells it: 96 for a GeGLU of 64), its weights at step 0 (held-out loss as its run ended)."""
    from bert_nb.command import main
    args = ['--corpus', str(corpus), '--init', str(modern_run / 'model')] + RUN
    assert main(args + ['--out', str(tmp_path / 'whole')]) == 0
    a = json.loads((tmp_path / 'whole' / 'args.json').read_text())
    assert (a['arch'], a['d_model'], a['layers'], a['heads'], a['d_ff']) == ('modernbert', 32, 3, 2, 96)
    m, before = (json.loads((d / 'metrics.json').read_text()) for d in (tmp_path / 'whole', modern_run))
    assert m['eval'][0]['step'] == 0 and m['eval'][0]['loss'] == before['held_out']['loss']  # same model, data, masks
    assert m['init']['dropped'] == m['init']['initialised'] == []
    assert type(load_modernbert(tmp_path / 'whole' / 'model')) is ModernBertForMLM
    assert main(args + ['--out', str(tmp_path / 'parts'), '--stop-at', '2']) == 0
    assert main(['train', '--resume', str(tmp_path / 'parts'), '--quiet']) == 0
    x, y = (load_modernbert(tmp_path / d / 'model') for d in ('whole', 'parts'))
    for (n, u), (_, v) in zip(x.state_dict().items(), y.state_dict().items()): assert torch.equal(u, v), n

def test_init_refuses_an_arch_that_is_not_the_checkpoints(corpus, modern_run, tmp_path, capsys):
    from bert_nb.command import main
    for arch, d in (('bert', modern_run / 'model'), ('modernbert', KJV)):
        out = tmp_path / arch
        assert main(['--corpus', str(corpus), '--init', str(d), '--arch', arch, '--out', str(out)] + RUN) == 2
        other = 'bert' if arch == 'modernbert' else 'modernbert'
        assert f'holds a {other} model; drop --arch' in capsys.readouterr().err and not out.exists()

def test_a_resumed_run_with_an_unknown_arch_is_refused(modern_run, tmp_path, capsys):
    import shutil
    from bert_nb.command import main
    shutil.copytree(modern_run, tmp_path / 'r')
    (tmp_path / 'r' / 'metrics.json').unlink()  # as if cut short: resumable
    p = tmp_path / 'r' / 'args.json'
    p.write_text(json.dumps(json.loads(p.read_text()) | {'arch': 'gpt'}))
    assert main(['train', '--resume', str(tmp_path / 'r'), '--quiet']) == 2
    assert "arch must be one of ['bert', 'modernbert']" in capsys.readouterr().err

# #56: a directory is checked against its config before anything is built from it
@pytest.mark.parametrize('change', [{'vocab_size': 10**13}, {'hidden_size': 2**31}, {'vocab_size': 50_000_000},
                                    {'num_hidden_layers': 200_000, 'layer_types': None}])
def test_load_checks_sizes_before_it_builds(tmp_path, monkeypatch, change):
    "A config far larger than its weights is refused from the file's shapes: no model of that size is ever built."
    import bert_nb.modernbert_files as mb
    d = edited(save_modernbert(ModernBertForMLM(CFG), tmp_path / 'm'), tmp_path / 'e', change)
    def built(*a, **k): raise AssertionError('a model was built before the weights were checked')
    for name in ('ModernBertEncoder', 'ModernBertForMLM', 'ModernBertClassifier'): monkeypatch.setattr(mb, name, built)
    with pytest.raises(ValueError, match='config'): load_modernbert(d)  # the file's shapes, or the config itself

@pytest.mark.parametrize('cls_,config,weights,msg', [
    (True, {'id2label': {'0': 'a', '1': 'b', '2': 'c'}}, None, "id2label must name the classifier's 2 labels"),
    (True, None, {'classifier.weight': torch.zeros(3, 24)}, 'resized'),
    (True, None, {'classifier.bias': torch.zeros(2, 1)}, 'resized'),
    (False, None, {'head.dense.weight': torch.zeros(24, 25)}, 'resized'),
    (False, None, {'decoder.bias': torch.zeros(7)}, 'resized'),
    (False, None, {'model.embeddings.tok_embeddings.weight': torch.zeros(53, 24).long()}, 'one float type'),
    (False, None, {'head.norm.weight': None}, 'without its other half'),
    (False, {k: [0.1] for k in ('embedding_dropout', 'attention_dropout', 'mlp_dropout')}, None, 'must be a number'),
    (False, {'rope_parameters': [1, 2]}, None, 'rope_parameters must be a dict'),
    (False, {'rope_parameters': {'full_attention': 'x'}}, None, "rope_type 'default'"),
    (False, {'rope_parameters': {'rope_type': 'linear', 'factor': 4.0, 'rope_theta': 5.0}}, None, "rope_type 'default'"),
    (False, {'pad_token_id': False}, None, 'pad_id'), (False, {'layer_types': 'full_attention'}, None, 'a list'),
    (True, {'classifier_pooling': 'max'}, None, 'pooling'), (True, {'classifier_dropout': 2}, None, 'dropout')])
def test_load_refuses_what_it_would_misread(tmp_path, cls_, config, weights, msg):
    "Heads, types and settings that used to end in a torch traceback, or load as something else, are refused by name."
    model = ModernBertClassifier(ModernBertEncoder(CFG), 2) if cls_ else ModernBertForMLM(CFG)
    d = edited(save_modernbert(model, tmp_path / 'm'), tmp_path / 'e', config, weights)
    with pytest.raises(ValueError, match=msg): load_modernbert(d)

def test_a_flat_plain_rope_serves_both_layer_types(tmp_path):
    "A flat rope_parameters of rope_type 'default' is read as transformers reads it: its θ in every layer."
    d = edited(save_modernbert(ModernBertForMLM(CFG), tmp_path / 'm'), tmp_path / 'e',
              {'rope_parameters': {'rope_type': 'default', 'rope_theta': 500.0}})
    c = load_modernbert(d).encoder.config
    assert (c.theta_global, c.theta_local) == (500.0, 500.0)

def test_fill_refuses_an_encoder_without_its_head(tmp_path):
    "bert-nb fill of a ModernBERT encoder is refused, one line, exit 2, as BERT's is (it filled from a random head)."
    import subprocess, sys
    from pathlib import Path
    tok = WordPieceTokenizer.from_tokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(48)])
    d = save_modernbert(ModernBertEncoder(CFG), tmp_path / 'enc', tok)
    r = subprocess.run([str(Path(sys.executable).parent / 'bert-nb'), 'fill', str(d), 'w1 [MASK] w2'],
                       capture_output=True, text=True)
    assert r.returncode == 2 and 'without its MLM head' in r.stderr and len(r.stderr.strip().splitlines()) == 1

def test_dropout_sits_where_transformers_puts_it(tmp_path):
    """Each dropout reads what transformers' ModernBERT drops, seen by forward hooks: the embeddings after their norm,
    GeGLU's gated product before W_o, each attention's output projection on the local path and the global one, and a
    classifier's head output before the linear layer; and a save at a rate other than 0 loads at that rate."""
    import dataclasses
    clf = ModernBertClassifier(ModernBertEncoder(dataclasses.replace(CFG, dropout=0.25)), 2, dropout=0.3).eval()
    seen = {}
    for name, m in clf.named_modules():
        m.register_forward_hook(lambda m, i, o, name=name: seen.setdefault(name, []).append((i[0], o)))
    ids, mask = rows()
    clf(ids, mask)
    got = lambda name: seen[name][0][0]  # a module's input
    made = lambda name: seen[name][0][1]  # and its output
    assert torch.equal(got('encoder.drop'), made('encoder.emb_norm'))
    for i in range(CFG.n_layers):
        L = f'encoder.layers.{i}.'
        assert torch.equal(got(L + 'mlp.Wo'), made(L + 'mlp.drop')) and got(L + 'mlp.drop').shape[-1] == CFG.d_ff
        assert torch.equal(got(L + 'attn.drop'), made(L + 'attn.Wo'))  # local layers (1, 2, 4) and global (0, 3)
    assert torch.equal(got('drop'), made('head')) and torch.equal(got('classifier'), made('drop'))
    back = load_modernbert(save_modernbert(clf, tmp_path / 'm'))
    rates = {n: m.p for n, m in back.named_modules() if isinstance(m, torch.nn.Dropout)}
    assert rates.pop('drop') == 0.3 and set(rates.values()) == {0.25} and back.encoder.config.dropout == 0.25

def test_what_is_not_a_config_or_a_stream_is_refused_by_name():
    "ModernBertForMLM(cfg, 5) and hf_config(dict) were AttributeErrors deep inside."
    with pytest.raises(TypeError, match='rng must be a PCG32, got int'): ModernBertForMLM(CFG, 5)
    with pytest.raises(TypeError, match='rng must be a PCG32'): ModernBertEncoder(CFG, 'seed')
    with pytest.raises(TypeError, match='c must be a ModernBertConfig, got dict'): hf_config({})
