"""What AWS Batch on Fargate and ECS do with the copy job the launcher registers and submits."""

from __future__ import annotations

import re
from dataclasses import dataclass

from launcher.stack.cluster import ClusterInfo
from tests.rules.job_rules import ATTEMPTS, AWSLOGS, EXIT_CODE_GLOB, NO_MATCH_RETRIES, TAG_LIMIT
from tests.rules.registry import Model, Page, rule

FARGATE_ONLY_CONTAINER = Model(
    "batch",
    "RegisterJobDefinitionRequest",
    "type",
    "If the job is run on Fargate resources, then multinode isn't supported.",
)
FARGATE_CAPABILITY = Model(
    "batch",
    "RegisterJobDefinitionRequest",
    "platformCapabilities",
    "To run the job on Fargate resources, specify FARGATE.",
)
FARGATE_SIZES = Model(
    "batch",
    "ResourceRequirement",
    "value",
    "For jobs that are running on Fargate resources, then value is the hard limit (in MiB), and "
    "must match one of the supported values and the VCPU values must be one of the values "
    "supported for that memory value.",
)
NO_HOST_VOLUMES = Model(
    "batch",
    "Volume",
    "host",
    "This parameter isn't applicable to jobs that are running on Fargate resources and "
    "shouldn't be provided.",
)
FARGATE_EXECUTION_ROLE = Model(
    "batch",
    "ContainerProperties",
    "executionRoleArn",
    "For jobs that run on Fargate resources, you must provide an execution role.",
)
PRIVATE_SUBNET = Model(
    "batch",
    "NetworkConfiguration",
    "assignPublicIp",
    "the private subnet requires a NAT gateway be attached to route requests to the internet.",
)
PLATFORM_VERSION = Model(
    "batch",
    "FargatePlatformConfiguration",
    "platformVersion",
    "If one isn't specified, the LATEST platform version is used by default.",
)
SECRET_ARN = Model(
    "batch",
    "Secret",
    "valueFrom",
    "The supported values are either the full Amazon Resource Name (ARN) of the Secrets Manager "
    "secret or the full ARN of the parameter in the Amazon Web Services Systems Manager "
    "Parameter Store.",
)
SECRET_JSON_KEY = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/specifying-sensitive-data-secrets.html",
    "When you inject a secret as an environment variable, you can specify a JSON key or version "
    "of a secret to inject.",
)
PARAMETERS = Model(
    "batch",
    "SubmitJobRequest",
    "parameters",
    "Additional parameters passed to the job that replace parameter substitution placeholders "
    "that are set in the job definition.",
)
TIMEOUT_NOT_RETRIED = Model(
    "batch",
    "RegisterJobDefinitionRequest",
    "timeout",
    "If a job is terminated due to a timeout, it isn't retried. The minimum value for the "
    "timeout is 60 seconds.",
)

# RegisterJobDefinition, ResourceRequirement: the memory values (MiB) Fargate allows for one
# vCPU ("value = 2048 VCPU = 0.25, 0.5, or 1" ... "value = 8192 VCPU = 1, 2, or 4").
FARGATE_MEMORY_FOR_ONE_VCPU = frozenset(range(2048, 8192 + 1, 1024))
SECRET_REFERENCE = re.compile(
    r"^(?P<arn>arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[^:]+):"
    r"(?P<key>[A-Za-z0-9_]+):(?P<stage>[^:]*):(?P<version>[^:]*)$"
)


@dataclass(frozen=True)
class CopyJob:
    """The copy job's requests and the cluster they were built for."""

    register: dict
    submit: dict
    cluster: ClusterInfo

    @property
    def container(self) -> dict:
        return self.register["containerProperties"]


def _resources(container: dict) -> dict[str, str]:
    return {r["type"]: r["value"] for r in container.get("resourceRequirements", [])}


