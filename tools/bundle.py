"""The page of #59's script: ports/js's ES modules bundled into one classic script, with nothing but re (the tests
and the site's build both call it; a page opened from file:// may not load a module)."""
import re
from pathlib import Path

PORTS = Path(__file__).resolve().parents[1] / 'ports' / 'js'
PLAY = ['skew', 'wordpiece', 'mask', 'bert', 'modernbert', 'play']  # the page's modules, each after those it imports

def bundle(names: list[str] = PLAY) -> str:
    """ports/js's ES modules as one classic script: a page opened from file:// may not load a module. Each module keeps
    its own scope; its exports go into the global BertNb, where the modules after it find them; its command line
    (node only, from `if (globalThis.process` to the end) is left out."""
    out = ['"use strict";  // built by tools/bundle.py from ports/js: edit those, not this', 'globalThis.BertNb = {};']
    for name in names:
        src = (PORTS / f'{name}.mjs').read_text()
        src = src.split('\nif (globalThis.process?.argv')[0]
        src = re.sub(r"^import \{([^}]*)\} from '\./\w+\.mjs';$", r'const {\1} = BertNb;', src, flags=re.M)
        src = re.sub(r"^import .* from 'node:\w+';\n", '', src, flags=re.M)
        names_out = re.findall(r'^export (?:async )?(?:function|class|const) (\w+)', src, re.M)
        src = re.sub(r'^export ', '', src, flags=re.M)
        if 'import' in re.sub(r'//.*', '', src): raise ValueError(f'{name}.mjs: an import the bundle cannot take')
        out.append(f"{{  // ports/js/{name}.mjs\n{src}\nObject.assign(BertNb, {{ {', '.join(names_out)} }});\n}}")
    return '\n'.join(out) + '\n'
