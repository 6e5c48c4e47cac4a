"""pixi workspaces: manifest and lock (model, scan, read), PyPI records, rules, lock-check, solve
(rattler), resolve (uv).
"""
