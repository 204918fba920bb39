"""The VPC's default security group, which every multi-node job's task interfaces are in.

Batch gives an awsvpc task the compute environment's groups, "or the default security group
for the VPC" when it names none, and a compute environment whose launch template carries EFA
interfaces names none (Batch user guide, mnp-ce.html). Jobs then rendezvous and bootstrap NCCL
task interface to task interface, and reach EFS and the endpoints, through the rules AWS gives
every default group: all traffic from itself, all traffic out. Accounts that auto-remediate
Security Hub control EC2.2 ("VPC default security groups should not allow inbound or outbound
traffic") strip those rules, and every job then hangs. The templates cannot keep them: the
stacks never own the default group. So the launcher looks (one DescribeSecurityGroupRules) and
says what is missing and what to do. Pure: rules in, findings out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Findings:
    group_id: str
    missing: list[str] = field(default_factory=list)  # jobs cannot work without these
    notes: list[str] = field(default_factory=list)  # narrower than AWS's rules: may be fine

    @property
    def ok(self) -> bool:
        return not self.missing

    def line(self) -> str:
        what = "; ".join(self.missing)
        return (
            f"the VPC's default security group {self.group_id}, where jobs' task interfaces "
            f"are, lacks {what}: nodes cannot rendezvous or reach EFS and the endpoints. "
            "Restore it (aws ec2 authorize-security-group-ingress --group-id "
            f"{self.group_id} --protocol all --source-group {self.group_id}; aws ec2 "
            f"authorize-security-group-egress --group-id {self.group_id} --ip-permissions "
            "IpProtocol=-1,IpRanges=[{CidrIp=0.0.0.0/0}]) and exempt the group from Security "
            "Hub control EC2.2's auto-remediation (docs/security.md, \"The VPC's default group and "
            'Security Hub control EC2.2")'
        )


def _all_traffic(rule: dict[str, Any]) -> bool:
    return str(rule.get("IpProtocol")) == "-1"


def _from_itself(rule: dict[str, Any], group_id: str) -> bool:
    return (rule.get("ReferencedGroupInfo") or {}).get("GroupId") == group_id


def default_group_findings(group_id: str, rules: Iterable[dict[str, Any]]) -> Findings:
    """DescribeSecurityGroupRules' rules of the group -> what jobs need that is not there."""
    rules = list(rules)
    ingress = [r for r in rules if not r.get("IsEgress")]
    egress = [r for r in rules if r.get("IsEgress")]
    findings = Findings(group_id)
    if not any(_all_traffic(r) and _from_itself(r, group_id) for r in ingress):
        findings.missing.append("its rule admitting all traffic from itself")
    if not egress:
        findings.missing.append("every outbound rule")
    elif not any(
        _all_traffic(r) and (r.get("CidrIpv4") == "0.0.0.0/0" or _from_itself(r, group_id))
        for r in egress
    ):
        findings.notes.append(
            f"{group_id} allows less outbound traffic than AWS's default (all traffic): jobs "
            "need all traffic to the group itself, NFS (2049) to EFS and HTTPS (443) to the "
            "endpoints"
        )
    return findings
