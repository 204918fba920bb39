"""Which network flows the synthesized security groups admit, computed from the templates.

A flow from an interface in groups S to an interface in groups D is admitted when some group
in S has an egress rule that matches it and some group in D has an ingress rule that matches
it (security groups are stateful, but each side's own rule must let the first packet through:
EC2 user guide, security-group-rules.html). EFA traffic is not IP: only rules that name a
security group match it, never a CIDR (Batch user guide, efa.html: the group "must allow all
inbound and outbound traffic to and from the security group itself").

Groups are identified across the three stacks: ``Fn::ImportValue`` is resolved through the
exporting stack's outputs, ``Fn::GetAtt [VPC, DefaultSecurityGroup]`` is the VPC's default
group, and a literal ``sg-...`` is a group made outside the templates (an imported VPC's
default group).

A group declared without egress rules gets EC2's allow-all egress ("When you create a security
group, if you do not add egress rules, we add egress rules that allow all outbound IPv4 and
IPv6 traffic. Otherwise, we do not add them", CloudFormation reference,
aws-resource-ec2-securitygroup.html). Egress rules declared as separate
``AWS::EC2::SecurityGroupEgress`` resources count as added rules here: EC2 drops the default
rule when another egress rule is added (aws-cdk issue 987, which CDK relies on when it drops
its no-traffic placeholder), and assuming the narrower set keeps a reachability proof from
resting on a rule the group may not have.

A flow names one port or a range (``to_port``): a range is admitted only where one rule covers
all of it, as a service that picks any port of the range needs. ``both_ways`` checks a flow and
its reverse, for services whose servers also open connections to their clients (Lustre).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

ALL = "-1"
# CDK emits this rule on a group with allowAllOutbound=false so that CloudFormation does not
# add its default allow-all egress; it matches nothing a cluster sends.
_CDK_DISALLOW = ("icmp", 252, 86)


@dataclass(frozen=True)
class Rule:
    direction: str  # "in" | "out"
    protocol: str  # "-1", "tcp", "udp", "icmp", ...
    from_port: int | None
    to_port: int | None
    group: str | None = None  # the peer group
    cidr: str | None = None  # or the peer CIDR
    origin: str = ""  # where the rule was declared, for messages

    def matches(self, protocol: str, port: int | None, last: int | None = None) -> bool:
        """Whether the rule admits ``protocol`` on every port from ``port`` to ``last``."""
        if self.protocol in (ALL, "all"):
            return True
        if protocol == ALL or self.protocol != protocol:
            return False
        if port is None or self.from_port in (None, -1):
            return True
        last = port if last is None else last
        return self.from_port <= port and last <= (
            self.to_port if self.to_port is not None else self.from_port
        )


@dataclass
class Group:
    ident: str
    rules: list[Rule] = field(default_factory=list)
    origin: str = ""


@dataclass(frozen=True)
class Flow:
    """What one component needs from another."""

    name: str
    protocol: str
    port: int | None
    efa: bool = False  # EFA (SRD) traffic: only group references match
    to_port: int | None = None  # the last port of a range (None: the one port)

    def describe(self) -> str:
        what = "all traffic" if self.protocol == ALL else f"{self.protocol}/{self.port}"
        if self.protocol != ALL and self.to_port not in (None, self.port):
            what += f"-{self.to_port}"
        return f"{self.name} ({what}{', EFA' if self.efa else ''})"

    def reverse(self) -> Flow:
        return replace(self, name=f"{self.name}, back")


class Network:
    """The security groups and their rules declared by a set of templates."""

    def __init__(
        self,
        templates: Mapping[str, dict],
        *,
        external_default_groups: Iterable[str] = (),
    ) -> None:
        self.templates = dict(templates)
        self.groups: dict[str, Group] = {}
        self._exports = {
            out["Export"]["Name"]: (stack, out["Value"])
            for stack, t in self.templates.items()
            for out in t.get("Outputs", {}).values()
            if isinstance(out, dict) and "Export" in out
        }
        self.subnet_cidrs = [
            ipaddress.ip_network(res["Properties"]["CidrBlock"])
            for t in self.templates.values()
            for res in t.get("Resources", {}).values()
            if res["Type"] == "AWS::EC2::Subnet"
            and isinstance(res["Properties"].get("CidrBlock"), str)
        ]
        self._without_egress: list[Group] = []
        for stack, t in self.templates.items():
            self._declare(stack, t)
        for group in self._without_egress:
            if not any(r.direction == "out" for r in group.rules):
                # EC2's default for a group created without egress rules: all traffic out.
                group.rules.append(
                    Rule("out", ALL, None, None, cidr="0.0.0.0/0", origin=group.ident)
                )
        for ident in external_default_groups:
            self.groups.setdefault(ident, _aws_default_group(ident, "outside the templates"))

    # --- resolution ------------------------------------------------------------------------

    def resolve(self, stack: str, value: Any) -> str | None:
        """A security group's identity from a template expression, or None if it is not one."""
        if isinstance(value, str):
            return value if value.startswith("sg-") else None
        if not isinstance(value, dict) or len(value) != 1:
            return None
        ((fn, arg),) = value.items()
        resources = self.templates[stack].get("Resources", {})
        if fn == "Fn::ImportValue" and isinstance(arg, str) and arg in self._exports:
            other, expression = self._exports[arg]
            return self.resolve(other, expression)
        if fn == "Fn::GetAtt":
            logical_id, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            kind = resources.get(logical_id, {}).get("Type")
            if kind == "AWS::EC2::SecurityGroup" and attribute == "GroupId":
                return f"{stack}/{logical_id}"
            if kind == "AWS::EC2::VPC" and attribute == "DefaultSecurityGroup":
                return f"{stack}/{logical_id}.default"
        if fn == "Ref" and resources.get(arg, {}).get("Type") == "AWS::EC2::SecurityGroup":
            return f"{stack}/{arg}"
        return None

    def resolve_all(self, stack: str, values: Iterable[Any]) -> frozenset[str]:
        found = set()
        for value in values or ():
            ident = self.resolve(stack, value)
            if ident is None:
                raise ValueError(f"{stack}: cannot resolve security group {value!r}")
            found.add(ident)
        return frozenset(found)

    # --- declaration -----------------------------------------------------------------------

    def _declare(self, stack: str, template: dict) -> None:
        resources = template.get("Resources", {})
        restricted = {
            self.resolve(stack, res["Properties"].get("DefaultSecurityGroupId"))
            for res in resources.values()
            if res["Type"] == "Custom::VpcRestrictDefaultSG"
        }
        for logical_id, res in resources.items():
            ident = f"{stack}/{logical_id}"
            if res["Type"] == "AWS::EC2::VPC":
                default = f"{ident}.default"
                if default in restricted:
                    # CDK's restrictDefaultSecurityGroup custom resource removes every rule.
                    self.groups[default] = Group(default, [], f"{default} (rules removed)")
                else:
                    self.groups[default] = _aws_default_group(default, ident)
            if res["Type"] != "AWS::EC2::SecurityGroup":
                continue
            props = res.get("Properties", {})
            group = self.groups.setdefault(ident, Group(ident, origin=ident))
            for entry in props.get("SecurityGroupIngress", []):
                group.rules.append(self._rule(stack, "in", entry, ident))
            for entry in props.get("SecurityGroupEgress", []):
                group.rules.append(self._rule(stack, "out", entry, ident))
            if "SecurityGroupEgress" not in props:
                self._without_egress.append(group)
        for logical_id, res in resources.items():
            kind = res["Type"]
            if kind not in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
                continue
            props = res["Properties"]
            owner = self.resolve(stack, props["GroupId"])
            if owner is None:
                raise ValueError(f"{stack}/{logical_id}: cannot resolve {props['GroupId']!r}")
            direction = "in" if kind.endswith("Ingress") else "out"
            group = self.groups.setdefault(owner, _aws_default_group(owner, "outside"))
            group.rules.append(self._rule(stack, direction, props, f"{stack}/{logical_id}"))

    def _rule(self, stack: str, direction: str, entry: dict, origin: str) -> Rule:
        peer_key = "SourceSecurityGroupId" if direction == "in" else "DestinationSecurityGroupId"
        peer = entry.get(peer_key)
        return Rule(
            direction,
            str(entry.get("IpProtocol", ALL)).lower(),
            entry.get("FromPort"),
            entry.get("ToPort"),
            group=self.resolve(stack, peer) if peer is not None else None,
            cidr=entry.get("CidrIp") or entry.get("CidrIpv6"),
            origin=origin,
        )

    # --- queries ---------------------------------------------------------------------------

    def _covers(self, rule: Rule, peers: frozenset[str], flow: Flow) -> bool:
        if not rule.matches(flow.protocol, flow.port, flow.to_port):
            return False
        if (rule.protocol, rule.from_port, rule.to_port) == _CDK_DISALLOW:
            return False
        if rule.group is not None:
            return rule.group in peers
        if flow.efa or rule.cidr is None:
            return False
        cidr = ipaddress.ip_network(rule.cidr)
        if cidr.prefixlen == 0:
            return True
        return bool(self.subnet_cidrs) and all(s.subnet_of(cidr) for s in self.subnet_cidrs)

    def admits(self, source: frozenset[str], target: frozenset[str], flow: Flow) -> list[str]:
        """Empty when the flow is admitted; otherwise what is missing, one line each."""
        missing = []
        out = [r for g in source for r in self.groups[g].rules if r.direction == "out"]
        if not any(self._covers(r, target, flow) for r in out):
            missing.append(
                f"{flow.describe()}: no egress rule on {sorted(source)} to {sorted(target)}"
            )
        inbound = [r for g in target for r in self.groups[g].rules if r.direction == "in"]
        if not any(self._covers(r, source, flow) for r in inbound):
            missing.append(
                f"{flow.describe()}: no ingress rule on {sorted(target)} from {sorted(source)}"
            )
        return missing

    def both_ways(self, a: frozenset[str], b: frozenset[str], flow: Flow) -> list[str]:
        """``admits`` from a to b, and from b back to a (connections opened by either side)."""
        return self.admits(a, b, flow) + self.admits(b, a, flow.reverse())

    def rules_of(self, group: str, direction: str) -> list[Rule]:
        """The rules of one group in one direction (what a rule asserts the group allows)."""
        return [r for r in self.groups[group].rules if r.direction == direction]


def _aws_default_group(ident: str, origin: str) -> Group:
    """A VPC's default group as AWS creates it: all traffic in from itself, all out.

    Amazon VPC user guide, default-security-group.html: the default security group has an
    inbound rule allowing all traffic from the group itself and an outbound rule allowing all
    outbound traffic.
    """
    return Group(
        ident,
        [
            Rule("in", ALL, None, None, group=ident, origin=f"{origin} (AWS default)"),
            Rule("out", ALL, None, None, cidr="0.0.0.0/0", origin=f"{origin} (AWS default)"),
        ],
        origin,
    )
