"""The site's page where the chapter's BERT runs in the reader's browser (#59, tools/site_templates/play.md, the
script bundled from ports/js), in the headless Chromium that `make docs-check` drives, with the network cut off: its
WordPiece gives WordPieceTokenizer's ids, its logits are PyTorch's within the float32 bound of tests/tol.py, its top
five are `fill`'s, its drawn masks are mlm_batch's, its attention and reach are transformers' and attention_reach's,
a model of `bert-nb train --steps 30` opened through the file picker gives that model's logits, and every file that is
not such a model gets one message on the page and no script error."""
import base64, copy, importlib.util, json, os, shutil, subprocess, sys, warnings
from pathlib import Path
import numpy as np
import pytest
import torch
from bert_nb import (KJV, PCG32, BertConfig, BertEncoder, WordPieceTokenizer, fill, kjv_verses, load_bert,
                     mlm_batch, save_bert)
from tol import encoder_tol

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / '_docs'
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))
from browser import chromium  # noqa: E402
from kjv import widen  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
CHROMIUM = chromium()
HANG_MS = 60_000  # a hang's guard: the page is usable in under 2 s on a quiet machine (bench/play.json), 30 times that
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason='no chromium: `make chromium` gets one, `make test` runs it')
HARD = ['', '   ', '\t\n', 'Café déjà vu', 'naïve ÀÉÎÕÜ', '北京欢迎你 and 東京', 'emoji 😀👍🏽 family 👨‍👩‍👧',
        'a' * 300, 'x' * 100, 'x' * 101, "don't--stop!!! (yes) [MASK] [mask] [MASK]x", 'Ǆ ǅ ǆ ß ẞ İ ı',
        'zero\u200bwidth soft\u00adhyphen', 'tab\there\r\nnew line', 'Ελληνικά Кириллица עברית العربية हिन्दी']

def built_page(tmp: Path) -> Path:
    """The built page, play.html: `make test` has just built the site for docs-check (a run elsewhere names it in
    BERT_NB_SITE; where there is none, it is built here from the stored outputs). Where its script is not ports/js as
    it is now (the scratch copy of a mutant), a mirror of the site in `tmp` takes the script bundled now."""
    spec = importlib.util.spec_from_file_location('bundle', ROOT / 'tools' / 'bundle.py')  # tools/ is no package
    spec.loader.exec_module(tools := importlib.util.module_from_spec(spec))
    site = Path(os.environ.get('BERT_NB_SITE', SITE))
    if not (site / 'play.html').exists():
        subprocess.run([sys.executable, str(ROOT / 'tools' / 'site.py'), '--no-execute'], check=True, capture_output=True)
    script = tools.bundle()
    if (site / 'assets' / 'play' / 'bert-nb.js').read_text() == script: return site / 'play.html'
    (tmp / 'assets' / 'play').mkdir(parents=True)
    for f in site.iterdir():
        if f.name != 'assets': (tmp / f.name).symlink_to(f)
    for f in (site / 'assets').iterdir():
        if f.name != 'play': (tmp / 'assets' / f.name).symlink_to(f)
    for f in (site / 'assets' / 'play').iterdir():  # the model and its snapshots: the mirror's page loads them all
        if f.name != 'bert-nb.js': (tmp / 'assets' / 'play' / f.name).symlink_to(f)
    (tmp / 'assets' / 'play' / 'bert-nb.js').write_text(script)
    return tmp / 'play.html'

@pytest.fixture(scope='module')
def page(tmp_path_factory):
    "The page open in Chromium, the network cut off."
    html = built_page(tmp_path_factory.mktemp('site'))
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=['--no-sandbox', '--disable-gpu'])
        ctx = browser.new_context(viewport={'width': 1280, 'height': 900})
        ctx.set_default_timeout(HANG_MS)  # every wait and call on the page: a hang's guard
        outside = []
        ctx.route('**/*', lambda r: r.continue_() if r.request.url.startswith('file:')
                  else (outside.append(r.request.url), r.abort()))
        p, errors = ctx.new_page(), []
        p.on('pageerror', lambda e: errors.append(str(e)))
        p.goto(html.as_uri(), wait_until='load')
        p.wait_for_function('globalThis.BertNb && BertNb.page', timeout=HANG_MS)
        p.errors, p.outside = errors, outside
        yield p
        browser.close()
    assert not errors and not outside, (errors, outside)  # no script error, nothing asked of the network

@pytest.fixture(scope='module')
def kjv():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return load_bert(KJV).eval(), WordPieceTokenizer.from_vocab(KJV)

