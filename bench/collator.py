"""MLMCollator against transformers' DataCollatorForLanguageModeling on the same 64 x 512 token ids: whole-word masking
(ours draw for draw on PCG32; theirs forces [MASK] and builds a [B, T, T] tensor) and token masking. Peak memory of
each side's call is tracemalloc's: NumPy and Python allocations; torch's own tensors (which only transformers' token
masking makes) are not traced, so that figure undercounts transformers."""
import sys, tracemalloc
from transformers import BertTokenizerFast, DataCollatorForLanguageModeling
from bert_nb.data import MLMCollator
from bert_nb.pretrain import read_corpus, DEFAULT_CORPUS
from bert_nb.wordpiece import WordPieceTokenizer
from common import minilm_dir, interleaved, report, memory, save

def peak_mb(f) -> float:
    tracemalloc.start(); f(); peak = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()
    return peak / 2**20

def main():
    B, T, V, p = 64, 512, 30522, 0.15
    ref_tok, tok = BertTokenizerFast(str(minilm_dir() / 'vocab.txt')), WordPieceTokenizer.from_vocab(minilm_dir())
    verses = read_corpus([DEFAULT_CORPUS])
    texts = [' '.join(verses[i * 40:(i + 1) * 40]) for i in range(B)]  # 40 verses: more than 512 tokens
    enc = ref_tok(texts, truncation=True, max_length=T, return_offsets_mapping=True)
    # theirs needs the offsets to find words; ours finds them from the ## pieces of the same token ids
    feats = [{'input_ids': i, 'offset_mapping': o} for i, o in zip(enc['input_ids'], enc['offset_mapping'])]
    assert all(len(f['input_ids']) == T for f in feats)
    ours = {False: MLMCollator(tok, p, max_len=T), True: MLMCollator(tok, p, max_len=T, whole_word=True)}
    theirs = {ww: DataCollatorForLanguageModeling(tokenizer=ref_tok, mlm_probability=p, whole_word_mask=ww,
                                                  return_tensors='pt') for ww in (False, True)}
    for ww in (False, True):  # the same kind of thing first: ~p of the real tokens labelled, no special
        for name, b in (('ours', ours[ww](feats)), ('transformers', theirs[ww](feats))):
            lab = b['labels'].numpy(); picked = lab != -100
            assert not picked[:, [0, -1]].any() and abs(picked.mean() - p) < 0.03, (name, ww, picked.mean())
    ok = True
    for ww, target in ((True, 3.0), (False, 1.5)):
        kind = 'whole-word' if ww else 'token'
        fns = {f'MLMCollator ({kind})': lambda: ours[ww](feats),
               f'transformers collator ({kind})': lambda: theirs[ww](feats)}
        t = interleaved(fns, rounds=7, calls={k: 3 for k in fns})
        ok &= report(f'{kind} masking collator, {B} x {T} token ids (V = {V:,}, p = {p})', 'tokens/s',
                     {k: B * T / v for k, v in t.items()}, {tuple(fns): target})
        memory(f'{kind} masking collator call (tracemalloc)', 'MB', {k: peak_mb(f) for k, f in fns.items()})
    return ok

if __name__ == '__main__':
    ok = main()
    save('collator')
    sys.exit(0 if ok else 1)
