"""The project's small exception set.

Every error a user can cause derives from :class:`S3TMError`; invalid arguments to a public
function also derive from :class:`ValueError` so callers can catch either.
"""


class S3TMError(Exception):
    """Base class of all errors raised on purpose by this project."""


class InvalidArgumentError(S3TMError, ValueError):
    """A public function got an argument outside its documented domain."""


class InputDataError(S3TMError, ValueError):
    """An input file is missing, unreadable or has no usable records."""


class MappingFormatError(S3TMError, ValueError):
    """A routing-table directory is missing files or holds inconsistent data."""
