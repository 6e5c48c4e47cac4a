"""scrollcase: build, prove and publish self-contained Python boxes for ML model runtimes."""


def __getattr__(name: str) -> str:
    """``__version__``, looked up on first use: importlib.metadata costs ~0.1 s at every CLI start."""
    if name != "__version__":
        raise AttributeError(f"module 'scrollcase' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("scrollcase")  # written at install time from the git tag (docs/releasing.md)
    except PackageNotFoundError:  # imported from a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
