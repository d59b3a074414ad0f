// The chapter's BERT in JavaScript, written from 02's formulas, in float64: word + position + type embeddings
// and a LayerNorm; post-LN layers (attention with the padding-only mask, exact GELU); the MLM head on the tied word
// table. Weights come from a save_bert directory: config.json, and model.safetensors read here (float32, or bfloat16
// and float16 widened, or a snapshot's int8 rows times their float32 scale `NAME.scale`; any other type refused).
// Nothing a file says is executed.
//   node ports/js/bert.mjs MODEL_DIR IDS.json [logits|attention|reach]
//     prints each row's logits (T × V), attention ([layer][head] T × T, flat) or exact reach (T × T, flat) as JSON
import { readFileSync } from 'node:fs';

export function readSafetensors(buffer) {  // {name: {shape, data: Float32Array}}; a clear Error for a bad file
  const bytes = new Uint8Array(buffer);
  if (bytes.length < 8) throw new Error('model.safetensors is shorter than 8 bytes: not a safetensors file');
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  if (n > bytes.length - 8)
    throw new Error(`model.safetensors is not a safetensors file, or is cut short: its header says ${n} bytes`);
  let header;
  try { header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n))); }
  catch { throw new Error('model.safetensors has no readable header: not a safetensors file'); }
  if (header === null || typeof header !== 'object' || Array.isArray(header))
    throw new Error('model.safetensors has no table of tensors in its header: not a safetensors file');
  const out = {}, data = bytes.subarray(8 + n), size = { F32: 4, BF16: 2, F16: 2, I8: 1 };
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const whole = (x) => Number.isSafeInteger(x) && x >= 0;
    if (t === null || typeof t !== 'object' || !Array.isArray(t.shape) || !t.shape.every(whole) ||
        !Array.isArray(t.data_offsets) || t.data_offsets.length !== 2 || !t.data_offsets.every(whole))
      throw new Error(`${name} has no shape or offsets of whole numbers: the file is corrupt`);
    if (!Object.hasOwn(size, t.dtype))
      throw new Error(`${name} is ${JSON.stringify(t.dtype) ?? 'of no dtype'}: only float32, bfloat16, float16 and ` +
                      'int8 rows with their scale are read');
    const count = t.shape.reduce((a, b) => a * b, 1), [a, b] = t.data_offsets;
    if (!(0 <= a && a <= b && b <= data.length) || b - a !== count * size[t.dtype])
      throw new Error(`${name} lies outside the file or does not fit its shape: the file is cut short or corrupt`);
    const raw = data.slice(a, b), view = new DataView(raw.buffer), f = new Float32Array(count);
    for (let i = 0; i < count; i++)
      f[i] = t.dtype === 'F32' ? view.getFloat32(4 * i, true)
        : t.dtype === 'BF16' ? new Float32Array(new Uint32Array([view.getUint16(2 * i, true) << 16]).buffer)[0]
        : t.dtype === 'I8' ? view.getInt8(i) : half(view.getUint16(2 * i, true));
    out[name] = { shape: t.shape, data: f, int8: t.dtype === 'I8' };
  }
  for (const [name, t] of Object.entries(out)) {  // int8 rows: q · scale, the product rounded to float32 once
    if (!t.int8) continue;
    const s = out[`${name}.scale`], rows = t.shape[0], cols = t.data.length / rows;
    if (t.shape.length !== 2 || !s || s.int8 || s.shape.length !== 1 || s.shape[0] !== rows)
      throw new Error(`${name} is int8 without a float32 scale a row (${name}.scale): the file is corrupt`);
    for (let r = 0; r < rows; r++) for (let j = 0; j < cols; j++) t.data[r * cols + j] *= s.data[r];
    delete out[`${name}.scale`]; delete t.int8;
  }
  for (const t of Object.values(out)) delete t.int8;
  return out;
}

function half(h) {  // IEEE float16 to a number
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, m = h & 1023;
  return e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
}

