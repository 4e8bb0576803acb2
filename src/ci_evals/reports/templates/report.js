// ci-evals report: sample table, filters and detail. Every untrusted string goes in with
// textContent (via el()); nothing is ever assigned to innerHTML.
(function () {
  "use strict";
  var t0 = performance.now();
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var tParsed = performance.now();
  var ROWS = DATA.rows, METRICS = DATA.metrics, PAGE = 100;
  // Empty entries are left out of the data: put them back so the code below needs no guards.
  ROWS.forEach(function (r, i) {
    r.index = i; r.model = r.model || null; r.run = r.run || 0; r.tags = r.tags || []; r.grades = r.grades || {};
    r.regressed = r.regressed || []; r.turns = r.turns || []; r.memory = r.memory || {};
    r.usage = r.usage || {}; r.tokens = r.tokens || 0; r.cs = r.cs || {};
  });
  // The texts (inputs, outputs, rationales, trajectories) follow this script in the page, so the table
  // is drawn before the browser has even read them; they are parsed on first use (a sample's detail or
  // a text search), once the page has finished loading. Until then a row holds what the table shows.
  var DETAILS = null;
  function whenLoaded(fn) {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fn, { once: true });
    else fn();
  }
  function full(r) {
    if (r.full) return r;
    if (!DETAILS) DETAILS = JSON.parse(document.getElementById("report-details").textContent);
    var d = DETAILS[r.index];
    for (var k in d) {
      if (k === "grades" || k === "baseline") for (var n in d[k]) r[k][n] = Object.assign(r[k][n] || {}, d[k][n]);
      else r[k] = d[k];
    }
    r.full = true;
    return r;
  }
  var state = { sort: null, dir: 1, page: 0, shown: ROWS };

  function el(tag, attrs, children) {
    var n = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") n.textContent = attrs[k];
      else if (k === "cls") n.className = attrs[k];
      else n.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c != null) n.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return n;
  }
  function txt(v) { return v == null ? "" : (typeof v === "object" ? v.text : String(v)); }
  // A text stored once per row: {"ref": grader} is that grader's submission, {"input": i} the i-th input.
  function deref(r, v) {
    if (v && typeof v === "object" && v.ref != null) return r.grades[v.ref].submission;
    if (v && typeof v === "object" && v.input != null) return Array.isArray(r.input) ? r.input[v.input] : r.input;
    return v;
  }
  // A capped text: the text, plus a note of its full length when it was cut.
  function textBlock(v, cls) {
    var box = el("div", { cls: cls || "pre" });
    box.appendChild(document.createTextNode(txt(v)));
    if (v && typeof v === "object" && v.length != null)
      box.appendChild(el("span", { cls: "cut", text: " … [cut: " + v.length.toLocaleString("en") + " characters in full]" }));
    return box;
  }
  function fmt(x) { return x == null ? "–" : Number(x).toFixed(3); }
  function failing(r) { if (r.error) return true; for (var k in r.grades) if (!r.grades[k].passed) return true; return false; }
  function errored(r) { if (r.error) return true; for (var k in r.grades) if (r.grades[k].error) return true; return false; }

  var hay = null;
  function haystack(i) {
    if (!hay) hay = new Array(ROWS.length);
    if (hay[i] == null) {
      var r = full(ROWS[i]), parts = [r.id];
      (Array.isArray(r.input) ? r.input : [r.input]).forEach(function (t) { parts.push(txt(t)); });
      parts.push(txt(r.ground_truth));
      if (r.error) parts.push(txt(r.error.message || r.error));
      for (var k in r.grades) { var g = r.grades[k]; parts.push(txt(deref(r, g.submission)), txt(g.rationale), txt(g.error)); }
      r.turns.forEach(function (t) { t.forEach(function (m) { if (!(m.content && (m.content.ref != null || m.content.input != null))) parts.push(txt(m.content)); }); });
      hay[i] = parts.join("\n").toLowerCase();
    }
    return hay[i];
  }

  // ---- filter controls
  var tags = {}, models = {};
  ROWS.forEach(function (r) { r.tags.forEach(function (t) { tags[t] = 1; }); if (r.model) models[r.model] = 1; });
  DATA.runs = ROWS.reduce(function (m, r) { return Math.max(m, (r.run || 0) + 1); }, 1);
  function fill(id, keys) {
    var s = document.getElementById(id);
    Object.keys(keys).sort().forEach(function (k) { s.appendChild(el("option", { value: k, text: k })); });
    if (!Object.keys(keys).length) s.disabled = true;
  }
  fill("f-tag", tags); fill("f-model", models);
  if (!DATA.has_baseline && !ROWS.some(function (r) { return r.regressed.length; })) document.getElementById("f-regressed").disabled = true;

  function applyFilters() {
    if (document.getElementById("f-text").value.trim() && document.readyState === "loading") return whenLoaded(applyFilters);
    var f = function (id) { return document.getElementById(id); };
    var onlyFail = f("f-failing").checked, onlyErr = f("f-errored").checked, onlyReg = f("f-regressed").checked;
    var tag = f("f-tag").value, model = f("f-model").value, q = f("f-text").value.trim().toLowerCase();
    var out = [];
    for (var i = 0; i < ROWS.length; i++) {
      var r = ROWS[i];
      if (onlyFail && !failing(r)) continue;
      if (onlyErr && !errored(r)) continue;
      if (onlyReg && !r.regressed.length) continue;
      if (tag && r.tags.indexOf(tag) < 0) continue;
      if (model && r.model !== model) continue;
      if (q && haystack(i).indexOf(q) < 0) continue;
      out.push(r);
    }
    state.shown = out; state.page = 0;
    sortRows(); render();
  }
  function sortKey(r, key) {
    if (key === "id") return r.id;
    if (key === "model") return r.model || "";
    if (key === "run" || key === "duration" || key === "tokens") return r[key] == null ? -1 : r[key];
    if (key === "status") return failing(r) ? (errored(r) ? 0 : 1) : 2;
    if (MEASURES[key]) return typeof r.cs[key] === "number" ? r.cs[key] : -1;
    var g = r.grades[key]; return g == null || g.error || g.score == null ? -1 : g.score;
  }
  function sortRows() {
    if (!state.sort) return;
    var key = state.sort, dir = state.dir;
    state.shown = state.shown.slice().sort(function (a, b) {
      var x = sortKey(a, key), y = sortKey(b, key);
      if (typeof x === "string" || typeof y === "string") return dir * String(x).localeCompare(String(y), "en", { numeric: true });
      return dir * (x - y);
    });
  }

  // ---- the table
  var COLS = [{ key: "id", label: "Sample" }];
  if (Object.keys(models).length) COLS.push({ key: "model", label: "Model" });
  if (DATA.runs > 1) COLS.push({ key: "run", label: "Run" });
  COLS.push({ key: "status", label: "Status" });
  METRICS.forEach(function (m) { COLS.push({ key: m.key, label: m.label, metric: true }); });
  if (DATA.has_baseline) COLS.push({ key: "baseline", label: "Baseline: " + METRICS.map(function (m) { return m.label; }).join(" / "), nosort: true });
  COLS.push({ key: "duration", label: "Duration s" });
  // Cost and speed (results.measures): latency, cost, steps and tool calls where any line has
  // one; the tokens last, as before.
  var MEASURES = { latency: ["Latency", fmtSeconds], cost_usd: ["Cost $", fmtUsd], steps: ["Steps", fmtCount], tool_calls: ["Tool calls", fmtCount] };
  Object.keys(MEASURES).forEach(function (k) {
    if (ROWS.some(function (r) { return r.cs[k] != null; })) COLS.push({ key: k, label: MEASURES[k][0], measure: true });
  });
  COLS.push({ key: "tokens", label: "Tokens" });
  var head = document.getElementById("sample-head");
  COLS.forEach(function (c) {
    var th = el("th", { "data-key": c.key, text: c.label });
    if (!c.nosort) {
      th.className = "sortable"; th.title = "sort by " + c.label; th.tabIndex = 0;
      var sortBy = function () {
        state.dir = state.sort === c.key ? -state.dir : 1; state.sort = c.key; sortRows(); state.page = 0; render();
      };
      th.addEventListener("click", sortBy);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(); } });
    }
    head.appendChild(th);
  });

  function statusOf(r) { return errored(r) ? "errored" : failing(r) ? "failed" : "passed"; }
  function cell(r, c) {
    if (c.key === "id") { var a = el("a", { href: "#sample=" + encodeURIComponent(r.id), text: r.id }); return el("td", null, [a]); }
    if (c.key === "model") return el("td", { text: r.model || "" });
    if (c.key === "run") return el("td", { cls: "num", text: String(r.run) });
    if (c.key === "status") { var st = statusOf(r); return el("td", null, [el("span", { cls: "badge st-" + st, text: st }), r.regressed.length ? el("span", { cls: "badge st-regressed", text: "regressed" }) : null]); }
    if (c.metric) {
      var g = r.grades[c.key];
      if (!g) return el("td", { cls: "num muted", text: "–" });
      return el("td", { cls: "num " + (g.error ? "s-err" : g.passed ? "s-pass" : "s-fail"), text: g.error ? "error" : fmt(g.score) });
    }
    if (c.key === "baseline") {
      var b = r.baseline;
      if (!b) return el("td", { cls: "muted", text: "new" });
      return el("td", { cls: "num", text: METRICS.map(function (m) { var x = b[m.key]; return x ? (x.error ? "error" : fmt(x.score)) : "–"; }).join(" / ") });
    }
    if (c.measure) return measureCell(r, c);
    if (c.key === "duration") return el("td", { cls: "num", text: r.duration == null ? "–" : Number(r.duration).toFixed(2) });
    if (r.cached) return el("td", { cls: "num", title: cachedText(r.cached) }, [r.tokens ? r.tokens.toLocaleString("en") + " " : null, el("span", { cls: "badge cached", text: "cached" })]);
    return el("td", { cls: "num", text: r.tokens.toLocaleString("en") });
  }
  // Numbers as the other reports write them: 3 significant digits of seconds, dollars with 4
  // decimals below $1, counts with thousands separators.
  function fmtSeconds(v) {
    v = Number(v.toPrecision(3));
    if (v === 0) return "0 s";
    if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString("en") + " s";
    if (Math.abs(v) >= 1) return String(v) + " s";
    if (Math.abs(v) >= 1e-3) return String(Number((v * 1e3).toPrecision(3))) + " ms";
    return String(Number((v * 1e6).toPrecision(3))) + " µs";
  }
  function fmtUsd(v) {
    if (v === 0) return "$0";
    if (Math.abs(v) >= 1) return "$" + v.toLocaleString("en", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    if (Math.abs(v) < 0.00005) return "<$0.0001";
    return "$" + v.toFixed(4);
  }
  function fmtCount(v) { return Math.abs(v - Math.round(v)) < 1e-9 || Math.abs(v) >= 100 ? Math.round(v).toLocaleString("en") : String(Number(v.toPrecision(3))); }
  function measureCell(r, c) {
    var v = r.cs[c.key];
    if (v == null) return el("td", { cls: "num muted", text: "–" });
    if (typeof v === "number") return el("td", { cls: "num", text: MEASURES[c.key][1](v) });
    if (v === "cached") return el("td", { cls: "num", title: "answered from the LLM cache: not timed" }, [el("span", { cls: "badge cached", text: "cached" })]);
    return el("td", { cls: "num muted", title: v, text: "unknown" });
  }
  function cachedText(n) { return n + " LLM call" + (n === 1 ? "" : "s") + " answered from the cache (no tokens spent)"; }
  function render() {
    var body = document.getElementById("sample-body"), rows = state.shown;
    var pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    var frag = document.createDocumentFragment();
    rows.slice(state.page * PAGE, state.page * PAGE + PAGE).forEach(function (r) {
      var tr = el("tr", { "data-id": r.id }); COLS.forEach(function (c) { tr.appendChild(cell(r, c)); }); frag.appendChild(tr);
    });
    body.textContent = ""; body.appendChild(frag);
    var note = DATA.total_rows > ROWS.length ? " (this report holds " + ROWS.length.toLocaleString("en") + " of " + DATA.total_rows.toLocaleString("en") + ")" : "";
    document.getElementById("count").textContent = "Showing " + rows.length.toLocaleString("en") + " of " + ROWS.length.toLocaleString("en") + " rows" + note;
    document.getElementById("page").textContent = "page " + (state.page + 1) + " of " + pages;
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
    head.querySelectorAll("th").forEach(function (th) {
      th.classList.toggle("asc", th.getAttribute("data-key") === state.sort && state.dir > 0);
      th.classList.toggle("desc", th.getAttribute("data-key") === state.sort && state.dir < 0);
    });
  }
  ["f-failing", "f-errored", "f-regressed", "f-tag", "f-model"].forEach(function (id) { document.getElementById(id).addEventListener("change", applyFilters); });
  var timer = null;
  document.getElementById("f-text").addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(applyFilters, 150); });
  document.getElementById("prev").addEventListener("click", function () { state.page--; render(); });
  document.getElementById("next").addEventListener("click", function () { state.page++; render(); });

  // ---- the detail of one sample: its models and runs side by side
  function kv(pairs) {
    var dl = el("dl", { cls: "kv" });
    pairs.forEach(function (p) { if (p[1] != null && p[1] !== "") { dl.appendChild(el("dt", { text: p[0] })); dl.appendChild(el("dd", { text: String(p[1]) })); } });
    return dl;
  }
  function gradeTable(r) {
    var t = el("table", { cls: "grid grades" });
    var hr = ["Grader", "Score", "Pass", "Submission", "Rationale"]; if (DATA.has_baseline) hr.push("Baseline");
    t.appendChild(el("thead", null, [el("tr", null, hr.map(function (h) { return el("th", { text: h }); }))]));
    var tb = el("tbody");
    METRICS.forEach(function (m) {
      var g = r.grades[m.key]; if (!g) return;
      var why = el("td"); why.appendChild(textBlock(g.rationale));
      if (g.error) why.appendChild(el("div", { cls: "err", text: (g.category || "error") + " error: " + txt(g.error) }));
      var tr = el("tr", { cls: g.error ? "s-err" : g.passed ? "s-pass" : "s-fail" }, [
        el("td", null, [m.label, g.cached ? " " : null, g.cached ? el("span", { cls: "badge cached", title: cachedText(g.cached), text: "cached" }) : null]), el("td", { cls: "num", text: g.error ? "error" : fmt(g.score) }),
        el("td", { text: g.passed ? "pass" : "fail" }), el("td", null, [textBlock(deref(r, g.submission))]), why]);
      if (DATA.has_baseline) {
        var b = (r.baseline || {})[m.key], td = el("td", { cls: "baseline" });
        if (!b) td.textContent = "not in baseline";
        else { td.appendChild(el("div", { text: (b.error ? "error" : fmt(b.score)) + " · " + (b.passed ? "pass" : "fail") })); td.appendChild(textBlock(b.rationale)); }
        tr.appendChild(td);
      }
      tb.appendChild(tr);
    });
    t.appendChild(tb);
    return t;
  }
  function trajectory(r) {
    var box = el("div", { cls: "trajectory" });
    r.turns.forEach(function (turn, i) {
      box.appendChild(el("h5", { text: "Turn " + (i + 1) }));
      turn.forEach(function (m) {
        var msg = el("div", { cls: "msg role-" + (m.role || "unknown") }, [el("div", { cls: "role", text: (m.role || "?") + (m.name ? " · " + txt(m.name) : "") })]);
        var content = deref(r, m.content);
        if (txt(content)) msg.appendChild(textBlock(content));
        (m.tool_calls || []).forEach(function (tc) {
          var call = el("div", { cls: "tool-call" }, [el("span", { cls: "tool-name", text: "→ " + txt(tc.name) }), el("span", { cls: "muted", text: " " + (tc.id || "") })]);
          var args = txt(tc.arguments);
          try { if (!(tc.arguments && typeof tc.arguments === "object")) args = JSON.stringify(JSON.parse(args), null, 2); } catch (e) { /* shown as sent */ }
          call.appendChild(textBlock(typeof tc.arguments === "object" && tc.arguments ? tc.arguments : args, "pre args"));
          msg.appendChild(call);
        });
        if (m.tool_call_id) msg.appendChild(el("div", { cls: "muted", text: "result of " + txt(m.tool_call_id) }));
        box.appendChild(msg);
      });
    });
    if (!r.turns.length) box.appendChild(el("p", { cls: "muted", text: "no trajectory recorded" }));
    var mem = Object.keys(r.memory || {});
    if (mem.length) {
      box.appendChild(el("h5", { text: "Memory blocks" }));
      mem.forEach(function (k) { box.appendChild(el("div", { cls: "memory" }, [el("div", { cls: "role", text: k }), textBlock(r.memory[k])])); });
    }
    return box;
  }
  function column(r) {
    var col = el("div", { cls: "col" });
    col.appendChild(el("h4", { text: (r.model || "") + (DATA.runs > 1 ? (r.model ? " · " : "") + "run " + r.run : "") || "Result" }));
    col.appendChild(el("span", { cls: "badge st-" + statusOf(r), text: statusOf(r) }));
    if (r.regressed.length) col.appendChild(el("span", { cls: "badge st-regressed", text: "regressed: " + r.regressed.join(", ") }));
    if (r.error) col.appendChild(el("div", { cls: "err", text: (r.error.category || "target") + " error: " + txt(r.error.message || r.error) }));
    col.appendChild(kv([["tokens", r.tokens.toLocaleString("en") + " (" + (r.usage.prompt_tokens || 0) + " prompt + " + (r.usage.completion_tokens || 0) + " completion)"],
      ["cached", r.cached ? cachedText(r.cached) + (r.target_cached ? ": the target's " + r.target_cached : "") + (r.cached > (r.target_cached || 0) ? (r.target_cached ? ", the graders' " : ": the graders' ") + (r.cached - (r.target_cached || 0)) : "") : null],
      ["cost", r.cost == null ? "n/a" : "$" + r.cost.toFixed(4)], ["duration", r.duration == null ? "–" : Number(r.duration).toFixed(2) + " s"]]));
    col.appendChild(gradeTable(r));
    col.appendChild(el("h5", { text: "Trajectory" }));
    col.appendChild(trajectory(r));
    if (r.target) { col.appendChild(el("h5", { text: "Target facts" })); col.appendChild(textBlock(r.target)); }
    return col;
  }
  function showDetail(id) {
    var sec = document.getElementById("detail"), body = document.getElementById("detail-body");
    var rows = ROWS.filter(function (r) { return r.id === id; }).map(full);
    body.textContent = "";
    if (!rows.length) { sec.hidden = false; document.getElementById("detail-title").textContent = "Sample " + id + " is not in this report"; return; }
    document.getElementById("detail-title").textContent = "Sample " + id;
    document.getElementById("detail-link").setAttribute("href", "#sample=" + encodeURIComponent(id));
    var first = rows[0];
    if (first.tags.length) body.appendChild(kv([["tags", first.tags.join(", ")]]));
    body.appendChild(el("h4", { text: "Input" }));
    (Array.isArray(first.input) ? first.input : [first.input]).forEach(function (t, i, all) {
      if (all.length > 1) body.appendChild(el("div", { cls: "role", text: "turn " + (i + 1) }));
      body.appendChild(textBlock(t));
    });
    body.appendChild(el("h4", { text: "Ground truth" }));
    body.appendChild(first.ground_truth == null ? el("p", { cls: "muted", text: "none" }) : textBlock(first.ground_truth));
    var cols = el("div", { cls: "side-by-side cols-" + Math.min(rows.length, 4) });
    rows.forEach(function (r) { cols.appendChild(column(r)); });
    body.appendChild(cols);
    sec.hidden = false;
    sec.scrollIntoView();
  }
  function onHash() {
    var m = /^#sample=(.*)$/.exec(location.hash);
    if (m) { var id; try { id = decodeURIComponent(m[1]); } catch (e) { id = m[1]; } whenLoaded(function () { showDetail(id); }); }
    else document.getElementById("detail").hidden = true;
  }
  document.getElementById("detail-close").addEventListener("click", function (e) { e.preventDefault(); history.replaceState(null, "", location.pathname + location.search); document.getElementById("detail").hidden = true; });
  window.addEventListener("hashchange", onHash);
  render();
  onHash();
  // When the page was usable, and where the time went (milliseconds since navigation start).
  document.body.setAttribute("data-ready", [t0, tParsed, performance.now()].map(Math.round).join(" "));
})();
