// Every figure of a chapter is shown whole, at most its column's width (matplotlib
// figures are drawn FIGURE_WIDTH = 6.4 inches wide, so on a phone their smallest
// text stays about 8 px: pe_tutorial/pages/plots.py, checked on every page by
// tools/phone_check.py). A tap or click on a figure opens its image at full size.
(function () {
  function link() {
    document.querySelectorAll(".bd-article figure img").forEach(function (img) {
      if (img.closest("a")) return;
      var a = document.createElement("a");
      a.href = img.currentSrc || img.src;
      a.className = "pe-figure-full";
      a.title = "Open the figure at full size";
      img.parentNode.insertBefore(a, img);
      a.appendChild(img);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", link);
  } else {
    link();
  }
})();
