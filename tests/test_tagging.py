"""Tagging (#47): the case labels against a plain loop over the raw verses, label alignment against one
tokenisation per word, the head against transformers' BertForTokenClassification (both ways, in float64) and its
pipeline, the batches against DataCollatorForTokenClassification, the scores against counts written out here, and
the pair task of chapter 05 against the corpus and transformers; bad input refused."""
import copy, json, unicodedata, warnings
from collections import Counter
import numpy as np
import pytest
import torch
from tol import encoder_tol
from saving import edited
from bert_nb import KJV, BertConfig, BertEncoder, MLMCollator, PCG32, WordPieceTokenizer, kjv_verses, load_bert
from bert_nb.finetune import Classifier, bag_of_words, fine_tune, pair_task, predict, save_classifier
from bert_nb.tagging import (CASES, IGNORE, TagCollator, TaggerForTrainer, TokenClassifier, align, ambiguous,
                             by_form, by_table, case_of, case_table, fine_tune_tagger, load_tagger, predict_tags,
                             save_tagger, tag_loss, tag_scores, truecase_task, windows, words_of)

def plain_words(text: str) -> list[str]:
    "BERT's pre-tokenisation written out: split at whitespace, and every punctuation character a word of its own."
    out = []
    for chunk in text.split():
        word = ''
        for ch in chunk:
            cp = ord(ch)
            if (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
                    or unicodedata.category(ch).startswith('P')):
                if word: out.append(word)
                out.append(ch); word = ''
            else: word += ch
        if word: out.append(word)
    return out

def plain_case(word: str) -> int:
    "From the definition: no letters -100; two letters or more, all capitals, 2; a first capital 1; else 0."
    letters = ''.join(ch for ch in word if ch.isalpha())
    if letters == '': return -100
    if len(letters) >= 2 and letters == letters.upper(): return 2
    return 1 if letters[0] == letters[0].upper() else 0

@pytest.fixture(scope='module')
def tok(): return WordPieceTokenizer.from_vocab(KJV)

def short(examples, tok, T: int = 32) -> list:
    "Each example's first window of T tokens: what the shipped model (32 positions) reads."
    return [(w[:windows(tok, w, T)[0][1]], t[:windows(tok, w, T)[0][1]]) for w, t in examples]

def fresh(seed: int, n: int = 3) -> TokenClassifier:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return TokenClassifier(load_bert(KJV, BertEncoder), n, rng=PCG32(seed))

def test_the_task_is_labelled_from_the_raw_text():
    task, verses = truecase_task(n_train=500, n_dev=100, n_test=300, seed=5), kjv_verses()
    for s in ('train', 'dev', 'test'):
        for i, (words, tags) in zip(task.lines[s], getattr(task, s)):
            raw = plain_words(verses[i].text)
            assert words == [w.lower() for w in raw] and tags == [plain_case(w) for w in raw]
    assert len({i for s in task.lines.values() for i in s}) == 900
    assert task.lines['train'][:5] == truecase_task(n_train=5, n_dev=1, n_test=1, seed=5).lines['train']
    counts = Counter(t for _, ts in task.train for t in ts)
    assert counts[0] > counts[1] > counts[2] > 0

def test_the_kjv_conventions():
    assert [case_of(w) for w in words_of('the LORD God, the Lord GOD, my lord')] == [0, 2, 1, -100, 0, 1, 2, -100, 0, 0]
    assert [case_of(w) for w in ('I', 'a', 'A', "O", 'LORD', 'Lord', '3', '')] == [1, 0, 1, 1, 2, 1, -100, -100]

