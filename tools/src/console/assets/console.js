// Ferry's web console: one page with tabs; the shown tab polls its JSON every second and
// redraws. Every number is also written to a data attribute (data-bytes-left, data-lag, ...)
// so that a test can read it from the DOM. Text from the cluster (topic and group names) is
// set with textContent only, never parsed as HTML.
"use strict";

const ENDPOINTS = {
  brokers: "/api/brokers",
  moves: "/api/reassignments",
  throttles: "/api/throttles",
  groups: "/api/groups",
  plans: "/api/plans",
};
const POLL_MS = 1000;
// Moving partitions drawn; the rest count in the total.
const MAX_MOVES_DRAWN = 500;

// Sizes in powers of 1000, as `ferry reassign --progress` prints them.
function bytes(b) {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let v = b, u = 0;
  while (v >= 1000 && u + 1 < units.length) { v /= 1000; u++; }
  return u === 0 ? `${b} B` : `${v.toFixed(1)} ${units[u]}`;
}

// `1m 05s`, or `unknown` for a negative ETA, as the CLI prints it.
function eta(ms) {
  if (ms < 0) return "unknown";
  const s = Math.ceil(ms / 1000);
  const pad = (n) => String(n).padStart(2, "0");
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
}

// An element with attributes (data-* and others) and children (nodes or text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// A bar whose filled part is `part` of `whole`.
function bar(part, whole) {
  const pct = whole > 0 ? Math.min(100, (100 * part) / whole) : 0;
  return el("div", { class: "bar" }, el("div", { class: "fill", style: `width:${pct.toFixed(1)}%` }));
}

function empty(text) {
  return el("p", { class: "empty" }, text);
}

function renderBrokers(v) {
  const out = [];
  out.push(el("p", { class: "meta", "data-controller": v.controller_id },
    `Active controller: ${v.controller_id || "none"}`,
    v.cordon_default ? `; cordoned.log.dirs default: ${v.cordon_default}` : ""));
  if (v.brokers.length === 0) out.push(empty("No broker is registered."));
  for (const b of v.brokers) {
    const card = el("div", {
      class: "card broker", "data-broker": b.id, "data-leaders": b.leaders,
      "data-replicas": b.replicas, "data-cordon": b.cordon_config ?? "",
    });
    card.append(el("h2", {}, `Broker ${b.id}`,
      b.cordon_config ? el("span", { class: "badge" }, `cordoned: ${b.cordon_config}`) : null));
    card.append(el("div", { class: "meta" },
      `leaders `, el("b", { "data-field": "leaders" }, b.leaders),
      ` · replicas `, el("b", { "data-field": "replicas" }, b.replicas),
      b.rack ? ` · rack ${b.rack}` : "", ` · ${b.endpoint}`,
      b.kafka_endpoint ? ` · kafka ${b.kafka_endpoint}` : ""));
    if (b.error) card.append(el("p", { class: "error" }, `log dirs unknown: ${b.error}`));
    for (const d of b.dirs) {
      card.append(el("div", {
        class: "dir", "data-broker": b.id, "data-dir": d.path, "data-total-bytes": d.total_bytes,
        "data-used-bytes": d.used_bytes, "data-usable-bytes": d.usable_bytes,
        "data-replica-bytes": d.replica_bytes, "data-replicas": d.replicas,
        "data-cordoned": d.cordoned, "data-offline": d.offline,
      },
        el("div", {}, el("code", {}, d.path),
          d.cordoned ? el("span", { class: "badge" }, "cordoned") : null,
          d.offline ? el("span", { class: "badge" }, "offline") : null),
        bar(d.used_bytes, d.total_bytes),
        el("div", { class: "meta" },
          `${bytes(d.used_bytes)} used, ${bytes(d.usable_bytes)} free of ${bytes(d.total_bytes)}; `,
          `${d.replicas} replica${d.replicas === 1 ? "" : "s"} (${bytes(d.replica_bytes)})`,
          d.future_replicas ? `, ${d.future_replicas} moving in` : "",
          d.error ? ` — ${d.error}` : "")));
    }
    out.push(card);
  }
  return out;
}

function progressLine(p) {
  return `${bytes(p.copied)} copied, ${bytes(p.left)} left, ${bytes(p.rate)}/s, ETA ${eta(p.eta_ms)}`;
}

function progressAttrs(p) {
  return {
    "data-bytes-copied": p.copied, "data-bytes-left": p.left,
    "data-rate": p.rate, "data-eta-ms": p.eta_ms,
  };
}

