"""PyPI wheels: fetched and checked, read, installed, and the unpacked-wheel cache."""
