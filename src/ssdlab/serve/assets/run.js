/* A run's page: where it is, its ETA, each test's tracking variables round by round with
   the steady-state window and limits, members and hosts; live while the run runs. */
"use strict";

(() => {
  const runId = decodeURIComponent(location.pathname.split("/").filter(Boolean).pop());
  const api = `../api/runs/${encodeURIComponent(runId)}`;
  const live = `../api/live/runs/${encodeURIComponent(runId)}`;
  const COLOURS = ["#1f5fbf", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#0b7285",
                   "#e67700", "#5c940d", "#364fc7", "#a61e4d"];
  const ROUND_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];
  const charts = new Map();  // chart id -> uPlot
  let fingerprint = null;

  function kv(rows) {
    return '<table class="kv"><tbody>' + rows.filter((r) => r[1] !== "" && r[1] != null)
      .map(([k, v]) => `<tr><td>${ssd.esc(k)}</td><td>${v}</td></tr>`).join("")
      + "</tbody></table>";
  }

  function summary(view) {
    const run = view.run;
    const status = `<span class="st st-${ssd.esc(run.status)}">${ssd.esc(run.status_text)}</span>`;
    let now = "";
    if (view.current) {
      const c = view.current;
      const of = c.max_rounds ? ` of at most ${c.max_rounds}` : "";
      const where = c.phase === "round"
        ? (c.round ? `round ${c.round}${of} stored` : "first round under way")
        : `${ssd.esc(c.phase)} under way`;
      now = `<p class="now">${ssd.esc(c.test)}: ${where}</p>`
        + `<p>ETA ${ssd.esc(view.eta.text)}</p>`;
    }
    const report = view.report
      ? `<p><a class="button" id="report" href="${encodeURIComponent(run.id)}/report">report</a></p>` : "";
    const quick = run.quick ? ` <span class="quick">QUICK: ${ssd.esc(run.quick_text)}</span>` : "";
    const memory = (view.memory || []).map(
      (m) => `<p class="fail memory">WARNING: ${ssd.esc(m)}</p>`).join("");
    document.getElementById("summary").innerHTML = `<div>${now}${report}${memory}</div>` + kv([
      ["run", ssd.esc(run.id) + quick], ["status", status],
      ["suite", ssd.esc(`${run.suite} (${run.profile})`)], ["target", ssd.esc(run.target)],
      ["model", ssd.esc(run.model)], ["host", ssd.esc(run.hostname)],
      ["started (UTC)", ssd.utc(run.created)], ["finished (UTC)", ssd.utc(run.finished)],
      ["set", ssd.esc(run.set ?? "")],
      ["rounds stored", String(view.rounds_stored)],
    ]);
    document.getElementById("crumb").textContent = run.id;
    document.title = `ssdlab: ${run.id} (${run.status})`;
  }

  /* The steady-state window drawn under the series: shaded rounds, the +-10 % and +-20 %
     bands around the window average. */
  function windowPlugin(win, rule) {
    return {hooks: {drawAxes: [(u) => {
      if (!win) return;
      const ctx = u.ctx;
      const x0 = u.valToPos(win.first - 0.5, "x", true);
      const x1 = u.valToPos(win.last + 0.5, "x", true);
      const {top, height} = u.bbox;
      ctx.save();
      ctx.fillStyle = "rgba(31, 95, 191, 0.06)";
      ctx.fillRect(x0, top, x1 - x0, height);
      const bands = rule && rule.line_band != null ? [rule.line_band]
        : [rule && rule.max_data_excursion != null ? rule.max_data_excursion : 0.2, 0.1];
      for (const b of bands) {
        const y0 = u.valToPos(win.average * (1 + b), "y", true);
        const y1 = u.valToPos(win.average * (1 - b), "y", true);
        ctx.fillStyle = b >= 0.15 ? "rgba(43, 138, 62, 0.08)" : "rgba(43, 138, 62, 0.12)";
        ctx.fillRect(x0, y0, x1 - x0, y1 - y0);
      }
      ctx.restore();
    }]}};
  }

  /* Two charts side by side on a wide screen, one on a narrow one. */
  function width(grid) {
    const room = grid.clientWidth || 600;
    const each = room >= 1100 ? (room - 16) / 2 : room;
    return Math.floor(Math.max(340, Math.min(880, each)));
  }

  function plot(id, box, opts, data) {
    const old = charts.get(id);
    if (old) old.destroy();
    box.innerHTML = "";
    opts.width = width(box.parentElement.parentElement);
    opts.height = 240;
    const chart = new uPlot(opts, data, box);
    charts.set(id, chart);
  }

  function trackingChart(id, box, variable, rule) {
    const xs = variable.rounds;
    const win = variable.window;
    const series = [{label: "round"}, {label: variable.name, stroke: COLOURS[0], width: 2,
                     points: {show: true, size: 6}, spanGaps: true}];
    const data = [xs, variable.values];
    if (win) {
      const inWin = (x) => x >= win.first && x <= win.last;
      const fit = (x) => win.intercept + win.slope * (x - win.first);
      const mid = (win.first + win.last) / 2;
      series.push({label: "window average", stroke: "#2b8a3e", dash: [6, 4],
                   points: {show: false}});
      data.push(xs.map((x) => (inWin(x) ? win.average : null)));
      series.push({label: "least-squares line", stroke: "#d9480f", dash: [2, 3],
                   points: {show: false}});
      data.push(xs.map((x) => (inWin(x) ? fit(x) : null)));
      if (rule && rule.max_slope_excursion != null) {
        const steep = rule.max_slope_excursion * win.average / (rule.window - 1);
        const pct = rule.max_slope_excursion * 100;
        series.push({label: `slope limit +${pct} %`, stroke: "#868e96", dash: [1, 3],
                     points: {show: false}});
        data.push(xs.map((x) => (inWin(x) ? win.average + steep * (x - mid) : null)));
        series.push({label: `slope limit −${pct} %`, stroke: "#868e96", dash: [1, 3],
                     points: {show: false}});
        data.push(xs.map((x) => (inWin(x) ? win.average - steep * (x - mid) : null)));
      }
    }
    // the y axis reaches the bands drawn around the window average
    const reach = rule && rule.line_band != null ? rule.line_band : 0.2;
    const yRange = (u, min, max) => {
      let lo = min, hi = max;
      if (win && win.average != null) {
        lo = Math.min(lo ?? Infinity, win.average * (1 - reach));
        hi = Math.max(hi ?? -Infinity, win.average * (1 + reach));
      }
      if (lo == null || hi == null || !isFinite(lo) || !isFinite(hi)) return [0, 1];
      const pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.05 || 1;
      return [lo - pad, hi + pad];
    };
    plot(id, box, {
      title: variable.name,
      scales: {x: {time: false}, y: {range: yRange}},
      axes: [{label: "round", incrs: ROUND_STEPS}, {size: 70}],
      series,
      plugins: [windowPlugin(win, rule)],
      legend: {live: false},
    }, data);
  }

  function caption(variable, rule) {
    const win = variable.window;
    if (!rule) return "";
    if (!win) {
      return `steady state (${rule.name}): needs ${rule.window} rounds for its window`;
    }
    const parts = [];
    if (rule.max_data_excursion != null) {
      parts.push(`data excursion ${ssd.num(win.data_excursion_pct, 1)} % `
        + `(limit ${rule.max_data_excursion * 100} %)`);
    }
    if (rule.max_slope_excursion != null) {
      parts.push(`slope excursion ${ssd.num(win.slope_excursion_pct, 1)} % `
        + `(limit ${rule.max_slope_excursion * 100} %)`);
    }
    if (rule.line_band != null) {
      parts.push(`fitted line ${ssd.num(win.line_min_pct, 1)}-${ssd.num(win.line_max_pct, 1)} % `
        + `of the average (limit ±${rule.line_band * 100} %)`);
    }
    const verdict = win.passed ? '<span class="pass">within the limits</span>'
      : '<span class="fail">outside the limits</span>';
    return `window rounds ${win.first}-${win.last} (${ssd.esc(rule.name)}, shaded; bands: `
      + `average ±10 % and ±20 %): ${ssd.esc(parts.join(", "))}: ${verdict}`;
  }

  function seriesChart(id, box, title, unit, lines) {
    const xs = [...new Set(lines.flatMap((l) => l.rounds))].sort((a, b) => a - b);
    const data = [xs];
    const series = [{label: "round"}];
    lines.forEach((line, i) => {
      const at = new Map(line.rounds.map((r, k) => [r, line.values[k]]));
      data.push(xs.map((x) => (at.has(x) ? at.get(x) : null)));
      series.push({label: line.name, stroke: COLOURS[i % COLOURS.length], width: 2,
                   points: {show: true, size: 5}, spanGaps: true});
    });
    plot(id, box, {title, scales: {x: {time: false}}, axes: [{label: "round", incrs: ROUND_STEPS},
      {size: 70, label: unit}], series, legend: {live: false}}, data);
  }

  function section(test) {
    const key = "test-" + test.name.replace(/[^A-Za-z0-9_-]/g, "_");
    let el = document.getElementById(key);
    if (!el) {
      el = document.createElement("section");
      el.id = key;
      el.className = "test";
      document.getElementById("tests").appendChild(el);
    }
    return [el, key];
  }

  function chartBox(parent, id, captionHtml) {
    const wrap = document.createElement("div");
    wrap.className = "chart";
    const box = document.createElement("div");
    box.id = id;
    wrap.appendChild(box);
    if (captionHtml) {
      const p = document.createElement("p");
      p.className = "caption";
      p.innerHTML = captionHtml;
      wrap.appendChild(p);
    }
    parent.appendChild(wrap);
    return box;
  }

  /* The test's self-consistency checks (docs/consistency.md): its line, and each marked
     cell's reason. */
  function checks(c) {
    if (!c) return "";
    const cls = c.memory || c.marked.length ? "checks fail" : "checks muted";
    return `<p class="${cls}">checks: ${ssd.esc(c.message)}</p>` + (c.marked.length
      ? "<ul class=\"checks\">" + c.marked.map(
        (m) => `<li>* ${ssd.esc(m.cell)}: ${ssd.esc(m.message)}</li>`).join("") + "</ul>"
      : "");
  }

  function renderTest(test) {
    const [el, key] = section(test);
    const ok = test.rounds.filter((r) => r.status === "ok").length;
    const failed = test.rounds.length - ok;
    const max = test.max_rounds ? ` of at most ${test.max_rounds}` : "";
    el.innerHTML = `<h2>${ssd.esc(test.title)} <span class="muted">(${ssd.esc(test.name)})</span>`
      + ` <span class="st st-${ssd.esc(test.status)}">${ssd.esc(test.status)}</span></h2>`
      + `<p>${ok} round(s)${max}${failed ? `, ${failed} failed` : ""}`
      + `${test.verdict ? ": " + ssd.esc(test.verdict) : ""}</p>` + checks(test.checks);
    el.dataset.rounds = String(test.rounds.length);
    const grid = document.createElement("div");
    grid.className = "charts";
    el.appendChild(grid);
    const shown = test.tracking.filter((v) => v.primary).concat(
      test.tracking.filter((v) => !v.primary)).slice(0, 12);
    shown.forEach((variable, i) => {
      const id = `${key}-var-${i}`;
      trackingChart(id, chartBox(grid, id, caption(variable, test.rule)), variable, test.rule);
    });
    if (test.members.length) {
      const id = `${key}-members`;
      const title = "members: MB/s (read + write) per round";
      seriesChart(id, chartBox(grid, id, "each member device's own I/O over each round"),
                  title, "MB/s", test.members.map((m) => ({name: m.name, rounds: m.rounds,
                  values: m.mb_per_s})));
    }
    if (test.hosts && test.hosts.hosts.length) {
      const id = `${key}-hosts`;
      seriesChart(id, chartBox(grid, id, "each host's part of every round"),
                  `hosts: ${test.hosts.variable}`, "", test.hosts.hosts);
    }
  }

  function events(view) {
    const rows = view.events.slice().reverse().map((e) => `<tr><td>${ssd.utc(e.time)}</td>`
      + `<td>${ssd.esc(e.test ?? "")}</td><td>${ssd.esc(e.kind)}</td>`
      + `<td>${ssd.esc(e.message)}</td></tr>`);
    document.querySelector("#events tbody").innerHTML = rows.join("")
      || '<tr><td class="muted">none</td></tr>';
  }

  function render(view) {
    if (view.error) {
      document.getElementById("summary").innerHTML =
        `<p class="error">${ssd.esc(view.error)}</p>`;
      return;
    }
    if (view.fingerprint === fingerprint) return;
    fingerprint = view.fingerprint;
    summary(view);
    const names = new Set(view.tests.map((t) => "test-" + t.name.replace(/[^A-Za-z0-9_-]/g, "_")));
    for (const el of [...document.querySelectorAll("#tests > section")]) {
      if (!names.has(el.id)) el.remove();
    }
    view.tests.forEach(renderTest);
    events(view);
    const body = document.body.dataset;
    if (body.rounds !== String(view.rounds_stored)) body.roundsShownAt = String(Date.now());
    body.rounds = String(view.rounds_stored);
    body.status = view.run.status;
  }

  async function refresh() {
    try {
      render(await ssd.getJSON(api));
    } catch (err) {
      render({error: err.message});
    }
  }

  ssd.follow(live, "run", render, refresh);
})();
