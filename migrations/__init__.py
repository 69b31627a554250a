"""Alembic environment and versions for the federation store (installed as a package).

``federation.store.migrate`` locates this directory through the package, so
``federation db upgrade`` works from an installed wheel as well as from a checkout.
"""
