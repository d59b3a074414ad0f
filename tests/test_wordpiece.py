"WordPieceTokenizer against transformers.BertTokenizerFast on the real all-MiniLM-L6-v2 vocab."
import numpy as np
import pytest
from transformers import BertTokenizerFast
from bert_nb.wordpiece import WordPieceTokenizer, SPECIALS, word_counts

AWKWARD = ["Héllo, wörld! Ça va? naïve café résumé", "中文字符和日本語のテキスト mixed with English", "Don't stop--believing... (really?!) [brackets] {braces} #hash @at",
           "x" * 101, "a" * 100, "supercalifragilisticexpialidocious " * 3, "  runs\tof \n\n whitespace\r\n  here  ", "", "   ",
           "control\x00chars\x07and\u200bzero-width", "UPPER lower MiXeD", "emoji 🙂 and symbols ©®™ ½", "[MASK] is special, [mask] is not?",
           "numbers 3.14159 and 1,000,000 and 2nd", "ａｂｃ fullwidth", "Ελληνικά и русский"]

@pytest.fixture(scope='module')
def both(minilm_dir):
    return WordPieceTokenizer.from_vocab(minilm_dir / 'vocab.txt'), BertTokenizerFast(str(minilm_dir / 'vocab.txt'))

@pytest.mark.parametrize('text', AWKWARD)
def test_tokenize_and_encode_match(both, text):
    tok, ref = both
    assert tok.tokenize(text) == ref.tokenize(text)
    assert tok.encode(text) == ref(text)['input_ids']

@pytest.mark.parametrize('a,b', [(AWKWARD[0], AWKWARD[1]), ("", "x"), ("question?", AWKWARD[3]), (AWKWARD[6], "  ")])
def test_pairs_match(both, a, b):
    tok, ref = both
    assert tok.encode(a, b) == ref(a, b)['input_ids']
    enc = tok.encode_batch([(a, b)])[0]
    assert enc.type_ids == ref(a, b)['token_type_ids']

def test_empty_second_segment_is_still_a_pair(both):
    # transformers drops a falsy text_pair in Python (`if text_pair`); its Rust pipeline, like ours, keeps the segment
    tok, ref = both
    assert tok.encode('a', '') == ref.backend_tokenizer.encode('a', '').ids == [101, 1037, 102, 102]

def test_batch_and_truncation_match(both):
    tok, ref = both
    items = [AWKWARD[0], (AWKWARD[1], AWKWARD[2]), (AWKWARD[5], 'short'), ('short', AWKWARD[5])]
    for max_len in (5, 9, 16, 512):
        got = [e.ids for e in tok.encode_batch(items, max_len=max_len)]
        want = [ref(*(x if isinstance(x, tuple) else (x,)), truncation=True, max_length=max_len)['input_ids'] for x in items]
        assert got == want
    assert [e.ids for e in tok.encode_batch(items)] == [tok.encode(*(x if isinstance(x, tuple) else (x,))) for x in items]

def test_vocab_and_specials(both):
    tok, ref = both
    assert len(tok) == len(ref) == 30522
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 100, 101, 102, 103)
    assert tok.token_to_id('the') == ref.convert_tokens_to_ids('the') and tok.id_to_token(1996) == 'the'
    assert tok.decode(tok.encode('Hello, world!')) == 'hello, world!'
    assert '[CLS]' in tok.decode(tok.encode('hi'), skip_special=False)

def test_train_and_save(tmp_path):
    texts = ['the quick brown fox jumps over the lazy dog', 'a lazy dog sleeps', 'quick quick fox'] * 20
    tok = WordPieceTokenizer.train(texts, vocab_size=80)
    assert [tok.id_to_token(i) for i in range(5)] == list(SPECIALS) and len(tok) <= 80
    assert tok.encode('the fox') == [2] + tok.encode('the fox')[1:-1] + [3]
    path = tok.save(tmp_path / 'v')
    assert path == tmp_path / 'v' / 'vocab.txt'
    lines = path.read_text().splitlines()
    assert len(lines) == len(tok) and lines[:5] == list(SPECIALS)
    again = WordPieceTokenizer.from_vocab(tmp_path / 'v')
    assert all(again.encode(t) == tok.encode(t) for t in texts[:3] + ['unseen words here'])

