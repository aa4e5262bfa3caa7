"""Request handlers, one module per API family; importing this package registers them all."""

from . import admin, api_versions, fetch, groups, list_offsets, metadata, produce, producer_ids, quotas  # noqa: F401
