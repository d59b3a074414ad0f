"""The helpers the later chapters import (#57), public now: each refuses bad input with an error that names it, and
does its one job. The expected values are stated here, not taken from the code."""
import json
import pytest
import torch
from bert_nb import PCG32, WordPieceTokenizer, SPECIALS
from bert_nb import checks as C, files as F, speed as S, finetune as FT
from bert_nb.bert import save_tokenizer

def test_checks_name_the_argument():
    with pytest.raises(TypeError, match='name must be a str, got int'): C.check_type('name', 3, str)
    with pytest.raises(ValueError, match=r'n must be in \[1, inf\), got 0'): C.check_int('n', 0, 1)
    with pytest.raises(ValueError, match=r'p must be in \[0, 1\], got 1.5'): C.check_p(1.5)
    with pytest.raises(TypeError, match='p must be a number'): C.check_p(True)
    with pytest.raises(ValueError, match='mask must have the shape of ids'):
        C.check_like('mask', torch.ones(2, 3), torch.ones(2, 4))
    with pytest.raises(ValueError, match=r'ids must be in \[0, 9\), got 9'): C.check_range('ids', torch.tensor([0, 9]), 0, 9)
    assert C.check_p(0.25) == 0.25 and C.check_int('n', 3, 1, 4) == 3

def test_files_refuse_what_they_cannot_read(tmp_path):
    (tmp_path / 'half.json').write_text('{"a": ')
    with pytest.raises(ValueError, match='not valid JSON'): F.read_json(tmp_path / 'half.json')
    (tmp_path / 'text').write_text('not tensors')
    with pytest.raises(ValueError, match='not a readable safetensors'): F.read_safetensors(tmp_path / 'text')
    F.write_utf8(tmp_path / 'x.json', '{"ſ": "é"}')  # UTF-8 on every platform, whatever the locale says
    assert (tmp_path / 'x.json').read_bytes() == '{"ſ": "é"}'.encode('utf-8')
    assert F.read_json(tmp_path / 'x.json') == {'ſ': 'é'}

def test_save_tokenizer_takes_a_tokenizer(tmp_path):
    with pytest.raises(TypeError, match='tok must be a WordPieceTokenizer, got str'): save_tokenizer('vocab', tmp_path, 16)
    tok = WordPieceTokenizer.from_tokens(list(SPECIALS) + list('abc'))
    save_tokenizer(tok, tmp_path, 16)
    assert (tmp_path / 'vocab.txt').read_text().split() == list(SPECIALS) + list('abc')
    assert json.loads((tmp_path / 'tokenizer.json').read_text())['model']['type'] == 'WordPiece'

def test_attend_checks_its_shapes_and_rate():
    q = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match='q, k, v must be'): S.attend(q, q[:, :, :3], q, None, 0.0)
    with pytest.raises(ValueError, match=r'p must be in \[0, 1\), got 1.0'): S.attend(q, q, q, None, 1.0)
    s = torch.softmax(q @ q.transpose(-1, -2) / 8 ** 0.5, -1)  # the formula, in float64
    torch.testing.assert_close(S.attend(q, q, q, None, 0.0), s @ q, rtol=0, atol=1e-12)

def test_decoded_loss_checks_rows():
    x, w, b = torch.randn(4, 8, dtype=torch.float64), torch.randn(9, 8, dtype=torch.float64), torch.zeros(9, dtype=torch.float64)
    y = torch.tensor([1, 2, 3, -100])
    with pytest.raises(ValueError, match='x, w, b, y must be'): S.decoded_loss(x, w, b, y[:3], 3)
    with pytest.raises(ValueError, match=r'n must be in \[0, 4\]'): S.decoded_loss(x, w, b, y, 5)
    with pytest.raises(TypeError, match='x, w, b must share a dtype, got torch.float64, torch.bfloat16'):
        S.decoded_loss(x, w.bfloat16(), b, y, 3)
    want = torch.nn.functional.cross_entropy(x[:3] @ w.T, y[:3])  # the padding row (the 4th) not counted
    torch.testing.assert_close(S.decoded_loss(x, w, b, y, 3), want, rtol=0, atol=1e-12)

def test_labelled_rows():
    with pytest.raises(TypeError, match='labels must be an integer tensor'): S.labelled_rows(torch.zeros(2, 3))
    at, n = S.labelled_rows(torch.tensor([[-100, 5, -100], [7, -100, -100]]))
    assert n == 2 and at[:2].tolist() == [1, 3] and len(at) == 64 and not at[2:].any()

def test_heads_and_the_loop_refuse_bad_input(tmp_path):
    tok = WordPieceTokenizer.from_tokens(list(SPECIALS) + list('abc'))
    with pytest.raises(TypeError, match='model must be a classifier or a tagger, got str'):
        FT.save_head('model', tmp_path / 'h', tok, ['a', 'b'], 'BertForTokenClassification')
    lin = torch.nn.Linear(2, 1)
    args = dict(epochs=1, batch_size=1, lr=1e-3, warmup=0.1, weight_decay=0.0, seed=0)
    with pytest.raises(ValueError, match=r'n must be in \[1, inf\), got 0'): FT.tune_loop(lin, 0, lambda i: lin.weight.sum(), **args)
    with pytest.raises(TypeError, match='loss_of must be callable'): FT.tune_loop(lin, 2, 3, **args)
    assert len(FT.tune_loop(lin, 3, lambda i: lin.weight.sum(), **args)) == 3  # one step a batch of one
