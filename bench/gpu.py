"""The training step of train.py on an accelerator, in float32 and under bf16 autocast: transformers' BertForMaskedLM
(sdpa) against BertForMLM through `loss()` and through `forward()`, with each side's peak device memory; then
padded.py's padded batches (inference on all-MiniLM-L6-v2, and the padded training step).
`python gpu.py` on a CUDA machine; `python gpu.py --device cpu` runs the same script here (CPU autocast)."""
import argparse, sys
import torch
import transformers
from train import B, T, models, batch, steps
import padded
from common import interleaved, report

def main(device: str = 'cuda', rounds: int = 20) -> bool:
    transformers.logging.set_verbosity_error()
    dev = torch.device(device)
    cuda = dev.type == 'cuda'
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda: print(torch.cuda.get_device_name(dev))
    hf, ours = (m.to(dev) for m in models())
    ids, labels = (x.to(dev) for x in batch())
    ok = True
    for dtype in (None, torch.bfloat16):
        name = 'bf16 autocast' if dtype else 'float32'
        def under(f):
            def g():
                with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None): f()
                sync()
            return g
        with torch.no_grad(), torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):  # the same computation first
            l_hf, l_ours, l_fwd = hf(input_ids=ids, labels=labels).loss, ours.loss(ids, None, None, labels), ours(ids, labels=labels)[1]
        tol = 2e-2 if dtype else 1e-4  # bf16 rounds; float32 on a GPU may pick other kernels than the CPU
        assert abs(l_hf - l_ours) < tol and abs(l_hf - l_fwd) < tol, (name, l_hf, l_ours, l_fwd)
        fns = {k: under(f) for k, f in zip(('transformers train step', 'ours loss() train step', 'ours forward() train step'),
                                            steps(hf, ours, ids, labels))}
        for f in fns.values(): f(); f()  # warm up: kernels chosen, allocator pools filled
        rates = {k: B * T / v for k, v in interleaved(fns, rounds).items()}
        ok &= report(f'{name} training step on {dev.type}, B={B}, T={T}, losses equal to {tol:g}', 'tokens/s', rates,
                     {('ours loss() train step', 'transformers train step'): 1.6, ('ours forward() train step', 'transformers train step'): 1.0})
        if cuda:
            peak = {}
            for k, f in fns.items():
                torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats(dev)
                f()
                peak[k] = torch.cuda.max_memory_allocated(dev) / 2**20
            print('  peak device memory of a step (MB, both models resident): ' + ', '.join(f'{k} {v:.0f}' for k, v in peak.items()))
    ok &= padded_cases(dev, sync, rounds)
    return ok

def padded_cases(dev, sync, rounds: int) -> bool:
    "padded.py's two cases on `dev`, float32: real tokens per second, ours against transformers."
    from bert_nb.pretrain import read_corpus, DEFAULT_CORPUS
    from bert_nb.wordpiece import WordPieceTokenizer
    on = lambda bs: [{k: v.to(dev) for k, v in b.items()} for b in bs]
    inf = on(padded.verses(WordPieceTokenizer.from_vocab(padded.minilm_dir()), 8, 64))
    ok = report(f'padded inference on {dev.type}: MiniLM, 64 verses', 'real tokens/s', padded.inference(inf, dev, sync, rounds),
                {('ours BertEncoder', 'transformers BertModel (sdpa)'): 1.6})
    tr = on(padded.verses(WordPieceTokenizer.train(read_corpus([DEFAULT_CORPUS]), 8192), 8, 32, seed=1))
    ok &= report(f'padded training step on {dev.type}: V 8,192, d 256, 4 layers, 32 verses', 'real tokens/s',
                 padded.training(tr, dev, sync, rounds), {('ours loss() + backward + step', 'transformers BertForMaskedLM (sdpa)'): 2.5})
    return ok

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--device', default='cuda')
    ap.add_argument('--rounds', type=int, default=20)
    a = ap.parse_args()
    sys.exit(0 if main(a.device, a.rounds) else 1)
