"""Request handlers, one module per API family; :mod:`.registry` maps api keys to them.

Importing this package registers nothing: a broker builds its handler table
with :func:`~.registry.build_handlers` from its services.
"""
