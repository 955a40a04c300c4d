/*
 * Loaded on pages with widgets, between require.js and the ipywidgets html-manager (embed-amd.js);
 * _config.yml lists it in nb_ipywidgets_js. Two fixes for the offline book:
 *
 * 1. The AMD modules that embed-amd.js defines (@jupyter-widgets/base, controls, html-manager and
 *    html-manager/dist/libembed-amd) find their icon fonts next to their module URL, which require.js puts
 *    beside the page (book/figures/@jupyter-widgets/...: 404). Map them into _static/html-manager/, where
 *    scripts/vendor_js.sh copies those fonts. Nothing is fetched from these paths: the modules are defined inline.
 *
 * 2. The html-manager typesets widget labels with MathJax 2's API, MathJax.Hub.Queue(["Typeset", MathJax.Hub, el]);
 *    the book vendors MathJax 3, which has no Hub. Give whatever window.MathJax currently is (the v3 configuration
 *    object, then MathJax 3 itself once it loads) a Hub whose Queue forwards to MathJax 3's typesetPromise.
 */
(function () {
  "use strict";
  var here = document.currentScript && document.currentScript.src;
  var staticDir = here ? here.slice(0, here.lastIndexOf("/") + 1) : null;
  if (window.requirejs && staticDir) {
    var manager = staticDir + "html-manager/";
    window.requirejs.config({
      paths: {
        "@jupyter-widgets/base": manager + "base",
        "@jupyter-widgets/controls": manager + "controls",
        "@jupyter-widgets/html-manager": manager + "html-manager",
        "@jupyter-widgets/html-manager/dist": manager.slice(0, -1),
      },
    });
  }

  // Run fn(MathJax) after MathJax 3's start-up typeset (and any typesetting queued before); if MathJax 3 is not
  // loaded yet, try again once the page has loaded. A page without MathJax 3 has nothing to typeset with.
  function withMathJax3(fn) {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise && mj.typesetPromise) {
      mj.startup.promise = mj.startup.promise.then(function () { return fn(mj); }).catch(function (err) {
        console.warn("MathJax typesetting of a widget failed:", err);
      });
    } else if (document.readyState !== "complete") {
      window.addEventListener("load", function () { withMathJax3(fn); }, { once: true });
    }
  }

  var hub = {
    // MathJax 2 queue entries look like ["Typeset", MathJax.Hub, element]; other commands are ignored.
    Queue: function () {
      var elements = [];
      Array.prototype.forEach.call(arguments, function (job) {
        if (Array.isArray(job) && job[0] === "Typeset" && job[2]) elements.push(job[2]);
      });
      if (elements.length) withMathJax3(function (mj) { return mj.typesetPromise(elements); });
    },
  };

  function addHub(mathjax) {
    if (mathjax && typeof mathjax === "object" && !mathjax.Hub) {
      // not enumerable: MathJax 3 copies its configuration object's own keys into its options
      Object.defineProperty(mathjax, "Hub", { value: hub, configurable: true });
    }
  }

  // MathJax 3 replaces window.MathJax (the configuration Sphinx writes) with itself when it loads, so the Hub is
  // added to every value window.MathJax takes. Pages without MathJax keep window.MathJax undefined.
  var current = window.MathJax;
  addHub(current);
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    enumerable: true,
    get: function () { return current; },
    set: function (value) { current = value; addHub(value); },
  });
})();
