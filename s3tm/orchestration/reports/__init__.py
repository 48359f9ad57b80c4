"""The run reports: where they are kept (``store``), their Markdown (``text``) and charts
(``charts``), and the Airflow UI's pages that show them (``views``)."""