def shipped(page):
    page.set_input_files('#play-files', [])
    page.evaluate('BertNb.page.use(BertNb.loadShipped(BERT_NB_SHIPPED), BERT_NB_SHIPPED.name)')

B64 = """(ids, at) => {  // the logits of one row at positions `at` (all by default), float64 bytes as base64
  const out = BertNb.page.m.model.forward(ids, at ?? undefined).logits, V = out[0].length, all = new Float64Array(out.length * V);
  out.forEach((l, i) => all.set(l, i * V));
  const bytes = new Uint8Array(all.buffer);
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}"""

def logits(page, ids, at=None) -> torch.Tensor:
    "The page's logits of one row, exactly (float64 bytes: a JSON of millions of numbers takes minutes)."
    raw = np.frombuffer(base64.b64decode(page.evaluate(f'([ids, at]) => ({B64})(ids, at)', [ids, at])), np.float64)
    return torch.from_numpy(raw.copy()).reshape(len(at) if at is not None else len(ids), -1)

def test_wordpiece_in_the_page_gives_the_python_ids(page, kjv):
    tok, texts = kjv[1], [v.text for v in kjv_verses()] + HARD
    js = page.evaluate('texts => texts.map(t => BertNb.page.m.tok.encode(t))', texts)
    assert len(js) == len(texts) == 31_102 + len(HARD)
    assert [i for i, (a, t) in enumerate(zip(js, texts)) if a != tok.encode(t)] == []

def test_the_page_computes_pytorchs_logits(page, kjv):
    "Every position's logits for 8 held-out verses; for 50, the top five at every position and the blank's logits."
    model, tok = kjv
    model64 = copy.deepcopy(model).double()
    rows = [ids[:2] + [tok.mask_id] + ids[3:32] for ids in (tok.encode(v.text) for v in kjv_verses()[-50:])]
    for k, ids in enumerate(rows):
        with torch.no_grad(): ours = model(torch.tensor([ids]))[0][0].double()
        bound = encoder_tol(model.config, len(ids), torch.float32, ours.abs().max().item())  # float32's error alone
        js = logits(page, ids, None if k < 8 else [2])
        assert (js - (ours if k < 8 else ours[2:3])).abs().max().item() <= bound
        if k < 8:  # and the same formula in float64 on both sides: within float64's bound, 10⁻¹¹ here
            with torch.no_grad(): exact = model64(torch.tensor([ids]))[0][0]
            assert (js - exact).abs().max().item() <= encoder_tol(model.config, len(ids), torch.float64,
                                                                  exact.abs().max().item())
        top = page.evaluate("""ids => BertNb.page.m.model.forward(ids).logits.map(l =>
            [...l.keys()].sort((a, b) => l[b] - l[a] || a - b).slice(0, 5))""", ids)
        assert top == ours.topk(5).indices.tolist()  # at every position, [MASK] included

def blanks(tok, n=50):
    "n held-out verses, each with its first word of three letters or more (one token) hidden."
    out = []
    for v in kjv_verses()[-n:]:
        words = v.text.split()
        k = next(i for i, w in enumerate(words) if w.isalpha() and len(w) >= 3 and len(tok.encode(w)) == 3)
        out.append(' '.join(words[:k] + ['[MASK]'] + words[k + 1:]))
    return out

def test_the_pages_top_five_are_fills(page, kjv):
    "Typed into the page: its list under each [MASK] is fill's, word for word, probabilities to fill's 3 decimals."
    model, tok = kjv
    verses = [v.text for v in kjv_verses()[-60:-50]]
    long = [f'{verses[0]} {verses[1]} the [MASK] of the LORD.',  # past the rows: windows, clamped to the text's end
            f'[MASK] {verses[2]} {verses[3]} {verses[7]}', f'{verses[4]} [MASK] {verses[5]} {verses[6]} and [MASK]']
    for text in blanks(tok) + long:
        page.fill('#play-text', text)
        shown = [li.split(':', 1)[1].split() for li in page.locator('#play-fill li').all_inner_texts()]
        theirs = fill(model, tok, text)
        assert len(shown) == len(theirs) == text.count('[MASK]')
        if text in long: assert len(tok.encode(text)) > model.config.max_len
        for mine, top in zip(shown, theirs):
            assert mine[::2] == [t for t, _ in top]
            assert all(abs(float(s) - p) <= 5e-4 + 1e-6 for s, (_, p) in zip(mine[1::2], top))

