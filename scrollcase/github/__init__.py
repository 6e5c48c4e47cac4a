"""Everything that renders for GitHub: workflow commands, step summary, outputs, JUnit, check runs.

Nothing outside this package writes GitHub-specific output; it renders results it is given.
"""
