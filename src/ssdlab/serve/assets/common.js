/* ssdlab serve: helpers shared by the pages (no build step, no dependencies). */
"use strict";

const ssd = {
  esc(text) {
    return String(text ?? "").replace(/[&<>"']/g, (c) => (
      {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  },
  utc(seconds) {
    if (seconds == null) return "";
    return new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ");
  },
  num(value, digits) {
    if (value == null || !isFinite(value)) return "–";
    const abs = Math.abs(value);
    const d = digits ?? (abs >= 1000 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3);
    return value.toLocaleString("en-US", {maximumFractionDigits: d, minimumFractionDigits: 0});
  },
  live(state, text) {
    const el = document.getElementById("live");
    if (!el) return;
    el.className = "live " + state;
    el.textContent = text;
  },
  /* Follow server-sent events `name` at `url`: onData(parsed JSON) for each. The browser
     reconnects by itself; while it cannot, `fallback` (a function fetching the same data)
     is polled every few seconds. */
  follow(url, name, onData, fallback) {
    let last = Date.now();
    const source = new EventSource(url);
    source.addEventListener("open", () => ssd.live("on", "live"));
    source.addEventListener("error", () => ssd.live("off", "reconnecting"));
    source.addEventListener(name, (event) => {
      last = Date.now();
      ssd.live("on", "live");
      onData(JSON.parse(event.data));
    });
    source.addEventListener("problem", (event) => {
      source.close();
      ssd.live("off", "stopped");
      onData({error: JSON.parse(event.data).error});
    });
    if (fallback) {
      setInterval(() => {
        if (source.readyState !== EventSource.CLOSED && Date.now() - last > 20000
            && source.readyState !== EventSource.OPEN) fallback();
      }, 5000);
    }
    return source;
  },
  async getJSON(url) {
    const response = await fetch(url, {credentials: "same-origin", cache: "no-store"});
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  },
};
