"""The ``s3tm`` command line."""
