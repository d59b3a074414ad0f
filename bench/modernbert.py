"""Chapter 06's ModernBERT against transformers' (sdpa), the same weights in one process, timed in alternation.

Padded batches (random verses, as bench/padded.py has them): inference of a 6-layer model of MiniLM's width (d 384,
12 heads) on 64 verses, and a training step (loss + backward + AdamW) of a V 8,192, d 256, 4-layer MLM model on 32
verses masked at 30%. Long rows: the 6-layer model on one row of T = 512, 2,048 and 8,192 tokens: the whole forward,
and the time per token of one global and one local layer; peak memory of each side's whole forward at the longest T
in a process of its own. Writes bench/modernbert.json, which chapter 06 reads.

    python bench/modernbert.py            # about 5 minutes on 2 cores
"""
import json, sys
from pathlib import Path
import numpy as np
import torch
import transformers
from transformers import ModernBertConfig as HFConfig, ModernBertForMaskedLM, ModernBertModel
from transformers.masking_utils import create_bidirectional_mask, create_bidirectional_sliding_window_mask
from bert_nb.modernbert import ModernBertConfig, ModernBertEncoder, ModernBertForMLM, layout
from bert_nb.modernbert_files import hf_config, hf_state_dict
from bert_nb.pretrain import read_corpus, DEFAULT_CORPUS
from bert_nb.rng import PCG32
from bert_nb.wordpiece import WordPieceTokenizer
from common import minilm_dir, interleaved, report, in_fresh_process, provenance
from padded import cycling, real_share
from bert_nb.bert import mlm_batch

SAVED = Path(__file__).with_name('modernbert.json')
WIDE = dict(d_model=384, n_heads=12, n_layers=6, d_ff=576)  # MiniLM's width and depth; d_ff 1.5 d, as ModernBERT's
SMALL = dict(d_model=256, n_heads=4, n_layers=4, d_ff=384)  # bench/train.py's BERT, in ModernBERT's proportions

def pair(cfg: ModernBertConfig, mlm: bool, seed: int = 0):
    "(transformers' model, ours) with the same weights, in train mode."
    torch.manual_seed(seed)
    ours = (ModernBertForMLM if mlm else ModernBertEncoder)(cfg, PCG32(seed)).train()
    hf = (ModernBertForMaskedLM if mlm else ModernBertModel)(HFConfig(
        **hf_config(cfg), cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3,
        attn_implementation='sdpa')).train()
    missing, unexpected = hf.load_state_dict(hf_state_dict(ours), strict=False)
    assert set(missing) <= {'decoder.weight'} and not unexpected, (missing, unexpected)  # the tied table only
    return hf, ours

def verses(tok, n_batches: int, size: int, p: float, seed: int = 0) -> list[dict]:
    lines, g = read_corpus([DEFAULT_CORPUS]), np.random.default_rng(seed)
    return [{k: torch.from_numpy(v) for k, v in
             mlm_batch(tok, [lines[i] for i in g.choice(len(lines), size, replace=False)], 128, p,
                       PCG32(seed, b)).items()} for b in range(n_batches)]

def rates(sides: dict, batches, rounds: int) -> dict:
    fns = {k: cycling(f, batches, lambda: None) for k, f in sides.items()}
    for f in fns.values(): f(); f()
    tokens = np.mean([int(b['attention_mask'].sum()) for b in batches])
    return {k: tokens / v for k, v in interleaved(fns, rounds).items()}

def inference_sides(vocab: int):
    hf, ours = (m.eval() for m in pair(ModernBertConfig(vocab, **WIDE), mlm=False))
    return {'transformers ModernBertModel (sdpa)': lambda b: hf(input_ids=b['input_ids'],
                                                                attention_mask=b['attention_mask']).last_hidden_state,
            'ours ModernBertEncoder': lambda b: ours(b['input_ids'], b['attention_mask'])}

def train_sides(vocab: int, batches):
    hf, ours = pair(ModernBertConfig(vocab, **SMALL), mlm=True)
    def hf_loss(b): return hf(input_ids=b['input_ids'], attention_mask=b['attention_mask'], labels=b['labels']).loss
    def ours_loss(b): return ours.loss(b['input_ids'], b['attention_mask'], b['labels'])
    with torch.no_grad():
        for b in batches: assert abs(hf_loss(b) - ours_loss(b)) < 1e-5
    def step(loss, opt):
        def f(b): opt.zero_grad(set_to_none=True); loss(b).backward(); opt.step()
        return f
    return {'transformers ModernBertForMaskedLM (sdpa)': step(hf_loss, torch.optim.AdamW(hf.parameters(), 1e-4)),
            'ours loss() + backward + step': step(ours_loss, torch.optim.AdamW(ours.parameters(), 1e-4))}

