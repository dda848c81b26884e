// MathJax 2 configuration, read by MathJax.js when it loads (this script is
// listed before it in mkdocs.yml). MathJax itself is served from the site
// (assets/mathjax/, copied at build time by docs/hooks/offline_math.py from
// the jupyter-server-mathjax package), so the pages typeset their equations
// without a network.
//
// Only what pymdownx.arithmatex marked as maths is typeset (the `arithmatex`
// spans and divs, whose delimiters are \( \) and \[ \]); the hook gives the
// tutorials' markdown cells the same spans. Dollar signs anywhere else stay
// dollar signs.
window.MathJax = {
  config: ["TeX-AMS-MML_HTMLorMML-full.js"],
  tex2jax: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: false,
    processEnvironments: false,
    ignoreClass: ".*|",
    processClass: "arithmatex",
  },
  MMLorHTML: { prefer: "HTML" },
  "HTML-CSS": {
    availableFonts: [],
    preferredFont: null,
    webFont: "STIX-Web",
    imageFont: null,
    linebreaks: { automatic: false },
  },
  messageStyle: "none",
  showMathMenu: false,
};