@rule(
    FARGATE_ONLY_CONTAINER,
    FARGATE_CAPABILITY,
    FARGATE_SIZES,
    NO_HOST_VOLUMES,
    kind="copyjob",
    covers=(
        "type",
        "platformCapabilities",
        "containerProperties",
        "resourceRequirements",
        "volumes",
        "mountPoints",
        "jobQueue",
    ),
)
def copy_job_is_a_fargate_container_job_on_the_copy_queue(job: CopyJob) -> list[str]:
    """A single-container Fargate job, sized as Fargate allows, on the stack's Fargate queue.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_RegisterJobDefinition.html:
    "If the job is run on Fargate resources, then multinode isn't supported"; "To run the job
    on Fargate resources, specify FARGATE." (platformCapabilities), and a queue holds either EC2
    or Fargate compute environments, so the job goes to the copy queue, never the training one.
    https://docs.aws.amazon.com/batch/latest/APIReference/API_ResourceRequirement.html: "For
    jobs that are running on Fargate resources, then value is the hard limit (in MiB), and must
    match one of the supported values and the VCPU values must be one of the values supported
    for that memory value" (1 vCPU: 2048 to 8192 MiB in steps of 1024); no GPU on Fargate.
    https://docs.aws.amazon.com/batch/latest/APIReference/API_Volume.html (host): "This
    parameter isn't applicable to jobs that are running on Fargate resources and shouldn't be
    provided": the copy streams registry to registry and needs no volume.
    """
    problems = []
    if job.register.get("type") != "container" or job.register.get("platformCapabilities") != [
        "FARGATE"
    ]:
        problems.append("not a Fargate container job")
    if job.submit.get("jobQueue") != job.cluster.copy_queue_arn:
        problems.append("not submitted to the stack's copy queue")
    sizes = _resources(job.container)
    if sizes.get("VCPU") != "1" or int(sizes.get("MEMORY", 0)) not in FARGATE_MEMORY_FOR_ONE_VCPU:
        problems.append(f"{sizes}: not a Fargate size for 1 vCPU")
    if "GPU" in sizes:
        problems.append("a GPU on Fargate")
    if any("host" in v for v in job.container.get("volumes", [])):
        problems.append("a host volume on Fargate")
    return problems


@rule(
    PRIVATE_SUBNET,
    PLATFORM_VERSION,
    kind="copyjob",
    covers=("networkConfiguration", "fargatePlatformConfiguration"),
)
def copy_job_network_goes_through_the_vpc(job: CopyJob) -> list[str]:
    """No public IP (the subnet is private: endpoints or NAT carry the traffic) and a platform
    version that has the task ENI and JSON-key secrets.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_NetworkConfiguration.html:
    "the private subnet requires a NAT gateway be attached to route requests to the
    internet", so a public IP would buy nothing there. https://docs.aws.amazon.com/batch/
    latest/APIReference/API_FargatePlatformConfiguration.html: "If one isn't specified, the
    LATEST platform version is used by default"; ECR's endpoints and JSON-key secrets need 1.4.0
    or later, so the job names LATEST or a version at least that.
    """
    problems = []
    if job.container.get("networkConfiguration", {}).get("assignPublicIp", "DISABLED") != (
        "DISABLED"
    ):
        problems.append("a public IP in a private subnet")
    version = job.container.get("fargatePlatformConfiguration", {}).get("platformVersion")
    if version not in (None, "LATEST") and tuple(map(int, version.split("."))) < (1, 4, 0):
        problems.append(f"platform version {version} predates the task ENI and JSON-key secrets")
    return problems


@rule(
    FARGATE_EXECUTION_ROLE,
    SECRET_ARN,
    SECRET_JSON_KEY,
    kind="copyjob",
    covers=("executionRoleArn", "jobRoleArn", "secrets", "environment"),
)
def copy_job_credentials_are_roles_and_secret_references(job: CopyJob) -> list[str]:
    """The stack's copy roles; registry credentials only as references to the configured
    Secrets Manager secrets, never as values.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_ContainerProperties.html: "For
    jobs that run on Fargate resources, you must provide an execution role."
    https://docs.aws.amazon.com/batch/latest/APIReference/API_Secret.html (valueFrom): "The
    supported values are either the full Amazon Resource Name (ARN) of the Secrets Manager
    secret or the full ARN of the parameter in the Amazon Web Services Systems Manager
    Parameter Store." https://docs.aws.amazon.com/batch/latest/userguide/
    specifying-sensitive-data-secrets.html: "When you inject a secret as an environment
    variable, you can specify a JSON key or version of a secret to inject" (ARN:json-key:
    version-stage:version-id), read by the execution role, which may read exactly the
    configured secrets.
    """
    problems = []
    if job.container.get("executionRoleArn") != job.cluster.copy_execution_role_arn:
        problems.append("not the stack's copy execution role")
    if job.container.get("jobRoleArn") != job.cluster.copy_job_role_arn:
        problems.append("not the stack's copy job role")
    allowed = set(job.cluster.registry_secrets.values())
    for secret in job.container.get("secrets", []):
        match = SECRET_REFERENCE.match(secret.get("valueFrom", ""))
        if not match:
            problems.append(f"{secret.get('name')}: not a Secrets Manager ARN with a JSON key")
        elif match["arn"] not in allowed:
            problems.append(f"{secret.get('name')}: a secret the execution role may not read")
    for variable in job.container.get("environment", []):
        if any(word in variable["name"].upper() for word in ("TOKEN", "PASSWORD", "SECRET")):
            problems.append(f"{variable['name']}: a credential in clear text")
    return problems


