// The page of the site where the chapter's BERT runs in the reader's browser: type a text, hide words (a click,
// or mlm_mask's draws from a seed), read the top five for each [MASK] as `bert-nb fill` prints them, and see every
// head's attention and 13's attention reach. The shipped model is built into the site; the reader's own save_bert
// or save_modernbert directory opens through the file picker. tools/site.py bundles this file with the ports it
// imports.
import { WordPiece, SPECIALS } from './wordpiece.mjs';
import { BertMLM, readSafetensors } from './bert.mjs';
import { ModernBertMLM } from './modernbert.mjs';
import { PCG32, mask } from './mask.mjs';

export const SHARES = [0.8, 0.1, 0.1];  // mlm_mask's ACTIONS: [MASK], a random id, the token kept

export function loadModel(files) {  // {config: text, vocab: text, safetensors: ArrayBuffer} → {model, tok}
  let config;  // the model's class says what is wrong with a config that is JSON but no config
  try { config = JSON.parse(files.config); } catch { throw new Error('config.json is not JSON'); }
  const Model = config?.model_type === 'modernbert' ? ModernBertMLM : BertMLM;  // as config.json names it
  const model = new Model(config, readSafetensors(files.safetensors)), tok = WordPiece.fromVocabText(files.vocab);
  if (tok.tokens.length !== model.c.V)
    throw new Error(`vocab.txt has ${tok.tokens.length} tokens but the word table ${model.c.V} rows`);
  return { model, tok };
}

// A run's snapshots (`bert-nb train --snapshots N`): the steps metrics.json lists, each step's directory loaded as
// loadModel loads one, in the order of their steps, all of one vocabulary (a slider swaps them under one text); and
// the run's held-out loss at its evaluations, [step, loss], for the curve beside the slider.
export function loadSnapshots(metricsText, dirs) {  // dirs: {'snapshots/step-000020': {config, vocab, safetensors}}
  let metrics;
  try { metrics = JSON.parse(metricsText); } catch { throw new Error('metrics.json is not JSON'); }
  if (dirs === null || typeof dirs !== 'object') throw new TypeError('dirs must map each snapshot directory to its files');
  const list = metrics?.snapshots;
  if (!Array.isArray(list) || list.length < 2)
    throw new Error('metrics.json lists no snapshots: train a run of fixed steps with them, bert-nb train --steps N --snapshots K');
  const snaps = list.map((s) => {
    if (!Number.isInteger(s?.step) || typeof s.dir !== 'string' || typeof s.loss !== 'number' || typeof s.acc !== 'number')
      throw new Error('metrics.json: a snapshot without its step, dir, loss and acc');
    const files = Object.hasOwn(dirs, s.dir) ? dirs[s.dir] : {};
    const missing = ['config', 'vocab', 'safetensors'].filter((k) => files[k] === undefined);
    if (missing.length) throw new Error(`${s.dir}: the files chosen lack its ${missing.join(', ')}`);
    try { return { step: s.step, loss: s.loss, acc: s.acc, m: loadModel(files) }; }
    catch (e) { throw new Error(`${s.dir}: ${e.message}`); }
  }).sort((a, b) => a.step - b.step);
  const vocab = snaps[0].m.tok.tokens.join('\n');
  if (snaps.some((s) => s.m.tok.tokens.join('\n') !== vocab)) throw new Error('the snapshots do not share one vocabulary');
  const curve = (Array.isArray(metrics.eval) ? metrics.eval : [])
    .filter((e) => Number.isInteger(e?.step) && Number.isFinite(e.loss)).map((e) => [e.step, e.loss]);
  return { snaps, curve };
}

// A script beside the page (a page from file:// may not fetch a file, but it may load a script)
const script = (src) => new Promise((loaded, failed) => document.head.append(Object.assign(
  document.createElement('script'), { src, onload: loaded, onerror: () => failed(new Error(`${src} did not load`)) })));

const bytes = (base64) => Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)).buffer;

export const loadShipped = (shipped) =>  // the model built into the site: its safetensors bytes are base64
  loadModel({ config: shipped.config, vocab: shipped.vocab, safetensors: bytes(shipped.safetensors) });

