// On a phone each figure of a chapter is shown at least two thirds of its own
// width, so that its smallest text (10 pt at 100 dpi) stays over 9 px, and
// scrolls sideways in its box (_static/phone.css); tools/phone_check.py checks
// every page at 390 px. Wider screens show figures as before.
(function () {
  var PHONE = "(max-width: 575.98px)";
  var SHARE = 0.67;
  function size() {
    var phone = window.matchMedia(PHONE).matches;
    document.querySelectorAll(".bd-article figure > img").forEach(function (img) {
      if (!img.naturalWidth) {
        img.addEventListener("load", size, { once: true });
        return;
      }
      var least = Math.ceil(img.naturalWidth * SHARE);
      var column = img.parentElement.clientWidth;
      img.style.maxWidth = phone && least > column ? "none" : "";
      img.style.width = phone && least > column ? least + "px" : "";
    });
  }
  window.addEventListener("load", size);
  window.addEventListener("resize", size);
})();