@rule(
    PARAMETERS,
    kind="copyjob",
    covers=("command", "image", "parameters", "jobName", "jobDefinition", "jobDefinitionName"),
)
def copy_job_parameters_fill_its_command(job: CopyJob) -> list[str]:
    """One definition for every copy: the source and target are SubmitJob parameters that fill
    the command's ``Ref::`` placeholders; the image is the stack's copier.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_SubmitJob.html (parameters):
    "Additional parameters passed to the job that replace parameter substitution
    placeholders that are set in the job definition." A placeholder without a value would reach
    the copier as the literal text ``Ref::source``.
    """
    problems = []
    defaults = job.register.get("parameters", {})
    given = {**defaults, **job.submit.get("parameters", {})}
    for word in job.container.get("command", []):
        if word.startswith("Ref::") and word.removeprefix("Ref::") not in given:
            problems.append(f"{word} has no parameter")
    if job.container.get("image") != job.cluster.copy_image:
        problems.append("not the stack's copier image")
    if job.submit.get("jobDefinition") != job.register.get("jobDefinitionName"):
        problems.append("submits another job definition than it registers")
    return problems


@rule(
    ATTEMPTS,
    EXIT_CODE_GLOB,
    NO_MATCH_RETRIES,
    TIMEOUT_NOT_RETRIED,
    kind="copyjob",
    covers=("retryStrategy", "timeout"),
)
def copy_job_retries_transfers_but_not_bad_requests(job: CopyJob) -> list[str]:
    """A failed copy is attempted again (it resumes per layer), a bad request (exit 2) is not,
    and the timeout leaves room for a 20 GB base.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_RetryStrategy.html: "You can
    specify between 1 and 10 attempts", and "If none of the listed conditions match, then the
    job is retried"; https://docs.aws.amazon.com/batch/latest/APIReference/
    API_EvaluateOnExit.html (onExitCode): "It can contain only numbers, and can end with an
    asterisk (*) so that only the start of the string needs to be an exact match."
    https://docs.aws.amazon.com/batch/latest/APIReference/API_RegisterJobDefinition.html
    (timeout): "If a job is terminated due to a timeout, it isn't retried. The minimum value
    for the timeout is 60 seconds." An hour at least: a 20 GB base at Fargate's network rates
    takes minutes, and a job cut short resumes on the next run anyway.
    """
    problems = []
    strategy = job.register.get("retryStrategy", {})
    if not 2 <= strategy.get("attempts", 1) <= 10:
        problems.append("a single attempt: a dropped connection would end the copy")
    rules = strategy.get("evaluateOnExit", [])
    first_exit = next((r for r in rules if r.get("action", "").upper() == "EXIT"), None)
    if first_exit is None or first_exit.get("onExitCode") != "2":
        problems.append("a bad request (exit 2) is attempted again")
    for item in rules:
        code = item.get("onExitCode")
        if code is not None and not re.match(r"^[0-9]*\*?$", code):
            problems.append(f"onExitCode {code!r} is not a pattern Batch accepts")
    if job.register.get("timeout", {}).get("attemptDurationSeconds", 3600) < 3600:
        problems.append("a timeout under an hour")
    return problems


@rule(
    AWSLOGS,
    TAG_LIMIT,
    kind="copyjob",
    covers=("logConfiguration", "propagateTags", "tags"),
)
def copy_job_logs_and_tags(job: CopyJob) -> list[str]:
    """Its lines go to the stack's log group (the launcher reports them as progress), its tags
    stay within Batch's limit.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_LogConfiguration.html: awslogs
    "Specifies the Amazon CloudWatch Logs logging driver"; the copy execution role may write to
    the stack's group only, with a stream prefix. https://docs.aws.amazon.com/batch/latest/
    APIReference/API_SubmitJob.html: "If the total number of combined tags from the job and job
    definition is over 50, the job is moved to the FAILED state."
    """
    problems = []
    log = job.container.get("logConfiguration", {})
    options = log.get("options", {})
    if log.get("logDriver") != "awslogs" or options.get("awslogs-group") != (
        job.cluster.log_group_name
    ):
        problems.append("logs do not go to the stack's log group")
    if options.get("awslogs-region") != job.cluster.region or not options.get(
        "awslogs-stream-prefix"
    ):
        problems.append("awslogs without region or stream prefix")
    tags = len(job.submit.get("tags", {})) + len(job.register.get("tags", {}))
    if tags > 50:
        problems.append(f"{tags} tags: Batch fails a job with more than 50")
    return problems
