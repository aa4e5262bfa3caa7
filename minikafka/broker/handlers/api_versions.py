"""ApiVersions (18): the api keys and version ranges this broker supports."""

from ...protocol.api import ApiKey
from ..apis import handles, supported_api_versions


@handles(ApiKey.API_VERSIONS)
async def handle_api_versions(broker, ctx, req) -> dict:
    """Answer with every registered api and its version range (KIP-511 client info is logged)."""
    return {"error_code": 0, "api_keys": supported_api_versions(), "throttle_time_ms": 0}
