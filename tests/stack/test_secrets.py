"""Secrets for jobs: references, the stack's grants, and the guarantee that a value never
travels with the job (pure; the local backend's reading is in tests/local/test_run.py)."""

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


PARAMETER_ARN = "arn:aws:ssm:us-east-1:123456789012:parameter/team/wandb"
TOKEN_ARN = ARN.replace("team/wandb", "team/token")


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
