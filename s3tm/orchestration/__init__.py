"""What Airflow runs besides the Spark jobs: the DAGs' shared declarations
(``dag_support``), the bodies of the remap DAG's Python tasks (``remap_tasks``) and the
Airflow half of the demo (``airflow_demo``). DAG files import from here inside tasks only,
except ``dag_support``, which is cheap to import."""
