"""The job's errors: those the user can fix (`UserError`: one `error:` line, exit 2),
a results commit that could not be completed (`CommitError`: exit 1), and how Spark's
own errors are recognised and kept out of the logs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class UserError(Exception):
    """Invalid configuration or input.

    The message names the key, file or column at fault and counts, never a record value:
    it ends up in logs that are kept longer than the data.
    """


class ConfigError(UserError):
    """The configuration file or a `--set` override is invalid."""


class InputError(UserError):
    """An input table cannot be read or does not fit the configuration."""


class CommitError(RuntimeError):
    """A results commit could not be completed (see the message for the state left)."""


# PySpark (4.x) logs every captured JVM exception that carries a query context to these
# loggers, at ERROR, through a handler of their own on stderr (propagate=False), with the
# exception's full message and a Python traceback. Spark's messages can quote record
# values (e.g. CAST_INVALID_INPUT "The value '...' of the type STRING ...").
SPARK_CONTEXT_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")
# Error conditions that say an input file cannot be read as configured (bad records
# under mode FAILFAST, a corrupt or foreign file), and how deep to look for them.
_READ_CONDITIONS = ("MALFORMED_", "FAILED_READ_FILE", "CANNOT_READ_FILE")
_MAX_CAUSES = 8


@contextmanager
def spark_error_logs_silenced() -> Iterator[None]:
    """Mute PySpark's query-context error loggers while the job handles Spark errors itself.

    For code that expects a Spark exception and turns it into a one-line UserError:
    without this, PySpark would print the raw message and a traceback beside it.
    """
    from pyspark.logger import PySparkLogger

    # Created through PySparkLogger so that PySpark later finds a logger of its own class.
    loggers = [PySparkLogger.getLogger(name) for name in SPARK_CONTEXT_LOGGERS]
    saved = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, was_disabled in zip(loggers, saved):
            logger.disabled = was_disabled


def spark_error_name(exc: BaseException) -> str:
    """Spark's error condition (e.g. PATH_NOT_FOUND) or the Java exception's class name.

    Never the message: past its first words it may quote data (a malformed record, the
    last bytes of a file that is not Parquet). A failed Spark job arrives as a py4j
    error whose conditions sit on its causes, wrappers first: the deepest, most
    specific one is taken (MALFORMED_CSV_RECORD rather than FAILED_READ_FILE.NO_HINT).
    """
    condition = getattr(exc, "getCondition", lambda: None)()
    if condition:
        return str(condition)
    java = getattr(exc, "java_exception", None)  # py4j.protocol.Py4JJavaError
    first_class = deepest = None
    for _ in range(_MAX_CAUSES):
        if java is None:
            break
        try:
            if first_class is None:
                first_class = str(java.getClass().getSimpleName())
            deepest = _java_condition(java) or deepest
            java = java.getCause()
        except Exception:  # noqa: BLE001 - the gateway may be gone; the name is a courtesy
            break
    return deepest or first_class or type(exc).__name__


def is_read_error(exc: BaseException) -> bool:
    """Whether a Spark failure says that an input file cannot be read as configured."""
    return spark_error_name(exc).startswith(_READ_CONDITIONS)



def _java_condition(java) -> str | None:  # noqa: ANN001 - a py4j JavaObject
    """getCondition() of a SparkThrowable; None for other Java exceptions."""
    from py4j.protocol import Py4JError

    try:
        condition = java.getCondition()
    except Py4JError:  # not a SparkThrowable: no such method
        return None
    return str(condition) if condition else None