def test_labels_sit_on_first_pieces(tok):
    "Each word tokenised alone: its first piece takes its label, the rest -100; the ids are encode's."
    rng = np.random.default_rng(0)
    split = 0
    for words, tags in truecase_task(n_train=200, n_dev=1, n_test=1, seed=1).train:
        a = align(tok, words, tags)
        ids, labels, wids = [tok.cls_id], [-100], [-1]
        for k, (w, t) in enumerate(zip(words, tags)):
            pieces = [tok.token_to_id(p) for p in tok.tokenize(w)]
            ids += pieces; labels += [t] + [-100] * (len(pieces) - 1); wids += [k] * len(pieces)
            split += len(pieces) > 1
        assert a['input_ids'] == ids + [tok.sep_id] and a['labels'] == labels + [-100] and a['word_ids'] == wids + [-1]
        assert a['token_type_ids'] == [0] * len(ids + [1])
        cut = int(rng.integers(3, len(ids) + 1))
        c = align(tok, words, tags, max_len=cut)
        assert c['input_ids'] == (ids + [tok.sep_id])[:cut - 1] + [tok.sep_id] and len(c['labels']) == min(cut, len(ids) + 1)
    assert split > 50  # words that split into several pieces were met (92 of them)

def test_windows_cover_every_word_once_and_fill_the_rows(tok):
    for words, _ in truecase_task(n_train=300, n_dev=1, n_test=1, seed=2).train:
        for T in (8, 32):
            spans = windows(tok, words, T)
            assert spans[0][0] == 0 and spans[-1][1] == len(words)
            assert all(a < b for a, b in spans) and all(b == a2 for (_, b), (a2, _) in zip(spans, spans[1:]))
            n = [len(tok.tokenize(w)) for w in words]
            for a, b in spans:
                assert sum(n[a:b]) <= T - 2 or b == a + 1  # fits, or one word too long alone
            for (a, b), _ in zip(spans, spans[1:]):
                assert sum(n[a:b + 1]) > T - 2  # the next word would not have fit

def test_the_head_is_its_equation(tok):
    m = fresh(0).double().eval()
    b = TagCollator(tok, 32)(short(truecase_task(n_train=6, n_dev=1, n_test=1).train, tok))
    with torch.no_grad():
        h = m.bert(b['input_ids'], attn_mask=b['attention_mask'])
        want = h @ m.classifier.weight.T + m.classifier.bias
        torch.testing.assert_close(m(b['input_ids'], b['attention_mask']), want, rtol=0, atol=1e-12)

def test_the_collator_is_transformers(tok, tmp_path):
    from transformers import BertTokenizerFast, DataCollatorForTokenClassification
    save_tagger(fresh(0), tmp_path / 't', tok)
    hf = DataCollatorForTokenClassification(BertTokenizerFast.from_pretrained(tmp_path / 't'))
    feats = [align(tok, w, t) for w, t in truecase_task(n_train=16, n_dev=1, n_test=1, seed=3).train]
    ours = TagCollator(tok, 512)(feats)
    theirs = hf([{k: f[k] for k in ('input_ids', 'token_type_ids', 'labels')} for f in feats])
    for k in ('input_ids', 'token_type_ids', 'attention_mask', 'labels'): assert torch.equal(ours[k], theirs[k]), k
    assert torch.equal(TagCollator(tok, 512)(truecase_task(n_train=16, n_dev=1, n_test=1, seed=3).train)['labels'],
                       theirs['labels'])  # (words, tags) examples: the same batch

@pytest.fixture(scope='module')
def tuned(tok):
    "A tagger tuned for one epoch on 200 verses, its weights nudged so that nothing is at its initial value."
    m = fresh(4)
    fine_tune_tagger(m, tok, truecase_task(n_train=200, n_dev=1, n_test=1, seed=4).train, epochs=1, lr=2e-3)
    return m.eval()

