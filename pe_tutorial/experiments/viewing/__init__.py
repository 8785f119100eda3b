"""A record read back: its tables, figures and report card (``show``).

Above ``running`` (a record's entries are read as the run assembled them).

- ``run_files``      a record's entries made plain for reading, and their corpora
- ``viewer``         ``show``: a record's tables and figures
- ``viewer_figures`` the figures ``show`` writes
- ``report_card``    ``show --report``: a record as one Markdown page with its figures
"""
