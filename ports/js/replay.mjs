// bert-nb's PCG32 and MLM op order in JavaScript, written from the chapter's definition (a loop, one position at a
// time), replaying every PCG32 and masking vector of bert_nb/golden/golden.json bit for bit, generator state included.
// node ports/js/replay.mjs [path/to/golden.json]      prints "N passed, M failed"; exits 1 on any mismatch
import { readFileSync } from 'node:fs';

const M64 = (1n << 64n) - 1n, MULT = 6364136223846793005n;

class PCG32 {  // pcg32_srandom_r(initstate = seed, initseq = stream); states and streams are 64-bit: BigInt
  constructor(seed, stream) {
    this.inc = ((BigInt(stream) << 1n) | 1n) & M64;
    this.state = 0n; this.step();
    this.state = (this.state + BigInt(seed)) & M64; this.step();
  }
  step() { this.state = (this.state * MULT + this.inc) & M64; }
  nextU32() {  // XSH-RR of the state before the step
    const old = this.state; this.step();
    const x = Number((((old >> 18n) ^ old) >> 27n) & 0xffffffffn), r = Number(old >> 59n);
    return ((x >>> r) | (x << ((32 - r) & 31))) >>> 0;
  }
  uniform() { return this.nextU32() / 4294967296; }  // exact: a 32-bit integer over 2**32
  below(n) {  // pcg32_boundedrand_r: reject outputs under (2**32 - n) % n
    const threshold = (4294967296 - n) % n;
    for (;;) { const r = this.nextU32(); if (r >= threshold) return r % n; }
  }
}

function categorical(probs, u) {  // the smallest i with u < probs[0] + ... + probs[i], summed left to right
  let total = 0;
  for (let i = 0; i < probs.length; i++) { total += probs[i]; if (u < total) return i; }
  return probs.length - 1;
}

// The op order: positions in C order; a special position draws nothing. A word (a run of non-special positions of
// one row with one word id; without word ids every position is a word) draws u at its first position and is
// picked when u < p; each position of a picked word is labelled and draws its action: [MASK], below(vocab), or kept.
function mask(ids, special, wordIds, rowLength, maskId, vocab, p, shares, rng) {
  const inputs = ids.slice(), labels = ids.map(() => -100);
  let picked = false;
  for (let i = 0; i < ids.length; i++) {
    if (special[i]) continue;
    const first = !wordIds || i % rowLength === 0 || special[i - 1] || wordIds[i] !== wordIds[i - 1];
    if (first) picked = rng.uniform() < p;
    if (!picked) continue;
    labels[i] = ids[i];
    const a = categorical(shares, rng.uniform());
    if (a === 0) inputs[i] = maskId;
    else if (a === 1) inputs[i] = rng.below(vocab);
  }
  return [inputs, labels];
}

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