def test_transformers_reads_the_saved_tagger_and_back(tok, tuned, tmp_path):
    from transformers import BertForTokenClassification
    (tmp_path / 't').mkdir(); (tmp_path / 't' / 'notes.txt').write_text('mine')
    save_tagger(tuned, tmp_path / 't', tok)
    back, labels = load_tagger(tmp_path / 't')
    hf = BertForTokenClassification.from_pretrained(tmp_path / 't').double().eval()
    b = TagCollator(tok, 32)(short(truecase_task(n_train=40, n_dev=1, n_test=1, seed=6).train, tok))
    x, m = b['input_ids'], b['attention_mask']
    with torch.no_grad():
        assert torch.equal(back(x, m), tuned(x, m)) and labels == CASES
        ours = copy.deepcopy(tuned).double()(x, m)
        theirs = hf(input_ids=x, attention_mask=m, token_type_ids=b['token_type_ids']).logits
    cfg = BertConfig(**{**tuned.bert.config.to_dict(), 'n_layers': tuned.bert.config.n_layers + 1})
    real = m.bool()  # transformers computes the padding too; only the real positions are the same sums
    torch.testing.assert_close(theirs[real], ours[real], rtol=0,
                               atol=encoder_tol(cfg, x.shape[1], torch.float64, ours.abs().max().item()))
    assert hf.config.id2label == dict(enumerate(CASES)) and (tmp_path / 't' / 'notes.txt').read_text() == 'mine'
    hf.save_pretrained(tmp_path / 'theirs')  # what transformers writes, read back: the same logits
    again, _ = load_tagger(tmp_path / 'theirs')
    with torch.no_grad(): torch.testing.assert_close(again(x, m), tuned(x, m), rtol=0, atol=0)

def test_the_pipeline_labels_the_first_pieces(tok, tuned, tmp_path):
    from transformers import pipeline
    save_tagger(tuned, tmp_path / 't', tok)
    run = pipeline('token-classification', model=str(tmp_path / 't'), device='cpu')
    for words, _ in truecase_task(n_train=10, n_dev=1, n_test=1, seed=7).train:
        words = words[:windows(tok, words, 32)[0][1]]
        got = [e['entity'] for e in run(' '.join(words), ignore_labels=[]) if not e['word'].startswith('##')]
        assert got == [CASES[p] for p in predict_tags(tuned, tok, [words], max_len=32)[0]]

def test_predictions_read_the_first_piece_of_each_window(tok, tuned):
    texts = [w for w, _ in truecase_task(n_train=30, n_dev=1, n_test=1, seed=8).train]
    got = predict_tags(tuned, tok, texts, max_len=16, batch_size=7)
    for words, pred in zip(texts, got):
        want = []
        for a, b in windows(tok, words, 16):
            f = align(tok, words[a:b])
            with torch.no_grad(): logits = tuned(torch.tensor([f['input_ids']]))[0]
            want += [int(logits[j].argmax()) for j in range(len(f['word_ids']))
                     if f['word_ids'][j] >= 0 and f['word_ids'][j] != f['word_ids'][j - 1]]
        assert pred == want

def test_tuning_replays_learns_and_keeps_torch_rng(tok):
    task = truecase_task(n_train=300, n_dev=1, n_test=150, seed=9)
    def run(seed, torch_seed):
        torch.manual_seed(torch_seed)
        m, state = fresh(seed), torch.get_rng_state()
        losses = fine_tune_tagger(m, tok, task.train, epochs=2, lr=2e-3, seed=seed)
        assert torch.equal(torch.get_rng_state(), state)
        return losses, m
    (l1, m1), (l2, _), (l3, _) = run(0, 0), run(0, 1), run(1, 0)
    assert l1 == l2 and l1 != l3
    s = tag_scores([t for _, t in task.test], predict_tags(m1, tok, [w for w, _ in task.test]))
    lower = np.mean([t == 0 for _, ts in task.test for t in ts if t != -100])
    assert s['acc'] > lower + 0.02

def test_the_loss_counts_words_not_pieces():
    logits, labels = torch.randn(2, 5, 3, dtype=torch.float64), torch.tensor([[1, -100, 2, -100, 0], [-100] * 5])
    keep = [(0, 0), (0, 2), (0, 4)]
    want = -sum(torch.log_softmax(logits[r, c], -1)[labels[r, c]] for r, c in keep) / 3
    torch.testing.assert_close(tag_loss(logits, labels), want)
    assert tag_loss(logits, torch.full((2, 5), -100)).item() == 0  # nothing labelled: 0, not nan

