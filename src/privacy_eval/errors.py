"""Errors the user can fix: the job reports them as one `error:` line and exits 2."""


class UserError(Exception):
    """Invalid configuration or input.

    The message names the key, file or column at fault and counts, never a record value:
    it ends up in logs that are kept longer than the data.
    """


class ConfigError(UserError):
    """The configuration file or a `--set` override is invalid."""


class InputError(UserError):
    """An input table cannot be read or does not fit the configuration."""
