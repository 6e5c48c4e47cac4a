"""Everything that renders for GitHub: workflow commands, step summary, outputs, check runs (JUnit itself
is a report format: :mod:`scrollcase.reports.junit`).

Nothing outside this package writes GitHub-specific output; it renders results it is given.
"""
