"""What an analysis writes for people: the HTML page and its figures (``report``), and the files a paper takes
(``paper_outputs``, from ``paper_tables`` and ``paper_figures``)."""
