"""AWS runtime semantics, checked on every synthesized variant and on the job definitions.

Each rule in ``tests/rules`` cites the AWS page that governs it. A green run of cfn-lint,
cdk-nag and moto says the templates deploy; these say the first job would train.
"""

from __future__ import annotations

import pytest

from launcher import catalog, jobdef
from launcher.jobspec import JobSpec
from tests.clusters import cluster_info
from tests.rules import job_rules, network_rules  # noqa: F401  (registers the rules)
from tests.rules.deployment import Deployment
from tests.rules.registry import RULES

VARIANTS = {
    # demo: p4d, new VPC without NAT
    "default": "synth_default",
    # prod: p5, NAT gateway, fair share
    "p5-nat-fairshare": "synth_p5",
    # an imported VPC and subnet
    "imported-vpc": "synth_imported",
}
STACK_RULES = [r for r in RULES if r.kind == "stack"]
JOB_RULES = [r for r in RULES if r.kind == "job"]
EFA_TYPES = sorted(n for n, t in catalog.CATALOG.items() if t.efa_capable)


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def deployment(request) -> Deployment:
    synth = request.getfixturevalue(VARIANTS[request.param])
    return Deployment(synth.templates(), synth.config)


@pytest.mark.parametrize("rule", STACK_RULES, ids=[r.name for r in STACK_RULES])
def test_stack_rule(deployment, rule):
    assert rule.check(deployment) == []


@pytest.mark.parametrize("instance_type", EFA_TYPES)
@pytest.mark.parametrize("rule", JOB_RULES, ids=[r.name for r in JOB_RULES])
def test_job_rule(rule, instance_type):
    cluster = cluster_info(instance_type)
    spec = JobSpec(name="train", command=("python", "train.py"), image="img", nodes=2)
    job = job_rules.Job(jobdef.build(spec, cluster).register, cluster)
    assert rule.check(job) == []
