"""Padded batches, as users have them: random verses of the bundled corpus padded to the longest in the batch.
Inference: all-MiniLM-L6-v2 in both, 64 verses (T <= 128), the last hidden state, against transformers' BertModel
(sdpa). Training: train.py's BertForMLM (V 8,192, d 256, 4 layers) on mlm_batch batches of 32 verses, loss() +
backward + AdamW step, against BertForMaskedLM (sdpa). Peak memory of each side in its own process."""
import sys
import numpy as np
import torch
import transformers
from transformers import BertModel
from bert_nb.bert import load_bert, mlm_batch
from bert_nb.pretrain import read_corpus, DEFAULT_CORPUS
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer
from common import minilm_dir, interleaved, report, peak_rss_mb, in_fresh_process, memory, save
from train import models

def verses(tok, n_batches: int, size: int, seed: int = 0) -> list[dict]:
    "Batches of `size` random verses, tokenized, padded to the batch's longest (at most 128), masked at p 0.15."
    lines, g = read_corpus([DEFAULT_CORPUS]), np.random.default_rng(seed)
    return [{k: torch.from_numpy(v) for k, v in
             mlm_batch(tok, [lines[i] for i in g.choice(len(lines), size, replace=False)], 128, 0.15,
                       PCG32(seed, b)).items()} for b in range(n_batches)]

def real_share(batches) -> float:
    return float(np.mean([b['attention_mask'].float().mean() for b in batches]))

def cycling(f, batches, sync):
    "A call of f on the next batch (round the list), then sync (a device's queue drained)."
    at = iter(range(10**9))
    def g():
        f(batches[next(at) % len(batches)]); sync()
    return g

def inference_sides(device='cpu'):
    "all-MiniLM-L6-v2 in transformers (sdpa) and in bert-nb: {name: batch -> last hidden state}."
    hf = BertModel.from_pretrained(minilm_dir(), attn_implementation='sdpa').to(device).eval()
    ours = load_bert(minilm_dir()).to(device).eval()
    return {'transformers BertModel (sdpa)': lambda b: hf(input_ids=b['input_ids'], token_type_ids=b['token_type_ids'],
                                                         attention_mask=b['attention_mask']).last_hidden_state,
            'ours BertEncoder': lambda b: ours(b['input_ids'], b['token_type_ids'], b['attention_mask'])}

def train_sides(batches, device='cpu'):
    "train.py's two models on `device`: {name: a training step (forward, loss, backward, AdamW) on the next batch}."
    hf, ours = (m.to(device) for m in models())
    opt_hf, opt_ours = (torch.optim.AdamW(m.parameters(), lr=1e-4) for m in (hf, ours))
    def hf_loss(b):
        return hf(input_ids=b['input_ids'], token_type_ids=b['token_type_ids'], attention_mask=b['attention_mask'],
                  labels=b['labels']).loss
    def ours_loss(b): return ours.loss(b['input_ids'], b['token_type_ids'], b['attention_mask'], b['labels'])
    with torch.no_grad():  # the same computation first
        for b in batches:
            a, o = hf_loss(b), ours_loss(b)
            assert abs(a - o) < 1e-5, (a, o)
    def step(loss, opt):
        def f(b):
            opt.zero_grad(set_to_none=True); loss(b).backward(); opt.step()
        return f
    return {'transformers BertForMaskedLM (sdpa)': step(hf_loss, opt_hf), 'ours loss() + backward + step': step(ours_loss, opt_ours)}

def inference(batches, device='cpu', sync=lambda: None, rounds=None) -> dict:
    "Real tokens per second of each side, after checking the last hidden states agree at every real position."
    sides = inference_sides(device)
    with torch.no_grad():
        for b in batches:
            (a, o), r = sides.values(), b['attention_mask'].bool()
            d = (a(b) - o(b))[r].abs().max().item()
            assert d < 1e-5, d
    return rates({k: torch.no_grad()(f) for k, f in sides.items()}, batches, sync, rounds)

def training(batches, device='cpu', sync=lambda: None, rounds=None) -> dict:
    return rates(train_sides(batches, device), batches, sync, rounds)

def rates(sides: dict, batches, sync, rounds) -> dict:
    "Real tokens per second of each side, cycling through the batches, interleaved."
    fns = {k: cycling(f, batches, sync) for k, f in sides.items()}
    for f in fns.values(): f(); f()  # warm up
    tokens = np.mean([int(b['attention_mask'].sum()) for b in batches])
    return {k: tokens / v for k, v in interleaved(fns, rounds or 3 * len(batches)).items()}

def peak_mb(case: str, side: int) -> float:
    "Peak resident memory of a few training steps, or of inference on a few batches, of side 0 (transformers) or 1."
    if case == 'training':
        batches = verses(WordPieceTokenizer.train(read_corpus([DEFAULT_CORPUS]), 8192), 4, 32)
        f = list(train_sides(batches).values())[side]
    else:
        batches = verses(WordPieceTokenizer.from_vocab(minilm_dir()), 4, 64)
        f = torch.no_grad()(list(inference_sides().values())[side])
    return peak_rss_mb(lambda: [f(b) for b in batches])

def main():
    transformers.logging.set_verbosity_error()
    mini = WordPieceTokenizer.from_vocab(minilm_dir())
    inf = verses(mini, 8, 64)
    print(f"  inference batches: 64 verses, T = {[b['input_ids'].shape[1] for b in inf]}, "
          f"{real_share(inf):.0%} real tokens")
    ok = report('padded inference: all-MiniLM-L6-v2, 64 random verses, last hidden state equal to 1e-5 at real '
                'positions', 'real tokens/s', inference(inf),
                {('ours BertEncoder', 'transformers BertModel (sdpa)'): 1.6})
    tok = WordPieceTokenizer.train(read_corpus([DEFAULT_CORPUS]), 8192)
    tr = verses(tok, 8, 32, seed=1)
    print(f"\n  training batches: 32 verses, T = {[b['input_ids'].shape[1] for b in tr]}, "
          f"{real_share(tr):.0%} real tokens")
    ok &= report('padded training step: V 8,192, d 256, 4 layers; losses equal to 1e-5', 'real tokens/s',
                 training(tr), {('ours loss() + backward + step', 'transformers BertForMaskedLM (sdpa)'): 2.5})
    for case in ('inference', 'training'):
        mem = {name: in_fresh_process(peak_mb, case, side) for side, name in enumerate(('transformers', 'ours'))}
        memory(f'padded {case}', 'MB above the process before it', mem)
    return ok

if __name__ == '__main__':
    ok = main()
    save('padded')
    sys.exit(0 if ok else 1)
