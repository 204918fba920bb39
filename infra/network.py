"""Network stack: the VPC (new or imported), the cluster subnet, the security groups, and the
KMS key of the cluster's log groups.

Two groups matter at run time, and they are different groups:

- the **cluster group** is on every interface of the launch template (the node's primary
  interface and its EFA interfaces). EFA needs it to admit all traffic to and from itself,
  both ways (Batch user guide, efa.html); egress to 0.0.0.0/0 does not cover EFA traffic.
- the **task group** is on each multi-node job container's own interface. Multi-node jobs run
  in awsvpc mode, and a compute environment whose launch template carries the interfaces names
  no groups, so that interface is in the VPC's *default* group (Batch user guide,
  mnp-ce.html). Rendezvous and NCCL's bootstrap run between task interfaces, so the default
  group keeps AWS's all-traffic-from-itself rule; EFS and the endpoints admit it.

A third group belongs to the base-image **copy jobs** (Fargate tasks): HTTPS out and nothing
else, to the interface endpoints (ECR, Logs), the S3 gateway (ECR layers) and, through NAT,
other registries. Nothing admits traffic into it.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.config import ClusterConfig
from infra.log_groups import encrypted_log_group_names, flow_log_group_name, log_group
from launcher.stack.secrets import Store

# Interface endpoints that let instances in a subnet without NAT pull images (ECR api + dkr,
# layers from S3), register with ECS and ship logs.
_INTERFACE_ENDPOINTS = {
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "Ecs": ec2.InterfaceVpcEndpointAwsService.ECS,
    "EcsAgent": ec2.InterfaceVpcEndpointAwsService.ECS_AGENT,
    "EcsTelemetry": ec2.InterfaceVpcEndpointAwsService.ECS_TELEMETRY,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
}
# Session Manager to the nodes (the instance role carries its statement, infra/cluster.py) needs
# these three where there is no NAT (Systems Manager user guide, setup-create-vpc.html).
_SESSION_MANAGER_ENDPOINTS = {
    "Ssm": ec2.InterfaceVpcEndpointAwsService.SSM,
    "SsmMessages": ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES,
    "Ec2Messages": ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES,
}


def exec_endpoints(config: ClusterConfig) -> dict[str, ec2.InterfaceVpcEndpointAwsService]:
    """The endpoint ECS Exec (ecs_exec) needs without NAT: the SSM agent in each job container
    opens its channels to ssmmessages ("If you are using interface Amazon VPC endpoints with
    Amazon ECS, you must create the interface Amazon VPC endpoints for Systems Manager Session
    Manager", ECS guide, ecs-exec.html). Session Manager to the nodes wants the same endpoint,
    under the same name: one endpoint serves both, and each setting asks for it on its own."""
    if not config.ecs_exec:
        return {}
    return {"SsmMessages": ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES}


def secret_endpoints(config: ClusterConfig) -> dict[str, ec2.InterfaceVpcEndpointAwsService]:
    """The endpoints the ECS agent reads jobs' secrets through, before a container starts.

    A job's secrets (job_secrets) and a copy job's registry credentials (registry_secrets) are
    read with the execution role; a job definition that references Secrets Manager secrets in
    a VPC that uses interface endpoints needs the interface endpoint for Secrets Manager (Batch
    user guide, specifying-sensitive-data-secrets.html, considerations), and one that
    references parameters the one for Systems Manager (specifying-sensitive-data-parameters).
    """
    stores = {g.store for g in config.secret_grants}
    found: dict[str, ec2.InterfaceVpcEndpointAwsService] = {}
    if config.registry_secrets or Store.SECRETS_MANAGER in stores:
        found["SecretsManager"] = ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER
    if Store.PARAMETER_STORE in stores:
        found["Ssm"] = ec2.InterfaceVpcEndpointAwsService.SSM
    return found


def _subnet_layout(
    config: ClusterConfig, private_type: ec2.SubnetType
) -> list[ec2.SubnetConfiguration]:
    """The new VPC's subnet groups, in address order.

    CDK hands out CIDR blocks in the order of the groups, and a subnet's CidrBlock is
    create-only (CloudFormation resource schema of AWS::EC2::Subnet): a group inserted before
    another moves it, which would replace the cluster subnet (an export the other stacks use,
    holding the EFS mount target), and CloudFormation refuses that update. So the public
    subnet (for the NAT gateway) comes after the cluster subnet and appears or goes with
    nat_gateway without moving anything. Stacks that 0.1.0 created with NAT have it first
    (public_subnet_first); with NAT off, their public block stays reserved.
    """
    cluster = ec2.SubnetConfiguration(name="Cluster", subnet_type=private_type, cidr_mask=18)
    public = ec2.SubnetConfiguration(
        name="Public",
        subnet_type=ec2.SubnetType.PUBLIC,
        cidr_mask=24,
        reserved=not config.nat_gateway,
    )
    if config.public_subnet_first:
        return [public, cluster]
    return [cluster, public] if config.nat_gateway else [cluster]


class NetworkStack(Stack):
    """One availability zone: EFA traffic cannot cross zones, so the cluster never spans two."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: ClusterConfig, **kw: Any
    ) -> None:
        super().__init__(scope, construct_id, **kw)
        if config.imports_vpc:
            # Validated together (ClusterConfig): an imported VPC comes with all three ids.
            assert config.vpc_id and config.subnet_id and config.default_security_group_id
            self.vpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=config.vpc_id,
                availability_zones=[config.availability_zone],
                private_subnet_ids=[config.subnet_id],
            )
            self.subnet = ec2.Subnet.from_subnet_attributes(
                self,
                "ClusterSubnet",
                subnet_id=config.subnet_id,
                availability_zone=config.availability_zone,
            )
            default_group_id = config.default_security_group_id
        else:
            self.vpc, self.subnet = self._new_vpc(config)
            default_group_id = self.vpc.vpc_default_security_group
        # Rules are added *to other groups* naming this one; nothing here changes the default
        # group itself (its self-rule must stay: see the module docstring).
        self.task_security_group = ec2.SecurityGroup.from_security_group_id(
            self, "TaskSecurityGroup", default_group_id, mutable=False
        )
        self.logs_key = self._logs_key(config)
        self._flow_log(config)

        self.cluster_security_group = ec2.SecurityGroup(
            self,
            "ClusterSecurityGroup",
            vpc=self.vpc,
            description="EFA cluster nodes: all traffic to and from members, all egress",
            allow_all_outbound=True,
        )
        self.cluster_security_group.add_ingress_rule(
            self.cluster_security_group,
            ec2.Port.all_traffic(),
            "EFA and NCCL: all traffic from other cluster nodes",
        )
        # EFA needs an explicit egress rule to the group itself: EFA traffic is not IP, so the
        # 0.0.0.0/0 rule does not cover it. CDK drops add_egress_rule while allow_all_outbound
        # is on, so the rule is declared at L1.
        ec2.CfnSecurityGroupEgress(
            self,
            "ClusterSecurityGroupEfaEgress",
            group_id=self.cluster_security_group.security_group_id,
            destination_security_group_id=self.cluster_security_group.security_group_id,
            ip_protocol="-1",
            description="EFA: all traffic to other cluster nodes (0.0.0.0/0 does not cover EFA)",
        )
        self.copy_security_group = self._copy_security_group()
        if not config.imports_vpc:
            # An imported VPC is expected to bring its own endpoints or NAT.
            self._interface_endpoints(config)

    def _copy_security_group(self) -> ec2.SecurityGroup:
        """Copy jobs only open HTTPS connections: registries, ECR, S3 and CloudWatch Logs.

        allow_all_outbound=False, then one rule: while allow_all_outbound is on, CDK drops any
        egress rule added to the group (nothing is synthesized).
        """
        group = ec2.SecurityGroup(
            self,
            "CopySecurityGroup",
            vpc=self.vpc,
            description="Base-image copy jobs (Fargate): HTTPS out only, nothing in",
            allow_all_outbound=False,
        )
        group.add_egress_rule(
            ec2.Peer.any_ipv4(),
            ec2.Port.tcp(443),
            "HTTPS to ECR, S3 (image layers), CloudWatch Logs and, through NAT, registries",
        )
        return group

    def _new_vpc(self, config: ClusterConfig) -> tuple[ec2.Vpc, ec2.ISubnet]:
        private_type = (
            ec2.SubnetType.PRIVATE_WITH_EGRESS
            if config.nat_gateway
            else ec2.SubnetType.PRIVATE_ISOLATED
        )
        subnets = _subnet_layout(config, private_type)
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(config.vpc_cidr),
            availability_zones=[config.availability_zone],
            nat_gateways=1 if config.nat_gateway else 0,
            subnet_configuration=subnets,
            # Never: job task interfaces live in the default group and need its self-rule.
            restrict_default_security_group=False,
        )
        subnet = vpc.select_subnets(subnet_type=private_type).subnets[0]
        # ECR keeps image layers in S3 (prod-REGION-starport-layer-bucket, also for other
        # accounts' repositories). No endpoint policy: EC2 then attaches one that "allows full
        # access to the service" (CreateVpcEndpoint, PolicyDocument), so cross-account layer
        # reads (Deep Learning Containers) pass the endpoint too.
        vpc.add_gateway_endpoint(
            "S3Endpoint",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnets=[subnet])],
        )
        return vpc, subnet

    def _interface_endpoints(self, config: ClusterConfig) -> None:
        """HTTPS from the nodes and the jobs' task interfaces only, not the whole VPC CIDR."""
        endpoint_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="VPC interface endpoints: HTTPS from cluster nodes and job tasks",
            allow_all_outbound=False,
        )
        endpoint_group.add_ingress_rule(
            self.cluster_security_group, ec2.Port.tcp(443), "AWS APIs from cluster nodes"
        )
        endpoint_group.add_ingress_rule(
            self.task_security_group, ec2.Port.tcp(443), "AWS APIs from job task interfaces"
        )
        endpoint_group.add_ingress_rule(
            self.copy_security_group, ec2.Port.tcp(443), "ECR and Logs from copy jobs"
        )
        endpoints = dict(_INTERFACE_ENDPOINTS)
        if not config.nat_gateway:
            endpoints.update(_SESSION_MANAGER_ENDPOINTS)
            endpoints.update(exec_endpoints(config))
        endpoints.update(secret_endpoints(config))
        for name, service in endpoints.items():
            self.vpc.add_interface_endpoint(
                f"{name}Endpoint",
                service=service,
                subnets=ec2.SubnetSelection(subnets=[self.subnet]),
                private_dns_enabled=True,
                security_groups=[endpoint_group],
                open=False,
            )

    def _logs_key(self, config: ClusterConfig) -> kms.Key:
        """A customer managed key for the cluster's log groups, usable by CloudWatch Logs only
        for those groups (CloudWatch Logs user guide, encrypt-log-data-kms.html)."""
        key = kms.Key(
            self,
            "LogsKey",
            description=f"{config.stack_name}: encrypts the job and flow log groups",
            enable_key_rotation=True,
            removal_policy=(
                RemovalPolicy.RETAIN if config.removal_policy == "retain" else RemovalPolicy.DESTROY
            ),
        )
        groups = [
            self.format_arn(
                service="logs",
                resource="log-group",
                resource_name=name,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for name in encrypted_log_group_names(config)
        ]
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsForTheClusterLogGroups",
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],  # in a key policy, "*" is this key
                conditions={"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": groups}},
            )
        )
        return key

    def _flow_log(self, config: ClusterConfig) -> None:
        group = log_group(
            self,
            "FlowLogGroup",
            retention_days=config.log_retention_days,
            log_group_name=flow_log_group_name(config),
            key=self.logs_key,
        )
        ec2.FlowLog(
            self,
            "FlowLog",
            resource_type=ec2.FlowLogResourceType.from_vpc(self.vpc),
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
