"use strict";
// The runs: rows from GET /api/runs, refreshed every few seconds; text only, never HTML.
const form = document.getElementById("filters");
const body = document.querySelector("#runs tbody");

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

async function refresh() {
  const query = new URLSearchParams(new FormData(form)).toString();
  const answer = await fetch("/api/runs?" + query);
  if (!answer.ok) return;
  const data = await answer.json();
  document.getElementById("backend").textContent = "(" + data.backend + " backend)";
  document.getElementById("count").textContent = data.runs.length + " of " + data.total;
  const fragment = document.createDocumentFragment();
  for (const run of data.runs) {
    const tr = document.createElement("tr");
    tr.dataset.runId = run.run_id;
    const link = document.createElement("a");
    link.href = "/runs/" + encodeURIComponent(run.run_id);
    link.textContent = run.run_id;
    cell(tr, "").appendChild(link);
    cell(tr, run.task); cell(tr, run.agent); cell(tr, run.model); cell(tr, run.state);
    const outcome = run.outcome || (run.state === "running" ? "running" : "");
    const span = document.createElement("span");
    span.className = "outcome outcome-" + outcome;
    span.textContent = outcome;
    cell(tr, "").appendChild(span);
    cell(tr, run.started_at);
    fragment.appendChild(tr);
  }
  body.replaceChildren(fragment);
  if (!document.body.dataset.loaded) {
    // Milliseconds from the navigation to the first full list (read by the browser test).
    document.body.dataset.renderedMs = String(Math.round(performance.now()));
  }
  document.body.dataset.loaded = "true";
}

async function evals() {
  const answer = await fetch("/api/evals");
  if (!answer.ok) return;
  const names = await answer.json();
  const target = document.getElementById("evals");
  if (names.length) target.append("Evaluations: ");
  for (const name of names) {
    const link = document.createElement("a");
    link.href = "/evals/" + encodeURIComponent(name);
    link.textContent = name;
    target.append(link, " ");
  }
}

form.addEventListener("input", refresh);
form.addEventListener("submit", (event) => { event.preventDefault(); refresh(); });
refresh();
evals();
setInterval(refresh, 3000);
