/* hetopt viewer: payload decoding (header JSON + gzip/base64 columnar blob). */
"use strict";
const HV = (window.HV = window.HV || {});

HV.TYPES = { Int8: Int8Array, Uint8: Uint8Array, Int16: Int16Array, Uint16: Uint16Array,
  Int32: Int32Array, Float64: Float64Array };

HV.b64ToBytes = async function (b64) {
  try {
    const r = await fetch("data:application/octet-stream;base64," + b64);
    return new Uint8Array(await r.arrayBuffer());
  } catch (e) {
    const s = atob(b64);
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
};

HV.gunzip = async function (bytes) {
  if (typeof DecompressionStream === "undefined") {
    throw new Error("this browser has no DecompressionStream (gzip): use a current browser, " +
      "or write the page with --no-compress");
  }
  const s = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(s).arrayBuffer());
};

/* Running sum per segment (the payload's "delta" encoding), into float64. */
HV.undelta = function (d, off) {
  const out = new Float64Array(d.length);
  for (let k = 0; k + 1 < off.length; k++) {
    let s = 0;
    for (let i = off[k]; i < off[k + 1]; i++) { s += d[i]; out[i] = s; }
  }
  return out;
};

/* A "\n"-joined string table, split lazily: get(i). */
HV.Lines = class Lines {
  constructor(text, count) {
    this.text = text;
    this.count = count;
    this.pos = null;
  }
  get(i) {
    if (this.pos === null) {
      const pos = new Int32Array(this.count + 1);
      let p = 0;
      for (let k = 0; k < this.count; k++) {
        pos[k] = p;
        const q = this.text.indexOf("\n", p);
        p = q < 0 ? this.text.length + 1 : q + 1;
      }
      pos[this.count] = this.text.length + 1;
      this.pos = pos;
    }
    return this.text.substring(this.pos[i], this.pos[i + 1] - 1);
  }
  all() {
    return this.count ? this.text.split("\n") : [];
  }
};

HV.loadPayload = async function () {
  const head = JSON.parse(document.getElementById("hetopt-header").textContent);
  const b64 = document.getElementById("hetopt-blob").textContent.trim();
  let bytes = await HV.b64ToBytes(b64);
  if (head.blob.compression === "gzip") bytes = await HV.gunzip(bytes);
  if (bytes.byteOffset % 8) bytes = bytes.slice();
  const spec = head.blob.columns;
  const cols = {};
  const dec = new TextDecoder();
  for (const [name, c] of Object.entries(spec)) {
    if (c.dtype === "utf8") {
      cols[name] = new HV.Lines(dec.decode(bytes.subarray(c.offset, c.offset + c.bytes)),
        c.count);
    } else {
      cols[name] = new HV.TYPES[c.dtype](bytes.buffer, bytes.byteOffset + c.offset, c.count);
    }
  }
  for (const [name, c] of Object.entries(spec)) {
    if (c.enc === "delta") cols[name] = HV.undelta(cols[name], cols[c.seg]);
  }
  return { head, cols };
};

/* end = start + dur, float64 */
HV.addDur = function (start, dur) {
  const out = new Float64Array(start.length);
  for (let i = 0; i < start.length; i++) out[i] = start[i] + dur[i];
  return out;
};

HV.PAL = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
  "#ff9da7", "#9c755f", "#8cd17d", "#a0cbe8", "#ffbe7d", "#499894", "#d37295", "#b6992d",
  "#86bcb6", "#fabfd2", "#d4a6c8", "#79706e", "#f1ce63"];
HV.DEVPAL = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
  "#17becf", "#bcbd22", "#7f7f7f"];

/* A string from the file as HTML text (for the few places that build markup). */
HV.esc = function (s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;", "'": "&#39;" })[c]);
};

/* Time formatting: ticks of `unitSec` seconds. */
HV.timeFormatter = function (unit, unitSec) {
  const units = [[1, "s"], [1e-3, "ms"], [1e-6, "µs"], [1e-9, "ns"]];
  function scaled(sec, ref) {
    for (const [f, u] of units) if (Math.abs(ref) >= f || f === 1e-9) return [sec / f, u];
    return [sec, "s"];
  }
  if (!["ns", "us", "ms", "s"].includes(unit)) {
    return {
      axis(t, step) {
        const dec = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
        return t.toFixed(dec);
      },
      short(t) { return String(+t.toPrecision(6)); },
      full(t) { return (Number.isInteger(t) ? t.toLocaleString("en-US") : t.toFixed(2)) + " " + unit; },
    };
  }
  return {
    axis(t, step) {
      const [v, u] = scaled(t * unitSec, step * unitSec);
      const [sv] = scaled(step * unitSec, step * unitSec);
      const dec = Math.max(0, Math.min(6, -Math.floor(Math.log10(sv) + 1e-9)));
      return v.toFixed(dec) + " " + u;
    },
    short(t) {
      const [v, u] = scaled(t * unitSec, t * unitSec || 1);
      return v.toPrecision(5) + " " + u;
    },
    full(t) {
      const [v, u] = scaled(t * unitSec, t * unitSec || 1);
      const raw = Number.isInteger(t) ? t.toLocaleString("en-US") : t.toFixed(2);
      return raw + " " + unit + (unit === u ? "" : " (" + v.toPrecision(6) + " " + u + ")");
    },
  };
};
