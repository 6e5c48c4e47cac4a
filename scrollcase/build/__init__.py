"""Building a box: plan, pipeline stages (conda, bytecode, assets, self-test, SBOM), verify."""
