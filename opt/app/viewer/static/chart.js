/* hetopt viewer: utilisation chart under the lanes (follows the timeline's window).
 *
 * An interval set is {start, end, cum} of disjoint sorted intervals, cum[i] = covered length
 * before interval i; covered(t) (the busy length in (-inf, t)) is a binary search, so the
 * busy fraction of any window [a, b) is (covered(b) - covered(a)) / (b - a), exactly the
 * definitions of opt/placement/utilisation.py (device: its compute events, disjoint by rule 2;
 * class: the union over its devices; co-utilisation: NPU-union ∩ PIM-union). */
"use strict";
(function () {
  const HV = window.HV;

  HV.intervals = function (start, end) {
    const cum = new Float64Array(start.length + 1);
    for (let i = 0; i < start.length; i++) cum[i + 1] = cum[i] + (end[i] - start[i]);
    return { start, end, cum };
  };

  HV.covered = function (iv, t) {
    const i = HV.firstAbove(iv.start, 0, iv.start.length, t) - 1;  // last start <= t
    if (i < 0) return 0;
    return iv.cum[i] + Math.min(Math.max(t - iv.start[i], 0), iv.end[i] - iv.start[i]);
  };

  HV.busy = function (iv, a, b) {
    return b > a ? (HV.covered(iv, b) - HV.covered(iv, a)) / (b - a) : 0;
  };

  const ROW_H = 11, PLOT_H = 64, TOP = 4;

  HV.UtilChart = class UtilChart {
    /* rows: [{label, iv}] heat strips; series: [{label, iv, colour, fill}] line plot */
    constructor(canvas, timeline, rows, series, summary) {
      this.c = canvas;
      this.ctx = canvas.getContext("2d");
      this.tl = timeline;
      this.rows = rows;
      this.series = series;
      this.summary = summary;
      this.H = TOP + rows.length * (ROW_H + 1) + (series.length ? PLOT_H + 22 : 6);
      timeline.listeners.push(() => this.request());
      window.addEventListener("resize", () => this.request());
      this.request();
    }

    request() {
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.draw(); });
    }

    window() { return [Math.max(this.tl.t0, this.tl.m.extent[0]), Math.min(this.tl.t1, this.tl.m.extent[1])]; }

    values(a, b) {
      const out = { window: [a, b], rows: {}, series: {} };
      for (const r of this.rows) out.rows[r.label] = HV.busy(r.iv, a, b);
      for (const s of this.series) out.series[s.key] = HV.busy(s.iv, a, b);
      return out;
    }

    draw() {
      const tl = this.tl, dpr = window.devicePixelRatio || 1, W = tl.W, LW = tl.labelW;
      this.c.style.width = W + "px";
      this.c.style.height = this.H + "px";
      this.c.width = Math.round(W * dpr);
      this.c.height = Math.round(this.H * dpr);
      const ctx = this.ctx;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.fillStyle = "#fff";
      ctx.fillRect(0, 0, W, this.H);
      const nb = Math.max(1, Math.floor(tl.plotW / 3)), bw = tl.plotW / nb;
      const edges = new Float64Array(nb + 1);
      for (let q = 0; q <= nb; q++) edges[q] = tl.t0 + (tl.t1 - tl.t0) * q / nb;
      const frac = (iv) => {
        const f = new Float64Array(nb);
        let prev = HV.covered(iv, edges[0]);
        for (let q = 0; q < nb; q++) {
          const cur = HV.covered(iv, edges[q + 1]);
          f[q] = (cur - prev) / (edges[q + 1] - edges[q]);
          prev = cur;
        }
        return f;
      };
      ctx.font = "10px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      let y = TOP;
      for (const r of this.rows) {
        const f = frac(r.iv);
        ctx.fillStyle = "#333";
        ctx.fillText(r.label + " busy", 6, y + ROW_H / 2, LW - 10);
        ctx.fillStyle = "#f0f1f4";
        ctx.fillRect(LW, y, tl.plotW, ROW_H);
        for (let q = 0; q < nb; q++) {
          if (f[q] <= 0) continue;
          ctx.globalAlpha = Math.min(1, 0.15 + 0.85 * f[q]);
          ctx.fillStyle = r.colour || "#333";
          ctx.fillRect(LW + q * bw, y, Math.ceil(bw), ROW_H);
        }
        ctx.globalAlpha = 1;
        y += ROW_H + 1;
      }
      if (this.series.length) this.drawSeries(ctx, y + 4, nb, bw, frac);
      if (this.summary) this.summary(this.values(...this.window()));
    }

    drawSeries(ctx, y0, nb, bw, frac) {
      const tl = this.tl, LW = tl.labelW;
      ctx.strokeStyle = "#c8ccd3";
      ctx.strokeRect(LW + 0.5, y0 + 0.5, tl.plotW, PLOT_H);
      ctx.fillStyle = "#333";
      ctx.fillText("busy fraction", 6, y0 + 8);
      ctx.fillText("1", LW - 10, y0 + 4);
      ctx.fillText("0", LW - 10, y0 + PLOT_H - 2);
      let lx = 6;
      for (const s of this.series) {
        const f = frac(s.iv);
        ctx.beginPath();
        for (let q = 0; q < nb; q++) {
          const x = LW + q * bw, yy = y0 + PLOT_H - f[q] * (PLOT_H - 2);
          if (q === 0) ctx.moveTo(x, yy); else ctx.lineTo(x, yy);
          ctx.lineTo(x + bw, yy);
        }
        if (s.fill) {
          ctx.lineTo(LW + tl.plotW, y0 + PLOT_H);
          ctx.lineTo(LW, y0 + PLOT_H);
          ctx.closePath();
          ctx.globalAlpha = 0.45;
          ctx.fillStyle = s.colour;
          ctx.fill();
          ctx.globalAlpha = 1;
        } else {
          ctx.strokeStyle = s.colour;
          ctx.lineWidth = 1.5;
          ctx.stroke();
          ctx.lineWidth = 1;
        }
        ctx.fillStyle = s.colour;
        ctx.fillRect(lx, y0 + 20 + 12 * this.series.indexOf(s), 10, 8);
        ctx.fillStyle = "#333";
        ctx.fillText(s.label, lx + 14, y0 + 24 + 12 * this.series.indexOf(s), LW - 30);
      }
    }
  };
})();
