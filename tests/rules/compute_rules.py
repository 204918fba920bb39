"""The compute environment, its launch template and the job queue, against Batch and EC2."""

from __future__ import annotations

import re

from infra.config import ClusterConfig
from launcher.stack import catalog
from tests.rules.deployment import Deployment
from tests.rules.registry import CloudFormation, Model, Page, rule

EC2_GUIDE_EFA_CARDS = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html",
    "For each additional network interface, use the next unused network card index, device "
    "index 0, for EFA-only network interface",
)
PRIMARY_NOT_EFA_ONLY = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html",
    "You can't use an EFA-only network interface as the primary network interface.",
)
PRIMARY_ON_CARD_0 = Model(
    "ec2",
    "LaunchTemplateInstanceNetworkInterfaceSpecificationRequest",
    "NetworkCardIndex",
    "The primary network interface must be assigned to network card index 0.",
)
EFA_ONLY_EVERYWHERE = Page(
    "https://www.amazonaws.cn/en/new/2024/amazon-ec2-announces-efa-updates-for-scalability-with-aiml-applications/",
    "EFA-only interfaces can only be configured as a secondary interface, with the primary "
    "interface being either EFA coupled with ENA or just ENA",
)
AWS_SAMPLES_EFA_EVERY_CARD = Page(
    "https://github.com/aws-samples/awsome-distributed-training/blob/main/1.architectures/"
    "3.aws-batch/aws-batch-distributed-training-p6.yaml",
    "InterfaceType: efa",
)
P6_B300_PRIMARY_CARD_ENA_ONLY = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html",
    "They have 8 GPUs and 17 network cards, where the primary network card supports only an ENA "
    "network interface with up to 350 Gbps of bandwidth.",
)
P6_B300_EFA_ON_CARDS_1_TO_16 = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html",
    "For the remaining network cards (network card indexes 1-16, device index 0), use EFA-only "
    "network interfaces.",
)
ENA_INTERFACE_TYPE = Model(
    "ec2",
    "LaunchTemplateInstanceNetworkInterfaceSpecificationRequest",
    "InterfaceType",
    "If you are not creating an EFA, specify interface or omit this parameter.",
)
AWSVPC_TASK_ENI = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-networking.html",
    "The task is allocated its own elastic network interface (ENI) and a primary private IPv4 "
    "address.",
)
IMAGE_TYPE = Model(
    "batch",
    "Ec2Configuration",
    "imageType",
    "ECS_AL2023_NVIDIA doesn't support p3 and g3 instance types.",
)
AL2_BLOCKED = Model(
    "batch",
    "Ec2Configuration",
    "imageType",
    "Effective June 30, 2026, Batch will block creation of new Amazon ECS compute environments "
    "using Batch-provided Amazon Linux 2 AMIs.",
)
AWS_SAMPLES_BEST_FIT = Page(
    "https://github.com/aws-samples/awsome-distributed-training/blob/main/1.architectures/"
    "3.aws-batch/aws-batch-distributed-training-p6.yaml",
    "AllocationStrategy: BEST_FIT",
)
BEST_FIT_NO_UPDATES = Model(
    "batch",
    "ComputeResource",
    "allocationStrategy",
    "Compute resources that use a BEST_FIT allocation strategy don't support infrastructure "
    "updates and can't update some parameters.",
)
UPDATE_TO_LATEST = Model(
    "batch",
    "ComputeResourceUpdate",
    "updateToLatestImageVersion",
    "Specifies whether the AMI ID is updated to the latest one that's supported by Batch when "
    "the compute environment has an infrastructure update.",
)
UPDATE_TIMEOUT = Model(
    "batch",
    "UpdatePolicy",
    "jobExecutionTimeoutMinutes",
    "The maximum value is 7200.",
)
REPLACE_CE = CloudFormation(
    "aws_batch",
    "ComputeEnvironment",
    "replace_compute_environment",
    "When changing the value of this property to false , do not change any other properties at "
    "the same time.",
)
SERVICE_LINKED_ROLE = Model(
    "batch",
    "CreateComputeEnvironmentRequest",
    "serviceRole",
    "If your account already created the Batch service-linked role, that role is used by "
    "default for your compute environment unless you specify a different role here.",
)
MNP_NO_SPOT = Model(
    "batch",
    "ComputeResource",
    "type",
    "Multi-node parallel jobs aren't supported on Spot Instances or Amazon ECS Managed Instances.",
)
PLACEMENT_GROUP = Model(
    "batch",
    "ComputeResource",
    "placementGroup",
    "If you intend to submit multi-node parallel jobs to your compute environment, you should "
    "consider creating a cluster placement group and associate it with your compute resources.",
)
MAXVCPUS = Model(
    "batch",
    "ComputeResource",
    "maxvCpus",
    "Batch never exceeds maxvCpus by more than a single instance.",
)
MINVCPUS = Model(
    "batch",
    "ComputeResource",
    "minvCpus",
    "The minimum number of vCPUs that a compute environment should maintain (even if the "
    "compute environment is DISABLED).",
)
INSTANCE_ROLE = Model(
    "batch",
    "ComputeResource",
    "instanceRole",
    "The Amazon ECS instance profile applied to Amazon EC2 instances in a compute environment.",
)
IMDS_HOP_LIMIT = Model(
    "ec2",
    "LaunchTemplateInstanceMetadataOptionsRequest",
    "HttpPutResponseHopLimit",
    "The larger the number, the further instance metadata requests can travel.",
)
AWSVPC_BLOCK_IMDS = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-iam-roles.html",
    "set the ECS_AWSVPC_BLOCK_IMDS agent configuration variable to true in the agent "
    "configuration file and restart the agent.",
)
AGENT_BLOCK_IMDS_DEFAULT = Page(
    "https://github.com/aws/amazon-ecs-agent/blob/master/README.md",
    "ECS_AWSVPC_BLOCK_IMDS",
)
USER_DATA_MIME = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/launch-templates.html",
    "Amazon EC2 user data in launch templates must be in the MIME multi-part archive format.",
)
P6_SAMPLE_HOP_LIMIT = Page(
    "https://github.com/aws-samples/awsome-distributed-training/blob/main/1.architectures/"
    "3.aws-batch/aws-batch-distributed-training-p6.yaml",
    "HttpPutResponseHopLimit: 1",
)
IMDS_TOKENS = Model(
    "ec2",
    "LaunchTemplateInstanceMetadataOptionsRequest",
    "HttpTokens",
    "required - IMDSv2 is required.",
)
EBS_ENCRYPTED = Model(
    "ec2",
    "LaunchTemplateEbsBlockDeviceRequest",
    "Encrypted",
    "Indicates whether the EBS volume is encrypted.",
)
QUEUE_STATE = Model(
    "batch",
    "JobQueueDetail",
    "state",
    "If the job queue state is ENABLED, it can accept jobs.",
)
FAIR_SHARE = Model(
    "batch",
    "CreateJobQueueRequest",
    "schedulingPolicyArn",
    "After a job queue has a fair-share scheduling policy, it can be replaced but can't be "
    "removed.",
)
SHARE_DECAY = Model(
    "batch",
    "FairsharePolicy",
    "shareDecaySeconds",
    "The maximum supported value is 604800 (1 week).",
)
COMPUTE_RESERVATION = Model(
    "batch",
    "FairsharePolicy",
    "computeReservation",
    "The minimum value is 0 and the maximum value is 99.",
)
QUEUE_PRIORITY = Model(
    "batch",
    "CreateJobQueueRequest",
    "priority",
    "Job queues with a higher priority (or a higher integer value for the priority parameter) "
    "are evaluated first when associated with the same compute environment.",
)
# --- capacity: reservations, Capacity Blocks, reservation groups ----------------------------
RESERVATION_DEFAULT_OPEN = Model(
    "ec2",
    "RequestLaunchTemplateData",
    "CapacityReservationSpecification",
    "If you do not specify this parameter, the instance's Capacity Reservation preference "
    "defaults to open, which enables it to run in any open Capacity Reservation that has "
    "matching attributes (instance type, platform, Availability Zone).",
)
RESERVATION_TARGET_ID = Model(
    "ec2",
    "CapacityReservationTarget",
    "CapacityReservationId",
    "The ID of the Capacity Reservation in which to run the instance.",
)
RESERVATION_TARGET_GROUP = Model(
    "ec2",
    "CapacityReservationTarget",
    "CapacityReservationResourceGroupArn",
    "The ARN of the Capacity Reservation resource group in which to run the instance.",
)
PREFERENCE_WITH_TARGET = Model(
    "ec2",
    "CapacityReservationSpecification",
    "",
    "You can only specify CapacityReservationPreference and CapacityReservationTarget if the "
    "CapacityReservationPreference is capacity-reservations-only.",
)
RESERVATIONS_ONLY = Model(
    "ec2",
    "LaunchTemplateCapacityReservationSpecificationRequest",
    "CapacityReservationPreference",
    "capacity-reservations-only - The instance will only run in a Capacity Reservation or "
    "Capacity Reservation group. If capacity isn't available, the instance will fail to launch.",
)
GROUP_FALLS_BACK = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/create-cr-group.html",
    "If the group does not have a Capacity Reservation with matching attributes and available "
    "capacity, the instances run using On-Demand capacity.",
)
TARGETED_FAILS = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html",
    "If the selected Capacity Reservation does not have sufficient capacity for the number of "
    "instances you selected, the instance launch fails.",
)
RESERVATION_IN_PLACEMENT_GROUP = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html",
    "After you create a Capacity Reservation in a placement group, you can't modify it to "
    "reserve capacity outside of the placement group.",
)
CAPACITY_BLOCK_SIZE = Model(
    "ec2",
    "DescribeCapacityBlockOfferingsRequest",
    "InstanceCount",
    "Each Capacity Block can have up to 64 instances",
)
CAPACITY_BLOCK_LAUNCH = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html",
    "To use your Capacity Block, you must specify the Capacity Block reservation ID when "
    "launching instances.",
)
CAPACITY_BLOCK_MARKET = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html",
    "For Purchasing option, choose Capacity Blocks.",
)
CAPACITY_BLOCK_TYPES = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html",
    "Capacity Blocks are available for select instance types in some AWS Regions.",
)
GROUP_HOLDS_CAPACITY_BLOCKS = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups.html",
    "A group supports all reservation types, including On-Demand Capacity Reservations, "
    "interruptible Capacity Reservations, and Capacity Blocks for ML.",
)
GROUP_OF_BLOCKS_LAUNCH = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups-launch.html",
    "To launch instances into Capacity Blocks in a group, specify the group ARN and select the "
    "Capacity Blocks purchasing option. Amazon EC2 places instances into any active Capacity "
    "Block in the group with matching attributes and available capacity. If no matching "
    "capacity is available, the instances fail to launch.",
)
GROUP_OF_BLOCKS_NO_PLACEMENT_GROUP = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups-launch.html",
    "You can't specify a placement group when launching into Capacity Blocks in a Capacity "
    "Reservation Resource Group.",
)
CAPACITY_BLOCKS_TOTAL = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html",
    "The total number of instances that can be reserved in Capacity Blocks across all accounts "
    "in your AWS Organization can't exceed 256 instances on a particular date.",
)
CAPACITY_BLOCK_NO_PLACEMENT_GROUP = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html",
    "By default, Capacity Blocks deliver low-latency, high-throughput network connectivity "
    "between the instances inside the Capacity Block, so there is no need to use a cluster "
    "placement group with a Capacity Block.",
)
# --- the queue's time limits ------------------------------------------------------------------
TIME_LIMIT_STATE = Model(
    "batch", "JobStateTimeLimitAction", "state", "The only supported value is RUNNABLE."
)
TIME_LIMIT_ACTION = Model(
    "batch",
    "JobStateTimeLimitAction",
    "action",
    "For job queues connected to a ECS, FARGATE or EKS compute environment, the only supported "
    "value is CANCEL, which will cancel the job.",
)
TIME_LIMIT_SECONDS = Model(
    "batch",
    "JobStateTimeLimitAction",
    "maxTimeSeconds",
    "The minimum value is 600 (10 minutes) and the maximum value is 86,400 (24 hours).",
)
TIME_LIMIT_EACH = CloudFormation(
    "aws_batch",
    "JobQueue",
    "job_state_time_limit_actions",
    "AWS Batch will perform each action after maxTimeSeconds has passed.",
)
TIME_LIMIT_REASONS = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/job_stuck_in_runnable_time_limit_actions.html",
    "However, not all statusReason values support automatic remediation.",
)
# The statusReason values that page lists as supporting jobStateTimeLimitActions.
REMEDIABLE_REASONS = (
    "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
    "MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE",
    "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT",
)


