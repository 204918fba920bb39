"""The one module that talks to AWS: CloudFormation, Batch, ECS and CloudWatch Logs via boto3.

Retries for throttling and transient errors are configured here, once (botocore's adaptive
mode). Every AWS failure leaves as ``RemoteError`` with one line saying which call failed;
``UsageError`` where the cause is the user's input (unknown stack, unknown job id).
"""

from __future__ import annotations

import base64
import functools
import ipaddress
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import boto3
import botocore.config
import botocore.exceptions

from launcher.errors import RemoteError, Throttled, UsageError
from launcher.job.readiness import GROUP_TAG

RETRY_CONFIG = botocore.config.Config(
    retries={"mode": "adaptive", "max_attempts": 8},
    user_agent_extra="efa-batch-launcher",
)
# CloudWatch Logs gets no retries from botocore: the follower (launcher.aws.pacing) sees every
# refusal and slows the whole process, whose calls share one account-wide quota. Left to
# botocore, each throttled call would be sent up to 9 times (``max_attempts`` counts retries),
# by each thread's client on its own, while the other followers kept polling; and botocore's
# list of throttling codes lacks "RateExceeded", the one the knowledge center names.
LOGS_RETRY_CONFIG = RETRY_CONFIG.merge(
    botocore.config.Config(retries={"mode": "standard", "total_max_attempts": 1})
)
# Answers meaning "slow down" (botocore retries/standard.py's throttling codes that CloudWatch
# Logs can send, and RateExceeded from the knowledge center, cloudwatch-logs-throttling) or "not
# now" (botocore's transient codes, and any 5xx): worth the same call again after a pause.
THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "RateExceeded",
        "TooManyRequestsException",
    }
)
TRANSIENT_CODES = frozenset(
    {"ServiceUnavailableException", "RequestTimeout", "RequestTimeoutException"}
)

# TerminateJobs (botocore 1.44's batch model; API reference, API_TerminateJobs.html):
# "Terminates up to 50 jobs"; "The response returns an HTTP status code of 200 even when some
# jobs encountered errors, so check the errors list"; "Jobs that can't be found are treated as
# successfully processed". Its per-job codes "ThrottlingException" and "ServerException" come
# with "Retry the request": those jobs are sent again, up to BULK_ROUNDS times in all, pausing
# BULK_PAUSE seconds, then twice that (botocore's retries see only the whole call's status).
BULK_JOBS = 50
BULK_RETRY_CODES = frozenset({"ThrottlingException", "ServerException"})
BULK_ROUNDS = 3
BULK_PAUSE = 1.0
# Batch answers errors of an operation it has with 400 (ClientException) or 500
# (ServerException), the model's only errors; a 404, a 501 or UnknownOperationException comes
# from whatever answered not knowing the operation (an endpoint, a proxy or an emulator older
# than it). Such endpoints are asked no more by this process: one call a job from then on.
UNKNOWN_OPERATION_CODES = frozenset({"UnknownOperationException", "UnknownOperation"})
UNKNOWN_OPERATION_STATUSES = frozenset({404, 501})
_WITHOUT_BULK: set[str] = set()  # endpoint URLs

P = ParamSpec("P")
R = TypeVar("R")
Hint = Callable[[str], "str | None"]  # an endpoint URL -> what to do about it, if known
ENDPOINT_ENV = "AWS_ENDPOINT_URL"  # botocore's, for every service (AWS SDKs reference guide)


def _code(exc: botocore.exceptions.ClientError) -> str:
    code: str = exc.response.get("Error", {}).get("Code", "")
    return code


def try_later(exc: botocore.exceptions.ClientError) -> bool:
    """Whether AWS refused a call for its rate or could not answer it just now."""
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    return _code(exc) in THROTTLING_CODES | TRANSIENT_CODES or status >= 500


def unknown_operation(exc: botocore.exceptions.ClientError) -> bool:
    """Whether the endpoint answered that it does not know the operation at all."""
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return _code(exc) in UNKNOWN_OPERATION_CODES or status in UNKNOWN_OPERATION_STATUSES