export function erf(x) {  // float64-accurate: the series near 0, the continued fraction of erfc further out
  const ax = Math.abs(x);
  if (ax < 2.5) {
    let term = ax, sum = ax;
    for (let n = 1; n < 80 && Math.abs(term) > 1e-17 * Math.abs(sum); n++) {
      term *= -ax * ax / n; sum += term / (2 * n + 1);
    }
    return Math.sign(x) * 2 / Math.sqrt(Math.PI) * sum;
  }
  let f = 0;  // erfc(ax) = exp(-ax²)/√π · 1/(ax + (1/2)/(ax + 1/(ax + (3/2)/(ax + ...))))
  for (let k = 60; k >= 1; k--) f = (k / 2) / (ax + f);
  return Math.sign(x) * (1 - Math.exp(-ax * ax) / Math.sqrt(Math.PI) / (ax + f));
}

export const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2));

// Activations are flat Float64Arrays, one row of the sequence after another; weights stay the file's Float32Arrays.
// each of the n rows of x; also x̂ and 1/σ, which the tangents reuse
export function layerNorm(x, n, d, g, b, eps) {
  const y = new Float64Array(n * d), xhat = new Float64Array(n * d), r = new Float64Array(n);
  for (let i = 0, o = 0; i < n; i++, o += d) {
    let mean = 0, v = 0;
    for (let j = 0; j < d; j++) mean += x[o + j];
    mean /= d;
    for (let j = 0; j < d; j++) v += (x[o + j] - mean) ** 2;
    r[i] = 1 / Math.sqrt(v / d + eps);
    for (let j = 0; j < d; j++) { xhat[o + j] = (x[o + j] - mean) * r[i]; y[o + j] = xhat[o + j] * g[j] + b[j]; }
  }
  return { y, xhat, r };
}

// n rows of x (each cols long) through w (rows × cols, as PyTorch stores a Linear): y = x Wᵀ + b. Four rows of x
// at a time, so that each weight is read once for four sums (twice as fast in V8); each sum adds its terms in the
// one-row loop's order, so the result is the same to the bit.
export function linear(x, n, w, b, rows, cols) {
  const y = new Float64Array(n * rows);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const x0 = i * cols, x1 = x0 + cols, x2 = x1 + cols, x3 = x2 + cols, y0 = i * rows;
    for (let r = 0; r < rows; r++) {
      let s0 = b ? b[r] : 0, s1 = s0, s2 = s0, s3 = s0;
      for (let c = 0, o = r * cols; c < cols; c++, o++) {
        const v = w[o];
        s0 += v * x[x0 + c]; s1 += v * x[x1 + c]; s2 += v * x[x2 + c]; s3 += v * x[x3 + c];
      }
      y[y0 + r] = s0; y[y0 + rows + r] = s1; y[y0 + 2 * rows + r] = s2; y[y0 + 3 * rows + r] = s3;
    }
  }
  for (; i < n; i++) {
    const xo = i * cols, yo = i * rows;
    for (let r = 0; r < rows; r++) {
      let s = b ? b[r] : 0;
      for (let c = 0, o = r * cols; c < cols; c++) s += w[o + c] * x[xo + c];
      y[yo + r] = s;
    }
  }
  return y;
}

export const add = (a, b) => a.map((v, i) => v + b[i]);

// Softmax attention of n rows in H heads: {ctx: the weighted values, probs: each head's n × n probabilities, row i
// reading column j}. A key more than `reach` positions from its query gets 0 (ModernBERT's local layers).
export function attend(q, k, v, n, d, H, reach = Infinity) {
  const dh = d / H, scale = 1 / Math.sqrt(dh), ctx = new Float64Array(n * d), probs = [];
  for (let a = 0; a < H; a++) {
    const P = new Float64Array(n * n);
    for (let i = 0; i < n; i++) {
      let m = -Infinity, sum = 0;
      for (let j = 0; j < n; j++) {
        if (Math.abs(i - j) > reach) { P[i * n + j] = -Infinity; continue; }
        let z = 0;
        for (let e = a * dh; e < (a + 1) * dh; e++) z += q[i * d + e] * k[j * d + e];
        P[i * n + j] = z * scale; m = Math.max(m, z * scale);
      }
      for (let j = 0; j < n; j++) sum += (P[i * n + j] = Math.exp(P[i * n + j] - m));
      for (let j = 0; j < n; j++) {
        const pr = (P[i * n + j] /= sum);
        for (let e = a * dh; e < (a + 1) * dh; e++) ctx[i * d + e] += pr * v[j * d + e];
      }
    }
    probs.push(P);
  }
  return { ctx, probs };
}

