// The fleet page: golem list's rows from api/fleet, refreshed every few seconds; a placed golem's row opens its page.
"use strict";
(function () {
  const F = window.FLEET;
  const REFRESH_MS = 5000;
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const LABEL = { spend_today: "spend today", alerts: "alerts today" };

  function draw(body) {
    const cols = body.columns;
    $("fleet").querySelector("thead tr").innerHTML = cols.map((c) => `<th>${esc(LABEL[c] || c)}</th>`).join("");
    $("fleet").querySelector("tbody").innerHTML = body.rows.map((r) => {
      const cells = cols.map((c) => {
        const v = r[c] === undefined ? "–" : r[c];
        if (c === "id" && r.local) return `<td><a href="golems/${encodeURIComponent(r.id)}/">${esc(v)}</a></td>`;
        return `<td class="${c === "tier" ? "tier " + esc(v) : ""}">${esc(v)}</td>`;
      }).join("");
      return `<tr data-golem="${esc(r.id)}" class="${r.local ? "local" : ""}">${cells}</tr>`;
    }).join("");
    const hosts = new Set(body.rows.map((r) => r.host));
    $("fleet-summary").textContent = `${body.rows.length} golem(s) on ${hosts.size} host(s)`;
    $("fleet-msg").textContent = body.error || "";
    $("fleet-msg").className = body.error ? "msg error" : "msg";
  }

  async function refresh() {  // the next read starts a few seconds after this one ends: a slow fleet is not piled on
    try {
      draw(await (await fetch("api/fleet")).json());
      window.__fleetLoaded = (window.__fleetLoaded || 0) + 1; // the browser test waits on it
    } catch (err) {
      $("fleet-msg").textContent = `fleet not read: ${err}`; $("fleet-msg").className = "msg error";
    }
    setTimeout(refresh, REFRESH_MS);
  }

  $("fleet-data").textContent = F.data;
  $("fleet").addEventListener("click", (ev) => {  // the whole row clicks through, not just its id
    const tr = ev.target.closest("tr.local");
    if (tr && !ev.target.closest("a")) window.location.href = `golems/${encodeURIComponent(tr.dataset.golem)}/`;
  });
  refresh();
})();
