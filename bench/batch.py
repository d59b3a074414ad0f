"""mlm_batch end to end (tokenize, truncate, pad, mask exactly from PCG32) on 1,024 sentences, against
BertTokenizerFast(texts, padding=True, truncation=True) followed by transformers' MLM collator."""
import sys
import numpy as np
from transformers import BertTokenizerFast, DataCollatorForLanguageModeling
from bert_nb.bert import mlm_batch
from bert_nb.pretrain import read_corpus, DEFAULT_CORPUS
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer
from common import minilm_dir, interleaved, report, save

def main():
    texts = read_corpus([DEFAULT_CORPUS])[:1024]
    ours = WordPieceTokenizer.from_vocab(minilm_dir() / 'vocab.txt')
    ref = BertTokenizerFast(str(minilm_dir() / 'vocab.txt'))
    coll = DataCollatorForLanguageModeling(tokenizer=ref, mlm_probability=0.15)

    def hf():
        enc = ref(texts, padding=True, truncation=True, return_tensors='pt', return_special_tokens_mask=True)
        return enc, coll.torch_mask_tokens(enc['input_ids'], enc['special_tokens_mask'])
    rng = PCG32(0)
    def ours_batch(): return mlm_batch(ours, texts, 512, 0.15, rng)

    # the same batch shape and tokens first (at p = 0 nothing is masked)
    plain = mlm_batch(ours, texts, 512, 0.0, PCG32(0))
    enc = ref(texts, padding=True, truncation=True, return_tensors='pt')  # unmasked: the collator masks input_ids in place
    assert np.array_equal(plain['input_ids'], enc['input_ids'].numpy()) and np.array_equal(plain['attention_mask'], enc['attention_mask'].numpy())
    n_tokens = int(plain['attention_mask'].sum())
    t = interleaved({'mlm_batch (exact PCG32 masks)': ours_batch, 'BertTokenizerFast + collator': hf}, rounds=9)
    rates = {k: len(texts) / v for k, v in t.items()}
    print(f"  ({n_tokens:,} tokens in {len(texts)} sentences, padded to {plain['input_ids'].shape[1]})")
    return report('tokenize, pad and mask 1,024 KJV verses (MiniLM vocab)', 'sentences/s', rates,
                  {('mlm_batch (exact PCG32 masks)', 'BertTokenizerFast + collator'): 1.0})

if __name__ == '__main__':
    ok = main()
    save('batch')
    sys.exit(0 if ok else 1)
