"""Chapter 00's course tests: the learner's `rng` module against PCG32 transcribed from the reference C code.

Each test's docstring says what it checks, then (after the first sentence) why it matters downstream."""
import math
import numpy as np
import rng as m
from course_refs import RefPCG

def test_the_published_stream():
    """PCG32(42, 54) gives pcg32-demo's published first outputs. Every port of the op order starts from this
    stream: a seeding step left out, and no batch agrees with any other language's."""
    g = m.PCG32(42, 54)
    assert [g.next_u32() for _ in range(6)] == [0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e]

def test_draws_match_the_reference():
    """next_u32, uniform and below draw what pcg_basic.c draws, rejections included, and leave the stream where it
    does. Masking reads uniform() for its picks and below() for its random ids: one draw off shifts every batch."""
    for seed, stream in [(0, 0), (7, 3), (2**64 - 1, 2**63)]:
        g, r = m.PCG32(seed, stream), RefPCG(seed, stream)
        assert [g.next_u32() for _ in range(20)] == [r.random() for _ in range(20)]
        assert [g.uniform() for _ in range(20)] == [r.random() / 2**32 for _ in range(20)]
        for n in (1, 3, 1000, 2**31 + 1, 2**32):  # 2**31 + 1 rejects about half of the outputs
            assert [g.below(n) for _ in range(50)] == [r.bounded(n) for _ in range(50)]
        assert g.next_u32() == r.random()

def test_advance_jumps_the_stream():
    """advance(k) lands where k draws land, and advance(-k) undoes them. The run's resume and each process's share
    of a batch jump ahead instead of drawing."""
    g, h = m.PCG32(5, 2), m.PCG32(5, 2)
    for _ in range(1000): g.next_u32()
    h.advance(1000)
    assert g.next_u32() == h.next_u32()
    h.advance(-1001); g2 = m.PCG32(5, 2)
    assert h.next_u32() == g2.next_u32()

def test_blocks_equal_single_draws():
    """u32s(n) and uniforms(n) are n single draws, and leave the generator where those would. The fast masking path
    draws whole blocks: a block one draw short desynchronises every later batch."""
    for n in (1, 5, 64, 1000):
        g, r = m.PCG32(9, 1), RefPCG(9, 1)
        assert np.asarray(g.u32s(n)).tolist() == [r.random() for _ in range(n)]
        assert np.asarray(g.uniforms(n)).tolist() == [r.random() / 2**32 for _ in range(n)]
        assert g.next_u32() == r.random()

def test_categorical_boundaries():
    """sample_categorical returns the smallest i with u < p0 + ... + pi: u equal to a running sum belongs to the next
    outcome. The 80/10/10 actions are drawn this way; a boundary taken the other way changes the shares' edges."""
    assert m.sample_categorical([0.25, 0.5, 0.25], 0.0) == 0
    assert m.sample_categorical([0.25, 0.5, 0.25], 0.25) == 1
    assert m.sample_categorical([0.25, 0.5, 0.25], 0.75) == 2
    assert m.sample_categorical([0.5, 0.0, 0.5], 0.5) == 2  # an outcome of probability 0 is never drawn
    assert m.sample_categorical([0.8, 0.1, 0.1], 0.8999) == 1

def test_normal_init_is_box_muller():
    """normal_init draws pairs of uniforms and takes sqrt(-2 ln(1 - u1)) times cos and sin of 2 pi u2, in C order.
    The encoder's initial weights come from it: the same weights in every language start the same run."""
    r = RefPCG(3, 4)
    u = np.array([r.uniform() for _ in range(12)]).reshape(-1, 2)
    rad, th = np.sqrt(-2 * np.log1p(-u[:, 0])), 2 * np.pi * u[:, 1]
    want = (0.5 * np.stack([rad * np.cos(th), rad * np.sin(th)], 1).reshape(-1)[:11]).astype(np.float32)
    got = np.asarray(m.normal_init(m.PCG32(3, 4), (11,), 0.5))
    assert got.dtype == np.float32 and np.array_equal(got, want)

def test_streams_are_told_apart():
    """Two generators are equal only on the same stream at the same point. A test that compares generators (is the
    stream left where the op order leaves it?) must not pass for another stream."""
    a, b = m.PCG32(1, 0), m.PCG32(1, 1)
    b.state = a.state
    assert a != b and a == a.copy()