def _type(d: Deployment) -> catalog.InstanceType:
    return d.config.instance


@rule(
    EC2_GUIDE_EFA_CARDS,
    PRIMARY_NOT_EFA_ONLY,
    PRIMARY_ON_CARD_0,
    P6_B300_PRIMARY_CARD_ENA_ONLY,
    P6_B300_EFA_ON_CARDS_1_TO_16,
    ENA_INTERFACE_TYPE,
    AWSVPC_TASK_ENI,
    EFA_ONLY_EVERYWHERE,
    AWS_SAMPLES_EFA_EVERY_CARD,
    covers=(
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.NetworkInterfaces.DeviceIndex",
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.NetworkInterfaces.InterfaceType",
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.NetworkInterfaces.NetworkCardIndex",
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.NetworkInterfaces.DeleteOnTermination",
    ),
)
def launch_template_has_one_efa_device_per_card_and_room_for_the_task(d: Deployment) -> list[str]:
    """One EFA device on every network card that takes one, one IP address per node, a free
    slot on card 0.

    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html: "You can't
    use an EFA-only network interface as the primary network interface", and "For each
    additional network interface, use the next unused network card index, device index 0,
    for EFA-only network interface". The primary interface "must be assigned to network card
    index 0" (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    API_LaunchTemplateInstanceNetworkInterfaceSpecificationRequest.html).

    A multi-node job's container gets its own interface in awsvpc mode ("The task is
    allocated its own elastic network interface (ENI) and a primary private IPv4 address",
    https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-networking.html), which
    ECS attaches beside the primary; the template keeps card 0 to one interface, so the
    primary is "EFA with ENA" rather than ENA plus an EFA-only interface at device 1. Both are
    what EC2 allows on every EFA type: "EFA-only interfaces can only be configured as a
    secondary interface, with the primary interface being either EFA coupled with ENA or just
    ENA", and EFA-only is "available on all EFA supported instances" (EC2's announcement,
    https://www.amazonaws.cn/en/new/2024/amazon-ec2-announces-efa-updates-for-scalability-with-aiml-applications/),
    so one layout serves every type of the catalog whose card 0 takes EFA. AWS's Batch samples
    (p4d, p5, p6-b200) put "InterfaceType: efa" on every card (https://github.com/aws-samples/
    awsome-distributed-training/blob/main/1.architectures/3.aws-batch/
    aws-batch-distributed-training-p6.yaml): they predate EFA-only interfaces, and each such
    interface takes an IP address of the subnet (32 a p5 node). Interfaces are deleted with
    the instance, or every replaced node would leak one per card.

    P6-B300 has "8 GPUs and 17 network cards, where the primary network card supports only an
    ENA network interface with up to 350 Gbps of bandwidth"; the guide's layout for it: "For
    the remaining network cards (network card indexes 1-16, device index 0), use EFA-only
    network interfaces" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
    efa-acc-inst-types.html). Its primary is then a plain ENA interface: "If you are not
    creating an EFA, specify interface or omit this parameter"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    API_LaunchTemplateInstanceNetworkInterfaceSpecificationRequest.html), and its EFA devices
    sit on cards 1-16.
    """
    if not d.config.efa_interfaces:
        return ["no EFA interfaces"] if d.interfaces else []
    efa_cards = d.config.instance.efa_cards
    expected = sorted({0, *efa_cards})
    problems = []
    cards = [i["NetworkCardIndex"] for i in d.interfaces]
    if sorted(cards) != expected:
        problems.append(
            f"network cards {cards}; expected one interface on each of 0-{expected[-1]}"
        )
    for i in d.interfaces:
        card, device, kind = i["NetworkCardIndex"], i["DeviceIndex"], i.get("InterfaceType")
        want = "interface" if card not in efa_cards else "efa" if card == 0 else "efa-only"
        if (device, kind) != (0, want):
            problems.append(f"card {card}: device {device} {kind}; expected device 0 {want}")
        if i.get("DeleteOnTermination") is not True:
            problems.append(f"card {card}: the interface outlives its instance")
    if sum(1 for c in cards if c == 0) > 1:
        problems.append("card 0 carries more than the primary: no slot left for the task interface")
    return problems


