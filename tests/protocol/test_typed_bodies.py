"""The committed :mod:`minikafka.protocol.bodies` is what the generator makes, and types every declared field."""

from __future__ import annotations

import typing

from minikafka.protocol import bodies, typegen
from minikafka.protocol.schema import UNKNOWN_TAGS


def test_committed_module_is_current() -> None:
    assert typegen.TARGET.read_text(encoding="utf-8") == typegen.render(), (
        "minikafka/protocol/bodies.py is stale: run `python -m minikafka.protocol.typegen`")


def test_each_typeddict_has_exactly_the_declared_fields() -> None:
    decls = typegen.structs()
    for decl in decls:
        cls = getattr(bodies, decl.class_name)
        assert typing.is_typeddict(cls), decl.class_name
        assert cls.__required_keys__ == frozenset(), decl.class_name
        assert cls.__optional_keys__ == {fl.name for fl in decl.fields} | {UNKNOWN_TAGS}, decl.class_name
        typing.get_type_hints(cls)  # every annotation resolves
    generated = {name for name, v in vars(bodies).items() if isinstance(v, type) and typing.is_typeddict(v)}
    assert generated == {d.class_name for d in decls}


def test_one_body_per_message_and_nested_types() -> None:
    assert {d.class_name for d in typegen.structs() if not d.path} == {f"{m.name}Body" for m in typegen.messages()}
    hints = typing.get_type_hints(bodies.FetchResponseResponsesPartitions)
    assert hints["aborted_transactions"] == list[bodies.FetchResponseResponsesPartitionsAbortedTransactions] | None
    assert hints["diverging_epoch"] is bodies.FetchResponseResponsesPartitionsDivergingEpoch
    assert hints["records"] == bodies.Records
    assert typing.get_type_hints(bodies.MetadataRequestBody)["topics"] == list[bodies.MetadataRequestTopics] | None
    assert typing.get_type_hints(bodies.RequestHeaderBody)["client_id"] == str | None
