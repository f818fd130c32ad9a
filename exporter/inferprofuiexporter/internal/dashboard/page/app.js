// Copyright The inferprof Authors. SPDX-License-Identifier: Apache-2.0
//
// The inferprof dashboard: reads /dashboard.json (the same data the
// exporter serves on /signals, with history) every few seconds and draws it
// as SVG. No library, nothing loaded from elsewhere.
"use strict";

const REFRESH_MS = 5000;
const SVGNS = "http://www.w3.org/2000/svg";
const PHASES = [["queue", "var(--queue)"], ["prefill", "var(--prefill)"], ["decode", "var(--decode)"], ["other", "var(--other)"]];
const CATEGORY_COLOURS = {
  attention_prefill: "#3f7fe0", attention_decode: "#2fa36b", attention: "#5bb3d9", gemm: "#e0524b",
  moe: "#9b59d0", communication: "#b0245a", kv_cache: "#f0a13c", normalization: "#49b89a",
  activation: "#93c94f", rope: "#c77dba", sampling: "#d9c23a", quantization: "#c49a6c",
  memory: "#b5762a", other: "#a3aab8",
};
const PHASE_COLOURS = { queue: "#f0a13c", prefill: "#3f7fe0", decode: "#2fa36b" };
const STEP_COLOURS = { "prefill step": "#7aa7ec", "decode step": "#6cc39a", "mixed step": "#e08a86", "step": "#b9bfca" };

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  if (text !== undefined) e.textContent = text;
  return e;
}

// fmtDur formats seconds for people: 850 µs, 12.3 ms, 1.23 s.
function fmtDur(s) {
  if (s === null || s === undefined || !isFinite(s)) return "–";
  const a = Math.abs(s);
  if (a === 0) return "0";
  if (a < 1e-3) return (s * 1e6).toFixed(a < 1e-5 ? 2 : 0) + " µs";
  if (a < 1) return (s * 1e3).toFixed(a < 0.01 ? 2 : a < 0.1 ? 1 : 0) + " ms";
  return s.toFixed(a < 10 ? 2 : 1) + " s";
}

function fmtNum(n) {
  if (n === null || n === undefined || !isFinite(n)) return "–";
  return Math.round(n).toLocaleString("en-US");
}

function fmtBytes(b) {
  if (b < 1024 * 1024) return (b / 1024).toFixed(0) + " KiB";
  return (b / 1048576).toFixed(b < 10 * 1048576 ? 1 : 0) + " MiB";
}

function fmtTime(ms) {
  const d = new Date(ms);
  return d.toTimeString().slice(0, 8);
}

function last(arr) { return arr && arr.length ? arr[arr.length - 1] : undefined; }

function setTile(id, value, raw, sub, cls) {
  const t = document.getElementById(id);
  t.querySelector(".value").textContent = value;
  t.dataset.value = raw === null || raw === undefined ? "" : String(raw);
  t.querySelector(".sub").textContent = sub || "";
  t.classList.remove("ok", "warn");
  if (cls) t.classList.add(cls);
}

