"""The bodies of the DAGs' Python tasks, one module per DAG (remap, monitor, maintenance):
imported inside a task, never at a DAG file's parse."""
