// MathJax 2 configuration, read by MathJax.js when it loads (this script is
// listed before it in mkdocs.yml). MathJax itself is served from the site
// (assets/mathjax/, copied at build time by docs/hooks/offline_math.py), so
// the pages typeset their equations without a network.
//
// Only what pymdownx.arithmatex marked as maths is typeset (the
// `arithmatex` spans and divs, whose delimiters are \( \) and \[ \]); the
// hook gives the tutorials' markdown cells the same spans. Dollar signs
// anywhere else stay dollar signs.
window.MathJax = {
  jax: ["input/TeX", "output/SVG"],
  extensions: ["tex2jax.js"],
  TeX: { extensions: ["AMSmath.js", "AMSsymbols.js"] },
  tex2jax: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: false,
    processEnvironments: false,
    ignoreClass: ".*|",
    processClass: "arithmatex",
  },
  SVG: { font: "TeX", linebreaks: { automatic: false } },
  messageStyle: "none",
  showMathMenu: false,
};
