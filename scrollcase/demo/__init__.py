"""The offline demo: a local conda channel made from this machine's CPython and numpy, and the demo run."""
