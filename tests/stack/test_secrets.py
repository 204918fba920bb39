"""Secrets for jobs: references (every form, the ARN Batch is given for each, every refusal word
for word), the stack's grants (each store by its own rules, a reference by ARN where its ARN
says), and the guarantee that a value never travels with the job (pure; the local backend's
reading is in tests/local/test_run.py). The whole-line refusals and the rarer forms were added
where mutation testing (``make mutation``) found changes to launcher/stack/secrets.py that no
test noticed."""

from __future__ import annotations

import dataclasses
import json

import pytest

from devenv.clusters import cluster_info
from launcher.api import make_spec
from launcher.errors import UsageError
from launcher.job import jobdef
from launcher.stack.secrets import Place, SecretError, SecretGrant, SecretRef, Store
from tests.support.service_model import assert_valid

HERE = Place("aws", "us-east-1", "123456789012")
ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:team/wandb-AbCdEf"
FORMAT = "NAME[#KEY], a Secrets Manager ARN, ssm:PARAMETER or a parameter ARN"
ELSEWHERE = "arn:aws:ssm:eu-west-1:210987654321:parameter/team/hf"
PARAMETER_ARN = "arn:aws:ssm:us-east-1:123456789012:parameter/team/wandb"
TOKEN_ARN = ARN.replace("team/wandb", "team/token")


# --- references: the ARN Batch is given, and the refusals -------------------------------------


@pytest.mark.parametrize(
    ("text", "value_from"),
    [
        # A name becomes the partial ARN Secrets Manager resolves by name.
        ("team/wandb", "arn:aws:secretsmanager:us-east-1:123456789012:secret:team/wandb"),
        # NAME#KEY: Batch's ARN:json-key:version-stage:version-id, empty fields kept.
        ("team/wandb#key", "arn:aws:secretsmanager:us-east-1:123456789012:secret:team/wandb:key::"),
        (ARN, ARN),
        (ARN + ":key:AWSPREVIOUS:", ARN + ":key:AWSPREVIOUS:"),
        ("ssm:/team/hf", "arn:aws:ssm:us-east-1:123456789012:parameter/team/hf"),
    ],
)
def test_every_reference_becomes_the_arn_batch_wants(text, value_from):
    """ "valueFrom: the full Amazon Resource Name (ARN) of the Secrets Manager secret" or the
    parameter's ARN, with ":json-key:version-stage:version-id" after a secret's ARN ("you must
    include the colons", Batch user guide, specifying-sensitive-data-secrets.html)."""
    assert SecretRef.parse(text).value_from(HERE) == value_from


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


@pytest.mark.parametrize(
    "text",
    [
        "team/my-secret",  # ends like an ARN suffix: "-secret" (Secrets Manager, CreateSecret)
        "bad name",
        ARN + ":key",  # two fields of the three
        ARN + ":key:AWSCURRENT:v1",  # a stage and a version id
        "ssm:bad name",
        "arn:aws:secretsmanager:us-east-1:123456789012:parameter/x",
    ],
)
def test_malformed_references_are_refused(text):
    with pytest.raises(SecretError):
        SecretRef.parse(text)


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


# --- grants: the stack's job_secrets --------------------------------------------------------


def test_grants_allow_their_prefix_in_the_stacks_account_and_region_only():
    grants = [SecretGrant.parse(g) for g in ("team/", "ssm:/team/", ARN.replace("team", "x"))]
    allowed = [SecretRef.parse(t) for t in ("team/a", "ssm:/team/b", ARN.replace("team", "x"))]
    refused = [
        SecretRef.parse(t)
        for t in (
            "other/a",
            "ssm:/other/b",
            ARN.replace("us-east-1", "eu-west-1"),  # the prefix is the stack's Region's
            ARN.replace("123456789012", "210987654321"),
        )
    ]
    assert all(any(g.allows(r, HERE) for g in grants) for r in allowed)
    assert not any(g.allows(r, HERE) for g in grants for r in refused)
    assert [g.store for g in grants] == [
        Store.SECRETS_MANAGER,
        Store.PARAMETER_STORE,
        Store.SECRETS_MANAGER,
    ]
    # A parameter's ARN drops the name's leading "/" (parameter/team/...).
    assert grants[1].iam_resource(HERE) == "arn:aws:ssm:us-east-1:123456789012:parameter/team/*"


@pytest.mark.parametrize(
    ("grant", "own", "other"),
    [
        ("team/", "team/wandb", "ssm:/team/wandb"),
        ("team/", "team/wandb", "ssm:team/wandb"),
        ("ssm:/team/", "ssm:/team/wandb", "team/wandb"),
        (TOKEN_ARN, "team/token", "ssm:/team/token"),
        (TOKEN_ARN, TOKEN_ARN, PARAMETER_ARN.replace("wandb", "token")),
        (PARAMETER_ARN, "ssm:/team/wandb", "team/wandb"),
    ],
)
def test_a_grant_admits_its_own_store_only(grant, own, other):
    """Secrets Manager and Parameter Store are two stores with names of their own: a grant in
    one admits a name in it (``own``) and not the same name in the other (``other``), which
    the execution role cannot read (its grant is secretsmanager:...:secret:NAME or
    ssm:...:parameter/NAME, infra/data_access.py). Admitted, the job would be submitted and
    its containers would fail to start on every node."""
    granted = SecretGrant.parse(grant)
    assert granted.allows(SecretRef.parse(own), HERE)
    assert not granted.allows(SecretRef.parse(other), HERE)
    cluster = dataclasses.replace(cluster_info(), job_secrets=(granted,))
    spec = make_spec(["train"], image="i:1", secrets={"TOKEN": other})
    with pytest.raises(UsageError) as info:
        jobdef.build(spec, cluster)
    assert str(info.value) == (
        f"--secret TOKEN={other}: EfaBatch lets jobs read only secrets under its job_secrets: "
        f"{grant}"
    )


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


# --- the job: references, never values --------------------------------------------------------


def test_a_secret_outside_job_secrets_is_refused_naming_what_is_allowed():
    spec = make_spec(["train"], image="i:1", secrets={"TOKEN": "other/token"})
    with pytest.raises(
        UsageError, match="lets jobs read only secrets under its job_secrets: team/"
    ):
        jobdef.build(spec, cluster_info())


def test_the_job_carries_references_never_values():
    """The definition's containers get Batch's `secrets` ({name, valueFrom}); nothing in the
    request, its environment or its content-hashed name depends on a secret's value, which the
    launcher never reads (the ECS agent does, with the execution role)."""
    spec = make_spec(["train"], image="i:1", nodes=2, secrets={"WANDB_API_KEY": "team/wandb#key"})
    requests = jobdef.build(spec, cluster_info())
    assert_valid("batch", "RegisterJobDefinition", requests.register)
    container = requests.register["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert container["secrets"] == [
        {
            "name": "WANDB_API_KEY",
            "valueFrom": "arn:aws:secretsmanager:us-east-1:123456789012:secret:team/wandb:key::",
        }
    ]
    assert "WANDB_API_KEY" not in {e["name"] for e in container["environment"]}
    # The same reference is the same definition, whatever the secret holds today.
    assert jobdef.build(spec, cluster_info()).register == requests.register
    assert "secretsmanager" not in json.dumps(requests.submit)


def test_a_variable_given_by_env_and_secret_is_refused():
    with pytest.raises(UsageError, match="given twice"):
        make_spec(["x"], image="i", env={"TOKEN": "1"}, secrets={"TOKEN": "team/token"})
