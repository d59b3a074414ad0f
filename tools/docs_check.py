"""Open every page of the built site in headless Chromium at 1280 x 900, with the network cut off, and fail on what a
reader would see broken: a formula MathJax could not typeset or left as raw TeX, an image that does not load, an
internal link to a page or anchor that does not exist, a code block wider than its column, a missing title, a script
error, a search box that finds nothing, any request for something outside the site, this machine's path on a page,
a warning, terminal escape codes or a temporary path in a cell's output, a copy button on an output, a figure without
alt text or caption or with text under 9 px as the page shows it, or, at a phone's 390 px, a page wider than the
screen or a figure that does not open full size. Saves a screenshot of the top of every page to _docs/screens/.
"""
import re, sys
from pathlib import Path
from urllib.parse import urldefrag, urlparse, unquote
from playwright.sync_api import sync_playwright
from nbrun import WARNING
from browser import chromium as find_chromium

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / '_docs'
ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync']

TYPESET = "() => new Promise(done => window.MathJax && MathJax.Hub ? MathJax.Hub.Queue(done) : done())"
INSPECT = """() => {
  const jax = window.MathJax && MathJax.Hub ? MathJax.Hub.getAllJax() : [];
  const err = n => !!n && (n.type === 'merror' || (n.data || []).some(err));  // a TeX error typesets as <merror>
  const bad = jax.filter(j => j.texError || err(j.root)).map(j => j.originalText)
    .concat([...document.querySelectorAll('.md-content .MathJax_Error, .md-content .MathJax span')]
      .filter(e => /Math Processing Error/.test(e.textContent) && !e.querySelector('span')).map(e => e.textContent));
  const walker = document.createTreeWalker(document.querySelector('.md-content'), NodeFilter.SHOW_TEXT);
  const raw = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest('pre, code, script, style, .MathJax_SVG, .MathJax_SVG_Display, .MathJax_Preview')) continue;
    if (/\\$|\\\\\\(|\\\\\\[/.test(n.textContent)) raw.push(n.textContent.trim().slice(0, 80));
  }
  const wide = [...document.querySelectorAll('.md-content pre > code')]
    .filter(c => c.scrollWidth > c.clientWidth + 1)
    .map(c => `${c.scrollWidth}px in ${c.clientWidth}px: ${c.textContent.split('\\n').sort((a, b) => b.length - a.length)[0].slice(0, 60)}`);
  const images = [...document.querySelectorAll('.md-content img')];
  const figures = images.map(i => ({src: i.getAttribute('src'), alt: i.getAttribute('alt') || '',
    caption: (i.closest('figure')?.querySelector('figcaption')?.textContent || '').trim(),
    text_px: parseFloat(i.dataset.textPx), shown: i.clientWidth, natural: i.naturalWidth,
    link: i.closest('a')?.getAttribute('href') || ''}));
  return {
    title: document.title.trim(), h1: !!document.querySelector('.md-content h1'),
    formulas: jax.length, bad, raw, wide,
    images: images.length, figures, broken: images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src')),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    text: document.querySelector('.md-content').innerText,
    outputs: [...document.querySelectorAll('.md-content .language-text code')].map(c => c.textContent),
    copyable: [...document.querySelectorAll('.md-content .language-text button')].filter(b => b.offsetParent).length,
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
  };
}"""

MIN_TEXT_PX = 9  # the smallest text a figure may show at 1280 px: the em of its smallest font, in CSS pixels
ANSI = re.compile(r'\x1b|\[[0-9;]{1,8}m')  # a terminal's colour codes: ESC, or what is left when ESC is dropped
TEMP = re.compile(r'(?:/tmp|/var/tmp|/var/folders|/private/var)/\S*|\btmp[a-z0-9_]{8}\b')  # tempfile's names

# what differs on every machine: Trainer's and tqdm's rates and runtimes
TIMING = re.compile(r'\b(?:train_runtime|\w+_per_second)\b|\d+(?:\.\d+)? ?(?:it/s|s/it)\b')

def output_problems(text: str) -> list[str]:
    "What a reader must not see in an output: a warning, escape codes, a temporary path, a machine's timings."
    found = [f'a warning in an output: {w}' for w in WARNING.findall(text)]
    found += [f'terminal escape codes in an output: {m.group()!r}' for m in ANSI.finditer(text)][:1]
    found += [f'a temporary path in an output: {m.group()}' for m in TEMP.finditer(text)][:1]
    found += [f'a timing of this machine in an output: {m.group()}' for m in TIMING.finditer(text)][:1]
    return found

def figure(f: dict, say):
    "A figure needs alt text that describes it, a caption, and text no smaller than MIN_TEXT_PX as the page shows it."
    name = f['src'].rsplit('/', 1)[-1]
    if not f['alt'] or f['alt'] in ('png', 'svg', 'jpeg'): say(f'{name}: no alt text (`#| fig-alt:` in its cell)')
    if not f['caption']: say(f'{name}: no caption (`#| fig-cap:` in its cell)')
    if f['text_px'] != f['text_px']: say(f'{name}: no text size stored with the image (drawn outside tools/figmeta.py)')
    elif f['natural'] and (px := f['text_px'] * f['shown'] / f['natural']) < MIN_TEXT_PX:
        say(f"{name}: text at {px:.1f} px (under {MIN_TEXT_PX}): the image is {f['natural']} px wide, shown at "
            f"{f['shown']} px, its smallest text {f['text_px']} px")