function renderMoves(v) {
  const out = [];
  const t = v.total;
  out.push(el("div", Object.assign({ id: "moves-total", class: "card", "data-partitions": v.partitions.length }, progressAttrs(t)),
    el("h2", {}, `${v.partitions.length} partition${v.partitions.length === 1 ? "" : "s"} moving`,
      v.cancel_in_progress ? el("span", { class: "badge" }, "cancel in progress") : null),
    bar(t.copied, t.copied + t.left),
    el("div", { class: "meta" }, `Total: ${progressLine(t)}`)));
  if (v.partitions.length === 0) out.push(empty("No partition reassignments in flight."));
  for (const m of v.partitions.slice(0, MAX_MOVES_DRAWN)) {
    const card = el("div", Object.assign({
      class: "card move", "data-partition": m.name, "data-throttle-rate": m.throttle_rate,
    }, progressAttrs(m.progress)),
      el("div", {}, el("b", {}, m.name), ` [${m.original.join(",")}] → [${m.target.join(",")}]`,
        m.adding.length ? ` · adding ${m.adding.join(",")}` : "",
        m.removing.length ? ` · removing ${m.removing.join(",")}` : "",
        m.throttle_rate ? ` · throttle ${bytes(m.throttle_rate)}/s` : "",
        m.dir_pending.length ? ` · dir pending on ${m.dir_pending.join(",")}` : ""),
      bar(m.progress.copied, m.progress.copied + m.progress.left),
      el("div", { class: "meta" }, progressLine(m.progress)));
    for (const c of m.copies) {
      card.append(el("div", Object.assign({ class: "copy meta", "data-partition": m.name, "data-broker": c.broker },
        progressAttrs(c.progress)),
        `replica ${c.broker}${c.log_dir ? ` to log dir ${c.log_dir}` : ""}: ${progressLine(c.progress)}`));
    }
    out.push(card);
  }
  if (v.partitions.length > MAX_MOVES_DRAWN) {
    out.push(empty(`and ${v.partitions.length - MAX_MOVES_DRAWN} more partitions (counted in the total)`));
  }
  return out;
}

function renderThrottles(v) {
  if (v.throttles.length === 0) return [empty("No throttle is in force.")];
  const owners = {
    move: "its move (goes with it)",
    "auto-remove": "set by hand, removed by Ferry when no move in scope runs",
    hand: "set by hand (stays until changed)",
  };
  const rows = v.throttles.map((t) => el("tr", {
    class: "throttle", "data-scope": t.scope, "data-name": t.name, "data-key": t.key,
    "data-value": t.value, "data-owner": t.owner, "data-armed": t.armed,
  },
    el("td", {}, t.scope), el("td", {}, t.name || "(every broker)"), el("td", {}, t.key),
    el("td", { class: "num" }, /^\d+$/.test(t.value) ? `${bytes(Number(t.value))}/s` : t.value),
    el("td", {}, owners[t.owner] || t.owner, t.armed ? " (armed: a move in scope runs)" : "")));
  return [el("table", { id: "throttles-table" },
    el("thead", {}, el("tr", {}, ["Scope", "Name", "Key"].map((h) => el("th", {}, h)),
      el("th", { class: "num" }, "Value"), el("th", {}, "Owner"))),
    el("tbody", {}, rows))];
}

function renderGroups(v) {
  const out = [];
  for (const e of v.errors) out.push(el("p", { class: "error" }, e));
  if (v.truncated) out.push(el("p", { class: "meta" }, "More groups exist than are shown."));
  if (v.groups.length === 0) out.push(empty("No consumer group."));
  for (const g of v.groups) {
    const card = el("div", { class: "card group", "data-group": g.group, "data-total-lag": g.total_lag, "data-state": g.state },
      el("h2", {}, g.group, el("span", { class: "meta" }, ` ${g.state} · coordinator ${g.coordinator} · lag `),
        el("b", { "data-field": "total-lag" }, g.total_lag)));
    if (g.error) card.append(el("p", { class: "error" }, g.error));
    if (g.partitions.length) {
      card.append(el("table", {},
        el("thead", {}, el("tr", {}, el("th", {}, "Partition"),
          ["Committed", "Log end", "Lag"].map((h) => el("th", { class: "num" }, h)))),
        el("tbody", {}, g.partitions.map((p) => el("tr", {
          class: "group-partition", "data-group": g.group, "data-partition": `${p.topic}-${p.partition}`,
          "data-committed": p.committed, "data-end": p.end ?? "", "data-lag": p.lag ?? "",
        },
          el("td", {}, `${p.topic}-${p.partition}`), el("td", { class: "num" }, p.committed),
          el("td", { class: "num" }, p.end ?? "-"), el("td", { class: "num" }, p.lag ?? "-"))))));
    }
    out.push(card);
  }
  return out;
}

