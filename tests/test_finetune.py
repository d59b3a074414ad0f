"""Fine-tuning (#37): the tasks' labels against the canon written out here, the classifier against its equation in
float64 and against transformers' BertForSequenceClassification, the bag of words at its optimum, bad input refused."""
import json, warnings
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tol import encoder_tol
from bert_nb import KJV, BertConfig, BertEncoder, MLMCollator, PCG32, WordPieceTokenizer, kjv_verses, load_bert
from bert_nb.finetune import (Classifier, ClassifierForTrainer, LabelCollator, SECTION, accuracy, bag_of_words, confusion,
                              fine_tune, load_classifier, majority, plot_books, plot_confusion, predict, save_classifier,
                              verse_task)

# Verses in each section, summed from the canon's verse counts (the Old Testament 23,145, the New 7,957; the
# Pentateuch 5,852; Joshua to Esther 7,018 and Acts 1,007; Job to the Song 4,785; Isaiah to Malachi 5,490 and
# Revelation 404; the gospels 3,779; Romans to Jude the rest of the New Testament, 2,767).
CANON = {'law': 5852, 'history': 7018 + 1007, 'poetry': 4785, 'prophets': 5490 + 404, 'gospels': 3779,
         'letters': 7957 - 3779 - 1007 - 404}

def safe_open_keys(path) -> set:
    from safetensors import safe_open
    with safe_open(path, 'pt') as f: return set(f.keys())

@pytest.fixture(scope='module')
def tok(): return WordPieceTokenizer.from_vocab(KJV)

@pytest.fixture(scope='module')
def enc():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return load_bert(KJV, BertEncoder, pooler=True)

def test_sections_follow_the_canon():
    verses = kjv_verses()
    counts = {s: sum(SECTION[v.book] == s for v in verses) for s in CANON}
    assert counts == CANON and sum(CANON.values()) == len(verses) == 31102
    first = {v.book: v for v in reversed(verses)}  # each book's first verse
    assert first['Acts'].text.startswith('The former treatise') and SECTION['Acts'] == 'history'
    assert first['Revelation'].text.startswith('The Revelation of Jesus Christ') and SECTION['Revelation'] == 'prophets'

@pytest.mark.parametrize('name', ['testament', 'section'])
def test_a_task_is_three_disjoint_labelled_draws(name):
    task = verse_task(name, n_train=300, n_dev=100, n_test=200, seed=3)
    verses = kjv_verses()
    label = {v.text: (v.testament if name == 'testament' else SECTION[v.book]) for v in verses}
    sets = [task.train, task.dev, task.test]
    assert [len(s) for s in sets] == [300, 100, 200]
    assert all(task.labels[y] == label[t] for s in sets for t, y in s)
    lines = [task.lines[k] for k in ('train', 'dev', 'test')]
    assert len({i for s in lines for i in s}) == 600  # 600 distinct lines of the corpus
    assert all(verses[i].text == t for s, ls in zip(sets, lines) for (t, _), i in zip(s, ls))
    assert verse_task(name, 300, 100, 200, seed=3) == task and verse_task(name, 300, 100, 200, seed=4) != task

@pytest.mark.parametrize('kw, match', [(dict(name='book'), "name must be one of"), (dict(n_train=0), 'n_train'),
                                        (dict(n_dev=1.5), 'n_dev'), (dict(n_test=True), 'n_test'),
                                        (dict(n_train=31000), 'at most 31102')])
def test_bad_tasks_are_refused(kw, match):
    with pytest.raises(ValueError, match=match): verse_task(**kw)

def test_the_classifier_is_its_equation(enc, tok):
    "softmax(W_c tanh(W_p h_[CLS] + b_p) + b_c), in float64 on a float64 model: the same sums."
    clf = fresh(0, 6).double().eval()
    b = MLMCollator(tok, p=0.0, max_len=32)([v.text for v in kjv_verses()[:5]])
    with torch.no_grad():
        h = clf.bert(b['input_ids'], attn_mask=b['attention_mask'])[:, 0]
        p = torch.tanh(h @ clf.bert.pooler.dense.weight.T + clf.bert.pooler.dense.bias)
        want = p @ clf.classifier.weight.T + clf.classifier.bias
        got = clf(b['input_ids'], b['attention_mask'])
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)

