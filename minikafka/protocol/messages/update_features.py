"""UpdateFeatures (api key 57, KIP-584): requests and responses, versions 0-2.

An administrator finalizes cluster-wide feature levels (``kafka-features.sh upgrade/downgrade/disable``).
v0 says whether each update may downgrade; v1 replaces that with the upgrade type (1 upgrade, 2 safe
downgrade, 3 unsafe downgrade) and adds ``validate_only``; v2 answers with the top-level error only.
A level below 1 asks for the feature to be removed (finalized at 0).
"""

from ..schema import Message, f

UpdateFeaturesRequest = Message('UpdateFeaturesRequest', 57, "0-2", '0+', [
    f('timeout_ms', 'int32', default=60000),
    f('feature_updates', [
        f('feature', 'string'),
        f('max_version_level', 'int16'),
        f('allow_downgrade', 'bool', '0'),
        f('upgrade_type', 'int8', '1+', default=1),
    ]),
    f('validate_only', 'bool', '1+', default=False),
])

UpdateFeaturesResponse = Message('UpdateFeaturesResponse', 57, "0-2", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('results', [
        f('feature', 'string'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
    ], '0-1'),
])
