"""What AWS Batch, ECS and NCCL do with the job definitions the launcher registers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from launcher.stack.cluster import ClusterInfo
from tests.rules.registry import Model, Page, rule

LINK_LOCAL = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-metadata-endpoint-v2.html",
    "All containers belonging to tasks that are launched with the awsvpc network mode receive a "
    "local IPv4 address within a predefined link-local address range.",
)
NCCL_IFNAME = Page(
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    "NCCL_SOCKET_IFNAME",
)
AWS_P6_SAMPLE = Page(
    "https://github.com/aws-samples/awsome-distributed-training/blob/main/1.architectures/"
    "3.aws-batch/aws-batch-distributed-training-p6.yaml",
    "export NCCL_SOCKET_IFNAME=^lo,docker,ecs",
)
EFS_ACCESS_POINT = Model(
    "batch",
    "EFSAuthorizationConfig",
    "accessPointId",
    "If an access point is used, transit encryption must be enabled in the EFSVolumeConfiguration.",
)
EFS_IAM = Model(
    "batch",
    "EFSAuthorizationConfig",
    "iam",
    "EFS IAM authorization requires that TransitEncryption be ENABLED and that a JobRoleArn is "
    "specified.",
)
EFS_ROOT = Model(
    "batch",
    "EFSVolumeConfiguration",
    "rootDirectory",
    "If an EFS access point is specified in the authorizationConfig, the root directory "
    "parameter must either be omitted or set to /",
)
MEMLOCK_SAMPLE = Page(
    "https://github.com/aws-samples/awsome-distributed-training/blob/main/1.architectures/"
    "3.aws-batch/aws-batch-distributed-training-p6.yaml",
    "- Name: memlock",
)
DEVICES = Model(
    "batch",
    "LinuxParameters",
    "devices",
    "Any of the host devices to expose to the container.",
)
SAME_INSTANCE_TYPE = Model(
    "batch",
    "ContainerProperties",
    "instanceType",
    "All node groups in a multi-node parallel job must use the same instance type.",
)
GPU_VALUE = Model(
    "batch",
    "ResourceRequirement",
    "value",
    "Make sure that the number of GPUs reserved for all containers in a job doesn't exceed the "
    "number of available GPUs on the compute resource that the job is launched on.",
)
MEMORY_MANAGEMENT = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/memory-management.html",
    "Then, the job can't be placed in your compute environment.",
)
MEMORY_REGISTERED = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/memory-management.html",
    "The default AWS Batch compute resource AMI also reserves 32 MiB of memory for the Amazon "
    "ECS container agent and other critical system processes.",
)
MEMORY_BUFFER = Page(
    "https://docs.amazonaws.cn/en_us/batch/latest/userguide/ecs-reserved-memory.html",
    "We recommend reserving a 5% memory buffer for Amazon ECS container agent and other "
    "critical system processes.",
)
MAIN_NODE = Model(
    "batch",
    "NodeProperties",
    "mainNode",
    "This node index value must be fewer than the number of nodes.",
)
CHILD_NODES = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/multi-node-parallel-jobs.html",
    "Child node failures don't cause more attempts",
)
STATUS_REASON_GLOB = Model(
    "batch",
    "EvaluateOnExit",
    "onStatusReason",
    "It can contain letters, numbers, periods (.), colons (:), and white spaces (including "
    "spaces or tabs). It can optionally end with an asterisk (*)",
)
ATTEMPTS = Model("batch", "RetryStrategy", "attempts", "You can specify between 1 and 10 attempts.")
EXIT_CODE_GLOB = Model(
    "batch",
    "EvaluateOnExit",
    "onExitCode",
    "It can contain only numbers, and can end with an asterisk (*) so that only the start of "
    "the string needs to be an exact match.",
)
NO_MATCH_RETRIES = Model(
    "batch",
    "RetryStrategy",
    "evaluateOnExit",
    "If none of the listed conditions match, then the job is retried.",
)
TIMEOUT = Model(
    "batch",
    "JobTimeout",
    "attemptDurationSeconds",
    "For multi-node parallel (MNP) jobs, the timeout applies to the whole job, not to the "
    "individual nodes.",
)
TAG_LIMIT = Model(
    "batch",
    "SubmitJobRequest",
    "propagateTags",
    "If the total number of combined tags from the job and job definition is over 50, the job "
    "is moved to the FAILED state.",
)
SHARE_ID = Model(
    "batch",
    "SubmitJobRequest",
    "shareIdentifier",
    "If the job queue has a fair-share scheduling policy, then this parameter must be specified.",
)
AWSLOGS = Model(
    "batch",
    "LogConfiguration",
    "logDriver",
    "Specifies the Amazon CloudWatch Logs logging driver.",
)
SHM = Model(
    "batch",
    "LinuxParameters",
    "sharedMemorySize",
    "The value for the size (in MiB) of the /dev/shm volume.",
)
INIT = Model(
    "batch",
    "LinuxParameters",
    "initProcessEnabled",
    "If true, run an init process inside the container that forwards signals and reaps processes.",
)
PLATFORM = Model(
    "batch",
    "RegisterJobDefinitionRequest",
    "platformCapabilities",
    "do not support multi-node parallel jobs",
)

EFA_DEVICE = re.compile(r"^/dev/infiniband/uverbs(\d+)$")


@dataclass(frozen=True)
class Job:
    """The requests the launcher builds and the cluster they were built for."""

    register: dict
    submit: dict
    cluster: ClusterInfo

    @property
    def containers(self) -> list[dict]:
        return [r["container"] for r in self.register["nodeProperties"]["nodeRangeProperties"]]

    @staticmethod
    def env(container: dict) -> dict[str, str]:
        return {e["name"]: e["value"] for e in container.get("environment", [])}


def nccl_selects(ifname_setting: str, interface: str) -> bool:
    """Whether NCCL's bootstrap may use ``interface`` under ``NCCL_SOCKET_IFNAME``.

    NCCL's environment reference (NCCL_SOCKET_IFNAME): a list of prefixes; "^" in front
    excludes the listed interfaces instead, "=" in front makes the names exact.
    """
    value = ifname_setting.strip()
    exclude = value.startswith("^")
    value = value.removeprefix("^")
    exact = value.startswith("=")
    value = value.removeprefix("=")
    names = [n for n in value.split(",") if n]
    hit = any(interface == n if exact else interface.startswith(n) for n in names)
    return not hit if exclude else hit


EXECUTE_COMMAND = Model(
    "batch",
    "ContainerProperties",
    "enableExecuteCommand",
    "If true, execute command functionality is turned on all the containers in the task.",
)
INIT_PROCESS = Model(
    "batch",
    "LinuxParameters",
    "initProcessEnabled",
    "If true, run an init process inside the container that forwards signals and reaps processes.",
)


@rule(EXECUTE_COMMAND, INIT_PROCESS, kind="job", covers=("enableExecuteCommand",))
def ecs_exec_is_on_only_where_the_stack_turned_it_on(job: Job) -> list[str]:
    """A node takes ``launcher exec`` sessions only on a stack deployed with ``ecs_exec``
    (whose job role has the SSM messages channel permissions), and then with an init process
    to reap the sessions' processes.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_ContainerProperties.html: "If
    true, execute command functionality is turned on all the containers in the task";
    https://docs.aws.amazon.com/batch/latest/APIReference/API_LinuxParameters.html: "If true,
    run an init process inside the container that forwards signals and reaps processes".
    """
    problems = []
    for container in job.containers:
        on = container.get("enableExecuteCommand", False)
        if on != job.cluster.ecs_exec:
            problems.append(
                f"enableExecuteCommand {on} on a stack with ecs_exec {job.cluster.ecs_exec}"
            )
        if on and not container.get("linuxParameters", {}).get("initProcessEnabled"):
            problems.append("enableExecuteCommand without initProcessEnabled")
    return problems


@rule(
    LINK_LOCAL, NCCL_IFNAME, AWS_P6_SAMPLE, kind="job", covers=("environment.NCCL_SOCKET_IFNAME",)
)
def nccl_bootstrap_uses_the_task_interface_only(job: Job) -> list[str]:
    """NCCL's socket bootstrap never picks loopback, Docker or ECS's link-local interface.

    https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-metadata-endpoint-v2.html:
    "All containers belonging to tasks that are launched with the awsvpc network mode receive
    a local IPv4 address within a predefined link-local address range" (169.254.172.0/22, on
    ecs-eth0, beside the task's eth0); other nodes cannot reach it. NCCL takes the first
    interface NCCL_SOCKET_IFNAME admits (https://docs.nvidia.com/deeplearning/nccl/user-guide/
    docs/env.html); AWS's own p6 Batch template uses "export NCCL_SOCKET_IFNAME=^lo,docker,ecs"
    (https://github.com/aws-samples/awsome-distributed-training/blob/main/1.architectures/
    3.aws-batch/aws-batch-distributed-training-p6.yaml).
    """
    problems = []
    for container in job.containers:
        setting = job.env(container).get("NCCL_SOCKET_IFNAME")
        if setting is None:
            if job.cluster.efa_interfaces:
                problems.append("NCCL_SOCKET_IFNAME is unset on an EFA job")
            continue
        for bad in ("lo", "docker0", "ecs-eth0"):
            if nccl_selects(setting, bad):
                problems.append(f"NCCL_SOCKET_IFNAME={setting} lets NCCL bind {bad}")
        if not nccl_selects(setting, "eth0"):
            problems.append(f"NCCL_SOCKET_IFNAME={setting} excludes the task interface eth0")
    return problems


@rule(
    EFS_ACCESS_POINT,
    EFS_IAM,
    EFS_ROOT,
    kind="job",
    covers=("volumes", "mountPoints", "jobRoleArn"),
)
def efs_is_mounted_through_the_access_point_with_tls_and_iam(job: Job) -> list[str]:
    """The EFS volume uses the stack's access point, TLS and the job role.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_EFSAuthorizationConfig.html:
    "If an access point is used, transit encryption must be enabled in the
    EFSVolumeConfiguration", "EFS IAM authorization requires that TransitEncryption be ENABLED
    and that a JobRoleArn is specified";
    https://docs.aws.amazon.com/batch/latest/APIReference/API_EFSVolumeConfiguration.html:
    with an access point "the root directory parameter must either be omitted or set to /".
    The file system policy denies any other mount.
    """
    problems = []
    for container in job.containers:
        volumes = {v["name"]: v for v in container.get("volumes", [])}
        mounted = {m["sourceVolume"] for m in container.get("mountPoints", [])}
        for name, volume in volumes.items():
            if name not in mounted:
                problems.append(f"volume {name} is declared but not mounted")
            efs = volume.get("efsVolumeConfiguration")
            if efs is None:
                continue
            auth = efs.get("authorizationConfig", {})
            if efs.get("fileSystemId") != job.cluster.file_system_id:
                problems.append("EFS volume is not the cluster's file system")
            if auth.get("accessPointId") != job.cluster.access_point_id:
                problems.append("EFS volume bypasses the cluster's access point")
            if efs.get("transitEncryption") != "ENABLED" or auth.get("iam") != "ENABLED":
                problems.append("EFS volume without TLS or IAM authorization")
            if efs.get("rootDirectory", "/") != "/":
                problems.append("EFS volume sets a root directory beside an access point")
            if not container.get("jobRoleArn"):
                problems.append("IAM authorization without a job role")
    return problems


@rule(
    DEVICES,
    MEMLOCK_SAMPLE,
    kind="job",
    covers=("linuxParameters.devices", "ulimits"),
)
def every_efa_device_is_passed_with_unlimited_locked_memory(job: Job) -> list[str]:
    """One /dev/infiniband/uverbsN per EFA interface, read/write/mknod; memlock unlimited.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_LinuxParameters.html: devices
    are "Any of the host devices to expose to the container"; an interface whose device is
    not passed is bandwidth the job never uses. libfabric's EFA provider registers (pins)
    memory, so memlock must be unlimited, as in AWS's own Batch templates ("- Name: memlock",
    https://github.com/aws-samples/awsome-distributed-training/blob/main/1.architectures/
    3.aws-batch/aws-batch-distributed-training-p6.yaml).
    """
    problems = []
    expected = job.cluster.efa_interfaces if _efa_on(job) else 0
    for container in job.containers:
        devices = container.get("linuxParameters", {}).get("devices", [])
        indexes = sorted(int(m.group(1)) for d in devices if (m := EFA_DEVICE.match(d["hostPath"])))
        if indexes != list(range(expected)):
            problems.append(f"EFA devices {indexes}; expected uverbs0-{expected - 1}")
        for d in devices:
            if EFA_DEVICE.match(d["hostPath"]) and set(d.get("permissions", [])) != {
                "READ",
                "WRITE",
                "MKNOD",
            }:
                problems.append(f"{d['hostPath']}: permissions {d.get('permissions')}")
        limits = {u["name"]: u for u in container.get("ulimits", [])}
        memlock = limits.get("memlock", {})
        if expected and (memlock.get("softLimit"), memlock.get("hardLimit")) != (-1, -1):
            problems.append("memlock is not unlimited: libfabric cannot pin memory")
    return problems


def _efa_on(job: Job) -> bool:
    return any(job.env(c).get("FI_PROVIDER") == "efa" for c in job.containers)


@rule(
    SAME_INSTANCE_TYPE,
    GPU_VALUE,
    MEMORY_MANAGEMENT,
    MEMORY_REGISTERED,
    MEMORY_BUFFER,
    MAIN_NODE,
    SHM,
    PLATFORM,
    kind="job",
    covers=(
        "instanceType",
        "resourceRequirements",
        "linuxParameters.sharedMemorySize",
        "nodeProperties",
        "platformCapabilities",
        "type",
    ),
)
def every_node_fits_one_instance_of_the_cluster(job: Job) -> list[str]:
    """Each node asks for no more than one instance of the cluster's type can give.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_ContainerProperties.html: "All
    node groups in a multi-node parallel job must use the same instance type."
    https://docs.aws.amazon.com/batch/latest/APIReference/API_ResourceRequirement.html: "Make
    sure that the number of GPUs reserved for all containers in a job doesn't exceed the
    number of available GPUs on the compute resource that the job is launched on." Memory
    must leave what the OS and the ECS agent keep: asked for more than a node registers,
    "Then, the job can't be placed in your compute environment"
    (https://docs.aws.amazon.com/batch/latest/userguide/memory-management.html). A node
    registers /proc/meminfo's MemTotal, less than the instance's nominal memory by what the
    kernel keeps (the page's m4.large: 8 GiB installed, 7985 MiB registered), minus
    ECS_RESERVED_MEMORY (0 in amazon-ecs-agent), and "The default AWS Batch compute resource
    AMI also reserves 32 MiB of memory for the Amazon ECS container agent and other critical
    system processes"; AWS's advice is "We recommend reserving a 5% memory buffer for Amazon
    ECS container agent and other critical system processes"
    (https://docs.amazonaws.cn/en_us/batch/latest/userguide/ecs-reserved-memory.html). A job
    asks for at most 95% of the nominal memory, and leaves at least 2 GiB.
    The main node "must be fewer than the number of nodes"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_NodeProperties.html); /dev/shm
    ("The value for the size (in MiB) of the /dev/shm volume",
    https://docs.aws.amazon.com/batch/latest/APIReference/API_LinuxParameters.html) comes out
    of the container's memory. Managed Instances "do not support multi-node parallel jobs"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_RegisterJobDefinition.html).
    """
    problems = []
    register = job.register
    if register.get("type") != "multinode" or register.get("platformCapabilities") != ["EC2"]:
        problems.append("not a multinode job for EC2")
    props = register["nodeProperties"]
    if not 0 <= props["mainNode"] < props["numNodes"]:
        problems.append("main node outside the job")
    if props["numNodes"] > job.cluster.max_nodes:
        problems.append("more nodes than the compute environment can run")
    for container in job.containers:
        if container.get("instanceType") != job.cluster.instance_type:
            problems.append(f"instanceType {container.get('instanceType')} is not the cluster's")
        wanted = {r["type"]: int(r["value"]) for r in container.get("resourceRequirements", [])}
        if wanted.get("GPU", 0) > job.cluster.gpus_per_node:
            problems.append("more GPUs than a node has")
        if wanted.get("VCPU", 0) > job.cluster.vcpus_per_node or "VCPU" not in wanted:
            problems.append("vCPUs missing or above a node's")
        memory = wanted.get("MEMORY", 0)
        instance = job.cluster.instance
        if instance is not None:
            nominal = instance.memory_gib * 1024
            if memory > nominal * 0.95 or nominal - memory < 2048:
                problems.append(f"MEMORY {memory} MiB leaves under 5% (or 2 GiB) of {nominal}")
        if not 4 <= memory <= job.cluster.memory_mib_per_node:
            problems.append("memory missing or above what Batch registers for a node")
        shm = container.get("linuxParameters", {}).get("sharedMemorySize", 0)
        if shm >= memory:
            problems.append("/dev/shm as large as the container's memory")
    return problems


@rule(
    CHILD_NODES,
    STATUS_REASON_GLOB,
    EXIT_CODE_GLOB,
    NO_MATCH_RETRIES,
    ATTEMPTS,
    TIMEOUT,
    kind="job",
    covers=("retryStrategy", "timeout"),
)
def retries_and_timeout_mean_what_batch_does(job: Job) -> list[str]:
    """Attempts 1-10, status-reason globs Batch accepts, a whole-job timeout of at least 60 s.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_EvaluateOnExit.html
    (onStatusReason): "It can contain letters, numbers, periods (.), colons (:), and white
    spaces (including spaces or tabs). It can optionally end with an asterisk (*)"; a rule
    outside that alphabet is refused at registration. "You can specify between 1 and 10
    attempts" (https://docs.aws.amazon.com/batch/latest/APIReference/API_RetryStrategy.html).
    The timeout "applies to the whole job, not to the individual nodes"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_JobTimeout.html). And "Child
    node failures don't cause more attempts"
    (https://docs.aws.amazon.com/batch/latest/userguide/multi-node-parallel-jobs.html): only
    the main node's fate is retried, so host loss is matched on its status reason.
    (onExitCode): "It can contain only numbers, and can end with an asterisk (*) so that only
    the start of the string needs to be an exact match." And "If none of the listed conditions
    match, then the job is retried" (evaluateOnExit, API_RetryStrategy.html): without a last
    EXIT entry that matches everything, an application error would be attempted again.
    """
    problems = []
    strategy = job.register.get("retryStrategy", {})
    if not 1 <= strategy.get("attempts", 1) <= 10:
        problems.append("attempts outside 1-10")
    glob = re.compile(r"^[A-Za-z0-9.: \t]*\*?$")
    for item in strategy.get("evaluateOnExit", []):
        for key in ("onStatusReason", "onReason"):
            if key in item and not glob.match(item[key]):
                problems.append(f"{key} {item[key]!r} is not a pattern Batch accepts")
        if "onExitCode" in item and not re.match(r"^[0-9]*\*?$", item["onExitCode"]):
            problems.append(f"onExitCode {item['onExitCode']!r} is not a pattern Batch accepts")
        if item.get("action", "").upper() not in ("RETRY", "EXIT"):
            problems.append(f"action {item.get('action')!r}")
    rules = strategy.get("evaluateOnExit", [])
    last = rules[-1] if rules else {}
    conditions = [v for k, v in last.items() if k.startswith("on")]
    if rules and (last.get("action", "").upper() != "EXIT" or conditions != ["*"]):
        problems.append("the last evaluateOnExit entry is not an EXIT that matches every failure")
    timeout = job.register.get("timeout", {}).get("attemptDurationSeconds")
    if timeout is not None and timeout < 60:
        problems.append("timeout below 60 seconds")
    return problems


@rule(
    TAG_LIMIT,
    SHARE_ID,
    AWSLOGS,
    INIT,
    kind="job",
    covers=(
        "propagateTags",
        "tags",
        "shareIdentifier",
        "schedulingPriorityOverride",
        "logConfiguration",
        "linuxParameters.initProcessEnabled",
        "executionRoleArn",
        "image",
        "command",
        "environment",
        "jobName",
        "jobQueue",
        "jobDefinition",
        "jobDefinitionName",
    ),
)
def submission_matches_the_queue_and_the_log_group(job: Job) -> list[str]:
    """Tags within Batch's limit, a share identifier exactly on fair-share queues, awslogs to
    the stack's group, an init process to forward signals.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_SubmitJob.html: "If the
    total number of combined tags from the job and job definition is over 50, the job is
    moved to the FAILED state", and for shareIdentifier "If the job queue has a fair-share
    scheduling policy, then this parameter must be specified" (and must not be otherwise).
    https://docs.aws.amazon.com/batch/latest/APIReference/API_LogConfiguration.html: awslogs
    "Specifies the Amazon CloudWatch Logs logging driver"; the execution role may write to the
    stack's group only. https://docs.aws.amazon.com/batch/latest/APIReference/
    API_LinuxParameters.html: an init process "forwards signals and reaps processes", so a
    terminated job's training processes get SIGTERM rather than being killed mid-checkpoint.
    """
    problems = []
    submit = job.submit
    tags = len(submit.get("tags", {})) + len(job.register.get("tags", {}))
    if tags > 50:
        problems.append(f"{tags} tags: Batch fails a job with more than 50")
    fair = bool(job.cluster.scheduling_policy_arn)
    if fair != ("shareIdentifier" in submit):
        problems.append("shareIdentifier present without fair share, or missing with it")
    if "schedulingPriorityOverride" in submit and not fair:
        problems.append("a scheduling priority on a queue without fair share")
    if submit.get("jobQueue") != job.cluster.job_queue_arn:
        problems.append("not submitted to the cluster's queue")
    if submit.get("jobDefinition") != job.register.get("jobDefinitionName"):
        problems.append("submits another job definition than it registers")
    for container in job.containers:
        log = container.get("logConfiguration", {})
        options = log.get("options", {})
        if (
            log.get("logDriver") != "awslogs"
            or options.get("awslogs-group") != job.cluster.log_group_name
        ):
            problems.append("logs do not go to the stack's log group")
        if options.get("awslogs-region") != job.cluster.region or not options.get(
            "awslogs-stream-prefix"
        ):
            problems.append("awslogs without region or stream prefix")
        if container.get("executionRoleArn") != job.cluster.execution_role_arn:
            problems.append("not the stack's execution role")
        if not container.get("linuxParameters", {}).get("initProcessEnabled"):
            problems.append("no init process: signals never reach the training processes")
    return problems


OVERRIDE_ENV = Model(
    "batch",
    "ContainerOverrides",
    "environment",
    "You can add new environment variables, which are added to the container at launch, or you "
    "can override the existing environment variables from the Docker image or the job "
    "definition.",
)
OVERRIDE_RANGE = Model(
    "batch",
    "NodePropertyOverride",
    "targetNodes",
    "The range of nodes, using node index values, that's used to override.",
)


@rule(OVERRIDE_ENV, OVERRIDE_RANGE, kind="job", covers=("nodeOverrides",))
def every_node_gets_the_submits_one_watch_token(job: Job) -> list[str]:
    """Every node range of the job, named as the definition names it, gets one node-watch
    token (launcher.node.prelude) from the submit; the definition, reused by every submit of the
    same job, holds none.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_ContainerOverrides.html
    (environment): "You can add new environment variables, which are added to the container at
    launch, or you can override the existing environment variables from the Docker image or the
    job definition": the submit's token reaches every node it names when it starts. (targetNodes,
    https://docs.aws.amazon.com/batch/latest/APIReference/API_NodePropertyOverride.html) "The
    range of nodes, using node index values, that's used to override": a range the definition
    does not have would leave some nodes without the token, and their watch off.
    """
    from launcher.node.prelude import WATCH_TOKEN_ENV

    ranges = [r["targetNodes"] for r in job.register["nodeProperties"]["nodeRangeProperties"]]
    overrides = job.submit.get("nodeOverrides", {}).get("nodePropertyOverrides", [])
    tokens = {
        o["targetNodes"]: Job.env(o.get("containerOverrides", {})).get(WATCH_TOKEN_ENV)
        for o in overrides
    }
    problems = []
    if list(tokens) != ranges or None in tokens.values() or len(set(tokens.values())) != 1:
        problems.append("not one node-watch token for every node range in the submit")
    if any(WATCH_TOKEN_ENV in Job.env(c) for c in job.containers):
        problems.append("a node-watch token in the job definition, which every submit reuses")
    return problems
