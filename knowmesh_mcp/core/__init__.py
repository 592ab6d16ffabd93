"""Pure rules, no I/O: documents and their validation, articles, environments, evidence, identity,
errors, limits, and the plain rows the store hands out. They import nothing above `core`.
"""
