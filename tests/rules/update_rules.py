"""The second ``cdk deploy``: settings that change often must never replace what runs jobs."""

from __future__ import annotations

from infra.app import TAGS_FIXED_AT_CREATION
from infra.compute_pool import job_queue_name, node_tags
from infra.config import CLUSTER_TAG
from tests.rules.deployment import FARGATE, Deployment
from tests.rules.registry import CloudFormation, Model, Page, Schema, rule

CE_TAGS_FIXED = Schema("AWS::Batch::ComputeEnvironment", "/properties/Tags")
PLACEMENT_GROUP_TAGS_FIXED = Schema("AWS::EC2::PlacementGroup", "/properties/Tags")
NODE_TAGS_UPDATE = CloudFormation(
    "aws_batch",
    "ComputeEnvironment",
    "tags",
    "When updating a compute environment, changing this setting requires an infrastructure "
    "update of the compute environment.",
    property_type="ComputeResources",
)
NODE_TAGS_NOT_ON_FARGATE = CloudFormation(
    "aws_batch",
    "ComputeEnvironment",
    "tags",
    "This parameter isn't applicable to jobs that are running on Fargate resources. Don't "
    "specify it.",
    property_type="ComputeResources",
)
QUEUE_NAME_FIXED = Schema("AWS::Batch::JobQueue", "/properties/JobQueueName")
NO_FAIR_SHARE_ADDED = Model(
    "batch",
    "CreateJobQueueRequest",
    "schedulingPolicyArn",
    "A job queue without a fair-share scheduling policy is scheduled as a FIFO job queue and "
    "can't have a fair-share scheduling policy added.",
)
NO_FAIR_SHARE_REMOVED = Model(
    "batch",
    "CreateJobQueueRequest",
    "schedulingPolicyArn",
    "After a job queue has a fair-share scheduling policy, it can be replaced but can't be "
    "removed.",
)
DELETED_QUEUE_ENDS_JOBS = Model(
    "batch",
    "DeleteJobQueueRequest",
    "",
    "All jobs in the queue are eventually terminated when you delete a job queue.",
)
POLICY_IN_USE = Model(
    "batch",
    "DeleteSchedulingPolicyRequest",
    "",
    "You can't delete a scheduling policy that's used in any job queues.",
)
UPDATE_REPLACE_POLICY = Page(
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/"
    "aws-attribute-updatereplacepolicy.html",
    "By default, CloudFormation then deletes the old resource.",
)


def _tags(value) -> dict[str, str]:
    """CloudFormation tags as a mapping, from either spelling (map, or list of Key/Value)."""
    if isinstance(value, list):
        return {t["Key"]: t["Value"] for t in value}
    return dict(value or {})


@rule(
    CE_TAGS_FIXED,
    PLACEMENT_GROUP_TAGS_FIXED,
    NODE_TAGS_UPDATE,
    NODE_TAGS_NOT_ON_FARGATE,
    covers=(
        "AWS::Batch::ComputeEnvironment.Tags",
        "AWS::Batch::ComputeEnvironment.ComputeResources.Tags",
        "AWS::EC2::PlacementGroup.Tags",
    ),
)
def tag_changes_never_replace_the_compute_environment(d: Deployment) -> list[str]:
    """Only tags fixed for the cluster's life sit where AWS fixes them at creation; the nodes
    carry the configured tags in a way an update changes in place.

    Tags are in the createOnlyProperties of AWS::Batch::ComputeEnvironment and
    AWS::EC2::PlacementGroup (their provider schemas; "Update requires: Replacement" on
    https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/
    aws-resource-batch-computeenvironment.html and
    https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/
    aws-resource-ec2-placementgroup.html): a cost-centre tag added there replaces the compute
    environment, and its running jobs end with its instances. So they carry the cluster tag
    (the stack's name, fixed) and creation_tags only. ComputeResources.Tags reach the EC2
    instances instead (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/
    aws-properties-batch-computeenvironment-computeresources.html): "When updating a compute
    environment, changing this setting requires an infrastructure update of the compute
    environment" (nodes replaced as jobs finish), and for
    Fargate "This parameter isn't applicable to jobs that are running on Fargate resources.
    Don't specify it."
    """
    config = d.config
    fixed = {CLUSTER_TAG: config.stack_name, **config.creation_tags}
    problems = []
    for type_ in TAGS_FIXED_AT_CREATION:
        for resource in d.of_type(type_):
            tags = _tags(resource.props.get("Tags"))
            if tags != fixed:
                problems.append(f"{resource.path}: Tags {tags}; a change replaces it: {fixed}")
    for ce in d.of_type("AWS::Batch::ComputeEnvironment"):
        resources = ce.props.get("ComputeResources", {})
        if resources.get("Type") in FARGATE and "Tags" in resources:
            problems.append(f"{ce.path}: ComputeResources.Tags on Fargate")
    ce = d.compute_environment
    want = node_tags(d.cluster_config, d.pool)
    if ce.props["ComputeResources"].get("Tags") != want:
        problems.append(
            f"{ce.path}: node tags {ce.props['ComputeResources'].get('Tags')} != {want}"
        )
    return problems


@rule(
    QUEUE_NAME_FIXED,
    NO_FAIR_SHARE_ADDED,
    NO_FAIR_SHARE_REMOVED,
    DELETED_QUEUE_ENDS_JOBS,
    POLICY_IN_USE,
    UPDATE_REPLACE_POLICY,
    covers=("AWS::Batch::JobQueue.JobQueueName",),
)
def a_fair_share_change_gets_a_new_queue_and_keeps_the_old_ones_jobs(d: Deployment) -> list[str]:
    """Turning fair_share on or off replaces the job queue, and the old queue's jobs run on.

    Batch refuses both directions on one queue: "A job queue without a fair-share scheduling
    policy is scheduled as a FIFO job queue and can't have a fair-share scheduling policy
    added", and "After a job queue has a fair-share scheduling policy, it can be replaced but
    can't be removed" (https://docs.aws.amazon.com/batch/latest/APIReference/
    API_CreateJobQueue.html). So each mode has its own queue name, and JobQueueName is
    create-only (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/
    aws-resource-batch-jobqueue.html): the change creates the new queue first. "By default,
    CloudFormation then deletes the old resource" (https://docs.aws.amazon.com/
    AWSCloudFormation/latest/UserGuide/aws-attribute-updatereplacepolicy.html), and "All jobs in
    the queue are eventually terminated when you delete a job queue"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_DeleteJobQueue.html): the queue is
    retained instead. The retained fair-share queue keeps using its policy, which Batch would
    not delete anyway ("You can't delete a scheduling policy that's used in any job queues",
    https://docs.aws.amazon.com/batch/latest/APIReference/API_DeleteSchedulingPolicy.html): a
    retained cluster keeps it too.
    """
    queue = d.job_queue
    problems = []
    if queue.props.get("JobQueueName") != job_queue_name(d.cluster_config, d.pool):
        problems.append(f"queue name {queue.props.get('JobQueueName')}: not its mode's own")
    if queue.body.get("UpdateReplacePolicy") != "Retain":
        problems.append("a replaced queue would be deleted, terminating its jobs")
    for policy in d.of_type("AWS::Batch::SchedulingPolicy"):
        want = "Retain" if d.config.removal_policy == "retain" else "Delete"
        if policy.body.get("DeletionPolicy", "Delete") != want:
            problems.append(f"{policy.path}: DeletionPolicy {policy.body.get('DeletionPolicy')}")
    return problems
