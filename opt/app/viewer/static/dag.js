/* hetopt viewer: DAG of a window of tasks (DOPS Fig. 11(a)): nodes coloured by device, edges
 * by dependency (cross-device edges, which carry a transfer, drawn dark and thicker).
 * Layered layout: layer = longest path from the window's sources; order within a layer by
 * the barycentre of the predecessors (one downward sweep); SVG. */
"use strict";
(function () {
  const HV = window.HV;
  const NW = 118, NH = 34, DX = 22, DY = 30, PAD = 14;
  const SVGNS = "http://www.w3.org/2000/svg";

  function el(name, attrs, parent) {
    const e = document.createElementNS(SVGNS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  }

  /* nodes: [{label, sub, colour, title}], edges: [[u, v, cross]] (indices into nodes) */
  HV.layeredLayout = function (n, edges) {
    const succ = Array.from({ length: n }, () => []), pred = Array.from({ length: n }, () => []);
    const indeg = new Int32Array(n);
    for (const [u, v] of edges) { succ[u].push(v); pred[v].push(u); indeg[v]++; }
    const level = new Int32Array(n), order = [];
    const queue = [];
    for (let i = 0; i < n; i++) if (indeg[i] === 0) queue.push(i);
    while (queue.length) {
      const u = queue.shift();
      order.push(u);
      for (const v of succ[u]) {
        level[v] = Math.max(level[v], level[u] + 1);
        if (--indeg[v] === 0) queue.push(v);
      }
    }
    const rows = [];
    for (const u of order) (rows[level[u]] = rows[level[u]] || []).push(u);
    const pos = new Float64Array(n);
    rows.forEach((row, r) => {
      if (r > 0) {
        const bc = (u) => pred[u].length ? pred[u].reduce((s, p) => s + pos[p], 0) / pred[u].length : 0;
        row.sort((a, b) => bc(a) - bc(b));
      }
      row.forEach((u, k) => { pos[u] = k - (row.length - 1) / 2; });
    });
    return { rows, pos, level };
  };

  HV.drawDag = function (svg, nodes, edges, legend) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const { rows, pos, level } = HV.layeredLayout(nodes.length, edges);
    const widest = Math.max(1, ...rows.map((r) => r.length));
    const W = PAD * 2 + widest * (NW + DX), H = PAD * 2 + rows.length * (NH + DY) + 20;
    svg.setAttribute("width", W);
    svg.setAttribute("height", H);
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const cx = (u) => W / 2 + pos[u] * (NW + DX);
    const cy = (u) => PAD + level[u] * (NH + DY) + NH / 2;
    const defs = el("defs", {}, svg);
    for (const [id, colour] of [["a0", "#9aa3ad"], ["a1", "#7a1f1f"]]) {
      const m = el("marker", { id: "hv-" + id, viewBox: "0 0 10 10", refX: 9, refY: 5,
        markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
      el("path", { d: "M0,0 L10,5 L0,10 z", fill: colour }, m);
    }
    const eg = el("g", {}, svg);
    for (const [u, v, cross] of edges) {
      const x1 = cx(u), y1 = cy(u) + NH / 2, x2 = cx(v), y2 = cy(v) - NH / 2;
      const my = (y1 + y2) / 2;
      el("path", { d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`, fill: "none",
        stroke: cross ? "#7a1f1f" : "#9aa3ad", "stroke-width": cross ? 1.8 : 1.1,
        "marker-end": `url(#hv-a${cross ? 1 : 0})`, class: cross ? "hv-edge-x" : "hv-edge" }, eg);
    }
    const ng = el("g", {}, svg);
    nodes.forEach((nd, u) => {
      const g = el("g", { class: "hv-node", transform: `translate(${cx(u) - NW / 2},${cy(u) - NH / 2})` }, ng);
      el("rect", { width: NW, height: NH, rx: 5, fill: nd.colour, stroke: "#333",
        "stroke-width": nd.selected ? 2.5 : 0.6 }, g);
      const t1 = el("text", { x: NW / 2, y: 14, "text-anchor": "middle", class: "hv-n1" }, g);
      t1.textContent = nd.label;
      const t2 = el("text", { x: NW / 2, y: 27, "text-anchor": "middle", class: "hv-n2" }, g);
      t2.textContent = nd.sub;
      const tt = el("title", {}, g);
      tt.textContent = nd.title;
      if (nd.onclick) g.addEventListener("click", nd.onclick);
    });
    let lx = PAD;
    const ly = H - 12;
    for (const [label, colour] of legend) {
      el("rect", { x: lx, y: ly - 9, width: 12, height: 10, fill: colour, stroke: "#333",
        "stroke-width": 0.5 }, svg);
      const t = el("text", { x: lx + 16, y: ly, class: "hv-n2" }, svg);
      t.textContent = label;
      lx += 22 + 7 * label.length;
    }
    return { nodes: nodes.length, edges: edges.length, layers: rows.length };
  };
})();
