"use strict";
// One run: settings, outcome, checks, output (followed live), diff, dialog, the daemon's
// view and a terminal. Everything the run wrote is shown with textContent, never as HTML.
const runId = decodeURIComponent(location.pathname.split("/").pop());
const api = "/api/runs/" + encodeURIComponent(runId);
let logLine = 0;
let graded = false;

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text != null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function renderDiff(target, text) {
  if (!text) { target.textContent = "empty"; return; }
  const fragment = document.createDocumentFragment();
  for (const line of text.split("\n")) {
    let cls = "";
    if (line.startsWith("diff --git") || line.startsWith("+++") || line.startsWith("---")) cls = "file";
    else if (line.startsWith("@@")) cls = "hunk";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    fragment.appendChild(el("div", line, cls));
  }
  target.replaceChildren(fragment);
}

function renderSettings(data) {
  const rows = [["backend", data.backend], ["state", data.live ? data.live.state : "gone"],
    ["run directory", data.run_dir]];
  const s = data.summary;
  if (s) {
    rows.push(["task", s.task], ["agent", s.config.agent], ["model", s.config.model],
      ["mode", s.config.mode], ["difficulty", s.config.difficulty], ["timeout", s.config.timeout],
      ["egress", s.config.egress], ["started", s.started_at], ["status", s.patch_result.status]);
    if (s.patch_result.error_msg) rows.push(["error", s.patch_result.error_msg]);
    if (s.touched) rows.push(["touched", "yes, at " + s.touched_at]);
  } else if (data.live) {
    rows.push(["task", data.live.task], ["agent", data.live.agent], ["model", data.live.model],
      ["image", data.live.image], ["created", data.live.created_at]);
  }
  const table = document.getElementById("settings");
  table.replaceChildren(...rows.map(([k, v]) => {
    const tr = el("tr");
    tr.append(el("th", k), el("td", v == null ? "" : v));
    return tr;
  }));
}

function renderChecks(data) {
  const s = data.summary;
  const box = document.getElementById("checks");
  if (!s) { box.textContent = "not graded yet"; return; }
  const p = s.patch_result;
  const pocs = p.pov_total == null ? "not run" : (p.pov_passed || 0) + " of " + p.pov_total + " fixed";
  const verdict = (v) => v == null ? "not run" : (v ? "passed" : "failed");
  const list = el("ul");
  list.append(el("li", "build: " + verdict(p.build_success)), el("li", "PoCs: " + pocs),
    el("li", "function tests: " + verdict(p.func_test_success)),
    el("li", "intent tests: " + verdict(p.intent_test_success)));
  const logs = data.checks.map((check) => {
    const details = el("details");
    details.append(el("summary", check.name), el("pre", check.log, "log"));
    return details;
  });
  box.replaceChildren(list, ...logs);
}

async function load() {
  const answer = await fetch(api);
  if (!answer.ok) { document.getElementById("run-id").textContent = runId + " (not found)"; return; }
  const data = await answer.json();
  document.getElementById("run-id").textContent = runId;
  const outcome = data.summary ? data.summary.outcome || data.summary.patch_result.status
    : (data.live && data.live.state === "running" ? "running" : "");
  const badge = document.getElementById("outcome");
  badge.textContent = outcome;
  badge.className = "outcome outcome-" + outcome;
  renderSettings(data);
  renderChecks(data);
  if (data.final_diff != null) renderDiff(document.getElementById("diff"), data.final_diff);
  const running = data.live && data.live.state === "running";
  document.getElementById("terminal-section").hidden = !(running && data.supports_exec);
  document.getElementById("daemon-section").hidden = !running;
  if (running) daemon();
  graded = data.summary != null && !running;
  document.body.dataset.outcome = data.summary ? outcome : "";
}

async function daemon() {
  for (const [view, id] of [["capabilities", "capabilities"], ["diff", "live-diff"]]) {
    const answer = await fetch(api + "/daemon/" + view);
    const target = document.getElementById(id);
    const data = await answer.json();
    if (!answer.ok) { target.textContent = data.error; continue; }
    if (view === "diff") renderDiff(target, data.diff);
    else target.textContent = JSON.stringify(data, null, 2);
  }
}

async function logs() {
  const answer = await fetch(api + "/logs?since=" + logLine);
  if (!answer.ok) return;
  const data = await answer.json();
  if (data.lines.length) {
    document.getElementById("logs").append(data.lines.join("\n") + "\n");
    logLine = data.next;
  }
}

function text(value) {
  if (value == null) return "";
  if (typeof value === "string") return value;
  if (Array.isArray(value)) return value.map((part) => part.text != null ? part.text : JSON.stringify(part)).join("\n");
  return JSON.stringify(value, null, 2);
}

async function dialog() {
  const answer = await fetch(api + "/dialog");
  if (!answer.ok) return;
  const entries = await answer.json();
  if (!entries.length) return;
  const box = document.getElementById("dialog");
  const items = entries.map((entry, index) => {
    const call = el("details");
    call.open = index === entries.length - 1;
    const head = [entry.timestamp, entry.model].filter(Boolean).join(" · ");
    call.appendChild(el("summary", "call " + (index + 1) + (head ? " — " + head : "")));
    for (const message of entry.messages || []) {
      call.appendChild(el("div", (message.role || "?") + ": " + text(message.content),
        "message role-" + (message.role || "")));
    }
    if (entry.reply != null) call.appendChild(el("div", "reply: " + text(entry.reply), "message role-assistant"));
    if (entry.tool_calls) call.appendChild(el("div", "tool calls: " + text(entry.tool_calls), "message role-tool"));
    if (entry.usage) call.appendChild(el("div", "usage: " + text(entry.usage), "message"));
    if (entry.unreadable) call.appendChild(el("div", entry.unreadable, "message"));
    return call;
  });
  box.replaceChildren(...items);
}

function openTerminal() {
  document.getElementById("terminal-open").hidden = true;
  const term = new Terminal({ convertEol: false });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById("terminal"));
  fit.fit();
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const socket = new WebSocket(scheme + location.host + api + "/terminal");
  socket.binaryType = "arraybuffer";
  const encoder = new TextEncoder();
  socket.onopen = () => {
    socket.send(JSON.stringify({ cols: term.cols, rows: term.rows }));
    term.focus();
  };
  socket.onmessage = (event) => {
    term.write(typeof event.data === "string" ? event.data : new Uint8Array(event.data));
  };
  socket.onclose = () => term.write("\r\n[terminal closed]\r\n");
  term.onData((data) => socket.readyState === 1 && socket.send(encoder.encode(data)));
  term.onResize(({ cols, rows }) => socket.readyState === 1 && socket.send(JSON.stringify({ cols, rows })));
  window.addEventListener("resize", () => fit.fit());
  window.sshTerminal = term;
}

document.getElementById("terminal-open").addEventListener("click", openTerminal);

async function tick() {
  await logs();
  if (!graded) { await load(); await dialog(); }
}

load().then(() => { logs(); dialog(); });
setInterval(tick, 2000);