@rule(
    IMAGE_TYPE,
    AL2_BLOCKED,
    covers=(
        "AWS::Batch::ComputeEnvironment.ComputeResources.Ec2Configuration.ImageType",
        "AWS::Batch::ComputeEnvironment.ComputeResources.InstanceTypes",
    ),
)
def compute_environment_ami_serves_the_instance_type(d: Deployment) -> list[str]:
    """Batch's AMI for the image type can run the instance type (GPU driver, AL2023).

    https://docs.aws.amazon.com/batch/latest/APIReference/API_Ec2Configuration.html
    (imageType): "ECS_AL2023_NVIDIA doesn't support p3 and g3 instance types", and
    "Effective June 30, 2026, Batch will block creation of new Amazon ECS compute environments
    using Batch-provided Amazon Linux 2 AMIs." GPU types need the NVIDIA variant for the
    driver; the launch template names no AMI, so the image type decides.
    """
    ce = d.compute_environment.props["ComputeResources"]
    image_types = [c["ImageType"] for c in ce.get("Ec2Configuration", [])]
    problems = []
    if ce.get("InstanceTypes") != [d.config.instance_type]:
        problems.append(f"instance types {ce.get('InstanceTypes')}; expected exactly one")
    if image_types != [_type(d).image_type]:
        problems.append(
            f"image types {image_types}; {d.config.instance_type} needs {_type(d).image_type}"
        )
    if any("AL2_" in t or t.endswith("AL2") or t == "ECS_AL1" for t in image_types):
        problems.append("an Amazon Linux 2 image type: Batch no longer creates those")
    family = d.config.instance_type.split(".")[0]
    if family.startswith(("p3", "g3")):
        problems.append(f"{family} is not served by ECS_AL2023_NVIDIA")
    if "ImageId" in d.launch_template.props["LaunchTemplateData"]:
        problems.append("the launch template names an AMI: updates would never refresh it")
    return problems