def test_bad_classifiers_are_refused(enc, tok, tmp_path):
    with pytest.raises(TypeError, match='bert must be a BertEncoder'): Classifier(object(), 2)
    with pytest.raises(ValueError, match='pooler=True'): Classifier(BertEncoder(enc.config), 2)
    with pytest.raises(ValueError, match='n_labels'): Classifier(enc, 1)
    clf = Classifier(enc, 2, rng=PCG32(0))
    with pytest.raises(ValueError, match='labels has 3 names for 2 logits'):
        save_classifier(clf, tmp_path / 'x', tok, ['a', 'b', 'c'])
    assert not (tmp_path / 'x').exists() and not list(tmp_path.iterdir())  # nothing half-written
    for bad, match in [([], 'non-empty list'), ([('a', 2)], 'label in 0..1'), ([('a',)], "each must be"),
                       ('text', 'non-empty list')]:
        with pytest.raises(ValueError, match=match): fine_tune(clf, tok, bad)
    with pytest.raises(ValueError, match='no BERT sentence classifier'): load_classifier(KJV)

def test_transformers_reads_the_saved_classifier(enc, tok, tmp_path):
    "BertForSequenceClassification from the directory, in float64: the same sums; our load: bit for bit."
    from transformers import BertForSequenceClassification
    clf = fresh(1, 3).eval()
    with torch.no_grad():
        for p in clf.parameters(): p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(2)) * 0.05)
    (tmp_path / 'clf').mkdir()
    (tmp_path / 'clf' / 'notes.txt').write_text('mine')  # a file beside the model: kept
    save_classifier(clf, tmp_path / 'clf', tok, ['x', 'y', 'z'])
    back, labels = load_classifier(tmp_path / 'clf')
    hf = BertForSequenceClassification.from_pretrained(tmp_path / 'clf').double().eval()
    b = MLMCollator(tok, p=0.0, max_len=32)([v.text for v in kjv_verses()[100:140]])
    x, m, types = b['input_ids'], b['attention_mask'], b['token_type_ids']
    with torch.no_grad():
        assert torch.equal(back(x, m), clf(x, m)) and labels == ['x', 'y', 'z']
        ours = clf.double()(x, m)
        theirs = hf(input_ids=x, attention_mask=m, token_type_ids=types).logits
    # the encoder's bound, and two more chains for the pooler and the classifier: under a layer's
    cfg = BertConfig(**{**enc.config.to_dict(), 'n_layers': enc.config.n_layers + 1})
    torch.testing.assert_close(theirs, ours, rtol=0, atol=encoder_tol(cfg, x.shape[1], torch.float64, ours.abs().max().item()))
    assert hf.config.id2label == {0: 'x', 1: 'y', 2: 'z'}
    hf.save_pretrained(tmp_path / 'theirs')  # the names transformers itself writes: the same
    assert safe_open_keys(tmp_path / 'theirs' / 'model.safetensors') == safe_open_keys(tmp_path / 'clf' / 'model.safetensors')
    assert (tmp_path / 'clf' / 'notes.txt').read_text() == 'mine'

def fresh(seed: int, n: int = 2) -> Classifier:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return Classifier(load_bert(KJV, BertEncoder, pooler=True), n, rng=PCG32(seed))

def test_fine_tuning_replays_and_learns(tok):
    task = verse_task('testament', n_train=800, n_dev=10, n_test=300, seed=1)
    def run(seed: int, torch_seed: int):
        torch.manual_seed(torch_seed)  # the caller's own use of torch's generator: no say in the run
        c, state = fresh(seed), torch.get_rng_state()
        losses = fine_tune(c, tok, task.train, epochs=2, lr=1e-3, seed=seed)  # 50 steps: a larger rate learns
        assert torch.equal(torch.get_rng_state(), state)  # and the run leaves it where it was
        return losses, c
    (l1, c1), (l2, _), (l3, _) = run(0, 0), run(0, 1), run(1, 0)
    assert l1 == l2 and l1 != l3 and len(l1) == 50
    right = predict(c1, tok, [t for t, _ in task.test]).argmax(1) == torch.tensor([y for _, y in task.test])
    assert right.float().mean() > majority(task) + 0.03

