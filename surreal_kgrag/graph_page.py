"""The HTML page of the graph view (:mod:`surreal_kgrag.graph_view`): inline CSS and script, no
external resources. ``{{title}}`` is replaced with escaped text and ``{{data}}`` with the graph as
JSON; the script draws it as SVG and writes every text with ``textContent``."""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{title}}</title>
<style>
  body { font: 13px/1.4 system-ui, sans-serif; margin: 0; background: #fbfbfd; color: #222; }
  header { padding: 10px 16px; border-bottom: 1px solid #ddd; background: #fff; }
  header h1 { font-size: 16px; margin: 0 0 4px; }
  header .legend span { margin-right: 14px; }
  .dot { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 4px; vertical-align: middle; }
  svg { display: block; }
  .node text { font-size: 11px; pointer-events: none; }
  .node circle { stroke: #fff; stroke-width: 1.5px; cursor: pointer; }
  .edge { fill: none; stroke: #99a; stroke-opacity: 0.55; }
  .edge.vector { stroke: #4a7bd0; } .edge.text { stroke: #d08a2a; } .edge.concept { stroke: #3a9a5b; }
  .edge.graph { stroke: #a04ac0; stroke-dasharray: 5 3; } .edge.part { stroke: #bbb; }
  .dim { opacity: 0.12; }
  #detail { position: fixed; right: 12px; bottom: 12px; max-width: 420px; background: #fff; border: 1px solid #ccc;
            padding: 8px 10px; border-radius: 6px; white-space: pre-wrap; display: none; box-shadow: 0 2px 6px #0002; }
</style>
</head>
<body>
<header>
  <h1 id="question"></h1>
  <div class="legend">
    <span><i class="dot" style="background:#333"></i>question</span>
    <span><i class="dot" style="background:#3a9a5b"></i>concept (similarity, or weight when the question names it)</span>
    <span><i class="dot" style="background:#4a7bd0"></i>chunk (score)</span>
    <span><i class="dot" style="background:#d0503a"></i>document (score)</span>
    <span id="summary"></span>
  </div>
</header>
<svg id="graph" xmlns="http://www.w3.org/2000/svg"></svg>
<div id="detail"></div>
<script type="application/json" id="graph-data">{{data}}</script>
<script>
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  var kinds = ["query", "concept", "chunk", "document"];
  var colours = { query: "#333", concept: "#3a9a5b", chunk: "#4a7bd0", document: "#d0503a" };
  var columns = {};
  kinds.forEach(function (k) { columns[k] = []; });
  data.nodes.forEach(function (n) { columns[n.kind].push(n); });
  kinds.forEach(function (k) {
    columns[k].sort(function (a, b) { return (b.score === null ? -9 : b.score) - (a.score === null ? -9 : a.score); });
  });
  var width = Math.max(1000, window.innerWidth || 1000), top = 30;
  var tallest = Math.max(1, Math.max.apply(null, kinds.map(function (k) { return columns[k].length; })));
  var rowHeight = Math.max(34, Math.min(90, 480 / tallest));
  var height = top * 2 + tallest * rowHeight;
  var svg = document.getElementById("graph");
  svg.setAttribute("width", width); svg.setAttribute("height", height);
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  var position = {};
  kinds.forEach(function (k, col) {
    var x = 60 + col * (width - 260) / 3;
    var list = columns[k], offset = (height - list.length * rowHeight) / 2;
    list.forEach(function (n, row) { position[n.id] = { x: x, y: offset + row * rowHeight + rowHeight / 2 }; });
  });
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (a) { e.setAttribute(a, attrs[a]); });
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(s) { return s === null || s === undefined ? "" : " (" + Number(s).toFixed(3) + ")"; }
  function short(s, n) { return s.length > n ? s.slice(0, n - 1) + "\\u2026" : s; }
  var edgeLayer = el("g", { id: "edges" }, svg), nodeLayer = el("g", { id: "nodes" }, svg);
  var edgeEls = [];
  data.edges.forEach(function (e) {
    var a = position[e.source], b = position[e.target];
    if (!a || !b) return;
    var mid = (a.x + b.x) / 2;
    var d = "M" + a.x + "," + a.y + " C" + mid + "," + a.y + " " + mid + "," + b.y + " " + b.x + "," + b.y;
    var w = e.score === null ? 1 : 1 + 3 * Math.max(0, Math.min(1, e.score));
    var p = el("path", { d: d, "class": "edge " + e.channel, "stroke-width": w,
                         "data-source": e.source, "data-target": e.target }, edgeLayer);
    var t = el("title", {}, p); t.textContent = e.channel + fmt(e.score);
    edgeEls.push(p);
  });
  var detail = document.getElementById("detail");
  data.nodes.forEach(function (n) {
    var p = position[n.id];
    var g = el("g", { "class": "node node-" + n.kind, "data-id": n.id, "data-kind": n.kind,
                      "data-score": n.score === null ? "" : n.score, transform: "translate(" + p.x + "," + p.y + ")" }, nodeLayer);
    var r = n.kind === "query" ? 11 : 5 + 6 * Math.max(0, Math.min(1, n.score === null ? 0.3 : n.score));
    el("circle", { r: r, fill: colours[n.kind] }, g);
    var label = n.kind === "query" ? el("text", { x: -r, y: -r - 8 }, g) : el("text", { x: r + 5, y: 4 }, g);
    label.textContent = short(n.label, n.kind === "query" ? 60 : 34) + fmt(n.score);
    var tip = el("title", {}, g); tip.textContent = n.label + fmt(n.score) + (n.detail ? "\\n\\n" + n.detail : "");
    g.addEventListener("mouseenter", function () {
      var linked = {}; linked[n.id] = true;
      edgeEls.forEach(function (e) {
        var on = e.getAttribute("data-source") === n.id || e.getAttribute("data-target") === n.id;
        e.classList.toggle("dim", !on);
        if (on) { linked[e.getAttribute("data-source")] = true; linked[e.getAttribute("data-target")] = true; }
      });
      Array.prototype.forEach.call(nodeLayer.childNodes, function (o) { o.classList.toggle("dim", !linked[o.getAttribute("data-id")]); });
      detail.textContent = n.kind + ": " + n.label + fmt(n.score) + (n.detail ? "\\n\\n" + short(n.detail, 600) : "");
      detail.style.display = "block";
    });
    g.addEventListener("mouseleave", function () {
      edgeEls.forEach(function (e) { e.classList.remove("dim"); });
      Array.prototype.forEach.call(nodeLayer.childNodes, function (o) { o.classList.remove("dim"); });
      detail.style.display = "none";
    });
  });
  document.getElementById("question").textContent = "Q: " + data.query + "  [" + data.mode + "]";
  document.getElementById("summary").textContent = columns.concept.length + " concepts, " + columns.chunk.length +
    " chunks, " + columns.document.length + " documents, " + edgeEls.length + " edges";
  document.body.setAttribute("data-rendered", String(nodeLayer.childNodes.length));
})();
</script>
</body>
</html>
"""
