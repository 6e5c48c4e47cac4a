"""The one home for I/O: atomic writes, read-or-raise and the user cache (files), documents (canonical JSON,
bytes -> frozen model or located Problems), subprocesses (proc), digests, and output-path checks."""
