// A box that must scroll sideways (a code cell, a printed table wider than a
// phone) says so: a line above it reads "scroll sideways for more", and its
// right edge is shaded while there is more to see (_static/phone.css).
// tools/phone_check.py fails a page where a box scrolls without this cue.
(function () {
  var BOXES = ".bd-article div.highlight pre, .bd-article div.output pre, " +
    ".bd-article .pst-scrollable-table-container";
  function cue() {
    document.querySelectorAll(BOXES).forEach(function (box) {
      var scrolls = box.scrollWidth > box.clientWidth + 1;
      var note = box.previousElementSibling;
      var has = note && note.classList.contains("pe-scroll-cue");
      box.classList.toggle("pe-scrolls", scrolls);
      box.classList.toggle("pe-scrolled-end", scrolls &&
        box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
      if (scrolls && !has) {
        note = document.createElement("div");
        note.className = "pe-scroll-cue";
        note.setAttribute("aria-hidden", "true");
        note.textContent = "scroll sideways for more \u2192";
        box.parentNode.insertBefore(note, box);
        box.addEventListener("scroll", function () {
          box.classList.toggle("pe-scrolled-end",
            box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
        });
      } else if (!scrolls && has) {
        note.remove();
      }
    });
  }
  window.addEventListener("load", function () { setTimeout(cue, 0); });
  window.addEventListener("resize", cue);
  // a solution or a code cell unfolded: its boxes now have a width (after the
  // toggle's 0.3 s transition)
  document.addEventListener("click", function () { setTimeout(cue, 350); });
  document.addEventListener("toggle", cue, true);
})();
