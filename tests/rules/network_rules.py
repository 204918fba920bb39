"""Network flows a multi-node EFA job needs, checked against the security groups."""

from __future__ import annotations

from tests.rules.deployment import Deployment
from tests.rules.flows import ALL, Flow
from tests.rules.registry import rule

EFA_GUIDE = "https://docs.aws.amazon.com/batch/latest/userguide/efa.html"
MNP_CE = "https://docs.aws.amazon.com/batch/latest/userguide/mnp-ce.html"
EFS_VOLUMES = "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/efs-volumes.html"
ENDPOINTS = "https://docs.aws.amazon.com/vpc/latest/privatelink/create-interface-endpoint.html"
CE_API = "https://docs.aws.amazon.com/batch/latest/APIReference/API_ComputeResource.html"


@rule(
    source=EFA_GUIDE,
    covers=(
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.NetworkInterfaces.Groups",
        "AWS::EC2::SecurityGroup.SecurityGroupEgress",
        "AWS::EC2::SecurityGroupEgress",
        "AWS::EC2::SecurityGroupIngress",
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


@rule(source=MNP_CE, covers=("AWS::EC2::VPC", "AWS::Batch::ComputeEnvironment.ComputeResources"))
def task_interfaces_admit_each_other(d: Deployment) -> list[str]:
    """The job's task interfaces reach each other on every port (rendezvous, NCCL bootstrap).

    https://docs.aws.amazon.com/batch/latest/userguide/mnp-ce.html: multi-node parallel jobs
    run in awsvpc mode; each container's interface gets the compute environment's security
    groups, and "If you don't specify a security group, the default security group for the
    VPC is used". torchrun's rendezvous, NCCL's bootstrap and Gloo use TCP on arbitrary ports
    between these interfaces, so that group must admit all traffic from itself.
    """
    flow = Flow("task interface to task interface", ALL, None)
    return d.network.admits(d.task_groups, d.task_groups, flow)


@rule(
    source=EFS_VOLUMES,
    covers=("AWS::EFS::MountTarget.SecurityGroups", "AWS::EC2::SecurityGroupIngress"),
)
def task_interfaces_reach_the_file_system(d: Deployment) -> list[str]:
    """NFS (TCP 2049) from the job's task interfaces to every EFS mount target.

    https://docs.aws.amazon.com/AmazonECS/latest/developerguide/efs-volumes.html: the mount
    target's security group must allow inbound NFS on port 2049 from the tasks; with awsvpc
    the mount is made from the task's own interface (its groups, not the host's).
    """
    flow = Flow("task interface to EFS", "tcp", 2049)
    return [m for fs in d.file_system_groups for m in d.network.admits(d.task_groups, fs, flow)]


@rule(source=EFS_VOLUMES, covers=("AWS::EFS::MountTarget.SecurityGroups",))
def hosts_reach_the_file_system(d: Deployment) -> list[str]:
    """NFS (TCP 2049) from the nodes' primary interfaces to every EFS mount target.

    https://docs.aws.amazon.com/AmazonECS/latest/developerguide/efs-volumes.html: the
    container instances' security group needs NFS access to the mount target for volumes the
    agent mounts on the host (and for an operator mounting the file system from a node).
    """
    flow = Flow("node to EFS", "tcp", 2049)
    return [m for fs in d.file_system_groups for m in d.network.admits(d.host_groups, fs, flow)]


@rule(
    source=ENDPOINTS,
    covers=("AWS::EC2::VPCEndpoint.SecurityGroupIds", "AWS::EC2::VPCEndpoint.PrivateDnsEnabled"),
)
def hosts_and_tasks_reach_the_interface_endpoints(d: Deployment) -> list[str]:
    """HTTPS (443) from the nodes and from the job's task interfaces to each interface endpoint.

    https://docs.aws.amazon.com/vpc/latest/privatelink/create-interface-endpoint.html: the
    endpoint's security group "must allow communication between the endpoint network
    interface and the resources in your VPC that communicate with the service" (HTTPS). The
    ECS agent and image pulls use the node's interface; the job's own AWS calls leave from
    its task interface.
    """
    missing = []
    for service, groups in sorted(d.interface_endpoints.items()):
        for who, source in (("node", d.host_groups), ("task interface", d.task_groups)):
            flow = Flow(f"{who} to {service} endpoint", "tcp", 443)
            missing += d.network.admits(source, groups, flow)
    return missing


@rule(source=CE_API, covers=("AWS::Batch::ComputeEnvironment.ComputeResources.SecurityGroupIds",))
def compute_environment_names_no_groups_beside_interfaces(d: Deployment) -> list[str]:
    """Security groups live on the launch template's interfaces when it has any.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_ComputeResource.html
    (securityGroupIds): "If security groups are specified using both securityGroupIds and
    launchTemplate, the values in securityGroupIds are used"; Batch then passes them at the
    instance level, which EC2 refuses beside network interfaces that carry their own groups.
    """
    resources = d.compute_environment.props["ComputeResources"]
    if d.interfaces and resources.get("SecurityGroupIds"):
        return ["the compute environment names SecurityGroupIds beside EFA interfaces"]
    if not d.interfaces and not (
        resources.get("SecurityGroupIds")
        or d.launch_template.props["LaunchTemplateData"].get("SecurityGroupIds")
    ):
        return ["no security group for the nodes: neither interfaces nor SecurityGroupIds"]
    return []
