"""Exact PCG32 masking (mlm_mask's NumPy path) against transformers' DataCollatorForLanguageModeling.torch_mask_tokens
(a non-reproducible Bernoulli masker given the special-tokens mask) and against the plain op-order loop."""
import sys
import numpy as np
import torch
from transformers import BertTokenizerFast, DataCollatorForLanguageModeling
from bert_nb.bert import mlm_mask
from bert_nb.rng import PCG32
from common import minilm_dir, interleaved, report, save

class Plain:
    "A PCG32 behind another type: mlm_mask takes the plain loop for it."
    def __init__(self, g): self.g = g
    def uniform(self): return self.g.uniform()
    def below(self, n): return self.g.below(n)

def main():
    B, T, V, p = 64, 512, 30522, 0.15
    tok = BertTokenizerFast(str(minilm_dir() / 'vocab.txt'))
    g = np.random.default_rng(0)
    ids = np.zeros((B, T), np.int64)
    for b, n in enumerate(g.integers(T // 2, T + 1, B)):  # [CLS] words [SEP] [PAD]...
        ids[b, :n] = np.r_[101, g.integers(1000, V, n - 2), 102]
    special = np.isin(ids, tok.all_special_ids)
    t_ids, t_special = torch.from_numpy(ids), torch.from_numpy(special)

    # the same thing first: the fast path equals the loop, generator state included
    fast, slow = PCG32(1), PCG32(1)
    a, b = mlm_mask(ids, special, tok.mask_token_id, V, p, fast), mlm_mask(ids, special, tok.mask_token_id, V, p, Plain(slow))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and fast == slow, 'fast path differs from the loop'
    coll = DataCollatorForLanguageModeling(tokenizer=tok, mlm_probability=p)
    hf_in, hf_lab = coll.torch_mask_tokens(t_ids.clone(), t_special)
    for name, lab in (('ours', a[1]), ('transformers', hf_lab.numpy())):  # both pick ~p of the real tokens, never a special one
        picked = lab != -100
        assert not picked[special].any() and abs(picked.sum() / (~special).sum() - p) < 0.01, name

    rng, loop_rng = PCG32(2), Plain(PCG32(3))
    t = interleaved({'mlm_mask (PCG32, NumPy path)': lambda: mlm_mask(ids, special, 103, V, p, rng),
                     'transformers torch_mask_tokens': lambda: coll.torch_mask_tokens(t_ids.clone(), t_special),
                     'mlm_mask (plain loop)': lambda: mlm_mask(ids, special, 103, V, p, loop_rng)},
                    rounds=7, calls={'mlm_mask (PCG32, NumPy path)': 20, 'transformers torch_mask_tokens': 20})
    rates = {k: B * T / v for k, v in t.items()}
    return report(f'masking a {B} x {T} batch (V = {V:,}, p = {p})', 'tokens/s', rates,
                  {('mlm_mask (PCG32, NumPy path)', 'transformers torch_mask_tokens'): 1.0, ('mlm_mask (PCG32, NumPy path)', 'mlm_mask (plain loop)'): 25})

if __name__ == '__main__':
    ok = main()
    save('mask')
    sys.exit(0 if ok else 1)
