"""scrollcase: build, prove and publish self-contained Python boxes for ML model runtimes."""


def __getattr__(name: str) -> str:
    """``__version__``, looked up on first use: importlib.metadata costs ~0.1 s at every CLI start."""
    if name != "__version__":
        raise AttributeError(f"module 'scrollcase' has no attribute {name!r}")
    from scrollcase.version import package_version

    found = package_version()
    globals()["__version__"] = found
    return found
