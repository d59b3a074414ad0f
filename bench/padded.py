"""Padded batches, as users have them: random verses of the bundled corpus padded to the longest in the batch.
Inference: all-MiniLM-L6-v2 in both, 64 verses (T <= 128), the last hidden state, against transformers' BertModel
(sdpa). Training: train.py's BertForMLM (V 8,192, d 256, 4 layers) on mlm_batch batches of 32 verses, loss() +
backward + AdamW step, against BertForMaskedLM (sdpa). Peak memory of each side in its own process."""
import multiprocessing as mp, sys
import numpy as np
import torch
import transformers
from transformers import BertModel
from bert_nb.bert import load_bert, mlm_batch
from bert_nb.pretrain import read_corpus, DEFAULT_CORPUS
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer
from common import minilm_dir, interleaved, report
from train import models

def verses(tok, n_batches: int, size: int, seed: int = 0) -> list[dict]:
    "Batches of `size` random verses, tokenized, padded to the batch's longest (at most 128), masked at p 0.15."
    lines, g = read_corpus([DEFAULT_CORPUS]), np.random.default_rng(seed)
    return [{k: torch.from_numpy(v) for k, v in
             mlm_batch(tok, [lines[i] for i in g.choice(len(lines), size, replace=False)], 128, 0.15,
                       PCG32(seed, b)).items()} for b in range(n_batches)]

def real_share(batches) -> float:
    return float(np.mean([b['attention_mask'].float().mean() for b in batches]))

def inference(batches):
    hf = BertModel.from_pretrained(minilm_dir(), attn_implementation='sdpa').eval()
    ours = load_bert(minilm_dir()).eval()
    def run(f):
        it = iter(range(10**9))
        def g():
            b = batches[next(it) % len(batches)]
            with torch.no_grad(): f(b['input_ids'], b['token_type_ids'], b['attention_mask'])
        return g
    hf_f = lambda i, t, m: hf(input_ids=i, token_type_ids=t, attention_mask=m).last_hidden_state
    ours_f = lambda i, t, m: ours(i, t, m)
    with torch.no_grad():  # the same computation first, at every real position
        for b in batches:
            i, t, m = b['input_ids'], b['token_type_ids'], b['attention_mask']
            d = (hf_f(i, t, m) - ours_f(i, t, m))[m.bool()].abs().max().item()
            assert d < 1e-5, d
    fns = {'transformers BertModel (sdpa)': run(hf_f), 'ours BertEncoder': run(ours_f)}
    for f in fns.values(): f()
    t = interleaved(fns, rounds=3 * len(batches))
    tokens = np.mean([int(b['attention_mask'].sum()) for b in batches])
    return {k: tokens / v for k, v in t.items()}

def train_sides(batches, device='cpu'):
    hf, ours = (m.to(device) for m in models())
    opt_hf, opt_ours = (torch.optim.AdamW(m.parameters(), lr=1e-4) for m in (hf, ours))
    it = {'hf': 0, 'ours': 0}
    def hf_step():
        b = batches[it['hf'] % len(batches)]; it['hf'] += 1
        opt_hf.zero_grad(set_to_none=True)
        hf(input_ids=b['input_ids'], token_type_ids=b['token_type_ids'], attention_mask=b['attention_mask'],
           labels=b['labels']).loss.backward()
        opt_hf.step()
    def ours_step():
        b = batches[it['ours'] % len(batches)]; it['ours'] += 1
        opt_ours.zero_grad(set_to_none=True)
        ours.loss(b['input_ids'], b['token_type_ids'], b['attention_mask'], b['labels']).backward()
        opt_ours.step()
    return hf, ours, hf_step, ours_step

def training(batches):
    hf, ours, hf_step, ours_step = train_sides(batches)
    with torch.no_grad():
        for b in batches:
            a = hf(input_ids=b['input_ids'], token_type_ids=b['token_type_ids'], attention_mask=b['attention_mask'],
                   labels=b['labels']).loss
            o = ours.loss(b['input_ids'], b['token_type_ids'], b['attention_mask'], b['labels'])
            assert abs(a - o) < 1e-5, (a, o)
    fns = {'transformers BertForMaskedLM (sdpa)': hf_step, 'ours loss() + backward + step': ours_step}
    for f in fns.values(): f()
    t = interleaved(fns, rounds=3 * len(batches))
    tokens = np.mean([int(b['attention_mask'].sum()) for b in batches])
    return {k: tokens / v for k, v in t.items()}

def peak_mb(case: str, side: str, q):
    "Peak resident memory of a few calls (training steps, or inference batches), above the process before them."
    if case == 'training':
        _, _, hf_step, ours_step = train_sides(verses(WordPieceTokenizer.train(read_corpus([DEFAULT_CORPUS]), 8192), 4, 32))
        f = hf_step if side == 'transformers' else ours_step
    else:
        batches = verses(WordPieceTokenizer.from_vocab(minilm_dir()), 4, 64)
        m = BertModel.from_pretrained(minilm_dir(), attn_implementation='sdpa') if side == 'transformers' else load_bert(minilm_dir())
        call = (lambda b: m(input_ids=b['input_ids'], token_type_ids=b['token_type_ids'], attention_mask=b['attention_mask'])) \
            if side == 'transformers' else (lambda b: m(b['input_ids'], b['token_type_ids'], b['attention_mask']))
        def f():
            with torch.no_grad():
                for b in batches: call(b)
        m.eval()
    f()
    rss = lambda field: next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith(field)) / 1024
    base = rss('VmRSS:')
    open('/proc/self/clear_refs', 'w').write('5')
    for _ in range(3): f()
    q.put(rss('VmHWM:') - base)

def measure_peak(case, side):
    ctx = mp.get_context('spawn'); q = ctx.Queue()
    p = ctx.Process(target=peak_mb, args=(case, side, q)); p.start(); p.join()
    return q.get()

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
        mem = {side: measure_peak(case, side) for side in ('transformers', 'ours')}
        print(f'  peak memory, {case} (MB above the process before it): '
              + ', '.join(f'{k} {v:.0f}' for k, v in mem.items()))
    return ok

if __name__ == '__main__': sys.exit(0 if main() else 1)