// attend's tangent: d ctx for tangents dq, dk, dv of its inputs, from s = {q, k, v, probs} of the forward (softmax:
// dP_ij = P_ij (ds_ij - Σ_j' P_ij' ds_ij'); a key outside the band has P = 0 and stays so)
export function attendJvp(s, dq, dk, dv, n, d, H) {
  const dh = d / H, scale = 1 / Math.sqrt(dh), dctx = new Float64Array(n * d), ds = new Float64Array(n);
  for (let a = 0; a < H; a++) {
    const P = s.probs[a];
    for (let i = 0; i < n; i++) {
      let mean = 0;
      for (let j = 0; j < n; j++) {
        let z = 0;
        for (let e = a * dh; e < (a + 1) * dh; e++) z += dq[i * d + e] * s.k[j * d + e] + s.q[i * d + e] * dk[j * d + e];
        ds[j] = z * scale; mean += P[i * n + j] * ds[j];
      }
      for (let j = 0; j < n; j++) {
        const pr = P[i * n + j], dp = pr * (ds[j] - mean);
        for (let e = a * dh; e < (a + 1) * dh; e++) dctx[i * d + e] += dp * s.v[j * d + e] + pr * dv[j * d + e];
      }
    }
  }
  return dctx;
}
const EMB = 'bert.embeddings.', HEAD = 'cls.predictions.';

function shapesOf(c) {  // every weight an MLM BERT of config c must have, with its shape
  const s = { [`${EMB}word_embeddings.weight`]: [c.V, c.d], [`${EMB}position_embeddings.weight`]: [c.T, c.d],
              [`${EMB}token_type_embeddings.weight`]: [c.types, c.d], [`${EMB}LayerNorm.weight`]: [c.d],
              [`${EMB}LayerNorm.bias`]: [c.d], [`${HEAD}transform.dense.weight`]: [c.d, c.d],
              [`${HEAD}transform.dense.bias`]: [c.d], [`${HEAD}transform.LayerNorm.weight`]: [c.d],
              [`${HEAD}transform.LayerNorm.bias`]: [c.d], [`${HEAD}bias`]: [c.V] };
  for (let i = 0; i < c.L; i++) {
    const p = `bert.encoder.layer.${i}.`;
    for (const n of ['query', 'key', 'value']) Object.assign(s, { [`${p}attention.self.${n}.weight`]: [c.d, c.d],
                                                                   [`${p}attention.self.${n}.bias`]: [c.d] });
    Object.assign(s, { [`${p}attention.output.dense.weight`]: [c.d, c.d], [`${p}attention.output.dense.bias`]: [c.d],
                       [`${p}intermediate.dense.weight`]: [c.ff, c.d], [`${p}intermediate.dense.bias`]: [c.ff],
                       [`${p}output.dense.weight`]: [c.d, c.ff], [`${p}output.dense.bias`]: [c.d] });
    for (const n of ['attention.output.LayerNorm', 'output.LayerNorm'])
      Object.assign(s, { [`${p}${n}.weight`]: [c.d], [`${p}${n}.bias`]: [c.d] });
  }
  return s;
}