function renderPlans(v) {
  const out = [el("div", { id: "plans-state", "data-plans-available": v.available, "data-plans": v.plans.length })];
  if (v.plans.length === 0) out.push(empty("No plan."));
  for (const p of v.plans) {
    const copied = Math.max(0, p.bytes_total - p.bytes_left);
    const card = el("div", {
      class: "card plan", "data-plan": p.id, "data-state": p.state, "data-moves-total": p.moves_total,
      "data-queued": p.queued, "data-running": p.running, "data-done": p.done, "data-skipped": p.skipped,
      "data-failed": p.failed, "data-bytes-left": p.bytes_left, "data-bytes-total": p.bytes_total, "data-eta-ms": p.eta_ms,
    },
      el("h2", {}, `Plan ${p.id}: ${p.kind} ${p.target}`, el("span", { class: "badge" }, p.state)),
      bar(copied, p.bytes_total),
      el("div", { class: "meta" },
        `${p.moves_total} moves: ${p.queued} queued, ${p.running} running, ${p.done} done, ${p.skipped} skipped, ${p.failed} failed · ` +
        `${bytes(p.bytes_left)} left of ${bytes(p.bytes_total)} · ETA ${eta(p.eta_ms)}`),
      el("div", { class: "meta" },
        `caps: ${p.caps.into_broker} into and ${p.caps.out_of_broker} out of a broker, ${p.caps.dir_moves_per_broker} dir moves a broker, ` +
        `${p.caps.cluster} in the cluster` + (p.throttle_rate ? ` · throttle ${bytes(p.throttle_rate)}/s` : "")));
    if (p.brokers.length) {
      card.append(el("table", {},
        el("thead", {}, el("tr", {}, el("th", {}, "Broker"),
          ["In", "Out", "Dir", "Queued", "Bytes left", "Rate", "ETA"].map((h) => el("th", { class: "num" }, h)))),
        el("tbody", {}, p.brokers.map((b) => el("tr", {
          class: "plan-broker", "data-plan": p.id, "data-broker": b.broker, "data-moving-in": b.moving_in,
          "data-moving-out": b.moving_out, "data-dir-moves": b.dir_moves, "data-queued": b.queued,
          "data-bytes-left": b.bytes_left, "data-rate": b.rate, "data-eta-ms": b.eta_ms, "data-down": b.down,
        },
          el("td", {}, b.down ? `${b.broker} (down)` : b.broker), el("td", { class: "num" }, b.moving_in), el("td", { class: "num" }, b.moving_out),
          el("td", { class: "num" }, b.dir_moves), el("td", { class: "num" }, b.queued),
          el("td", { class: "num" }, bytes(b.bytes_left)), el("td", { class: "num" }, `${bytes(b.rate)}/s`),
          el("td", { class: "num" }, eta(b.eta_ms)))))));
    }
    for (const m of p.moves) {
      card.append(el("div", {
        class: "plan-move meta", "data-plan": p.id, "data-partition": m.name, "data-state": m.state,
        "data-bytes-left": m.bytes_left,
      }, `${m.name} [${m.from.join(",")}] → [${m.to.join(",")}] ${m.state}`,
        m.state === "running" ? ` · ${bytes(m.bytes_left)} left` : "", m.reason ? ` · ${m.reason}` : ""));
    }
    if (p.moves.length < p.moves_total) card.append(empty(`and ${p.moves_total - p.moves.length} more moves (counted above)`));
    for (const n of p.notes) card.append(el("p", { class: "meta" }, n));
    out.push(card);
  }
  return out;
}

const RENDER = { brokers: renderBrokers, moves: renderMoves, throttles: renderThrottles, groups: renderGroups, plans: renderPlans };

function currentTab() {
  const t = location.hash.replace(/^#/, "");
  return Object.prototype.hasOwnProperty.call(ENDPOINTS, t) ? t : "brokers";
}

function show(tab) {
  document.body.dataset.tab = tab;
  for (const s of document.querySelectorAll("section[data-page]")) s.hidden = s.dataset.page !== tab;
  for (const a of document.querySelectorAll("nav a[data-tab]")) a.classList.toggle("active", a.dataset.tab === tab);
}

function setStatus(state, text) {
  const s = document.getElementById("status");
  s.dataset.state = state;
  s.textContent = text;
}

let timer = null;
let polls = 0;
// Bumped by every tab change: a poll of an older generation neither draws nor polls again.
let generation = 0;

async function poll(gen) {
  const tab = currentTab();
  const section = document.getElementById(tab);
  try {
    const r = await fetch(ENDPOINTS[tab], { cache: "no-store" });
    const v = await r.json();
    if (!r.ok) throw new Error(v.error || `HTTP ${r.status}`);
    if (gen === generation) {
      section.replaceChildren(...RENDER[tab](v));
      section.dataset.updated = String(++polls);
      document.body.dataset.loaded = tab;
      setStatus("ok", `updated ${new Date().toLocaleTimeString()}`);
    }
  } catch (e) {
    if (gen === generation) {
      section.dataset.error = String(e.message || e);
      setStatus("error", `error: ${e.message || e}`);
    }
  }
  if (gen === generation) timer = setTimeout(() => poll(gen), POLL_MS);
}

function restart() {
  clearTimeout(timer);
  generation++;
  show(currentTab());
  poll(generation);
}

window.addEventListener("hashchange", restart);
restart();