// lineChart draws series of [t, v] (or [t, v, count]) on a time axis;
// opts.target draws a dashed horizontal line; opts.fmt formats the y axis.
// Each point carries its raw figures (data-series, data-t, data-value,
// data-count) so tests and scripts read numbers, not pixels.
function lineChart(host, series, opts) {
  host.replaceChildren();
  const pts = series.flatMap((s) => s.points);
  if (!pts.length) {
    host.appendChild(el("div", { class: "empty" }, opts.empty || "no data yet"));
    return;
  }
  const W = host.clientWidth || 300, H = host.clientHeight || 150;
  const compact = H < 100;
  const L = compact ? 34 : 52, R = 8, T = compact ? 4 : 8, B = compact ? 4 : 18;
  let t0 = Math.min(...pts.map((p) => p[0])), t1 = Math.max(...pts.map((p) => p[0]));
  if (t1 === t0) { t0 -= 30000; t1 += 30000; }
  let y1 = Math.max(...pts.map((p) => p[1]), opts.target || 0);
  if (opts.max !== undefined) y1 = Math.max(y1, opts.max);
  if (y1 <= 0) y1 = 1;
  y1 *= 1.1;
  const x = (t) => L + (t - t0) / (t1 - t0) * (W - L - R);
  const y = (v) => T + (1 - v / y1) * (H - T - B);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
  const axis = svg("g", { class: "axis" });
  const ticks = compact ? 1 : 3;
  for (let i = 0; i <= ticks; i++) {
    const v = y1 * i / ticks;
    axis.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid-line" }));
    axis.appendChild(svg("text", { x: L - 6, y: y(v) + 3, "text-anchor": "end" }, opts.fmt(v)));
  }
  if (!compact) {
    axis.appendChild(svg("text", { x: L, y: H - 4 }, fmtTime(t0)));
    axis.appendChild(svg("text", { x: W - R, y: H - 4, "text-anchor": "end" }, fmtTime(t1)));
  }
  s.appendChild(axis);
  if (opts.target) {
    s.appendChild(svg("line", { x1: L, x2: W - R, y1: y(opts.target), y2: y(opts.target),
      stroke: "#e0524b", "stroke-dasharray": "4 3", "stroke-width": 1 }));
  }
  for (const se of series) {
    const p = se.points.filter((q) => q[1] !== null && isFinite(q[1]));
    if (!p.length) continue;
    if (p.length > 1) {
      s.appendChild(svg("polyline", { points: p.map((q) => `${x(q[0])},${y(q[1])}`).join(" "),
        fill: "none", stroke: se.color, "stroke-width": 1.8, "vector-effect": "non-scaling-stroke" }));
    }
    for (const q of p) {
      const c = svg("circle", { cx: x(q[0]), cy: y(q[1]), r: p.length > 40 ? 1.2 : 2.4, fill: se.color,
        "data-series": se.name, "data-t": String(q[0]), "data-value": String(q[1]),
        "data-count": q.length > 2 ? String(q[2]) : null });
      c.appendChild(svg("title", {}, `${se.name} ${opts.fmt(q[1])} at ${fmtTime(q[0])}`));
      s.appendChild(c);
    }
  }
  host.appendChild(s);
}

// stackedBars draws one bar per point with its parts stacked; each part
// carries its raw figure (data-t, data-part, data-value).
function stackedBars(host, points, parts, fmt) {
  host.replaceChildren();
  if (!points.length) {
    host.appendChild(el("div", { class: "empty" }, "no data yet"));
    return;
  }
  const W = host.clientWidth || 300, H = host.clientHeight || 190;
  const L = 52, R = 8, T = 8, B = 18;
  const total = (p) => parts.reduce((a, [k]) => a + (p[k] || 0), 0);
  const y1 = Math.max(...points.map(total), 1e-9) * 1.1;
  const n = points.length;
  const bw = Math.max(2, Math.min(28, (W - L - R) / n - 2));
  const x = (i) => L + (i + 0.5) * (W - L - R) / n - bw / 2;
  const y = (v) => T + (1 - v / y1) * (H - T - B);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
  const axis = svg("g", { class: "axis" });
  for (let i = 0; i <= 3; i++) {
    const v = y1 * i / 3;
    axis.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid-line" }));
    axis.appendChild(svg("text", { x: L - 6, y: y(v) + 3, "text-anchor": "end" }, fmt(v)));
  }
  axis.appendChild(svg("text", { x: L, y: H - 4 }, fmtTime(points[0].t)));
  axis.appendChild(svg("text", { x: W - R, y: H - 4, "text-anchor": "end" }, fmtTime(points[n - 1].t)));
  s.appendChild(axis);
  points.forEach((p, i) => {
    let acc = 0;
    for (const [k, colour] of parts) {
      const v = p[k] || 0;
      if (v <= 0) continue;
      const r = svg("rect", { x: x(i), y: y(acc + v), width: bw, height: Math.max(0.5, y(acc) - y(acc + v)), fill: colour,
        "data-t": String(p.t), "data-part": k, "data-value": String(v) });
      r.appendChild(svg("title", {}, `${fmtTime(p.t)} ${k}: ${fmt(v)}`));
      s.appendChild(r);
      acc += v;
    }
  });
  host.appendChild(s);
}

