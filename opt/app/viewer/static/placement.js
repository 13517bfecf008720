/* hetopt viewer: the P1 placement model (layers, colours, filter, hover text, DAG glue). */
"use strict";
(function () {
  const HV = window.HV;
  /* problems.md §1.2 rule 5: each load_timing value as the page names it */
  const TIMING_LABEL = { at_use: "at use (DOPS Eq. 1)", overlap: "overlap (DOPS §6.1)",
    prefetch: "prefetch" };

  HV.lighten = function (hex, f) {
    const n = parseInt(hex.slice(1), 16);
    const ch = [(n >> 16) & 255, (n >> 8) & 255, n & 255].map((c) => Math.round(c + (255 - c) * f));
    return "#" + ch.map((c) => c.toString(16).padStart(2, "0")).join("");
  };

  HV.placementModel = function (P) {
    const { head, cols } = P;
    const n = head.counts.tasks;
    const T = { kind: cols["task.kind"], dev: cols["task.dev"], phase: cols["task.phase"],
      step: cols["task.step"], layer: cols["task.layer"], shard: cols["task.shard"],
      ids: cols["task.ids"] };
    const kinds = head.tables.kind, phases = head.tables.phase, fmts = head.tables.format;
    const devs = head.devices, blocks = cols["block.ids"];
    const fmt = HV.timeFormatter(head.time_unit, head.seconds_per_tick);
    const M = { head, T, n, fmt, extent: head.extent, lanes: head.lanes.map((l) => ({ ...l })),
      mask: null, colourMode: "kind" };
    const util = head.metrics.utilisation.device;
    for (const ln of M.lanes) {
      if (ln.type === "compute") ln.note = (100 * (util[ln.label] || 0)).toFixed(1) + "%";
    }
    const layer = (p, start, end, extra) => ({ off: cols[p + ".off"], start, end, ...extra });
    const cs = cols["c.start"];
    const C = layer("c", cs, HV.addDur(cs, cols["c.dur"]), { ref: cols["c.task"], name: "compute" });
    const ts = cols["t.start"];
    const X = layer("t", ts, HV.addDur(ts, cols["t.dur"]), { src: cols["t.src"], dst: cols["t.dst"], name: "transfer" });
    const ls = cols["l.start"];
    const Ld = layer("l", ls, HV.addDur(ls, cols["l.dur"]), { block: cols["l.block"], fmt: cols["l.fmt"], task: cols["l.task"], name: "load" });
    const E = layer("e", cols["e.time"], cols["e.time"], { block: cols["e.block"], name: "evict", point: true });
    M.pos = new Int32Array(n);
    for (let i = 0; i < C.ref.length; i++) M.pos[C.ref[i]] = i;
    M.C = C;

    const PH = ["#4e79a7", "#f28e2b"], GREY = "#9aa0a6";
    const modes = {
      kind: (t) => HV.PAL[T.kind[t] % HV.PAL.length],
      phase: (t) => (T.phase[t] >= 0 ? PH[T.phase[t]] : GREY),
      step: (t) => (T.step[t] >= 0 ? HV.PAL[T.step[t] % HV.PAL.length] : GREY),
      layer: (t) => (T.layer[t] >= 0 ? HV.PAL[T.layer[t] % HV.PAL.length] : GREY),
      device: (t) => HV.DEVPAL[T.dev[t] % HV.DEVPAL.length],
    };
    M.modes = Object.keys(modes).filter((k) => k === "kind" || k === "device" || head.has[k]);
    const taskColour = (t) => modes[M.colourMode](t);
    C.colour = (i) => taskColour(C.ref[i]);
    X.colour = (i) => (M.colourMode === "kind" || M.colourMode === "device" ? "#5f7f99" : taskColour(X.dst[i]));
    Ld.colour = () => "#d9a441";
    E.colour = () => "#c0392b";
    C.visible = X.visible = null;
    Ld.visible = E.visible = null;
    C.label = (i) => taskLabel(C.ref[i]);
    X.label = null;
    Ld.label = (i) => blocks.get(Ld.block[i]);
    E.label = null;

    function taskLabel(t) {
      if (!head.has.kind) return T.ids.get(t);
      const k = kinds[T.kind[t]];
      return T.shard[t] >= 0 ? `${k}·${T.shard[t]}` : k;
    }
    M.taskLabel = taskLabel;
    const span = (s, e) => [["start", fmt.full(s)], ["end", fmt.full(e)], ["duration", fmt.full(e - s)]];
    M.describeTask = (t, i) => {
      const rows = [["task", T.ids.get(t)], ["kind", kinds[T.kind[t]]]];
      if (T.phase[t] >= 0) rows.push(["phase", phases[T.phase[t]]]);
      for (const k of ["step", "layer", "shard"]) if (T[k][t] >= 0) rows.push([k, T[k][t]]);
      rows.push(["device", devs[T.dev[t]].name]);
      return rows.concat(span(C.start[i], C.end[i]));
    };
    C.describe = (i) => M.describeTask(C.ref[i], i);
    X.describe = (i) => [["transfer", `${T.ids.get(X.src[i])} → ${T.ids.get(X.dst[i])}`],
      ["devices", `${devs[T.dev[X.src[i]]].name} → ${devs[T.dev[X.dst[i]]].name}`],
      ["for", `${kinds[T.kind[X.dst[i]]]}` + (T.step[X.dst[i]] >= 0 ? `, step ${T.step[X.dst[i]]}` : "") +
        (T.layer[X.dst[i]] >= 0 ? `, layer ${T.layer[X.dst[i]]}` : "")]].concat(span(X.start[i], X.end[i]));
    Ld.describe = (i) => [["weight load", blocks.get(Ld.block[i])], ["format", fmts[Ld.fmt[i]]],
      ["serves", Ld.task && Ld.task[i] >= 0 ? T.ids.get(Ld.task[i]) : "none"],
      ["load timing", TIMING_LABEL[head.load_timing] || head.load_timing]]
      .concat(span(Ld.start[i], Ld.end[i]));
    E.describe = (i) => [["eviction", blocks.get(E.block[i])], ["time", fmt.full(E.start[i])]];
    M.layers = [C, X, Ld, E];

    /* filter: {phase, step0, step1, layer} (null = any) */
    M.setFilter = function (f) {
      const any = f && (f.phase != null || f.step0 != null || f.step1 != null || f.layer != null);
      if (!any) { M.mask = null; C.visible = X.visible = null; M.filter = null; return n; }
      const mask = new Uint8Array(n);
      let count = 0;
      for (let t = 0; t < n; t++) {
        const ok = (f.phase == null || T.phase[t] === f.phase) &&
          (f.step0 == null || T.step[t] >= f.step0) && (f.step1 == null || T.step[t] <= f.step1) &&
          (f.layer == null || T.layer[t] === f.layer);
        mask[t] = ok ? 1 : 0;
        count += ok;
      }
      M.mask = mask;
      M.filter = f;
      C.visible = (i) => mask[C.ref[i]] === 1;
      X.visible = (i) => mask[X.dst[i]] === 1;
      return count;
    };
    M.matchRange = function () {
      let a = Infinity, b = -Infinity;
      for (let i = 0; i < C.start.length; i++) {
        if (M.mask && !M.mask[C.ref[i]]) continue;
        if (C.start[i] < a) a = C.start[i];
        if (C.end[i] > b) b = C.end[i];
      }
      return a <= b ? [a, b] : null;
    };
    M.legend = function () {
      const m = M.colourMode;
      if (m === "kind") return kinds.map((k, i) => [k, HV.PAL[i % HV.PAL.length]]).concat([["transfer", "#5f7f99"], ["weight load", "#d9a441"], ["eviction", "#c0392b"]]);
      if (m === "device") return devs.map((d, i) => [d.name, HV.DEVPAL[i % HV.DEVPAL.length]]).concat([["transfer", "#5f7f99"], ["weight load", "#d9a441"]]);
      if (m === "phase") return phases.map((p, i) => [p, PH[i]]).concat([["none", GREY], ["weight load", "#d9a441"]]);
      return HV.PAL.slice(0, 10).map((c, i) => [`${m} ≡ ${i} (mod ${HV.PAL.length})`, c]);
    };
    M.utilRows = function () {
      const rows = [];
      head.lanes.forEach((ln, k) => {
        if (ln.type !== "compute") return;
        const a = C.off[k], b = C.off[k + 1];
        rows.push({ label: ln.label, colour: HV.DEVPAL[ln.device % HV.DEVPAL.length],
          iv: HV.intervals(C.start.subarray(a, b), C.end.subarray(a, b)) });
      });
      return rows;
    };
    M.utilSeries = function () {
      const out = [];
      const colours = { npu: "#1f77b4", pim: "#ff7f0e", gpu: "#2ca02c", cpu: "#7f7f7f" };
      for (const c of head.classes) {
        const s = cols[`u.${c}.start`];
        out.push({ key: c, label: `${c.toUpperCase()} (any busy)`, colour: colours[c] || "#555",
          iv: HV.intervals(s, HV.addDur(s, cols[`u.${c}.dur`])) });
      }
      if (head.pair) {
        const s = cols["u.co.start"];
        out.push({ key: "co", label: "co-util. (both)", colour: "#6a3d9a", fill: true,
          iv: HV.intervals(s, HV.addDur(s, cols["u.co.dur"])) });
      }
      return out;
    };

    /* DAG of the tasks of (step, layer), or of `list` (task indices) */
    M.dagData = function (list, selectedTask, onpick) {
      const idx = new Map();
      list.forEach((t, k) => idx.set(t, k));
      if (!M.srcOff) buildCsr();
      const edges = [];
      for (const t of list) {
        for (let e = M.srcOff[t]; e < M.srcOff[t + 1]; e++) {
          const v = M.eDst[e];
          if (idx.has(v)) edges.push([idx.get(t), idx.get(v), T.dev[t] !== T.dev[v]]);
        }
      }
      const nodes = list.map((t) => ({
        label: taskLabel(t), sub: devs[T.dev[t]].name + " · @" + fmt.short(C.start[M.pos[t]]),
        colour: HV.lighten(HV.DEVPAL[T.dev[t] % HV.DEVPAL.length], 0.45),
        title: M.describeTask(t, M.pos[t]).map(([k, v]) => `${k}: ${v}`).join("\n"),
        selected: t === selectedTask, onclick: () => onpick(t) }));
      const legend = devs.map((d, i) => [d.name, HV.lighten(HV.DEVPAL[i % HV.DEVPAL.length], 0.45)]);
      return { nodes, edges, legend };
    };
    function buildCsr() {
      const src = cols["edge.src"], dd = cols["edge.ddst"], m = src.length;
      const off = new Int32Array(n + 1), dst = new Int32Array(m);
      for (let e = 0; e < m; e++) { off[src[e] + 1]++; dst[e] = src[e] + dd[e]; }
      for (let t = 0; t < n; t++) off[t + 1] += off[t];
      M.srcOff = off;
      M.eDst = dst;
    }
    M.tasksOf = function (step, layerNo) {
      const out = [];
      for (let t = 0; t < n; t++) {
        if ((step == null || T.step[t] === step) && (layerNo == null || T.layer[t] === layerNo)) out.push(t);
      }
      return out;
    };
    M.tasksInView = function (t0, t1, cap) {
      const out = [];
      for (let k = 0; k < head.lanes.length; k++) {
        for (let i = HV.firstAbove(C.pmax, C.off[k], C.off[k + 1], t0); i < C.off[k + 1] && C.start[i] < t1; i++) {
          if (!M.mask || M.mask[C.ref[i]]) out.push(C.ref[i]);
        }
      }
      out.sort((a, b) => C.start[M.pos[a]] - C.start[M.pos[b]]);
      return out.slice(0, cap);
    };
    M.subtitle = `${n.toLocaleString("en-US")} tasks · ${head.counts.transfers.toLocaleString("en-US")} transfers · ` +
      `${head.counts.loads} loads (${(TIMING_LABEL[head.load_timing] || head.load_timing).split(" (")[0]}) · ` +
      `${head.counts.evictions} evictions · makespan ${fmt.full(head.metrics.makespan)}`;
    return M;
  };
})();
