"""What later chapters use: hidden states, attention maps and inputs_embeds against transformers' eager BertModel;
the pooler through checkpoints; the public names typed (mypy) and compile-ready (no dynamo graph breaks)."""
import copy, subprocess, sys, textwrap, warnings
import pytest
import torch
import transformers
from transformers import BertModel
import bert_nb
from bert_nb.bert import (BertConfig, BertEncoder, BertForMLM, EncoderOutput, MLMOutput, load_bert, save_bert,
                          mlm_batch)
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer
from tol import encoder_tol, grad_tol

transformers.logging.set_verbosity_error()

@pytest.fixture(scope='module')
def minilm(minilm_dir):
    "Ours (encoder with pooler, and BertForMLM with a fresh head), transformers' eager BertModel, a padded batch."
    enc = load_bert(minilm_dir)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the fresh head and the dropped pooler are reported
        mlm = load_bert(minilm_dir, BertForMLM, strict=False)
    ref = BertModel.from_pretrained(minilm_dir, attn_implementation='eager').eval()
    tok = WordPieceTokenizer.from_vocab(minilm_dir)
    texts = ['The cat sat on the mat.', ('Where did the cat sit?', 'On the mat, of course, where else?'), 'Hi.']
    b = {k: torch.from_numpy(v) for k, v in mlm_batch(tok, texts, 64, 0.0, PCG32(0)).items()}
    return enc, mlm, ref, b

def as_dtype(dtype, *models):
    "Copies of the fixture's models in `dtype` (the fixture itself stays float32 for the other tests)."
    return [copy.deepcopy(m).to(dtype) for m in models]

# float64: the claim is "the same formula", and the bound is far below any fault; float32: within its rounding.
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_hidden_states_and_attentions_equal_transformers_eager(minilm, dtype):
    enc, mlm, ref, b = minilm
    enc, mlm, ref = as_dtype(dtype, enc, mlm, ref)
    ids, types, mask = b['input_ids'], b['token_type_ids'], b['attention_mask']
    with torch.no_grad():
        want = ref(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True,
                   output_attentions=True)
        outs = [enc(ids, types, mask, output_hidden_states=True, output_attentions=True),
                mlm(ids, types, mask, output_hidden_states=True, output_attentions=True)]
    r, T = mask.bool(), ids.shape[1]
    tol = lambda x: encoder_tol(enc.config, T, dtype, x.abs().max().item())
    for out in outs:
        assert len(out.hidden_states) == 7 and len(out.attentions) == 6
        for a, w in zip(out.hidden_states, want.hidden_states):
            torch.testing.assert_close(a[r], w[r], rtol=0, atol=tol(w[r]))
        for a, w in zip(out.attentions, want.attentions):
            assert a.shape == (3, 12, T, T)
            torch.testing.assert_close(a, w, rtol=0, atol=tol(w))  # probabilities: scale 1
    # the pooler is one more d-term sum and a tanh (which shrinks differences) on top of the last layer
    torch.testing.assert_close(outs[0].pooled, want.pooler_output, rtol=0, atol=tol(want.hidden_states[-1][r]))
    assert isinstance(outs[0], EncoderOutput) and isinstance(outs[1], MLMOutput)

