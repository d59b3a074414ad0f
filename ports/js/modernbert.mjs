// Chapter 06's ModernBERT in JavaScript, written from its formulas, in float64, for the play page: the word table
// and a norm; pre-LN layers without biases (layer 0's attention norm the identity), rotary positions with the global
// and the local base, the local layers reading a band of window/2 tokens on each side, GeGLU; a final norm; the head
// and the tied word table as the decoder, with its bias. Weights come from a save_modernbert (or transformers')
// ModernBertForMaskedLM directory: config.json and model.safetensors, read by bert.mjs's reader.
//   node ports/js/modernbert.mjs MODEL_DIR IDS.json [logits|attention|reach]
import { readFileSync } from 'node:fs';
import { readSafetensors, gelu, dgelu, layerNorm, linear, add, normJvp, attend, attendJvp, reach } from './bert.mjs';

const MUSTS = { hidden_activation: 'gelu', norm_bias: false, attention_bias: false, mlp_bias: false,
                decoder_bias: true, tie_word_embeddings: true };  // what bert_nb builds, as transformers names it
const EMB = 'model.embeddings.';

function globalEvery(config) {  // every how many layers one reads the whole row: 5 writes the types, 4 the number
  const n = config.num_hidden_layers, types = config.layer_types, every = config.global_attn_every_n_layers ?? 3;
  if (types === undefined || types === null) {
    if (!Number.isInteger(every) || every < 1)
      throw new Error('config.json: global_attn_every_n_layers must be a whole number >= 1');
    return every;
  }
  const full = Array.isArray(types) ? types.flatMap((t, i) => (t === 'full_attention' ? [i] : [])) : [];
  const step = full.length > 1 ? full[1] : n;
  const want = Array.from({ length: n }, (_, i) => (i % step ? 'sliding_attention' : 'full_attention'));
  if (!Array.isArray(types) || types.join() !== want.join())
    throw new Error('config.json: layer_types must make layers 0, n, 2n, ... global');
  return step;
}

function thetas(config) {  // RoPE's bases, global and local: one dict per layer type (5), a flat one, or 4's numbers
  const r = config.rope_parameters ?? {}, dict = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);
  if (!dict(r)) throw new Error('config.json: rope_parameters must be an object');
  const flat = 'rope_type' in r || 'rope_theta' in r;
  const [g, l] = flat ? [r, r] : [r.full_attention ?? {}, r.sliding_attention ?? {}];
  for (const p of [g, l]) {
    if (!dict(p)) throw new Error('config.json: rope_parameters must hold an object for each layer type');
    if ((p.rope_type ?? 'default') !== 'default')
      throw new Error(`config.json: only plain RoPE (rope_type 'default') is read here, got ${p.rope_type}`);
  }
  const th = [g.rope_theta ?? config.global_rope_theta ?? 160000, l.rope_theta ?? config.local_rope_theta ?? 10000];
  if (!th.every((x) => typeof x === 'number' && Number.isFinite(x) && x > 1))
    throw new Error(`config.json: RoPE's bases must be numbers > 1, got ${th.join(' and ')}`);
  return th;
}

function shapesOf(c) {  // every weight a ModernBertForMaskedLM of config c must have, with its shape
  const s = { [`${EMB}tok_embeddings.weight`]: [c.V, c.d], [`${EMB}norm.weight`]: [c.d],
              'model.final_norm.weight': [c.d], 'head.dense.weight': [c.d, c.d], 'head.norm.weight': [c.d],
              'decoder.bias': [c.V] };
  for (let i = 0; i < c.L; i++) {
    const p = `model.layers.${i}.`;
    if (i) s[`${p}attn_norm.weight`] = [c.d];  // layer 0 reads the embeddings' norm
    Object.assign(s, { [`${p}attn.Wqkv.weight`]: [3 * c.d, c.d], [`${p}attn.Wo.weight`]: [c.d, c.d],
                       [`${p}mlp_norm.weight`]: [c.d], [`${p}mlp.Wi.weight`]: [2 * c.ff, c.d],
                       [`${p}mlp.Wo.weight`]: [c.d, c.ff] });
  }
  return s;
}

const split = (qkv, n, d) =>  // Wqkv's n rows of 3d numbers as q, k and v, n × d each
  [0, 1, 2].map((k) => Float64Array.from({ length: n * d }, (_, i) => qkv[Math.floor(i / d) * 3 * d + k * d + i % d]));

