/* hetopt viewer: the lanes canvas (level of detail, zoom/pan, hover, selection).
 *
 * A layer is {off, start, end, colour(i), visible(i)|null, point, label(i)|null, describe(i)}:
 * events sorted by (lane, start), lane k's events at [off[k], off[k+1]). For each lane the
 * visible events are found by binary search on the running maximum of their ends; events
 * at least 1 px wide are drawn as boxes, narrower ones are summed into per-pixel bins (one
 * 1-px column per pixel, coloured by its longest event, opacity by covered fraction), so a
 * frame costs O(visible events) and at most (lanes × width) bins, whatever the zoom. */
"use strict";
(function () {
  const HV = window.HV;
  const LABEL_W = 170, AXIS_H = 28, GAP = 3;

  function runningMax(layer, nLanes) {
    const pm = new Float64Array(layer.end.length);
    for (let k = 0; k < nLanes; k++) {
      let m = -Infinity;
      for (let i = layer.off[k]; i < layer.off[k + 1]; i++) {
        if (layer.end[i] > m) m = layer.end[i];
        pm[i] = m;
      }
    }
    return pm;
  }

  /* global running sum of durations (L.cum[i] = busy before event i) and, per lane, whether
   * its events are disjoint (then a pixel's busy time is a difference of two prefix sums) */
  function prefixes(layer, nLanes) {
    const n = layer.start.length, cum = new Float64Array(n + 1), disjoint = new Uint8Array(nLanes);
    for (let i = 0; i < n; i++) cum[i + 1] = cum[i] + (layer.end[i] - layer.start[i]);
    for (let k = 0; k < nLanes; k++) {
      let ok = 1;
      for (let i = layer.off[k] + 1; i < layer.off[k + 1] && ok; i++) {
        if (layer.start[i] < layer.end[i - 1]) ok = 0;
      }
      disjoint[k] = ok;
    }
    layer.cum = cum;
    layer.disjoint = disjoint;
  }

  /* first i in [a, b) with arr[i] > t (arr nondecreasing on [a, b)) */
  function firstAbove(arr, a, b, t) {
    let lo = a, hi = b;
    while (lo < hi) { const m = (lo + hi) >> 1; if (arr[m] > t) hi = m; else lo = m + 1; }
    return lo;
  }
  HV.firstAbove = firstAbove;

  function niceStep(span, n) {
    const raw = span / Math.max(1, n);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const f of [1, 2, 5, 10]) if (f * p >= raw) return f * p;
    return 10 * p;
  }

  HV.Timeline = class Timeline {
    constructor(canvas, model) {
      this.c = canvas;
      this.ctx = canvas.getContext("2d");
      this.m = model;
      this.lanes = model.lanes;
      for (const L of model.layers) {
        L.pmax = runningMax(L, this.lanes.length);
        prefixes(L, this.lanes.length);
      }
      this.fmt = model.fmt;
      this.markers = model.markers || [];
      this.listeners = [];
      this.selected = null;
      this.stats = { boxes: 0, bins: 0, points: 0, drawn: 0, frames: 0, ms: 0 };
      this.layout();
      this.resize();
      this.fit();
      this.bind();
    }

    layout() {
      let y = AXIS_H;
      this.laneY = [];
      this.laneH = [];
      for (const ln of this.lanes) {
        const h = ln.type === "compute" || ln.type === "job" ? 26 : 16;
        this.laneY.push(y);
        this.laneH.push(h);
        y += h + GAP;
      }
      this.H = y + 4;
    }

    resize() {
      const dpr = window.devicePixelRatio || 1;
      this.W = Math.max(400, this.c.parentElement.clientWidth);
      this.plotW = this.W - LABEL_W - 10;
      this.c.style.width = this.W + "px";
      this.c.style.height = this.H + "px";
      this.c.width = Math.round(this.W * dpr);
      this.c.height = Math.round(this.H * dpr);
      this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      this.cov = new Float32Array(this.plotW + 2);
      this.mx = new Float32Array(this.plotW + 2);
      this.col = new Int32Array(this.plotW + 2);
      this.request();
    }

    fit() {
      const [a, b] = this.m.extent;
      const pad = (b - a) * 0.01 || 1;
      this.setView(a - pad, b + pad);
    }

    setView(t0, t1) {
      if (!(t1 > t0)) return;
      const minSpan = 10;
      if (t1 - t0 < minSpan) { const c = (t0 + t1) / 2; t0 = c - minSpan / 2; t1 = c + minSpan / 2; }
      this.t0 = t0;
      this.t1 = t1;
      this.request();
      for (const f of this.listeners) f(t0, t1);
    }

    zoom(factor, tc) {
      if (tc === undefined) tc = (this.t0 + this.t1) / 2;
      this.setView(tc - (tc - this.t0) * factor, tc + (this.t1 - tc) * factor);
    }

    pan(frac) {
      const d = (this.t1 - this.t0) * frac;
      this.setView(this.t0 + d, this.t1 + d);
    }

    xOf(t) { return LABEL_W + (t - this.t0) / (this.t1 - this.t0) * this.plotW; }
    tOf(x) { return this.t0 + (x - LABEL_W) / this.plotW * (this.t1 - this.t0); }
    get labelW() { return LABEL_W; }

    laneAt(y) {
      for (let k = 0; k < this.lanes.length; k++) {
        if (y >= this.laneY[k] && y < this.laneY[k] + this.laneH[k]) return k;
      }
      return -1;
    }

    request() {
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.draw(); });
    }

    draw() {
      const t = performance.now();
      const ctx = this.ctx;
      const st = (this.stats = { boxes: 0, bins: 0, points: 0, drawn: 0,
        frames: this.stats.frames + 1, ms: 0 });
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, 0, this.W, this.H);
      this.drawAxis(ctx);
      for (let k = 0; k < this.lanes.length; k++) {
        const y = this.laneY[k], h = this.laneH[k];
        ctx.fillStyle = k % 2 ? "#f6f7f9" : "#eef0f3";
        ctx.fillRect(LABEL_W, y, this.plotW, h);
        if (this.m.hatch && this.lanes[k].hatch) this.drawHatch(ctx, y, h);
        ctx.save();
        ctx.beginPath();
        ctx.rect(LABEL_W, y, this.plotW, h);
        ctx.clip();
        for (const L of this.m.layers) this.drawLayer(ctx, L, k, y + 1, h - 2, st);
        ctx.restore();
        this.drawLabel(ctx, k, y, h);
      }
      this.drawMarkers(ctx);
      this.drawSelection(ctx);
      st.drawn = st.boxes + st.bins + st.points;
      st.ms = performance.now() - t;
      if (this.onDraw) this.onDraw(st);
    }

    drawHatch(ctx, y, h) {
      const [a, b] = this.m.hatch;
      const x0 = Math.max(LABEL_W, this.xOf(a)), x1 = Math.min(LABEL_W + this.plotW, this.xOf(b));
      if (x1 <= x0) return;
      if (!this.pattern) {
        const p = document.createElement("canvas");
        p.width = p.height = 8;
        const g = p.getContext("2d");
        g.strokeStyle = "#c9ced6";
        g.beginPath(); g.moveTo(0, 8); g.lineTo(8, 0); g.stroke();
        this.pattern = ctx.createPattern(p, "repeat");
      }
      ctx.fillStyle = this.pattern;
      ctx.fillRect(x0, y, x1 - x0, h);
    }

    drawLabel(ctx, k, y, h) {
      const ln = this.lanes[k];
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, y, LABEL_W - 2, h);
      ctx.fillStyle = ln.type === "compute" || ln.type === "job" ? "#111" : "#555";
      ctx.font = (ln.type === "compute" || ln.type === "job" ? "bold 12px" : "11px") +
        " system-ui, sans-serif";
      ctx.textBaseline = "middle";
      ctx.textAlign = "left";
      const text = ln.label + (ln.note ? "  " + ln.note : "");
      ctx.fillText(text, 6, y + h / 2, LABEL_W - 10);
    }

    drawAxis(ctx) {
      const span = this.t1 - this.t0;
      const step = niceStep(span, this.plotW / 110);
      ctx.font = "11px system-ui, sans-serif";
      ctx.textBaseline = "top";
      ctx.textAlign = "center";
      ctx.strokeStyle = "#d5d9df";
      ctx.fillStyle = "#333";
      const first = Math.ceil(this.t0 / step) * step;
      for (let t = first; t <= this.t1; t += step) {
        const x = Math.round(this.xOf(t)) + 0.5;
        ctx.beginPath(); ctx.moveTo(x, AXIS_H - 6); ctx.lineTo(x, this.H); ctx.stroke();
        ctx.fillText(this.fmt.axis(t, step), x, 4);
      }
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, 0, LABEL_W - 2, AXIS_H);
    }

    drawMarkers(ctx) {
      if (!this.markers.length) return;
      ctx.save();
      ctx.strokeStyle = "#222";
      ctx.setLineDash([4, 3]);
      ctx.fillStyle = "#222";
      ctx.font = "10px system-ui, sans-serif";
      ctx.textAlign = "left";
      ctx.textBaseline = "top";
      for (const [t, label] of this.markers) {
        if (t < this.t0 || t > this.t1) continue;
        const x = Math.round(this.xOf(t)) + 0.5;
        ctx.beginPath(); ctx.moveTo(x, AXIS_H - 12); ctx.lineTo(x, this.H); ctx.stroke();
        if (label) ctx.fillText(label, x + 3, 15);
      }
      ctx.restore();
    }

    drawLayer(ctx, L, k, y, h, st) {
      const a = L.off[k], b = L.off[k + 1];
      if (a >= b) return;
      const t0 = this.t0, t1 = this.t1, sc = this.plotW / (t1 - t0), X1 = LABEL_W + this.plotW;
      const S = L.start, E = L.end, vis = L.visible;
      const cov = this.cov, mx = this.mx, col = this.col, touched = [];
      const labels = [];
      let style = null;
      const i0 = firstAbove(L.pmax, a, b, L.point ? t0 - 1 : t0);
      if (vis === null && !L.point && L.disjoint[k] && firstAbove(S, i0, b, t1) - i0 > 2 * this.plotW) {
        this.drawDense(ctx, L, a, b, y, h, st);
        return;
      }
      for (let i = i0; i < b; i++) {
        const s = S[i];
        if (s >= t1) break;
        if (vis !== null && !vis(i)) continue;
        if (L.point) {
          const x = this.xOf(s);
          ctx.fillStyle = style = L.colour(i);
          ctx.fillRect(x - 1, y - 1, 2, h + 2);
          st.points++;
          continue;
        }
        let x0 = LABEL_W + (s - t0) * sc, x1 = LABEL_W + (E[i] - t0) * sc;
        if (x0 < LABEL_W) x0 = LABEL_W;
        if (x1 > X1) x1 = X1;
        const w = x1 - x0;
        if (w >= 1) {
          const c = L.colour(i);
          if (c !== style) ctx.fillStyle = style = c;
          ctx.fillRect(x0, y, w > 4 ? w - 1 : w, h);
          st.boxes++;
          if (w > 46 && L.label) labels.push(x0, w, i);
        } else {
          const p = (x0 - LABEL_W) | 0;
          if (cov[p] === 0) touched.push(p);
          cov[p] += w;
          if (w >= mx[p]) { mx[p] = w; col[p] = i; }
        }
      }
      for (const p of touched) {
        ctx.globalAlpha = Math.min(1, 0.45 + 0.55 * cov[p]);
        ctx.fillStyle = L.colour(col[p]);
        ctx.fillRect(LABEL_W + p, y, 1, h);
        cov[p] = 0;
        mx[p] = 0;
      }
      ctx.globalAlpha = 1;
      st.bins += touched.length;
      if (labels.length) this.drawBoxLabels(ctx, L, labels, y, h);
    }

    /* many more events than pixels on a lane of disjoint events: per pixel column, its busy
     * time from two prefix sums (binary searches) and the colour of its last-started event;
     * runs of equal columns are one rectangle. O(width · log n) whatever the event count. */
    drawDense(ctx, L, a, b, y, h, st) {
      const S = L.start, E = L.end, cum = L.cum, W = this.plotW;
      const dt = (this.t1 - this.t0) / W;
      const covAt = (t, j) => (j === a ? 0 : cum[j - 1] + Math.min(Math.max(t - S[j - 1], 0), E[j - 1] - S[j - 1]));
      let tA = this.t0, jA = firstAbove(S, a, b, tA), cA = covAt(tA, jA);
      let runX = -1, runStyle = null, runAlpha = 0;
      const flush = (x) => {
        if (runX >= 0) {
          ctx.globalAlpha = runAlpha;
          ctx.fillStyle = runStyle;
          ctx.fillRect(LABEL_W + runX, y, x - runX, h);
          st.bins++;
        }
        runX = -1;
      };
      for (let p = 0; p < W; p++) {
        const tB = this.t0 + (p + 1) * dt;
        const jB = firstAbove(S, jA, b, tB);
        const cB = covAt(tB, jB);
        const f = (cB - cA) / dt;
        if (f > 1e-9) {
          const style = L.colour(jB - 1);
          const alpha = Math.round(10 * Math.min(1, 0.45 + 0.55 * f)) / 10;
          if (runX < 0 || style !== runStyle || alpha !== runAlpha) {
            flush(p);
            runX = p; runStyle = style; runAlpha = alpha;
          }
        } else flush(p);
        tA = tB; jA = jB; cA = cB;
        if (jB >= b && tB > E[b - 1]) break;
      }
      flush(W);
      ctx.globalAlpha = 1;
    }

    drawBoxLabels(ctx, L, labels, y, h) {
      ctx.font = (h > 20 ? 11 : 9) + "px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      ctx.textAlign = "left";
      ctx.fillStyle = "#111";
      for (let q = 0; q < labels.length; q += 3) {
        const x0 = labels[q], w = labels[q + 1];
        ctx.fillText(L.label(labels[q + 2]), x0 + 3, y + h / 2, w - 6);
      }
    }

    drawSelection(ctx) {
      const s = this.selected;
      if (!s) return;
      const box = this.boxOf(s.layer, s.i);
      if (!box) return;
      ctx.strokeStyle = "#000";
      ctx.lineWidth = 2;
      ctx.strokeRect(box.x0 - 1, box.y - 1, Math.max(2, box.x1 - box.x0) + 2, box.h + 2);
      ctx.lineWidth = 1;
    }

    /* canvas-CSS box of event i of layer L (clipped to the plot), or null if out of view */
    boxOf(L, i) {
      let k = 0;
      while (k < this.lanes.length && L.off[k + 1] <= i) k++;
      if (k >= this.lanes.length) return null;
      const x0 = Math.max(LABEL_W, this.xOf(L.start[i]));
      const x1 = Math.min(LABEL_W + this.plotW, this.xOf(L.end[i]));
      if (x1 < x0 || L.end[i] < this.t0 || L.start[i] > this.t1) return null;
      return { x0, x1, y: this.laneY[k] + 1, h: this.laneH[k] - 2, lane: k };
    }

    /* the event under (x, y) in canvas-CSS pixels, within 3 px: {layer, i} or null */
    hit(x, y) {
      const k = this.laneAt(y);
      if (k < 0 || x < LABEL_W) return null;
      const t = this.tOf(x), tol = 3 * (this.t1 - this.t0) / this.plotW;
      let best = null;
      for (const L of this.m.layers) {
        const a = L.off[k], b = L.off[k + 1];
        const hiI = firstAbove(L.start, a, b, t + tol) - 1;
        for (let j = hiI; j >= a && j > hiI - 400; j--) {
          if (L.pmax[j] < t - tol) break;
          if (L.visible !== null && !L.visible(j)) continue;
          const d = t < L.start[j] ? L.start[j] - t : t > L.end[j] ? t - L.end[j] : 0;
          if (d <= tol && (best === null || d < best.d)) best = { layer: L, i: j, d };
          if (d === 0 && !L.point) break;
        }
      }
      return best;
    }

    bind() {
      const c = this.c;
      c.addEventListener("wheel", (e) => {
        e.preventDefault();
        const f = Math.exp(Math.max(-3, Math.min(3, e.deltaY * 0.0015)));
        if (e.shiftKey) this.pan(e.deltaY * 0.0008);
        else this.zoom(f, e.offsetX > LABEL_W ? this.tOf(e.offsetX) : undefined);
      }, { passive: false });
      let drag = null;
      c.addEventListener("mousedown", (e) => {
        drag = { x: e.clientX, t0: this.t0, t1: this.t1, moved: false };
      });
      window.addEventListener("mouseup", (e) => {
        if (drag && !drag.moved && this.onClick) {
          const r = c.getBoundingClientRect();
          this.onClick(this.hit(e.clientX - r.left, e.clientY - r.top));
        }
        drag = null;
      });
      window.addEventListener("mousemove", (e) => {
        const r = c.getBoundingClientRect();
        if (drag) {
          const dx = e.clientX - drag.x;
          if (Math.abs(dx) > 2) drag.moved = true;
          if (drag.moved) {
            const dt = dx / this.plotW * (drag.t1 - drag.t0);
            this.setView(drag.t0 - dt, drag.t1 - dt);
          }
          return;
        }
        const x = e.clientX - r.left, y = e.clientY - r.top;
        if (x < 0 || y < 0 || x > r.width || y > r.height) { if (this.onHover) this.onHover(null, e); return; }
        if (this.onHover) this.onHover(this.hit(x, y), e);
      });
      window.addEventListener("resize", () => this.resize());
    }
  };
})();