// The shipped model's own snapshots, built into the site beside it: its metrics.json and each snapshot's weights
// (int8 rows with a scale each, base64, a script each: Page loads them after the model); the last snapshot is the shipped model,
// whose float32 weights the site holds already.
export function loadShippedRun(shipped) {
  const { metrics, weights } = shipped.run, snaps = JSON.parse(metrics)?.snapshots;
  if (!Array.isArray(snaps) || !snaps.length) throw new Error("the site's metrics list no snapshots");
  const last = snaps.at(-1).dir, of = (dir) => {  // a snapshot's weights; the last's are the model's own
    if (dir === last) return shipped.safetensors;
    if (!Object.hasOwn(weights, dir)) throw new Error(`the site holds no weights for ${dir}`);
    return weights[dir];
  };
  return loadSnapshots(metrics, Object.fromEntries(snaps.map(({ dir }) => [dir, {
    config: shipped.config, vocab: shipped.vocab, safetensors: bytes(of(dir)) }])));
}

// The ids the model reads of a text's: at most its rows, [SEP] kept at the end (mlm_batch's truncation)
export const cut = (ids, T) => (ids.length > T ? [...ids.slice(0, T - 1), ids.at(-1)] : ids);

// bert_nb.fill for the ids between [CLS] and [SEP]: each blank read in a window of max_len around it, the softmax
// with the specials' probabilities set to 0 (a blank is a word), its top k as [token, probability]
export function fillIds({ model, tok }, body, k = 5) {
  const L = model.c.T - 2, specials = SPECIALS.map((s) => tok.ids.get(s)), words = model.c.V - specials.length, out = [];
  if (!Array.isArray(body)) throw new TypeError('body must be a list of ids');
  if (!Number.isInteger(k) || k < 1 || k > words)
    throw new RangeError(`k must be in [1, ${words}] (the words), got ${k}`);
  if (L < 1) throw new Error(`the model has ${model.c.T} positions: none for a token between [CLS] and [SEP]`);
  const at = body.flatMap((t, i) => (t === tok.ids.get('[MASK]') ? [i] : []));
  for (const i of at) {
    const s = Math.min(Math.max(0, i - Math.floor(L / 2)), Math.max(0, body.length - L));
    const row = [tok.ids.get('[CLS]'), ...body.slice(s, s + L), tok.ids.get('[SEP]')];
    const logits = model.forward(row, [i - s + 1]).logits[0];
    let m = -Infinity, sum = 0;
    for (const z of logits) m = Math.max(m, z);
    const p = logits.map((z) => Math.exp(z - m));
    for (const z of p) sum += z;
    for (const j of specials) p[j] = 0;
    const top = [...p.keys()].sort((a, b) => p[b] - p[a] || a - b).slice(0, k);
    out.push(top.map((j) => [tok.tokens[j], p[j] / sum]));
  }
  return out;
}

// mlm_batch(tok, [text], max_len, p, PCG32(seed)) for one text: the same row, the same draws
export function drawMask({ model, tok }, text, seed, p) {
  if (typeof text !== 'string') throw new TypeError(`text must be a string, got ${typeof text}`);
  if (typeof p !== 'number' || !(p >= 0 && p <= 1)) throw new RangeError(`p must be in [0, 1], got ${p}`);
  const row = cut(tok.encode(text), model.c.T), specials = new Set(SPECIALS.map((s) => tok.ids.get(s)));
  return mask(row, row.map((i) => specials.has(i)), null, row.length, tok.ids.get('[MASK]'), tok.tokens.length, p,
              SHARES, new PCG32(seed, 0));
}

const esc = (s) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const $ = (id) => document.getElementById(id);

