"""The one error the runner reports as a single `error: ...` line."""


class ConfigError(ValueError):
    """A config file, config module, task or override that cannot be used.

    Raised before any work starts; the command line prints it as one line
    (`error: ...`) and exits with status 2.
    """
