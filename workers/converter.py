"""The project's data converter: pydantic JSON with fields at their defaults left out.

temporalio.contrib.pydantic's converter, except that a model field equal to its default is not written: the
reader fills it back from the same default, so nothing is lost, and a history shows what differs from the
defaults (the UI, `temporal workflow show`) instead of every empty list and zero of every model."""

from __future__ import annotations

from typing import Any

import temporalio.api.common.v1
from pydantic_core import SchemaSerializer, core_schema
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import CompositePayloadConverter, DataConverter, DefaultPayloadConverter, JSONPlainPayloadConverter


class LeanJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    def __init__(self) -> None:
        super().__init__()
        self._lean = SchemaSerializer(core_schema.any_schema())

    def to_payload(self, value: Any) -> temporalio.api.common.v1.Payload | None:
        return temporalio.api.common.v1.Payload(
            metadata={"encoding": self.encoding.encode()}, data=self._lean.to_json(value, exclude_defaults=True)
        )


class LeanPayloadConverter(CompositePayloadConverter):
    def __init__(self) -> None:
        lean = LeanJSONPayloadConverter()
        super().__init__(*(lean if isinstance(c, JSONPlainPayloadConverter) else c
                           for c in DefaultPayloadConverter.default_encoding_payload_converters))


data_converter = DataConverter(payload_converter_class=LeanPayloadConverter)