// A heat map of an n × n matrix (row i reads column j) on a canvas as wide as its box, tokens along both sides. `scale`
// fixes the colours' range, [lo, hi] (an attention weight's [0, 1], so that maps compare: a uniform head is pale);
// without it the map's own range. Under it a legend: the colour bar and its ends, named `unit`.
const shade = (t) => `rgb(${255 - 192 * t},${255 - 174 * t},${255 - 74 * t})`;  // white to the site's indigo
function heatmap(canvas, M, n, labels, { log = false, scale = null, unit = '' } = {}) {
  const css = Math.min(canvas.parentElement.clientWidth, 560), margin = Math.min(90, css * 0.22), key = 30;
  const cell = (css - margin) / n, dpr = window.devicePixelRatio || 1, cx = canvas.getContext('2d');
  canvas.style.width = `${css}px`; canvas.style.height = `${css + key}px`;
  canvas.width = css * dpr; canvas.height = (css + key) * dpr;
  cx.scale(dpr, dpr); cx.clearRect(0, 0, css, css + key);
  const v = [];  // a loop, not a spread: a map of 8,192 tokens has more entries than a call takes arguments
  for (const x of M) v.push(log ? Math.max(-6, Math.log10(x)) : x);
  let [lo, hi] = scale ?? [log ? Infinity : 0, -Infinity];
  if (!scale) { for (const x of v) { if (log && x < lo) lo = x; if (x > hi) hi = x; } hi = Math.max(hi, lo + 1e-12); }
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
    cx.fillStyle = shade(Math.min(1, Math.max(0, (v[i * n + j] - lo) / (hi - lo))));
    cx.fillRect(margin + j * cell, margin + i * cell, Math.ceil(cell), Math.ceil(cell));
  }
  const bar = css - margin - 80;  // the legend: lo to hi, left to right, under the map
  for (let k = 0; k < bar; k++) { cx.fillStyle = shade(k / (bar - 1)); cx.fillRect(margin + 40 + k, css + 8, 1, 10); }
  cx.fillStyle = '#333'; cx.font = '11px sans-serif'; cx.textBaseline = 'middle';
  cx.textAlign = 'right'; cx.fillText(log ? lo.toFixed(1) : String(lo), margin + 36, css + 13);
  cx.textAlign = 'left'; cx.fillText(`${log ? hi.toFixed(1) : hi} ${unit}`, margin + 44 + bar, css + 13);
  cx.fillStyle = '#333'; cx.font = `${Math.max(9, Math.min(12, cell * 0.8))}px sans-serif`;
  cx.textAlign = 'right'; cx.textBaseline = 'middle';
  labels.forEach((l, i) => cx.fillText(l.slice(0, 10), margin - 3, margin + (i + 0.5) * cell));
  labels.forEach((l, j) => {
    cx.save(); cx.translate(margin + (j + 0.5) * cell, margin - 3); cx.rotate(-Math.PI / 2);
    cx.textAlign = 'left'; cx.fillText(l.slice(0, 10), 0, 0); cx.restore();
  });
  return { lo, hi };
}

// bertviz's picture: tokens twice, a line from each reading token (left) to each token it reads (right), as dark as
// its weight; one reading token only when `only` is set
function lines(canvas, P, n, labels, only = null) {
  const css = Math.min(canvas.parentElement.clientWidth, 560), row = 18, h = n * row + 8;
  const dpr = window.devicePixelRatio || 1, cx = canvas.getContext('2d');
  canvas.style.width = `${css}px`; canvas.style.height = `${h}px`;
  canvas.width = css * dpr; canvas.height = h * dpr;
  cx.scale(dpr, dpr); cx.clearRect(0, 0, css, h);
  const x0 = css * 0.3, x1 = css * 0.7, y = (i) => 4 + (i + 0.5) * row;
  cx.font = '12px sans-serif'; cx.textBaseline = 'middle'; cx.fillStyle = '#333';
  labels.forEach((l, i) => {
    cx.textAlign = 'right'; cx.fillText(l.slice(0, 12), x0 - 6, y(i));
    cx.textAlign = 'left'; cx.fillText(l.slice(0, 12), x1 + 6, y(i));
  });
  for (let i = 0; i < n; i++) {
    if (only !== null && i !== only) continue;
    for (let j = 0; j < n; j++) {
      cx.strokeStyle = `rgba(63,81,181,${P[i * n + j]})`; cx.lineWidth = 2;
      cx.beginPath(); cx.moveTo(x0, y(i)); cx.lineTo(x1, y(j)); cx.stroke();
    }
  }
}

