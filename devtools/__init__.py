"""The checkout's development tools, in no wheel or image (not ``tools``: Airflow's
cron-descriptor installs a package of that name): services on this machine
without containers (``local``: a Kafka broker from its jars, Airflow's processes, the demo
through them) and the commands that start them (``cli``: ``s3tm demo``, ``s3tm airflow``,
``s3tm kafka``). ``make setup`` puts the checkout on the virtualenv's path."""
