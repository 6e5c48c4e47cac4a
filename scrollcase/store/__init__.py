"""Object stores for published releases: a local directory or any S3-compatible bucket.

``base`` defines the small :class:`~scrollcase.store.base.Store` protocol, ``local`` and ``s3`` implement
it, ``index`` is the per-box index model and ``publish`` plans and executes a publish.
"""