function legend(host, parts) {
  host.replaceChildren(...parts.map(([name, colour]) => {
    const s = el("span");
    const i = el("i");
    i.style.background = colour;
    s.append(i, name);
    return s;
  }));
}

function latencyCharts(d) {
  const targets = { ttft: d.targets.ttft, tpot: d.targets.tpot, e2e: d.targets.e2e };
  for (const key of ["ttft", "tpot", "itl", "e2e"]) {
    const pts = d.latency[key] || [];
    lineChart(document.getElementById("chart-" + key), [
      { name: "p50", color: "var(--p50)", points: pts.map((p) => [p.t, p.p50, p.count]) },
      { name: "p90", color: "var(--p90)", points: pts.map((p) => [p.t, p.p90, p.count]) },
      { name: "p99", color: "var(--p99)", points: pts.map((p) => [p.t, p.p99, p.count]) },
    ], { fmt: fmtDur, target: targets[key] || 0, empty: key === "itl" ? "no engine steps yet (inter-token latency needs the step hook)" : "no requests yet" });
    // Without request spans (tracing off) the chart is the engine's own
    // histogram: say so.
    const src = (d.latency_source || {})[key];
    document.getElementById("src-" + key).textContent = src === "engine_metrics" ? "· from the engine's /metrics (no request spans)" : "";
  }
}

// engines draws each engine instance's own gauges, as the GPU cards do.
function engines(d) {
  const host = $("#engines");
  host.replaceChildren();
  const list = d.engines || [];
  if (!list.length) {
    host.appendChild(el("div", { class: "empty" }, "no engine metrics (start the engine with inferprof-run: docs/engine-metrics.md)"));
    return;
  }
  for (const e of list) {
    const kv = last(e.kv_cache_usage), run = last(e.running), wait = last(e.waiting);
    const card = el("div", { class: "gpu engine", "data-instance": e.instance,
      "data-kv": kv ? String(kv[1]) : "", "data-running": run ? String(run[1]) : "", "data-waiting": wait ? String(wait[1]) : "" });
    card.appendChild(el("div", { class: "title" }, `${e.service || "engine"}${e.instance ? " · " + e.instance : ""}`));
    const metrics = el("div", { class: "metrics" });
    const draws = [];
    const add = (label, value, series, fmt, max) => {
      const box = el("div", { class: "metric" });
      box.append(el("div", { class: "muted" }, label), el("div", { class: "big" }, value));
      const c = el("div", { class: "chart" });
      box.appendChild(c);
      metrics.appendChild(box);
      draws.push(() => lineChart(c, series, { fmt, max, empty: "–" }));
    };
    add("KV-cache usage", kv ? (kv[1] * 100).toFixed(1) + " %" : "–",
      [{ name: "KV cache", color: "#9b59d0", points: e.kv_cache_usage.map(([t, v]) => [t, v * 100]) }], (v) => v.toFixed(0) + "%", 100);
    add("running · waiting", run ? `${fmtNum(run[1])} · ${wait ? fmtNum(wait[1]) : "–"}` : "–", [
      { name: "running", color: "#2fa36b", points: e.running },
      { name: "waiting", color: "#f0a13c", points: e.waiting },
    ], (v) => v.toFixed(0));
    const pre = (e.preemptions || []).reduce((a, p) => a + p[1], 0);
    add("preemptions", fmtNum(pre), [{ name: "preemptions", color: "#e0524b", points: e.preemptions }], (v) => v.toFixed(0));
    card.appendChild(metrics);
    host.appendChild(card);
    draws.forEach((f) => f());
  }
}

