"""The line a bad cluster configuration is refused with, for the tests of infra/config.py and the
modules that check its settings by concept (tests/infra/test_config.py, test_pool_config.py,
test_data_config.py): ``cdk synth`` stops with exactly this line."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, load
from tests.conftest import cdk_context


def refusal(**overrides) -> str:
    """The one-line error loading the demo environment with ``overrides`` raises."""
    with pytest.raises(ConfigError) as info:
        load(cdk_context(**overrides))
    assert "\n" not in str(info.value)
    return str(info.value)