def test_a_drawn_mask_is_mlm_batchs(page, kjv):
    model, tok = kjv
    shipped(page)
    for text in ['In the beginning God created the heaven and the earth.', kjv_verses()[100].text * 3, 'Amen.']:
        for seed, p in [(0, 0.15), (7, 0.5), (2026, 1.0), (3, 0.0)]:
            page.fill('#play-text', text); page.fill('#play-seed', str(seed)); page.fill('#play-p', str(p))
            page.click('#play-draw')
            got = page.evaluate('[BertNb.page.drawn.inputs, BertNb.page.drawn.labels]')
            b = mlm_batch(tok, [text], model.config.max_len, p, PCG32(seed))  # the page cuts at its model's rows
            assert got == [b['input_ids'][0].tolist(), b['labels'][0].tolist()]
            assert page.locator('.play-hidden').count() == int((b['labels'] >= 0).sum())

def test_the_picked_count_is_every_labelled_position(page, kjv):
    "'N positions picked' counts mlm_batch's labels != -100: those shown as [MASK], as a random id and as themselves."
    model, tok = kjv
    shipped(page)
    text = kjv_verses()[100].text * 3  # past the model's rows
    page.fill('#play-text', text)
    for seed, p in [(7, 0.5), (2026, 1.0)]:
        page.fill('#play-seed', str(seed)); page.fill('#play-p', str(p)); page.click('#play-draw')
        b = mlm_batch(tok, [text], model.config.max_len, p, PCG32(seed))
        picked, masked = int((b['labels'] >= 0).sum()), int((b['input_ids'] == tok.mask_id).sum())
        assert picked > masked  # some picked positions show a random id or the token itself
        assert f': {picked} positions picked;' in page.locator('#play-drawn').inner_text()

def test_a_click_hides_a_word_and_the_page_fills_it(page, kjv):
    model, tok = kjv
    page.fill('#play-text', 'And God said, Let there be light: and there was light.')
    page.click('.play-piece[data-i="3"]')  # said
    assert page.evaluate('BertNb.page.row()')[3] == tok.mask_id
    words = page.locator('#play-fill li').inner_text().split(':', 1)[1].split()[::2]
    assert words == [t for t, _ in fill(model, tok, 'And God [MASK], Let there be light: and there was light.')[0]]
    page.click('.play-piece[data-i="3"]')
    assert 'No [MASK]' in page.locator('#play-fill').inner_text()

def test_attention_and_reach_are_transformers_and_attention_reach(page, kjv):
    from transformers import BertForMaskedLM
    from bert_nb.diagnostics import attention_reach
    tok = kjv[1]
    ids = tok.encode('In the beginning God created')
    hf = BertForMaskedLM.from_pretrained(str(KJV), attn_implementation='eager').double().eval()
    with torch.no_grad(): theirs = hf(torch.tensor([ids]), output_attentions=True).attentions
    js = page.evaluate('ids => BertNb.page.m.model.forward(ids, []).attention.map(l => l.map(a => Array.from(a)))', ids)
    n = len(ids)
    for l, heads in enumerate(js):  # float64 both sides: a few roundings of 1e-16 on probabilities under 1
        for h, a in enumerate(heads): assert np.abs(np.reshape(a, (n, n)) - theirs[l][0, h].numpy()).max() < 1e-12
    encoder = load_bert(KJV).double().eval().encoder
    ref = attention_reach(encoder, torch.tensor(ids)).numpy()
    sampled = np.reshape(page.evaluate('ids => Array.from(BertNb.page.m.model.reach(ids, 64))', ids), (n, n))
    assert np.abs(sampled / ref - 1).max() < 0.5  # 64 directions: the estimate of |J|² has a spread of about 1/4
    # the exact reach through the page's button: test_exact_reach_runs_up_to_the_models_limit_and_is_refused_past_it
    page.select_option('#play-samples', 'exact')
    page.fill('#play-text', kjv_verses()[0].text + ' ' + kjv_verses()[1].text); page.click('#play-reach-run')
    assert 'would hold the page for long' in page.locator('#play-msg').inner_text()  # exact: short texts only
    page.select_option('#play-samples', '4')

@pytest.fixture(scope='module')
def run30(snap30):
    "The model of a 30-step run: --snapshots changes none of its steps (test_snapshots.py)."
    return snap30 / 'model'

