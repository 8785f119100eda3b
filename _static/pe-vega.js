// The interactive figures' libraries (pe_tutorial/interactive.py) in the book: the
// site's own vega/ folder, found from this script's address, so it holds on a page
// at any depth. A notebook (Jupyter, Colab) has no such script and takes the CDN.
window.peVegaBase = new URL("../vega/", document.currentScript.src).href;
