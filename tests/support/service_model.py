"""Validate request dicts against the botocore service model, as boto3 would before sending."""

from __future__ import annotations

import botocore.session
import botocore.validate

_SESSION = botocore.session.get_session()


def assert_valid(service: str, operation: str, params: dict) -> None:
    model = _SESSION.get_service_model(service).operation_model(operation)
    # Raises ParamValidationError on an unknown key, a wrong type or a missing member.
    botocore.validate.validate_parameters(params, model.input_shape)
