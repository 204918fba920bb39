"""Network stack: the VPC (new or imported), the cluster subnet and the EFA security group."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from infra.config import ClusterConfig
from infra.log_groups import log_group

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


class NetworkStack(Stack):
    """One availability zone: EFA traffic cannot cross zones, so the cluster never spans two."""

    def __init__(self, scope: Construct, construct_id: str, *, config: ClusterConfig, **kw) -> None:
        super().__init__(scope, construct_id, **kw)
        if config.imports_vpc:
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
        else:
            self.vpc, self.subnet = self._new_vpc(config)
        self._flow_log(config)

        self.cluster_security_group = ec2.SecurityGroup(
            self,
            "ClusterSecurityGroup",
            vpc=self.vpc,
            description="EFA cluster nodes: all traffic between members, all egress",
            # Egress to 0.0.0.0/0 also covers EFA's required all-traffic egress to the group.
            allow_all_outbound=True,
        )
        self.cluster_security_group.add_ingress_rule(
            self.cluster_security_group,
            ec2.Port.all_traffic(),
            "EFA and NCCL: all traffic from other cluster nodes",
        )
        if not config.imports_vpc:
            # An imported VPC is expected to bring its own endpoints or NAT.
            self._interface_endpoints()

    def _new_vpc(self, config: ClusterConfig) -> tuple[ec2.Vpc, ec2.ISubnet]:
        private_type = (
            ec2.SubnetType.PRIVATE_WITH_EGRESS
            if config.nat_gateway
            else ec2.SubnetType.PRIVATE_ISOLATED
        )
        subnets = [ec2.SubnetConfiguration(name="Cluster", subnet_type=private_type, cidr_mask=18)]
        if config.nat_gateway:
            subnets.insert(
                0,
                ec2.SubnetConfiguration(
                    name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24
                ),
            )
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(config.vpc_cidr),
            availability_zones=[config.availability_zone],
            nat_gateways=1 if config.nat_gateway else 0,
            subnet_configuration=subnets,
            restrict_default_security_group=False,
        )
        subnet = vpc.select_subnets(subnet_type=private_type).subnets[0]
        # ECR keeps image layers in S3.
        vpc.add_gateway_endpoint(
            "S3Endpoint",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnets=[subnet])],
        )
        return vpc, subnet

    def _interface_endpoints(self) -> None:
        """HTTPS from cluster nodes only, rather than CDK's default of the whole VPC CIDR."""
        endpoint_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="VPC interface endpoints: HTTPS from cluster nodes",
            allow_all_outbound=False,
        )
        endpoint_group.add_ingress_rule(
            self.cluster_security_group, ec2.Port.tcp(443), "AWS APIs from cluster nodes"
        )
        for name, service in _INTERFACE_ENDPOINTS.items():
            self.vpc.add_interface_endpoint(
                f"{name}Endpoint",
                service=service,
                subnets=ec2.SubnetSelection(subnets=[self.subnet]),
                private_dns_enabled=True,
                security_groups=[endpoint_group],
                open=False,
            )

    def _flow_log(self, config: ClusterConfig) -> None:
        group = log_group(self, "FlowLogGroup", retention_days=config.log_retention_days)
        ec2.FlowLog(
            self,
            "FlowLog",
            resource_type=ec2.FlowLogResourceType.from_vpc(self.vpc),
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
