"""Network flows a multi-node EFA job needs, checked against the security groups."""

from __future__ import annotations

from tests.rules.deployment import Deployment
from tests.rules.flows import ALL, Flow
from tests.rules.registry import Model, Page, rule

EFA_GROUP = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/efa.html",
    "must allow all inbound and outbound traffic to and from the security group itself",
)
MNP_DEFAULT_GROUP = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/mnp-ce.html",
    "If you don't specify a security group, the default security group for the VPC is used",
)
EFS_MOUNT_TARGET = Model(
    "efs",
    "CreateMountTargetRequest",
    "",
    "If the request provides SecurityGroups, this network interface is associated with those "
    "security groups.",
)
ENDPOINT_GROUPS = Model(
    "ec2",
    "CreateVpcEndpointRequest",
    "SecurityGroupIds",
    "The IDs of the security groups to associate with the endpoint network interfaces.",
)
CE_GROUPS = Model(
    "batch",
    "ComputeResource",
    "securityGroupIds",
    "If security groups are specified using both securityGroupIds and launchTemplate, the "
    "values in securityGroupIds are used.",
)
LT_GROUPS = Model(
    "ec2",
    "RequestLaunchTemplateData",
    "SecurityGroupIds",
    "If you specify a network interface, you must specify any security groups as part of the "
    "network interface instead of using this parameter.",
)


@rule(
    EFA_GROUP,
    covers=(
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.NetworkInterfaces.Groups",
        "AWS::EC2::SecurityGroup.SecurityGroupEgress",
        "AWS::EC2::SecurityGroupEgress",
        "AWS::EC2::SecurityGroupIngress",
        "AWS::EC2::SecurityGroup.VpcId",
    ),
)
def efa_group_admits_all_traffic_to_and_from_itself(d: Deployment) -> list[str]:
    """Every EFA interface's group lets all traffic in from and out to the group itself.

    https://docs.aws.amazon.com/batch/latest/userguide/efa.html: the security group "must
    allow all inbound and outbound traffic to and from the security group itself". EFA
    traffic is not IP, so an egress rule to 0.0.0.0/0 does not cover it; without the
    self-referencing egress rule NCCL fails with "Unresponsive receiver (reachable by EFA
    device but handshake failed)".
    """
    flow = Flow("EFA between nodes", ALL, None, efa=True)
    return [m for groups in set(d.efa_groups) for m in d.network.admits(groups, groups, flow)]


@rule(MNP_DEFAULT_GROUP, covers=("AWS::EC2::VPC",))
def task_interfaces_admit_each_other(d: Deployment) -> list[str]:
    """The job's task interfaces reach each other on every port (rendezvous, NCCL bootstrap).

    https://docs.aws.amazon.com/batch/latest/userguide/mnp-ce.html: multi-node parallel jobs
    run in awsvpc mode; each container's interface gets the compute environment's security
    groups, and "If you don't specify a security group, the default security group for the
    VPC is used". torchrun's rendezvous, NCCL's bootstrap and Gloo use TCP on arbitrary ports
    between these interfaces, so that group must admit all traffic from itself.

    This proves the templates, not the account: the stacks never own the default group, whose
    rules are AWS's (all from itself, all out) unless the account changed them (Security Hub
    control EC2.2's remediation strips them). The TaskSecurityGroupId output names the group,
    and the launcher looks at its rules in the account before a run and in `launcher check`
    (launcher/stack/security.py).
    """
    flow = Flow("task interface to task interface", ALL, None)
    problems = d.network.admits(d.task_groups, d.task_groups, flow)
    output = d.templates[d.config.stack_name]["Outputs"]["TaskSecurityGroupId"]["Value"]
    named = d.network.resolve_all(d.config.stack_name, [output])
    if named != d.task_groups:
        problems.append(f"TaskSecurityGroupId names {sorted(named)}, not {sorted(d.task_groups)}")
    return problems


