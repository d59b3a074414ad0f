"""Figures that say how small their text is: a PNG formatter for matplotlib figures, installed in the kernel that runs
a notebook for the site (tools/nbrun.py), that stores beside each image the pixel size of the smallest text drawn in
it. `make docs-check` scales that by how wide the page shows the image and fails a figure whose text is under 9 px.
"""
from matplotlib.text import Text

def png(fig):
    "The figure as the inline backend draws it, with {'text_px': the smallest font's em in image pixels, 'text': it}."
    from IPython.core.pylabtools import print_figure
    drawn, draw = [], Text.draw
    def record(self, renderer):  # every text actually drawn: tick labels outside the axes' limits are not
        if self.get_visible() and self.get_text().strip(): drawn.append((self.get_fontsize(), self.get_text()))
        return draw(self, renderer)
    Text.draw = record
    try: data = print_figure(fig, 'png', base64=True)
    finally: Text.draw = draw
    if data is None: return None
    pt, text = min(drawn, default=(None, ''))
    return data, {} if pt is None else {'text_px': round(pt * fig.dpi / 72, 2), 'text': text[:40]}

def install(shell=None):
    "Replace the inline backend's PNG formatter for figures in `shell` (the running IPython by default)."
    import matplotlib_inline.backend_inline  # noqa: F401  loading it registers its own formatter: do that first
    from matplotlib.figure import Figure
    from IPython import get_ipython
    (shell or get_ipython()).display_formatter.formatters['image/png'].for_type(Figure, png)
