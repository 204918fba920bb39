"""The nodes' user data parses as the MIME multi-part archive Batch merges with its own."""

from __future__ import annotations

import email

import pytest

from infra.user_data import ecs_agent_settings, mime_multipart


def test_user_data_is_a_mime_archive_of_shell_parts():
    text = mime_multipart([ecs_agent_settings({"ECS_AWSVPC_BLOCK_IMDS": "true"}), "echo two\n"])
    message = email.message_from_string(text)
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    parts = message.get_payload()
    assert [p.get_content_type() for p in parts] == ["text/x-shellscript"] * 2
    assert "echo ECS_AWSVPC_BLOCK_IMDS=true >> /etc/ecs/ecs.config" in parts[0].get_payload()
    # Batch's format rules: a blank line before every boundary, the closing one last.
    assert "\n\n--==EFABATCH==\n" in text and text.endswith("\n--==EFABATCH==--\n")


def test_settings_batch_writes_itself_are_refused():
    with pytest.raises(ValueError, match="ECS_CLUSTER"):
        ecs_agent_settings({"ECS_CLUSTER": "x"})
