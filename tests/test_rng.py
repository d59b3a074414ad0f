"PCG32 against a plain PCG32 written here from the reference C code, not imported from the module."
import math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from bert_nb.rng import PCG32, sample_categorical, normal_init

from pcg_ref import RefPCG, M64

seeds = st.integers(0, M64 - 1)

def test_reference_demo_vector():
    g = PCG32(42, 54)
    assert [g.next_u32() for _ in range(6)] == [0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e]

@pytest.mark.parametrize('seed,stream', [(0, 0), (1, 0), (42, 54), (2**63, 1), (2**64 - 1, 2**64 - 1), (2**63 + 12345, 2**63 - 1), (0xDEADBEEF, 7)])
def test_matches_reference(seed, stream):
    g, r = PCG32(seed, stream), RefPCG(seed, stream)
    assert [g.next_u32() for _ in range(200)] == [r.random() for _ in range(200)]
    assert [g.uniform() for _ in range(50)] == [r.random() / 2**32 for _ in range(50)]
    for n in (1, 2, 3, 6, 1000, 2**31 + 1, 2**32 - 1, 2**32):
        assert [g.below(n) for _ in range(20)] == [r.bounded(n) for _ in range(20)]

@settings(max_examples=60, deadline=None)
@given(seeds, seeds)
def test_many_seeds_and_streams(seed, stream):
    g, r = PCG32(seed, stream), RefPCG(seed, stream)
    assert [g.next_u32() for _ in range(8)] == [r.random() for _ in range(8)]

@settings(max_examples=60, deadline=None)
@given(seeds, seeds, st.integers(-10**6, 10**6), st.integers(-10**6, 10**6))
def test_advance_composes(seed, stream, a, b):
    g, h = PCG32(seed, stream), PCG32(seed, stream)
    g.advance(a); g.advance(b); h.advance(a + b)
    assert g == h and g.next_u32() == h.next_u32()

@settings(max_examples=40, deadline=None)
@given(seeds, seeds, st.integers(0, 300))
def test_advance_back_undoes_draws(seed, stream, k):
    g, r = PCG32(seed, stream), RefPCG(seed, stream)
    first = [r.random() for _ in range(k + 3)]
    [g.next_u32() for _ in range(k)]
    g.advance(-k)
    assert [g.next_u32() for _ in range(k + 3)] == first

def test_advance_forward_equals_draws():
    g, r = PCG32(5, 9), RefPCG(5, 9)
    g.advance(1000)
    for _ in range(1000): r.random()
    assert g.next_u32() == r.random()
    g.advance(2**64)  # a full period is the identity
    assert g.next_u32() == r.random()

@settings(max_examples=40, deadline=None)
@given(seeds, seeds, st.integers(0, 3000), st.integers(0, 5))
def test_vectorised_draws(seed, stream, n, skip):
    g, r = PCG32(seed, stream), RefPCG(seed, stream)
    for _ in range(skip): g.next_u32(); r.random()
    u = g.u32s(n)
    assert u.dtype == np.uint32 and u.tolist() == [r.random() for _ in range(n)]
    f = g.uniforms(n)
    assert f.dtype == np.float64 and f.tolist() == [r.random() / 2**32 for _ in range(n)]
    assert g.next_u32() == r.random()  # left exactly where n scalar calls leave it

@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(1, 2**32))
def test_below_range(seed, n):
    g, r = PCG32(seed), RefPCG(seed, 0)
    xs = [g.below(n) for _ in range(5)]
    assert all(0 <= x < n for x in xs) and xs == [r.bounded(n) for _ in range(5)]

def test_below_rejections_consume_draws():
    # n = 2**31 + 1 rejects outputs below 2**31 - 1: about half of them
    g, r = PCG32(3), RefPCG(3, 0)
    for _ in range(500): assert g.below(2**31 + 1) == r.bounded(2**31 + 1)
    assert g.next_u32() == r.random()

def test_copy_is_independent():
    g = PCG32(11, 3); [g.next_u32() for _ in range(5)]
    h = g.copy()
    assert [g.next_u32() for _ in range(5)] == [h.next_u32() for _ in range(5)]
    h.next_u32()
    assert g != h