def test_scores_are_the_counts():
    gold = [[0, 1, 2, -100, 1], [2, 2, 0]]
    pred = [[0, 2, 2, 1, 1], [2, 0, 0]]
    s = tag_scores(gold, pred)
    pairs = [(g, p) for gs, ps in zip(gold, pred) for g, p in zip(gs, ps) if g != -100]
    assert s['n'] == 7 and s['acc'] == sum(g == p for g, p in pairs) / 7
    for c in range(3):
        tp = sum(g == p == c for g, p in pairs); fp = sum(p == c != g for g, p in pairs)
        fn = sum(g == c != p for g, p in pairs)
        prec, rec = tp / (tp + fp), tp / (tp + fn)
        assert s['f1'][c] == pytest.approx(2 * prec * rec / (prec + rec), abs=1e-12)
    k = tag_scores(gold, pred, keep=[[False, True, True, True, False], [True, False, False]])
    assert k['n'] == 3 and k['acc'] == pytest.approx(2 / 3)

def test_the_baselines_are_lookups():
    train = [(['the', 'lord', 'said'], [1, 2, 0]), (['my', 'lord', 'the'], [1, 1, 0]), (['the', 'lord'], [0, 2])]
    table = case_table(train)
    assert table == {'the': Counter({0: 2, 1: 1}), 'lord': Counter({2: 2, 1: 1}), 'said': Counter({0: 1}),
                     'my': Counter({1: 1})}
    texts = [['the', 'lord', 'spake'], [',', 'my', 'lord']]
    assert by_table(table, texts) == [[0, 2, 0], [0, 1, 2]]
    assert by_table(table, texts, first=True) == [[1, 2, 0], [0, 1, 2]]
    assert by_table(table, [['lord', 'said']], first=True) == [[2, 0]]  # an UPPER first word stays UPPER
    assert ambiguous(table, texts) == [[True, True, False], [False, False, True]]
    tie = case_table([(['o'], [1]), (['o'], [2])])
    assert by_table(tie, [['o']]) == [[1]]  # a tie goes to the lower label
    assert by_form([['the', 'lord', 'lord']], [[0, 2, 1]], [[0, 2, 2]]) == {
        'lower': (0, 0), 'Capitalised': (0, 1), 'UPPER': (1, 1)}

def test_the_trainer_model_checks_and_returns_the_loss(tok):
    m = TaggerForTrainer(fresh(0).eval())
    b = TagCollator(tok, 32)(short(truecase_task(n_train=4, n_dev=1, n_test=1).train, tok))
    out = m(b['input_ids'], b['token_type_ids'], b['attention_mask'], b['labels'])
    torch.testing.assert_close(out['loss'], tag_loss(out['logits'], b['labels']))
    with pytest.raises(ValueError, match='labels must be'): m(b['input_ids'], labels=b['labels'][:, :3])
    with pytest.raises(ValueError, match='labels must be'): m(b['input_ids'], labels=b['labels'].clamp(min=3))

BAD_WORDS = [([], ValueError, 'at least one word'), ('a text', TypeError, 'words must be a list'),
             (['a', ''], TypeError, 'words must be a list'), ([1], TypeError, 'words must be a list')]

@pytest.mark.parametrize('words, err, match', BAD_WORDS)
def test_bad_words_are_refused(tok, words, err, match):
    with pytest.raises(err, match=match): align(tok, words)

@pytest.mark.parametrize('tags, match', [([0], 'a label for each of the 2 words'), ([0, 3], 'got 3'),
                                         ([0, -1], 'got -1'), ([0, True], 'got True'), ([0, 1.0], 'got 1.0')])
def test_bad_tags_are_refused(tok, tags, match):
    with pytest.raises(ValueError, match=match): align(tok, ['in', 'beginning'], tags)
    with pytest.raises(ValueError, match=match): fine_tune_tagger(fresh(0), tok, [(['in', 'beginning'], tags)])

