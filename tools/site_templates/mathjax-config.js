// MathJax 2.7 from this site (PyPI's jupyter-server-mathjax): TeX in \( \) and \[ \] (pymdownx.arithmatex),
// typeset with the STIX-Web fonts that ship beside it, so a page loads nothing from anywhere else
window.MathJax = {
  tex2jax: {inlineMath: [['\\(', '\\)']], displayMath: [['\\[', '\\]']], processEscapes: true},
  'HTML-CSS': {availableFonts: ['STIX-Web'], preferredFont: 'STIX-Web', webFont: 'STIX-Web', imageFont: null},
  messageStyle: 'none'
};
