"""Chapter 04's two pilots, the runs its design rests on, kept as figures.

`--sweep`: fresh ELECTRA pairs of 2 layers trained for a minute or two each, one setting changed at a time from
bench/electra.py's (vocabulary 8,192, rows of 32, masking 30%, λ 50, 300 steps): a smaller vocabulary (2,048, trained
by the chapter's WordPiece trainer on the same corpus), rows of 64, masking 15% and 40%, λ 10, and 600 steps. For each,
the share of replaced tokens the discriminator calls over the last 20 steps (and of original tokens it keeps): the
question was whether any setting lets a fresh discriminator learn within a minute or two.

`--mask15`: bench/electra.py's seed-0 run (2,000 steps) with the generator masking 15%: where its generator ends and
whether the discriminator tells replaced tokens from originals (its mean probability of 'replaced' on each, over the
last 20 steps' batches), against the 30% the experiment uses.

    python bench/electra_pilots.py --sweep --mask15     # writes bench/electra_pilots.json (about 25 minutes)
"""
import argparse, json, time, warnings
from pathlib import Path
import numpy as np
import torch
from bert_nb import KJV, BertConfig, PCG32, WordPieceTokenizer, kjv_verses, mlm_mask, special_ids
from bert_nb.pretrain import INIT, ORDER, Batches, lr_factor, make_optimizer, pack_rows, sinusoid_positions
from bert_nb.electra import Electra, SHARES, electra_loss
from common import provenance

SAVED = Path(__file__).with_name('electra_pilots.json')
BASE = dict(vocab=8192, T=32, p=0.3, lam=50.0, steps=300)  # bench/electra.py's settings, a short run
SWEEP = {'base': {}, 'vocab 2048': dict(vocab=2048), 'rows of 64': dict(T=64), 'masking 15%': dict(p=0.15),
         'masking 40%': dict(p=0.4), 'λ 10': dict(lam=10.0), '600 steps': dict(steps=600)}

def rows_of(vocab: int, T: int) -> tuple[np.ndarray, WordPieceTokenizer]:
    texts = [v.text for v in kjv_verses()]
    tok = WordPieceTokenizer.from_vocab(KJV) if vocab == 8192 else WordPieceTokenizer.train(texts, vocab)
    return pack_rows(tok, texts, T)[0], tok

def pilot(vocab: int, T: int, p: float, lam: float, steps: int, seed: int = 0, B: int = 64) -> dict:
    """One pair from fresh weights, as bench/electra.py trains it; the last 20 steps' shares and the discriminator's
    mean probability of 'replaced' on replaced and on original tokens."""
    rows, tok = rows_of(vocab, T)
    cfg = BertConfig(len(tok), max_len=T, d_model=128, n_heads=2, n_layers=2, d_ff=512, dropout=0.0)
    model = Electra(cfg, gen_layers=1, gen_ff=256, rng=PCG32(seed, INIT))
    sinusoid_positions(model.gen.encoder, 0.1)
    opt, rng, special = make_optimizer(model, 2e-3), PCG32(seed, 0), np.array(special_ids(tok))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, steps, max(1, round(0.05 * steps))))
    batches, last, t = Batches(len(rows), B, PCG32(seed, ORDER)), [], time.perf_counter()
    for step in range(steps):
        ids = rows[batches.next()]
        inputs, labels = mlm_mask(ids, np.isin(ids, special), tok.mask_id, len(tok), p, rng, shares=SHARES)
        labels, real = torch.from_numpy(labels), torch.from_numpy(ids != tok.pad_id)
        out = electra_loss(model, torch.from_numpy(inputs), labels, real, rng, lam=lam)
        opt.zero_grad(set_to_none=True); out.loss.backward(); opt.step(); sched.step()
        if step >= steps - 20:
            with torch.no_grad():
                prob, fake, kept = out.logits.sigmoid(), out.replaced & real, ~out.replaced & real
                gen = (out.gen_logits.argmax(-1) == labels[labels != -100]).float().mean().item()
                last.append([((prob > 0.5) & fake).sum().item() / max(1, fake.sum().item()),
                             ((prob <= 0.5) & kept).sum().item() / max(1, kept.sum().item()),
                             prob[fake].mean().item(), prob[kept].mean().item(), gen])
    called, kept, p_fake, p_kept, gen = np.mean(last, 0).tolist()
    return dict(vocab=vocab, T=T, p=p, lam=lam, steps=steps, seed=seed, called=called, kept=kept,
                p_replaced=p_fake, p_original=p_kept, gen_acc=gen, seconds=round(time.perf_counter() - t, 1))

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--sweep', action='store_true')
    ap.add_argument('--mask15', action='store_true')
    a = ap.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter('ignore')
    runs = json.loads(SAVED.read_text())['runs'] if SAVED.exists() else []
    todo = ([('sweep', k, BASE | v) for k, v in SWEEP.items()] if a.sweep else []) + \
           ([('mask15', k, BASE | dict(p=p, steps=2000)) for k, p in (('15%', 0.15), ('30%', 0.3))] if a.mask15 else [])
    for part, name, kw in todo:
        r = dict(part=part, name=name) | pilot(**kw) | provenance()
        runs = [x for x in runs if (x['part'], x['name']) != (part, name)] + [r]
        print(f"{part} {name}: calls {r['called']:.1%} of the replaced, keeps {r['kept']:.1%} of the originals; "
              f"p(replaced) {r['p_replaced']:.3f} on replaced, {r['p_original']:.3f} on originals; generator "
              f"{r['gen_acc']:.1%}; {r['seconds']:.0f} s", flush=True)
        SAVED.write_text(json.dumps(dict(runs=runs), indent=1) + '\n')
