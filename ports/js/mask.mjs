// bert-nb's PCG32 and mlm_mask's op order in JavaScript, written from the chapter's definition (a loop, one position
// at a time): replay.mjs replays bert_nb/golden/golden.json with them bit for bit, and the play page draws its
// masks with them.

const M64 = (1n << 64n) - 1n, MULT = 6364136223846793005n;

export class PCG32 {  // pcg32_srandom_r(initstate = seed, initseq = stream); states and streams are 64-bit: BigInt
  constructor(seed, stream) {  // each a whole number in [0, 2**64): a Number, a BigInt or a decimal string
    [seed, stream] = [['seed', seed], ['stream', stream]].map(([what, v]) => {
      let b = -1n;
      const whole = typeof v === 'bigint' || Number.isInteger(v) || (typeof v === 'string' && /^[0-9]+$/.test(v));
      if (whole) b = BigInt(v);
      if (b < 0n || b > M64) throw new RangeError(`${what} must be a whole number in [0, 2**64), got ${v}`);
      return b;
    });
    this.inc = ((stream << 1n) | 1n) & M64;
    this.state = 0n; this.step();
    this.state = (this.state + seed) & M64; this.step();
  }
  step() { this.state = (this.state * MULT + this.inc) & M64; }
  nextU32() {  // XSH-RR of the state before the step
    const old = this.state; this.step();
    const x = Number((((old >> 18n) ^ old) >> 27n) & 0xffffffffn), r = Number(old >> 59n);
    return ((x >>> r) | (x << ((32 - r) & 31))) >>> 0;
  }
  uniform() { return this.nextU32() / 4294967296; }  // exact: a 32-bit integer over 2**32
  below(n) {  // pcg32_boundedrand_r: reject outputs under (2**32 - n) % n
    if (!Number.isInteger(n) || n < 1 || n > 4294967296)
      throw new RangeError(`n must be a whole number in [1, 2**32], got ${n}`);
    const threshold = (4294967296 - n) % n;
    for (;;) { const r = this.nextU32(); if (r >= threshold) return r % n; }
  }
}

export function categorical(probs, u) {  // the smallest i with u < probs[0] + ... + probs[i], summed left to right
  let total = 0;
  for (let i = 0; i < probs.length; i++) { total += probs[i]; if (u < total) return i; }
  return probs.length - 1;
}

// The op order: positions in C order; a special position draws nothing. A word (a run of non-special positions of
// one row with one word id; without word ids every position is a word) draws u at its first position and is
// picked when u < p; each position of a picked word is labelled and draws its action: [MASK], below(vocab), or kept.
export function mask(ids, special, wordIds, rowLength, maskId, vocab, p, shares, rng) {
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
