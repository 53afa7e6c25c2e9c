// Engram memory console: the little the pages need of a script. Every
// page works without it; it only asks before destructive changes and
// says what to type to confirm an erasure. No network, no framework.
(function () {
  "use strict";
  document.addEventListener("submit", function (ev) {
    var f = ev.target;
    var msg = f.getAttribute && f.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) {
      ev.preventDefault();
    }
  });
  var erase = document.getElementById("erase");
  if (erase) {
    var hint = document.getElementById("erase-hint");
    var val = function (id) { var e = document.getElementById(id); return e ? e.value.trim() : ""; };
    var update = function () {
      var s = val("erase-session"), p = val("erase-project"), t = val("erase-tenant");
      var want = s ? "erase session " + s : p ? "erase project " + p : "erase tenant " + (t || "(default)");
      hint.textContent = "Type \u201c" + want + "\u201d to confirm.";
    };
    erase.addEventListener("input", update);
    update();
  }
})();
