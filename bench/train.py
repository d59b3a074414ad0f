"""A training step of BertForMLM against transformers' BertForMaskedLM (sdpa attention), weights loaded from the same
model: forward + loss + backward through `loss()` (the head only at labelled positions) and through `forward` (full
logits), inference, and the peak memory of a training step (each side in its own process)."""
import sys
import numpy as np
import torch
import transformers
from transformers import BertConfig as HFConfig, BertForMaskedLM
from bert_nb.bert import BertConfig, BertForMLM, load_hf_bert, mlm_mask
from bert_nb.rng import PCG32
from common import interleaved, report, peak_rss_mb, in_fresh_process, memory, save

V, D, L, H, FF, B, T, P = 8192, 256, 4, 4, 1024, 32, 128, 0.15

def models(seed=0):
    torch.manual_seed(seed)
    hf = BertForMaskedLM(HFConfig(vocab_size=V, hidden_size=D, num_hidden_layers=L, num_attention_heads=H, intermediate_size=FF,
                                  max_position_embeddings=T, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                  attn_implementation='sdpa')).train()
    ours = load_hf_bert(BertForMLM(BertConfig(V, max_len=T, d_model=D, n_heads=H, n_layers=L, d_ff=FF, dropout=0.0)), hf.state_dict()).train()
    return hf, ours

def batch(seed=0):
    g = np.random.default_rng(seed)
    ids = g.integers(5, V, (B, T)); ids[:, 0], ids[:, -1] = 2, 3
    inputs, labels = mlm_mask(ids, np.isin(ids, [0, 1, 2, 3, 4]), 4, V, P, PCG32(seed))
    return torch.from_numpy(inputs), torch.from_numpy(labels)

def steps(hf, ours, ids, labels):
    def hf_train():
        hf.zero_grad(set_to_none=True); hf(input_ids=ids, labels=labels).loss.backward()
    def ours_loss():
        ours.zero_grad(set_to_none=True); ours.loss(ids, None, None, labels).backward()
    def ours_forward():
        ours.zero_grad(set_to_none=True); ours(ids, labels=labels)[1].backward()
    return hf_train, ours_loss, ours_forward

def peak_mb(side: str) -> float:
    "Peak resident memory of three training steps of one side (the other is not kept alive)."
    hf, ours = models(); ids, labels = batch()
    if side == 'transformers': ours = None
    else: hf = None
    return peak_rss_mb(dict(zip(('transformers', 'loss()', 'forward()'), steps(hf, ours, ids, labels)))[side])

def main():
    transformers.logging.set_verbosity_error()
    hf, ours = models(); ids, labels = batch()
    with torch.no_grad():  # the same computation first
        l_hf, l_ours, l_fwd = hf(input_ids=ids, labels=labels).loss, ours.loss(ids, None, None, labels), ours(ids, labels=labels)[1]
    assert abs(l_hf - l_ours) < 1e-5 and abs(l_hf - l_fwd) < 1e-5, (l_hf, l_ours, l_fwd)
    hf_train, ours_loss, ours_forward = steps(hf, ours, ids, labels)
    def infer(model, f):  # inference as it is run: eval mode, autograd off (the steps above train)
        def g():
            model.eval()
            with torch.no_grad(): f()
            model.train()
        return g
    hf_infer, ours_infer = infer(hf, lambda: hf(input_ids=ids).logits), infer(ours, lambda: ours(ids)[0])
    for f in (hf_train, ours_loss, ours_forward, hf_infer, ours_infer): f()
    t = interleaved({'transformers train step': hf_train, 'ours loss() train step': ours_loss, 'ours forward() train step': ours_forward,
                     'transformers inference': hf_infer, 'ours inference': ours_infer}, rounds=8,
                    calls={'transformers inference': 3, 'ours inference': 3})
    rates = {k: B * T / v for k, v in t.items()}
    ok = report(f'BERT training step, V={V}, d={D}, {L} layers, {H} heads, d_ff={FF}, B={B}, T={T}, p={P}, losses equal to 1e-5', 'tokens/s', rates,
                {('ours loss() train step', 'transformers train step'): 1.6, ('ours forward() train step', 'transformers train step'): 1.0,
                 ('ours inference', 'transformers inference'): 1.0})
    mem = {side: in_fresh_process(peak_mb, side) for side in ('transformers', 'loss()', 'forward()')}
    memory('a training step', 'MB above the process before it', mem)
    for side in ('loss()', 'forward()'):
        r = mem[side] / mem['transformers']
        ok &= r <= 1.0
        print(f"  {side} step peak / transformers: {r:.2f} (target <= 1.0) {'ok' if r <= 1.0 else 'ABOVE TARGET'}")
    return ok

if __name__ == '__main__':
    ok = main()
    save('train')
    sys.exit(0 if ok else 1)