@pytest.mark.parametrize('args,exc,msg', [
    ((-1,), ValueError, 'seed'), ((2**64,), ValueError, 'seed'), ((0, -1), ValueError, 'stream'), ((0, 2**64), ValueError, 'stream'),
    ((1.0,), TypeError, 'seed'), (('1',), TypeError, 'seed'), ((True,), TypeError, 'seed'), ((0, False), TypeError, 'stream'), ((None,), TypeError, 'seed')])
def test_constructor_errors(args, exc, msg):
    with pytest.raises(exc, match=msg): PCG32(*args)

@pytest.mark.parametrize('n,exc', [(0, ValueError), (-3, ValueError), (2**32 + 1, ValueError), (2.0, TypeError), (True, TypeError)])
def test_below_errors(n, exc):
    g = PCG32(0); before = g.copy()
    with pytest.raises(exc, match='n must'): g.below(n)
    assert g == before  # nothing drawn

def test_other_errors():
    g = PCG32(0)
    with pytest.raises(TypeError, match='delta'): g.advance(1.5)
    with pytest.raises(ValueError, match='n must be >= 0'): g.u32s(-1)
    with pytest.raises(TypeError): g.uniforms(2.0)

def test_sample_categorical():
    def ref(ps, u):
        c = 0.0
        for i, p in enumerate(ps):
            c += p
            if u < c: return i
        return len(ps) - 1
    g = RefPCG(9, 9)
    for _ in range(2000):
        u = g.random() / 2**32
        assert sample_categorical([0.8, 0.1, 0.1], u) == ref([0.8, 0.1, 0.1], u)
    assert sample_categorical([0.8, 0.1, 0.1], 0.8) == 1   # the boundary belongs to the next index
    assert sample_categorical([0.0, 1.0], 0.0) == 1        # a zero-probability class is never chosen
    assert sample_categorical([0.3, 0.3, 0.4 - 5e-7], 1 - 2**-32) == 2  # rounding past the total: the last index

@pytest.mark.parametrize('probs,u,msg', [([0.5, 0.6], 0.1, 'sum to 1'), ([1.2, -0.2], 0.1, 'non-negative'), ([], 0.1, 'empty'),
                                         ([1.0], 1.0, 'u must'), ([1.0], -0.1, 'u must'), ([float('nan'), 1.0], 0.1, 'non-negative'), ([1.0], float('nan'), 'u must')])
def test_sample_categorical_errors(probs, u, msg):
    with pytest.raises(ValueError, match=msg): sample_categorical(probs, u)

def test_normal_init_formula_and_order():
    r = RefPCG(17, 0)
    pairs = [(r.random() / 2**32, r.random() / 2**32) for _ in range(4)]
    z = []
    for u1, u2 in pairs:
        rad = math.sqrt(-2 * math.log(1 - u1))
        z += [rad * math.cos(2 * math.pi * u2), rad * math.sin(2 * math.pi * u2)]
    g = PCG32(17)
    w = normal_init(g, (7,), std=0.5)   # odd: the last pair is drawn whole and its sine dropped
    assert w.dtype == np.float32
    np.testing.assert_array_equal(w, np.float32(0.5 * np.array(z[:7])))
    assert g.next_u32() == r.random()
    w2 = normal_init(PCG32(17), (2, 3))
    np.testing.assert_array_equal(w2.reshape(-1), np.float32(0.02 * np.array(z[:6])))

def test_a_generator_is_its_state_and_its_stream():
    "Two generators are equal only on the same stream at the same point: equal states on two streams are not."
    a, b = PCG32(5, 1), PCG32(5, 2)
    b.state = a.state
    assert a != b and a.copy() == a and a.copy() != b and PCG32(5, 1) == PCG32(5, 1)
    assert a.next_u32() == b.next_u32()  # the first output reads the state alone ...
    assert [a.next_u32() for _ in range(4)] != [b.next_u32() for _ in range(4)]  # ... and then the streams part
    c = PCG32(5, 1); c.advance(5); assert c == a
