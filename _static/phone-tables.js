// On a narrow screen a table wider than its column is stacked: each row becomes a
// block whose cells are labelled with their column's heading (_static/phone.css),
// so every column is in view without scrolling sideways. A table that fits stays
// a table. tools/phone_check.py checks at 390 px that no table is wider than
// its column.
(function () {
  var PHONE = "(max-width: 575.98px)";
  function label(table) {
    var heads = table.querySelectorAll("thead tr:last-child th");
    if (!heads.length) return false;
    var names = Array.prototype.map.call(heads, function (th) {
      return th.textContent.trim();
    });
    table.querySelectorAll("tbody tr").forEach(function (tr) {
      Array.prototype.forEach.call(tr.children, function (cell, i) {
        if (names[i]) cell.setAttribute("data-label", names[i]);
      });
    });
    return true;
  }
  function fit() {
    var phone = window.matchMedia(PHONE).matches;
    document.querySelectorAll(".bd-article table").forEach(function (table) {
      table.classList.remove("pe-stacked");
      if (!phone || table.closest("pre")) return;
      var column = table.parentElement.clientWidth;
      if (table.scrollWidth > column + 1 && label(table)) {
        table.classList.add("pe-stacked");
      }
    });
  }
  window.addEventListener("load", fit);
  window.addEventListener("resize", fit);
})();
