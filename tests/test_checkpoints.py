"Checkpoints: transformers is the oracle for Hugging Face weights; our own format must come back bit for bit."
import copy, json, os
from pathlib import Path
import pytest
import torch
import transformers
from transformers import BertConfig as HFConfig, BertForMaskedLM, BertModel, BertForPreTraining
import bert_nb.bert as bert
from bert_nb.bert import (BertConfig, BertEncoder, BertForMLM, hf_bert_encoder_sd, load_hf_bert, from_hf_pretrained,
                          save_hf_bert, save_bert, load_bert, mlm_batch)
from bert_nb.rng import PCG32
from bert_nb.wordpiece import SPECIALS, WordPieceTokenizer
from tol import encoder_tol, grad_tol, loss_tol

transformers.logging.set_verbosity_error()

def tiny_hf(cls=BertForMaskedLM, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = HFConfig(**(dict(vocab_size=53, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
                           max_position_embeddings=16, attn_implementation='eager') | kw))
    m = cls(cfg).eval()
    with torch.no_grad():  # every tensor random: a zero bias or a unit LN weight would hide a routing fault
        for p in m.parameters(): p.add_(torch.randn_like(p) * 0.1)
    return m, cfg

def our_config(cfg):
    return BertConfig(cfg.vocab_size, max_len=cfg.max_position_embeddings, d_model=cfg.hidden_size, n_heads=cfg.num_attention_heads,
                      n_layers=cfg.num_hidden_layers, d_ff=cfg.intermediate_size, type_vocab=cfg.type_vocab_size, dropout=0.0)

def batch(V=53):
    ids = torch.tensor([[2, 9, 17, 23, 41, 3, 0, 0], [2, 30, 11, 3, 12, 13, 50, 3], [2, 5, 3, 0, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    types = torch.tensor([[0] * 8, [0, 0, 0, 0, 1, 1, 1, 1], [0] * 8])
    labels = torch.full_like(ids, -100); labels[0, [1, 4]] = ids[0, [1, 4]]; labels[1, [2, 5]] = torch.tensor([7, 52]); labels[2, 1] = 5
    return ids, types, mask, labels

# our parameter -> the transformers module attribute it must equal, written out here independently of the module's key map
def hf_param(hf, ours: str):
    m = hf.bert if hasattr(hf, 'bert') else hf
    parts = ours.removeprefix('encoder.').split('.')
    if parts[0] == 'head':
        t = hf.cls.predictions
        return {'bias': t.bias, 'dense': getattr(t.transform.dense, parts[-1], None), 'ln': getattr(t.transform.LayerNorm, parts[-1], None)}[parts[1]]
    if parts[0] in ('word_emb', 'pos_emb', 'type_emb'):
        return {'word_emb': m.embeddings.word_embeddings, 'pos_emb': m.embeddings.position_embeddings, 'type_emb': m.embeddings.token_type_embeddings}[parts[0]].weight
    if parts[0] == 'emb_ln': return getattr(m.embeddings.LayerNorm, parts[1])
    L = m.encoder.layer[int(parts[1])]
    mod = {'attn.q': L.attention.self.query, 'attn.k': L.attention.self.key, 'attn.v': L.attention.self.value, 'attn.o': L.attention.output.dense,
           'attn_ln': L.attention.output.LayerNorm, 'ff_in': L.intermediate.dense, 'ff_out': L.output.dense, 'ff_ln': L.output.LayerNorm}['.'.join(parts[2:-1])]
    return getattr(mod, parts[-1])

@pytest.mark.parametrize('kw', [{}, dict(num_hidden_layers=3, hidden_size=32, num_attention_heads=4, intermediate_size=20, type_vocab_size=3)])
def test_golden_hf_bert(kw):
    hf, cfg = tiny_hf(**kw)
    hf = hf.double()  # float64 on both sides: the claim is the same formula, so the bound is float64 rounding
    c = our_config(cfg)
    ours = load_hf_bert(BertForMLM(c).double(), hf.state_dict()).eval()
    for n, p in ours.named_parameters(): assert torch.equal(p, hf_param(hf, n)), n
    ids, types, mask, labels = batch()
    out = hf(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
    logits, loss = ours(ids, types, mask, labels)
    r, T = mask.bool(), ids.shape[1]
    scale = out.logits[r].abs().max().item()
    torch.testing.assert_close(logits[r], out.logits[r], rtol=0, atol=encoder_tol(c, T, torch.float64, scale))
    torch.testing.assert_close(loss, out.loss, rtol=0, atol=loss_tol(c, T, torch.float64, scale))
    torch.testing.assert_close(ours.loss(ids, types, mask, labels), out.loss, rtol=0,
                               atol=loss_tol(c, T, torch.float64, scale))
    out.loss.backward(); loss.backward()
    g = max(p.grad.abs().max().item() for p in hf.parameters() if p.grad is not None)
    for n, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, hf_param(hf, n).grad, rtol=0, atol=grad_tol(c, T, ids.numel(), torch.float64, g),
                                   msg=n)

def handmade_sd(model: BertForMLM, legacy=False, prefix='bert.'):
    "A Hugging Face-named state dict written key by key from our parameters."
    P = dict(model.named_parameters()); g, b = ('gamma', 'beta') if legacy else ('weight', 'bias')
    sd = {f'{prefix}embeddings.word_embeddings.weight': P['encoder.word_emb.weight'], f'{prefix}embeddings.position_embeddings.weight': P['encoder.pos_emb.weight'],
          f'{prefix}embeddings.token_type_embeddings.weight': P['encoder.type_emb.weight'],
          f'{prefix}embeddings.LayerNorm.{g}': P['encoder.emb_ln.weight'], f'{prefix}embeddings.LayerNorm.{b}': P['encoder.emb_ln.bias'],
          f'{prefix}embeddings.position_ids': torch.arange(model.config.max_len)[None]}
    for i in range(model.config.n_layers):
        L = f'{prefix}encoder.layer.{i}.'; o = f'encoder.layers.{i}.'
        for hf, us in [('attention.self.query', 'attn.q'), ('attention.self.key', 'attn.k'), ('attention.self.value', 'attn.v'),
                       ('attention.output.dense', 'attn.o'), ('intermediate.dense', 'ff_in'), ('output.dense', 'ff_out')]:
            sd[L + hf + '.weight'], sd[L + hf + '.bias'] = P[o + us + '.weight'], P[o + us + '.bias']
        for hf, us in [('attention.output.LayerNorm', 'attn_ln'), ('output.LayerNorm', 'ff_ln')]:
            sd[L + hf + '.' + g], sd[L + hf + '.' + b] = P[o + us + '.weight'], P[o + us + '.bias']
    sd |= {'cls.predictions.bias': P['head.bias'], 'cls.predictions.transform.dense.weight': P['head.dense.weight'],
           'cls.predictions.transform.dense.bias': P['head.dense.bias'], f'cls.predictions.transform.LayerNorm.{g}': P['head.ln.weight'],
           f'cls.predictions.transform.LayerNorm.{b}': P['head.ln.bias'], 'cls.predictions.decoder.weight': P['encoder.word_emb.weight'],
           f'{prefix}pooler.dense.weight': torch.zeros(3, 3), 'cls.seq_relationship.weight': torch.zeros(2, 3)}
    return {k: v.detach().clone() for k, v in sd.items()}

CFG = BertConfig(37, max_len=12, d_model=16, n_heads=4, n_layers=2, d_ff=24, type_vocab=3, dropout=0.0)

def random_ours(seed=0, cfg=CFG):
    torch.manual_seed(seed)
    m = BertForMLM(cfg).eval()
    with torch.no_grad():
        for p in m.parameters(): p.normal_()
    return m

@pytest.mark.parametrize('legacy,prefix', [(False, 'bert.'), (True, 'bert.'), (False, ''), (True, '')])
def test_handmade_state_dict(legacy, prefix):
    src = random_ours(1)
    dst = load_hf_bert(BertForMLM(CFG), handmade_sd(src, legacy, prefix))
    for (n, a), (_, b) in zip(src.named_parameters(), dst.named_parameters()): assert torch.equal(a, b), n
    enc_sd = hf_bert_encoder_sd(handmade_sd(src, legacy, prefix))
    assert list(enc_sd) == [n for n, _ in BertEncoder(CFG).named_parameters()]
    assert torch.equal(enc_sd['layers.1.ff_ln.weight'], src.encoder.layers[1].ff_ln.weight)
    enc = load_hf_bert(BertEncoder(CFG), handmade_sd(src, legacy, prefix))
    assert torch.equal(enc.layers[0].attn.v.bias, src.encoder.layers[0].attn.v.bias)

def test_pretraining_keys_and_bin(tmp_path):
    hf, cfg = tiny_hf(BertForPreTraining)
    ours = load_hf_bert(BertForMLM(our_config(cfg)), hf.state_dict()).eval()  # float32: from the files below
    assert torch.equal(ours.head.bias, hf.cls.predictions.bias)
    (tmp_path / 'config.json').write_text(json.dumps(cfg.to_dict()))
    torch.save(hf.state_dict(), tmp_path / 'pytorch_model.bin')
    m = from_hf_pretrained(tmp_path)
    assert type(m) is BertForMLM and not m.training
    for n, p in m.named_parameters(): assert torch.equal(p, hf_param(hf, n)), n  # read from the .bin exactly
    ids, types, mask, _ = batch()
    m, hf = m.double(), hf.double()
    want = hf(input_ids=ids, token_type_ids=types, attention_mask=mask).prediction_logits[mask.bool()]
    torch.testing.assert_close(m(ids, types, mask)[0][mask.bool()], want, rtol=0,
                               atol=encoder_tol(m.config, ids.shape[1], torch.float64, want.abs().max().item()))
    assert type(from_hf_pretrained(tmp_path, cls=BertEncoder)) is BertEncoder

@pytest.fixture(scope='module')
def minilm(minilm_dir):
    return from_hf_pretrained(minilm_dir), BertModel.from_pretrained(minilm_dir).eval(), WordPieceTokenizer.from_vocab(minilm_dir / 'vocab.txt')

def test_real_minilm(minilm):
    ours, ref, tok = minilm
    assert type(ours) is BertEncoder and ours.config == BertConfig(30522, 512, 384, 12, 6, 1536, 2, 0.1, 1e-12)
    texts = ['The quick brown fox jumps over the lazy dog.', ('Who wrote Hamlet?', 'William Shakespeare wrote it around 1600.'),
             'BERT is bidirectional: every token attends to every other one.', 'Ünïcödé àccents, 中文, and emoji 🙂 too']
    b = mlm_batch(tok, texts, 64, 0.0, PCG32(0))
    ids, types, mask = (torch.from_numpy(b[k]) for k in ('input_ids', 'token_type_ids', 'attention_mask'))
    with torch.no_grad():  # float64 copies (the fixture stays float32): the same formula, float64 rounding the bound
        h = copy.deepcopy(ours).double()(ids, types, mask)
        want = copy.deepcopy(ref).double()(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
    r = mask.bool()
    tol = encoder_tol(ours.config, ids.shape[1], torch.float64, want[r].abs().max().item())
    torch.testing.assert_close(h[r], want[r], rtol=0, atol=tol)

def test_save_hf_bert_loads_in_transformers(tmp_path):
    m = random_ours(2)
    save_hf_bert(m, tmp_path / 'mlm')
    hf, info = BertForMaskedLM.from_pretrained(tmp_path / 'mlm', output_loading_info=True)
    assert not info['missing_keys'] and not info['unexpected_keys'] and not info['mismatched_keys']
    ids, types, mask, _ = batch(37)
    ids, r = ids % 37, mask.bool()
    for n, p in m.named_parameters(): assert torch.equal(p, hf_param(hf, n)), n  # written and read exactly
    m64 = copy.deepcopy(m).double()  # and the same formula: float64 on both sides
    tol = lambda want: encoder_tol(m.config, ids.shape[1], torch.float64, want.abs().max().item())
    with torch.no_grad():
        want = hf.double().eval()(input_ids=ids, token_type_ids=types, attention_mask=mask).logits[r]
        torch.testing.assert_close(m64(ids, types, mask)[0][r], want, rtol=0, atol=tol(want))
    save_hf_bert(m.encoder, tmp_path / 'enc')
    hm, info = BertModel.from_pretrained(tmp_path / 'enc', output_loading_info=True)
    assert set(info['missing_keys']) == {'pooler.dense.weight', 'pooler.dense.bias'} and not info['unexpected_keys']
    with torch.no_grad():
        want = hm.double().eval()(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state[r]
        torch.testing.assert_close(m64.encoder(ids, types, mask)[r], want, rtol=0, atol=tol(want))
    back = from_hf_pretrained(tmp_path / 'mlm')  # and back into ours
    for (n, a), (_, b) in zip(m.named_parameters(), back.named_parameters()): assert torch.equal(a, b), n

def test_load_encoder_alone_and_roundtrip(tmp_path, minilm_dir):
    m = random_ours(3)
    tok = WordPieceTokenizer.from_tokens(list(SPECIALS) + [f'w{i}' for i in range(32)])  # the model's 37 ids
    save_bert(m, tmp_path / 'm', tok=tok)
    assert sorted(os.listdir(tmp_path / 'm')) == ['config.json', 'model.safetensors', 'special_tokens_map.json',
                                                  'tokenizer.json', 'tokenizer_config.json', 'vocab.txt']
    assert WordPieceTokenizer.from_vocab(tmp_path / 'm').tokens() == tok.tokens()
    with pytest.raises(ValueError, match="tok has 30522 tokens but the model's vocab is 37"):
        save_bert(m, tmp_path / 'x', tok=WordPieceTokenizer.from_vocab(minilm_dir))
    back = load_bert(tmp_path / 'm')
    assert type(back) is BertForMLM and back.config == m.config and not back.training
    ids, types, mask, labels = batch(37); ids = ids % 37
    assert torch.equal(back(ids, types, mask)[0], m(ids, types, mask)[0])
    for (n, a), (_, b) in zip(m.state_dict().items(), back.state_dict().items()): assert torch.equal(a, b), n
    enc = load_bert(tmp_path / 'm', cls=BertEncoder)
    assert type(enc) is BertEncoder and torch.equal(enc(ids, types, mask), m.encoder(ids, types, mask))
    # the tie survives: the decoder is still the word table
    from safetensors import safe_open
    with safe_open(tmp_path / 'm' / 'model.safetensors', 'pt') as f:
        assert sum('word_embeddings' in k or 'decoder.weight' in k for k in f.keys()) == 1
    back = back.double()  # float64, to check the change below against its formula
    with torch.no_grad():
        before = back(ids, types, mask)[0]
        x = back.head.transform(back.encoder(ids, types, mask))  # what the decoder reads (word 20 is not in ids)
        v = torch.randn(16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        back.encoder.word_emb.weight[20] += v
        after = back(ids, types, mask)[0]
    torch.testing.assert_close(after[..., 20] - before[..., 20], x @ v, rtol=0,  # logit 20 moves by x . v
                               atol=encoder_tol(m.config, ids.shape[1], torch.float64, before.abs().max().item()))
    assert torch.equal(after[..., :20], before[..., :20]) and torch.equal(after[..., 21:], before[..., 21:])
    save_bert(m.encoder, tmp_path / 'e')
    assert torch.equal(load_bert(tmp_path / 'e', cls=BertEncoder)(ids), m.encoder(ids))
    with pytest.raises(ValueError, match='no MLM head'): load_bert(tmp_path / 'e', cls=BertForMLM)
    assert type(load_bert(tmp_path / 'e')) is BertEncoder  # what the directory holds

def test_save_replaces_an_earlier_model_whole(tmp_path):
    a, b = random_ours(4), random_ours(5, BertConfig(37, max_len=12, d_model=8, n_heads=2, n_layers=1, d_ff=8))
    save_bert(a, tmp_path / 'm'); save_bert(b, tmp_path / 'm')
    back = load_bert(tmp_path / 'm')
    assert back.config == b.config and torch.equal(back.head.bias, b.head.bias)
    assert sorted(os.listdir(tmp_path)) == ['m']  # no temporary directory left behind
    (tmp_path / 'empty').mkdir(); save_bert(a, tmp_path / 'empty')
    assert torch.equal(load_bert(tmp_path / 'empty').head.bias, a.head.bias)

def test_interrupted_save_keeps_the_previous_model(tmp_path, monkeypatch):
    old, new = random_ours(6), random_ours(7)
    save_bert(old, tmp_path / 'm')
    real = bert.write_safetensors
    def half_then_crash(path, sd):
        real(path, sd)
        with open(path, 'r+b') as f: f.truncate(os.path.getsize(path) // 2)  # half a file on disk ...
        raise OSError('disk full')                                          # ... and the writer dies
    monkeypatch.setattr(bert, 'write_safetensors', half_then_crash)
    with pytest.raises(OSError, match='disk full'): save_bert(new, tmp_path / 'm')
    monkeypatch.setattr(bert, 'write_safetensors', real)
    assert torch.equal(load_bert(tmp_path / 'm').head.bias, old.head.bias)
    assert sorted(os.listdir(tmp_path)) == ['m']

def test_save_keeps_the_other_files(tmp_path):
    "A model directory may hold more than the model (a later chapter's head, notes): a save replaces only the model."
    d = tmp_path / 'd'; (d / 'head').mkdir(parents=True)
    (d / 'notes.txt').write_text('mine'); (d / 'head' / 'w.bin').write_bytes(b'123')
    a, b = random_ours(1), random_ours(2)
    save_bert(a, d, tok=WordPieceTokenizer.from_tokens(list(SPECIALS) + [f'w{i}' for i in range(32)]))
    save_bert(b, d)  # no tokenizer this time: the earlier vocab.txt is the model's, and goes
    assert sorted(os.listdir(d)) == ['config.json', 'head', 'model.safetensors', 'notes.txt']  # tokenizer files: gone
    assert (d / 'notes.txt').read_text() == 'mine' and (d / 'head' / 'w.bin').read_bytes() == b'123'
    assert torch.equal(load_bert(d).head.bias, b.head.bias)
    assert sorted(os.listdir(tmp_path)) == ['d']
    (tmp_path / 'f').write_text('x')
    with pytest.raises(ValueError, match='not a directory'): save_bert(random_ours(), tmp_path / 'f')

def test_loader_errors():
    hf, cfg = tiny_hf()
    sd = hf.state_dict()
    with pytest.raises(TypeError, match='BertEncoder or BertForMLM'): load_hf_bert(torch.nn.Linear(2, 2), sd)
    with pytest.raises(TypeError): load_hf_bert(hf, sd)
    missing = {k: v for k, v in sd.items() if k != 'bert.encoder.layer.1.attention.self.value.bias'}
    with pytest.raises(ValueError, match='encoder.layer.1.attention.self.value.bias'): load_hf_bert(BertForMLM(our_config(cfg)), missing)
    with pytest.raises(ValueError, match='encoder.layer.1.attention.self.value.bias'): hf_bert_encoder_sd(missing)
    wrong = dict(sd); wrong['bert.encoder.layer.0.intermediate.dense.weight'] = torch.zeros(41, 24)
    with pytest.raises(ValueError, match=r'encoder.layer.0.intermediate.dense.weight \(41, 24\)'): load_hf_bert(BertForMLM(our_config(cfg)), wrong)
    with pytest.raises(ValueError, match='lacks'): load_hf_bert(BertForMLM(BertConfig(53, 16, 24, 3, 3, 40)), sd)  # model deeper than checkpoint
    with pytest.raises(ValueError, match='not BERT'): load_hf_bert(BertForMLM(BertConfig(53, 16, 24, 3, 1, 40)), sd)  # shallower
    extra = dict(sd); extra['bert.encoder.adapter.weight'] = torch.zeros(2)
    with pytest.raises(ValueError, match='bert.encoder.adapter.weight|encoder.adapter.weight'): load_hf_bert(BertForMLM(our_config(cfg)), extra)
    load_hf_bert(BertForMLM(our_config(cfg)), extra, strict=False)
    untied = dict(sd); untied['cls.predictions.decoder.weight'] = sd['cls.predictions.decoder.weight'] + 1
    with pytest.raises(ValueError, match='decoder.weight'): load_hf_bert(BertForMLM(our_config(cfg)), untied)

def test_encoder_only_checkpoint_into_mlm():
    hf, cfg = tiny_hf(BertModel)
    model = BertForMLM(our_config(cfg))
    head = model.head.dense.weight.detach().clone()
    with pytest.raises(ValueError, match='cls.predictions'): load_hf_bert(model, hf.state_dict())
    assert torch.equal(model.head.dense.weight, head)
    assert not torch.equal(model.encoder.word_emb.weight, hf.embeddings.word_embeddings.weight)  # all or nothing: nothing copied
    with pytest.warns(UserWarning, match=r'initialised 5 \(head.dense.weight'):
        load_hf_bert(model, hf.state_dict(), strict=False)
    assert sorted(model.load_report.initialised) == sorted(bert.HF_HEAD_NAMES.values())
    assert torch.equal(model.head.dense.weight, head) and torch.equal(model.encoder.word_emb.weight, hf.embeddings.word_embeddings.weight)

def test_config_errors(tmp_path):
    hf, cfg = tiny_hf()
    d = cfg.to_dict()
    assert BertConfig.from_hf(d) == BertConfig(53, 16, 24, 3, 2, 40, 2, 0.1, 1e-12)
    assert BertConfig.from_hf(BertConfig.to_hf(our_config(cfg))) == our_config(cfg)
    for bad, msg in [({'hidden_act': 'relu'}, 'hidden_act'), ({'hidden_act': 'gelu_new'}, 'hidden_act'),
                     ({'position_embedding_type': 'relative_key'}, 'position_embedding_type'), ({'model_type': 'roberta'}, 'model_type')]:
        with pytest.raises(ValueError, match=msg): BertConfig.from_hf(d | bad)
    save_hf_bert(random_ours(), tmp_path / 'h')
    cj = json.loads((tmp_path / 'h' / 'config.json').read_text()); cj['hidden_act'] = 'silu'
    (tmp_path / 'h' / 'config.json').write_text(json.dumps(cj))
    with pytest.raises(ValueError, match='hidden_act'): from_hf_pretrained(tmp_path / 'h')

def test_load_bert_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match='nowhere'): load_bert(tmp_path / 'nowhere')
    save_bert(random_ours(), tmp_path / 'm')
    st = tmp_path / 'm' / 'model.safetensors'; data = st.read_bytes()
    st.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match='model.safetensors'): load_bert(tmp_path / 'm')
    st.write_bytes(b'\xff' * 64 + data[64:])
    with pytest.raises(ValueError, match='model.safetensors'): load_bert(tmp_path / 'm')
    st.write_bytes(data)
    cfg = tmp_path / 'm' / 'config.json'; meta = json.loads(cfg.read_text())
    cfg.write_text(json.dumps(meta | {'intermediate_size': 99}))
    with pytest.raises(ValueError, match='ff_in.weight'): load_bert(tmp_path / 'm')
    cfg.write_text(json.dumps(meta | {'num_hidden_layers': 3}))
    with pytest.raises(ValueError, match='the weights have 2 layers, the config 3'): load_bert(tmp_path / 'm')
    for huge in ({'num_hidden_layers': 10**9}, {'vocab_size': 10**12}, {'hidden_size': 2**20, 'num_attention_heads': 1}):
        cfg.write_text(json.dumps(meta | huge))  # refused before a model that size is built
        with pytest.raises(ValueError, match='does not match its config'): load_bert(tmp_path / 'm')
    cfg.write_text('{not json')
    with pytest.raises(ValueError, match='config.json'): load_bert(tmp_path / 'm')
    cfg.unlink()
    with pytest.raises(FileNotFoundError, match='config.json'): load_bert(tmp_path / 'm')
    st.unlink(); cfg.write_text(json.dumps(meta))
    with pytest.raises(FileNotFoundError, match='model.safetensors'): load_bert(tmp_path / 'm')
    with pytest.raises(TypeError): load_bert(tmp_path / 'm', cls=torch.nn.Linear)
    with pytest.raises(TypeError): save_bert(torch.nn.Linear(2, 2), tmp_path / 'x')

def test_older_directories_still_load(tmp_path):
    "A directory bert-nb wrote in its own format, before it wrote transformers': it loads, bit for bit."
    old = Path(__file__).parent / 'fixtures' / 'bert_nb_v1'
    from safetensors.torch import load_file
    m, want = load_bert(old), load_file(old / 'model.safetensors')
    assert type(m) is BertForMLM and not m.training
    assert all(torch.equal(p, want[n]) for n, p in m.state_dict().items()) and len(want) == len(m.state_dict())
    tok = WordPieceTokenizer.from_vocab(old)
    save_bert(m, tmp_path / 'new', tok)  # ... and saves in the one format
    back = load_bert(tmp_path / 'new')
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), back.state_dict().values()))

def test_bert_nb_reads_transformers_directories(tmp_path, minilm_dir):
    "What transformers' save_pretrained writes (model and tokenizer) loads into bert-nb, with a report."
    from transformers import BertForSequenceClassification, BertTokenizerFast
    ref = BertTokenizerFast(str(minilm_dir / 'vocab.txt'))
    cfg = HFConfig(vocab_size=len(ref), hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
                   max_position_embeddings=24)
    torch.manual_seed(0)
    hf = BertForMaskedLM(cfg).eval()
    with torch.no_grad(): hf.cls.predictions.bias.normal_()
    hf.save_pretrained(tmp_path / 'mlm'); ref.save_pretrained(tmp_path / 'mlm')
    (tmp_path / 'mlm' / 'vocab.txt').unlink(missing_ok=True)  # the tokenizer from tokenizer.json alone
    m, tok = load_bert(tmp_path / 'mlm'), WordPieceTokenizer.from_vocab(tmp_path / 'mlm')
    text = 'The cat sat on the mat, Héllo!'
    assert tok.encode(text) == ref(text)['input_ids']
    ids = torch.tensor([tok.encode(text)])
    assert type(m) is BertForMLM and m.load_report.dropped == [] and m.load_report.initialised == []
    tol = lambda want: encoder_tol(m.config, ids.shape[1], torch.float64, want.abs().max().item())
    with torch.no_grad():  # float64 copies: the same formula
        want = hf.double()(input_ids=ids).logits
        torch.testing.assert_close(m.double()(ids)[0], want, rtol=0, atol=tol(want))
    sc = BertForSequenceClassification(cfg).eval()
    sc.save_pretrained(tmp_path / 'sc')
    with pytest.warns(UserWarning, match='dropped 2'): enc = load_bert(tmp_path / 'sc')
    assert type(enc) is BertEncoder and enc.pooler is not None  # the classifier's pooler comes along
    assert sorted(enc.load_report.dropped) == ['classifier.bias', 'classifier.weight']
    with torch.no_grad():
        want, enc = sc.bert.double()(input_ids=ids), enc.double()
        h = want.last_hidden_state
        torch.testing.assert_close(enc(ids), h, rtol=0, atol=tol(h))
        torch.testing.assert_close(enc.pooler(enc(ids)), want.pooler_output, rtol=0, atol=tol(h))
    with pytest.raises(ValueError, match='no MLM head'): load_bert(tmp_path / 'sc', cls=BertForMLM)

def test_no_bert_nb_directory_that_transformers_cannot_use(tmp_path):
    """Every kind of model save_bert writes loads into transformers with no unexpected key, and no missing one but
    the pooler of an encoder that has none (transformers initialises it, and says so: the truth)."""
    from transformers import AutoModel, AutoModelForMaskedLM
    kinds = ((random_ours(8), AutoModelForMaskedLM, set()), (BertEncoder(CFG, pooler=True), AutoModel, set()),
             (random_ours(9).encoder, AutoModel, {'pooler.dense.weight', 'pooler.dense.bias'}))
    for i, (model, auto, missing) in enumerate(kinds):
        save_bert(model, tmp_path / str(i))
        back, info = auto.from_pretrained(tmp_path / str(i), output_loading_info=True)
        assert (info['missing_keys'], info['unexpected_keys'], info['mismatched_keys']) == (missing, set(), set())
        assert type(back).__name__ == ('BertForMaskedLM' if isinstance(model, BertForMLM) else 'BertModel')

def test_the_mlm_bias_under_the_decoders_name():
    "Some checkpoints carry the MLM bias only as cls.predictions.decoder.bias: it is the head's bias all the same."
    src = random_ours(6)
    sd = handmade_sd(src)
    sd['cls.predictions.decoder.bias'] = sd.pop('cls.predictions.bias')
    with pytest.warns(UserWarning, match='dropped 2'): m = load_hf_bert(BertForMLM(CFG), sd)  # the NSP placeholders
    assert torch.equal(m.head.bias, src.head.bias) and m.load_report.initialised == []
    assert 'cls.predictions.decoder.bias' in m.load_report.used and 'cls.predictions.decoder.bias' not in m.load_report.dropped
    for (n, a), (_, b) in zip(src.named_parameters(), m.named_parameters()): assert torch.equal(a, b), n