// errorsTable lists the last error records.
function errorsTable(d) {
  const body = $("#errors tbody");
  body.replaceChildren();
  const rows = d.errors || [];
  if (!rows.length) {
    const tr = el("tr");
    tr.appendChild(el("td", { colspan: "4", class: "empty" }, "no errors"));
    body.appendChild(tr);
    return;
  }
  for (const r of rows) {
    const tr = el("tr", { "data-kind": r.kind || r.severity });
    tr.append(el("td", {}, fmtTime(r.t)), el("td", {}, r.service || ""), el("td", {}, r.kind || r.severity),
      el("td", { class: "message" }, r.message));
    body.appendChild(tr);
  }
}

function tiles(d) {
  const t = d.totals;
  setTile("tile-requests", fmtNum(t.requests + t.errors), t.requests + t.errors, `${fmtNum(t.requests)} succeeded`);
  if (t.goodput_ratio !== null) {
    const pct = t.goodput_ratio * 100;
    setTile("tile-goodput", pct.toFixed(1) + " %", pct.toFixed(3), `${fmtNum(t.good)} of ${fmtNum(t.requests)} met every target`,
      pct >= 90 ? "ok" : "warn");
  } else {
    setTile("tile-goodput", "–", null, "no successful request yet");
  }
  for (const key of ["ttft", "tpot", "itl"]) {
    const p = last(d.latency[key] || []);
    const target = d.targets[key];
    const v = p ? p.p50 : null;
    setTile("tile-" + key, fmtDur(v), v, p ? `p99 ${fmtDur(p.p99)} · ${fmtNum(p.count)} samples` : "",
      v !== null && target ? (v <= target ? "ok" : "warn") : "");
  }
  setTile("tile-errors", fmtNum(t.errors), t.errors, t.errors ? "with error.type" : "none", t.errors ? "warn" : "");
  const utils = d.gpus.map((g) => last(g.utilization)).filter((u) => u !== undefined).map((u) => u[1]);
  if (utils.length) {
    const mean = utils.reduce((a, b) => a + b, 0) / utils.length;
    setTile("tile-gpu", mean.toFixed(0) + " %", mean.toFixed(3), `mean of ${utils.length} GPU${utils.length > 1 ? "s" : ""}, last reading`);
  } else {
    setTile("tile-gpu", "–", null, "no NVML readings");
  }
}

function phasesChart(d) {
  stackedBars($("#chart-phases"), d.phases, PHASES, fmtDur);
  legend($("#legend-phases"), PHASES);
}

function goodputChart(d) {
  const pts = d.goodput.map((p) => ({ t: p.t, good: p.good, missed: Math.max(0, p.requests - p.good), failed: p.errors }));
  const parts = [["good", "var(--good)"], ["missed", "var(--miss)"], ["failed", "var(--bad)"]];
  stackedBars($("#chart-goodput"), pts, parts, (v) => fmtNum(v));
  legend($("#legend-goodput"), [["met every target", "var(--good)"], ["missed a target", "var(--miss)"], ["failed", "var(--bad)"]]);
  const t = [];
  if (d.targets.ttft) t.push("TTFT ≤ " + fmtDur(d.targets.ttft));
  if (d.targets.tpot) t.push("TPOT ≤ " + fmtDur(d.targets.tpot));
  if (d.targets.e2e) t.push("e2e ≤ " + fmtDur(d.targets.e2e));
  $("#targets").textContent = t.length ? "targets: " + t.join(", ") : "no targets set";
}

