"""The reference host client: choose the release that fits this machine from a store, download it
resumably with every byte checked, and install it as ``scrollcase unpack`` does.

``select`` is the pure selection rule, ``download`` the resumable, verified download into the cache,
``install`` the index and manifest reads around them.
"""