def layer_sides(hf, ours, T: int) -> dict:
    "One global layer (0) and one local layer (1) of each side on a row of T tokens: {name: call}."
    ids = torch.randint(5, ours.config.vocab, (1, T), generator=torch.Generator().manual_seed(T))
    h = hf.embeddings(input_ids=ids)
    kw = dict(config=hf.config, inputs_embeds=h, attention_mask=None)
    masks = {'full_attention': create_bidirectional_mask(**kw),
             'sliding_attention': create_bidirectional_sliding_window_mask(**kw)}
    pos = {t: hf.rotary_emb(h, torch.arange(T)[None], t) for t in masks}
    b = layout(ours.config, ids, None, torch.float32)
    x = h[0]
    def theirs(i):
        l = hf.layers[i]
        return lambda: l(h, attention_mask=masks[l.attention_type], position_embeddings=pos[l.attention_type])
    def mine(i): return lambda: ours.layers[i](x, b)
    return {'transformers global': theirs(0), 'ours global': mine(0), 'transformers local': theirs(1),
            'ours local': mine(1)}

def long_rows(Ts=(512, 2048, 8192)) -> dict:
    hf, ours = (m.eval() for m in pair(ModernBertConfig(30522, **WIDE), mlm=False))
    out = {}
    with torch.no_grad():
        for T in Ts:
            ids = torch.randint(5, 30522, (1, T), generator=torch.Generator().manual_seed(T))
            a, o = hf(input_ids=ids).last_hidden_state, ours(ids)
            assert (a - o).abs().max() < 1e-3, (T, (a - o).abs().max())  # float32 rotary in theirs at T = 8,192
            rounds = 3 if T >= 8192 else 5
            whole = interleaved({'transformers': lambda: hf(input_ids=ids), 'ours': lambda: ours(ids)}, rounds)
            layers = interleaved(layer_sides(hf, ours, T), rounds)
            out[T] = {'forward s': whole, 'layer us/token': {k: v / T * 1e6 for k, v in layers.items()}}
            print(f"  T = {T:>5}: forward {whole['transformers']:.3f} s theirs, {whole['ours']:.3f} s ours "
                  f"({whole['transformers'] / whole['ours']:.2f}x); us/token "
                  + ', '.join(f'{k} {v / T * 1e6:.1f}' for k, v in layers.items()), flush=True)
    return out

def peak_long(side: int, T: int) -> float:
    "Peak resident memory of side 0's (transformers') or 1's first forward at T, above the process with its model."
    hf, ours = (m.eval() for m in pair(ModernBertConfig(30522, **WIDE), mlm=False))
    ids = torch.randint(5, 30522, (1, T))
    f = (lambda: hf(input_ids=ids)) if side == 0 else (lambda: ours(ids))
    if side == 0: ours = None
    else: hf = None
    rss = lambda field: next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith(field)) / 1024
    base = rss('VmRSS:')
    open('/proc/self/clear_refs', 'w').write('5')  # the high-water mark from here
    with torch.no_grad(): f()
    return rss('VmHWM:') - base

def main():
    transformers.logging.set_verbosity_error()
    result = provenance()
    mini = WordPieceTokenizer.from_vocab(minilm_dir())
    inf = verses(mini, 8, 64, 0.0)
    print(f"  inference batches: 64 verses, T = {[b['input_ids'].shape[1] for b in inf]}, "
          f"{real_share(inf):.0%} real tokens")
    with torch.no_grad():
        inf_rates = rates(inference_sides(len(mini)), inf, 24)
    ok = report('padded inference: 6 layers, d 384', 'real tokens/s', inf_rates,
                {('ours ModernBertEncoder', 'transformers ModernBertModel (sdpa)'): 1.6})
    tok = WordPieceTokenizer.train(read_corpus([DEFAULT_CORPUS]), 8192)
    tr = verses(tok, 8, 32, 0.3, seed=1)
    print(f"\n  training batches: 32 verses, T = {[b['input_ids'].shape[1] for b in tr]}, "
          f"{real_share(tr):.0%} real tokens")
    tr_rates = rates(train_sides(len(tok), tr), tr, 24)
    ok &= report('padded training step: V 8,192, d 256, 4 layers, p 0.3', 'real tokens/s', tr_rates,
                 {('ours loss() + backward + step', 'transformers ModernBertForMaskedLM (sdpa)'): 2.5})
    result |= {'padded': {'inference': inf_rates, 'training': tr_rates, 'real share': {
        'inference': real_share(inf), 'training': real_share(tr)}}}
    print('\nlong rows: 6 layers, d 384, one row; whole forward, and one layer of each kind')
    result['long'] = long_rows()
    T = max(result['long'])
    mem = {name: in_fresh_process(peak_long, side, T) for side, name in enumerate(('transformers', 'ours'))}
    print(f"  peak memory of the forward at T = {T} (MB above the process before it): "
          + ', '.join(f'{k} {v:.0f}' for k, v in mem.items()))
    result['long'][T]['peak MB'] = mem
    speedup = result['long'][T]['forward s']['transformers'] / result['long'][T]['forward s']['ours']
    print(f"  whole forward at T = {T}: {speedup:.2f}x (target >= 4x) {'ok' if speedup >= 4 else 'BELOW TARGET'}")
    SAVED.write_text(json.dumps(result, indent=1) + '\n')
    return ok and speedup >= 4

if __name__ == '__main__': sys.exit(0 if main() else 1)