export class ModernBertMLM {
  constructor(config, weights) {  // config.json's dict; readSafetensors' tensors
    if (config === null || typeof config !== 'object' || Array.isArray(config))
      throw new TypeError('config must be the object of a config.json');
    if (weights === null || typeof weights !== 'object')
      throw new TypeError('weights must be readSafetensors\' tensors');
    if (config.model_type !== 'modernbert')
      throw new Error(`config.json says model_type ${JSON.stringify(config.model_type)}: not a ModernBERT`);
    for (const [k, want] of Object.entries(MUSTS))
      if ((config[k] ?? want) !== want) throw new Error(`config.json: ${k} must be ${want} here, got ${config[k]}`);
    for (const k of ['vocab_size', 'hidden_size', 'num_hidden_layers', 'num_attention_heads', 'intermediate_size',
                     'max_position_embeddings', 'local_attention'])
      if (!Number.isInteger(config[k]) || config[k] < 1)
        throw new Error(`config.json: ${k} must be a whole number >= 1`);
    const [tg, tl] = thetas(config);
    const c = this.c = { V: config.vocab_size, d: config.hidden_size, L: config.num_hidden_layers,
                         H: config.num_attention_heads, ff: config.intermediate_size,
                         T: config.max_position_embeddings, w: config.local_attention / 2,
                         every: globalEvery(config), eps: config.norm_eps ?? 1e-5, tg, tl };
    if (c.d % (2 * c.H)) throw new Error('config.json: hidden_size must be num_attention_heads times an even size');
    if (!Number.isInteger(c.w)) throw new Error('config.json: local_attention must be even');
    this.w = { zero: new Float32Array(c.d) };  // the norms' bias: none
    for (const [k, s] of Object.entries(shapesOf(c))) {
      const t = Object.hasOwn(weights, k) ? weights[k] : null;
      if (!t) throw new Error(`model.safetensors lacks ${k}: not a ModernBertForMaskedLM (an encoder or a ` +
                              'classifier?)');
      if (!Array.isArray(t.shape) || !(t.data instanceof Float32Array) || t.shape.join() !== s.join())
        throw new Error(`${k} is ${t.shape.join('×')}, the config says ${s.join('×')}`);
      this.w[k] = t.data;
    }
    const dec = weights['decoder.weight'], word = this.w[`${EMB}tok_embeddings.weight`];
    if (dec && !(dec.data.length === word.length && dec.data.every((x, i) => x === word[i])))
      throw new Error('decoder.weight is not the word table, to which the decoder is tied');
  }
  isGlobal(l) { return l % this.c.every === 0; }
  norm(x, n, name) { return layerNorm(x, n, this.c.d, this.w[`${name}.weight`], this.w.zero, this.c.eps); }
  check(ids) {
    const { V, T } = this.c;
    if (!Array.isArray(ids) || ids.length < 1) throw new Error('ids must be a list of one token or more');
    if (ids.length > T) throw new Error(`a row of ${ids.length} tokens: this model reads at most ${T}`);
    if (ids.some((i) => !Number.isInteger(i) || i < 0 || i >= V))
      throw new Error(`ids must be whole numbers in [0, ${V})`);
  }
  embed(ids) {  // the word table's rows, then the norm: no positions (the layers turn q and k by them)
    const { d } = this.c, x = new Float64Array(ids.length * d), word = this.w[`${EMB}tok_embeddings.weight`];
    ids.forEach((id, t) => { for (let j = 0; j < d; j++) x[t * d + j] = word[id * d + j]; });
    return this.norm(x, ids.length, `${EMB}norm`).y;
  }
  rotate(x, n, l) {  // RoPE on q or k (n × d): in each head the pair (e, e + dh/2) turns by t·θ^(-2e/dh)
    const { d, H } = this.c, dh = d / H, half = dh / 2, theta = this.isGlobal(l) ? this.c.tg : this.c.tl;
    const y = new Float64Array(n * d);
    for (let t = 0; t < n; t++) for (let a = 0; a < H; a++) for (let e = 0; e < half; e++) {
      const angle = t * theta ** (-(2 * e) / dh), cos = Math.cos(angle), sin = Math.sin(angle);
      const i = t * d + a * dh + e, x1 = x[i], x2 = x[i + half];
      y[i] = x1 * cos - x2 * sin; y[i + half] = x2 * cos + x1 * sin;
    }
    return y;
  }
  layer(x, n, l) {  // one pre-LN layer: x + Wo·attention(norm x), then + GeGLU(norm x); the states jvp reuses
    const { d, H, ff } = this.c, p = `model.layers.${l}.`, w = this.w;
    const n1 = l ? this.norm(x, n, `${p}attn_norm`) : null, h = n1 ? n1.y : x;
    const qkv = linear(h, n, w[`${p}attn.Wqkv.weight`], null, 3 * d, d);
    const [q, k, v] = split(qkv, n, d).map((y, i) => (i < 2 ? this.rotate(y, n, l) : y));
    const { ctx, probs } = attend(q, k, v, n, d, H, this.isGlobal(l) ? Infinity : this.c.w);  // local: a band
    const x1 = add(x, linear(ctx, n, w[`${p}attn.Wo.weight`], null, d, d));
    const n2 = this.norm(x1, n, `${p}mlp_norm`), u = linear(n2.y, n, w[`${p}mlp.Wi.weight`], null, 2 * ff, d);
    const g = new Float64Array(n * ff);  // GeGLU: GELU of the first half times the second
    for (let t = 0; t < n; t++)
      for (let e = 0; e < ff; e++) g[t * ff + e] = gelu(u[2 * t * ff + e]) * u[(2 * t + 1) * ff + e];
    return { h: add(x1, linear(g, n, w[`${p}mlp.Wo.weight`], null, d, ff)), probs, n1, q, k, v, n2, u };
  }
  final(x, n) { return this.norm(x, n, 'model.final_norm'); }
  forward(ids, at = null) {  // as BertMLM's: {logits at the positions `at` (all by default), attention [layer][head]}
    this.check(ids);
    const { V, d, L } = this.c, n = ids.length, w = this.w;
    at ??= ids.map((_, i) => i);
    if (!Array.isArray(at) || at.some((i) => !Number.isInteger(i) || i < 0 || i >= n))
      throw new Error(`at must list positions in [0, ${n})`);
    let x = this.embed(ids);
    const attention = [];
    for (let l = 0; l < L; l++) { const s = this.layer(x, n, l); attention.push(s.probs); x = s.h; }
    const h = this.final(x, n).y, r = new Float64Array(at.length * d);
    at.forEach((i, k) => r.set(h.subarray(i * d, (i + 1) * d), k * d));
    const t = this.norm(linear(r, at.length, w['head.dense.weight'], null, d, d).map(gelu), at.length, 'head.norm').y;
    const logits = linear(t, at.length, w[`${EMB}tok_embeddings.weight`], w['decoder.bias'], V, d);  // tied
    return { logits: at.map((_, k) => logits.subarray(k * V, (k + 1) * V)), attention };
  }
  layerJvp(s, dx, n, l) {  // the tangent of layer l's output for a tangent dx of its input; s is layer(x, n, l)
    const { d, H, ff } = this.c, p = `model.layers.${l}.`, w = this.w;
    const dn = s.n1 ? normJvp(dx, s.n1, n, d, w[`${p}attn_norm.weight`]) : dx;
    const dqkv = linear(dn, n, w[`${p}attn.Wqkv.weight`], null, 3 * d, d);
    const [dq, dk, dv] = split(dqkv, n, d).map((y, i) => (i < 2 ? this.rotate(y, n, l) : y));  // a rotation is linear
    const dctx = attendJvp(s, dq, dk, dv, n, d, H);
    const dx1 = add(dx, linear(dctx, n, w[`${p}attn.Wo.weight`], null, d, d));
    const du = linear(normJvp(dx1, s.n2, n, d, w[`${p}mlp_norm.weight`]), n, w[`${p}mlp.Wi.weight`], null, 2 * ff, d);
    const dg = new Float64Array(n * ff);
    for (let t = 0; t < n; t++) for (let e = 0; e < ff; e++) {
      const o = t * 2 * ff + e, a = s.u[o], b = s.u[o + ff];
      dg[t * ff + e] = dgelu(a) * du[o] * b + gelu(a) * du[o + ff];
    }
    return add(dx1, linear(dg, n, w[`${p}mlp.Wo.weight`], null, d, ff));
  }
  reach(ids, samples = null) {  // as BertMLM's, to the final norm's output: its tangent after the layers'
    return reach(this, ids, samples, (h, n) => {
      const fin = this.final(h, n);
      return (t) => normJvp(t, fin, n, this.c.d, this.w['model.final_norm.weight']);
    });
  }
}

if (globalThis.process?.argv?.[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  const [dir, rows, what = 'logits'] = process.argv.slice(2);
  try {
    const model = new ModernBertMLM(JSON.parse(readFileSync(`${dir}/config.json`, 'utf8')),
                                    readSafetensors(readFileSync(`${dir}/model.safetensors`)));
    const run = { logits: (ids) => model.forward(ids).logits.map((l) => [...l]),
                  attention: (ids) => model.forward(ids, []).attention.map((hs) => hs.map((a) => [...a])),
                  reach: (ids) => [...model.reach(ids)] }[what];
    if (!run) throw new Error(`the third argument is logits, attention or reach, not ${JSON.stringify(what)}`);
    process.stdout.write(JSON.stringify(JSON.parse(readFileSync(rows, 'utf8')).map(run)));
  } catch (e) { console.error(`modernbert.mjs: ${e.message}`); process.exit(2); }
}
