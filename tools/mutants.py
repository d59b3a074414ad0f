"""Mutation testing: apply each fault to a scratch copy of the package, run the tests against it, print who killed it.

A fault is a small, plausible mistake in the exported code (`bert_nb/*.py`), written as one exact text replacement
inside one top-level block (a function or class). The tests must fail on every fault that changes behaviour; a
fault that survives is either a missing test or an equivalent mutant, which the table says.

    make mutants                       # every fault, two at a time
    python tools/mutants.py s01 s07    # chosen faults
"""
import argparse, os, re, shutil, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

root = Path(__file__).resolve().parents[1]
MASKING, ENCODER = ['tests/test_masking.py'], ['tests/test_encoder.py', 'tests/test_checkpoints.py']

@dataclass
class Fault:
    id: str
    what: str
    file: str      # under bert_nb/
    block: str     # the text that starts the top-level block to change, e.g. 'def _mask_loop('
    old: str
    new: str
    tests: list    # test files to run (all must pass on the unchanged code)

# The seed's pitfall faults: s01-s05 on both masking paths (the loop and the vectorised PCG32 path), s06-s12 in the encoder.
FAULTS = [
    Fault('s01-loop', 'special positions picked', 'bert.py', 'def _mask_loop(',
          '        if skip: continue\n', '', MASKING),
    Fault('s01-fast', 'special positions picked', 'bert.py', 'def _mask_pcg(',
          'pos = np.flatnonzero(~special.reshape(-1))', 'pos = np.arange(special.size)', MASKING),
    Fault('s02-loop', 'every position labelled', 'bert.py', 'def _mask_loop(',
          'inputs, labels = ids.copy(), np.full_like(ids, -100)', 'inputs, labels = ids.copy(), ids.copy()', MASKING),
    Fault('s02-fast', 'every position labelled', 'bert.py', 'def _mask_pcg(',
          'inputs, labels = ids.copy(), np.full_like(ids, -100)', 'inputs, labels = ids.copy(), ids.copy()', MASKING),
    Fault('s03-loop', 'random and keep swapped', 'bert.py', 'def _mask_loop(',
          'elif a == 1: shown[i] = rng.below(vocab)', 'elif a == 2: shown[i] = rng.below(vocab)', MASKING),
    Fault('s03-fast', 'random and keep swapped', 'bert.py', 'def _mask_pcg(',
          'act = (u2 >= cuts[0]).astype(np.int64) + (u2 >= cuts[1])',
          'act = (u2 >= cuts[0]).astype(np.int64) * (2 - (u2 >= cuts[1]))', MASKING),
    Fault('s04-loop', 'the label set to the shown token', 'bert.py', 'def _mask_loop(',
          '    return inputs, labels', '    labels[labels != -100] = inputs[labels != -100]\n    return inputs, labels', MASKING),
    Fault('s04-fast', 'the label set to the shown token', 'bert.py', 'def _mask_pcg(',
          '    shown[at[a == 1]] = r[take[a == 1]].astype(np.int64) % vocab\n',
          '    shown[at[a == 1]] = r[take[a == 1]].astype(np.int64) % vocab\n    label[at] = shown[at]\n', MASKING),
    Fault('s05-loop', 'a second uniform drawn for every position', 'bert.py', 'def _mask_loop(',
          '        if first[i]: picked = rng.uniform() < p',
          '        u2 = rng.uniform()\n        if first[i]: picked = rng.uniform() < p', MASKING),
    Fault('s05-fast', 'a second uniform drawn for every position (the stream left two draws per position on)',
          'bert.py', 'def _mask_pcg(', 'rng.advance(int(used))', 'rng.advance(int(used) + m - len(k))', MASKING),
    Fault('s06', "GPT-2's tanh GELU", 'bert.py', 'def _gelu(',
          'return F.gelu(x) if torch.is_grad_enabled() else torch.ops.aten.gelu_(x)', "return F.gelu(x, approximate='tanh')",
          ENCODER),
    Fault('s07', 'pre-LN instead of post-LN', 'bert.py', 'class BertLayer(',
          'h = self.attn_ln(h + self.drop(self.attn(h, _attn_bias(attn_mask, h.dtype))))\n'
          '        return self.ff_ln(h + self.drop(self.ff_out(_gelu(self.ff_in(h)))))',
          'h = h + self.drop(self.attn(self.attn_ln(h), _attn_bias(attn_mask, h.dtype)))\n'
          '        return h + self.drop(self.ff_out(_gelu(self.ff_in(self.ff_ln(h)))))', ENCODER),
    Fault('s08', 'padded keys not masked', 'bert.py', 'class BertLayer(',
          'self.attn(h, _attn_bias(attn_mask, h.dtype))', 'self.attn(h, None)', ENCODER),
    Fault('s09', 'a causal mask', 'bert.py', 'class BertAttention(',
          'attn_mask=bias,',
          'attn_mask=(0 if bias is None else bias) + torch.full((T, T), torch.finfo(q.dtype).min, dtype=q.dtype,'
          ' device=q.device).triu(1),', ENCODER),
    Fault('s10', 'token types never added', 'bert.py', 'class BertEncoder(',
          'h = h + self.type_emb(token_type_ids.long())', 'h = h + self.type_emb.weight[0]', ENCODER),
    Fault('s11', "the decoder's bias left out", 'bert.py', 'class MLMHead(',
          'return F.linear(x, word_emb, self.bias)', 'return F.linear(x, word_emb)', ENCODER),
    Fault('s12', 'the decoder not tied to the word table (no gradient through it)', 'bert.py', 'class MLMHead(',
          'return F.linear(x, word_emb, self.bias)', 'return F.linear(x, word_emb.detach(), self.bias)', ENCODER),
]

