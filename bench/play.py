"""The page of #59 in headless Chromium (2 threads of this machine, the network cut off): how soon it can be used
after it opens, and how long the chapter's BERT in JavaScript takes on a 32-token verse, against PyTorch's float32
forward of the same row in the same run. A feel for "live", not a test: nothing here is asserted.

  ready        from opening the page to its first answers shown (the shipped model decoded, read, run once)
  fill         a forward of 32 tokens, the head and decoder at the one [MASK] only: what a keystroke costs
  all          a forward of 32 tokens decoding every position
  reach        13's attention reach of 16 tokens from 4 random directions a token

Writes bench/play.json. Needs the built site (`make docs`, or `python tools/site.py --no-execute`) and chromium.
"""
import json, statistics, sys, time, warnings
from pathlib import Path
import torch
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bert_nb import KJV, WordPieceTokenizer, kjv_verses, load_bert
from common import provenance
sys.path.insert(0, str(ROOT / 'tools'))
from browser import chromium

def main(reps: int = 20):
    tok = WordPieceTokenizer.from_vocab(KJV)
    ids = next(i for i in (tok.encode(v.text) for v in kjv_verses()[-200:]) if len(i) >= 32)[:31] + [tok.sep_id]
    ids[5] = tok.mask_id
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = load_bert(KJV).eval()
    torch.set_num_threads(2)
    with torch.no_grad():
        x = torch.tensor([ids]); model(x)
        ts = []
        for _ in range(reps): t = time.perf_counter(); model(x); ts.append(1000 * (time.perf_counter() - t))
    torch_ms = statistics.median(ts)
    exe = chromium()  # before this process's own Playwright starts: chromium() starts one to ask
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=['--no-sandbox', '--disable-gpu'])
        page = browser.new_page()
        page.route('**/*', lambda r: r.continue_() if r.request.url.startswith('file:') else r.abort())
        t = time.perf_counter()
        page.goto((ROOT / '_docs' / 'play.html').as_uri(), wait_until='commit')  # then its answers, not its load
        page.wait_for_function("document.getElementById('play-fill')?.textContent.includes('[MASK] 1')")
        ready = time.perf_counter() - t
        ms = page.evaluate("""([ids, reps]) => {
          const m = BertNb.page.m.model, time = (f) => { const ts = [];
            for (let r = 0; r < reps; r++) { const t = performance.now(); f(); ts.push(performance.now() - t); }
            return ts.sort((a, b) => a - b)[reps >> 1]; };
          return { fill: time(() => m.forward(ids, [5])), all: time(() => m.forward(ids)),
                   reach: time(() => m.reach(ids.slice(0, 16), 4)) };
        }""", [ids, reps])
        browser.close()
    out = provenance() | {
           'ready_s': round(ready, 3), **{f'{k}_ms': round(v, 1) for k, v in ms.items()},
           'pytorch_ms': round(torch_ms, 2), 'tokens': len(ids)}
    print(f"page usable after {ready:.2f} s (target: within 2 s)")
    print(f"forward of {len(ids)} tokens in Chromium: {ms['fill']:.1f} ms at one [MASK] (target: well under 100 ms), "
          f"{ms['all']:.1f} ms decoding every position; PyTorch float32, 2 threads: {torch_ms:.2f} ms "
          f"(the page takes {ms['fill'] / torch_ms:.0f}x)")
    print(f"attention reach of 16 tokens, 4 directions a token: {ms['reach']:.0f} ms")
    (Path(__file__).parent / 'play.json').write_text(json.dumps(out, indent=1) + '\n')

if __name__ == '__main__': main()
