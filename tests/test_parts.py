"""What the next chapters need (#28): transformers' keyword names, the pooled vector on its own, compile equal to
eager at every position, no untrained pooler under a trained name, models of parts saved and loaded in one call,
and transformers' Trainer with its defaults, its saved model loadable."""
import json, math, warnings
import numpy as np
import pytest
import torch
import torch.nn as nn
import transformers
from transformers import BertForMaskedLM, BertModel
from bert_nb.bert import (BertConfig, BertEncoder, BertForMLM, BertPooler, EncoderOutput, POOLER_NAMES, init_weights,
                          load_bert, load_parts, save_bert, save_parts)
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer
from tol import encoder_tol, gamma
from saving import saving

transformers.logging.set_verbosity_error()
CFG = BertConfig(40, max_len=16, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0)
IDS = torch.tensor([[2, 7, 9, 11, 3], [2, 5, 3, 0, 0]])
MASK, TYPES = (IDS > 0).long(), torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]])

def test_transformers_keywords_equal_ours():
    enc = BertEncoder(CFG, PCG32(0), pooler=True).eval()
    mlm = BertForMLM(CFG, PCG32(1)).eval()
    labels = torch.full_like(IDS, -100); labels[0, 2] = 9
    with torch.no_grad():
        assert torch.equal(enc(input_ids=IDS, attention_mask=MASK, token_type_ids=TYPES), enc(IDS, TYPES, MASK))
        ours, theirs = mlm(IDS, TYPES, MASK, labels), mlm(input_ids=IDS, attention_mask=MASK, token_type_ids=TYPES,
                                                        labels=labels)
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])
        # the silent case the docstring warns of: a mask passed second is read as token types
        assert not torch.equal(enc(IDS, MASK), enc(IDS, attn_mask=MASK))
    with pytest.raises(ValueError, match='give ids or input_ids, not both'): enc(IDS, input_ids=IDS)
    with pytest.raises(ValueError, match='give attn_mask or attention_mask'): mlm(IDS, None, MASK, attention_mask=MASK)
    with pytest.raises(TypeError, match='attn_mak'): mlm(IDS, attn_mak=MASK)  # a misspelt keyword is not dropped

def test_the_pooled_vector_alone():
    enc = BertEncoder(CFG, PCG32(0), pooler=True).eval()
    with torch.no_grad():
        out = enc(IDS, attn_mask=MASK, output_pooled=True)
        h = enc(IDS, attn_mask=MASK)
    assert isinstance(out, EncoderOutput) and out.hidden_states is None and out.attentions is None
    assert out.pooler_output is out.pooled and torch.equal(out.last_hidden_state, h)
    w, b = (p.detach().double().numpy() for p in (enc.pooler.dense.weight, enc.pooler.dense.bias))
    cls = h[:, 0].double().numpy()
    want = np.tanh(cls @ w.T + b)  # float64: dense and tanh on [CLS]
    # a 16-term dot product plus the bias (gamma_17 of the terms' absolute sum); tanh (slope <= 1) adds an ulp
    bound = gamma(17) * (np.abs(cls) @ np.abs(w).T + np.abs(b)).max() + 2 * 2**-24
    assert np.abs(out.pooled.double().numpy() - want).max() < bound
    with pytest.raises(ValueError, match='output_pooled: the encoder has no pooler'):
        BertEncoder(CFG)(IDS, output_pooled=True)

@pytest.mark.parametrize('hidden', [False, True])
def test_compiled_equals_eager_at_every_position(hidden):
    "aot_eager traces the graph as torch.compile does (no host sync: every position runs), without a C compiler."
    enc = BertEncoder(CFG, PCG32(3)).eval()
    torch._dynamo.reset()
    compiled = torch.compile(enc, backend='aot_eager', fullgraph=True)
    with torch.no_grad():
        a = enc(IDS, TYPES, MASK, output_hidden_states=hidden)
        b = compiled(IDS, TYPES, MASK, output_hidden_states=hidden)
    for x, y in zip(a.hidden_states[1:] if hidden else [a], b.hidden_states[1:] if hidden else [b]):
        assert (y[MASK == 0] == 0).all() and (x[MASK == 0] == 0).all()  # padding: zeros in both
        torch.testing.assert_close(y, x, rtol=0, atol=encoder_tol(CFG, 5, torch.float32, 4.0))

