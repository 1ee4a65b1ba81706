"""Errors a user can cause. The CLI prints these as one clear message, never as a traceback."""


class KGQAError(Exception):
    """Base class for every error caused by input: a bad file, a bad flag, an unknown name."""

    #: The CLI's exit status for this error: 2 for a user's mistake.
    exit_code = 2


class ConfigError(KGQAError):
    """A setting, flag or spec string is malformed or names something that does not exist."""


class DataError(KGQAError):
    """An input file is missing or malformed; the message names the file and, where known, the line."""


class KGError(KGQAError):
    """A knowledge-graph request was refused: unknown entity or relation, hostile identifier, endpoint failure."""


class QueryTimeout(KGError):
    """A knowledge-graph query ran past its time budget."""


class ImportAborted(DataError):
    """An import cannot go on (a batch failed, or the builder was already used): never a bad line to skip."""


class RunFailed(KGQAError):
    """A run finished but every question it answered failed (a dead endpoint, a wrong model name): its rows are saved."""

    exit_code = 1