def test_the_bag_of_words_is_the_penalised_optimum(tok):
    """The same convex problem fitted here on a dense count matrix in float64, to a gradient under 1e-8: its
    optimum is unique, so its test predictions are bag_of_words' (one verse of 200 allowed to sit on the fence)."""
    task = verse_task('section', n_train=400, n_dev=100, n_test=200, seed=2)
    acc, decay = bag_of_words(tok, task, decays=(1e-3,))
    def counts(pairs):
        X = np.zeros((len(pairs), len(tok)))
        for r, (t, _) in enumerate(pairs): np.add.at(X[r], tok.encode(t)[:-1], 1)  # [CLS] and the pieces
        return torch.from_numpy(X), torch.tensor([y for _, y in pairs])
    (X, y), (Xt, yt) = counts(task.train), counts(task.test)
    W = torch.zeros(len(tok), 6, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([W], max_iter=2000, tolerance_grad=1e-12, tolerance_change=0,
                            line_search_fn='strong_wolfe')
    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(X @ W, y) + 1e-3 * W.square().sum()
        loss.backward()
        return loss
    opt.step(closure)
    closure()
    assert W.grad.abs().max() < 1e-8
    want = ((Xt @ W).argmax(1) == yt).double().mean().item()
    assert decay == 1e-3 and abs(acc - want) <= 1 / 200 and acc > majority(task)

def test_the_trainer_glue(tok):
    "LabelCollator's batch through ClassifierForTrainer: the logits of the classifier, and their mean cross-entropy."
    clf = fresh(0, 2).eval()
    pairs = [(v.text, int(v.testament == 'new')) for v in kjv_verses()[23140:23150]]
    b = LabelCollator(tok, 32)([{'text': t, 'labels': y} for t, y in pairs])
    assert b['labels'].tolist() == [y for _, y in pairs] and b['input_ids'].shape[0] == 10
    with torch.no_grad():
        out = ClassifierForTrainer(clf)(b['input_ids'], b['token_type_ids'], b['attention_mask'], b['labels'])
        logits = clf(b['input_ids'], b['attention_mask'])
    want = -torch.log_softmax(logits.double(), 1)[torch.arange(10), b['labels']].mean()
    assert torch.equal(out['logits'], logits) and abs(out['loss'].item() - want.item()) < 1e-6
    with pytest.raises(TypeError, match='model must be a Classifier'): ClassifierForTrainer(clf.bert)

# ------------------------------------------------------------------------------------------------ bad input (#43)

def weights(m) -> list: return [p.detach().clone() for p in m.parameters()]

@pytest.mark.parametrize('kw, error, match', [
    (dict(epochs=-1), ValueError, r'epochs must be in \[1, inf\), got -1'),       # trained nothing, returned
    (dict(batch_size=-4), ValueError, r'batch_size must be in \[1'),
    (dict(lr=float('inf')), ValueError, r'lr must be a finite number in \(0'),     # every weight NaN
    (dict(weight_decay=float('nan')), ValueError, 'weight_decay must be a finite number'),
    (dict(warmup=2.0), ValueError, r'warmup must be a finite number in \[0, 1\]'),
    (dict(max_len=10**6), ValueError, 'max_len must be in'), (dict(seed=-1), ValueError, 'seed must be in'),
    (dict(lr='1e-3'), TypeError, "lr must be a number, got str '1e-3'")])
def test_fine_tune_refuses_bad_settings_before_any_step(tok, kw, error, match):
    clf = fresh(0); before = weights(clf)
    with pytest.raises(error, match=match): fine_tune(clf, tok, [('In the beginning', 0)] * 4, **kw)
    assert all(torch.equal(a, b) for a, b in zip(before, weights(clf)))

def test_labels_are_ints_and_texts_are_lists(tok):
    clf = fresh(0)
    with pytest.raises(ValueError, match=r"holds \('a', True\)"): fine_tune(clf, tok, [('a', True)])  # was label 1
    with pytest.raises(TypeError, match='texts must be a list of str.*, got str'): predict(clf, tok, 'a str')
    assert predict(clf, tok, []).shape == (0, 2)                                  # was a traceback
    small = WordPieceTokenizer.from_tokens(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'a'])
    with pytest.raises(ValueError, match="tok has 6 tokens, the model's vocab is"): predict(clf, tok=small, texts=['a'])
    with pytest.raises(ValueError, match='logits has 3 rows for 2 pairs'): accuracy(torch.zeros(3, 2), [('a', 0), ('b', 1)])
    with pytest.raises(ValueError, match='label in 0..1'): accuracy(torch.zeros(1, 2), [('a', 2)])
    with pytest.raises(TypeError, match='task must be a Task'): majority(('a', 'b'))
    with pytest.raises(ValueError, match='decays must be a non-empty list'): bag_of_words(tok, verse_task(n_train=10, n_dev=5, n_test=5), ())
    with pytest.raises(ValueError, match='dropout must be a finite number'): Classifier(fresh(0).bert, 2, dropout=1.5)

def test_save_classifier_labels_are_names(tok, tmp_path):
    clf = fresh(0)
    for bad in ('ab', ['a', 'a'], ['a', 3]):                                    # 'ab': its characters, as labels
        with pytest.raises(ValueError, match='labels must be a list of distinct names'): save_classifier(clf, tmp_path / 'x', tok, bad)
    assert list(tmp_path.iterdir()) == []