def test_bad_arguments_are_refused(tok, tmp_path):
    m = fresh(0)
    with pytest.raises(TypeError, match='bert must be a BertEncoder'): TokenClassifier(object(), 3)
    with pytest.raises(ValueError, match='n_labels'): TokenClassifier(m.bert, 1)
    with pytest.raises(ValueError, match='dropout'): TokenClassifier(m.bert, 3, dropout=1.5)
    with pytest.raises(ValueError, match='max_len'): windows(tok, ['a'], 2)
    with pytest.raises(ValueError, match='max_len'):  # one more than the model's positions
        predict_tags(m, tok, [['a']], max_len=m.bert.config.max_len + 1)
    with pytest.raises(TypeError, match='texts must be a list'): predict_tags(m, tok, 'a verse')
    with pytest.raises(ValueError, match='non-empty list of \\(words, tags\\)'): fine_tune_tagger(m, tok, [])
    with pytest.raises(ValueError, match='labels has 2 names for 3 logits'):
        save_tagger(m, tmp_path / 'x', tok, ['a', 'b'])
    assert not list(tmp_path.iterdir())  # nothing half-written
    with pytest.raises(ValueError, match='no BERT token classifier'): load_tagger(KJV)
    with pytest.raises(ValueError, match='an entry for each word'): tag_scores([[0, 1]], [[0]])
    with pytest.raises(ValueError, match=r'labels must be in \[0, 3\)'): tag_scores([[0, 5]], [[0, 1]])
    logits, tags = torch.zeros(2, 4, 3), torch.zeros(2, 4, dtype=torch.long)
    for bad, msg in [(tags + 3, r'labels must be -100 or in \[0, 3\), got 3'), (tags.float(), 'integer or bool'),
                     (tags[:, :3], r'shape of ids \(2, 4\), got \(2, 3\)'), (tags.bool(), 'got a bool tensor')]:
        with pytest.raises(ValueError, match=msg): tag_loss(logits, bad)  # torch's IndexError or dtype error before
    with pytest.raises(ValueError, match='logits must be a float'): tag_loss(tags, tags)
    assert tag_loss(logits, tags.to(torch.int16)) == tag_loss(logits, tags)  # any integer type, as 02's labels
    with pytest.raises(TypeError, match='keep must be'): tag_scores([[0]], [[0]], keep=[[1]])
    with pytest.raises(ValueError, match='more than max_len'): TagCollator(tok, 4)([(['a', 'b', 'c'], [0, 0, 0])])
    f = align(tok, ['a', 'b'], [0, 1])
    for bad, match in [(f | {'labels': [0, 1]}, 'labels has 2 entries, input_ids 4'),
                       (f | {'input_ids': [2, 10_000, 5, 3]}, r'input_ids must be in \[0, 8192\)'),
                       (f | {'labels': [-100, 3, 0, -100]}, r'labels in \[0, 3\) or -100'), ('a b', 'an example must be')]:
        with pytest.raises(ValueError, match=match): TagCollator(tok, 32)([bad])
    with pytest.raises(ValueError, match='n_train'): truecase_task(n_train=0)
    with pytest.raises(ValueError, match='at most'): truecase_task(n_train=31_000)