@rule(
    BEST_FIT_NO_UPDATES,
    UPDATE_TO_LATEST,
    UPDATE_TIMEOUT,
    REPLACE_CE,
    SERVICE_LINKED_ROLE,
    AWS_SAMPLES_BEST_FIT,
    covers=(
        "AWS::Batch::ComputeEnvironment.ReplaceComputeEnvironment",
        "AWS::Batch::ComputeEnvironment.UpdatePolicy",
        "AWS::Batch::ComputeEnvironment.ComputeResources.UpdateToLatestImageVersion",
        "AWS::Batch::ComputeEnvironment.ComputeResources.AllocationStrategy",
        "AWS::Batch::ComputeEnvironment.ComputeResources.LaunchTemplate",
        "AWS::Batch::ComputeEnvironment.ServiceRole",
    ),
)
def compute_environment_updates_in_place(d: Deployment) -> list[str]:
    """A change to the stack updates the nodes as their jobs finish; it never kills running jobs.

    With ReplaceComputeEnvironment true, CloudFormation replaces the compute environment for
    any change that needs new instances, and every running job dies with it. Infrastructure
    updates instead replace nodes in place; "Compute resources that use a BEST_FIT allocation
    strategy don't support infrastructure updates"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_ComputeResource.html).
    updateToLatestImageVersion "Specifies whether the AMI ID is updated to the latest one
    that's supported by Batch when the compute environment has an infrastructure update"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_ComputeResourceUpdate.html),
    and jobExecutionTimeoutMinutes bounds how long running jobs may go on: "The maximum value
    is 7200" (https://docs.aws.amazon.com/batch/latest/APIReference/API_UpdatePolicy.html).
    Batch uses its service-linked role when none is named ("that role is used by default",
    https://docs.aws.amazon.com/batch/latest/APIReference/API_CreateComputeEnvironment.html).
    Moving an existing stack from true to false is a deploy of its own: "When changing the
    value of this property to false , do not change any other properties at the same time"
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/
    aws-resource-batch-computeenvironment.html).

    AWS's Capacity Block samples for Batch use "AllocationStrategy: BEST_FIT"
    (https://github.com/aws-samples/awsome-distributed-training/blob/main/1.architectures/
    3.aws-batch/aws-batch-distributed-training-p6.yaml); no AWS page ties a Capacity Block (or
    a reservation) to an allocation strategy, and BEST_FIT would turn every later change into
    a replacement that ends running jobs, so every capacity setting keeps BEST_FIT_PROGRESSIVE.
    """
    ce = d.compute_environment.props
    resources = ce["ComputeResources"]
    problems = []
    if ce.get("ReplaceComputeEnvironment", True) is not False:
        problems.append("ReplaceComputeEnvironment is not false: an update kills running jobs")
    policy = ce.get("UpdatePolicy", {})
    if policy.get("TerminateJobsOnUpdate") is not False:
        problems.append("UpdatePolicy.TerminateJobsOnUpdate is not false")
    if not 1 <= policy.get("JobExecutionTimeoutMinutes", 30) <= 7200:
        problems.append("UpdatePolicy.JobExecutionTimeoutMinutes outside 1-7200")
    if resources.get("AllocationStrategy", "BEST_FIT") == "BEST_FIT":
        problems.append("BEST_FIT allocation: no infrastructure updates")
    if resources.get("UpdateToLatestImageVersion") is not True:
        problems.append("UpdateToLatestImageVersion is not true: the AMI never refreshes")
    if "ServiceRole" in ce:
        problems.append(
            "a ServiceRole is named: infrastructure updates need the service-linked role"
        )
    version = resources["LaunchTemplate"].get("Version")
    if version in (None, "$Default"):
        problems.append("launch template version $Default: template changes would not reach nodes")
    return problems


