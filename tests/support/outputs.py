"""Reading a ``GITHUB_OUTPUT`` file back, as the runner does: what the tests check step outputs with."""

from __future__ import annotations

from scrollcase.errors import GitHubError


def read_outputs(text: str) -> dict[str, str]:
    """Parse a ``GITHUB_OUTPUT`` file the way the runner does (``k=v`` and ``k<<DELIM`` blocks)."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            try:
                end = lines.index(delimiter, i + 1)
            except ValueError:
                raise GitHubError(
                    f"output {name!r} opens a {delimiter!r} block that never closes",
                    fix="end the value with a line holding only the delimiter",
                ) from None
            out[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        if "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        i += 1
    return out
