// The audit's cases for the JavaScript of the page (#59): bad input to every exported function of ports/js, and the
// valid edge cases. Prints {case: outcome} as JSON: 'clear' (an Error of ours, which names what is wrong), 'traceback'
// (the engine's own error: undefined read, not a function, ...), 'silent' (bad input accepted), 'correct', or 'hang'
// is left to the caller's time limit.   node tools/audit_js.mjs MODEL_DIR
import { readFileSync } from 'node:fs';
import { WordPiece } from '../ports/js/wordpiece.mjs';
import { BertMLM, readSafetensors } from '../ports/js/bert.mjs';
import { ModernBertMLM } from '../ports/js/modernbert.mjs';
import { PCG32 } from '../ports/js/mask.mjs';
import { loadModel, loadSnapshots, loadShippedRun, fillIds, drawMask } from '../ports/js/play.mjs';

const dir = process.argv[2];
const files = { config: readFileSync(`${dir}/config.json`, 'utf8'), vocab: readFileSync(`${dir}/vocab.txt`, 'utf8'),
                safetensors: readFileSync(`${dir}/model.safetensors`) };
const m = loadModel(files), config = JSON.parse(files.config), weights = readSafetensors(files.safetensors);
const ENGINE = /Cannot read|Cannot convert|is not a function|is not iterable|is not defined|undefined|Invalid array|call stack|BigInt/;

function outcome(f, bad) {
  try { f(); return bad ? 'silent' : 'correct'; }
  catch (e) {
    if (!bad) return `traceback (${e.message})`.slice(0, 160);
    return e instanceof Error && e.message && !ENGINE.test(e.message) ? 'clear' : `traceback (${e.message})`.slice(0, 160);
  }
}

