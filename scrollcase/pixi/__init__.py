"""pixi workspaces: the manifest (pixi.toml) and the lock file (pixi.lock)."""