def test_load_classifier_reads_transformers_default_labels(tmp_path):
    "A BertForSequenceClassification saved with its default labels: no id2label (KeyError), so LABEL_0, LABEL_1."
    from transformers import BertConfig as HFConfig, BertForSequenceClassification
    hf = BertForSequenceClassification(HFConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                                intermediate_size=16, max_position_embeddings=16)).eval()
    hf.save_pretrained(tmp_path / 'm')
    cfg = json.loads((tmp_path / 'm' / 'config.json').read_text()); cfg.pop('id2label', None); cfg.pop('label2id', None)
    (tmp_path / 'm' / 'config.json').write_text(json.dumps(cfg))
    clf, labels = load_classifier(tmp_path / 'm')
    x = torch.tensor([[2, 7, 9, 3]])
    assert labels == ['LABEL_0', 'LABEL_1']
    want = hf(input_ids=x).logits  # float32: the encoder's bound, and one chain more for the pooler and classifier
    cfg = BertConfig(40, max_len=16, d_model=8, n_heads=2, n_layers=2, d_ff=16)
    torch.testing.assert_close(clf(x), want, rtol=0, atol=encoder_tol(cfg, 4, torch.float32, want.abs().max().item()))

def test_the_metrics_and_plots_refuse_what_they_cannot_count():
    with pytest.raises(ValueError, match='y has 2 labels, predicted 3'): confusion([0, 1], [0, 1, 1], 2)
    with pytest.raises(ValueError, match=r'predicted must be a list of labels in \[0, 2\)'): confusion([0, 1], [0, 2], 2)
    with pytest.raises(ValueError, match=r'y must be a list of labels'): confusion([True, False], [0, 1], 2)
    with pytest.raises(ValueError, match="books holds 'Hezekiah', not a book of the canon"):  # dropped silently
        plot_books(['Genesis', 'Hezekiah'], [True, False])
    with pytest.raises(ValueError, match='books has 2 verses, right 1'): plot_books(['Genesis', 'Exodus'], [True])
    with pytest.raises(ValueError, match='cm must be 2 x 2 counts'): plot_confusion(np.ones((3, 3), int), ['a', 'b'])

def test_the_trainer_glue_refuses_what_it_cannot_train_on(tok):
    with pytest.raises(ValueError, match=r"examples must be a non-empty list of \{'text': str, 'labels': int\}"):
        LabelCollator(tok, 32)([{'text': 'In the beginning'}])                   # no labels
    m = ClassifierForTrainer(fresh(0))
    b = LabelCollator(tok, 32)([{'text': 'In the beginning', 'labels': 1}])
    with pytest.raises(ValueError, match=r'labels must be 1 label ids in \[0, 2\)'):
        m(b['input_ids'], b['token_type_ids'], b['attention_mask'], torch.tensor([2]))  # past n_labels

def test_baselines_and_plots_of_what_is_missing():
    """#56: the majority of no test verses was NaN, of a label past the names 1.0; a label with no example made its
    row of shares NaN; plot_scores without its baselines was a KeyError."""
    from bert_nb.finetune import Task, majority, plot_scores
    t = Task('t', ['a', 'b'], [('x', 0), ('y', 0), ('z', 1)], [('w', 0)], [('v', 0), ('u', 1)], {})
    assert majority(t) == 0.5  # the commonest training label, 'a', is right on one test verse of two
    with pytest.raises(ValueError, match='task.test must be a non-empty list'): majority(t._replace(test=[]))
    with pytest.raises(ValueError, match=r'task.train holds .*label in 0..1'): majority(t._replace(train=[('x', 5)]))
    shares = plot_confusion(np.array([[3, 1], [0, 0]]), ['a', 'b'])
    assert shares.tolist() == [[0.75, 0.25], [0.0, 0.0]]  # no example of b: a row of 0s, marked, not NaN
    runs = [dict(task=k, model='kjv', acc=a, split='test') for k in ('testament', 'section') for a in (0.6, 0.7, 0.8)]
    assert plot_scores(runs) == {'testament': {'kjv': 0.7}, 'section': {'kjv': 0.7}}

def test_load_classifier_checks_its_head(enc, tok, tmp_path):
    "#56: a weight of 3 rows over a bias of 2 was a torch traceback from load_state_dict."
    from saving import edited
    d = save_classifier(Classifier(enc, 2, rng=PCG32(0)), tmp_path / 'c', tok, ['no', 'yes'])
    bad = edited(d, tmp_path / 'e', None, {'classifier.weight': torch.zeros(3, enc.config.d_model)})
    with pytest.raises(ValueError, match=r'classifier.weight \(n, \d+\) and .bias \(n,\)'):
        load_classifier(bad)
