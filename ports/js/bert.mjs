// The chapter's BERT in JavaScript (#59), written from 02's formulas, in float64: word + position + type embeddings
// and a LayerNorm; post-LN layers (attention with the padding-only mask, exact GELU); the MLM head on the tied word
// table. Weights come from a save_bert directory: config.json, and model.safetensors read here (float32, or bfloat16
// and float16 widened; any other type refused). Nothing a file says is executed.
//   node ports/js/bert.mjs MODEL_DIR IDS.json     prints each row's logits (T × V) as a JSON list
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
  const out = {}, data = bytes.subarray(8 + n), size = { F32: 4, BF16: 2, F16: 2 };
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    if (!(t.dtype in size)) throw new Error(`${name} is ${t.dtype}: only float32, bfloat16 and float16 are read`);
    const count = t.shape.reduce((a, b) => a * b, 1), [a, b] = t.data_offsets;
    if (!(0 <= a && a <= b && b <= data.length) || b - a !== count * size[t.dtype])
      throw new Error(`${name} lies outside the file or does not fit its shape: the file is cut short or corrupt`);
    const raw = data.slice(a, b), view = new DataView(raw.buffer), f = new Float32Array(count);
    for (let i = 0; i < count; i++)
      f[i] = t.dtype === 'F32' ? view.getFloat32(4 * i, true)
        : t.dtype === 'BF16' ? new Float32Array(new Uint32Array([view.getUint16(2 * i, true) << 16]).buffer)[0]
        : half(view.getUint16(2 * i, true));
    out[name] = { shape: t.shape, data: f };
  }
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

const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2));

function layerNorm(x, g, b, eps) {  // one vector
  const d = x.length; let mean = 0, v = 0;
  for (const a of x) mean += a; mean /= d;
  for (const a of x) v += (a - mean) ** 2; v /= d;
  const r = 1 / Math.sqrt(v + eps);
  return x.map((a, i) => (a - mean) * r * g[i] + b[i]);
}

function linear(x, w, b, rows, cols) {  // w is (rows × cols), as PyTorch stores a Linear: y = W x + b
  const y = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = b ? b[r] : 0;
    for (let c = 0, o = r * cols; c < cols; c++) s += w[o + c] * x[c];
    y[r] = s;
  }
  return y;
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
      const t = weights[k];
      if (!t) throw new Error(`model.safetensors lacks ${k}: not an MLM BERT (a classifier or a ModernBERT?)`);
      if (t.shape.join() !== s.join())
        throw new Error(`${k} is ${t.shape.join('×')}, the config says ${s.join('×')}`);
      this.w[k] = t.data;
    }
  }
  lin(x, name, rows, cols) { return linear(x, this.w[`${name}.weight`], this.w[`${name}.bias`], rows, cols); }
  norm(x, name) { return layerNorm(x, this.w[`${name}.weight`], this.w[`${name}.bias`], this.c.eps); }
  attend(h, p) {  // one layer's self-attention over the row: the mixed values, and each head's probabilities
    const { d, H } = this.c, dh = d / H, n = h.length;
    const proj = (m) => h.map((x) => this.lin(x, `${p}attention.self.${m}`, d, d));
    const [q, k, v] = ['query', 'key', 'value'].map(proj);
    const ctx = h.map(() => new Float64Array(d)), heads = [];
    for (let a = 0; a < H; a++) {
      const probs = [];
      for (let i = 0; i < n; i++) {
        const s = k.map((kj) => {
          let z = 0;
          for (let e = a * dh; e < (a + 1) * dh; e++) z += q[i][e] * kj[e];
          return z / Math.sqrt(dh);
        });
        const m = Math.max(...s), ex = s.map((z) => Math.exp(z - m)), sum = ex.reduce((x, y) => x + y, 0);
        const pr = ex.map((z) => z / sum);
        for (let j = 0; j < n; j++) for (let e = a * dh; e < (a + 1) * dh; e++) ctx[i][e] += pr[j] * v[j][e];
        probs.push(pr);
      }
      heads.push(probs);
    }
    return [ctx, heads];
  }
  forward(ids) {  // one row of real tokens (no padding): {logits: T arrays of V, attention: [layer][head] T × T}
    const { V, d, L, ff, T } = this.c, w = this.w, n = ids.length;
    if (n > T) throw new Error(`a row of ${n} tokens: this model reads at most ${T}`);
    if (ids.some((i) => !Number.isInteger(i) || i < 0 || i >= V))
      throw new Error(`ids must be whole numbers in [0, ${V})`);
    const word = w[`${EMB}word_embeddings.weight`], pos = w[`${EMB}position_embeddings.weight`];
    const type = w[`${EMB}token_type_embeddings.weight`];  // one segment: type 0
    let h = ids.map((id, t) => this.norm(Float64Array.from({ length: d },
                                                           (_, j) => word[id * d + j] + pos[t * d + j] + type[j]),
                                         `${EMB}LayerNorm`));
    const attention = [];
    for (let l = 0; l < L; l++) {
      const p = `bert.encoder.layer.${l}.`, [ctx, heads] = this.attend(h, p);
      attention.push(heads);
      h = h.map((x, i) => this.norm(this.lin(ctx[i], `${p}attention.output.dense`, d, d).map((y, j) => y + x[j]),
                                    `${p}attention.output.LayerNorm`));
      h = h.map((x) => {
        const f = this.lin(this.lin(x, `${p}intermediate.dense`, ff, d).map(gelu), `${p}output.dense`, d, ff);
        return this.norm(f.map((y, j) => y + x[j]), `${p}output.LayerNorm`);
      });
    }
    const logits = h.map((x) => {
      const t = this.norm(this.lin(x, `${HEAD}transform.dense`, d, d).map(gelu), `${HEAD}transform.LayerNorm`);
      return linear(t, word, w[`${HEAD}bias`], V, d);  // the decoder is the word table (tied), with its own bias
    });
    return { logits, attention };
  }
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  const [dir, rows] = process.argv.slice(2);
  try {
    const model = new BertMLM(JSON.parse(readFileSync(`${dir}/config.json`, 'utf8')),
                              readSafetensors(readFileSync(`${dir}/model.safetensors`)));
    const out = JSON.parse(readFileSync(rows, 'utf8')).map((ids) => model.forward(ids).logits.map((l) => [...l]));
    process.stdout.write(JSON.stringify(out));
  } catch (e) { console.error(`bert.mjs: ${e.message}`); process.exit(2); }
}
