"""scrollcase: build, prove and publish self-contained Python boxes for ML model runtimes."""

__version__ = "0.1.0"