def test_a_model_opened_through_the_file_picker_gives_its_own_logits(page, run30):
    page.evaluate("document.getElementById('play-msg').textContent = ''")
    page.set_input_files('#play-files', [str(run30 / f) for f in ('config.json', 'vocab.txt', 'model.safetensors')])
    page.wait_for_function("document.getElementById('play-msg').textContent !== ''")
    assert 'Your model is open' in page.locator('#play-msg').inner_text()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model, tok = load_bert(run30).eval(), WordPieceTokenizer.from_vocab(run30)
    for ids in [tok.encode(v.text)[:32] for v in kjv_verses()[-5:]]:
        js = logits(page, ids)
        with torch.no_grad(): ours = model(torch.tensor([ids]))[0][0].double()
        assert (js - ours).abs().max().item() <= encoder_tol(model.config, len(ids), torch.float32, ours.abs().max().item())
    shipped(page)

def bad(kind: str, tmp: Path, run30: Path) -> list[Path]:
    "A directory of the three files, made into what `kind` says."
    d = tmp / kind
    shutil.copytree(run30, d)
    st, conf = d / 'model.safetensors', json.loads((d / 'config.json').read_text())
    if kind == 'text': st.write_text('hello, this is not a model')
    if kind == 'cut': st.write_bytes(st.read_bytes()[:100_000])
    if kind == 'vocab': (d / 'vocab.txt').write_text((d / 'vocab.txt').read_text() + 'extra\n')
    if kind == 'config': (d / 'config.json').write_text('{"model_type": "bert",')
    if kind == 'modernbert':  # an encoder: no head to fill with
        from bert_nb.modernbert import ModernBertConfig, ModernBertEncoder
        from bert_nb.modernbert_files import save_modernbert
        save_modernbert(ModernBertEncoder(ModernBertConfig(conf['vocab_size'], d_model=16, n_heads=2, n_layers=2,
                                                           d_ff=24, window=4)), tmp / 'mb')
        for f in ('config.json', 'model.safetensors'): shutil.copy(tmp / 'mb' / f, d / f)
    if kind == 'classifier':
        from bert_nb.finetune import Classifier, save_classifier
        enc = BertEncoder(BertConfig(conf['vocab_size'], max_len=32, d_model=16, n_heads=2, n_layers=1, d_ff=32),
                          pooler=True)
        save_classifier(Classifier(enc, 2), tmp / 'clf', WordPieceTokenizer.from_vocab(run30), ['a', 'b'])
        for f in ('config.json', 'model.safetensors'): shutil.copy(tmp / 'clf' / f, d / f)
    files = [d / f for f in ('config.json', 'vocab.txt', 'model.safetensors')]
    return files[1:] if kind == 'missing' else files

@pytest.mark.parametrize('kind, says', [
    ('text', 'not a safetensors file'), ('cut', 'cut short'), ('vocab', 'tokens but the word table'),
    ('config', 'config.json is not JSON'), ('modernbert', 'not a ModernBertForMaskedLM'), ('classifier', 'not an MLM BERT'),
    ('missing', 'missing: config.json')])
def test_a_file_that_is_not_such_a_model_gets_one_message(page, run30, tmp_path, kind, says):
    before = page.locator('#play-model').inner_text()
    page.evaluate("document.getElementById('play-msg').textContent = ''")
    page.set_input_files('#play-files', [str(f) for f in bad(kind, tmp_path, run30)])
    page.wait_for_function("document.getElementById('play-msg').textContent !== ''")
    msg = page.locator('#play-msg')
    assert says in msg.inner_text() and msg.get_attribute('class') == 'play-error', msg.inner_text()
    assert page.locator('#play-model').inner_text() == before  # the model in use stays
    assert not page.errors

@pytest.fixture(scope='module')
def modern30(tmp_path_factory):
    "`bert-nb train --arch modernbert --window 8 --steps 30` (the page's recipe for a band): its model directory."
    out = tmp_path_factory.mktemp('modern30') / 'run'
    subprocess.run([str(Path(sys.executable).parent / 'bert-nb'), 'train', '--arch', 'modernbert', '--window', '8',
                    '--steps', '30', '--out', str(out), '--quiet'], check=True, capture_output=True)
    return out / 'model'

def open_dir(page, d: Path):
    page.evaluate("document.getElementById('play-msg').textContent = ''")
    page.set_input_files('#play-files', [str(d / f) for f in ('config.json', 'vocab.txt', 'model.safetensors')])
    page.wait_for_function("document.getElementById('play-msg').textContent !== ''")
    assert 'Your model is open' in page.locator('#play-msg').inner_text(), page.locator('#play-msg').inner_text()