@rule(
    MNP_NO_SPOT,
    PLACEMENT_GROUP,
    CAPACITY_BLOCK_NO_PLACEMENT_GROUP,
    GROUP_OF_BLOCKS_NO_PLACEMENT_GROUP,
    RESERVATION_IN_PLACEMENT_GROUP,
    MAXVCPUS,
    MINVCPUS,
    INSTANCE_ROLE,
    covers=(
        "AWS::Batch::ComputeEnvironment.Type",
        "AWS::Batch::ComputeEnvironment.State",
        "AWS::Batch::ComputeEnvironment.ComputeResources.Type",
        "AWS::Batch::ComputeEnvironment.ComputeResources.MaxvCpus",
        "AWS::Batch::ComputeEnvironment.ComputeResources.MinvCpus",
        "AWS::Batch::ComputeEnvironment.ComputeResources.PlacementGroup",
        "AWS::Batch::ComputeEnvironment.ComputeResources.Subnets",
        "AWS::Batch::ComputeEnvironment.ComputeResources.InstanceRole",
        "AWS::EC2::PlacementGroup.Strategy",
        "AWS::IAM::InstanceProfile.Roles",
    ),
)
def compute_environment_runs_multi_node_jobs_in_one_placement_group(d: Deployment) -> list[str]:
    """On-Demand EC2, a cluster placement group, one subnet, capacity for max_nodes nodes.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_ComputeResource.html:
    "Multi-node parallel jobs aren't supported on Spot Instances or Amazon ECS Managed
    Instances"; "If you intend to submit multi-node parallel jobs to your compute
    environment, you should consider creating a cluster placement group"; maxvCpus: "Batch
    never exceeds maxvCpus by more than a single instance", so it is nodes x vCPUs; minvCpus
    is what "a compute environment should maintain (even if the compute environment is
    DISABLED)", paid for while idle: min_nodes whole nodes; instanceRole is "The Amazon ECS
    instance profile applied to Amazon EC2 instances in a compute environment".

    A Capacity Block is the exception to the placement group: "there is no need to use a
    cluster placement group with a Capacity Block"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html), and a
    group of the stack's own only constrains placement inside the block; a group of Capacity
    Blocks takes none at all: "You can't specify a placement group when launching into
    Capacity Blocks in a Capacity Reservation Resource Group"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups-launch.html). An
    On-Demand Capacity Reservation created in a cluster placement group belongs to it ("After
    you create a Capacity Reservation in a placement group, you can't modify it to reserve
    capacity outside of the placement group",
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html), and only instances
    launched into that group match it: placement_group names it, or none.
    """
    ce = d.compute_environment
    props, resources = ce.props, ce.props["ComputeResources"]
    problems = []
    market = "SPOT" if d.pool.spot else "EC2"
    if (props.get("Type"), resources.get("Type"), props.get("State")) != (
        "MANAGED",
        market,
        "ENABLED",
    ):
        problems.append(f"not a MANAGED, ENABLED {market} compute environment")
    group = d.ref_target(ce.stack, resources.get("PlacementGroup"))
    chosen = d.config.placement_group
    # A pool without EFA, or on Spot (single-node jobs only), has no multi-node job to place.
    unplaced = d.config.capacity_block_id or not d.pool.efa or d.pool.spot
    if chosen == "none" or (chosen == "auto" and unplaced):
        if "PlacementGroup" in resources:
            problems.append(
                "a placement group where none is wanted (a Capacity Block, no EFA, Spot, none)"
            )
    elif chosen != "auto":
        if resources.get("PlacementGroup") != chosen or group is not None:
            problems.append(f"not the named placement group {chosen} (an ODCR's own)")
    elif group is None or group.props.get("Strategy") != "cluster":
        problems.append("no cluster placement group")
    elif any(
        other.compute_environment.props["ComputeResources"].get("PlacementGroup")
        == resources.get("PlacementGroup")
        for other in map(d.pool_deployment, d.cluster_config.pool_list)
        if other.pool.name != d.pool.name
    ):
        problems.append("a placement group shared with another pool")
    if len(resources.get("Subnets", [])) != 1:
        problems.append("more than one subnet: a placement group and EFA live in one zone")
    vcpus = d.config.instance.vcpus
    if resources.get("MaxvCpus") != d.config.max_nodes * vcpus:
        problems.append(f"MaxvCpus {resources.get('MaxvCpus')} != max_nodes x {vcpus}")
    if resources.get("MinvCpus", 0) % vcpus:
        problems.append("MinvCpus is not a whole number of nodes")
    if resources.get("MinvCpus", 0) != d.config.min_nodes * vcpus:
        problems.append(f"MinvCpus {resources.get('MinvCpus', 0)} != min_nodes x {vcpus}")
    if resources.get("MinvCpus", 0) > resources.get("MaxvCpus", 0):
        problems.append("MinvCpus above MaxvCpus")
    profile = d.ref_target(ce.stack, resources.get("InstanceRole"))
    if profile is None or profile.type != "AWS::IAM::InstanceProfile":
        problems.append("InstanceRole is not an instance profile of the stack")
    return problems


