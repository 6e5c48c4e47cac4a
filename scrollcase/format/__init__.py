"""The box contract every side shares: box.json, the release manifest, identity, layout, relocation
and the archive.
"""
