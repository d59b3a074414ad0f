"A plain PCG32 transcribed from the reference C code (pcg_basic.c): the tests' independent oracle."
M64 = 2**64

class RefPCG:
    "pcg32_srandom_r / pcg32_random_r / pcg32_boundedrand_r, one statement at a time."
    def __init__(self, initstate, initseq=0):
        self.state, self.inc = 0, (initseq * 2 + 1) % M64
        self.random()
        self.state = (self.state + initstate) % M64
        self.random()
    def random(self):
        old = self.state
        self.state = (old * 6364136223846793005 + self.inc) % M64
        xorshifted = ((old >> 18) ^ old) >> 27 & 0xFFFFFFFF
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((32 - rot) % 32))) & 0xFFFFFFFF
    def uniform(self): return self.random() / 2**32
    def bounded(self, bound):
        threshold = (2**32 - bound) % bound
        while True:
            r = self.random()
            if r >= threshold: return r % bound