def test_an_encoder_without_a_pooler_saves_none(tmp_path):
    "No untrained tensor under a trained name: transformers initialises the pooler itself, and says so."
    save_bert(BertEncoder(CFG, PCG32(0)), tmp_path / 'e')
    from safetensors import safe_open
    with safe_open(tmp_path / 'e' / 'model.safetensors', 'pt') as f: assert not any('pooler' in k for k in f.keys())
    _, info = BertModel.from_pretrained(tmp_path / 'e', output_loading_info=True)
    assert set(info['missing_keys']) == set(POOLER_NAMES) and not info['unexpected_keys']

def test_a_pooler_on_request(tmp_path):
    save_bert(BertEncoder(CFG, PCG32(0)), tmp_path / 'e')
    with pytest.warns(UserWarning, match=r'initialised 2 \(pooler.dense.weight, pooler.dense.bias\)'):
        enc = load_bert(tmp_path / 'e', pooler=True)
    assert enc.load_report.initialised == POOLER_NAMES
    want = BertPooler(CFG); init_weights(want, PCG32(0))  # the package's stream, reproducible
    assert torch.equal(enc.pooler.dense.weight, want.dense.weight) and not enc.pooler.dense.bias.any()
    save_bert(BertEncoder(CFG, PCG32(0), pooler=True), tmp_path / 'p')
    with pytest.warns(UserWarning, match=r'dropped 2 \(pooler'): plain = load_bert(tmp_path / 'p', pooler=False)
    assert plain.pooler is None and 'pooler.dense.weight' not in plain.load_report.used
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # what the checkpoint has: nothing to report
        assert load_bert(tmp_path / 'p', pooler=True).pooler is not None
    with pytest.raises(TypeError, match="pooler must be None, True or False, got 'yes'"):
        load_bert(tmp_path / 'p', pooler='yes')
    with pytest.raises(ValueError, match='a BertForMLM has none'): load_bert(tmp_path / 'p', BertForMLM, pooler=True)

class Electra(nn.Module):
    "The ELECTRA shape: a generator, a discriminator reading its embedding tables, a per-token head."
    def __init__(self, share: bool = True):
        super().__init__()
        cfg = lambda n, ff: BertConfig(40, max_len=16, d_model=16, n_heads=2, n_layers=n, d_ff=ff)
        self.gen, self.disc = BertForMLM(cfg(1, 32)), BertEncoder(cfg(2, 64), pooler=True)
        if share:
            for t in ('word_emb', 'pos_emb', 'type_emb'): setattr(self.disc, t, getattr(self.gen.encoder, t))
        self.rtd = nn.Linear(16, 1)
        self.register_buffer('steps', torch.tensor(0))

def test_a_model_of_parts_round_trips_with_its_ties(tmp_path):
    tok = WordPieceTokenizer.from_tokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(35)])
    a = Electra().eval(); a.steps += 7
    save_parts(a, tmp_path / 'e', tok)
    b = load_parts(Electra(), tmp_path / 'e')
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert b.disc.word_emb.weight is b.gen.encoder.word_emb.weight  # still one table
    from safetensors.torch import load_file
    assert set(load_file(tmp_path / 'e' / 'heads.safetensors')) == {'rtd.weight', 'rtd.bias', 'steps'}
    meta = json.loads((tmp_path / 'e' / 'parts.json').read_text())
    assert meta['parts'] == {'gen': 'BertForMLM', 'disc': 'BertEncoder'} and len(meta['shared']) == 3
    # each part is a transformers directory, read alone
    with torch.no_grad():
        hf = BertModel.from_pretrained(tmp_path / 'e' / 'disc').eval()
        torch.testing.assert_close(hf(input_ids=IDS, attention_mask=MASK).pooler_output,
                                   a.disc(IDS, attn_mask=MASK, output_pooled=True).pooled, rtol=0,
                                   atol=encoder_tol(a.disc.config, 5, torch.float32, 1.0))
        gen = BertForMaskedLM.from_pretrained(tmp_path / 'e' / 'gen').eval()
        ours = a.gen(IDS, attn_mask=MASK)[0][MASK.bool()]
        torch.testing.assert_close(gen(input_ids=IDS, attention_mask=MASK).logits[MASK.bool()], ours, rtol=0,
                                   atol=encoder_tol(a.gen.config, 5, torch.float32, ours.abs().max().item()))

