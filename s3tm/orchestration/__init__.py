"""What Airflow runs besides the Spark jobs: the DAGs' shared declarations
(``dag_support``), the bodies of the DAGs' Python tasks (``tasks``: remap, monitor,
maintenance) and the run reports they write and the UI shows (``reports``). DAG files
import from here inside tasks only, except ``dag_support``, which is cheap to import."""
