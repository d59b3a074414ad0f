"The course tests' own oracles, written from the published definitions, never from the package's code."
import math
import numpy as np

class RefPCG:
    "PCG32 transcribed from the reference C code (pcg_basic.c): pcg32_srandom_r, pcg32_random_r, pcg32_boundedrand_r."
    def __init__(self, initstate: int, initseq: int = 0):
        self.state, self.inc = 0, (initseq * 2 + 1) % 2**64
        self.random()
        self.state = (self.state + initstate) % 2**64
        self.random()
    def random(self) -> int:
        old = self.state
        self.state = (old * 6364136223846793005 + self.inc) % 2**64
        xorshifted = ((old >> 18) ^ old) >> 27 & 0xFFFFFFFF
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((32 - rot) % 32))) & 0xFFFFFFFF
    def uniform(self) -> float: return self.random() / 2**32
    def bounded(self, bound: int) -> int:
        threshold = (2**32 - bound) % bound
        while True:
            r = self.random()
            if r >= threshold: return r % bound

class Script:
    "Scripted draws for a hand-worked example; a draw beyond the script fails the test."
    def __init__(self, uniforms, belows=()): self.u, self.b = list(uniforms), list(belows)
    def uniform(self) -> float:
        if not self.u: raise AssertionError('an extra uniform() draw: the op order draws exactly the script')
        return self.u.pop(0)
    def below(self, n: int) -> int:
        if not self.b: raise AssertionError(f'an extra below({n}) draw: the op order draws exactly the script')
        return self.b.pop(0)

gelu = np.vectorize(lambda u: 0.5 * u * (1 + math.erf(u / math.sqrt(2))))  # the exact GELU, not GPT-2's tanh

def ln(x, w, b, eps=1e-12): return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b

def lin(x, P, n): return x @ P[n + '.weight'].T + P[n + '.bias']

def np_layer(P, pre, h, real, H):
    "One post-LN BERT layer in float64: padded keys taken out of every softmax, every query reading every real key."
    B, T, C = h.shape; hs = C // H
    out = np.zeros_like(h)
    for b in range(B):
        keys, heads = np.flatnonzero(real[b]), []
        for i in range(H):
            sl = slice(i * hs, (i + 1) * hs)
            q, k, v = (lin(h[b], P, f'{pre}attn.{n}')[:, sl] for n in 'qkv')
            s = q @ k[keys].T / math.sqrt(hs)
            w = np.exp(s - s.max(1, keepdims=True)); w /= w.sum(1, keepdims=True)
            heads.append(w @ v[keys])
        a = ln(h[b] + lin(np.concatenate(heads, 1), P, f'{pre}attn.o'), P[f'{pre}attn_ln.weight'], P[f'{pre}attn_ln.bias'])
        out[b] = ln(a + lin(gelu(lin(a, P, f'{pre}ff_in')), P, f'{pre}ff_out'), P[f'{pre}ff_ln.weight'],
                    P[f'{pre}ff_ln.bias'])
    return out
