// Replays every PCG32 and masking vector of bert_nb/golden/golden.json bit for bit, generator state included, with
// mask.mjs's generator and op order.
// node ports/js/replay.mjs [path/to/golden.json]      prints "N passed, M failed"; exits 1 on any mismatch
import { readFileSync } from 'node:fs';
import { PCG32, categorical, mask } from './mask.mjs';

const golden = JSON.parse(readFileSync(process.argv[2] ?? new URL('../../bert_nb/golden/golden.json', import.meta.url)));
let passed = 0, failed = 0;
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
function check(what, ok) { if (ok) passed++; else { failed++; console.log(`MISMATCH ${what}`); } }

for (const c of golden.pcg32) {
  const g = new PCG32(c.seed, c.stream);
  check(`pcg32 ${c.seed} ${c.stream}`, same(c.outputs.map(() => g.nextU32()), c.outputs));
}
for (const c of golden.uniform) {
  const g = new PCG32(c.seed, c.stream);
  check(`uniform ${c.seed} ${c.stream}`, same(c.values.map(() => g.uniform()), c.values));
}
for (const c of golden.below) {
  const g = new PCG32(0, c.stream);
  if (c.state !== undefined) g.state = BigInt(c.state); else { const h = new PCG32(c.seed, c.stream); g.state = h.state; }
  check(`below(${c.n}) ${c.seed ?? 'state ' + c.state}`,
        same(c.values.map(() => g.below(c.n)), c.values) && g.state === BigInt(c.state_after));
}
for (const c of golden.categorical) check(`categorical ${c.probs} ${c.u}`, categorical(c.probs, c.u) === c.index);
for (const c of golden.masking) {
  const g = new PCG32(c.seed, c.stream), T = c.shape.length ? c.shape[c.shape.length - 1] : 1;
  const [inputs, labels] = mask(c.ids, c.special, c.word_ids, T, c.mask_id, c.vocab, c.p, c.shares, g);
  check(`masking ${c.shape} V=${c.vocab} p=${c.p} shares=${c.shares}${c.word_ids ? ' whole words' : ''}`,
        same(inputs, c.inputs) && same(labels, c.labels) && g.state === BigInt(c.state_after));
}
for (const c of golden.mlm_batch) {
  const flat = c.unmasked.flat(), T = c.unmasked[0].length, g = new PCG32(c.seed, c.stream);
  const [inputs, labels] = mask(flat, flat.map(t => c.special_ids.includes(t)), null, T, c.mask_id, c.vocab, c.p,
                                [0.8, 0.1, 0.1], g);
  check('mlm_batch', same(inputs, c.input_ids.flat()) && same(labels, c.labels.flat()));
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
