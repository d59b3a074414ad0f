"""Fine-tuning (#37): the tasks' labels against the canon written out here, the classifier against its equation in
float64 and against transformers' BertForSequenceClassification, the bag of words at its optimum, bad input refused."""
import warnings
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tol import encoder_tol
from bert_nb import KJV, BertConfig, BertEncoder, MLMCollator, PCG32, WordPieceTokenizer, kjv_verses, load_bert
from bert_nb.finetune import (Classifier, ClassifierForTrainer, LabelCollator, SECTION, bag_of_words, fine_tune,
                              load_classifier, majority, predict, save_classifier, verse_task)

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
        losses = fine_tune(c, tok, task.train, epochs=2, seed=seed)
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