const header = (obj, data = new Uint8Array(0)) => {  // a safetensors file with this header
  const h = new TextEncoder().encode(JSON.stringify(obj)), out = new Uint8Array(8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
  out.set(h, 8); out.set(data, 8 + h.length);
  return out.buffer;
};
const withConfig = (change) => () => new BertMLM({ ...config, ...change }, weights);

const ids = m.tok.encode('In the beginning God [MASK] the heaven');
// a tiny ModernBERT built here (every weight 0.1): its constructor and calls get BertMLM's kinds of bad input
const MB = { model_type: 'modernbert', vocab_size: 10, hidden_size: 4, num_hidden_layers: 2, num_attention_heads: 1,
             intermediate_size: 3, max_position_embeddings: 8, local_attention: 2 };
const mbWeights = {};
const put = (name, ...shape) => { mbWeights[name] = { shape, data: new Float32Array(shape.reduce((a, b) => a * b)).fill(0.1) }; };
put('model.embeddings.tok_embeddings.weight', 10, 4); put('model.embeddings.norm.weight', 4);
for (const l of [0, 1]) {
  const p = `model.layers.${l}.`;
  if (l) put(`${p}attn_norm.weight`, 4);
  put(`${p}attn.Wqkv.weight`, 12, 4); put(`${p}attn.Wo.weight`, 4, 4); put(`${p}mlp_norm.weight`, 4);
  put(`${p}mlp.Wi.weight`, 6, 4); put(`${p}mlp.Wo.weight`, 4, 3);
}
put('model.final_norm.weight', 4); put('head.dense.weight', 4, 4); put('head.norm.weight', 4); put('decoder.bias', 10);
const metricsOf = (steps) => JSON.stringify({ eval: [{ step: 0, loss: 9 }], snapshots: steps.map((s) => (
  { step: s, dir: `snapshots/step-${String(s).padStart(6, '0')}`, loss: 1, acc: 0.5 })) });
const twoDirs = { 'snapshots/step-000000': files, 'snapshots/step-000005': files };  // the same model twice
// the site's shipped run, as tools/site.py writes it: the snapshots' weights base64, the last one the model's own
const b64 = Buffer.from(files.safetensors).toString('base64');
const shippedRun = (metrics, weights) => () => loadShippedRun({ config: files.config, vocab: files.vocab,
                                                                safetensors: b64, run: { metrics, weights } });
const mb = new ModernBertMLM(MB, mbWeights), withMB = (change) => () => new ModernBertMLM({ ...MB, ...change }, mbWeights);
const bad = {
  'loadSnapshots of metrics not JSON': () => loadSnapshots('{', {}),
  'loadSnapshots of metrics null': () => loadSnapshots('null', {}),
  'loadSnapshots of no snapshots': () => loadSnapshots(JSON.stringify({ eval: [] }), {}),
  'loadSnapshots of one snapshot': () => loadSnapshots(metricsOf([0]), twoDirs),
  'loadSnapshots of a snapshot without its loss': () => loadSnapshots(JSON.stringify({ snapshots: [
    { step: 0, dir: 'snapshots/step-000000', acc: 0 }, { step: 5, dir: 'snapshots/step-000005', loss: 1, acc: 0 }] }), twoDirs),
  'loadSnapshots of a directory not chosen': () => loadSnapshots(metricsOf([0, 7]), twoDirs),
  'loadSnapshots of a directory without its vocab': () => loadSnapshots(metricsOf([0, 5]), { ...twoDirs,
    'snapshots/step-000005': { config: files.config, safetensors: files.safetensors } }),
  'loadSnapshots of two vocabularies': () => loadSnapshots(metricsOf([0, 5]), { ...twoDirs,
    'snapshots/step-000005': { ...files, vocab: files.vocab.replace('\nthe\n', '\nthee\n') } }),
  'loadSnapshots of dirs null': () => loadSnapshots(metricsOf([0, 5]), null),
  'loadShippedRun of a snapshot without its weights': shippedRun(metricsOf([0, 5]), {}),
  'loadShippedRun of metrics without snapshots': shippedRun(JSON.stringify({ eval: [] }), {}),
  'loadShippedRun of metrics null': shippedRun('null', {}),
  'ModernBertMLM of a config null': () => new ModernBertMLM(null, mbWeights),
  'ModernBertMLM of weights null': () => new ModernBertMLM(MB, null),
  'ModernBertMLM of model_type bert': withMB({ model_type: 'bert' }),
  'ModernBertMLM of hidden_size 0': withMB({ hidden_size: 0 }),
  'ModernBertMLM of an odd head size': withMB({ num_attention_heads: 4 }),
  'ModernBertMLM of local_attention 3': withMB({ local_attention: 3 }),
  'ModernBertMLM of norm_bias true': withMB({ norm_bias: true }),
  'ModernBertMLM of gelu_pytorch_tanh': withMB({ hidden_activation: 'gelu_pytorch_tanh' }),
  'ModernBertMLM of a scaled rope': withMB({ rope_parameters: { rope_type: 'linear', rope_theta: 10 } }),
  'ModernBertMLM of layer 0 local': withMB({ layer_types: ['sliding_attention', 'full_attention'] }),
  'ModernBertMLM of layer_types a string': withMB({ layer_types: 'full_attention' }),
  'ModernBertMLM of rope_parameters a string': withMB({ rope_parameters: 'default' }),
  'ModernBertMLM of rope_theta 0': withMB({ rope_parameters: { rope_theta: 0 } }),
  'ModernBertMLM of global_attn_every_n_layers 0': withMB({ global_attn_every_n_layers: 0 }),
  'ModernBertMLM of 3 layers for 2 saved': withMB({ num_hidden_layers: 3 }),
  'ModernBertMLM of a decoder not its word table': () => new ModernBertMLM(MB, { ...mbWeights,
    'decoder.weight': { shape: [10, 4], data: new Float32Array(40) } }),
  'ModernBertMLM forward of an id past the vocabulary': () => mb.forward([2, 10]),
  'ModernBertMLM forward of 9 ids for 8 positions': () => mb.forward(Array(9).fill(2)),
  'ModernBertMLM forward at a position past the row': () => mb.forward([2, 3], [2]),
  'ModernBertMLM reach of 0 samples': () => mb.reach([2, 3], 0),
  'readSafetensors of 0 bytes': () => readSafetensors(new ArrayBuffer(0)),
  'readSafetensors of a header longer than the file': () => readSafetensors(header({}).slice(0, 9)),
  'readSafetensors of a header null': () => readSafetensors(header(null)),
  'readSafetensors of a header list': () => readSafetensors(header([1, 2])),
  'readSafetensors of a tensor without a shape': () => readSafetensors(header({ a: { dtype: 'F32', data_offsets: [0, 4] } }, new Uint8Array(4))),
  'readSafetensors of a negative shape': () => readSafetensors(header({ a: { dtype: 'F32', shape: [-1], data_offsets: [0, 4] } }, new Uint8Array(4))),
  'readSafetensors of a float offset': () => readSafetensors(header({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4.5] } }, new Uint8Array(8))),
  'readSafetensors of int64': () => readSafetensors(header({ a: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, new Uint8Array(8))),
  'readSafetensors of dtype toString': () => readSafetensors(header({ a: { dtype: 'toString', shape: [1], data_offsets: [0, 4] } }, new Uint8Array(4))),
  'readSafetensors of offsets past the data': () => readSafetensors(header({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }, new Uint8Array(4))),
  'readSafetensors of a shape the bytes do not fit': () => readSafetensors(header({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, new Uint8Array(8))),
  'BertMLM of a config null': () => new BertMLM(null, weights),
  'BertMLM of a config list': () => new BertMLM([], weights),
  'BertMLM of weights null': () => new BertMLM(config, null),
  'BertMLM of model_type modernbert': withConfig({ model_type: 'modernbert' }),
  'BertMLM of hidden_size 0': withConfig({ hidden_size: 0 }),
  'BertMLM of hidden_size as a string': withConfig({ hidden_size: String(config.hidden_size) }),
  'BertMLM of 7 heads (they divide no width a model is built with)': withConfig({ num_attention_heads: 7 }),
  'BertMLM of one layer more than saved': withConfig({ num_hidden_layers: config.num_hidden_layers + 1 }),
  'BertMLM of vocab_size 10**13': withConfig({ vocab_size: 1e13 }),
  'BertMLM of twice the positions saved': withConfig({ max_position_embeddings: 2 * config.max_position_embeddings }),
  'BertMLM of a weight named constructor': () => new BertMLM(config, { ...weights, 'bert.embeddings.LayerNorm.bias': undefined }),
  'forward of no ids': () => m.model.forward([]),
  'forward of a string': () => m.model.forward('1 2 3'),
  'forward of max_len + 1 ids': () => m.model.forward(Array(config.max_position_embeddings + 1).fill(5)),
  'forward of id 8192': () => m.model.forward([2, 8192, 3]),
  'forward of id -1': () => m.model.forward([2, -1, 3]),
  'forward of id 1.5': () => m.model.forward([2, 1.5, 3]),
  'forward at position 3 of 3': () => m.model.forward([2, 5, 3], [3]),
  'forward at "0"': () => m.model.forward([2, 5, 3], '0'),
  'reach of 0 samples': () => m.model.reach(ids, 0),
  'reach of 1.5 samples': () => m.model.reach(ids, 1.5),
  'reach of no ids': () => m.model.reach([], 4),
  'WordPiece of a string': () => new WordPiece('abc'),
  'WordPiece of a token twice': () => new WordPiece([...m.tok.tokens, 'the']),
  'WordPiece without [MASK]': () => new WordPiece(m.tok.tokens.filter((t) => t !== '[MASK]')),
  'encode of a number': () => m.tok.encode(42),
  'loadModel of a config that is not JSON': () => loadModel({ ...files, config: '{"model_type": "bert",' }),
  'loadModel of a config list': () => loadModel({ ...files, config: '[]' }),
  'loadModel of a vocabulary one token longer': () => loadModel({ ...files, vocab: `${files.vocab}extra\n` }),
  'loadModel of a text file as weights': () => loadModel({ ...files, safetensors: new TextEncoder().encode('hello').buffer }),
  'fillIds k 0': () => fillIds(m, ids.slice(1, -1), 0),
  'fillIds k 8188': () => fillIds(m, ids.slice(1, -1), 8188),
  'fillIds of a string': () => fillIds(m, 'the [MASK]'),
  'drawMask p 1.5': () => drawMask(m, 'a b c', 0, 1.5),
  'drawMask p NaN': () => drawMask(m, 'a b c', 0, NaN),
  'drawMask p "0.5"': () => drawMask(m, 'a b c', 0, '0.5'),
  'drawMask seed -1': () => drawMask(m, 'a b c', -1, 0.5),
  'drawMask seed 1.5': () => drawMask(m, 'a b c', 1.5, 0.5),
  'drawMask seed ""': () => drawMask(m, 'a b c', '', 0.5),
  'drawMask of a number': () => drawMask(m, 5, 0, 0.5),
  'PCG32 stream 2**64': () => new PCG32(0, 2n ** 64n),
  'below 0': () => new PCG32(0, 0).below(0),
};
const good = {
  'forward of one id': () => m.model.forward([2]),
  'forward of 32 ids at no position': () => m.model.forward(Array(32).fill(5), []),
  'reach exact of 2 ids': () => m.model.reach([2, 3]),
  'encode of an empty text': () => m.tok.encode(''),
  'fillIds of no [MASK]': () => fillIds(m, [5, 6, 7]),
  'fillIds k 8187, every word': () => fillIds(m, ids.slice(1, -1), 8187),
  'fillIds of a text longer than the rows': () => fillIds(m, [...Array(60).fill(5), m.tok.ids.get('[MASK]'), 6]),
  'drawMask p 0 and 1': () => { drawMask(m, 'a b c', 0, 0); drawMask(m, 'a b c', 0, 1); },
  'drawMask of a text longer than the rows': () => drawMask(m, 'the '.repeat(100), 5, 0.5),
  'PCG32 seed 2**64 - 1 as a string': () => new PCG32('18446744073709551615', 0),
  'loadSnapshots of two': () => loadSnapshots(metricsOf([5, 0]), twoDirs),
  'loadShippedRun of two, the last the model': shippedRun(metricsOf([0, 5]), { 'snapshots/step-000000': b64 }),
  'ModernBertMLM forward and reach of 8 ids': () => { mb.forward(Array(8).fill(2)); mb.reach(Array(8).fill(2)); },
};
const out = {};
for (const [name, f] of Object.entries(bad)) out[name] = outcome(f, true);
for (const [name, f] of Object.entries(good)) out[name] = outcome(f, false);
process.stdout.write(JSON.stringify(out));