// The held-out loss over the steps, log(1 + step) across (the snapshots' spacing): a line through every measured point,
// the evaluations' and the snapshots' own, the snapshots as dots and the one in use ringed. Returns what it draws:
// {curve: [[step, loss]] (the line, by step), dots: [[step, loss]], at: [step, loss]}.
function lossCurve(canvas, evals, snaps, i) {
  const css = Math.min(canvas.parentElement.clientWidth, 560), h = 150, pad = 34;
  const dpr = window.devicePixelRatio || 1, cx = canvas.getContext('2d');
  canvas.style.width = `${css}px`; canvas.style.height = `${h}px`;
  canvas.width = css * dpr; canvas.height = h * dpr;
  cx.scale(dpr, dpr); cx.clearRect(0, 0, css, h);
  const dots = snaps.map((s) => [s.step, s.loss]);
  const curve = [...new Map([...evals, ...dots].map((p) => [p[0], p])).values()].sort((a, b) => a[0] - b[0]);
  const xs = curve.map(([s]) => Math.log1p(s)), ys = curve.map(([, l]) => l);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs) || 1, Math.min(...ys), Math.max(...ys)];
  const X = (s) => pad + (css - 2 * pad) * (Math.log1p(s) - x0) / (x1 - x0 || 1);
  const Y = (l) => h - pad + (2 * pad - h) * (l - y0) / (y1 - y0 || 1);
  cx.strokeStyle = '#3f51b5'; cx.lineWidth = 1.5; cx.beginPath();
  curve.forEach(([s, l], k) => (k ? cx.lineTo(X(s), Y(l)) : cx.moveTo(X(s), Y(l)))); cx.stroke();
  cx.fillStyle = '#3f51b5';
  for (const [s, l] of dots) { cx.beginPath(); cx.arc(X(s), Y(l), 3, 0, 2 * Math.PI); cx.fill(); }
  cx.strokeStyle = '#e91e63'; cx.lineWidth = 2; cx.beginPath(); cx.arc(X(dots[i][0]), Y(dots[i][1]), 7, 0, 2 * Math.PI);
  cx.stroke();
  cx.fillStyle = '#333'; cx.font = '11px sans-serif'; cx.textAlign = 'left';
  cx.fillText(`held-out loss ${y1.toFixed(2)}`, 2, pad - 8); cx.fillText(y0.toFixed(2), 2, h - pad + 4);
  cx.textAlign = 'center'; cx.fillText(`step (log scale), ${dots.at(-1)[0].toLocaleString('en')} at the right`, css / 2, h - 6);
  return { curve, dots, at: dots[i] };
}

// The most tokens whose exact reach the page computes: n tokens take n × d tangents, each a forward's work
// (n L (4d² + 2 d ff) products), and the page allows what 16 tokens of 2 layers of 128 (ff 512) cost, a wait of
// seconds; the shipped model's 4 layers of 192 get 6
export const exactMax = ({ d, L, ff }) =>
  Math.floor(Math.sqrt(16 ** 2 * 128 * 2 * (4 * 128 ** 2 + 2 * 128 * 512) / (d * L * (4 * d * d + 2 * d * ff))));

