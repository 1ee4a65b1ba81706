// The kgqa trace viewer: ask a question, browse runs, read how each answer was found.
// Plain JavaScript, no library, nothing loaded from elsewhere. Every string that comes from the server (KG labels,
// questions, model replies, trace fields) is inserted as text (createTextNode / textContent), never as markup.
"use strict";

(function () {
  const TOKEN_KEY = "kgqa.token";
  const RECENT_KEY = "kgqa.recent";
  let health = null;
  let methodsCache = null;
  let tick = null;

  // ---------------------------------------------------------------------------------------------------------------
  // DOM helpers: text only

  function h(tag, props, ...children) {
    const node = document.createElement(tag);
    setProps(node, props);
    append(node, children);
    return node;
  }

  const SVG_NS = "http://www.w3.org/2000/svg";

  function s(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined) node.setAttribute(key, String(value));
    }
    append(node, children);
    return node;
  }

  function setProps(node, props) {
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "href") node.setAttribute("href", safeHref(value));
      else node.setAttribute(key, value === true ? "" : String(value));
    }
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }

  function safeHref(value) {
    const text = String(value);
    return text.startsWith("#") || text.startsWith("/") ? text : "#";
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  const enc = encodeURIComponent;
  const view = () => document.getElementById("view");

  function fmtPct(value) {
    return typeof value === "number" ? (100 * value).toFixed(1) : "-";
  }

  function fmtNum(value, digits) {
    if (typeof value !== "number") return "-";
    return digits === undefined ? value.toLocaleString("en") : value.toFixed(digits);
  }

  // A metric's value as its registered format asks (kgqa.eval.metric_registry.Format): rates in %, numbers with two
  // decimals, whole numbers (tokens) without.
  function fmtMetric(value, format) {
    if (format === "rate") return fmtPct(value);
    return fmtNum(value, format === "whole" ? 0 : 2);
  }

  function metricHeading(metric, label) {
    return label + (metric.format === "rate" ? " %" : "");
  }

  function badge(text, cls) {
    return h("span", { class: "badge " + (cls || "") }, text);
  }

  function section(title, ...children) {
    return h("section", { class: "panel" }, h("h2", {}, title), ...children);
  }

  function errorBox(err) {
    const box = h("div", { class: "error", role: "alert" }, h("strong", {}, "Error: "), err.message || String(err));
    if (err.body && err.body.trace_id) {
      box.appendChild(h("div", {}, "Trace: ", h("a", { href: "#/traces/" + enc(err.body.trace_id) }, err.body.trace_id)));
    }
    return box;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The API

  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  class ApiError extends Error {
    constructor(status, body) {
      super((body && body.message) || "HTTP " + status);
      this.status = status;
      this.body = body;
    }
  }

  async function api(path, options) {
    const opts = Object.assign({ headers: {} }, options || {});
    opts.headers = Object.assign({ Accept: "application/json" }, opts.headers);
    if (token()) opts.headers.Authorization = "Bearer " + token();
    const response = await fetch(path, opts);
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      if (response.status === 401) showTokenForm(true);
      throw new ApiError(response.status, body);
    }
    return body;
  }

  // POST /v1/ask/stream: one JSON event per line, handed to onEvent as each line arrives.
  async function askStream(body, onEvent) {
    const headers = { "Content-Type": "application/json", Accept: "application/x-ndjson" };
    if (token()) headers.Authorization = "Bearer " + token();
    const response = await fetch("/v1/ask/stream", { method: "POST", headers, body: JSON.stringify(body) });
    if (!response.ok) {
      let error = null;
      try { error = await response.json(); } catch (e) { error = null; }
      if (response.status === 401) showTokenForm(true);
      throw new ApiError(response.status, error);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (line) onEvent(JSON.parse(line));
      }
      if (done) break;
    }
  }

  // The token may come in the address: #token=T (the address kgqa serve prints), or beside a page's route, as in
  // #/traces/ID?token=T or #/traces/ID&token=T (a link to one trace). It is kept for the tab and taken out of the
  // address, which keeps the route: a trace opened by its link shows that trace, not the Ask page.
  function takeTokenFromUrl() {
    const match = /(?:^#|[#?&])token=([^&]*)/.exec(location.hash);
    if (!match) return;
    if (match[1]) sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    const rest = location.hash.slice(1).replace(/(^|[?&])token=[^&]*/, "$1").replace(/&{2,}/g, "&")
      .replace(/[?&]+$/, "").replace(/\?&+/, "?").replace(/^&+/, "");
    history.replaceState(null, "", location.pathname + "#" + (rest && rest !== "?" ? rest : "/ask"));
  }

  function showTokenForm(show) {
    document.getElementById("token-form").hidden = !show;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Shared renderers

  function answerList(answers, withVerdicts) {
    if (!answers || !answers.length) return h("p", { class: "muted" }, "(no answers)");
    return h("ol", { class: "answers" }, answers.map((a) => {
      const item = h("li", { class: "answer" }, h("span", { class: "answer-name" }, a.name || a.id || ""));
      if (a.id) item.appendChild(h("span", { class: "id" }, a.id));
      if (withVerdicts) item.appendChild(verdictBadges(a.strict, a.legacy));
      return item;
    }));
  }

  function verdictBadges(strict, legacy) {
    return h("span", { class: "verdicts" },
      badge("strict " + (strict ? "✓" : "✗"), strict ? "ok" : "bad"),
      badge("legacy " + (legacy ? "✓" : "✗"), legacy ? "ok" : "bad"));
  }

  function groundingBadge(value) {
    return badge(value || "?", "grounding g-" + (value || "none"));
  }

  function summaryBlock(summary) {
    const lines = (summary && summary.lines) || [];
    if (!lines.length) return h("p", { class: "muted" }, "(the method gives no summary)");
    return h("ul", { class: "summary" }, lines.map((line) => h("li", {}, line)));
  }

  function usageLine(usage) {
    if (!usage) return null;
    return h("p", { class: "usage muted" },
      `LLM: ${usage.calls || 0} calls, ${usage.prompt_tokens || 0} prompt + ${usage.completion_tokens || 0} completion tokens`);
  }

  // -- the steps -------------------------------------------------------------------------------------------------

  const CATEGORIES = [
    [/fallback|limit|dead_end|exhausted|error/, "fallback"],
    [/decision|judge|verify|reason|reflect|relation_check|audit/, "judgement"],
    [/beam|neighbours|round|relation_search|prune|explore/, "search"],
    [/plan|revision|edit|decompose|bandit|constraint\.init|references/, "plan"],
    [/expand|memory|aggregate|observe/, "expansion"],
    [/answer|execute|evidence|instantiate/, "answer"],
  ];

  function category(step) {
    for (const [pattern, name] of CATEGORIES) if (pattern.test(step)) return name;
    return "other";
  }

  function valueNode(value) {
    if (value === null || value === undefined) return h("span", { class: "muted" }, "null");
    if (typeof value !== "object") return h("span", { class: "val" }, String(value));
    const compact = JSON.stringify(value);
    if (compact.length <= 140) return h("code", { class: "val" }, compact);
    const flat = (v) => v !== null && typeof v === "object" && !Array.isArray(v)
      && Object.values(v).every((x) => x === null || typeof x !== "object");
    if (Array.isArray(value) && value.length && value.length <= 200 && value.every(flat)) {
      // A list of records (kept relations with scores, beams, candidates): one line each.
      return h("ol", { class: "val records" }, value.map((item) => h("li", {},
        Object.entries(item).map(([k, v], i) => [i ? "  " : "", h("span", { class: "muted" }, k + "="), String(v)]))));
    }
    let text = JSON.stringify(value, null, 1);
    if (text.length > 4000) text = text.slice(0, 4000) + " …";
    return h("pre", { class: "val" }, text);
  }

  function stepList(trace) {
    if (!trace || !trace.length) return h("p", { class: "muted" }, "(no steps recorded)");
    return h("ol", { class: "steps" }, trace.map((event, i) => stepItem(event, i)));
  }

  function stepItem(event, i) {
    const step = String((event && event.step) || "?");
    const cat = category(step);
    const fields = Object.entries(event || {}).filter(([k]) => k !== "step");
    return h("li", { class: "step cat-" + cat, dataset: { step: step } },
      h("div", { class: "step-head" }, h("span", { class: "step-no" }, String(i + 1)), h("code", {}, step),
        badge(cat, "cat")),
      fields.length ? h("dl", { class: "fields" }, fields.map(([k, v]) => [h("dt", {}, k), h("dd", {}, valueNode(v))]))
        : null);
  }

  function callList(calls, dropped) {
    if (calls === null || calls === undefined) {
      return h("p", { class: "muted" }, "This run kept each question's usage, not its prompts (run it with `kgqa eval --record-calls` to keep them); ask the question live to see every call.");
    }
    if (!calls.length) return h("p", { class: "muted" }, "(no LLM calls)");
    const list = h("div", { class: "calls" }, calls.map((call, i) => h("details", { class: "call" },
      h("summary", {},
        h("span", { class: "step-no" }, String(i + 1)), h("code", {}, call.step || "(no step)"),
        h("span", { class: "muted" }, ` ${call.prompt_tokens} + ${call.completion_tokens} tokens, ${fmtNum(call.latency_s * 1000, 1)} ms`),
        call.cached ? badge("cached", "") : null, call.error ? badge("error", "bad") : null),
      (call.messages || []).map((m) => h("div", { class: "message" }, h("div", { class: "role" }, m.role),
        h("pre", {}, m.content))),
      h("div", { class: "message reply" }, h("div", { class: "role" }, "reply"),
        h("pre", { class: "reply-text" }, call.reply === null ? "(no reply)" : call.reply)),
      call.error ? h("div", { class: "error" }, call.error) : null)));
    if (dropped) list.appendChild(h("p", { class: "muted" }, `${dropped} more calls not kept`));
    return list;
  }

  // -- the evidence graph ----------------------------------------------------------------------------------------

  const KIND_ORDER = { topic: 0, node: 1, cvt: 2, literal: 3, answer: 4 };

  function shorten(text, max) {
    return text.length > max ? text.slice(0, max - 1) + "…" : text;
  }

  function relationLabel(relation) {
    const parts = relation.split(".");
    return shorten(parts.length > 2 ? parts.slice(-2).join(".") : relation, 30);
  }

  function layout(graph) {
    const ids = graph.nodes.map((n) => n.id);
    const adj = new Map(ids.map((id) => [id, []]));
    for (const e of graph.edges) {
      if (adj.has(e.source) && adj.has(e.target)) {
        adj.get(e.source).push(e.target);
        adj.get(e.target).push(e.source);
      }
    }
    const level = new Map();
    const roots = graph.nodes.filter((n) => n.kind === "topic").map((n) => n.id);
    const bfs = (starts) => {
      const queue = [];
      for (const r of starts) if (!level.has(r)) { level.set(r, 0); queue.push(r); }
      while (queue.length) {
        const id = queue.shift();
        for (const next of adj.get(id)) {
          if (!level.has(next)) { level.set(next, level.get(id) + 1); queue.push(next); }
        }
      }
    };
    bfs(roots);
    for (const id of ids) if (!level.has(id)) bfs([id]);
    const columns = [];
    for (const n of graph.nodes) {
      const l = level.get(n.id);
      (columns[l] = columns[l] || []).push(n);
    }
    const pos = new Map();
    const colWidth = 250;
    const rowHeight = 54;
    let height = 0;
    // Left to right, each column ordered by where its neighbours in the column before sit (fewer crossings).
    const row = new Map();
    columns.forEach((column, l) => {
      const key = (n) => {
        const before = adj.get(n.id).filter((m) => level.get(m) === l - 1 && row.has(m)).map((m) => row.get(m));
        return before.length ? before.reduce((a, b) => a + b, 0) / before.length : Infinity;
      };
      const keys = new Map(column.map((n) => [n.id, key(n)]));
      column.sort((a, b) => (keys.get(a.id) - keys.get(b.id)) || (KIND_ORDER[a.kind] - KIND_ORDER[b.kind])
        || a.label.localeCompare(b.label));
      column.forEach((n, i) => {
        row.set(n.id, i);
        pos.set(n.id, { x: 110 + l * colWidth, y: 40 + i * rowHeight });
      });
      height = Math.max(height, 40 + column.length * rowHeight);
    });
    return { pos, width: 110 + Math.max(columns.length - 1, 0) * colWidth + 140, height: Math.max(height, 120) };
  }

  function graphView(graph) {
    const box = h("div", { class: "graph-box" });
    if (!graph || !graph.nodes || !graph.nodes.length) {
      box.appendChild(h("p", { class: "muted" }, "(no evidence: the answer rests on no KG triples)"));
      return box;
    }
    const { pos, width, height } = layout(graph);
    const svg = s("svg", { class: "evidence-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": "evidence graph" });
    const defs = s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7,
      markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" })));
    svg.appendChild(defs);
    const edgeLayer = s("g", { class: "edges" });
    const nodeLayer = s("g", { class: "nodes" });
    const halfWidth = new Map();
    for (const n of graph.nodes) {
      const label = n.kind === "cvt" ? "CVT" : shorten(n.label, 26);
      halfWidth.set(n.id, Math.max(22, 8 + label.length * 3.6));
    }
    for (const e of graph.edges) {
      const a = pos.get(e.source);
      const b = pos.get(e.target);
      if (!a || !b) continue;
      const dir = b.x >= a.x ? 1 : -1;
      const x1 = a.x + dir * halfWidth.get(e.source);
      const x2 = b.x - dir * halfWidth.get(e.target);
      let d;
      let lx;
      let ly;
      if (a.x === b.x) {
        const bend = a.x + 70 + Math.abs(b.y - a.y) / 4;
        d = `M ${a.x + halfWidth.get(e.source)} ${a.y} Q ${bend} ${(a.y + b.y) / 2} ${b.x + halfWidth.get(e.target)} ${b.y}`;
        lx = bend - 20;
        ly = (a.y + b.y) / 2;
      } else {
        d = `M ${x1} ${a.y} L ${x2} ${b.y}`;
        lx = (x1 + x2) / 2;
        ly = (a.y + b.y) / 2 - 4;
      }
      edgeLayer.appendChild(s("g", { class: "edge", "data-relation": e.relation },
        s("path", { d, class: "edge-line", "marker-end": "url(#arrow)" }),
        s("text", { x: lx, y: ly, class: "edge-label", "text-anchor": "middle" }, relationLabel(e.relation)),
        s("title", {}, `${e.source} —${e.relation}→ ${e.target}`)));
    }
    for (const n of graph.nodes) {
      const p = pos.get(n.id);
      const w = halfWidth.get(n.id);
      const label = n.kind === "cvt" ? "CVT" : shorten(n.label, 26);
      const shape = n.kind === "cvt"
        ? s("polygon", { points: `${p.x - w} ${p.y} ${p.x} ${p.y - 16} ${p.x + w} ${p.y} ${p.x} ${p.y + 16}`, class: "shape" })
        : s("rect", { x: p.x - w, y: p.y - 15, width: 2 * w, height: 30, rx: n.kind === "literal" ? 2 : 14, class: "shape" });
      nodeLayer.appendChild(s("g", { class: "node kind-" + n.kind, "data-id": n.id, "data-kind": n.kind },
        shape, s("text", { x: p.x, y: p.y + 4, "text-anchor": "middle", class: "node-label" }, label),
        s("title", {}, `${n.label}${n.label !== n.id ? " [" + n.id + "]" : ""} · ${n.kind}`)));
    }
    svg.appendChild(edgeLayer);
    svg.appendChild(nodeLayer);
    box.appendChild(h("div", { class: "legend" },
      ["topic", "answer", "node", "cvt", "literal"].map((k) => h("span", { class: "legend-item kind-" + k },
        h("span", { class: "swatch" }), { topic: "topic entity", answer: "answer", node: "intermediate",
          cvt: "CVT (mediator)", literal: "literal" }[k])),
      graph.truncated ? badge("cut: too many edges to draw", "bad") : null));
    box.appendChild(h("div", { class: "graph-scroll" }, svg));
    return box;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Views

  async function methods() {
    if (!methodsCache) methodsCache = (await api("/v1/methods")).methods;
    return methodsCache;
  }

  function recentAsks() {
    try {
      return JSON.parse(sessionStorage.getItem(RECENT_KEY) || "[]");
    } catch (e) {
      return [];
    }
  }

  function remember(record) {
    const recent = recentAsks().filter((r) => r.id !== record.trace_id);
    recent.unshift({ id: record.trace_id, question: record.question, method: record.method });
    sessionStorage.setItem(RECENT_KEY, JSON.stringify(recent.slice(0, 10)));
  }

  function parseConfig(text) {
    const trimmed = text.trim();
    if (!trimmed) return null;
    if (trimmed.startsWith("{")) return JSON.parse(trimmed);
    const out = {};
    for (const part of trimmed.split(/[\n,]+/)) {
      if (!part.trim()) continue;
      const eq = part.indexOf("=");
      if (eq < 1) throw new Error(`method config ${JSON.stringify(part.trim())} is not KEY=VALUE`);
      const key = part.slice(0, eq).trim();
      const raw = part.slice(eq + 1).trim();
      let value = raw;
      try { value = JSON.parse(raw); } catch (e) { value = raw; }
      out[key] = value;
    }
    return out;
  }

  async function askView(root) {
    const question = h("textarea", { id: "question", rows: 2, placeholder: "Who directed Inception?", required: true });
    const method = h("select", { id: "method" });
    const topics = h("input", { id: "topics", type: "text", placeholder: "optional: ids or exact names, comma-separated" });
    const config = h("input", { id: "method-config", type: "text", placeholder: "optional: top_k=5, pruner=llm  or  {\"top_k\": 5}" });
    const button = h("button", { id: "ask-button", type: "submit" }, "Ask");
    const status = h("span", { id: "ask-status", class: "muted" });
    const result = h("div", { id: "ask-result" });
    const form = h("form", { id: "ask-form", class: "panel ask-form" },
      h("label", { for: "question" }, "Question"), question,
      h("div", { class: "row" },
        h("div", {}, h("label", { for: "method" }, "Method"), method),
        h("div", { class: "grow" }, h("label", { for: "topics" }, "Topics"), topics),
        h("div", { class: "grow" }, h("label", { for: "method-config" }, "Method settings"), config)),
      h("div", { class: "row" }, button, status));
    const recent = recentAsks();
    root.appendChild(h("h1", {}, "Ask"));
    root.appendChild(form);
    root.appendChild(result);
    if (recent.length) {
      root.appendChild(section("Asked in this tab", h("ul", { class: "recent" }, recent.map((r) =>
        h("li", {}, h("a", { href: "#/traces/" + enc(r.id) }, r.question), " ", badge(r.method, ""))))));
    }
    try {
      const list = await methods();
      for (const m of list) {
        method.appendChild(h("option", { value: m.name, title: m.summary || "" }, m.name + (m.summary ? " — " + shorten(m.summary, 60) : "")));
      }
      if (list.some((m) => m.name === "ccor")) method.value = "ccor";
    } catch (err) {
      result.appendChild(errorBox(err));
    }
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clear(result);
      let body;
      try {
        body = { question: question.value, method: method.value };
        const topicList = topics.value.split(",").map((t) => t.trim()).filter(Boolean);
        if (topicList.length) body.topics = topicList;
        const settings = parseConfig(config.value);
        if (settings) body.method_config = settings;
      } catch (err) {
        result.appendChild(errorBox(err));
        return;
      }
      button.disabled = true;
      const started = performance.now();
      if (tick) clearInterval(tick);
      const show = () => { status.textContent = `asking ${method.value}… ${((performance.now() - started) / 1000).toFixed(1)} s`; };
      show();
      tick = setInterval(show, 100);
      // Watch it arrive: the streamed ask shows each step and model call as the method makes it.
      const liveSteps = h("ol", { class: "steps", id: "live-steps" });
      const liveCalls = h("span", { class: "muted", id: "live-calls" }, "0 LLM calls");
      const live = section("Working", h("p", {}, liveCalls), liveSteps);
      result.appendChild(live);
      try {
        let record = null;
        let calls = 0;
        await askStream(body, (event) => {
          if (event.event === "accepted") {
            live.querySelector("h2").textContent = "Working on trace " + event.trace_id.slice(0, 8);
          } else if (event.event === "step") {
            liveSteps.appendChild(stepItem(event.step, event.index));
          } else if (event.event === "llm_call") {
            calls += 1;
            liveCalls.textContent = `${calls} LLM call${calls === 1 ? "" : "s"}, the last at ${event.call.step || "(no step)"}`;
          } else if (event.event === "done") {
            record = event.result;
          } else if (event.event === "error") {
            throw new ApiError(event.status, event);
          }
        });
        if (!record) throw new Error("the answer stream ended without a result");
        clearInterval(tick);
        tick = null;
        remember(record);
        status.textContent = `answered in ${((performance.now() - started) / 1000).toFixed(2)} s`;
        live.remove();
        result.appendChild(predictionView(record));
        const full = await api("/v1/traces/" + enc(record.trace_id));
        result.appendChild(section("Steps", stepList(full.trace)));
        result.appendChild(section("LLM calls", callList(full.llm_calls, full.llm_calls_dropped)));
      } catch (err) {
        clearInterval(tick);
        tick = null;
        status.textContent = "";
        live.remove();
        result.appendChild(errorBox(err));
      } finally {
        clearInterval(tick);
        tick = null;
        button.disabled = false;
      }
    });
  }

  function predictionView(record) {
    return h("div", { class: "prediction" },
      section("Answer",
        h("p", { class: "question-text" }, record.question),
        h("div", { class: "row" }, h("span", {}, "grounding "), groundingBadge(record.grounding), badge(record.method, ""),
          record.trace_id ? h("a", { class: "trace-link", href: "#/traces/" + enc(record.trace_id) }, "trace " + record.trace_id.slice(0, 8)) : null),
        answerList(record.answers, false),
        record.topics && record.topics.length ? h("p", { class: "muted" }, "topics: ",
          record.topics.map((t, i) => [i ? ", " : "", t.name, " [", t.id, "]"])) : null,
        usageLine(record.usage),
        record.error ? h("div", { class: "error" }, record.error) : null),
      section("How " + record.method + " answered", summaryBlock(record.summary)),
      h("div", { class: "graph-cell" }, section("Evidence graph", graphView(record.graph))));
  }

  async function traceView(root, id) {
    const record = await api("/v1/traces/" + enc(id));
    root.appendChild(h("h1", {}, "Trace ", h("code", {}, id.slice(0, 12))));
    if (record.status === "running") {
      root.appendChild(h("p", { class: "muted" }, "Still running; reload to see it when it ends."));
      return;
    }
    if (record.status !== "done") root.appendChild(h("div", { class: "error" }, record.status + ": " + (record.error || "")));
    root.appendChild(predictionView(record));
    root.appendChild(section("Steps", stepList(record.trace)));
    root.appendChild(section("LLM calls", callList(record.llm_calls || [], record.llm_calls_dropped)));
  }

  async function runsView(root) {
    const data = await api("/v1/runs");
    root.appendChild(h("h1", {}, "Runs"));
    if (!data.root) {
      root.appendChild(h("p", { class: "muted" }, "This server was started without --runs DIR."));
      return;
    }
    if (!data.runs.length) {
      root.appendChild(h("p", { class: "muted" }, "No run directories under --runs yet (kgqa eval --out DIR/NAME)."));
      return;
    }
    root.appendChild(h("table", { class: "table", id: "runs-table" },
      h("thead", {}, h("tr", {}, ["run", "dataset", "method", "LLM", "n", "errors",
        ...data.metrics.map((m) => metricHeading(m, m.short_label))].map((c) => h("th", {}, c)))),
      h("tbody", {}, data.runs.map((r) => h("tr", {},
        h("td", {}, h("a", { href: "#/runs/" + enc(r.id) }, r.id)),
        h("td", {}, [r.dataset, r.split].filter(Boolean).join(" / ")), h("td", {}, r.method || ""), h("td", { class: "wrap" }, r.llm || ""),
        h("td", {}, fmtNum(r.n)), h("td", {}, fmtNum(r.errors)),
        data.metrics.map((m) => h("td", { title: m.description }, fmtMetric(r[m.name], m.format))))))));
  }

  function pager(base, page, pages, params) {
    const link = (p, label) => h("a", { href: `${base}?${new URLSearchParams(Object.assign({}, params, { page: p }))}`,
      class: "page-link" }, label);
    return h("div", { class: "pager" }, page > 1 ? link(page - 1, "‹ previous") : null,
      h("span", { class: "muted" }, ` page ${page} of ${pages} `), page < pages ? link(page + 1, "next ›") : null);
  }

  async function runView(root, run, params) {
    const which = params.get("filter") || "all";
    const page = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);
    const [info, list, all] = await Promise.all([api("/v1/runs/" + enc(run)),
      api(`/v1/runs/${enc(run)}/questions?filter=${enc(which)}&page=${page}`), api("/v1/runs")]);
    const sm = info.summary || {};
    root.appendChild(h("h1", {}, "Run ", h("code", {}, run)));
    root.appendChild(section("Summary",
      h("p", {}, [sm.dataset, sm.split, sm.method, sm.llm].filter(Boolean).join(" · "),
        sm.partial ? badge("partial", "bad") : null),
      h("table", { class: "table metrics", id: "run-metrics" }, h("thead", {}, h("tr", {}, h("th", {}, "metric"), h("th", {}, "value"))),
        h("tbody", {}, info.metrics.map((m) => h("tr", { title: m.description },
          h("th", {}, metricHeading(m, m.label)), h("td", {}, fmtMetric(m.value, m.format)))))),
      h("p", { class: "muted" }, `${fmtNum(sm.n)} questions, ${fmtNum(sm.errors)} failed`)));
    const others = all.runs.filter((r) => r.id !== run);
    if (others.length) {
      const select = h("select", { id: "compare-with" }, others.map((r) => h("option", { value: r.id }, r.id)));
      root.appendChild(h("form", { class: "row compare-form", onsubmit: (e) => { e.preventDefault(); location.hash = `#/compare/${enc(run)}/${enc(select.value)}`; } },
        h("label", { for: "compare-with" }, "Compare with "), select, h("button", { type: "submit" }, "Compare")));
    }
    const tabs = h("div", { class: "tabs" }, ["all", "right", "wrong", "failed"].map((f) =>
      h("a", { href: `#/runs/${enc(run)}?filter=${f}`, class: "tab" + (f === which ? " active" : "") },
        `${f} (${(list.counts || {})[f] || 0})`)));
    const table = h("table", { class: "table", id: "questions-table" },
      h("thead", {}, h("tr", {}, ["id", "question", "answers", "gold", "verdict", "grounding"].map((c) => h("th", {}, c)))),
      h("tbody", {}, list.questions.map((q) => h("tr", { class: "v-" + q.verdict },
        h("td", {}, h("a", { href: `#/runs/${enc(run)}/q/${enc(q.id)}` }, q.id)),
        h("td", { class: "wrap" }, q.question || ""),
        h("td", { class: "wrap" }, (q.answers || []).join("; ") + (q.n_answers > q.answers.length ? ` … (${q.n_answers})` : "")),
        h("td", { class: "wrap" }, (q.gold || []).join("; ")),
        h("td", {}, badge(q.verdict, q.verdict === "right" ? "ok" : "bad"), q.error ? h("div", { class: "muted small" }, shorten(q.error, 80)) : null),
        h("td", {}, groundingBadge(q.grounding))))));
    root.appendChild(section("Questions", tabs, table, pager(`#/runs/${enc(run)}`, list.page, list.pages, { filter: which })));
  }

  async function questionView(root, run, qid) {
    const q = await api(`/v1/runs/${enc(run)}/questions/${enc(qid)}`);
    root.appendChild(h("p", {}, h("a", { href: "#/runs/" + enc(run) }, "‹ run " + run)));
    root.appendChild(h("h1", {}, "Question ", h("code", {}, q.id)));
    const v = q.verdicts || {};
    const grid = h("div", { class: "prediction" });
    root.appendChild(grid);
    grid.appendChild(section("Answers against gold",
      h("p", { class: "question-text" }, q.question || ""),
      h("div", { class: "row" }, h("span", {}, "grounding "), groundingBadge(q.grounding), q.method ? badge(q.method, "") : null,
        h("span", {}, " Hits@1 "), verdictBadges((v.strict || {}).hit1 >= 1, (v.legacy || {}).hit1 >= 1),
        h("span", { class: "muted" }, ` F1 ${fmtPct((v.strict || {}).f1)} (legacy ${fmtPct((v.legacy || {}).f1)})`)),
      h("h3", {}, "Predicted"), answerList(q.answers, true),
      h("h3", {}, "Gold"), answerList(q.gold, true),
      q.error ? h("div", { class: "error" }, q.error) : null,
      q.traceback ? h("details", {}, h("summary", {}, "traceback"), h("pre", {}, q.traceback)) : null));
    grid.appendChild(section("How " + (q.method || "the method") + " answered", summaryBlock(q.summary)));
    grid.appendChild(h("div", { class: "graph-cell" }, section("Evidence graph", graphView(q.graph))));
    root.appendChild(section("Steps", q.trace_found ? stepList(q.trace) : h("p", { class: "muted" }, "(no trace line for this question)")));
    root.appendChild(section("LLM calls", callList(q.llm_calls, q.llm_calls_dropped)));
  }

  async function compareView(root, a, b, params) {
    const page = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);
    const data = await api(`/v1/runs/${enc(a)}/compare/${enc(b)}?page=${page}`);
    root.appendChild(h("h1", {}, "Compare ", h("code", {}, a), " and ", h("code", {}, b)));
    root.appendChild(h("p", { class: "muted" }, `${data.total} of ${data.shared} shared questions differ (strict verdict, failure or answers).`));
    const side = (run, qid, r) => h("td", { class: "wrap v-" + r.verdict },
      badge(r.verdict, r.verdict === "right" ? "ok" : "bad"), " ", groundingBadge(r.grounding), " ",
      h("a", { href: `#/runs/${enc(run)}/q/${enc(qid)}` }, (r.answers || []).join("; ") || "(none)"),
      r.error ? h("div", { class: "muted small" }, shorten(r.error, 100)) : null);
    root.appendChild(h("table", { class: "table", id: "compare-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "question"), h("th", {}, "gold"), h("th", {}, a), h("th", {}, b))),
      h("tbody", {}, data.questions.map((q) => h("tr", {},
        h("td", { class: "wrap" }, h("code", {}, q.id), " ", q.question || ""), h("td", { class: "wrap" }, (q.gold || []).join("; ")),
        side(a, q.id, q.a), side(b, q.id, q.b))))));
    root.appendChild(pager(`#/compare/${enc(a)}/${enc(b)}`, data.page, data.pages, {}));
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Routing

  async function route() {
    takeTokenFromUrl();  // a link with a token, followed from this page, too
    const root = clear(view());
    const raw = location.hash.replace(/^#/, "") || "/ask";
    const [path, query] = raw.split("?");
    const params = new URLSearchParams(query || "");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    for (const id of ["nav-ask", "nav-runs"]) document.getElementById(id).classList.remove("active");
    try {
      if (parts[0] === "runs" && parts.length === 1) {
        document.getElementById("nav-runs").classList.add("active");
        await runsView(root);
      } else if (parts[0] === "runs" && parts.length === 2) {
        document.getElementById("nav-runs").classList.add("active");
        await runView(root, parts[1], params);
      } else if (parts[0] === "runs" && parts[2] === "q" && parts.length === 4) {
        document.getElementById("nav-runs").classList.add("active");
        await questionView(root, parts[1], parts[3]);
      } else if (parts[0] === "compare" && parts.length === 3) {
        document.getElementById("nav-runs").classList.add("active");
        await compareView(root, parts[1], parts[2], params);
      } else if (parts[0] === "traces" && parts.length === 2) {
        await traceView(root, parts[1]);
      } else {
        document.getElementById("nav-ask").classList.add("active");
        await askView(root);
      }
    } catch (err) {
      root.appendChild(errorBox(err));
    }
  }

  async function start() {
    takeTokenFromUrl();
    const form = document.getElementById("token-form");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const value = document.getElementById("token-input").value.trim();
      if (value) sessionStorage.setItem(TOKEN_KEY, value);
      methodsCache = null;
      showTokenForm(false);
      route();
    });
    try {
      health = await api("/v1/health");
      showTokenForm(health.auth && !token());
      const info = document.getElementById("server-info");
      info.textContent = `kgqa ${health.version}`;
      if (!health.auth || token()) {
        api("/v1/kg").then((kg) => {
          info.textContent = `kgqa ${health.version} · KG ${kg.kg} (${fmtNum(kg.triples)} triples)`;
        }).catch(() => {});
      }
    } catch (err) {
      view().appendChild(errorBox(err));
    }
    window.addEventListener("hashchange", route);
    await route();
    document.body.dataset.ready = "1";
  }

  document.addEventListener("DOMContentLoaded", start);
})();