def test_a_model_of_parts_built_otherwise_is_refused_untouched(tmp_path):
    save_parts(Electra(), tmp_path / 'e')
    other = Electra(share=False)
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(ValueError, match='shares'): load_parts(other, tmp_path / 'e')
    assert all(torch.equal(before[k], v) for k, v in other.state_dict().items())  # nothing changed
    class Two(nn.Module):
        def __init__(self): super().__init__(); self.gen = BertForMLM(CFG)
    with pytest.raises(ValueError, match='holds the parts'): load_parts(Two(), tmp_path / 'e')
    with pytest.raises(TypeError, match='one: save_bert'): save_parts(BertEncoder(CFG), tmp_path / 'x')
    with pytest.raises(ValueError, match='holds no BertEncoder or BertForMLM'): save_parts(nn.Linear(2, 2), tmp_path / 'x')
    (tmp_path / 'e' / 'parts.json').write_text('{"format": "other"}')
    with pytest.raises(ValueError, match='is not what save_parts writes'): load_parts(Electra(), tmp_path / 'e')
    assert not (tmp_path / 'x').exists()

LINES = ['in the beginning god created the heaven and the earth', 'and the earth was without form and void',
         'and darkness was upon the face of the deep', 'and the spirit of god moved upon the face of the waters'] * 10

def test_trainer_with_its_defaults_and_its_saved_model(tmp_path):
    "A datasets text column, Trainer's default remove_unused_columns, and save_model's directory read by load_bert."
    datasets = pytest.importorskip('datasets')
    from transformers import Trainer, TrainingArguments
    from bert_nb.data import ForTrainer, MLMCollator
    tok = WordPieceTokenizer.train(LINES, 60)
    model = BertForMLM(BertConfig(len(tok), max_len=32, d_model=32, n_heads=2, n_layers=1, d_ff=64), PCG32(0))
    args = TrainingArguments(output_dir=str(tmp_path / 'run'), max_steps=8, per_device_train_batch_size=8,
                             learning_rate=3e-3, report_to=[], save_strategy='no', disable_tqdm=True, use_cpu=True)
    data = datasets.Dataset.from_dict({'text': LINES, 'n': list(range(len(LINES)))})  # 'n': a column dropped
    trainer = Trainer(model=ForTrainer(model), args=args, train_dataset=data, data_collator=MLMCollator(tok))
    out = trainer.train()
    assert out.global_step == 8 and math.isfinite(out.training_loss)
    trainer.save_model(str(tmp_path / 'saved'))
    back = load_bert(tmp_path / 'saved')
    assert type(back) is BertForMLM and back.config == model.config
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), back.state_dict().values()))
    with pytest.raises(TypeError, match='model must be a BertForMLM, got BertEncoder'): ForTrainer(BertEncoder(CFG))

def test_the_collator_keys_a_torch_formatted_dataset_as_lists(tmp_path):
    datasets = pytest.importorskip('datasets')
    from bert_nb.data import MLMCollator
    tok = WordPieceTokenizer.train(LINES, 60)
    rows = [{'input_ids': e.ids} for e in tok.encode_batch(LINES[:8])]
    data = datasets.Dataset.from_list(rows)
    col = MLMCollator(tok, p=0.5, seed=4)
    want = col(rows)
    for fmt in ('torch', 'numpy', None):
        got = col(list(data.with_format(fmt)))
        assert all(torch.equal(got[k], want[k]) for k in want), fmt

