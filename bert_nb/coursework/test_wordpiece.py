"""Chapter 01's course tests: the learner's `wordpiece` module against hand-worked examples and a naive trainer.

Each test's docstring says what it checks, then (after the first sentence) why it matters downstream."""
import numpy as np
import pytest
import wordpiece as m

SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
TOKENS = SPECIALS + ['un', '##aff', '##able', 'aff', 'able', 'the', 'cat', 'sat', 'on', 'mat', '##s', ',', '.', 'a',
                     '##b', 'b', 'hello']

def tok(lowercase=True): return m.WordPieceTokenizer.from_tokens(TOKENS, lowercase)

def test_greedy_longest_match_first():
    """A word is split greedily, the longest piece in the vocabulary first, `##` marking a piece inside a word; a word
    with no split is one [UNK]. Every id the model sees comes from this split."""
    t = tok()
    assert t.tokenize('unaffable') == ['un', '##aff', '##able']
    assert t.tokenize('The cats sat, on a mat.') == ['the', 'cat', '##s', 'sat', ',', 'on', 'a', 'mat', '.']
    assert t.tokenize('dog') == ['[UNK]']
    assert t.encode('the cat') == [2, 10, 11, 3]

def test_lowercase_is_an_option():
    """lowercase=True folds case; lowercase=False keeps it (a cased vocabulary's capitals are words of their own).
    A cased model fed lower-cased text reads other tokens than it was trained on."""
    assert tok().tokenize('Hello') == ['hello']
    assert tok(lowercase=False).tokenize('Hello') == ['[UNK]']

def test_pairs_are_two_segments():
    """A pair is `[CLS] a [SEP] b [SEP]`, token types 0 up to and including the first [SEP], 1 after. The encoder's
    token-type embeddings read these: a [SEP] in the wrong segment tells the model where b starts wrongly."""
    (e,) = tok().encode_batch([('the cat', 'sat on a mat')])
    assert e.ids == [2, 10, 11, 3, 12, 13, 18, 14, 3]
    assert e.type_ids == [0, 0, 0, 0, 1, 1, 1, 1, 1]

def test_truncation_cuts_the_longer_text():
    """A pair past max_len loses tokens from the longer of its two texts, one at a time (longest first). Cutting the
    first text only would empty a question before touching a long passage."""
    long, short = 'the cat sat on a mat', 'hello'
    a, b = tok().encode_batch([(long, short), (short, long)], max_len=7)
    assert a.ids == [2, 10, 11, 12, 3, 21, 3] and b.ids == [2, 21, 3, 10, 11, 12, 3]

def test_a_duplicated_token_is_refused():
    """A vocabulary that lists a token twice is refused with a ValueError. Two ids for one token break the
    line-number-is-id rule transformers reads vocab.txt by."""
    with pytest.raises(ValueError):
        m.WordPieceTokenizer.from_tokens(TOKENS + ['cat'])

def test_a_long_word_is_one_unknown():
    """A word of more than 100 characters is one [UNK], as BERT's tokenizer has it; one of 100 is split. The same
    text must give the same ids as transformers' tokenizer, or a checkpoint reads other tokens."""
    t = tok()
    assert t.tokenize('b' * 101) == ['[UNK]']
    assert t.tokenize('b' * 100) == ['b'] + ['##b'] * 99

def naive_vocab(counts: dict, size: int) -> list:
    "The oracle: recount every adjacent pair after each merge; the commonest wins, ties to the first in string order."
    words = {w: [w[0]] + ['##' + c for c in w[1:]] for w in counts}
    vocab = SPECIALS + sorted({p for w in words.values() for p in w} - set(SPECIALS))
    while len(vocab) < size:
        pairs = {}
        for w, ps in words.items():
            for a, b in zip(ps, ps[1:]): pairs[a, b] = pairs.get((a, b), 0) + counts[w]
        if not pairs: break
        a, b = min(pairs, key=lambda p: (-pairs[p], p))
        new = a + b[2:]
        for w, ps in words.items():
            out, j = [], 0
            while j < len(ps):
                if j + 1 < len(ps) and (ps[j], ps[j + 1]) == (a, b): out.append(new); j += 2
                else: out.append(ps[j]); j += 1
            words[w] = out
        if new not in vocab: vocab.append(new)
    return vocab[:size]

def test_training_merges_the_commonest_pair():
    """train() learns the specials, every character, then the merged pairs in the order a recount finds them, counts
    weighted by how often each word occurs, and keeps case when lowercase=False. The vocabulary sets what the model
    can read at all."""
    g = np.random.default_rng(0)  # words of a few letters, many sharing pairs: counts change at every merge
    lines = [' '.join(''.join(g.choice(list('abcde'), g.integers(2, 7))) for _ in range(5)) for _ in range(60)]
    counts = {}
    for line in lines:
        for w in line.split(): counts[w] = counts.get(w, 0) + 1
    for size in (40, 120, 400):
        assert m.WordPieceTokenizer.train(lines, size).tokens() == naive_vocab(counts, size)
    cased = m.WordPieceTokenizer.train(['The Cat', 'the cat'], 20, lowercase=False)
    assert 'T' in cased.tokens() and 'C' in cased.tokens()