def test_a_modernbert_run_opened_through_the_file_picker_fills_as_bert_nb_fill(page, modern30):
    """Its logits are our ModernBertForMLM's in float64 on the same float32 weights (one formula: float64's bound) and
    transformers' ModernBertForMaskedLM's in float32 within float32's, and the top five under each blank are `fill`'s,
    which `bert-nb fill` prints, with the float32 model it loads."""
    from bert_nb.modernbert_files import load_modernbert
    open_dir(page, modern30)
    assert 'a ModernBERT of 3 layers' in page.locator('#play-model').inner_text()
    from transformers import ModernBertForMaskedLM
    model, tok = load_modernbert(modern30), WordPieceTokenizer.from_vocab(modern30)
    wide, hf = copy.deepcopy(model).double(), ModernBertForMaskedLM.from_pretrained(str(modern30)).eval()
    for ids in [tok.encode(v.text)[:32] for v in kjv_verses()[-5:]]:
        js = logits(page, ids)
        with torch.no_grad(): ours, theirs = wide(torch.tensor([ids]))[0][0], hf(torch.tensor([ids])).logits[0].double()
        assert (js - ours).abs().max().item() <= encoder_tol(model.config, len(ids), torch.float64, ours.abs().max().item())
        # transformers in float32 (its RoPE tables too): float32's bound, the page being exact beside it
        assert (js - theirs).abs().max().item() <= encoder_tol(model.config, len(ids), torch.float32, ours.abs().max().item())
    for text in ('And God said, Let there be [MASK]: and there was light.', 'In the [MASK] God created the [MASK].'):
        got = page.evaluate('ids => BertNb.fillIds(BertNb.page.m, ids, 5)', tok.encode(text)[1:-1])
        assert [[w for w, _ in blank] for blank in got] == [[w for w, _ in blank] for blank in fill(model, tok, text)]
    shipped(page)

def test_a_modernberts_local_layers_read_a_band_in_the_page(page, modern30):
    """The run's model, trained with --window 8: each local layer's heads give 0 to keys more than 4 away, the global
    layer reads every key; the logits are still ours in float64 (Python reads the same window), and its reach runs."""
    from bert_nb.modernbert_files import load_modernbert
    d = modern30
    open_dir(page, d)
    tok, model = WordPieceTokenizer.from_vocab(d), load_modernbert(d).double()
    ids = tok.encode(kjv_verses()[0].text)
    n = len(ids)
    att = page.evaluate('ids => BertNb.page.m.model.forward(ids, []).attention.map(l => l.map(a => Array.from(a)))', ids)
    assert n > 9 and model.config.window == 8  # the verse is longer than the band
    far = np.abs(np.arange(n)[:, None] - np.arange(n)) > 4
    for l, heads in enumerate(att):
        zeros = [(np.reshape(a, (n, n))[far] == 0).all() for a in heads]
        assert all(zeros) if not model.config.is_global(l) else not any(zeros)
    with torch.no_grad(): ours = model(torch.tensor([ids]))[0][0]
    js = logits(page, ids)
    assert (js - ours).abs().max().item() <= encoder_tol(model.config, n, torch.float64, ours.abs().max().item())
    page.select_option('#play-samples', '4'); page.click('#play-reach-run')
    assert 'from 4 random directions' in page.locator('#play-reach-out').inner_text()
    shipped(page)

@pytest.fixture(scope='module')
def snap30(tmp_path_factory):
    "`bert-nb train --steps 30 --snapshots 4`: the run directory."
    out = tmp_path_factory.mktemp('snap30') / 'run'
    subprocess.run([str(Path(sys.executable).parent / 'bert-nb'), 'train', '--steps', '30', '--snapshots', '4', '--out',
                    str(out), '--quiet'], check=True, capture_output=True)
    return out

def slide(page, i: int):
    page.evaluate("i => { const s = document.getElementById('play-snap'); s.value = i; s.dispatchEvent(new Event('input')); }", i)

