"""PyPI resolution for ``[pypi-dependencies]``: uv resolves for the target, after the conda solve."""
