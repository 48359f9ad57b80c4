"""The checkout's ``s3tm`` commands (registered by ``s3tm.cli.main`` when run from one)."""
