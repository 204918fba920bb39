"""The parts of a synthesized cluster that AWS acts on at run time, found in its templates."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property

from infra.config import ClusterConfig
from infra.pool_config import Pool
from tests.rules.flows import Network

FARGATE = ("FARGATE", "FARGATE_SPOT")


@dataclass(frozen=True)
class Resource:
    stack: str
    logical_id: str
    type: str
    body: dict

    @property
    def props(self) -> dict:
        return self.body.get("Properties", {})

    @property
    def path(self) -> str:
        return f"{self.stack}/{self.logical_id}"


class Deployment:
    """Every resource of the three stacks, and the security groups of each network party."""

    def __init__(
        self, templates: dict[str, dict], config: ClusterConfig, pool: str | None = None
    ) -> None:
        """``pool``: the pool whose launch template, compute environment and queue the rules
        look at (None: the default pool); ``config`` then reads as that pool's view
        (``ClusterConfig.for_pool``), ``cluster_config`` as the whole cluster's."""
        self.templates = templates
        self.cluster_config = config
        self.pool = config.pool(pool or config.default_pool)
        self.config = config.for_pool(self.pool)
        self.resources = [
            Resource(stack, logical_id, res["Type"], res)
            for stack, t in templates.items()
            for logical_id, res in t.get("Resources", {}).items()
        ]

    def of_type(self, type_: str) -> list[Resource]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str) -> Resource:
        (found,) = self.of_type(type_)
        return found

    def get(self, stack: str, logical_id: str) -> Resource | None:
        body = self.templates.get(stack, {}).get("Resources", {}).get(logical_id)
        return Resource(stack, logical_id, body["Type"], body) if body else None

    def ref_target(self, stack: str, value) -> Resource | None:
        """The resource a ``Ref``/``GetAtt``/``ImportValue`` expression points at."""
        if isinstance(value, dict) and len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref" and isinstance(arg, str):
                return self.get(stack, arg)
            if fn == "Fn::GetAtt":
                return self.get(stack, arg[0] if isinstance(arg, list) else arg.split(".")[0])
            if fn == "Fn::ImportValue":
                for other, t in self.templates.items():
                    for out in t.get("Outputs", {}).values():
                        if out.get("Export", {}).get("Name") == arg:
                            return self.ref_target(other, out["Value"])
        return None

    def resolve(self, stack: str, value) -> tuple[str, object]:
        """Follow ``Fn::ImportValue`` to the exporting stack's expression: (stack, value)."""
        if isinstance(value, dict) and set(value) == {"Fn::ImportValue"}:
            for other, t in self.templates.items():
                for out in t.get("Outputs", {}).values():
                    if out.get("Export", {}).get("Name") == value["Fn::ImportValue"]:
                        return self.resolve(other, out["Value"])
        return stack, value

    def text(self, stack: str, value) -> str:
        """A template string as text: ``Fn::Join`` joined, pseudo parameters filled in, imports
        followed to their source, other references as ``<stack/LogicalId>`` or
        ``<stack/LogicalId.Attribute>``."""
        stack, value = self.resolve(stack, value)
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float, bool)):
            return json.dumps(value)
        if isinstance(value, dict) and len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Fn::Join":
                return arg[0].join(self.text(stack, v) for v in arg[1])
            if fn == "Ref":
                pseudo = {
                    "AWS::Partition": "aws",
                    "AWS::Region": self.config.region,
                    "AWS::AccountId": self.config.account,
                    "AWS::URLSuffix": "amazonaws.com",
                }
                return pseudo.get(arg, f"<{stack}/{arg}>")
            if fn == "Fn::GetAtt":
                return f"<{stack}/{'.'.join(arg if isinstance(arg, list) else [arg])}>"
        return json.dumps(value)

    def output(self, key: str):
        """The cluster stack's output value (a template expression)."""
        return self.templates[self.config.stack_name].get("Outputs", {}).get(key, {}).get("Value")

    def role_statements(self, role: Resource) -> list[dict]:
        """Every statement of the policies attached to a role of the stacks (inline or not)."""
        found = []
        for policy in self.of_type("AWS::IAM::Policy"):
            if policy.stack == role.stack and {"Ref": role.logical_id} in policy.props.get(
                "Roles", []
            ):
                statements = policy.props["PolicyDocument"].get("Statement", [])
                found += statements if isinstance(statements, list) else [statements]
        for inline in role.props.get("Policies", []):
            statements = inline["PolicyDocument"].get("Statement", [])
            found += statements if isinstance(statements, list) else [statements]
        return found

    @cached_property
    def network(self) -> Network:
        external = [self.config.default_security_group_id] if self.imported_default_group else []
        return Network(self.templates, external_default_groups=external)

    @property
    def imported_default_group(self) -> bool:
        return bool(getattr(self.config, "default_security_group_id", None))

    # --- the parties of the cluster's network flows --------------------------------------

    @cached_property
    def compute_environment(self) -> Resource:
        """The pool's (EC2 or Spot) compute environment: the first its queue feeds."""
        queue = self.job_queue
        order = sorted(queue.props.get("ComputeEnvironmentOrder", []), key=lambda o: o["Order"])
        found = self.ref_target(queue.stack, order[0]["ComputeEnvironment"]) if order else None
        assert found is not None, f"queue {queue.path} feeds no compute environment of the stacks"
        return found

    def pool_deployment(self, pool: Pool | str) -> Deployment:
        return Deployment(
            self.templates, self.cluster_config, pool if isinstance(pool, str) else pool.name
        )

    @cached_property
    def copy_compute_environment(self) -> Resource:
        """The copy jobs' Fargate compute environment."""
        (found,) = [
            ce
            for ce in self.of_type("AWS::Batch::ComputeEnvironment")
            if ce.props.get("ComputeResources", {}).get("Type") in FARGATE
        ]
        return found

    def _queue(self, name: str) -> Resource:
        (found,) = [
            q for q in self.of_type("AWS::Batch::JobQueue") if q.props.get("JobQueueName") == name
        ]
        return found

    @cached_property
    def job_queue(self) -> Resource:
        from infra.compute_pool import job_queue_name

        return self._queue(job_queue_name(self.cluster_config, self.pool))

    @cached_property
    def copy_job_queue(self) -> Resource:
        from infra.copy_jobs import copy_queue_name

        return self._queue(copy_queue_name(self.config))

    @cached_property
    def copy_groups(self) -> frozenset[str]:
        """The groups of a copy job's task interface (Fargate: the compute environment's)."""
        ce = self.copy_compute_environment
        return self._groups(ce.stack, ce.props["ComputeResources"].get("SecurityGroupIds", []))

    @cached_property
    def launch_template(self) -> Resource:
        ce = self.compute_environment
        spec = ce.props["ComputeResources"]["LaunchTemplate"]
        found = self.ref_target(ce.stack, spec["LaunchTemplateId"])
        assert found is not None, "the compute environment's launch template is not in the stacks"
        return found

    @property
    def interfaces(self) -> list[dict]:
        return self.launch_template.props["LaunchTemplateData"].get("NetworkInterfaces", [])

    def _groups(self, stack: str, values) -> frozenset[str]:
        return self.network.resolve_all(stack, values)

    @cached_property
    def efa_groups(self) -> list[frozenset[str]]:
        """Groups of each EFA interface of a node (one entry per interface)."""
        lt = self.launch_template
        return [
            self._groups(lt.stack, i.get("Groups", []))
            for i in self.interfaces
            if i.get("InterfaceType") in ("efa", "efa-only")
        ]

    @cached_property
    def host_groups(self) -> frozenset[str]:
        """The node's primary interface (card 0, device 0): ECS agent, image pulls."""
        lt = self.launch_template
        for i in self.interfaces:
            if i.get("NetworkCardIndex", 0) == 0 and i.get("DeviceIndex") == 0:
                return self._groups(lt.stack, i.get("Groups", []))
        data = lt.props["LaunchTemplateData"]
        ce = self.compute_environment
        if data.get("SecurityGroupIds"):
            return self._groups(lt.stack, data["SecurityGroupIds"])
        return self._groups(ce.stack, ce.props["ComputeResources"].get("SecurityGroupIds", []))

    @cached_property
    def task_groups(self) -> frozenset[str]:
        """The groups of a multi-node job's own network interface (awsvpc mode).

        Batch user guide, mnp-ce.html: multi-node parallel jobs use the awsvpc network mode;
        the container's interface gets the compute environment's security groups, and "If you
        don't specify a security group, the default security group for the VPC is used".
        """
        ce = self.compute_environment
        named = ce.props["ComputeResources"].get("SecurityGroupIds")
        if named:
            return self._groups(ce.stack, named)
        if self.imported_default_group:
            return frozenset({self.config.default_security_group_id})
        (vpc,) = self.of_type("AWS::EC2::VPC")
        return frozenset({f"{vpc.path}.default"})

    @cached_property
    def file_system_groups(self) -> list[frozenset[str]]:
        return [
            self._groups(mt.stack, mt.props.get("SecurityGroups", []))
            for mt in self.of_type("AWS::EFS::MountTarget")
        ]

    @cached_property
    def lustre_groups(self) -> list[frozenset[str]]:
        """The groups of each FSx for Lustre file system's network interfaces."""
        return [
            self._groups(fs.stack, fs.props.get("SecurityGroupIds", []))
            for fs in self.of_type("AWS::FSx::FileSystem")
        ]

    @cached_property
    def user_data(self) -> str | None:
        """The launch template's user data as text (``Fn::Base64`` of a string or a join, the
        join's references as ``<stack/LogicalId.Attribute>``); None if there is none."""
        lt = self.launch_template
        value = lt.props["LaunchTemplateData"].get("UserData")
        if not (isinstance(value, dict) and set(value) == {"Fn::Base64"}):
            return None
        inner = value["Fn::Base64"]
        if not (isinstance(inner, str) or (isinstance(inner, dict) and "Fn::Join" in inner)):
            return None
        return self.text(lt.stack, inner)

    @cached_property
    def interface_endpoints(self) -> dict[str, frozenset[str]]:
        """Service name (the part after the region) -> groups of its interface endpoint."""
        found = {}
        for ep in self.of_type("AWS::EC2::VPCEndpoint"):
            if ep.props.get("VpcEndpointType") != "Interface":
                continue
            service = ep.props["ServiceName"]
            name = service.split(".", 3)[-1] if isinstance(service, str) else str(service)
            found[name] = self._groups(ep.stack, ep.props.get("SecurityGroupIds", []))
        return found