def test_lowercase_false(minilm_dir, tmp_path):
    (tmp_path / 'vocab.txt').write_text('\n'.join(list(SPECIALS) + ['Hello', 'hello', 'é']) + '\n')
    assert WordPieceTokenizer.from_vocab(tmp_path / 'vocab.txt', lowercase=False).tokenize('Hello hello') == ['Hello', 'hello']
    assert WordPieceTokenizer.from_vocab(tmp_path / 'vocab.txt').tokenize('Hello') == ['hello']

@pytest.mark.parametrize('missing', SPECIALS)
def test_vocab_without_a_special(tmp_path, missing):
    (tmp_path / 'vocab.txt').write_text('\n'.join([s for s in SPECIALS if s != missing] + ['cat']) + '\n')
    with pytest.raises(ValueError, match=missing.replace('[', '\\[').replace(']', '\\]')):
        WordPieceTokenizer.from_vocab(tmp_path / 'vocab.txt')

def test_missing_file():
    with pytest.raises(FileNotFoundError, match='/no/such/dir/vocab.txt'):
        WordPieceTokenizer.from_vocab('/no/such/dir/vocab.txt')

def test_type_errors(both):
    tok, _ = both
    with pytest.raises(TypeError, match='text must be a str'): tok.tokenize(3)
    with pytest.raises(TypeError, match='pair must be a str'): tok.encode('a', 5)
    with pytest.raises(TypeError): WordPieceTokenizer.train(['a'], vocab_size='8')
    with pytest.raises(ValueError, match='vocab_size'): WordPieceTokenizer.train(['a'], vocab_size=3)

def test_a_duplicated_or_binary_vocab_is_refused(tmp_path):
    small = WordPieceTokenizer.train(['a b c d'] * 5, 30)
    (tmp_path / 'dup.txt').write_text('\n'.join(small.tokens() + [small.tokens()[7]]) + '\n')
    with pytest.raises(ValueError, match=r"dup.txt has 1 duplicated token\(s\)"): WordPieceTokenizer.from_vocab(tmp_path / 'dup.txt')
    with pytest.raises(ValueError, match=r'duplicated'): WordPieceTokenizer.from_tokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'a', 'a'])
    (tmp_path / 'bin.txt').write_bytes(b'\xff\xfe\x00\x01' * 10)
    with pytest.raises(ValueError, match='bin.txt is not UTF-8 text'): WordPieceTokenizer.from_vocab(tmp_path / 'bin.txt')

def _naive_vocab(counts: dict, size: int) -> list:
    "The oracle: recount every pair from scratch at each step; the most frequent, ties to the first in string order."
    words = {w: [w[0]] + ['##' + c for c in w[1:]] for w in counts}
    vocab = list(SPECIALS) + sorted({s for w in words.values() for s in w})
    while len(vocab) < size:
        pairs = {}
        for w, syms in words.items():
            for p in zip(syms, syms[1:]): pairs[p] = pairs.get(p, 0) + counts[w]
        if not pairs: break
        a, b = min(pairs, key=lambda p: (-pairs[p], p))
        new = a + b[2:]
        if new not in vocab: vocab.append(new)
        for w, syms in words.items():
            out, j = [], 0
            while j < len(syms):
                if syms[j:j + 2] == [a, b]: out.append(new); j += 2
                else: out.append(syms[j]); j += 1
            words[w] = out
    return vocab

def test_train_vocab_equals_a_naive_recount(corpus):
    from bert_nb.pretrain import read_corpus
    from bert_nb.wordpiece import word_counts, train_vocab
    counts = word_counts(read_corpus([corpus])[:400])
    for size in (40, 300, 900):
        assert train_vocab(counts, size) == _naive_vocab(counts, size)[:size]

