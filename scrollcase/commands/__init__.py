"""One module per CLI command.

Each module defines ``register(subparsers, common)`` which adds its sub-parser and sets
``handler=<callable(args, console) -> int>``.  The CLI discovers every module here, so adding a command
never means editing ``cli.py``.
"""
