"""What the book's pages need beside the package's results.

- ``plots``        the figure helpers the chapters share, and the book's style
- ``interactive``  the interactive figures (Altair, Vega served by the book)
- ``prose``        schemes named in sentences (their names, a list joined as English)
- ``glue``         MyST-NB's ``glue`` when it is there, a plain print when not (Colab)
- ``records``      recorded runs that are neither timings nor experiments (the
                   learned table of chapters 2 and 4)
"""

from .._lazy import submodules

# pe.pages.plots and the rest load on first use: matplotlib and Altair only when drawn
__getattr__ = submodules(__name__, __path__)
