/* hetopt viewer: page bootstrap, controls, the serving model, and the test hook
 * window.hetoptView. */
"use strict";
(function () {
  const HV = window.HV;
  const $ = (id) => document.getElementById(id);

  HV.servingModel = function (P) {
    const { head, cols } = P;
    const fmt = HV.timeFormatter(head.time_unit, head.seconds_per_tick);
    const short = cols["step.short"].all(), long = cols["step.long"].all();
    const J = { off: cols["j.off"], start: cols["j.start"], end: cols["j.end"],
      stream: cols["j.stream"], step: cols["j.step"], round: cols["j.round"], name: "job" };
    const lanes = head.lanes.map((l, k) => ({ ...l, hatch: true,
      note: (100 * head.busy[k]).toFixed(1) + "%" }));
    J.colour = (i) => HV.PAL[J.stream[i] % HV.PAL.length];
    J.visible = null;
    J.label = (i) => `mb${J.stream[i]} ${short[J.step[i]]}`;
    J.describe = (i) => [["resource", head.lanes[laneOf(i)].label],
      ["microbatch", J.stream[i]], ["step", `${J.step[i]}: ${long[J.step[i]]}`],
      ["round", J.round[i]], ["start", fmt.full(J.start[i])],
      ["end", fmt.full(J.end[i])], ["duration", fmt.full(J.end[i] - J.start[i])]];
    function laneOf(i) { let k = 0; while (J.off[k + 1] <= i) k++; return k; }
    const span = head.cycle * head.t_rtt;
    const markers = [];
    for (let r = 0; r <= head.periods * head.cycle; r++) markers.push([r * head.t_rtt, r === 0 ? "T_rtt = " + fmt.full(head.t_rtt) : ""]);
    const M = { head, fmt, extent: head.extent, lanes, layers: [J], markers,
      hatch: [0, head.periods * span], J, modes: ["microbatch"], colourMode: "microbatch" };
    M.legend = () => Array.from({ length: head.microbatches }, (_, s) => [`microbatch ${s}`, HV.PAL[s % HV.PAL.length]])
      .concat([["idle (hatched)", "#dde1e6"]]);
    M.utilRows = () => head.lanes.map((ln, k) => ({ label: ln.label, colour: "#444",
      iv: HV.intervals(J.start.subarray(J.off[k], J.off[k + 1]), J.end.subarray(J.off[k], J.off[k + 1])) }));
    M.utilSeries = () => [];
    const owners = head.owners.map((o, m) => `${m + 1}:${o.config} batch ${o.batch}`).join(", ");
    M.subtitle = `owners ${owners} · μ = ${head.microbatches} · template [${head.template}] · ` +
      `T_rtt = ${fmt.full(head.t_rtt)} (exact ${head.t_rtt_exact}) · ${head.cycle} round(s) per period, ` +
      `${head.periods} periods drawn` + (head.periodic ? "" : " · periodic regime not reached");
    return M;
  };

  function tipHtml(rows) {
    return "<table>" + rows.map(([k, v]) => `<tr><td>${HV.esc(k)}</td><td>${HV.esc(v)}</td></tr>`).join("") + "</table>";
  }

  function numOrNull(id) {
    const v = $(id).value.trim();
    return v === "" ? null : Number(v);
  }

  function setupControls(M, tl, api) {
    $("hv-zin").onclick = () => tl.zoom(0.5);
    $("hv-zout").onclick = () => tl.zoom(2);
    $("hv-left").onclick = () => tl.pan(-0.25);
    $("hv-right").onclick = () => tl.pan(0.25);
    $("hv-fit").onclick = () => tl.fit();
    const sel = $("hv-colour");
    for (const m of M.modes) { const o = document.createElement("option"); o.value = o.textContent = m; sel.appendChild(o); }
    sel.onchange = () => { M.colourMode = sel.value; tl.request(); legend(M); };
    if (!M.setFilter) { $("hv-filter-group").style.display = "none"; return; }
    const has = M.head.has;
    if (!has.phase && !has.step && !has.layer) $("hv-filter-group").style.display = "none";
    $("hv-apply").onclick = () => api.setFilter({ phase: numOrNull("hv-phase"), step0: numOrNull("hv-step0"),
      step1: numOrNull("hv-step1"), layer: numOrNull("hv-layer") });
    $("hv-clear").onclick = () => {
      for (const id of ["hv-phase", "hv-step0", "hv-step1", "hv-layer"]) $(id).value = "";
      api.setFilter(null);
    };
    $("hv-jump").onclick = () => api.jump();
  }

  function legend(M) {
    $("hv-legend").innerHTML = M.legend().map(([label, c]) =>
      `<span><span class="hv-sw" style="background:${HV.esc(c)}"></span>${HV.esc(label)}</span>`).join("");
  }

  function setupDag(M, tl, api) {
    if (!M.dagData) { $("hv-dag-panel").style.display = "none"; return; }
    const hasSL = M.head.has.step || M.head.has.layer;
    if (!hasSL) { $("hv-dag-sl").style.display = "none"; $("hv-dag-show").style.display = "none"; }
    $("hv-dag-show").onclick = () => api.showDag(numOrNull("hv-dag-step"), numOrNull("hv-dag-layer"));
    $("hv-dag-view").onclick = () => api.showDagList(M.tasksInView(tl.t0, tl.t1, 400), "tasks in view");
  }

  function utilText(M, v) {
    const pct = (x) => (100 * x).toFixed(1) + "%";
    /* every string from the file is text: escaped before it meets innerHTML */
    const parts = Object.entries(v.rows).map(([k, x]) => `${HV.esc(k)} ${pct(x)}`);
    const ser = Object.entries(v.series).map(([k, x]) => HV.esc(k === "co" ? "U_co" : "U_" + k) + " " + pct(x));
    return `<b>busy in the window</b> ${HV.esc(M.fmt.axis(v.window[0], v.window[1] - v.window[0]))} – ` +
      `${HV.esc(M.fmt.axis(v.window[1], v.window[1] - v.window[0]))}: ${parts.join(" · ")}` +
      (ser.length ? ` &nbsp;|&nbsp; ${ser.join(" · ")}` : "");
  }

  async function main() {
    const api = (window.hetoptView = { ready: false, error: null, t_start: performance.now() });
    let P;
    try {
      P = await HV.loadPayload();
    } catch (e) {
      api.error = String(e);
      $("hv-status").textContent = "cannot read the embedded data: " + e;
      $("hv-status").className = "hv-error";
      return;
    }
    api.t_decoded = performance.now();
    const M = P.head.kind === "serving" ? HV.servingModel(P) : HV.placementModel(P);
    $("hv-subtitle").textContent = M.subtitle;
    const tl = new HV.Timeline($("hv-lanes"), M);
    const chart = new HV.UtilChart($("hv-chart"), tl, M.utilRows(), M.utilSeries(),
      (v) => { $("hv-util").innerHTML = utilText(M, v); });
    const tip = $("hv-tip");
    let tipRows = null;
    tl.onHover = (h, e) => {
      if (!h) { tip.style.display = "none"; tipRows = null; return; }
      tipRows = h.layer.describe(h.i);
      tip.innerHTML = tipHtml(tipRows);
      tip.style.display = "block";
      const w = tip.offsetWidth;
      tip.style.left = Math.min(window.innerWidth - w - 8, e.clientX + 14) + "px";
      tip.style.top = e.clientY + 16 + "px";
    };
    tl.onClick = (h) => {
      tl.selected = h ? { layer: h.layer, i: h.i } : null;
      tl.request();
      if (h && h.layer === M.C && M.dagData) {
        const t = M.C.ref[h.i];
        if (M.head.has.step || M.head.has.layer) {
          $("hv-dag-step").value = M.T.step[t] >= 0 ? M.T.step[t] : "";
          $("hv-dag-layer").value = M.T.layer[t] >= 0 ? M.T.layer[t] : "";
          api.showDag(M.T.step[t] >= 0 ? M.T.step[t] : null, M.T.layer[t] >= 0 ? M.T.layer[t] : null, t);
        }
      }
    };
    let firstDraw = true;
    tl.onDraw = (st) => {
      if (firstDraw) {
        firstDraw = false;
        api.t_first_draw = performance.now();
        api.loadToFirstDrawMs = api.t_first_draw; // since navigation start
        api.ready = true;
        $("hv-status").textContent = "";
      }
      api.lastDraw = st;
    };
    Object.assign(api, {
      model: M, timeline: tl, chart,
      stats: () => ({ ...tl.stats }),
      getView: () => [tl.t0, tl.t1],
      setView: (a, b) => { tl.setView(a, b); tl.draw(); return [tl.t0, tl.t1]; },
      redraw: () => { tl.draw(); chart.draw(); return { ...tl.stats }; },
      lanes: () => tl.lanes.map((l, k) => ({ label: l.label, type: l.type, y: tl.laneY[k], h: tl.laneH[k] })),
      /* page (client) coordinates of the centre of compute event of task t (placement) or job t */
      pixelOf(t, layerName) {
        const L = layerName ? M.layers.find((x) => x.name === layerName) : M.layers[0];
        const i = L === M.C ? M.pos[t] : t;
        const b = tl.boxOf(L, i);
        if (!b) return null;
        const r = tl.c.getBoundingClientRect();
        return { x: r.left + (b.x0 + b.x1) / 2, y: r.top + b.y + b.h / 2, lane: b.lane, width: b.x1 - b.x0 };
      },
      focus(t, layerName) {
        const L = layerName ? M.layers.find((x) => x.name === layerName) : M.layers[0];
        const i = L === M.C ? M.pos[t] : t;
        const d = Math.max(L.end[i] - L.start[i], 1);
        tl.setView(L.start[i] - 2 * d, L.end[i] + 2 * d);
        tl.draw();
        return api.pixelOf(t, layerName);
      },
      tipText: () => (tip.style.display === "block" ? tip.textContent : null),
      tipRows: () => tipRows,
      utilisation: (a, b) => chart.values(a === undefined ? tl.m.extent[0] : a, b === undefined ? tl.m.extent[1] : b),
    });
    if (M.setFilter) {
      api.setFilter = (f) => { const n = M.setFilter(f); tl.draw(); legend(M); $("hv-status").textContent = f ? `${n.toLocaleString("en-US")} tasks pass the filter` : ""; return n; };
      api.jump = () => { const r = M.matchRange(); if (r) { const p = (r[1] - r[0]) * 0.02 || 1; tl.setView(r[0] - p, r[1] + p); tl.draw(); } return r; };
      api.showDagList = (list, what, sel) => {
        const info = $("hv-dag-info");
        if (list.length > 600) { info.textContent = `${list.length} tasks: too many for the DAG view (at most 600); narrow the window`; return null; }
        const d = M.dagData(list, sel, (t) => { api.focus(t); tl.selected = { layer: M.C, i: M.pos[t] }; tl.draw(); });
        const r = HV.drawDag($("hv-dag"), d.nodes, d.edges, d.legend);
        info.textContent = `${what}: ${r.nodes} operators, ${r.edges} dependencies (dark: crosses devices, a transfer), ${r.layers} levels`;
        return r;
      };
      api.showDag = (step, layerNo, sel) => {
        $("hv-dag-step").value = step == null ? "" : step;
        $("hv-dag-layer").value = layerNo == null ? "" : layerNo;
        return api.showDagList(M.tasksOf(step, layerNo),
        `step ${step == null ? "any" : step}, layer ${layerNo == null ? "any" : layerNo}`, sel);
      };
    }
    setupControls(M, tl, api);
    setupDag(M, tl, api);
    legend(M);
    $("hv-foot").textContent = "hetopt view · wheel: zoom · drag: pan · shift+wheel: pan · hover: details · click a task: its layer's DAG";
    if (M.dagData) {
      if (M.head.has.step || M.head.has.layer) {
        const step = M.head.has.step ? (M.tasksOf(1, 0).length ? 1 : 0) : null;
        const lay = M.head.has.layer ? 0 : null;
        $("hv-dag-step").value = step == null ? "" : step;
        $("hv-dag-layer").value = lay == null ? "" : lay;
        api.showDag(step, lay);
      } else if (M.n <= 600) {
        api.showDagList(Array.from({ length: M.n }, (_, t) => t), "all tasks");
      }
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
