"""Exact, distributed privacy evaluation of synthetic data releases."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("privacy-eval")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+unknown"