def test_hidden_states_alone_keep_sdpa_and_agree(minilm):
    enc, _, ref, b = minilm
    enc, ref = as_dtype(torch.float64, enc, ref)
    ids, types, mask = b['input_ids'], b['token_type_ids'], b['attention_mask']
    with torch.no_grad():
        want = ref(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
        out = enc(ids, types, mask, output_hidden_states=True)
    assert out.attentions is None and len(out.hidden_states) == 7
    r = mask.bool()
    for a, w in zip(out.hidden_states, want.hidden_states):
        torch.testing.assert_close(a[r], w[r], rtol=0, atol=encoder_tol(enc.config, ids.shape[1], torch.float64,
                                                                          w[r].abs().max().item()))
    assert torch.equal(out.last_hidden_state, out.hidden_states[-1])

def test_the_default_returns_are_the_seeds(minilm):
    enc, mlm, _, b = minilm
    ids, mask = b['input_ids'], b['attention_mask']
    with torch.no_grad():
        h = enc(ids, attn_mask=mask)
        logits, loss = mlm(ids, attn_mask=mask)  # still unpacks as (logits, loss)
        full = mlm(ids, attn_mask=mask, output_attentions=True)
    assert isinstance(h, torch.Tensor) and h.shape == (3, ids.shape[1], 384) and loss is None
    logits2, loss2, hs, ps = full
    assert hs is None and len(ps) == 6 and loss2 is None
    r = mask.bool()  # two float32 paths of ours (SDPA, the explicit softmax): within their rounding
    torch.testing.assert_close(logits2[r], logits[r], rtol=0,
                               atol=encoder_tol(mlm.config, ids.shape[1], torch.float32, logits[r].abs().max().item()))

def test_inputs_embeds_is_the_word_table_lookup_and_has_a_gradient(minilm):
    enc, _, ref, b = minilm
    enc, ref = as_dtype(torch.float64, enc, ref)
    ids, types, mask = b['input_ids'], b['token_type_ids'], b['attention_mask']
    emb = enc.word_emb(ids).detach().requires_grad_()
    h = enc(inputs_embeds=emb, token_type_ids=types, attn_mask=mask)
    with torch.no_grad():
        want = ref(inputs_embeds=emb, token_type_ids=types, attention_mask=mask).last_hidden_state
        plain = enc(ids, types, mask)
    r = mask.bool()
    torch.testing.assert_close(h[r], want[r], rtol=0, atol=encoder_tol(enc.config, ids.shape[1], torch.float64,
                                                                        want[r].abs().max().item()))
    assert torch.equal(h, plain)  # the same numbers through the same operations
    h[0, 1].sum().backward()  # saliency: how the output at token 1 depends on each input embedding
    assert emb.grad.abs().sum() > 0 and (emb.grad[0, ~r[0]] == 0).all()  # padding is never read

@pytest.mark.parametrize('kw, match', [
    (dict(), 'give ids or inputs_embeds'),
    (dict(ids=torch.zeros(1, 3, dtype=torch.long), inputs_embeds=torch.zeros(1, 3, 8)), 'not both'),
    (dict(inputs_embeds=torch.zeros(1, 3, 7)), r'inputs_embeds must be a float \(B, T, 8\) tensor'),
    (dict(inputs_embeds=torch.zeros(1, 3, 8, dtype=torch.long)), 'inputs_embeds must be a float'),
    (dict(inputs_embeds=torch.zeros(1, 9, 8)), 'more than max_len=6'),
    (dict(inputs_embeds=torch.zeros(1, 3, 8), token_type_ids=torch.zeros(1, 4, dtype=torch.long)), 'shape of ids'),
])
def test_bad_inputs_embeds(kw, match):
    enc = BertEncoder(BertConfig(20, max_len=6, d_model=8, n_heads=2, n_layers=1, d_ff=16))
    with pytest.raises(ValueError, match=match): enc(**kw)

def test_pooler_round_trip(tmp_path):
    cfg = BertConfig(40, max_len=12, d_model=16, n_heads=2, n_layers=2, d_ff=24, dropout=0.0)
    enc = BertEncoder(cfg, PCG32(1), pooler=True).eval()
    with torch.no_grad(): enc.pooler.dense.bias.normal_()  # a zero bias would hide a swapped weight and bias
    save_bert(enc, tmp_path / 'p')
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # nothing dropped, nothing initialised
        back = load_bert(tmp_path / 'p')
    assert back.pooler is not None
    for (k, a), (k2, b) in zip(enc.state_dict().items(), back.state_dict().items()): assert k == k2 and torch.equal(a, b)
    ids = torch.tensor([[2, 7, 9, 3], [2, 5, 3, 0]])
    hf = BertModel.from_pretrained(tmp_path / 'p').eval()
    with torch.no_grad():
        torch.testing.assert_close(back(ids, attn_mask=(ids > 0).long(), output_hidden_states=True).pooled,
                                   hf(input_ids=ids, attention_mask=(ids > 0).long()).pooler_output, rtol=0,
                                   atol=encoder_tol(cfg, 4, torch.float32, 1.0))  # tanh: values within 1
    plain = BertEncoder(cfg, PCG32(1)).eval()
    save_bert(plain, tmp_path / 'q')
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # no pooler saved, none expected: nothing to report
        again = load_bert(tmp_path / 'q')
    assert again.pooler is None and again.load_report.dropped == []
    _, info = BertModel.from_pretrained(tmp_path / 'q', output_loading_info=True)
    assert set(info['missing_keys']) == {'pooler.dense.weight', 'pooler.dense.bias'} and not info['unexpected_keys']

def test_an_encoder_missing_its_pooler(tmp_path):
    cfg = BertConfig(40, max_len=12, d_model=16, n_heads=2, n_layers=2, d_ff=24)
    save_bert(BertEncoder(cfg, PCG32(1)), tmp_path / 'q')
    sd = {k: v for k, v in load_bert(tmp_path / 'q').state_dict().items()}
    from bert_nb.bert import load_hf_bert, hf_encoder_names
    hf_sd = {hf: sd[ours] for hf, ours in hf_encoder_names(2).items()}
    with pytest.raises(ValueError, match='no pooler'): load_hf_bert(BertEncoder(cfg, pooler=True), hf_sd)
    with pytest.warns(UserWarning, match=r'initialised 2 \(pooler.dense'):
        m = load_hf_bert(BertEncoder(cfg, pooler=True), hf_sd, strict=False)
    assert m.load_report.initialised == ['pooler.dense.weight', 'pooler.dense.bias']

def _breaks(model, *args) -> int:
    torch._dynamo.reset()
    return torch._dynamo.explain(model)(*args).graph_break_count

@pytest.mark.parametrize('training', [False, True])
def test_no_graph_breaks(training):
    "torch.compile sees one graph: the input checks make no host sync (they are skipped under compile)."
    cfg = BertConfig(50, max_len=16, d_model=16, n_heads=2, n_layers=2, d_ff=32)
    ids = torch.randint(5, 50, (2, 10))
    for model in (BertEncoder(cfg), BertForMLM(cfg)):
        model.train(training)
        assert _breaks(model, ids) == 0
        assert _breaks(model, ids, None, torch.ones_like(ids)) == 0  # a padding mask: the padded layout

MYPY_SCRIPT = '''
import torch
import bert_nb
from bert_nb import BertConfig, BertEncoder, BertForMLM, PCG32, WordPieceTokenizer, load_bert, mlm_mask

cfg: BertConfig = BertConfig.from_hf(BertConfig(100, n_layers=2).to_hf())
enc = BertEncoder(cfg, PCG32(0), pooler=True)
rng = PCG32(1)
rng.advance(3)
draws = rng.u32s(4).tolist()
tok = WordPieceTokenizer.train(['a b c'] * 4, 30)
n: int = len(tok)
ids: list[int] = tok.encode('a b')
inputs, labels = mlm_mask([ids], [[True, False, False, True]], tok.mask_id, len(tok), 0.15, PCG32(2))
model = load_bert(bert_nb.KJV)
mlm = load_bert(bert_nb.KJV, cls=BertForMLM)  # overloads: the class asked for comes back (#28)
logits, loss = mlm(torch.zeros(1, 4, dtype=torch.long))
table: torch.Tensor = mlm.encoder.word_emb.weight
d: int = load_bert(bert_nb.KJV, cls=BertEncoder).config.d_model
out = load_bert(bert_nb.KJV, cls=BertEncoder, pooler=True)(input_ids=torch.zeros(1, 4, dtype=torch.long),
                                                           output_pooled=True)
parts: torch.nn.Module = bert_nb.load_parts(torch.nn.Module(), 'x')
'''

def test_mypy_sees_the_public_interface(tmp_path):
    (tmp_path / 'use.py').write_text(textwrap.dedent(MYPY_SCRIPT))
    r = subprocess.run([sys.executable, '-m', 'mypy', '--no-incremental', '--ignore-missing-imports',
                        '--follow-imports=silent', str(tmp_path / 'use.py')], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr

def test_the_package_is_typed_and_reexports_its_names():
    import ast, importlib.resources, sys as _sys
    root = importlib.resources.files('bert_nb')
    assert (root / 'py.typed').is_file()
    tree = ast.parse((root / '__init__.py').read_text())
    typed = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module.startswith('bert_nb.')
             for a in n.names}
    assert typed == set(bert_nb._WHERE)  # what type checkers see is what __getattr__ serves
    for name in bert_nb.__all__: assert getattr(bert_nb, name) is not None
    code = 'import sys, bert_nb.rng; print("torch" in sys.modules)'
    assert subprocess.run([_sys.executable, '-c', code], capture_output=True, text=True).stdout.strip() == 'False'

def test_no_grad_calls_see_the_weights_as_they_are_now(minilm, tmp_path):
    """A call with autograd off reads the weights as they are at that call, whatever changed them since the last: a
    write in place, a load, a cast, a fused AdamW step (which writes the weights without advancing their version
    counters, so no cache keyed on those may stand between two calls); and a training step right after such calls gets
    every gradient. The oracles: transformers' eager BertModel on the same weights, changed the same way, in float64
    (the claim is the same formula), and a model built afresh from the stepped weights."""
    enc, _, ref, b = minilm
    ours, theirs = as_dtype(torch.float64, enc, ref)
    ids, mask = b['input_ids'], b['attention_mask']
    real = mask.bool()
    def gap():
        with torch.no_grad():
            return (ours(ids, attn_mask=mask) - theirs(input_ids=ids, attention_mask=mask).last_hidden_state)[
                real].abs().max().item()
    tol = encoder_tol(ours.config, ids.shape[1], torch.float64, 10.0)
    assert gap() < tol
    with torch.no_grad():  # in place, as an optimizer step writes
        a, r = ours.layers[1].attn, theirs.encoder.layer[1].attention.self
        a.k.weight.mul_(-0.5); r.key.weight.mul_(-0.5); a.v.bias.add_(1.0); r.value.bias.add_(1.0)
    assert gap() < tol
    sd = {k: v * 0.9 for k, v in theirs.state_dict().items()}  # replaced by a load
    theirs.load_state_dict(sd)
    bert_nb.bert.load_hf_bert(ours, sd)
    assert gap() < tol
    # autograd on, right after calls without it (an evaluation, then a training step): the weights get gradients
    ours(ids, attn_mask=mask)[real].sum().backward()
    theirs(input_ids=ids, attention_mask=mask).last_hidden_state[real].sum().backward()
    scale = max(p.grad.abs().max().item() for p in theirs.parameters() if p.grad is not None)
    gtol = grad_tol(ours.config, ids.shape[1], int(mask.sum()), torch.float64, scale)
    for l, r in zip(ours.layers, theirs.encoder.layer):
        a, s = l.attn, r.attention.self
        for mine, hf in [(a.q, s.query), (a.k, s.key), (a.v, s.value)]:
            assert mine.weight.grad is not None and (mine.weight.grad - hf.weight.grad).abs().max().item() < gtol
    torch.optim.AdamW(ours.parameters(), lr=1e-2, fused=True).step()  # versions stay where they were
    fresh = BertEncoder(ours.config, pooler=ours.pooler is not None).double().eval()
    fresh.load_state_dict(ours.state_dict())
    with torch.no_grad():
        d = (ours(ids, attn_mask=mask) - fresh(ids, attn_mask=mask))[real].abs().max().item()
    assert d < tol
    ours.float(); fresh.float()  # cast: another dtype, other storage
    with torch.no_grad():
        d = (ours(ids, attn_mask=mask) - fresh(ids, attn_mask=mask))[real].abs().max().item()
    assert d < encoder_tol(ours.config, ids.shape[1], torch.float32, 10.0)
    torch.save(ours, tmp_path / 'whole.pt')  # a whole module still pickles after calls of every kind
    assert len(torch.load(tmp_path / 'whole.pt', weights_only=False).layers) == len(ours.layers)