def refusals(response: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """A TerminateJobs (or CancelJobs) response's failed jobs: id -> (code, message), from its
    ``errors`` list of TerminateJobsErrorDetail (``job``, ``code``, ``message``)."""
    return {
        e["job"]: (e.get("code") or "Error", e.get("message") or "")
        for e in response.get("errors") or []
    }


# The environment, not the input: exit 1 with what to set (botocore's own text names neither).
SSO_LOGIN = "for an SSO profile, run `aws sso login --profile NAME`"
NO_CREDENTIALS = (
    "no AWS credentials found: set AWS_PROFILE (or pass --profile) to a profile that has "
    f"them, or run `aws configure`; {SSO_LOGIN}"
)


def _as_remote(exc: botocore.exceptions.ClientError) -> RemoteError:
    error = exc.response.get("Error", {})
    return RemoteError(
        f"AWS {exc.operation_name} failed: {error.get('Code', 'Error')}: "
        f"{error.get('Message', exc)}"
    )


def on_this_machine(url: str) -> bool:
    """Whether an endpoint URL names this machine (a loopback address or ``localhost``)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def unreachable(endpoint_url: str, hint: Hint | None = None) -> str | None:
    """The line for an endpoint on this machine that no server answers (an emulator or a proxy
    that is not running), with ``hint(endpoint)``'s words where it has some; None for an
    endpoint elsewhere, whose failure botocore's words say well enough."""
    if not on_this_machine(endpoint_url):
        return None
    parts = urllib.parse.urlsplit(endpoint_url)
    endpoint = f"{parts.scheme}://{parts.netloc}"
    from_env = os.environ.get(ENDPOINT_ENV, "").rstrip("/") == endpoint
    said = hint(endpoint) if hint is not None else None
    what_to_do = said or (
        f"start what serves it, or unset {ENDPOINT_ENV} to reach AWS itself"
        if from_env
        else "start what serves it, or remove endpoint_url from your AWS config"
    )
    source = f" ({ENDPOINT_ENV})" if from_env else ""
    return f"nothing answers at {endpoint}, the AWS endpoint{source}: {what_to_do}"


def _remote(fn: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except botocore.exceptions.ClientError as exc:
            raise _as_remote(exc) from exc
        except botocore.exceptions.EndpointConnectionError as exc:
            hint = getattr(args[0], "unreachable_hint", None) if args else None
            line = unreachable(str(exc.kwargs.get("endpoint_url", "")), hint)
            raise RemoteError(line or f"AWS request failed: {exc}") from exc
        except botocore.exceptions.NoCredentialsError as exc:
            raise RemoteError(NO_CREDENTIALS) from exc
        except (
            botocore.exceptions.SSOError,
            botocore.exceptions.TokenRetrievalError,
        ) as exc:  # an SSO profile whose login has expired
            raise RemoteError(f"AWS credentials not usable: {exc}; {SSO_LOGIN}") from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise RemoteError(f"AWS request failed: {exc}") from exc

    return wrapper


def _terminate_in_bulk(client: Any, request: dict[str, Any]) -> dict[str, str]:
    """TerminateJobs, again for the jobs it answered with a code worth retrying (BULK_ROUNDS)."""
    refused: dict[str, tuple[str, str]] = {}
    pending = list(request["jobs"])
    for round_ in range(BULK_ROUNDS):
        if round_:
            time.sleep(BULK_PAUSE * 2 ** (round_ - 1))
        for job_id in pending:
            refused.pop(job_id, None)
        refused.update(refusals(client.terminate_jobs(**{**request, "jobs": pending})))
        pending = [j for j in pending if refused.get(j, ("",))[0] in BULK_RETRY_CODES]
        if not pending:
            break
    return {
        job_id: f"AWS TerminateJobs failed: {code}: {message}"
        for job_id, (code, message) in refused.items()
    }


class Aws:
    """Thin wrappers over the calls the launcher makes; counts them for the benchmarks."""

    def __init__(
        self,
        profile: str | None = None,
        region: str | None = None,
        *,
        unreachable_hint: Hint | None = None,
    ) -> None:
        # Words for an endpoint on this machine that nothing answers (the API's
        # launcher.api.elsewhere: where the demo's endpoint is, if that is the one).
        self.unreachable_hint = unreachable_hint
        try:
            self.session = boto3.Session(profile_name=profile, region_name=region)
            if not self.session.region_name and os.environ.get("AWS_REGION"):
                # botocore reads AWS_DEFAULT_REGION and the profile, not AWS_REGION, which the
                # AWS CLI v2 and the other SDKs read (and which this message once advised).
                self.session = boto3.Session(
                    profile_name=profile, region_name=os.environ["AWS_REGION"]
                )
        except botocore.exceptions.ProfileNotFound as exc:
            raise UsageError(f"--profile: {exc}") from None
        if not self.session.region_name:
            raise UsageError(
                "no AWS region: pass --region, or set AWS_REGION or region in your AWS profile"
            )
        self.calls = 0
        self._clients: dict[str, Any] = {}
        self._knocked: set[str] = set()
        # Clients are thread-safe once made, their session is not while it makes them (boto3
        # guide, "Multithreading"): threads sharing one Aws (TorchX's replicas) make each once.
        self._lock = threading.Lock()

    def client(self, service: str, region: str | None = None) -> Any:
        """A boto3 client (untyped: boto3 ships no type information)."""
        key = f"{service}@{region or ''}"
        with self._lock:
            if key not in self._clients:
                config = LOGS_RETRY_CONFIG if service == "logs" else RETRY_CONFIG
                client = self.session.client(service, region_name=region, config=config)
                self._answers(client.meta.endpoint_url)
                client.meta.events.register("before-call", self._count)
                self._clients[key] = client
            return self._clients[key]

    def _answers(self, endpoint_url: str) -> None:
        """An endpoint on this machine is knocked on once, before the first call: a refused
        connection is then said at once, not after botocore's eight tries with back-off
        (about 7 s) that cannot help when no server listens there (a stopped emulator)."""
        if endpoint_url in self._knocked or not on_this_machine(endpoint_url):
            return
        self._knocked.add(endpoint_url)
        parts = urllib.parse.urlsplit(endpoint_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((parts.hostname, port), timeout=2).close()
        except ConnectionRefusedError:
            line = unreachable(endpoint_url, self.unreachable_hint)
            raise RemoteError(line or f"nothing answers at {endpoint_url}") from None
        except OSError:
            pass  # slow or odd: botocore's own tries and words follow

    def _count(self, **_: Any) -> None:
        self.calls += 1

    # --- CloudFormation ---------------------------------------------------------------------

    @_remote
    def describe_stack(self, name: str) -> dict[str, Any]:
        try:
            found = self.client("cloudformation").describe_stacks(StackName=name)
            stack: dict[str, Any] = found["Stacks"][0]
            return stack
        except botocore.exceptions.ClientError as exc:
            if "does not exist" in str(exc):
                raise UsageError(
                    f"stack {name} not found in {self.session.region_name}; deploy the infra "
                    "or pass --stack / set LAUNCHER_STACK"
                ) from None
            raise

    # --- Batch ------------------------------------------------------------------------------

    @_remote
    def find_job_definition(self, name: str) -> str | None:
        found = self.client("batch").describe_job_definitions(
            jobDefinitionName=name, status="ACTIVE"
        )["jobDefinitions"]
        if not found:
            return None
        arn: str = max(found, key=lambda d: d["revision"])["jobDefinitionArn"]
        return arn

    @_remote
    def definition_images(self, arns: Sequence[str]) -> dict[str, str]:
        """The image of each job definition (its first node range's, or its container's),
        by ARN: DescribeJobDefinitions, up to 100 a call (its ``jobDefinitions``' limit)."""
        images: dict[str, str] = {}
        for start in range(0, len(arns), 100):
            found = self.client("batch").describe_job_definitions(
                jobDefinitions=list(arns[start : start + 100])
            )["jobDefinitions"]
            for definition in found:
                ranges = definition.get("nodeProperties", {}).get("nodeRangeProperties") or [{}]
                container = ranges[0].get("container") or definition.get("containerProperties")
                if container and container.get("image"):
                    images[definition["jobDefinitionArn"]] = container["image"]
        return images

    @_remote
    def register_job_definition(self, request: dict[str, Any]) -> str:
        arn: str = self.client("batch").register_job_definition(**request)["jobDefinitionArn"]
        return arn

    @_remote
    def submit_job(self, request: dict[str, Any]) -> str:
        job_id: str = self.client("batch").submit_job(**request)["jobId"]
        return job_id

    @_remote
    def describe_jobs(self, job_ids: list[str]) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self.client("batch").describe_jobs(jobs=job_ids)["jobs"]
        return jobs

    @_remote
    def terminate_job(self, job_id: str, reason: str) -> None:
        self.client("batch").terminate_job(jobId=job_id, reason=reason)

    @_remote
    def terminate_jobs(self, request: dict[str, Any]) -> dict[str, str]:
        """Send one TerminateJobs request (up to BULK_JOBS ids, ``batch.terminate_requests``);
        return the jobs it did not terminate, id -> one line saying why. Where the installed
        botocore or the endpoint lacks the operation, one TerminateJob a job instead (the
        endpoint is remembered: the process asks it no more). RemoteError when the whole call
        fails."""
        client = self.client("batch")
        endpoint = client.meta.endpoint_url
        if hasattr(client, "terminate_jobs") and endpoint not in _WITHOUT_BULK:
            try:
                return _terminate_in_bulk(client, request)
            except botocore.exceptions.ClientError as exc:
                if not unknown_operation(exc):
                    raise
                _WITHOUT_BULK.add(endpoint)
        refused = {}
        for job_id in request["jobs"]:
            try:
                client.terminate_job(jobId=job_id, reason=request["reason"])
            except botocore.exceptions.ClientError as exc:
                refused[job_id] = str(_as_remote(exc))
        return refused

    @_remote
    def list_jobs(self, queue: str, name: str | None = None) -> list[dict[str, Any]]:
        # A filter lists every status in one pass (jobStatus alone lists one status per call);
        # JOB_NAME matches a name exactly unless it ends in "*" (ListJobs, KeyValuesPair).
        match = {"name": "JOB_NAME", "values": [name]} if name else None
        pages = (
            self.client("batch")
            .get_paginator("list_jobs")
            .paginate(
                jobQueue=queue,
                filters=[match or {"name": "AFTER_CREATED_AT", "values": ["0"]}],
                PaginationConfig={"PageSize": 100},
            )
        )
        return [job for page in pages for job in page["jobSummaryList"]]

    @_remote
    def job_queue_snapshot(self, queue: str) -> dict[str, Any]:
        """GetJobQueueSnapshot (botocore 1.34 and later): the first 100 RUNNABLE jobs of the
        queue in dispatch order (``frontOfQueue``) and its utilization."""
        snapshot: dict[str, Any] = self.client("batch").get_job_queue_snapshot(jobQueue=queue)
        return snapshot

    @_remote
    def describe_job_queue(self, queue: str) -> dict[str, Any] | None:
        found = self.client("batch").describe_job_queues(jobQueues=[queue])["jobQueues"]
        return found[0] if found else None

    @_remote
    def describe_compute_environments(self, names: list[str]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.client("batch").describe_compute_environments(
            computeEnvironments=names
        )["computeEnvironments"]
        return found

    @_remote
    def describe_ecs_clusters(self, arns: list[str]) -> list[dict[str, Any]]:
        """The ECS clusters of compute environments: their registered container instances
        are the environments' running instances (Batch's own API does not count them)."""
        found: list[dict[str, Any]] = self.client("ecs").describe_clusters(clusters=arns)[
            "clusters"
        ]
        return found

    @_remote
    def describe_tasks(self, cluster: str, tasks: list[str]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.client("ecs").describe_tasks(
            cluster=cluster, tasks=tasks
        )["tasks"]
        return found

    @_remote
    def execute_command(self, request: dict[str, Any]) -> dict[str, Any]:
        """ECS ExecuteCommand (``launcher.aws.node_shell``): a Session Manager session into a
        task's container, handed to the session-manager-plugin."""
        response: dict[str, Any] = self.client("ecs").execute_command(**request)
        return response

    # --- ECR --------------------------------------------------------------------------------

    @_remote
    def ecr_authorization(self, registry_id: str, region: str) -> tuple[str, str]:
        """Basic credentials for an ECR registry (what `docker login` would have stored)."""
        data = self.client("ecr", region).get_authorization_token(registryIds=[registry_id])
        token = data["authorizationData"][0]["authorizationToken"]
        user, _, password = base64.b64decode(token).decode().partition(":")
        return user, password

    @_remote
    def has_image(self, repository: str, digest: str, registry_id: str, region: str) -> bool:
        """Whether an ECR repository holds the image ``digest`` (DescribeImages, which, unlike
        a pull, never fetches through a pull-through cache rule)."""
        client = self.client("ecr", region)
        try:
            client.describe_images(
                registryId=registry_id,
                repositoryName=repository,
                imageIds=[{"imageDigest": digest}],
            )
        except (
            client.exceptions.RepositoryNotFoundException,
            client.exceptions.ImageNotFoundException,
        ):
            return False
        return True

    # --- EC2 ----------------------------------------------------------------------------------

    @_remote
    def security_group_rules(self, group_id: str) -> list[dict[str, Any]]:
        """Every rule of one security group (DescribeSecurityGroupRules, all pages)."""
        pages = (
            self.client("ec2")
            .get_paginator("describe_security_group_rules")
            .paginate(Filters=[{"Name": "group-id", "Values": [group_id]}])
        )
        return [rule for page in pages for rule in page["SecurityGroupRules"]]

    def capacity_reservation(self, reservation_id: str) -> dict[str, Any]:
        """One Capacity Reservation (a Capacity Block is one: DescribeCapacityReservations)."""
        return self.capacity_reservations([reservation_id])[0]

    @_remote
    def capacity_reservations(self, ids: list[str]) -> list[dict[str, Any]]:
        """Several Capacity Reservations and Blocks at once (DescribeCapacityReservations)."""
        found: list[dict[str, Any]] = self.client("ec2").describe_capacity_reservations(
            CapacityReservationIds=ids
        )["CapacityReservations"]
        return found

    @_remote
    def launch_template_version(self, template_id: str, version: str) -> dict[str, Any]:
        """One version's LaunchTemplateData (DescribeLaunchTemplateVersions)."""
        found = self.client("ec2").describe_launch_template_versions(
            LaunchTemplateId=template_id, Versions=[version]
        )["LaunchTemplateVersions"]
        data: dict[str, Any] = found[0]["LaunchTemplateData"] if found else {}
        return data

    @_remote
    def subnets(self, ids: list[str]) -> list[dict[str, Any]]:
        """DescribeSubnets: each one's AvailabilityZone and AvailableIpAddressCount."""
        found: list[dict[str, Any]] = self.client("ec2").describe_subnets(SubnetIds=ids)["Subnets"]
        return found

    @_remote
    def type_offerings(self, types: list[str]) -> set[tuple[str, str]]:
        """(instance type, zone) pairs the Region offers (DescribeInstanceTypeOfferings by
        availability zone, every page)."""
        pages = (
            self.client("ec2")
            .get_paginator("describe_instance_type_offerings")
            .paginate(
                LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": types}],
            )
        )
        return {
            (o["InstanceType"], o["Location"])
            for page in pages
            for o in page["InstanceTypeOfferings"]
        }

    @_remote
    def group_instances(self, groups: list[str]) -> list[dict[str, Any]]:
        """Running and pending instances of these Auto Scaling groups (DescribeInstances by the
        tag Auto Scaling puts on each instance it launches, every page)."""
        filters = [
            {"Name": f"tag:{GROUP_TAG}", "Values": groups},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
        pages = self.client("ec2").get_paginator("describe_instances").paginate(Filters=filters)
        return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]

    @_remote
    def console_output(self, instance_id: str) -> str:
        """An instance's serial console as EC2 last captured it (GetConsoleOutput, latest)."""
        found = self.client("ec2").get_console_output(InstanceId=instance_id, Latest=True)
        return str(found.get("Output") or "")

    # --- Service Quotas, SSM, Auto Scaling ----------------------------------------------------

    @_remote
    def ec2_quota(self, code: str) -> float:
        """An EC2 quota's value for this account: the applied one (GetServiceQuota), or AWS's
        default where none was ever applied (NoSuchResourceException, then
        GetAWSDefaultServiceQuota)."""
        client = self.client("service-quotas")
        try:
            found = client.get_service_quota(ServiceCode="ec2", QuotaCode=code)
        except client.exceptions.NoSuchResourceException:
            found = client.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)
        return float(found["Quota"]["Value"])

    @_remote
    def missing_parameters(self, names: list[str]) -> list[str]:
        """Which of these SSM parameters (public ones too) do not exist (GetParameters, 10 a
        call: its limit)."""
        missing: list[str] = []
        for start in range(0, len(names), 10):
            found = self.client("ssm").get_parameters(Names=names[start : start + 10])
            missing += found.get("InvalidParameters", [])
        return missing

    @_remote
    def scaling_groups(self, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Auto Scaling groups that match ``filters`` (DescribeAutoScalingGroups, every page)."""
        pages = (
            self.client("autoscaling")
            .get_paginator("describe_auto_scaling_groups")
            .paginate(Filters=filters)
        )
        return [g for page in pages for g in page["AutoScalingGroups"]]

    @_remote
    def scaling_activities(self, group: str) -> list[dict[str, Any]]:
        """The group's latest scaling activities, newest first (DescribeScalingActivities,
        one page of 20)."""
        found: list[dict[str, Any]] = self.client("autoscaling").describe_scaling_activities(
            AutoScalingGroupName=group, MaxRecords=20
        )["Activities"]
        return found

    # --- S3: the payloads of Python functions ---------------------------------------------

    @_remote
    def put_object(self, bucket: str, key: str, body: bytes) -> None:
        """One object, in one PutObject (up to 5 GB); the bucket's default encryption applies."""
        self.client("s3").put_object(Bucket=bucket, Key=key, Body=body)

    @_remote
    def get_object(self, bucket: str, key: str) -> bytes | None:
        """An object's bytes; None when there is none (NoSuchKey, or AccessDenied for a key
        that does not exist when the caller may not list the bucket: S3 answers 403 then)."""
        client = self.client("s3")
        try:
            return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        except client.exceptions.NoSuchKey:
            return None
        except botocore.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("AccessDenied", "403"):
                return None
            raise

    @_remote
    def delete_objects(self, bucket: str, keys: list[str]) -> None:
        """These objects, 1,000 to a DeleteObjects call (its most); a key that is gone is
        no error."""
        client = self.client("s3")
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            client.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
            )

    # --- CloudWatch Logs --------------------------------------------------------------------

    @_remote
    def filter_log_events(
        self, group: str, streams: list[str], start_ms: int | None, token: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of events of up to 100 streams (FilterLogEvents' own limit); ``Throttled``
        when AWS asks to slow down or cannot answer now (the caller paces and tries again)."""
        kwargs: dict[str, Any] = {"logGroupName": group, "logStreamNames": streams}
        if start_ms is not None:
            kwargs["startTime"] = start_ms
        if token:
            kwargs["nextToken"] = token
        try:
            page = self.client("logs").filter_log_events(**kwargs)
        except botocore.exceptions.ClientError as exc:
            if _code(exc) == "ResourceNotFoundException":
                return [], None  # streams appear once the containers write
            if try_later(exc):
                quota = (
                    " (FilterLogEvents: 5 calls a second for the whole account and region, "
                    "shared by everyone in it)"
                )
                raise Throttled(
                    f"{_as_remote(exc)}{quota if _code(exc) in THROTTLING_CODES else ''}"
                ) from exc
            raise
        except (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError) as exc:
            raise Throttled(f"AWS FilterLogEvents failed: {exc}") from exc
        return page.get("events", []), page.get("nextToken")