function kernels(d) {
  const k = d.kernels;
  $("#kernel-total").textContent = k.total_seconds ? fmtDur(k.total_seconds) + " of kernel time" : "";
  const cats = $("#categories");
  cats.replaceChildren();
  if (!k.categories.length) cats.appendChild(el("div", { class: "empty" }, "no kernel activity (cupti receiver)"));
  for (const c of k.categories) {
    const row = el("div", { class: "row", "data-category": c.category, "data-seconds": String(c.seconds) });
    const track = el("div", { class: "track" });
    const fill = el("div", { class: "fill" });
    fill.style.width = (c.share * 100).toFixed(2) + "%";
    fill.style.background = CATEGORY_COLOURS[c.category] || "#8a93a6";
    track.appendChild(fill);
    row.append(el("div", {}, c.category), track, el("div", { class: "num" }, `${fmtDur(c.seconds)} · ${(c.share * 100).toFixed(1)}%`));
    cats.appendChild(row);
  }
  const body = $("#kernels tbody");
  body.replaceChildren();
  if (!k.top.length) {
    const tr = el("tr");
    tr.appendChild(el("td", { colspan: 4, class: "empty" }, "no kernels yet"));
    body.appendChild(tr);
  }
  for (const r of k.top) {
    const tr = el("tr", { "data-kernel": r.name, "data-seconds": String(r.seconds) });
    const chip = el("span", { class: "chip" }, r.category);
    chip.style.background = CATEGORY_COLOURS[r.category] || "#8a93a6";
    const cat = el("td");
    cat.appendChild(chip);
    tr.append(el("td", { class: "name", title: r.name }, r.name), cat, el("td", { class: "num" }, fmtDur(r.seconds)), el("td", { class: "num" }, fmtNum(r.count)));
    body.appendChild(tr);
  }
}

function gpus(d) {
  const host = $("#gpus");
  host.replaceChildren();
  if (!d.gpus.length) {
    host.appendChild(el("div", { class: "empty" }, "no GPU readings (nvml receiver)"));
    return;
  }
  for (const g of d.gpus) {
    const u = last(g.utilization), m = last(g.memory_gib), p = last(g.power_w);
    const card = el("div", { class: "gpu", "data-gpu": g.id,
      "data-util": u ? String(u[1]) : "", "data-memory-gib": m ? String(m[1]) : "", "data-power-w": p ? String(p[1]) : "" });
    card.appendChild(el("div", { class: "title" }, `${g.name || "GPU"} · ${g.id}${g.host ? " · " + g.host : ""}`));
    const metrics = el("div", { class: "metrics" });
    const add = (label, value, series, colour, fmt, max) => {
      const box = el("div", { class: "metric" });
      box.append(el("div", { class: "muted" }, label), el("div", { class: "big" }, value));
      const c = el("div", { class: "chart" });
      box.appendChild(c);
      metrics.appendChild(box);
      return () => lineChart(c, [{ name: label, color: colour, points: series }], { fmt, max, empty: "–" });
    };
    const draws = [
      add("utilization", u ? u[1].toFixed(0) + " %" : "–", g.utilization, "#3f7fe0", (v) => v.toFixed(0) + "%", 100),
      add("memory", m ? m[1].toFixed(1) + (g.memory_limit_gib ? ` / ${g.memory_limit_gib.toFixed(0)}` : "") + " GiB" : "–",
        g.memory_gib, "#9b59d0", (v) => v.toFixed(0), g.memory_limit_gib || undefined),
      add("power", p ? p[1].toFixed(0) + " W" : "–", g.power_w, "#e0524b", (v) => v.toFixed(0)),
    ];
    card.appendChild(metrics);
    host.appendChild(card);
    draws.forEach((f) => f());
  }
}

function breakdownBar(r) {
  const bar = el("div", { class: "breakdown" });
  const total = r.e2e || 1;
  for (const [k, colour] of PHASES) {
    const v = r[k];
    if (!v || v <= 0) continue;
    const s = el("span", { title: `${k} ${fmtDur(v)}`, "data-phase": k, "data-seconds": String(v) });
    s.style.width = Math.min(100, v / total * 100).toFixed(2) + "%";
    s.style.background = colour;
    bar.appendChild(s);
  }
  return bar;
}

