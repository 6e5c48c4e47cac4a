"""scrollcase: build, prove and publish self-contained Python boxes for ML model runtimes."""

from importlib.metadata import PackageNotFoundError, version

try:
    # Written at install time from the git tag (setuptools-scm; see docs/releasing.md).
    __version__ = version("scrollcase")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
