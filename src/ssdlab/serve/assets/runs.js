/* The runs page: the stored runs, filtered; refreshed when the store changes. */
"use strict";

(() => {
  const form = document.getElementById("filters");
  const tbody = document.querySelector("#runs tbody");
  const count = document.getElementById("count");
  const KEYS = ["suite", "target", "model", "status"];

  function query() {
    const params = new URLSearchParams();
    for (const key of KEYS) {
      const value = form.elements[key].value.trim();
      if (value) params.set(key, value);
    }
    return params.toString();
  }

  function choices(select, values) {
    const chosen = select.value;
    select.innerHTML = '<option value="">any</option>' + values.map(
      (v) => `<option${v === chosen ? " selected" : ""}>${ssd.esc(v)}</option>`).join("");
  }

  function datalist(id, values) {
    document.getElementById(id).innerHTML = values.map(
      (v) => `<option value="${ssd.esc(v)}">`).join("");
  }

  function row(r) {
    const id = encodeURIComponent(r.id);
    const profile = r.profile + (r.quick ? "*" : "");
    return `<tr><td><a href="runs/${id}">${ssd.esc(r.id)}</a></td><td>${ssd.esc(r.suite)}</td>`
      + `<td>${ssd.esc(profile)}</td><td>${ssd.esc(r.target)}</td><td>${ssd.esc(r.model)}</td>`
      + `<td class="st st-${ssd.esc(r.status)}">${ssd.esc(r.status)}</td>`
      + `<td>${ssd.utc(r.created)}</td><td class="tests">${ssd.esc(r.tests.join(", "))}</td></tr>`;
  }

  function render(data) {
    choices(form.elements.suite, data.choices.suite);
    choices(form.elements.status, data.choices.status);
    datalist("target-choices", data.choices.target);
    datalist("model-choices", data.choices.model);
    tbody.innerHTML = data.runs.map(row).join("");
    const shown = data.runs.length === data.total ? `${data.total} runs`
      : `${data.runs.length} of ${data.total} runs`;
    count.textContent = data.total ? shown + " (newest first; * quick profile)"
      : "no runs yet in this store";
    document.body.dataset.runs = String(data.runs.length);
    document.body.dataset.rendered = performance.now().toFixed(1);
  }

  let pending = null;
  async function load() {
    const q = query();
    history.replaceState(null, "", q ? `?${q}` : location.pathname);
    const mine = pending = fetch("api/runs" + (q ? `?${q}` : ""), {cache: "no-store"});
    try {
      const response = await mine;
      if (mine !== pending) return;  // a newer request is on its way
      const data = await response.json();
      if (!response.ok) throw new Error(data.error || response.statusText);
      render(data);
    } catch (err) {
      count.innerHTML = `<span class="error">${ssd.esc(err.message)}</span>`;
    }
  }

  const initial = new URLSearchParams(location.search);
  for (const key of KEYS) {
    const value = initial.get(key);
    if (value == null) continue;
    const el = form.elements[key];
    if (el.tagName === "SELECT") el.innerHTML += `<option selected>${ssd.esc(value)}</option>`;
    el.value = value;
  }
  form.addEventListener("change", load);
  form.addEventListener("submit", (e) => { e.preventDefault(); load(); });
  let typing = null;
  form.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(load, 250); });
  load();
  let first = true;
  ssd.follow("api/live/runs", "runs", () => { if (!first) load(); first = false; }, load);
})();
