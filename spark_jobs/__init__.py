"""PySpark jobs: thin ``main()`` functions around pure DataFrame -> DataFrame transforms."""
