"""Secret references and grants: every refusal word for word, the ARN Batch is given for each
form, and where a reference by ARN lives (the mutants ``make mutation`` found alive in
launcher/stack/secrets.py)."""

from __future__ import annotations

import pytest

from launcher.stack.secrets import Place, SecretError, SecretGrant, SecretRef

HERE = Place("aws", "us-east-1", "123456789012")
ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:team/wandb-AbCdEf"
FORMAT = "NAME[#KEY], a Secrets Manager ARN, ssm:PARAMETER or a parameter ARN"
ELSEWHERE = "arn:aws:ssm:eu-west-1:210987654321:parameter/team/hf"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("team/x#a b", "team/x#a b: #KEY must be a JSON key without ':' or spaces"),
        ("ssm:bad name", f"'ssm:bad name': not a parameter name ({FORMAT})"),
        ("ssm:/team/hf#key", f"'ssm:/team/hf': not a parameter name ({FORMAT})"),
        ("bad name", f"'bad name': not a secret name or ARN ({FORMAT})"),
        (
            "team/my-secret",
            "'team/my-secret': a name ending in '-' and six characters is ambiguous to Secrets "
            "Manager; give the secret's full ARN",
        ),
        (
            "arn:aws:ssm:us-east-1:123456789012:document/x",
            f"'arn:aws:ssm:us-east-1:123456789012:document/x': an SSM ARN names a "
            f"parameter/... ({FORMAT})",
        ),
        (
            "arn:aws:ssm:us-east-1:123456789012:parameter/x#k",
            f"'arn:aws:ssm:us-east-1:123456789012:parameter/x': an SSM ARN names a "
            f"parameter/... ({FORMAT})",
        ),
        (
            "arn:aws:secretsmanager:us-east-1:123456789012:parameter/x",
            f"'arn:aws:secretsmanager:us-east-1:123456789012:parameter/x': a Secrets Manager "
            f"ARN names a secret:... ({FORMAT})",
        ),
        (
            ARN + ":key",
            f"'{ARN}:key': after secret:NAME give all three of :json-key:version-stage:"
            "version-id (empty ones too) or none",
        ),
        (ARN + ":key::#other", f"'{ARN}:key::': give the JSON key once (#KEY or :json-key:)"),
        (
            ARN + ":key:AWSCURRENT:v1",
            f"'{ARN}:key:AWSCURRENT:v1': a version stage or a version id, not both",
        ),
        (
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:bad name-AbCdEf",
            "'arn:aws:secretsmanager:us-east-1:123456789012:secret:bad name-AbCdEf': not a "
            f"secret name ({FORMAT})",
        ),
    ],
)
def test_a_malformed_reference_is_refused_in_one_whole_line(text, line):
    """``--secret NAME=SECRET`` refuses with the reference and what is allowed: the line the
    user reads, all of it."""
    with pytest.raises(SecretError) as info:
        SecretRef.parse(text)
    assert str(info.value) == line


@pytest.mark.parametrize(
    ("text", "value_from"),
    [
        (ARN + "#key", ARN + ":key::"),  # #KEY on a complete ARN
        (ARN + "::AWSPREVIOUS:", ARN + "::AWSPREVIOUS:"),  # a stage, no key
        (ARN + ":key::v1", ARN + ":key::v1"),  # a version id alone
        ("ssm:/Xray/token", "arn:aws:ssm:us-east-1:123456789012:parameter/Xray/token"),
        (ELSEWHERE, ELSEWHERE),  # a parameter of another account, by its ARN
    ],
)
def test_each_form_becomes_the_value_from_batch_reads(text, value_from):
    """The ARN in the job definition's ``secrets``: the wrong one reads another secret, or
    none, when the container starts."""
    assert SecretRef.parse(text).value_from(HERE) == value_from


def test_a_parameter_by_arn_lives_where_its_arn_says():
    """A parameter of another account and Region is not the stack's: ``ssm:/team/`` does not
    grant it, and its ARN is kept as given."""
    ref = SecretRef.parse(ELSEWHERE)
    assert (ref.arn, ref.where(HERE)) == (ELSEWHERE, ("eu-west-1", "210987654321"))
    assert not SecretGrant.parse("ssm:/team/").allows(ref, HERE)
    assert SecretGrant.parse(ELSEWHERE).allows(ref, HERE)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (ARN + "#key", f"'{ARN}#key': grant the secret's ARN, without key or version"),
        (
            ARN + "::AWSPREVIOUS:",
            f"'{ARN}::AWSPREVIOUS:': grant the secret's ARN, without key or version",
        ),
        (
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:team/wandb",
            "'arn:aws:secretsmanager:us-east-1:123456789012:secret:team/wandb': a complete "
            "secret ARN ends in '-' and the six characters Secrets Manager appends; or grant "
            "the name as a prefix",
        ),
    ],
)
def test_a_malformed_grant_is_refused_in_one_whole_line(text, line):
    """``job_secrets`` grants a whole secret by its complete ARN: a key, a version or a
    partial ARN would grant something else than the entry says."""
    with pytest.raises(SecretError) as info:
        SecretGrant.parse(text)
    assert str(info.value) == line


def test_each_store_checks_a_grant_by_its_own_naming_rules():
    """Parameter names take no + or @; secret names do (PutParameter and CreateSecret Name)."""
    with pytest.raises(SecretError, match="allowed: a Secrets Manager name prefix"):
        SecretGrant.parse("ssm:/team/a+b")
    assert str(SecretGrant.parse("team+ml@corp/")) == "team+ml@corp/"
    assert str(SecretGrant.parse("ssm:/team/")) == "ssm:/team/"