def test_a_sentence_classifier_does_not_load_as_a_tagger(tok, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        clf = Classifier(load_bert(KJV, BertEncoder, pooler=True), 3, rng=PCG32(0))
    save_classifier(clf, tmp_path / 'c', tok, list('abc'))
    with pytest.raises(ValueError, match='no BERT token classifier'): load_tagger(tmp_path / 'c')

# sentence pairs (chapter 05, section 9)

def test_the_pair_task_is_next_verses_and_same_book_others():
    task, verses = pair_task(n_train=400, n_dev=100, n_test=200, seed=3), kjv_verses()
    books = {}
    for v in verses: books.setdefault(v.book, []).append(v.text)
    nexts = 0
    for s in ('train', 'dev', 'test'):
        for i, ((a, b), y) in zip(task.lines[s], getattr(task, s)):
            assert a == verses[i].text and verses[i + 1].book == verses[i].book
            assert y == int(b == verses[i + 1].text) and b in books[verses[i].book] and b != a
            nexts += y
    assert len({i for s in task.lines.values() for i in s}) == 700 and abs(nexts - 350) < 4 * (700 * 0.25) ** 0.5
    assert pair_task(400, 100, 200, seed=3) == task and pair_task(400, 100, 200, seed=4) != task

def test_a_pair_classifier_reads_segment_b_as_transformers_does(tok, tmp_path):
    from transformers import BertForSequenceClassification
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        clf = Classifier(load_bert(KJV, BertEncoder, pooler=True), 2, rng=PCG32(1))
    task = pair_task(n_train=200, n_dev=10, n_test=40, seed=1)
    fine_tune(clf, tok, task.train, epochs=1)
    save_classifier(clf.eval(), tmp_path / 'p', tok, task.labels)
    hf = BertForSequenceClassification.from_pretrained(tmp_path / 'p').double().eval()
    b = MLMCollator(tok, p=0.0, max_len=32)([t for t, _ in task.test])
    x, m, types = b['input_ids'], b['attention_mask'], b['token_type_ids']
    assert (types == 1).any(1).all()  # every row has a segment B
    with torch.no_grad():
        got = predict(clf, tok, [t for t, _ in task.test], max_len=32)
        ours = clf.double()(x, m, types)
        theirs = hf(input_ids=x, attention_mask=m, token_type_ids=types).logits
    cfg = BertConfig(**{**clf.bert.config.to_dict(), 'n_layers': clf.bert.config.n_layers + 1})
    torch.testing.assert_close(theirs, ours, rtol=0, atol=encoder_tol(cfg, x.shape[1], torch.float64, ours.abs().max().item()))
    torch.testing.assert_close(got.double(), ours, rtol=0, atol=1e-4)  # predict passes the token types

def test_the_pair_bag_counts_each_text_apart(tok):
    "The same two verses, the label saying which came first: one bag reads both orders alike; the two bags do not."
    from bert_nb.finetune import Task
    v = [x.text for x in kjv_verses()[:40]]
    pairs = [p for i in range(10) for p in (((v[i], v[i + 20]), 0), ((v[i + 20], v[i]), 1))]  # each both ways
    task = Task('order', ['a first', 'b first'], pairs, pairs, pairs, {})
    acc, _ = bag_of_words(tok, task, decays=(1e-6,))
    assert acc == 1.0

@pytest.mark.parametrize('kw, err, match', [(dict(n_train=0), ValueError, 'n_train'), (dict(n_dev=1.5), TypeError, 'n_dev'),
                                             (dict(seed=-1), ValueError, 'seed'), (dict(n_train=31_000), ValueError, 'at most')])
def test_bad_pair_tasks_are_refused(kw, err, match):
    with pytest.raises(err, match=match): pair_task(**kw)

def test_pair_texts_are_checked(tok):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        clf = Classifier(load_bert(KJV, BertEncoder, pooler=True), 2, rng=PCG32(0))
    with pytest.raises(ValueError, match='a text a str or a'): fine_tune(clf, tok, [(('a', 1), 0)])
    with pytest.raises(TypeError, match='texts must be a list'): predict(clf, tok, [('a', 'b', 'c')])

D = json.loads((KJV / 'config.json').read_text())['hidden_size']  # the shipped encoder's width

# #56: a saved tagger is checked as save_tagger checks what it writes, and keeps its rate
@pytest.mark.parametrize('config,weights,msg', [
    (None, {'classifier.weight': torch.zeros(4, D)}, rf'classifier.weight \(n, {D}\) and .bias \(n,\)'),
    (None, {'classifier.bias': torch.zeros(3, 1)}, rf'classifier.weight \(n, {D}\) and .bias \(n,\)'),
    ({'id2label': {'0': 1, '1': 2, '2': 3}}, None, 'distinct names'),
    ({'id2label': {'0': 'a', '1': 'a', '2': 'b'}}, None, 'distinct names'),
    ({'classifier_dropout': -1}, None, 'classifier_dropout'), ({'classifier_dropout': 1}, None, 'classifier_dropout')])
def test_load_tagger_refuses_what_save_tagger_would_not_write(tok, tmp_path, config, weights, msg):
    d = edited(save_tagger(fresh(0), tmp_path / 't', tok), tmp_path / 'e', config, weights)
    with pytest.raises(ValueError, match=msg): load_tagger(d)

def test_a_tagger_keeps_its_dropout(tok, tmp_path):
    "A rate other than the default comes back; without one, transformers' own default for its classifiers."
    from transformers import BertConfig as HFBertConfig
    m = TokenClassifier(fresh(0).bert, 3, dropout=0.37, rng=PCG32(0))
    back, _ = load_tagger(save_tagger(m, tmp_path / 't', tok))
    assert back.dropout.p == 0.37
    d = edited(tmp_path / 't', tmp_path / 'e', {'classifier_dropout': None, 'hidden_dropout_prob': None})
    assert load_tagger(d)[0].dropout.p == HFBertConfig().hidden_dropout_prob  # 0.1, where it was a KeyError

def test_tags_and_features_that_are_not_what_they_seem(tok):
    """A dict's values or a set are no tags; a float id is no id (9.7 was read as 9); a feature with no tokens or a
    label where its own mask says padding is refused; a feature's own attention_mask is kept, as
    DataCollatorForTokenClassification keeps it (it was replaced by ones)."""
    with pytest.raises(TypeError, match='tags must be a list'): align(tok, ['a', 'b'], {0: 1, 1: 0})
    with pytest.raises(TypeError, match='tags must be a list'): align(tok, ['a', 'b'], {0, 1})
    with pytest.raises(TypeError, match='tags must be a list'): align(tok, ['a', 'b'], 'ab')  # a str: no labels
    f, coll = align(tok, ['in', 'the', 'beginning'], [1, 0, 0]), TagCollator(tok, 32)
    for bad, msg in [(f | {'input_ids': [float(i) + 0.7 for i in f['input_ids']]}, 'input_ids must be integers'),
                     (f | {'labels': [float(y) for y in f['labels']]}, 'labels must be integers'),
                     ({'input_ids': [], 'labels': []}, 'has no tokens'),
                     (f | {'input_ids': [len(tok)] * len(f['input_ids'])}, r'input_ids must be in \[0, 8192\)'),
                     (f | {'attention_mask': [1, 1, 1, 0, 0]}, 'a padded position')]:  # 'beginning': its label
        with pytest.raises(ValueError, match=msg): coll([bad])
    g = align(tok, ['and'], [0]) | {'attention_mask': [1, 1, 1]}
    kept = coll([f | {'attention_mask': [1, 1, 1, 1, 0]}, g])
    from transformers import BertTokenizerFast, DataCollatorForTokenClassification
    theirs = DataCollatorForTokenClassification(BertTokenizerFast(str(KJV / 'vocab.txt')), return_tensors='pt')(
        [{k: v for k, v in (f | {'attention_mask': [1, 1, 1, 1, 0]}).items() if k != 'word_ids'},
         {k: v for k, v in g.items() if k != 'word_ids'}])
    for k in ('input_ids', 'attention_mask', 'labels'): assert torch.equal(kept[k], theirs[k]), k
    assert kept['attention_mask'][0].tolist() == [1, 1, 1, 1, 0]  # the feature's own mask, not ones

def test_a_bare_pair_and_mixed_sets_are_refused(tok):
    """A pair where a list of texts belongs (it was read as two texts), a list mixing texts and pairs, and a task whose
    sets mix them (bag_of_words trained on pairs and chose on single texts) are refused; so is by_table of no table."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        clf = Classifier(load_bert(KJV, BertEncoder, pooler=True), 2, rng=PCG32(0))
    with pytest.raises(TypeError, match='texts must be a list'): predict(clf, tok, ('in the beginning', 'god'))
    with pytest.raises(ValueError, match='all single texts or all'): predict(clf, tok, ['a', ('a', 'b')])
    assert predict(clf, tok, [('in the beginning', 'god')]).shape == (1, 2)  # a list of one pair: one row
    task = pair_task(n_train=40, n_dev=10, n_test=10, seed=1)
    mixed = task._replace(dev=[(a, y) for (a, _), y in task.dev])
    with pytest.raises(ValueError, match='mixes single texts and'): bag_of_words(tok, mixed)
    with pytest.raises(TypeError, match='texts must be a list of word lists'): by_table({}, None)
    with pytest.raises(TypeError, match='table must be'): by_table(None, [['a']])
