"""The human pages: a table of page handlers (`pages`) over Jinja2 templates with autoescape
(`templates/`, rendered by `shell`), and the data each page shows.
"""