PHONE = dict(viewport={'width': 390, 'height': 844}, device_scale_factor=3, is_mobile=True, has_touch=True)
# How wide the page is laid out, and what in its content is wider than the screen (a table, an output, a formula that
# does not scroll inside its own box widens the whole page, and a phone then shows it shrunk or cut).
WIDTH = """() => {
  const screen = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll('.md-content *')].filter(e => {
    const r = e.getBoundingClientRect();
    return r.right > screen + 1 && !e.closest('pre, .md-typeset__scrollwrap, .MathJax_SVG_Display, .highlight');
  }).map(e => `<${e.tagName.toLowerCase()}> ${Math.round(e.getBoundingClientRect().right)} px`);
  return {screen, page: document.documentElement.scrollWidth, wide: wide.slice(0, 3)};
}"""

def on_phone(f: dict, say):
    """At 390 px a figure is shown too small to read: it must open a page that shows it at its own size (a bare PNG
    is fitted to the screen again), where its text is MIN_TEXT_PX or more."""
    name, px = f['src'].rsplit('/', 1)[-1], f['text_px'] * f['shown'] / f['natural'] if f['natural'] else 0
    if f['link'] != f['src'] + '.html':
        say(f'{name}: at 390 px its text is {px:.1f} px, and it is no link to the page that shows it at its own size')
    elif f['text_px'] < MIN_TEXT_PX: say(f"{name}: at its own size, its smallest text is {f['text_px']} px")

def check(site: Path = SITE) -> int:
    pages = sorted(p for p in site.glob('*.html') if p.name != '404.html')
    if not pages: raise SystemExit(f"no pages in {site}: run `make docs` first")
    chromium = find_chromium()
    if not chromium: raise SystemExit("no Chromium: `make chromium` gets one (the system's, Debian's or Playwright's)")
    shots = site / 'screens'; shots.mkdir(exist_ok=True)
    found, problems, outside = {}, [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=ARGS)
        ctx = browser.new_context(viewport={'width': 1280, 'height': 900})  # a laptop's screen
        ctx.route('**/*', lambda route: route.continue_() if route.request.url.startswith('file:')
                  else (outside.append(route.request.url), route.abort()))
        for p in pages:
            page, errors = ctx.new_page(), []
            page.on('pageerror', lambda e: errors.append(str(e)))
            page.goto(p.as_uri(), wait_until='load')
            page.evaluate(TYPESET)
            found[p] = r = page.evaluate(INSPECT)
            page.screenshot(path=str(shots / f'{p.stem}.png'))
            page.close()
            say = lambda what: problems.append(f'{p.name}: {what}')
            if not r['title'] or not r['h1']: say('no title or no top heading')
            for t in r['bad']: say(f'MathJax could not typeset {t!r}')
            for t in r['raw']: say(f'untypeset math delimiter in {t!r}')
            for t in r['wide']: say(f'code block wider than its column ({t})')
            for s in r['broken']: say(f'image does not load: {s}')
            for f in r['figures']: figure(f, say)
            if str(ROOT) in r['text']: say(f'the build machine\'s path {ROOT} is on the page')
            for o in r['outputs']:
                for what in output_problems(o): say(what)
            if r['copyable']: say(f"{r['copyable']} output block(s) with a copy button: outputs are not code to copy")
            for e in errors: say(f'script error: {e}')
        phone = browser.new_context(**PHONE)  # a phone's screen: every figure reachable at a readable size
        phone.route('**/*', lambda route: route.continue_() if route.request.url.startswith('file:')
                    else (outside.append(route.request.url), route.abort()))
        for p in pages:
            page = phone.new_page()
            page.goto(p.as_uri(), wait_until='load')
            figs, w = page.evaluate(INSPECT)['figures'], page.evaluate(WIDTH)
            if w['page'] > w['screen']:
                problems.append(f"{p.name}: at 390 px the page is {w['page']} px wide ({', '.join(w['wide'])})")
            if figs: page.locator('.md-content figure').first.screenshot(path=str(shots / f'phone-{p.stem}.png'))
            page.close()
            for f in figs: on_phone(f, lambda what: problems.append(f'{p.name}: {what}'))
        page = ctx.new_page()  # the search box, from file:// (the offline plugin's inlined index)
        page.goto((site / 'index.html').as_uri(), wait_until='load')
        page.fill('input.md-search__input', 'attention reach')
        try: page.wait_for_selector('.md-search-result__item', timeout=60_000)  # a hang's guard, not a speed test
        except Exception: problems.append("index.html: a search for 'attention reach' found nothing")
        browser.close()
    ids = {p.resolve(): set(r['ids']) for p, r in found.items()}
    n_links = 0
    for p, r in found.items():
        for href in r['links']:
            url, frag = urldefrag(href)
            if urlparse(url).scheme != 'file': continue
            n_links += 1
            target = Path(unquote(urlparse(url).path)).resolve()
            if not target.exists(): problems.append(f'{p.name}: link to a missing file {href}')
            elif frag and target in ids and unquote(frag) not in ids[target]:
                problems.append(f'{p.name}: link to a missing anchor {href}')
    for u in sorted(set(outside)): problems.append(f'a page asked the network for {u}')
    print(f"{len(pages)} pages, {sum(r['formulas'] - len(r['bad']) for r in found.values())} formulas typeset, "
          f"{sum(r['images'] for r in found.values())} images, {n_links} internal links checked; "
          f"screenshots in {shots}/")
    for line in problems: print('  ' + line)
    print(f'{len(problems)} problem(s)' if problems else 'no problems')
    return 1 if problems else 0

if __name__ == '__main__': sys.exit(check())