def block_span(text: str, start: str) -> tuple[int, int]:
    "The span of the top-level block that starts with `start`: up to the next top-level def, class or cell marker."
    i = text.find('\n' + start) + 1
    if i == 0 or text.count('\n' + start) != 1: raise ValueError(f"{start!r} does not start exactly one block")
    m = re.compile(r'\n(?=def |class |@|# %%|[A-Za-z_]\w* *=)').search(text, i + len(start))
    return i, m.start() + 1 if m else len(text)

def apply(fault: Fault, pkg: Path):
    path = pkg / fault.file
    text = path.read_text()
    i, j = block_span(text, fault.block)
    if text[i:j].count(fault.old) != 1: raise ValueError(f"{fault.id}: the text to change is not in {fault.block} exactly once")
    path.write_text(text[:i] + text[i:j].replace(fault.old, fault.new) + text[j:])

def run_tests(fault: Fault | None, tests: list) -> tuple[bool, str, float]:
    "(passed, the first failing test or '', seconds) for the tests on a scratch copy with `fault` applied."
    with tempfile.TemporaryDirectory(prefix='mutant-') as d:
        d = Path(d)
        shutil.copytree(root / 'bert_nb', d / 'bert_nb', ignore=shutil.ignore_patterns('__pycache__'))
        shutil.copytree(root / 'tests', d / 'tests', ignore=shutil.ignore_patterns('__pycache__', '.hypothesis'))
        if fault: apply(fault, d / 'bert_nb')
        env = dict(os.environ, PYTHONPATH=str(d), PYTHONDONTWRITEBYTECODE='1')
        t = time.time()
        r = subprocess.run([sys.executable, '-m', 'pytest', '-x', '-q', '-p', 'no:cacheprovider', '--rootdir', str(d), *tests],
                           cwd=d, env=env, capture_output=True, text=True)
        failed = re.search(r'^FAILED (\S+)', r.stdout, re.M)
        return r.returncode == 0, failed[1] if failed else ('' if r.returncode == 0 else r.stdout[-300:]), time.time() - t

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('ids', nargs='*', help='fault ids or prefixes (default: all)')
    ap.add_argument('-j', '--jobs', type=int, default=2)
    a = ap.parse_args()
    faults = [f for f in FAULTS if not a.ids or any(f.id.startswith(i) for i in a.ids)]
    if not faults: raise SystemExit(f"no fault matches {a.ids}")
    # the scratch copy must be what the tests import, and the unchanged code must pass
    files = sorted({t for f in faults for t in f.tests})
    ok, first, s = run_tests(None, files)
    if not ok: raise SystemExit(f"the tests fail on the unchanged code ({first}): fix them first")
    print(f"unchanged code: {' '.join(files)} pass ({s:.0f} s)\n")
    with ThreadPoolExecutor(a.jobs) as ex: results = list(ex.map(lambda f: run_tests(f, f.tests), faults))
    print(f"| fault | what | killed by |\n|---|---|---|")
    for f, (passed, first, s) in zip(faults, results):
        print(f"| {f.id} | {f.what} | {'**SURVIVED**' if passed else first.split('::')[-1]} |")
    killed = sum(not p for p, _, _ in results)
    print(f"\n{killed} of {len(faults)} faults killed ({killed / len(faults):.0%})")
    if killed < len(faults): raise SystemExit(1)

if __name__ == '__main__': main()