def test_a_runs_snapshots_run_on_a_slider(page, snap30):
    """Opened through the directory picker: one position a snapshot; at each, the page runs that snapshot (its logits
    within the float32 bound of the directory's own, its top five fill's), under the same text and hidden word, and the
    curve draws metrics.json's held-out losses with that snapshot ringed."""
    m = json.loads((snap30 / 'metrics.json').read_text())
    page.evaluate("document.getElementById('play-msg').textContent = ''")
    page.set_input_files('#play-run', str(snap30))
    page.wait_for_function("document.getElementById('play-msg').textContent !== ''")
    assert 'Your run is open: 4 snapshots' in page.locator('#play-msg').inner_text(), page.locator('#play-msg').inner_text()
    assert page.get_attribute('#play-snap', 'max') == '3' and page.locator('#play-snaps').is_visible()
    text = 'And God said, Let there be light: and there was light.'
    page.fill('#play-text', text)
    page.locator('.play-piece').nth(5).click()  # 'let', hidden under every snapshot in turn
    tok = WordPieceTokenizer.from_vocab(snap30 / 'model')
    ids = tok.encode(text)
    for i, s in enumerate(m['snapshots']):
        slide(page, i)
        assert page.locator('#play-snap-out').inner_text().startswith(f"step {s['step']}: held-out loss {s['loss']:.3f}")
        assert page.locator('.play-hidden').count() == 1
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            model = load_bert(snap30 / s['dir']).eval()
        js = logits(page, ids)
        with torch.no_grad(): ours = model(torch.tensor([ids]))[0][0].double()
        assert (js - ours).abs().max().item() <= encoder_tol(model.config, len(ids), torch.float32, ours.abs().max().item())
        shown = [a.split(' ')[0] for a in page.locator('#play-fill .play-answer').all_inner_texts()]
        assert shown == [w for w, _ in fill(model, tok, 'And God said, [MASK] there be light: and there was light.')[0]]
        drawn = page.evaluate('BertNb.page.curveDrawn')  # one line through the evaluations and the snapshots
        measured = {e['step']: e['loss'] for e in m['snapshots']} | {e['step']: e['loss'] for e in m['eval']}
        assert drawn['curve'] == sorted(map(list, measured.items())) and drawn['at'] == [s['step'], s['loss']]
        assert {t for t, _ in drawn['curve']} >= {e['step'] for e in m['snapshots']}
    shipped(page)
    assert page.locator('#play-snaps').is_hidden()  # another model: no slider

def test_the_shipped_models_snapshots_are_on_the_slider_when_the_page_opens(page, tmp_path):
    """The page opens on the shipped model, usable at once; its training's snapshots load after it and go on the
    slider, the last (the model) in use; at each, the page's logits are PyTorch's on the same weights (the int8 snapshots widened by their rows' scales, as
    tools/kjv.py widens them) within float32's bound, and its top five are fill's."""
    m = json.loads((KJV / 'metrics.json').read_text())
    files = sorted((ROOT / 'nbs' / 'kjv-snapshots').glob('step-*.safetensors'))
    assert [f.stem for f in files] == [Path(s['dir']).name for s in m['snapshots'][:-1]] and len(m['snapshots']) >= 6
    page.reload(wait_until='load')
    page.wait_for_function('globalThis.BertNb && BertNb.page', timeout=HANG_MS)
    assert page.locator('#play-fill .play-answer').count() > 0  # usable before the snapshots have loaded ...
    page.wait_for_selector('#play-snaps', state='visible', timeout=HANG_MS)  # ... which come after
    n = len(m['snapshots'])
    assert page.get_attribute('#play-snap', 'max') == str(n - 1)
    assert page.input_value('#play-snap') == str(n - 1)
    text = 'And God said, Let there be [MASK]: and there was light.'
    page.fill('#play-text', text)
    tok, d = WordPieceTokenizer.from_vocab(KJV), tmp_path / 'snapshot'
    shutil.copytree(KJV, d)
    for i, s in enumerate(m['snapshots']):
        slide(page, i)
        assert page.locator('#play-snap-out').inner_text().startswith(f"step {s['step']:,}: held-out loss {s['loss']:.3f}")
        assert page.locator('#play-model').inner_text().split(':')[0].endswith(f"step {s['step']:,}")  # one way
        if i < n - 1: save_file(widen(load_file(files[i])), d / 'model.safetensors')
        else: shutil.copyfile(KJV / 'model.safetensors', d / 'model.safetensors')
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            model = load_bert(d).float().eval()
        ids = tok.encode(text)
        js = logits(page, ids)
        with torch.no_grad(): ours = model(torch.tensor([ids]))[0][0].double()
        assert (js - ours).abs().max().item() <= encoder_tol(model.config, len(ids), torch.float32, ours.abs().max().item())
        shown = [a.split(' ')[0] for a in page.locator('#play-fill .play-answer').all_inner_texts()]
        assert shown == [w for w, _ in fill(model, tok, text)[0]]