@rule(
    IMDS_HOP_LIMIT,
    IMDS_TOKENS,
    EBS_ENCRYPTED,
    AWSVPC_BLOCK_IMDS,
    USER_DATA_MIME,
    AGENT_BLOCK_IMDS_DEFAULT,
    P6_SAMPLE_HOP_LIMIT,
    covers=(
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.MetadataOptions",
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.BlockDeviceMappings",
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.UserData",
    ),
)
def job_containers_cannot_reach_the_instance_role(d: Deployment) -> list[str]:
    """IMDSv2 only, out of reach of job containers; an encrypted gp3 root volume.

    Multi-node jobs run in awsvpc mode, and their containers reach the instance metadata
    service, with the instance role's credentials, unless the ECS agent blocks it: "To prevent
    containers run by tasks that use the awsvpc network mode from accessing the credential
    information supplied to the Amazon EC2 instance profile, while still allowing the
    permissions that are provided by the task role, set the ECS_AWSVPC_BLOCK_IMDS agent
    configuration variable to true" (https://docs.aws.amazon.com/AmazonECS/latest/
    developerguide/task-iam-roles.html); its default is false ("ECS_AWSVPC_BLOCK_IMDS",
    https://github.com/aws/amazon-ecs-agent/blob/master/README.md). The job role's credentials
    come from the agent's own endpoint (169.254.170.2), which the setting leaves alone. The
    setting goes to /etc/ecs/ecs.config from the launch template's user data, which "must be
    in the MIME multi-part archive format" because Batch merges it with its own
    (https://docs.aws.amazon.com/batch/latest/userguide/launch-templates.html), and must not
    set ECS_CLUSTER or ECS_INSTANCE_ATTRIBUTES (Batch's own).

    The hop limit is 1: "The larger the number, the further instance metadata requests can
    travel" (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    API_LaunchTemplateInstanceMetadataOptionsRequest.html), and only the host (the ECS agent
    runs in the host's network) needs IMDS; 2 would let bridge-mode containers through. AWS's
    p6 Batch sample sets "HttpPutResponseHopLimit: 1"
    (https://github.com/aws-samples/awsome-distributed-training/blob/main/1.architectures/
    3.aws-batch/aws-batch-distributed-training-p6.yaml). HttpTokens "required - IMDSv2 is
    required." The ECS-optimized AL2023 AMIs' root device is /dev/xvda: a mapping under
    another name adds a second volume and leaves the root at its default size; Encrypted
    "Indicates whether the EBS volume is encrypted" (https://docs.aws.amazon.com/AWSEC2/
    latest/APIReference/API_LaunchTemplateEbsBlockDeviceRequest.html).
    """
    data = d.launch_template.props["LaunchTemplateData"]
    problems = []
    meta = data.get("MetadataOptions", {})
    if meta.get("HttpTokens") != "required":
        problems.append("IMDSv1 allowed")
    if meta.get("HttpEndpoint", "enabled") != "enabled":
        problems.append("IMDS off: the ECS agent on the host needs it")
    if meta.get("HttpPutResponseHopLimit") != 1:
        problems.append(
            f"hop limit {meta.get('HttpPutResponseHopLimit')}: containers reach IMDS; 1 is the host"
        )
    settings, errors = ecs_agent_settings(d.user_data)
    problems += errors
    if settings.get("ECS_AWSVPC_BLOCK_IMDS") != "true":
        problems.append("ECS_AWSVPC_BLOCK_IMDS is not true: job containers reach the instance role")
    for reserved in ("ECS_CLUSTER", "ECS_INSTANCE_ATTRIBUTES"):
        if reserved in settings:
            problems.append(f"user data sets {reserved}, which Batch writes itself")
    (root,) = data.get("BlockDeviceMappings", [{}])
    ebs = root.get("Ebs", {})
    if root.get("DeviceName") != "/dev/xvda":
        problems.append(f"root volume mapped at {root.get('DeviceName')}, not /dev/xvda")
    if ebs.get("Encrypted") is not True or ebs.get("VolumeType") != "gp3":
        problems.append("root volume not encrypted gp3")
    if ebs.get("DeleteOnTermination") is not True:
        problems.append("root volume outlives its instance")
    return problems


def ecs_agent_settings(user_data: str | None) -> tuple[dict[str, str], list[str]]:
    """What the user data appends to /etc/ecs/ecs.config, and why it is unusable, if it is:
    it must decode (Fn::Base64 of a string, or of a join with the file system's name) into a
    MIME multi-part archive of shell parts (``Deployment.user_data``)."""
    import email

    if user_data is None:
        return {}, ["no user data a node could read (Fn::Base64 of a MIME archive)"]
    message = email.message_from_string(user_data)
    if not message.is_multipart() or message.get_content_type() != "multipart/mixed":
        return {}, ["user data is not a MIME multi-part archive: Batch cannot merge it"]
    settings = {}
    for part in message.get_payload():
        if part.get_content_type() != "text/x-shellscript":
            return {}, [f"a user data part of type {part.get_content_type()}"]
        for line in part.get_payload().splitlines():
            found = re.fullmatch(r"echo (\w+)=(\S+) >> /etc/ecs/ecs\.config", line.strip())
            if found:
                settings[found[1]] = found[2]
    return settings, []