export class BertMLM {
  constructor(config, weights) {  // config.json's dict; readSafetensors' tensors
    if (config === null || typeof config !== 'object' || Array.isArray(config))
      throw new TypeError('config must be the object of a config.json');
    if (weights === null || typeof weights !== 'object')
      throw new TypeError('weights must be readSafetensors\' tensors');
    if (config.model_type !== 'bert')
      throw new Error(`config.json says model_type ${JSON.stringify(config.model_type)}: not a BERT`);
    for (const k of ['vocab_size', 'hidden_size', 'num_hidden_layers', 'num_attention_heads', 'intermediate_size',
                     'max_position_embeddings', 'type_vocab_size'])
      if (!Number.isInteger(config[k]) || config[k] < 1)
        throw new Error(`config.json: ${k} must be a whole number >= 1`);
    const c = this.c = { V: config.vocab_size, d: config.hidden_size, L: config.num_hidden_layers,
                         H: config.num_attention_heads, ff: config.intermediate_size,
                         T: config.max_position_embeddings, types: config.type_vocab_size,
                         eps: config.layer_norm_eps ?? 1e-12 };
    if (c.d % c.H) throw new Error('config.json: num_attention_heads must divide hidden_size');
    this.w = {};
    for (const [k, s] of Object.entries(shapesOf(c))) {
      const t = Object.hasOwn(weights, k) ? weights[k] : null;
      if (!t) throw new Error(`model.safetensors lacks ${k}: not an MLM BERT (a classifier or a ModernBERT?)`);
      if (!Array.isArray(t.shape) || !(t.data instanceof Float32Array) || t.shape.join() !== s.join())
        throw new Error(`${k} is ${t.shape.join('×')}, the config says ${s.join('×')}`);
      this.w[k] = t.data;
    }
  }
  lin(x, n, name, rows, cols) { return linear(x, n, this.w[`${name}.weight`], this.w[`${name}.bias`], rows, cols); }
  norm(x, n, name) { return layerNorm(x, n, this.c.d, this.w[`${name}.weight`], this.w[`${name}.bias`], this.c.eps); }
  check(ids) {
    const { V, T } = this.c;
    if (!Array.isArray(ids) || ids.length < 1) throw new Error('ids must be a list of one token or more');
    if (ids.length > T) throw new Error(`a row of ${ids.length} tokens: this model reads at most ${T}`);
    if (ids.some((i) => !Number.isInteger(i) || i < 0 || i >= V))
      throw new Error(`ids must be whole numbers in [0, ${V})`);
  }
  embed(ids) {  // word + position + type 0 (one segment), then the LayerNorm
    const { d } = this.c, n = ids.length, x = new Float64Array(n * d), w = this.w;
    const word = w[`${EMB}word_embeddings.weight`], pos = w[`${EMB}position_embeddings.weight`];
    const type = w[`${EMB}token_type_embeddings.weight`];
    ids.forEach((id, t) => {
      for (let j = 0; j < d; j++) x[t * d + j] = word[id * d + j] + pos[t * d + j] + type[j];
    });
    return this.norm(x, n, `${EMB}LayerNorm`).y;
  }
  layer(h, n, l) {  // one post-LN layer over the n rows of h: its output, each head's probabilities, what jvp reuses
    const { d, H, ff } = this.c, p = `bert.encoder.layer.${l}.`;
    const [q, k, v] = ['query', 'key', 'value'].map((m) => this.lin(h, n, `${p}attention.self.${m}`, d, d));
    const { ctx, probs } = attend(q, k, v, n, d, H);  // padding-only mask: a typed row has no padding, all keys read
    const a1 = this.norm(add(this.lin(ctx, n, `${p}attention.output.dense`, d, d), h), n,
                         `${p}attention.output.LayerNorm`);
    const pre = this.lin(a1.y, n, `${p}intermediate.dense`, ff, d);
    const a2 = this.norm(add(this.lin(pre.map(gelu), n, `${p}output.dense`, d, ff), a1.y), n, `${p}output.LayerNorm`);
    return { h: a2.y, probs, q, k, v, a1, pre, a2 };
  }
  forward(ids, at = null) {  // one row of real tokens (no padding): {logits: a Float64Array of V for each position in
    this.check(ids);         // `at` (all by default), attention: [layer][head] an n × n Float64Array, row i reading j}
    const { V, d, L } = this.c, n = ids.length, w = this.w;
    at ??= ids.map((_, i) => i);
    if (!Array.isArray(at) || at.some((i) => !Number.isInteger(i) || i < 0 || i >= n))
      throw new Error(`at must list positions in [0, ${n})`);
    let h = this.embed(ids);
    const attention = [];
    for (let l = 0; l < L; l++) { const s = this.layer(h, n, l); attention.push(s.probs); h = s.h; }
    const x = new Float64Array(at.length * d);  // the head and the decoder only where they are read
    at.forEach((i, r) => x.set(h.subarray(i * d, (i + 1) * d), r * d));
    const t = this.norm(this.lin(x, at.length, `${HEAD}transform.dense`, d, d).map(gelu), at.length,
                        `${HEAD}transform.LayerNorm`).y;
    const logits = linear(t, at.length, w[`${EMB}word_embeddings.weight`], w[`${HEAD}bias`], V, d);  // tied, own bias
    return { logits: at.map((_, r) => logits.subarray(r * V, (r + 1) * V)), attention };
  }
  layerJvp(s, dh, n, l) {  // the tangent of layer l's output for a tangent dh of its input; s is layer(h, n, l)
    const { d, H, ff } = this.c, p = `bert.encoder.layer.${l}.`, w = this.w;
    const [dq, dk, dv] = ['query', 'key', 'value']
      .map((m) => linear(dh, n, w[`${p}attention.self.${m}.weight`], null, d, d));
    const dctx = attendJvp(s, dq, dk, dv, n, d, H);
    const dy1 = normJvp(add(linear(dctx, n, w[`${p}attention.output.dense.weight`], null, d, d), dh), s.a1, n, d,
                        w[`${p}attention.output.LayerNorm.weight`]);
    const dact = linear(dy1, n, w[`${p}intermediate.dense.weight`], null, ff, d).map((t, i) => t * dgelu(s.pre[i]));
    return normJvp(add(linear(dact, n, w[`${p}output.dense.weight`], null, d, ff), dy1), s.a2, n, d,
                   w[`${p}output.LayerNorm.weight`]);
  }
  reach(ids, samples = null) { return reach(this, ids, samples); }
}

