"The pretrained model the package ships: one call loads it, it reproduces its card, transformers reads it too."
import hashlib, json, warnings
import torch
from transformers import BertForMaskedLM
import bert_nb
from bert_nb.bert import BertForMLM, load_bert
from bert_nb.pretrain import RunArgs, prepare, evaluate, read_corpus, split_lines, DEFAULT_CORPUS
from bert_nb.wordpiece import WordPieceTokenizer

def card() -> dict: return json.loads((bert_nb.KJV / 'card.json').read_text())

def test_it_loads_in_one_call_and_reproduces_its_card():
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # nothing dropped, nothing initialised
        model = load_bert(bert_nb.KJV)
    tok = WordPieceTokenizer.from_vocab(bert_nb.KJV)
    c = card()
    assert isinstance(model, BertForMLM) and model.config.to_dict() == c['config']
    weights = (bert_nb.KJV / 'model.safetensors').read_bytes()
    assert hashlib.sha256(weights).hexdigest() == c['weights_sha256'] and len(weights) < 8 * 2**20
    assert sum(p.numel() for p in model.parameters()) == c['parameters']
    data = prepare(RunArgs(), tok)  # the run's own held-out split, rebuilt
    ev = evaluate(model, tok, data['held_rows'], data['held_lens'], RunArgs().seed)
    want = c['held_out']
    assert ev['n'] == want['n'] and abs(ev['loss'] - want['loss']) < 1e-4 and abs(ev['acc'] - want['acc']) < 1e-3
    assert want['acc'] > c['baseline']['acc'] + 0.15  # it learned: well above always guessing the commonest token

def test_its_vocab_is_what_the_trainer_gives_in_this_process():
    train_lines, _ = split_lines(read_corpus([DEFAULT_CORPUS]), RunArgs().seed)
    assert WordPieceTokenizer.train(train_lines, 8192).tokens() == WordPieceTokenizer.from_vocab(bert_nb.KJV).tokens()

def test_transformers_reads_it():
    ours, ref = load_bert(bert_nb.KJV), BertForMaskedLM.from_pretrained(bert_nb.KJV).eval()
    ids = torch.tensor([WordPieceTokenizer.from_vocab(bert_nb.KJV).encode('and god said , let there be [MASK] .')])
    with torch.no_grad(): torch.testing.assert_close(ours(ids)[0], ref(input_ids=ids).logits, rtol=1e-5, atol=1e-5)