function slowestTable(d) {
  const body = $("#slowest tbody");
  body.replaceChildren();
  $("#slowest-note").textContent = d.timeline.enabled
    ? `of the ${fmtNum(d.timeline.requests)} requests the timeline holds (${fmtBytes(d.timeline.used_bytes)} of its ${fmtBytes(d.timeline.budget_bytes)})`
    : "the timeline is off (timeline.enabled)";
  if (!d.slowest.length) {
    const tr = el("tr");
    tr.appendChild(el("td", { colspan: 8, class: "empty" }, "no request spans yet (add inferprof_ui to the traces pipeline)"));
    body.appendChild(tr);
  }
  for (const r of d.slowest) {
    // Raw figures as data-* (empty: not measured), for tests and scripts.
    const raw = (v) => (v === null || v === undefined ? "" : String(v));
    const tr = el("tr", { "data-request-id": r.request_id, "data-e2e": String(r.e2e), "data-ttft": raw(r.ttft),
      "data-tpot": raw(r.tpot), "data-queue": raw(r.queue), "data-prefill": raw(r.prefill), "data-decode": raw(r.decode),
      "data-other": raw(r.other), "data-output-tokens": raw(r.output_tokens), "data-error": r.error || "" });
    const id = el("td", { class: "name", title: `${r.request_id} · trace ${r.trace_id} · ${r.instance}` }, r.request_id || r.trace_id);
    if (r.error) id.appendChild(el("span", { class: "err" }, " " + r.error));
    const bd = el("td");
    bd.appendChild(breakdownBar(r));
    const link = el("td", { class: "num" });
    const view = el("a", { class: "view", href: "#view", "data-timeline": r.timeline }, "timeline ›");
    view.addEventListener("click", (ev) => {
      ev.preventDefault();
      openViewer(r.timeline, r.trace_id, r.request_id);
    });
    link.appendChild(view);
    tr.append(id, el("td", {}, r.model), el("td", { class: "num" }, fmtDur(r.e2e)), bd,
      el("td", { class: "num" }, fmtDur(r.ttft)), el("td", { class: "num" }, fmtDur(r.tpot)),
      el("td", { class: "num" }, r.output_tokens === null ? "–" : fmtNum(r.output_tokens)), link);
    body.appendChild(tr);
  }
}

// ---- timeline viewer: draws /timeline's Chrome trace as lanes ----

function sliceColour(e) {
  if (e.cat === "phase") return PHASE_COLOURS[e.name] || "#8a93a6";
  if (e.cat === "engine.step") return STEP_COLOURS[e.name] || "#b9bfca";
  if (e.cat === "request") return e.args && e.args.error_type ? "#f2b8b5" : "#d7dbe2";
  return CATEGORY_COLOURS[e.cat] || "#8a93a6";
}

async function openViewer(url, traceId, requestId) {
  const card = $("#viewer-card");
  card.hidden = false;
  $("#viewer-title").textContent = `request ${requestId || traceId}`;
  $("#viewer-download").setAttribute("href", url + "&download=1");
  const host = $("#viewer");
  host.replaceChildren(el("div", { class: "empty" }, "loading…"));
  document.body.dataset.timelineReady = "0";
  const res = await fetch(url);
  if (!res.ok) {
    host.replaceChildren(el("div", { class: "empty" }, `timeline: ${res.status} ${await res.text()}`));
    return;
  }
  drawTimeline(host, await res.json(), traceId);
  document.body.dataset.timelineReady = "1";
  card.scrollIntoView({ block: "start" });
}