// 13's attention_reach for an encoder m (check, embed, layer, layerJvp): (n × n) |d output_i / d input-embedding_j|,
// Frobenius; exact (the d directions of each input), or from `samples` random ones (mean |J v|²). after(h, n) gives
// the tangent map of what follows the layers (a ModernBERT's final norm); BERT's output is its last layer's.
export function reach(m, ids, samples = null, after = () => (t) => t) {
  m.check(ids);
  const { d, L } = m.c, n = ids.length, states = [];
  if (samples !== null && !(Number.isInteger(samples) && samples >= 1))
    throw new Error(`samples must be a whole number >= 1 or null (exact), got ${samples}`);
  let h = m.embed(ids);
  for (let l = 0; l < L; l++) { states.push(m.layer(h, n, l)); h = states[l].h; }
  const out = after(h, n), R = new Float64Array(n * n), K = samples ?? d, normal = gaussian(0);
  for (let j = 0; j < n; j++) {
    for (let k = 0; k < K; k++) {
      let t = new Float64Array(n * d);
      if (samples === null) t[j * d + k] = 1;
      else for (let e = 0; e < d; e++) t[j * d + e] = normal();
      for (let l = 0; l < L; l++) t = m.layerJvp(states[l], t, n, l);
      t = out(t);
      for (let i = 0; i < n; i++) for (let e = 0; e < d; e++) R[i * n + j] += t[i * d + e] ** 2;
    }
  }
  return R.map((r) => Math.sqrt(r / (samples ?? 1)));
}

// LayerNorm's tangent, row by row: g · r (dz - mean dz - x̂ mean(x̂ dz))
export function normJvp(dz, { xhat, r }, n, d, g) {
  const dy = new Float64Array(n * d);
  for (let i = 0, o = 0; i < n; i++, o += d) {
    let m = 0, mx = 0;
    for (let j = 0; j < d; j++) { m += dz[o + j]; mx += dz[o + j] * xhat[o + j]; }
    m /= d; mx /= d;
    for (let j = 0; j < d; j++) dy[o + j] = g[j] * r[i] * (dz[o + j] - m - xhat[o + j] * mx);
  }
  return dy;
}

export const dgelu = (x) => 0.5 * (1 + erf(x / Math.SQRT2)) + x * Math.exp(-x * x / 2) / Math.sqrt(2 * Math.PI);

export function gaussian(seed) {  // standard normals from a seeded 32-bit generator (mulberry32) by Box–Muller
  let s = seed >>> 0;
  const u = () => {
    s = (s + 0x6D2B79F5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
}

if (globalThis.process?.argv?.[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  const [dir, rows, what = 'logits'] = process.argv.slice(2);
  try {
    const model = new BertMLM(JSON.parse(readFileSync(`${dir}/config.json`, 'utf8')),
                              readSafetensors(readFileSync(`${dir}/model.safetensors`)));
    const run = { logits: (ids) => model.forward(ids).logits.map((l) => [...l]),
                  attention: (ids) => model.forward(ids, []).attention.map((hs) => hs.map((a) => [...a])),
                  reach: (ids) => [...model.reach(ids)] }[what];
    if (!run) throw new Error(`the third argument is logits, attention or reach, not ${JSON.stringify(what)}`);
    process.stdout.write(JSON.stringify(JSON.parse(readFileSync(rows, 'utf8')).map(run)));
  } catch (e) { console.error(`bert.mjs: ${e.message}`); process.exit(2); }
}