def test_ties_go_to_the_first_pair_in_string_order():
    from bert_nb.wordpiece import train_vocab
    for counts in ({'ab': 3, 'cd': 3}, {'cd': 3, 'ab': 3}):  # either insertion order
        assert train_vocab(counts, 11)[5:] == ['##b', '##d', 'a', 'c', 'ab', 'cd']
    assert train_vocab({'xy': 2, 'ab': 1}, 10)[-1] == 'xy'  # a count beats string order

VOCAB_SCRIPT = '''
import sys
from bert_nb.pretrain import read_corpus, split_lines, DEFAULT_CORPUS
from bert_nb.wordpiece import WordPieceTokenizer
WordPieceTokenizer.train(split_lines(read_corpus([DEFAULT_CORPUS]), 0)[0], 8192).save(sys.argv[1])
'''

def test_the_same_lines_give_the_same_vocab_in_two_processes(tmp_path):
    "Two interpreters with different hash seeds (Python's and, per process, Rust's): the same bytes."
    import os, subprocess, sys
    for i, seed in enumerate(('1', '2')):
        env = os.environ | {'PYTHONHASHSEED': seed}
        subprocess.run([sys.executable, '-c', VOCAB_SCRIPT, str(tmp_path / str(i))], env=env, check=True)
    a, b = ((tmp_path / i / 'vocab.txt').read_bytes() for i in '01')
    assert a == b and len(a.splitlines()) == 8192

def test_training_with_lowercase_false_keeps_case():
    "lowercase=False is honoured by the word counts, the trained vocabulary and the tokenizer it returns."
    lines = ['Moses spake unto Aaron', 'And Moses said', 'moses and aaron'] * 20
    cased, lower = WordPieceTokenizer.train(lines, 60, lowercase=False), WordPieceTokenizer.train(lines, 60)
    assert 'M' in cased.tokens() and 'A' in cased.tokens() and 'M' not in lower.tokens()
    assert cased.tokenize('Moses moses') != lower.tokenize('Moses moses') == lower.tokenize('moses moses')
    assert cased.tokenize('Moses')[0].startswith('M') and lower.tokenize('Moses')[0].startswith('m')
    assert word_counts(lines, lowercase=False)['Moses'] == 40 and word_counts(lines)['moses'] == 60

def _by_line(texts, lowercase):
    "The oracle: each text through the Rust normaliser and pre-tokeniser, one call each."
    from collections import Counter
    from tokenizers import normalizers, pre_tokenizers
    norm = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                      lowercase=lowercase)
    pre = pre_tokenizers.BertPreTokenizer()
    return Counter(w for t in texts for w, _ in pre.pre_tokenize_str(norm.normalize_str(t)))

@pytest.mark.parametrize('lowercase', [True, False])
def test_word_counts_equal_the_pipeline_line_by_line(lowercase):
    "Every ASCII character, in random company, and lines with other characters: the words the pipeline makes."
    g = np.random.default_rng(0)
    ascii_chars = np.array([chr(i) for i in range(128)] + list('abcdeFGH  '))
    texts = [''.join(g.choice(ascii_chars, g.integers(0, 60))) for _ in range(3000)]
    texts += ['Ünïcödé café, 北京 naïve', 'x\u2028y\u00a0z', '\x00\ufffd', 'ΑΣ ΣΑ'] * 3
    g.shuffle(texts)
    assert word_counts(texts, lowercase) == _by_line(texts, lowercase)

def test_words_over_100_characters_are_not_counted():
    "The tokenizer reads them as [UNK]; merging inside one was quadratic (173 s for 10,000 characters)."
    long = 'ab' * 5000
    assert WordPieceTokenizer.from_tokens(list(SPECIALS) + ['a', '##b']).tokenize(long) == ['[UNK]']
    assert word_counts([long + ' ok', 'y' * 100, 'z' * 101]) == {'ok': 1, 'y' * 100: 1}
    assert 'ab' not in WordPieceTokenizer.train([long, 'c d'], 100).tokens()