@pytest.mark.parametrize('kind, says', [('no snapshots', 'lists no snapshots'), ('one gone', 'the files chosen lack')])
def test_a_run_directory_without_its_snapshots_gets_one_message(page, snap30, tmp_path, kind, says):
    d = tmp_path / 'run'
    shutil.copytree(snap30, d)
    if kind == 'no snapshots':  # what the run writes without --snapshots
        shutil.rmtree(d / 'snapshots')
        m = json.loads((d / 'metrics.json').read_text()); del m['snapshots']
        (d / 'metrics.json').write_text(json.dumps(m))
    else: shutil.rmtree(d / 'snapshots' / 'step-000002')
    before = page.locator('#play-model').inner_text()
    page.evaluate("document.getElementById('play-msg').textContent = ''")
    page.set_input_files('#play-run', str(d))
    page.wait_for_function("document.getElementById('play-msg').textContent !== ''")
    assert says in page.locator('#play-msg').inner_text() and page.locator('#play-model').inner_text() == before

def test_exact_reach_runs_up_to_the_models_limit_and_is_refused_past_it(page, kjv):
    """The page computes the exact reach of a text up to the most tokens ([CLS] and [SEP] counted) whose n x d
    tangents cost what 16 tokens of 2 layers of 128 (d_ff 512) do, attention_reach's to float64's rounding, and
    refuses one token more, saying so."""
    from bert_nb.diagnostics import attention_reach
    tok, c = kjv[1], kjv[0].config
    work = lambda n, d, L, ff: n * n * d * L * (4 * d * d + 2 * d * ff)  # n·d tangents, each n L (4d² + 2 d ff)
    most = max(n for n in range(1, 17) if work(n, c.d_model, c.n_layers, c.d_ff) <= work(16, 128, 2, 512))
    shipped(page)
    assert page.evaluate('BertNb.exactMax(BertNb.page.m.model.c)') == most and (c.d_model, most) != (128, 16)
    page.select_option('#play-samples', 'exact')
    words = kjv_verses()[0].text.split()  # In the beginning God created ...: a prefix of n tokens
    for n in (most, most + 1):
        text = next(t for k in range(1, 17) if len(tok.encode(t := ' '.join(words[:k]))) == n)
        page.fill('#play-text', text); page.click('#play-reach-run')
        reach = page.evaluate('BertNb.page.reachMap && Array.from(BertNb.page.reachMap)')
        refused = f'a text of {most} tokens or fewer' in page.locator('#play-msg').inner_text()
        if n > most: assert reach is None and refused; continue
        assert 'exact' in page.locator('#play-reach-out').inner_text() and not refused
        ref = attention_reach(load_bert(KJV).double().eval().encoder, torch.tensor(tok.encode(text))).numpy()
        got = np.reshape(reach, (n, n))
        assert np.abs(got - ref).max() <= 1e-9 * ref.max()  # float64 through the layers and their derivatives
    page.select_option('#play-samples', '4')

def test_a_click_in_the_lines_view_picks_the_row_under_it(page):
    "Rows of 18 px from 4 px down: a click at the top, the middle or the bottom of a row picks that row."
    shipped(page)
    page.fill('#play-text', 'And God said, Let there be light')
    n = len(page.evaluate('BertNb.page.labels'))
    page.select_option('#play-view', 'lines')
    for i in range(n):
        for dy in (1, 9, 17):
            at = {'x': 50, 'y': 4 + 18 * i + dy}
            page.click('#play-attn', position=at)
            assert page.evaluate('BertNb.page.focus') == i, (i, dy)
            page.click('#play-attn', position=at)  # a second click: all the lines again
            assert page.evaluate('BertNb.page.focus') is None
    page.select_option('#play-view', 'heat')

