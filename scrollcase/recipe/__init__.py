"""The recipe room: recipe.json from bytes to a validated, frozen Recipe or located problems.

``targets`` (the target registry) <- ``fields`` (field formats) <- ``rules`` (cross-field rules) <-
``model`` (the documents) <- ``loader`` (files and located problems, with ``jsonpos``).
"""