def test_the_bundled_corpus_with_its_references():
    "Facts about the KJV that its table must reproduce, and the lines training reads, one Verse each."
    import bert_nb
    from bert_nb.pretrain import DEFAULT_CORPUS, read_corpus
    verses = bert_nb.kjv_verses()
    assert [v.text for v in verses] == read_corpus([DEFAULT_CORPUS])
    chapters = {(v.book, v.chapter) for v in verses}
    assert len(chapters) == 1189 and len({v.book for v in verses if v.testament == 'old'}) == 39
    assert sum(v.testament == 'old' for v in verses) == 23145
    count = lambda book, chapter: sum((v.book, v.chapter) == (book, chapter) for v in verses)
    assert (count('Psalms', 117), count('Obadiah', 1), count('3 John', 1), count('Esther', 8)) == (2, 21, 14, 17)
    assert max(c for b, c in chapters if b == 'Genesis') == 50
    assert verses[23145][:3] == ('Matthew', 1, 1) and verses[23145].text.startswith('The book of the generation')

MARKED = '''
import torch
from bert_nb.bert import BertConfig, BertForMLM, save_parts
from bert_nb.rng import PCG32
class Marked(torch.nn.Module):
    def __init__(self, seed=0):
        super().__init__()
        self.bert = BertForMLM(BertConfig(40, max_len=8, d_model=8, n_heads=2, n_layers=1, d_ff=16), rng=PCG32(seed))
        self.register_buffer('mark', torch.tensor(seed))
models = [Marked(0), Marked(1)]
'''

def test_a_parts_load_sees_one_whole_model_while_another_process_saves(tmp_path):
    "A saver swaps two models of parts into one directory; every load gets one of them whole, its head with its BERT."
    scope = {}; exec(MARKED, scope)
    Marked, d = scope['Marked'], tmp_path / 'm'
    firsts = [m.bert.encoder.word_emb.weight[0, 0].item() for m in scope['models']]
    seen = set()
    with saving(MARKED, 'save_parts', d):
        for _ in range(100):
            m = load_parts(Marked(), d)
            assert m.bert.encoder.word_emb.weight[0, 0].item() == firsts[m.mark.item()]  # one save, not two
            seen.add(m.mark.item())
    assert seen <= {0, 1}

class TwoParts(nn.Module):
    "Two encoders, saved as parts a and b; `tied`: b reads a's word table, as ELECTRA's discriminator does."
    def __init__(self, tied: bool, names=('a', 'b')):
        super().__init__()
        for i, n in enumerate(names): setattr(self, n, BertEncoder(CFG, PCG32(i)))
        if tied: getattr(self, names[1]).word_emb = getattr(self, names[0]).word_emb

def test_a_tie_the_save_never_had_is_refused(tmp_path):
    "parts.json listing a tie the weights do not have once replaced b's word table with a's, silently (#36)."
    save_parts(TwoParts(tied=False), tmp_path / 'p')
    meta = json.loads((tmp_path / 'p' / 'parts.json').read_text())
    meta['shared'] = [['a.word_emb.weight', 'b.word_emb.weight']]
    (tmp_path / 'p' / 'parts.json').write_text(json.dumps(meta))
    model = TwoParts(tied=True); before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r'ties a.word_emb.weight and b.word_emb.weight, but the weights saved differ'):
        load_parts(model, tmp_path / 'p')
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # refused before any change
    back = load_parts(TwoParts(tied=True), save_parts(TwoParts(tied=True), tmp_path / 'q'))  # a real tie loads
    assert back.b.word_emb.weight is back.a.word_emb.weight

def test_a_save_replaces_the_parts_of_the_save_before(tmp_path):
    "Parts a and b, then a model of parts c and d into the same directory: a/ and b/ are gone, notes stay (#36)."
    d = save_parts(TwoParts(tied=False), tmp_path / 'p')
    (d / 'notes.txt').write_text('mine')
    save_parts(TwoParts(tied=False, names=('c', 'e')), d)
    assert sorted(p.name for p in d.iterdir()) == ['c', 'e', 'heads.safetensors', 'notes.txt', 'parts.json']
    assert isinstance(load_parts(TwoParts(tied=False, names=('c', 'e')), d), TwoParts)