def test_every_head_is_drawn_as_a_heat_map_or_as_lines(page):
    "The picture is the chosen head's numbers: the darkest cell of the heat map is the head's largest weight."
    page.fill('#play-text', 'And God said, Let there be light')
    n = len(page.evaluate('BertNb.page.labels'))
    for layer in ('0', '1'):
        for head in ('0', '1'):
            page.select_option('#play-view', 'heat')
            page.select_option('#play-layer', layer); page.select_option('#play-head', head)
            P = np.reshape(page.evaluate(f'Array.from(BertNb.page.att[{layer}][{head}])'), (n, n))
            i, j = np.unravel_index(P.argmax(), P.shape)
            dark = page.evaluate("""([i, j, n]) => {  // the cell's centre, read back from the canvas
              const c = document.getElementById('play-attn'), css = c.clientWidth, m = Math.min(90, css * 0.22);
              const cell = (css - m) / n, k = c.width / css;
              return Array.from(c.getContext('2d').getImageData(Math.floor((m + (j + 0.5) * cell) * k),
                                                                Math.floor((m + (i + 0.5) * cell) * k), 1, 1).data);
            }""", [int(i), int(j), n])
            t = P[i, j]  # on the one scale: white at 0, the site's indigo at 1
            assert np.abs(np.array(dark[:3]) - [255 - 192 * t, 255 - 174 * t, 255 - 74 * t]).max() <= 1, (dark, t)
    page.select_option('#play-view', 'lines')
    page.click('#play-attn', position={'x': 50, 'y': 4 + 2.5 * 18})  # the third reading token
    assert page.evaluate('BertNb.page.focus') == 2
    page.click('#play-attn', position={'x': 50, 'y': 4 + 2.5 * 18})
    assert page.evaluate('BertNb.page.focus') is None
    page.select_option('#play-view', 'heat')

def test_the_text_box_is_on_the_first_screen(page):
    "At 1280 x 900 and on a phone's 390 x 844, the text box is on the first screen: a reader types before reading on."
    for size in ({'width': 1280, 'height': 900}, {'width': 390, 'height': 844}):
        page.set_viewport_size(size)
        page.evaluate('window.scrollTo(0, 0)')
        box = page.locator('#play-text').bounding_box()
        assert box['y'] + box['height'] <= size['height'], (size, box)
    page.set_viewport_size({'width': 1280, 'height': 900})

def test_a_fields_refusal_stays_while_it_is_wrong_and_goes_once_it_is_right(page):
    "An empty field is refused, not read as 0; the refusal follows the field as it is edited, and goes when it is right."
    shipped(page)
    page.fill('#play-text', 'And God said, Let there be light: and there was light.')
    msg = lambda: page.locator('#play-msg').inner_text()
    for field, bad, says, still, right in [('#play-p', '1.5', 'p must be in [0, 1], got 1.5', '2', '0.5'),
                                           ('#play-p', '', 'p must be in [0, 1], got nothing', '-1', '0.15'),
                                           ('#play-seed', '', 'seed must be a whole number >= 0, got nothing', '-3', '7'),
                                           ('#play-seed', '1.5', 'got 1.5', '-1', '0')]:
        page.click('#play-clear'); page.fill('#play-seed', '0'); page.fill('#play-p', '0.15')
        page.fill(field, bad); page.click('#play-draw')
        assert says in msg() and page.locator('#play-drawn').inner_text() == '', (field, bad, msg())  # nothing drawn
        page.fill(field, still)
        assert f'got {still}' in msg(), (field, still, msg())  # still wrong: said again, of the new value
        page.fill(field, right)
        assert msg() == '', (field, right, msg())  # right: the refusal is gone
    page.click('#play-clear')

def test_the_picked_count_reads_as_words(page, kjv):
    "None picked reads 'no position picked', one '1 position picked': mlm_batch's count of labels, in words."
    model, tok = kjv
    shipped(page)
    text = 'And God said, Let there be light: and there was light.'
    page.fill('#play-text', text)
    page.fill('#play-seed', '0'); page.fill('#play-p', '0'); page.click('#play-draw')
    assert ': no position picked' in page.locator('#play-drawn').inner_text()
    seed = next(s for s in range(100) if (mlm_batch(tok, [text], model.config.max_len, 0.05, PCG32(s))['labels'] >= 0
                                           ).sum() == 1)
    page.fill('#play-seed', str(seed)); page.fill('#play-p', '0.05'); page.click('#play-draw')
    assert ': 1 position picked;' in page.locator('#play-drawn').inner_text()
    page.click('#play-clear')

def test_attention_is_drawn_on_one_fixed_scale_with_its_legend(page):
    """Every head's map on one scale, a weight of 0 white and of 1 the darkest, whatever the map's own largest weight
    (step 0's uniform heads look pale, not as sharp as a trained head), with the legend's ends under it."""
    shipped(page)
    page.fill('#play-text', 'And God said, Let there be light')
    page.select_option('#play-view', 'heat')
    for layer, head in (('0', '0'), ('1', '1')):
        page.select_option('#play-layer', layer); page.select_option('#play-head', head)
        assert page.evaluate('BertNb.page.attnDrawn') == {'lo': 0, 'hi': 1}
    assert page.locator('#play-layer option').first.inner_text() == 'layer 0'  # from 0, as the chapters count
