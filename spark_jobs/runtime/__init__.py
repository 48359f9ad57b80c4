"""How the jobs' processes run, beside what they compute: bytecode inside Spark's Python
zips (``zip_bytecode``), the tokeniser's code-point table on disk (``code_point_cache``),
whether a port is free (``ports``) and a process' peak memory (``peak_rss``)."""