@rule(
    QUEUE_STATE,
    QUEUE_PRIORITY,
    FAIR_SHARE,
    SHARE_DECAY,
    COMPUTE_RESERVATION,
    covers=(
        "AWS::Batch::JobQueue.State",
        "AWS::Batch::JobQueue.Priority",
        "AWS::Batch::JobQueue.ComputeEnvironmentOrder",
        "AWS::Batch::JobQueue.SchedulingPolicyArn",
        "AWS::Batch::SchedulingPolicy.FairsharePolicy",
    ),
)
def job_queue_feeds_the_compute_environment(d: Deployment) -> list[str]:
    """An enabled queue on this compute environment; fair share only when configured.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_JobQueueDetail.html: "If the job
    queue state is ENABLED, it can accept jobs." Priority only orders queues that share a
    compute environment: "Job queues with a higher priority (or a higher integer value for the
    priority parameter) are evaluated first when associated with the same compute environment"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_CreateJobQueue.html). A pool's
    queue feeds its own compute environment, then its fallback's: "Compute environments are
    tried in ascending order" (https://docs.aws.amazon.com/batch/latest/APIReference/
    API_ComputeEnvironmentOrder.html), "up to three" per queue (CreateJobQueue). A fair-share
    policy "can be replaced but
    can't be removed" (https://docs.aws.amazon.com/batch/latest/APIReference/
    API_CreateJobQueue.html), so it is there only when asked for; its decay "maximum
    supported value is 604800 (1 week)" and its compute reservation "The minimum value is 0 and
    the maximum value is 99" (https://docs.aws.amazon.com/batch/latest/APIReference/
    API_FairsharePolicy.html); weight factors run from "0.0001" to "999.9999" and "The list of
    share identifiers in a fair-share policy can't overlap" (https://docs.aws.amazon.com/batch/
    latest/APIReference/API_ShareAttributes.html).
    """
    queue = d.job_queue
    props = queue.props
    problems = []
    if props.get("State") != "ENABLED":
        problems.append("queue not ENABLED")
    if not isinstance(props.get("Priority"), int) or props["Priority"] < 0:
        problems.append(f"Priority {props.get('Priority')!r} is not a non-negative integer")
    order = sorted(props.get("ComputeEnvironmentOrder", []), key=lambda o: o["Order"])
    if len({o["Order"] for o in order}) != len(order) or len(order) > 3:
        problems.append("compute environment orders repeat, or more than three (CreateJobQueue)")
    targets = [d.ref_target(queue.stack, o["ComputeEnvironment"]) for o in order]
    expected = [d.compute_environment.logical_id]
    if d.pool.fallback:
        fallback = d.pool_deployment(d.pool.fallback)
        expected.append(fallback.compute_environment.logical_id)
        if fallback.config.instance_type != d.config.instance_type:
            problems.append("the fallback's instance type differs: a job fits one of them only")
        if fallback.pool.spot and not d.pool.spot:
            problems.append("a Spot fallback behind a pool that runs multi-node jobs")
    if [t.logical_id if t else None for t in targets] != expected:
        problems.append(
            "the queue does not feed exactly the pool's compute environment, then its fallback's"
        )
    policies = d.of_type("AWS::Batch::SchedulingPolicy")
    if (
        bool(policies) != d.config.fair_share
        or bool(props.get("SchedulingPolicyArn")) != d.config.fair_share
    ):
        problems.append("fair-share policy present without fair_share, or missing with it")
    for policy in policies:
        fair = policy.props.get("FairsharePolicy", {})
        if not 0 <= fair.get("ShareDecaySeconds", 0) <= 604800:
            problems.append("ShareDecaySeconds outside 0-604800")
        if not 0 <= fair.get("ComputeReservation", 0) <= 99:
            problems.append("ComputeReservation outside 0-99")
        shares = {
            a["ShareIdentifier"]: a.get("WeightFactor", 1.0)
            for a in fair.get("ShareDistribution", [])
        }
        if shares != dict(d.config.share_weights):
            problems.append(f"share distribution {shares}; configured {d.config.share_weights}")
        if not all(0.0001 <= w <= 999.9999 for w in shares.values()):
            problems.append("a WeightFactor outside 0.0001-999.9999")
        prefixes = [s[:-1] for s in shares if s.endswith("*")]
        if any(s != p + "*" and s.startswith(p) for p in prefixes for s in shares):
            problems.append("share identifiers overlap (a prefix covers another identifier)")
    return problems


@rule(
    TIME_LIMIT_STATE,
    TIME_LIMIT_ACTION,
    TIME_LIMIT_SECONDS,
    TIME_LIMIT_EACH,
    TIME_LIMIT_REASONS,
    covers=("AWS::Batch::JobQueue.JobStateTimeLimitActions",),
)
def queue_cancels_jobs_that_wait_at_its_head_too_long(d: Deployment) -> list[str]:
    """A job that waits RUNNABLE at the head of the queue for capacity, or on a cluster that can
    never run it, is cancelled after the configured time so the jobs behind it run.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_JobStateTimeLimitAction.html:
    state "The only supported value is RUNNABLE."; action "For job queues connected to a ECS,
    FARGATE or EKS compute environment, the only supported value is CANCEL, which will cancel
    the job."; maxTimeSeconds "The minimum value is 600 (10 minutes) and the maximum value is
    86,400 (24 hours)." "AWS Batch will perform each action after maxTimeSeconds has passed"
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/
    aws-resource-batch-jobqueue.html). Batch acts on some reasons only: "However, not all
    statusReason values support automatic remediation"; the page
    (https://docs.aws.amazon.com/batch/latest/userguide/job_stuck_in_runnable_time_limit_actions.html)
    lists CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY,
    MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE and
    MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT. capacity_wait_minutes times the first,
    misconfigured_wait_minutes the other two; 0 leaves a reason without an action.
    """
    actions = d.job_queue.props.get("JobStateTimeLimitActions", [])
    problems = []
    for a in actions:
        reason = a.get("Reason")
        if a.get("State") != "RUNNABLE":
            problems.append(f"{reason}: state {a.get('State')}; only RUNNABLE is supported")
        if a.get("Action") != "CANCEL":
            problems.append(f"{reason}: action {a.get('Action')}; an EC2 queue can only CANCEL")
        if reason not in REMEDIABLE_REASONS:
            problems.append(f"{reason}: not a reason Batch acts on")
        seconds = a.get("MaxTimeSeconds")
        if not isinstance(seconds, int) or not 600 <= seconds <= 86400:
            problems.append(f"{reason}: MaxTimeSeconds {seconds} outside 600-86400")
    reasons = [a.get("Reason") for a in actions]
    if len(set(reasons)) != len(reasons):
        problems.append(f"a reason appears twice: {reasons}")
    expected = {}
    for minutes, prefix in (
        (d.config.capacity_wait_minutes, "CAPACITY:"),
        (d.config.misconfigured_wait_minutes, "MISCONFIGURATION:"),
    ):
        if minutes:
            expected |= {r: minutes * 60 for r in REMEDIABLE_REASONS if r.startswith(prefix)}
    found = {a.get("Reason"): a.get("MaxTimeSeconds") for a in actions}
    if found != expected:
        problems.append(f"time limits {found}; the configuration asks for {expected}")
    return problems


def _group_elsewhere(config: ClusterConfig, arn: str) -> list[str]:
    found = re.match(r"arn:[^:]+:resource-groups:([^:]+):(\d{12}):group/", arn)
    if not found or found.groups() != (config.region, config.account):
        return [f"{arn}: not a group in the cluster's region and account"]
    return []