@rule(
    EFS_MOUNT_TARGET,
    MNP_DEFAULT_GROUP,
    covers=("AWS::EFS::MountTarget.SecurityGroups",),
)
def task_interfaces_reach_the_file_system(d: Deployment) -> list[str]:
    """NFS (TCP 2049) from the job's task interfaces to every EFS mount target.

    https://docs.aws.amazon.com/efs/latest/APIReference/API_CreateMountTarget.html: "If the
    request provides SecurityGroups, this network interface is associated with those security
    groups", so those groups must admit NFS (2049) from every client. With awsvpc
    (https://docs.aws.amazon.com/batch/latest/userguide/mnp-ce.html) the client is the task's
    own interface, in the task group, not the node.
    """
    flow = Flow("task interface to EFS", "tcp", 2049)
    return [m for fs in d.file_system_groups for m in d.network.admits(d.task_groups, fs, flow)]


@rule(EFS_MOUNT_TARGET)
def hosts_reach_the_file_system(d: Deployment) -> list[str]:
    """NFS (TCP 2049) from the nodes' primary interfaces to every EFS mount target.

    https://docs.aws.amazon.com/efs/latest/APIReference/API_CreateMountTarget.html: the same
    groups, for a node mounting the file system itself (an operator on Session Manager).
    """
    flow = Flow("node to EFS", "tcp", 2049)
    return [m for fs in d.file_system_groups for m in d.network.admits(d.host_groups, fs, flow)]


@rule(ENDPOINT_GROUPS, covers=("AWS::EC2::VPCEndpoint.SecurityGroupIds",))
def hosts_and_tasks_reach_the_interface_endpoints(d: Deployment) -> list[str]:
    """HTTPS (443) from the nodes and from the job's task interfaces to each interface endpoint.

    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateVpcEndpoint.html
    (SecurityGroupIds): "The IDs of the security groups to associate with the endpoint
    network interfaces." Those groups decide who reaches the service: the ECS agent and image
    pulls use the node's interface, the job's own AWS calls leave from its task interface.
    """
    missing = []
    for service, groups in sorted(d.interface_endpoints.items()):
        for who, source in (("node", d.host_groups), ("task interface", d.task_groups)):
            flow = Flow(f"{who} to {service} endpoint", "tcp", 443)
            missing += d.network.admits(source, groups, flow)
    return missing


@rule(
    CE_GROUPS,
    LT_GROUPS,
    covers=(
        "AWS::Batch::ComputeEnvironment.ComputeResources.SecurityGroupIds",
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.SecurityGroupIds",
    ),
)
def compute_environment_names_no_groups_beside_interfaces(d: Deployment) -> list[str]:
    """Security groups live on the launch template's interfaces when it has any, on the
    template itself when it has none (a pool without EFA).

    https://docs.aws.amazon.com/batch/latest/APIReference/API_ComputeResource.html
    (securityGroupIds): "If security groups are specified using both securityGroupIds and
    launchTemplate, the values in securityGroupIds are used." Batch then passes them at the
    instance level, which EC2 refuses beside network interfaces that carry their own groups;
    EC2 says the same of the template's own list: "If you specify a network interface, you
    must specify any security groups as part of the network interface instead of using this
    parameter" (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    API_RequestLaunchTemplateData.html).
    """
    resources = d.compute_environment.props["ComputeResources"]
    data = d.launch_template.props["LaunchTemplateData"]
    if d.interfaces and resources.get("SecurityGroupIds"):
        return ["the compute environment names SecurityGroupIds beside EFA interfaces"]
    if d.interfaces and data.get("SecurityGroupIds"):
        return ["the launch template names SecurityGroupIds beside its network interfaces"]
    if not d.interfaces and not (
        resources.get("SecurityGroupIds")
        or d.launch_template.props["LaunchTemplateData"].get("SecurityGroupIds")
    ):
        return ["no security group for the nodes: neither interfaces nor SecurityGroupIds"]
    return []
