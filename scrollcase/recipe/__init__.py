"""The recipe room: the recipe.json model, its loader with line-precise errors, and the target registry."""