@rule(
    RESERVATION_DEFAULT_OPEN,
    RESERVATION_TARGET_ID,
    RESERVATION_TARGET_GROUP,
    PREFERENCE_WITH_TARGET,
    RESERVATIONS_ONLY,
    GROUP_FALLS_BACK,
    TARGETED_FAILS,
    CAPACITY_BLOCK_LAUNCH,
    CAPACITY_BLOCK_MARKET,
    CAPACITY_BLOCK_TYPES,
    CAPACITY_BLOCK_SIZE,
    GROUP_HOLDS_CAPACITY_BLOCKS,
    GROUP_OF_BLOCKS_LAUNCH,
    CAPACITY_BLOCKS_TOTAL,
    MNP_NO_SPOT,
    covers=(
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.InstanceMarketOptions",
        "AWS::EC2::LaunchTemplate.LaunchTemplateData.CapacityReservationSpecification",
    ),
)
def nodes_launch_into_the_configured_capacity(d: Deployment) -> list[str]:
    """Nodes launch into the one reservation, Capacity Block or reservation group configured,
    or On-Demand with the default preference; never on Spot, and never silently On-Demand
    instead of a reservation group.

    Without a specification "the instance's Capacity Reservation preference defaults to open"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RequestLaunchTemplateData.html);
    a target names "The ID of the Capacity Reservation in which to run the instance" or "The ARN
    of the Capacity Reservation resource group in which to run the instance"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservationTarget.html).
    A targeted reservation never falls back: "If the selected Capacity Reservation does not
    have sufficient capacity for the number of instances you selected, the instance launch
    fails" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
    capacity-reservations-launch.html). A group does: "If the group does not have a Capacity
    Reservation with matching attributes and available capacity, the instances run using
    On-Demand capacity" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
    create-cr-group.html), unless the preference is "capacity-reservations-only - The instance
    will only run in a Capacity Reservation or Capacity Reservation group. If capacity isn't
    available, the instance will fail to launch"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    API_LaunchTemplateCapacityReservationSpecificationRequest.html), the one preference that
    may go with a target: "You can only specify CapacityReservationPreference and
    CapacityReservationTarget if the CapacityReservationPreference is
    capacity-reservations-only" (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    API_CapacityReservationSpecification.html; the launch-template shape's own text still
    says one option at a time: should EC2 refuse the pair, the deploy fails at once and
    capacity_reservation_fallback=true is the way back). So a group target asks for
    reservations only unless capacity_reservation_fallback says otherwise.

    A Capacity Block is a reservation on a market of its own: "To use your Capacity Block, you
    must specify the Capacity Block reservation ID when launching instances", with the
    purchasing option Capacity Blocks ("For Purchasing option, choose Capacity Blocks",
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html), which a
    launch template says as MarketType capacity-block (AWS's p5 and p6 Batch samples do).
    "Capacity Blocks are available for select instance types in some AWS Regions"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html) and "Each
    Capacity Block can have up to 64 instances"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityBlockOfferings.html).
    No other market: "Multi-node parallel jobs aren't supported on Spot Instances"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_ComputeResource.html).

    A group may hold Capacity Blocks: "A group supports all reservation types, including
    On-Demand Capacity Reservations, interruptible Capacity Reservations, and Capacity Blocks
    for ML" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups.html). A
    capacity_block_id that is a group's ARN is launched into as the guide says: "To launch
    instances into Capacity Blocks in a group, specify the group ARN and select the Capacity
    Blocks purchasing option. Amazon EC2 places instances into any active Capacity Block in the
    group with matching attributes and available capacity. If no matching capacity is
    available, the instances fail to launch"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups-launch.html): the group's
    ARN as the target, the capacity-block market, no preference (nothing to fall back to). Its
    nodes may span the group's blocks, so the cap is what Capacity Blocks hold together: "The
    total number of instances that can be reserved in Capacity Blocks across all accounts in
    your AWS Organization can't exceed 256 instances on a particular date"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html).
    """
    config = d.config
    data = d.launch_template.props["LaunchTemplateData"]
    market = data.get("InstanceMarketOptions")
    spec = data.get("CapacityReservationSpecification")
    problems = []
    target: dict[str, str] | None = None
    block = config.capacity_block_id
    if block:
        block_group = block.startswith("arn:")  # a Capacity Reservation group of blocks
        target = {
            "CapacityReservationResourceGroupArn" if block_group else "CapacityReservationId": block
        }
        if market != {"MarketType": "capacity-block"}:
            problems.append(
                f"InstanceMarketOptions {market}; a Capacity Block needs capacity-block"
            )
        if not config.instance.capacity_blocks:
            problems.append(f"{config.instance_type} is not offered as Capacity Blocks")
        most = 256 if block_group else 64
        if config.max_nodes > most:
            problems.append(f"max_nodes {config.max_nodes}: Capacity Blocks hold at most {most}")
        if block_group:
            problems += _group_elsewhere(config, block)
    elif market is not None:
        problems.append(f"InstanceMarketOptions {market} without a Capacity Block")
    if config.capacity_reservation_id:
        target = {"CapacityReservationId": config.capacity_reservation_id}
    want: dict | None = {"CapacityReservationTarget": target} if target else None
    if config.capacity_reservation_group_arn:
        arn = config.capacity_reservation_group_arn
        want = {"CapacityReservationTarget": {"CapacityReservationResourceGroupArn": arn}}
        if not config.capacity_reservation_fallback:
            want["CapacityReservationPreference"] = "capacity-reservations-only"
        problems += _group_elsewhere(config, arn)
    if spec != want:
        problems.append(f"CapacityReservationSpecification {spec}; expected {want}")
    if (
        spec
        and spec.get("CapacityReservationPreference", "capacity-reservations-only")
        != ("capacity-reservations-only")
        and "CapacityReservationTarget" in spec
    ):
        problems.append("a preference other than capacity-reservations-only beside a target")
    return problems
