"""The one home for I/O: atomic writes and the user cache, subprocesses, digests, and output-path checks."""
