// ssdlab report: hover values and series toggling for the inline SVG charts.
(function () {
  "use strict";
  var tip = document.getElementById("tip");
  function show(ev, text) {
    tip.textContent = text;
    tip.style.display = "block";
    var x = ev.clientX + 14, y = ev.clientY + 12;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 4) { x = ev.clientX - w - 10; }
    if (y + h > window.innerHeight - 4) { y = ev.clientY - h - 10; }
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function hide() { tip.style.display = "none"; }
  document.querySelectorAll("svg.chart .pt").forEach(function (el) {
    var text = el.getAttribute("data-tip");
    var title = el.querySelector("title");
    if (title) { title.remove(); }  // our tooltip replaces the browser's
    el.addEventListener("mousemove", function (ev) { el.classList.add("hot"); show(ev, text); });
    el.addEventListener("mouseleave", function () { el.classList.remove("hot"); hide(); });
  });
  function toggle(item) {
    var svg = item.closest("svg");
    var key = item.getAttribute("data-series");
    var off = !item.classList.contains("off");
    item.classList.toggle("off", off);
    item.setAttribute("aria-pressed", off ? "true" : "false");
    svg.querySelectorAll('.series[data-series="' + key + '"]').forEach(function (g) {
      g.classList.toggle("off", off);
    });
  }
  document.querySelectorAll("svg.chart .legend-item").forEach(function (item) {
    item.addEventListener("click", function () { toggle(item); });
    item.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); toggle(item); }
    });
  });
  document.body.setAttribute("data-ready", "1");
})();
