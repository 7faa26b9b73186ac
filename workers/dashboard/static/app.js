// The golem's live dashboard: history from api/ticks once, then every new event pushed by api/stream (SSE).
// API paths are relative to the page: / for one golem, /golems/<id>/ under a fleet's dashboard.
"use strict";
(function () {
  const G = window.GOLEM;
  const TABLE_ROWS = 200; // rows in the DOM; the charts and the timeline hold the whole history
  const TIER_COLOUR = { T0: "#b8bcc6", T1: "#e0a000", T2: "#d02020" };
  const cols = { tick: [], time: [], tier: [], prediction_error: [], threshold: [], pool_price: [], oracle_price: [],
                 health_factor: [], equity_usd: [], inference_today_usd: [], gas_today_usd: [], regime: [], phase: [],
                 executed: [], run: [] };
  let budgets = {};
  const failed = new Set();
  const charts = {};
  const $ = (id) => document.getElementById(id);

  function temporalLink(wid, rid) {
    return `${G.temporalUi}/namespaces/${G.namespace}/workflows/${encodeURIComponent(wid)}` + (rid ? `/${rid}/history` : "");
  }
  function fmt(v, d) { return v === null || v === undefined ? "–" : Number(v).toFixed(d); }

  // ---- charts (uPlot, local asset) ----
  function chart(id, series, data) {
    const el = $(id);
    const opts = { width: Math.max(el.clientWidth, 380), height: 160, legend: { show: true },
                   scales: { x: { time: false } }, axes: [{ label: "tick" }, { size: 70 }],
                   series: [{ label: "tick" }].concat(series) };
    charts[id] = new uPlot(opts, data, el);
  }
  function chartData() {
    const x = cols.tick;
    const infB = x.map(() => budgets.max_daily_cost_usd ?? null);
    const gasB = x.map(() => budgets.gas_budget_usd_per_day ?? null);
    return {
      "chart-pe": [x, cols.prediction_error, cols.threshold],
      "chart-price": [x, cols.pool_price, cols.oracle_price],
      "chart-hf": [x, cols.health_factor],
      "chart-equity": [x, cols.equity_usd],
      "chart-spend": [x, cols.inference_today_usd, infB, cols.gas_today_usd, gasB],
    };
  }
  function drawCharts() {
    const d = chartData();
    if (!charts["chart-pe"]) {
      chart("chart-pe", [{ label: "prediction error", stroke: "#36c" }, { label: "threshold", stroke: "#c33", dash: [4, 4] }], d["chart-pe"]);
      chart("chart-price", [{ label: "pool", stroke: "#393" }, { label: "oracle", stroke: "#963" }], d["chart-price"]);
      chart("chart-hf", [{ label: "health factor", stroke: "#c60" }], d["chart-hf"]);
      chart("chart-equity", [{ label: "equity", stroke: "#06c" }], d["chart-equity"]);
      chart("chart-spend", [{ label: "inference today", stroke: "#63c" }, { label: "inference budget", stroke: "#63c", dash: [4, 4] },
                            { label: "gas today", stroke: "#c36" }, { label: "gas budget", stroke: "#c36", dash: [4, 4] }], d["chart-spend"]);
    } else {
      for (const [id, data] of Object.entries(d)) charts[id].setData(data);
    }
    const n = cols.tick.length - 1;
    $("spend-text").textContent = n < 0 ? "" :
      `inference $${fmt(cols.inference_today_usd[n], 4)} of $${fmt(budgets.max_daily_cost_usd, 2)} · ` +
      `gas $${fmt(cols.gas_today_usd[n], 4)} of $${fmt(budgets.gas_budget_usd_per_day, 2)} today`;
  }

  // ---- the tick timeline: one cell per tick, coloured by tier ----
  function drawTimeline() {
    const c = $("timeline");
    const w = c.clientWidth; c.width = w;
    const ctx = c.getContext("2d");
    ctx.clearRect(0, 0, w, c.height);
    const n = cols.tick.length;
    if (!n) return;
    const cell = Math.max(w / n, 0.5);
    const paths = {};  // one path per colour: 10,000 cells in a handful of fills
    for (let i = 0; i < n; i++) {
      const colour = failed.has(cols.tick[i]) ? "#000" : (TIER_COLOUR[cols.tier[i]] || "#999");
      (paths[colour] ||= new Path2D()).rect(Math.floor(i * cell), 0, Math.ceil(cell), c.height);
    }
    for (const [colour, path] of Object.entries(paths)) { ctx.fillStyle = colour; ctx.fill(path); }
    const last = n - 1;
    $("timeline-legend").textContent = `${n} ticks (${cols.tick[0]}…${cols.tick[last]}); last: ${cols.tier[last]} · ` +
      `${cols.regime[last]} · ${cols.phase[last]}`;
  }

  // ---- the table of recent ticks ----
  function tickRow(i, fresh) {
    const tr = document.createElement("tr");
    if (fresh) tr.className = "new";
    tr.dataset.tick = cols.tick[i];
    const t = cols.tier[i];
    tr.innerHTML = `<td>${cols.tick[i]}</td><td>${new Date(cols.time[i] * 1000).toISOString().slice(11, 19)}</td>` +
      `<td class="tier ${t}">${t}</td><td>${cols.regime[i]}</td><td>${cols.phase[i]}</td>` +
      `<td>${fmt(cols.prediction_error[i], 3)} / ${fmt(cols.threshold[i], 3)}</td><td>${fmt(cols.health_factor[i], 3)}</td>` +
      `<td>${fmt(cols.equity_usd[i], 0)}</td><td>${cols.executed[i] || 0}</td>` +
      `<td><a target="_blank" rel="noopener" href="${temporalLink(`golem-${G.golem}-tick-${cols.tick[i]}`)}">Temporal</a> ` +
      `<a target="_blank" href="api/record/${cols.tick[i]}${cols.run[i] ? "?run=" + encodeURIComponent(cols.run[i]) : ""}">record</a></td>`;
    return tr;
  }
  function fillTable() {
    const body = document.querySelector("#ticks tbody");
    const rows = [];
    for (let i = cols.tick.length - 1; i >= Math.max(0, cols.tick.length - TABLE_ROWS); i--) rows.push(tickRow(i, false).outerHTML);
    body.innerHTML = rows.join("");
  }

  // ---- recent actions / steers / alerts ----
  function eventLine(e) {
    const p = e.payload;
    const bits = [p.tool, p.status, p.reason, p.tx_hash && p.tx_hash.slice(0, 12) + "…", p.message, p.severity, p.alert,
                  typeof p.detail === "string" ? p.detail : null, p.verified !== undefined ? "verified=" + p.verified : null]
      .filter((x) => x !== undefined && x !== null && x !== "");
    return `${e.time.slice(11, 19)} ${e.tick !== null ? "#" + e.tick : ""} ${e.kind} ${bits.join(" · ")}`;
  }
  function addEvent(e, prepend) {
    const li = document.createElement("li");
    li.textContent = eventLine(e);
    li.dataset.kind = e.kind;
    const ul = $("actions");
    prepend ? ul.insertBefore(li, ul.firstChild) : ul.appendChild(li);
    while (ul.children.length > 200) ul.removeChild(ul.lastChild);
  }

  // ---- status and the stop buttons ----
  async function refreshStatus() {
    try {
      const r = await fetch("api/status");
      const s = await r.json();
      if (!r.ok) { $("status").textContent = s.error; return; }
      const flags = (s.paused ? '<span class="flag" id="flag-paused">PAUSED</span>' : "") +
                    (s.entries_stopped ? '<span class="flag" id="flag-entries">ENTRIES STOPPED</span>' : "");
      // The Hayflick distance (heartbeat-monitor's vitals): ticks left before the configured limit.
      const hayflick = s.hayflick_ticks ? `<span id="hayflick">Hayflick ${s.ticks_lived}/${s.hayflick_ticks} (${Math.max(s.hayflick_ticks - s.ticks_lived, 0)} left)</span> · ` : "";
      $("status").innerHTML = `${s.activity} · next tick ${s.tick} · ${s.regime} · ${s.phase} · vitality ${fmt(s.vitality, 2)} · ${hayflick}` +
        `θ ${fmt(s.theta_seconds, 1)}s · steers pending ${s.pending_steers.length}${flags}`;
      showApprovals(s.approvals || []);
    } catch (err) { $("status").textContent = "status unavailable: " + err; }
  }
  // Privileged requests the model asked for: the pending ones get Approve / Deny (GolemWorkflow's updates).
  function showApprovals(list) {
    const ul = $("approvals");
    ul.textContent = "";
    list.filter((a) => a.status === "pending" || a.status === "approved").forEach((a) => {
      const li = document.createElement("li");
      li.id = `approval-${a.id}`;
      li.textContent = `${a.id} ${a.status}: ${a.tool} ${JSON.stringify(a.arguments || {})} — ${a.reason || ""} `;
      if (a.status === "pending") {
        ["approve", "deny"].forEach((what) => {
          const b = document.createElement("button");
          b.textContent = what === "approve" ? "Approve" : "Deny";
          b.dataset.answer = what;
          b.addEventListener("click", () => answer(a.id, what));
          li.appendChild(b);
        });
      }
      ul.appendChild(li);
    });
  }
  async function answer(id, what) {
    const r = await fetch(`api/approvals/${encodeURIComponent(id)}/${what}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    const body = await r.json();
    $("control-msg").className = "msg " + (r.ok ? "ok" : "error");
    $("control-msg").textContent = r.ok ? body.message : body.error;
    refreshStatus();
  }
  async function control(what) {
    const r = await fetch(`api/control/${what}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    const body = await r.json();
    $("control-msg").className = "msg " + (r.ok ? "ok" : "error");
    $("control-msg").textContent = r.ok ? `${what}: done` : body.error;
    refreshStatus();
  }

  // ---- steer / follow-up forms: the server validates exactly as `golem steer` does ----
  async function send(kind, body) {
    const r = await fetch(`api/${kind}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const out = await r.json();
    $("steer-msg").className = "msg " + (r.ok ? "ok" : "error");
    $("steer-msg").textContent = r.ok ? `${kind} ${out.delivered} delivered` : out.error;
    return r.ok;
  }

  // ---- the Grimoire, PLAYBOOK and backtest reports (read-only panels) ----
  function esc(t) { const d = document.createElement("div"); d.textContent = t ?? ""; return d.innerHTML; }
  async function askGrimoire(q) {
    $("grimoire-msg").className = "msg"; $("grimoire-msg").textContent = "searching…";
    const r = await fetch(`api/grimoire/search?k=5&q=${encodeURIComponent(q)}`);
    const out = await r.json();
    const ol = $("grimoire-results");
    ol.innerHTML = "";
    if (!r.ok) { $("grimoire-msg").className = "msg error"; $("grimoire-msg").textContent = out.error; return; }
    $("grimoire-msg").className = "msg ok";
    $("grimoire-msg").textContent = out.items.length ? `${out.items.length} of ${out.candidates} candidates · ${out.reason}`
      : `nothing relevant (${out.abstained ? "abstained: " : ""}${out.reason})`;
    for (const it of out.items) {
      const li = document.createElement("li");
      li.dataset.id = it.id;
      if (it.safety) li.className = "safety";
      li.innerHTML = `<span class="score">${fmt(it.final, 3)} ${esc(it.source)}/${esc(it.kind)}</span> ${esc(it.summary)}`;
      ol.appendChild(li);
    }
  }
  async function loadPlaybook() {
    const pb = await (await fetch("api/playbook")).json();
    $("playbook-text").textContent = pb.text ?? "(no PLAYBOOK.md yet: the delta cycle compiles it)";
    const revs = pb.revisions;
    $("playbook-rev").textContent = revs.length ? `revision ${revs[0].revision} · ${revs.length} recorded` : "(no revisions yet)";
    const ul = $("playbook-revisions");
    ul.innerHTML = "";
    revs.forEach((r, i) => {
      const li = document.createElement("li");
      li.dataset.revision = r.revision;
      const prev = revs[i + 1];
      li.innerHTML = `r${r.revision} · tick ${r.tick ?? "–"} · ${esc(r.reason)}` + (r.heuristics != null ? ` · ${r.heuristics} heuristics` : "") +
        (prev ? ` · <a data-a="${prev.revision}" data-b="${r.revision}">diff from r${prev.revision}</a>` : "");
      ul.appendChild(li);
    });
    ul.querySelectorAll("a[data-a]").forEach((a) => a.addEventListener("click", async () => {
      const r = await fetch(`api/playbook/diff?a=${a.dataset.a}&b=${a.dataset.b}`);
      $("playbook-diff").textContent = r.ok ? ((await r.text()) || "(identical)") : (await r.json()).error;
    }));
  }
  function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toFixed(2) + " %"; }
  async function loadBacktests() {
    const bt = await (await fetch("api/backtests")).json();
    $("backtests-folder").textContent = bt.folder ? `(${bt.folder})` : "";
    const div = $("backtests");
    if (!bt.reports.length) { div.textContent = "no reports yet: `golem backtest examples/scenarios/crash_recovery.csv` writes one"; return; }
    div.innerHTML = "";
    for (const rep of bt.reports) {
      const el = document.createElement("div");
      el.className = "report"; el.dataset.name = rep.name;
      if (rep.error) { el.textContent = `${rep.name}: ${rep.error}`; div.appendChild(el); continue; }
      const f = rep.figures || {}, info = rep.info || {};
      const mix = f.tier_mix ? Object.entries(f.tier_mix).map(([k, v]) => `${k} ${pct(v)}`).join(" / ") : "–";
      const rows = [["path", esc(info.path)], ["run", `${esc(info.name)}${info.memory === false ? " (memory off)" : ""}`],
        ["return", pct(f.total_return)], ["max drawdown", pct(f.max_drawdown)], ["min health factor", fmt(f.min_health_factor, 3)],
        ["liquidations", f.liquidations ?? "–"], ["tier mix", mix], ["transactions", f.transactions ?? "–"],
        ["gas / inference $", `${fmt(f.gas_usd, 2)} / ${fmt(f.inference_usd, 2)}`], ["blocked (protective)", `${Object.entries(f.blocked || {}).map(([k, v]) => `${k} ${v}`).join(", ") || "none"} (${f.protective_blocked ?? 0})`]];
      const a = rep.attribution;  // golem.safety.attribution: the path's return split, $ net of gas
      if (a) rows.push(["return attribution $", `<span class="attribution">market ${fmt(a.market_beta, 2)} · strategy ${fmt(a.strategy_alpha, 2)} · ` +
        `knowledge ${fmt(a.knowledge_alpha, 2)} · noise ${fmt(a.noise, 2)} = ${fmt(a.total, 2)}</span>` +
        (a.dominant ? ` (loss mostly ${esc(a.dominant.replace("_", " "))}: ${esc(a.responsible_loop)})` : "")]);
      el.innerHTML = `<table><caption>${esc(rep.name)}</caption>${rows.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join("")}</table>` +
        (rep.png ? `<img alt="${esc(rep.name)} chart" src="api/backtests/${encodeURIComponent(rep.name)}/report.png">` : "");
      div.appendChild(el);
    }
  }

  // ---- live: each stored event, pushed ----
  function onEvent(e) {
    if (e.kind === "heartbeat.tick_finished") {
      const p = e.payload;
      cols.tick.push(e.tick); cols.time.push(Math.floor(Date.parse(e.time) / 1000));
      for (const k of Object.keys(cols)) if (k !== "tick" && k !== "time") cols[k].push(p[k] ?? null);
      if (p.max_daily_cost_usd !== undefined) budgets = { max_daily_cost_usd: p.max_daily_cost_usd, gas_budget_usd_per_day: p.gas_budget_usd_per_day };
      drawCharts(); drawTimeline();
      const body = document.querySelector("#ticks tbody");
      body.insertBefore(tickRow(cols.tick.length - 1, true), body.firstChild);
      while (body.children.length > TABLE_ROWS) body.removeChild(body.lastChild);
      refreshStatus();
    } else if (e.kind === "heartbeat.tick_failed") {
      failed.add(e.tick); drawTimeline(); addEvent(e, true);
    } else if (/^(actions|alerts|interventions|control|safety)\./.test(e.kind)) {
      addEvent(e, true);
      if (e.kind.startsWith("control.")) refreshStatus();
    } else if (e.kind.startsWith("grimoire.playbook")) {
      loadPlaybook();
    }
  }

  async function start() {
    $("golem-id").textContent = G.golem;
    $("golem-link").href = temporalLink(`golem-${G.golem}`);
    if (G.fleet) { $("fleet-link").href = G.fleet; $("fleet-link").hidden = false; }
    const [ticks, events] = await Promise.all([fetch("api/ticks").then((r) => r.json()), fetch("api/events?n=50").then((r) => r.json())]);
    Object.assign(cols, ticks.columns);
    budgets = ticks.budgets || {};
    drawCharts(); drawTimeline(); fillTable();
    for (const e of events.slice().reverse()) addEvent(e, false);
    window.__rendered = performance.now(); // the page is drawn with its whole history (the render-time test reads it)
    refreshStatus();
    const es = new EventSource(`api/stream?after=${ticks.last_seq}`);
    es.addEventListener("golem", (m) => onEvent(JSON.parse(m.data)));
    window.__stream = es;
    document.querySelectorAll("[data-control]").forEach((b) => b.addEventListener("click", () => control(b.dataset.control)));
    $("steer-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      if (await send("steer", { message: $("steer-message").value, severity: $("steer-severity").value })) $("steer-message").value = "";
    });
    $("followup-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      if (await send("followup", { message: $("followup-message").value, window: $("followup-window").value })) $("followup-message").value = "";
    });
    $("grimoire-form").addEventListener("submit", (ev) => { ev.preventDefault(); askGrimoire($("grimoire-q").value); });
    loadPlaybook(); loadBacktests();
    setInterval(refreshStatus, 10000);
  }
  start();
})();