// The page: one state, drawn again whenever it changes.
export class Page {
  constructor(shipped) {
    this.hidden = new Set(); this.drawn = null; this.focus = null; this.lastForwardMs = null;
    this.use(loadShipped(shipped), shipped.name);
    $('play-text').addEventListener('input', () => { this.hidden.clear(); this.drawn = null; this.update(); });
    $('play-draw').addEventListener('click', () => this.draw());
    for (const id of ['play-seed', 'play-p']) $(id).addEventListener('input', () => this.recheck());
    $('play-clear').addEventListener('click', () => { this.hidden.clear(); this.drawn = null; this.update(); });
    for (const id of ['play-layer', 'play-head', 'play-view'])
      $(id).addEventListener('change', () => this.attention());
    $('play-reach-run').addEventListener('click', () => this.reach());
    $('play-files').addEventListener('change', (e) => this.open(e.target.files));
    $('play-run').addEventListener('change', (e) => this.openRun(e.target.files));
    $('play-snap').addEventListener('input', (e) => this.snap(Number(e.target.value)));
    $('play-attn').addEventListener('click', (e) => this.pick(e));
    this.update();
    if (shipped.run) this.snapshots = this.shippedRun(shipped);
  }
  async shippedRun(shipped) {  // the shipped model's snapshots onto the slider, each a script of its own
    const m = this.m, got = (globalThis.BERT_NB_SNAPSHOTS ??= {});
    try {  // once the page has loaded: its first answers come first
      if (document.readyState !== 'complete') await new Promise((loaded) => addEventListener('load', loaded));
      for (const [dir, src] of Object.entries(shipped.run.files)) if (!Object.hasOwn(got, dir)) await script(src);
      const run = loadShippedRun({ ...shipped, run: { metrics: shipped.run.metrics, weights: got } });
      if (this.m !== m) return;  // another model was opened meanwhile: the page stays with it
      this.run = { ...run, name: this.name };  // the last snapshot is the model in use: nothing is run again
      Object.assign($('play-snap'), { max: run.snaps.length - 1, value: run.snaps.length - 1 });
      $('play-snaps').hidden = false;
      this.snapShown(run.snaps.length - 1);
    } catch (e) { this.say(`The shipped model's snapshots did not load: ${e.message}`, true); }
  }
  use(m, name, keep = false) {  // keep: a snapshot of the same run, under the same text, hidden words and head
    this.m = m; this.name = name;
    if (!keep) { this.hidden.clear(); this.drawn = null; this.focus = null; this.run = null; $('play-snaps').hidden = true; }
    const layer = $('play-layer').value, head = $('play-head').value;
    const { L, H, d, V, T } = m.model.c;
    const arch = m.model instanceof ModernBertMLM ? 'a ModernBERT of ' : '';
    $('play-model').textContent = `${name}: ${arch}${L} layers of width ${d}, ${H} heads, ` +
      `${V.toLocaleString('en')} words, rows of ${T}`;
    const options = (n, what) => Array.from({ length: n }, (_, i) => `<option value="${i}">${what} ${i}</option>`);  // from 0, as the chapters and torch count
    $('play-layer').innerHTML = options(L, 'layer').join('');
    $('play-head').innerHTML = options(H, 'head').join('');
    $('play-samples').querySelector('[value="exact"]').textContent = `exact (${exactMax(m.model.c)} tokens at most)`;
    if (keep) { $('play-layer').value = layer; $('play-head').value = head; }
  }
  say(text, error = false) { const m = $('play-msg'); m.textContent = text; m.className = error ? 'play-error' : ''; }
  async open(list) {  // a save_bert or save_modernbert directory's three files; on a refusal the model in use stays
    try {
      const by = Object.fromEntries([...list].map((f) => [f.name, f]));
      const need = ['config.json', 'vocab.txt', 'model.safetensors'], missing = need.filter((n) => !by[n]);
      if (missing.length) throw new Error(`choose config.json, vocab.txt and model.safetensors of one model ` +
                                          `directory (missing: ${missing.join(', ')})`);
      const m = loadModel({ config: await by['config.json'].text(), vocab: await by['vocab.txt'].text(),
                            safetensors: await by['model.safetensors'].arrayBuffer() });
      this.use(m, `your model (${[...list].length} files)`);
      $('play-text').dispatchEvent(new Event('input'));
      this.say('Your model is open: every answer below is its own.');
    } catch (e) { this.say(`Not opened: ${e.message}`, true); }
  }
  async openRun(list) {  // a run directory from the picker: its metrics.json and snapshots/step-*/ files
    try {
      const files = [...list], below = (f) => (f.webkitRelativePath || f.name).split('/').slice(1).join('/');
      const metrics = files.find((f) => below(f) === 'metrics.json');
      if (!metrics) throw new Error('choose a run directory: this one holds no metrics.json (a run not finished?)');
      const dirs = {}, kinds = { 'config.json': 'config', 'vocab.txt': 'vocab', 'model.safetensors': 'safetensors' };
      for (const f of files) {
        const at = below(f).match(/^(snapshots\/step-\d+)\/(config\.json|vocab\.txt|model\.safetensors)$/);
        if (at) (dirs[at[1]] ??= {})[kinds[at[2]]] = at[2] === 'model.safetensors' ? await f.arrayBuffer() : await f.text();
      }
      const run = loadSnapshots(await metrics.text(), dirs), name = (files[0].webkitRelativePath || 'your run').split('/')[0];
      this.showRun(run, name);
      this.say(`Your run is open: ${run.snaps.length} snapshots, from step 0 to ${run.snaps.at(-1).step.toLocaleString('en')}.`);
    } catch (e) { this.say(`Not opened: ${e.message}`, true); }
  }
  showRun(run, name) {  // a run's snapshots on the slider, its last one in use
    this.use(run.snaps.at(-1).m, name);
    this.run = { ...run, name };
    Object.assign($('play-snap'), { max: run.snaps.length - 1, value: run.snaps.length - 1 });
    $('play-snaps').hidden = false;
    this.snap(run.snaps.length - 1);
  }
  snap(i) {  // the run's snapshot i runs the page, under the same text
    const s = this.run.snaps[i];
    this.use(s.m, `${this.run.name}, step ${s.step.toLocaleString('en')}`, true);
    this.snapShown(i);
    this.update();
  }
  snapShown(i) {  // snapshot i's step and held-out figures, and the loss curve with its step ringed
    const s = this.run.snaps[i];
    $('play-snap-out').textContent = `step ${s.step.toLocaleString('en')}: held-out loss ${s.loss.toFixed(3)}, ` +
      `masked-token accuracy ${(100 * s.acc).toFixed(1)}%`;
    this.curveDrawn = lossCurve($('play-curve'), this.run.curve, this.run.snaps, i);
  }
  base() { return cut(this.m.tok.encode($('play-text').value), this.m.model.c.T); }  // the typed text's row
  row() {  // the ids the model reads: the text's, with the clicked positions hidden, or the drawn row
    if (this.drawn) return this.drawn.inputs;
    return this.base().map((t, i) => (this.hidden.has(i) ? this.m.tok.ids.get('[MASK]') : t));
  }
  fields() {  // the seed and p the fields hold, or what is wrong with them (an empty field is not 0)
    const [a, b] = [$('play-seed').value.trim(), $('play-p').value.trim()], seed = Number(a), p = Number(b);
    if (a === '' || !Number.isInteger(seed) || seed < 0 || seed > Number.MAX_SAFE_INTEGER)
      return { error: `seed must be a whole number >= 0, got ${a === '' ? 'nothing' : a}` };
    if (b === '' || !(p >= 0 && p <= 1)) return { error: `p must be in [0, 1], got ${b === '' ? 'nothing' : b}` };
    return { seed, p };
  }
  recheck() {  // a field edited after its refusal: its message stays while it is wrong, and goes once it is right
    if (!this.fieldError) return;
    const { error } = this.fields();
    error ? this.say(error, true) : (this.say(''), this.fieldError = false);
  }
  draw() {
    const { seed, p, error } = this.fields();
    if (error) { this.fieldError = true; return this.say(error, true); }
    const [inputs, labels] = drawMask(this.m, $('play-text').value, seed, p);
    this.drawn = { inputs, labels, seed, p }; this.hidden.clear(); this.say(''); this.fieldError = false;
    this.update();
  }
  update() {
    try {
      const { tok } = this.m, ids = tok.encode($('play-text').value), base = this.base(), row = this.row();
      $('play-note').textContent = ids.length > row.length ? `The text is ${ids.length} tokens; the row below is ` +
        `its first ${row.length}, as the model reads them (typed [MASK]s are filled in windows, as fill does).` : '';
      $('play-pieces').innerHTML = row.map((t, i) => {
        const orig = this.drawn ? (this.drawn.labels[i] >= 0 ? this.drawn.labels[i] : null)
          : (this.hidden.has(i) ? base[i] : null);  // the token a hidden position stands for
        const special = SPECIALS.includes(tok.tokens[base[i]]) && !this.hidden.has(i);
        return `<button type="button" class="play-piece${orig !== null ? ' play-hidden' : ''}" data-i="${i}"` +
          `${special || this.drawn ? ' disabled' : ''}><span>${esc(tok.tokens[t])}</span><small>${t}</small>` +
          `${orig !== null ? `<em>${esc(tok.tokens[orig])}</em>` : ''}</button>`;
      }).join('');
      for (const b of document.querySelectorAll('.play-piece:not([disabled])')) b.addEventListener('click', () => {
        const i = Number(b.dataset.i);
        this.hidden.has(i) ? this.hidden.delete(i) : this.hidden.add(i);
        this.update();
      });
      const n = this.drawn ? this.drawn.labels.filter((l) => l >= 0).length : 0;
      $('play-drawn').textContent = !this.drawn ? '' : `Drawn by mlm_mask from PCG32(${this.drawn.seed}) at p = ` +
        `${this.drawn.p}: ` + (n ? `${n} position${n > 1 ? 's' : ''} picked; under each, the token it hides.`
                                 : 'no position picked (at this p, in this row).');
      const body = this.drawn || this.hidden.size ? row.slice(1, -1) : ids.slice(1, -1);
      const t = performance.now(), top = fillIds(this.m, body);
      this.forwardAll(row);
      this.lastForwardMs = performance.now() - t;
      $('play-fill').innerHTML = top.length ? top.map((ans, k) => `<li><b>[MASK] ${k + 1}:</b> ` +
        ans.map(([w, p]) => `<span class="play-answer">${esc(w)} ${p.toFixed(3)}</span>`).join(' ') + '</li>').join('')
        : '<li>No [MASK] to fill: click a word above, draw a mask, or type [MASK].</li>';
      $('play-time').textContent = `The model read this in ${this.lastForwardMs.toFixed(0)} ms.`;
      $('play-reach-out').textContent = ''; this.reachMap = null;
      $('play-reach').style.display = 'none';
      this.attention();
    } catch (e) { this.say(`Could not run: ${e.message}`, true); }
  }
  forwardAll(row) {  // every head's attention over the row (the decoder at no position)
    this.labels = row.map((t) => this.m.tok.tokens[t]);
    this.att = this.m.model.forward(row, []).attention;
  }
  attention() {
    const P = this.att[Number($('play-layer').value)][Number($('play-head').value)], n = this.labels.length;
    if ($('play-view').value === 'lines') lines($('play-attn'), P, n, this.labels, this.focus);
    else this.attnDrawn = heatmap($('play-attn'), P, n, this.labels, { scale: [0, 1], unit: 'attention weight' });
  }
  pick(e) {  // lines: a click on a reading token shows only its lines; a second click, all again
    if ($('play-view').value !== 'lines') return;
    const r = e.target.getBoundingClientRect(), i = Math.floor((e.clientY - r.top - 4) / 18);
    this.focus = this.focus === i || i < 0 || i >= this.labels.length ? null : i;
    this.attention();
  }
  reach() {  // exact reads n × d tangents through every layer: past exactMax tokens, the estimate it is
    const s = $('play-samples').value, samples = s === 'exact' ? null : Number(s), row = this.row();
    const most = exactMax(this.m.model.c);
    if (samples === null && row.length > most)
      return this.say(`The exact reach of ${row.length} tokens would hold the page for long: choose random ` +
                      `directions, or a text of ${most} tokens or fewer.`, true);
    const t = performance.now();
    try { this.reachMap = this.m.model.reach(row, samples); }
    catch (e) { return this.say(`Could not run: ${e.message}`, true); }
    $('play-reach').style.display = 'block';
    const { lo, hi } = heatmap($('play-reach'), this.reachMap, row.length, this.labels, { log: true, unit: 'log10' });
    $('play-reach-out').textContent = `|d output i / d input embedding j| (row i, column j), log10 from ${lo.toFixed(1)} ` +
      `(white) to ${hi.toFixed(1)} (dark), ${samples === null ? 'exact' : `from ${samples} random directions a token`}, ` +
      `in ${(performance.now() - t).toFixed(0)} ms.`;
  }
}

if (globalThis.document && globalThis.BERT_NB_SHIPPED) {
  const start = () => { if ($('play')) globalThis.BertNb.page = new Page(globalThis.BERT_NB_SHIPPED); };
  document.readyState === 'loading' ? document.addEventListener('DOMContentLoaded', start) : start();
}