function drawTimeline(host, trace, traceId) {
  host.replaceChildren();
  const evs = trace.traceEvents;
  const pname = {}, tname = {}, psort = {}, tsort = {};
  for (const e of evs) {
    if (e.ph !== "M") continue;
    if (e.name === "process_name") pname[e.pid] = e.args.name;
    if (e.name === "thread_name") tname[e.pid + "/" + e.tid] = e.args.name;
    if (e.name === "process_sort_index") psort[e.pid] = e.args.sort_index;
    if (e.name === "thread_sort_index") tsort[e.pid + "/" + e.tid] = e.args.sort_index;
  }
  const rows = new Map(); // key -> {pid, tid, label, slices, instants, counter}
  let t0 = Infinity, t1 = -Infinity;
  const rowOf = (key, init) => {
    if (!rows.has(key)) rows.set(key, Object.assign({ slices: [], instants: [], points: {} }, init));
    return rows.get(key);
  };
  for (const e of evs) {
    if (e.ph === "X") {
      rowOf(e.pid + "/" + e.tid, { pid: e.pid, tid: e.tid, kind: "thread" }).slices.push(e);
      t0 = Math.min(t0, e.ts); t1 = Math.max(t1, e.ts + e.dur);
    } else if (e.ph === "i") {
      rowOf(e.pid + "/" + e.tid, { pid: e.pid, tid: e.tid, kind: "thread" }).instants.push(e);
    } else if (e.ph === "C") {
      const r = rowOf(e.pid + "/C/" + e.name, { pid: e.pid, tid: -1, kind: "counter", name: e.name });
      for (const [k, v] of Object.entries(e.args)) (r.points[k] = r.points[k] || []).push([e.ts, v]);
      t0 = Math.min(t0, e.ts); t1 = Math.max(t1, e.ts);
    }
  }
  if (!rows.size || !isFinite(t0)) {
    host.appendChild(el("div", { class: "empty" }, "nothing in this window (the timeline may have evicted it)"));
    return;
  }
  if (t1 <= t0) t1 = t0 + 1;
  const order = [...rows.values()].sort((a, b) =>
    (psort[a.pid] ?? a.pid) - (psort[b.pid] ?? b.pid) || a.pid - b.pid ||
    (a.kind === b.kind ? 0 : a.kind === "counter" ? 1 : -1) ||
    (tsort[a.pid + "/" + a.tid] ?? a.tid) - (tsort[b.pid + "/" + b.tid] ?? b.tid) || String(a.name).localeCompare(String(b.name)));
  const W = Math.max(host.clientWidth || 1000, 900), LABEL = 210, R = 10;
  const x = (ts) => LABEL + (ts - t0) / (t1 - t0) * (W - LABEL - R);
  const depthH = 14;
  let y = 22;
  const parts = [];
  let lastPid = null;
  const pos = {}; // pid/tid -> [y, height] for flows
  for (const r of order) {
    if (r.pid !== lastPid) {
      y += 6;
      parts.push(svg("text", { x: 2, y: y + 10, class: "proc-label" }, pname[r.pid] || "pid " + r.pid));
      y += 16;
      lastPid = r.pid;
    }
    if (r.kind === "counter") {
      const h = 26;
      parts.push(svg("text", { x: 10, y: y + 15, class: "lane-label" }, r.name));
      const series = Object.entries(r.points);
      const vmax = Math.max(1e-9, ...series.flatMap(([, p]) => p.map((q) => q[1])));
      const colours = ["#3f7fe0", "#2fa36b", "#e0524b", "#9b59d0"];
      series.forEach(([k, p], i) => {
        p.sort((a, b) => a[0] - b[0]);
        const yv = (v) => y + h - 2 - v / vmax * (h - 4);
        if (p.length > 1) {
          const line = svg("polyline", { points: p.map((q) => `${x(q[0])},${yv(q[1])}`).join(" "), fill: "none", stroke: colours[i % 4], "stroke-width": 1.2 });
          line.appendChild(svg("title", {}, `${r.name} ${k}: max ${vmax}`));
          parts.push(line);
        } else {
          const dot = svg("circle", { cx: x(p[0][0]), cy: yv(p[0][1]), r: 2.5, fill: colours[i % 4] });
          dot.appendChild(svg("title", {}, `${r.name} ${k}: ${p[0][1]}`));
          parts.push(dot);
        }
      });
      y += h + 2;
      continue;
    }
    // Depth of each slice: nested slices (phases in a request) go below.
    const sl = r.slices.slice().sort((a, b) => a.ts - b.ts || b.dur - a.dur);
    const stack = [];
    let maxDepth = 0;
    for (const s of sl) {
      while (stack.length && s.ts >= stack[stack.length - 1].ts + stack[stack.length - 1].dur - 1e-6) stack.pop();
      s._depth = stack.length;
      maxDepth = Math.max(maxDepth, s._depth);
      stack.push(s);
    }
    const h = (maxDepth + 1) * depthH + 2;
    parts.push(svg("text", { x: 10, y: y + 11, class: "lane-label" }, tname[r.pid + "/" + r.tid] || "tid " + r.tid));
    pos[r.pid + "/" + r.tid] = [y, depthH];
    for (const s of sl) {
      const x0 = x(s.ts), w = Math.max(0.6, x(s.ts + s.dur) - x0);
      const rect = svg("rect", { x: x0, y: y + s._depth * depthH, width: w, height: depthH - 2, rx: 1.5, fill: sliceColour(s),
        class: s.args && s.args.trace_id === traceId && s.cat === "request" ? "sel" : null, "data-name": s.name });
      rect.appendChild(svg("title", {}, `${s.name}\n${fmtDur(s.dur / 1e6)}` +
        (s.args ? "\n" + Object.entries(s.args).map(([k, v]) => `${k}: ${typeof v === "number" && k.endsWith("_s") ? fmtDur(v) : v}`).join("\n") : "")));
      parts.push(rect);
      if (w > 60) {
        parts.push(svg("text", { x: x0 + 3, y: y + s._depth * depthH + 10, "pointer-events": "none" },
          s.name.length * 5.5 > w - 6 ? s.name.slice(0, Math.max(1, Math.floor((w - 6) / 5.5))) : s.name));
      }
    }
    for (const i of r.instants) {
      parts.push(svg("line", { x1: x(i.ts), x2: x(i.ts), y1: y, y2: y + h - 2, stroke: "#1d2330", "stroke-width": 1, opacity: 0.55 }));
    }
    y += h + 2;
  }
  // Flows: step -> kernel.
  const starts = {};
  for (const e of evs) if (e.ph === "s") starts[e.id] = e;
  for (const e of evs) {
    if (e.ph !== "f" || !starts[e.id]) continue;
    const s = starts[e.id];
    const a = pos[s.pid + "/" + s.tid], b = pos[e.pid + "/" + e.tid];
    if (!a || !b) continue;
    parts.push(svg("line", { x1: x(s.ts), y1: a[0] + 6, x2: x(e.ts), y2: b[0] + 6, stroke: "#1d2330", "stroke-width": 0.8, opacity: 0.5, class: "flow" }));
  }
  const axis = svg("g", { class: "axis" });
  const span = (t1 - t0) / 1e6;
  for (let i = 0; i <= 5; i++) {
    const ts = t0 + (t1 - t0) * i / 5;
    axis.appendChild(svg("line", { x1: x(ts), x2: x(ts), y1: 14, y2: y, class: "grid-line" }));
    axis.appendChild(svg("text", { x: x(ts), y: 11, "text-anchor": i === 0 ? "start" : i === 5 ? "end" : "middle" },
      "+" + fmtDur(span * i / 5)));
  }
  const s = svg("svg", { width: W, height: y + 8, viewBox: `0 0 ${W} ${y + 8}` });
  s.append(axis, ...parts);
  host.appendChild(s);
}

// ---- refresh loop ----

let failures = 0;

async function refresh() {
  try {
    const res = await fetch("/dashboard.json", { cache: "no-store" });
    if (!res.ok) throw new Error(`/dashboard.json: ${res.status}`);
    const d = await res.json();
    $("#version").textContent = d.version ? "v" + d.version : "";
    tiles(d);
    latencyCharts(d);
    phasesChart(d);
    goodputChart(d);
    kernels(d);
    engines(d);
    errorsTable(d);
    gpus(d);
    slowestTable(d);
    failures = 0;
    const st = $("#status");
    st.className = "status live";
    st.textContent = `live · updated ${fmtTime(d.now_ms)} · collecting since ${fmtTime(d.start_ms)}`;
    document.body.dataset.ready = "1";
  } catch (err) {
    failures++;
    const st = $("#status");
    st.className = "status stale";
    st.textContent = `cannot reach the collector (${failures}×): ${err.message}`;
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
