"""Where moto (5.2.x) differs from AWS, and the smallest change that lets the real templates
deploy and the launcher see what AWS would show: every workaround for moto lives here, one
function (or one block) and one ``# Gap:`` comment per gap. It stays one file, however long:
every gap in one place, so a moto upgrade is checked against one file.

- ``adapt`` rewrites a copy of a synthesized template (the real templates are never changed
  for moto), ``prepare_account`` and ``default_security_groups`` fill the account around it;
- ``batch_without_docker`` (through the server's config API) and ``patch_moto_models``
  (in-process) fix the server's behaviour;
- ``start_job``, ``run_job``, ``run_container_job``, ``block_job`` and friends play the part
  of a real cluster for the jobs moto holds.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import requests

if TYPE_CHECKING:
    from moto.batch.models import Job

Template = dict[str, Any]
# Job id -> the nodeOverrides it was submitted with (see the SubmitJob gap below).
_NODE_OVERRIDES: dict[str, dict[str, Any] | None] = {}
# Job id -> the shareIdentifier it was submitted with (see the SubmitJob gap below).
_SHARES: dict[str, str] = {}


def _resources(t: Template, type_: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical_id, res in t.get("Resources", {}).items():
        if res.get("Type") == type_:
            yield logical_id, res


def _rewrite(t: Template, replace: Callable[[dict[str, Any]], Any]) -> None:
    """Replace every dict node for which ``replace`` returns something other than None."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            new = replace(node)
            if new is not None:
                return new
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    t.update(walk(t))


def ecr_generated_name(t: Template) -> None:
    # Gap: moto validates the CFN-generated repository name, which has upper case, and fails.
    for logical_id, res in _resources(t, "AWS::ECR::Repository"):
        res.setdefault("Properties", {}).setdefault("RepositoryName", logical_id.lower())


def _replace_get_att(t: Template, type_: str, attr: str, sub: str) -> None:
    ids = {logical_id for logical_id, _ in _resources(t, type_)}

    def replace(node: dict[str, Any]) -> Any:
        ga = node.get("Fn::GetAtt")
        if len(node) == 1 and isinstance(ga, list) and ga[0] in ids and ga[1] == attr:
            return {"Fn::Sub": sub.replace("{id}", ga[0])}
        return None

    _rewrite(t, replace)


def efs_arn(t: Template) -> None:
    # Gap: GetAtt Arn on AWS::EFS::FileSystem raises inside moto; build the ARN from the Ref.
    _replace_get_att(
        t,
        "AWS::EFS::FileSystem",
        "Arn",
        "arn:${AWS::Partition}:elasticfilesystem:${AWS::Region}:${AWS::AccountId}:file-system/${{id}}",
    )


BATCH_SERVICE_LINKED_ROLE = (
    "arn:aws:iam::{account}:role/aws-service-role/batch.amazonaws.com/AWSServiceRoleForBatch"
)


def batch_service_role(t: Template) -> None:
    # Gap: moto requires ServiceRole (AWS falls back to the service-linked role when absent).
    for _, res in _resources(t, "AWS::Batch::ComputeEnvironment"):
        res["Properties"].setdefault(
            "ServiceRole",
            {"Fn::Sub": BATCH_SERVICE_LINKED_ROLE.replace("{account}", "${AWS::AccountId}")},
        )


def batch_security_groups(t: Template) -> None:
    # Gap: moto requires SecurityGroupIds on the compute environment; AWS takes them from the
    # launch template's network interfaces (and rejects both at once). Copy them across.
    # A Fargate compute environment names its groups itself (and takes no launch template).
    templates = dict(_resources(t, "AWS::EC2::LaunchTemplate"))
    for _, res in _resources(t, "AWS::Batch::ComputeEnvironment"):
        cr = res["Properties"]["ComputeResources"]
        if "LaunchTemplate" not in cr:
            continue
        lt = templates[cr["LaunchTemplate"]["LaunchTemplateId"]["Ref"]]
        data = lt["Properties"]["LaunchTemplateData"]
        groups = data.get("SecurityGroupIds") or data["NetworkInterfaces"][0]["Groups"]
        cr.setdefault("SecurityGroupIds", groups)


def kms_key_tags(t: Template) -> None:
    # Gap: moto's AWS::KMS::Key reads CloudFormation's Key/Value tags as KMS's TagKey/TagValue
    # and fails with KeyError; give it the names it expects.
    for _, res in _resources(t, "AWS::KMS::Key"):
        tags = res.get("Properties", {}).get("Tags", [])
        res["Properties"]["Tags"] = [{"TagKey": x["Key"], "TagValue": x["Value"]} for x in tags]


def batch_job_queue_time_limits(t: Template) -> None:
    # Gap: moto knows no JobStateTimeLimitActions (neither its AWS::Batch::JobQueue nor its
    # CreateJobQueue reads them); drop them so the copy says what moto really deploys.
    for _, res in _resources(t, "AWS::Batch::JobQueue"):
        res.get("Properties", {}).pop("JobStateTimeLimitActions", None)


def ecr_registry_settings(t: Template) -> None:
    # Gap: moto's CloudFormation has no AWS::ECR::PullThroughCacheRule or
    # AWS::ECR::RepositoryCreationTemplate (it skips them with a warning); nothing else in the
    # templates refers to them. Drop them so the copy says what moto really deploys; the real
    # templates keep them and the rules in tests/rules/copy_rules.py check them instead.
    for type_ in ("AWS::ECR::PullThroughCacheRule", "AWS::ECR::RepositoryCreationTemplate"):
        for logical_id, _ in list(_resources(t, type_)):
            del t["Resources"][logical_id]


def fsx_data_repository_associations(t: Template) -> None:
    # Gap: moto has no data repository associations at all (neither an API nor a CloudFormation
    # type; it skips AWS::FSx::DataRepositoryAssociation with a warning) and nothing refers to
    # one. Drop them so the copy says what moto really deploys; the real templates keep them
    # and tests/rules/data_rules.py checks them instead.
    for logical_id, _ in list(_resources(t, "AWS::FSx::DataRepositoryAssociation")):
        del t["Resources"][logical_id]


GAPS: tuple[Callable[[Template], None], ...] = (
    ecr_generated_name,
    ecr_registry_settings,
    fsx_data_repository_associations,
    kms_key_tags,
    efs_arn,
    batch_service_role,
    batch_security_groups,
    batch_job_queue_time_limits,
)


def adapt(template: Template, batch_client: Any = None) -> Template:
    t = copy.deepcopy(template)
    for gap in GAPS:
        gap(t)
    if batch_client is not None:
        scheduling_policies(t, batch_client)
    deployed_template(t, template)
    return t


# Where the adapted copy carries the template it was made from (see deployed_template).
DEPLOYED_TEMPLATE = "efa-batch:deployed-template"


def deployed_template(t: Template, original: Template) -> None:
    # Gap: moto's GetTemplate answers with the body moto was given, here the copy adapted for
    # its other gaps; CloudFormation answers with the template that was deployed, which
    # `python -m infra.predeploy` plans against. The copy carries the original in its
    # Metadata (moto ignores Metadata) and get_template_as_deployed answers with it.
    t.setdefault("Metadata", {})[DEPLOYED_TEMPLATE] = json.dumps(original)


def get_template_as_deployed() -> None:
    from moto.cloudformation.models import CloudFormationBackend

    answer = CloudFormationBackend.get_template

    def get_template(self: CloudFormationBackend, name_or_stack_id: str) -> Any:
        body = answer(self, name_or_stack_id)
        try:
            parsed = json.loads(body) if isinstance(body, str) else body
        except ValueError:
            return body
        original = (parsed.get("Metadata") or {}).get(DEPLOYED_TEMPLATE)
        return original if original is not None else body

    CloudFormationBackend.get_template = get_template  # type: ignore[method-assign]


def scheduling_policies(t: Template, batch_client: Any) -> None:
    # Gap: moto's CloudFormation skips AWS::Batch::SchedulingPolicy (its API has it): create it
    # through the API and put its ARN where the template says Ref.
    arns = {}
    for logical_id, res in list(_resources(t, "AWS::Batch::SchedulingPolicy")):
        props = res.get("Properties", {})
        fairshare = props.get("FairsharePolicy", {})
        arns[logical_id] = batch_client.create_scheduling_policy(
            name=props.get("Name", logical_id),
            fairsharePolicy=_api_case(fairshare),
        )["arn"]
        del t["Resources"][logical_id]

    _rewrite(t, lambda node: arns.get(node["Ref"]) if len(node) == 1 and "Ref" in node else None)


def _api_case(value: Any) -> Any:
    """CloudFormation's PascalCase keys as the Batch API's camelCase, at every depth."""
    if isinstance(value, dict):
        return {k[0].lower() + k[1:]: _api_case(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_api_case(v) for v in value]
    return value


_FSX_FILE_SYSTEM_MODEL: list[type] = []


def fsx_file_systems() -> None:
    # Gap: moto's FSx API creates file systems, but its CloudFormation has no
    # AWS::FSx::FileSystem: it skips the resource, and the nodes' user data (GetAtt DNSName and
    # LustreMountName, through the storage stack's exports) then fails the stack. Give its
    # CloudFormation the type, creating the file system in moto's FSx backend with the subnets
    # and groups CloudFormation resolved. moto's file systems have no mount name; FSx gives
    # SCRATCH_2 and PERSISTENT_2 file systems a unique one of eight lower-case characters
    # (DescribeFileSystems, LustreFileSystemConfiguration.MountName), made here from the id.
    if _FSX_FILE_SYSTEM_MODEL:
        return
    from moto.cloudformation import parsing
    from moto.cloudformation.exceptions import UnformattedGetAttTemplateException
    from moto.core.common_models import CloudFormationModel
    from moto.fsx.models import fsx_backends

    class LustreFileSystem(CloudFormationModel):
        ATTRIBUTES = ("DNSName", "LustreMountName", "ResourceARN", "Id")

        def __init__(self, file_system: Any) -> None:
            self.file_system = file_system
            self.mount_name = file_system.file_system_id.removeprefix("fs-")[:8]

        @staticmethod
        def cloudformation_name_type() -> str:
            return ""

        @staticmethod
        def cloudformation_type() -> str:
            return "AWS::FSx::FileSystem"

        @classmethod
        def has_cfn_attr(cls, attr: str) -> bool:
            return attr in cls.ATTRIBUTES

        @classmethod
        def create_from_cloudformation_json(
            cls,
            resource_name: str,
            cloudformation_json: dict[str, Any],
            account_id: str,
            region_name: str,
            **kwargs: Any,
        ) -> LustreFileSystem:
            props = cloudformation_json["Properties"]
            file_system = fsx_backends[account_id][region_name].create_file_system(
                client_request_token=resource_name,
                file_system_type=props["FileSystemType"],
                storage_capacity=props.get("StorageCapacity"),
                storage_type=props.get("StorageType"),
                subnet_ids=props.get("SubnetIds", []),
                security_group_ids=props.get("SecurityGroupIds", []),
                tags=props.get("Tags"),
                kms_key_id=props.get("KmsKeyId"),
                windows_configuration=None,
                lustre_configuration=props.get("LustreConfiguration"),
                ontap_configuration=None,
                file_system_type_version=props.get("FileSystemTypeVersion"),
                open_zfs_configuration=None,
            )
            return cls(file_system)

        @property
        def physical_resource_id(self) -> str:
            return str(self.file_system.file_system_id)

        def get_cfn_attribute(self, attribute_name: str) -> str:
            values = {
                "DNSName": self.file_system.dns_name,
                "LustreMountName": self.mount_name,
                "ResourceARN": self.file_system.resource_arn,
                "Id": self.file_system.file_system_id,
            }
            if attribute_name not in values:
                raise UnformattedGetAttTemplateException()
            return str(values[attribute_name])

    _FSX_FILE_SYSTEM_MODEL.append(LustreFileSystem)
    # moto caches its list of CloudFormation types on first use.
    for cached in (parsing.get_model_list, parsing.get_model_map, parsing.get_name_type_map):
        cached.cache_clear()


def iam_role_managed_policies() -> None:
    # Gap: moto's AWS::IAM::Role ignores ManagedPolicyArns (it puts the inline Policies only),
    # so a deployed role carries none of the managed policies its template attaches. Attach
    # them once the role exists, as IAM does: an account's own policy must already exist (the
    # deploy fails otherwise, as in AWS); an AWS managed policy comes from the copy of AWS's
    # policies moto ships, loaded when first attached (moto loads none of them by default).
    from moto.iam import models
    from moto.utilities.utils import get_partition

    original: Any = models.Role.__dict__["create_from_cloudformation_json"].__func__
    if getattr(original, "attaches_managed_policies", False):
        return

    def create(
        cls: Any,
        /,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        role = original(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
        backend = models.iam_backends[account_id][get_partition(region_name)]
        for arn in cloudformation_json["Properties"].get("ManagedPolicyArns", []):
            name = arn.rsplit("/", 1)[1]
            if ":iam::aws:policy/" in arn and arn not in backend.managed_policies:
                data = _aws_managed_policies().get(name)
                if data is not None:
                    policy = models.AWSManagedPolicy.from_data(name, account_id, region_name, data)
                    backend.managed_policies[policy.arn] = policy
            backend.attach_role_policy(arn, role.name)
        return role

    create.attaches_managed_policies = True  # type: ignore[attr-defined]
    models.Role.create_from_cloudformation_json = classmethod(create)  # type: ignore[method-assign,assignment]


@functools.cache
def _aws_managed_policies() -> dict[str, Any]:
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    policies: dict[str, Any] = json.loads(aws_managed_policies_data)
    return policies


def batch_without_docker(url: str) -> None:
    # Gap: moto's own Batch runner starts a job's containers on Docker's bridge network, off
    # 127.0.0.1; without it jobs only move through their states (held: see SubmitJob below).
    requests.post(f"{url}/moto-api/config", json={"batch": {"use_docker": False}}, timeout=10)


# Each bulk call of botocore 1.44's batch model that moto lacks, and the single call it bulks.
_BULK_JOB_CALLS = {"terminatejobs": "terminate_job", "canceljobs": "cancel_job"}
BULK_JOB_LIMIT = 50  # "up to 50" job ids a call (botocore TerminateJobs/CancelJobs.jobs)


def batch_bulk_job_calls() -> None:
    # Gap: moto 5.2.5 has no TerminateJobs or CancelJobs (botocore 1.44: POST /v1/terminatejobs
    # and /v1/canceljobs); its server answers 404. Serve them job by job with moto's own
    # TerminateJob and CancelJob, as the model documents the bulk calls: "up to 50" ids; "Batch
    # reports the result for each job individually", in `successful` or in `errors` (``job``,
    # ``code``, ``message``), with HTTP 200 "even when some jobs encountered errors"; "Jobs
    # that can't be found are treated as successfully processed" (moto's single calls pass
    # over unknown ids, so they land in `successful`). CancelJobs leaves started jobs as they
    # are, as moto's CancelJob does, and counts them successful, as CancelJob "still succeeds"
    # for them (the model says no more). The model gives no error for more than 50 ids; they
    # are refused here as a whole (ClientException, Batch's error for bad input) so that a
    # caller that sends more fails its tests. Servers whose Batch routes are made inside
    # ``batch_as_shipped`` lack the two calls, as moto ships (the fallback's tests).
    from moto.batch import urls
    from moto.batch.responses import BatchResponse

    for action, single in _BULK_JOB_CALLS.items():
        urls.url_paths[f"{{0}}/v1/{action}$"] = BatchResponse.dispatch
        setattr(BatchResponse, action, _bulk_job_call(single))


def _bulk_job_call(single: str) -> Callable[[Any], str]:
    from moto.batch.exceptions import ClientException

    def bulk(self: Any) -> str:  # a moto BatchResponse
        jobs: list[str] = self._get_param("jobs") or []
        if len(jobs) > BULK_JOB_LIMIT:
            raise ClientException(f"jobs: up to {BULK_JOB_LIMIT} job IDs, not {len(jobs)}")
        reason = self._get_param("reason")
        successful, errors = [], []
        for job_id in jobs:
            try:
                getattr(self.batch_backend, single)(job_id, reason)
            except ClientException as exc:  # moto's refusal of this one job
                errors.append({"job": job_id, "code": exc.error_type, "message": exc.message})
            else:
                successful.append(job_id)
        return json.dumps({"successful": successful, "errors": errors})

    return bulk


FRONT_OF_QUEUE = 100  # "the first 100 RUNNABLE jobs" (botocore FrontOfQueueDetail.jobs)


def batch_job_queue_snapshot() -> None:
    # Gap: moto 5.2.5 has no GetJobQueueSnapshot (botocore 1.34+: POST /v1/getjobqueuesnapshot);
    # its server answers 404. Answer it as the model documents it for a FIFO queue (no
    # scheduling policy, as the emulated stack's): ``frontOfQueue.jobs`` lists "the first 100
    # RUNNABLE jobs" in dispatch order, "based on their submission time", each with its
    # ``jobArn`` and ``earliestTimeAtPosition`` (here its submission, in milliseconds), and
    # ``lastUpdatedAt``; an unknown queue is Batch's ClientException. Utilization is left out
    # (moto's jobs hold no capacity).
    import time

    from moto.batch import urls
    from moto.batch.exceptions import ClientException
    from moto.batch.models import datetime2int_milliseconds
    from moto.batch.responses import BatchResponse

    def snapshot(self: Any) -> str:  # a moto BatchResponse
        queue = self.batch_backend.get_job_queue(self._get_param("jobQueue") or "")
        if queue is None:
            raise ClientException("jobQueue: no such job queue")
        runnable = sorted(
            (j for j in queue.jobs if j.status == "RUNNABLE"), key=lambda j: j.job_created_at
        )[:FRONT_OF_QUEUE]
        jobs = [
            {"jobArn": j.arn, "earliestTimeAtPosition": datetime2int_milliseconds(j.job_created_at)}
            for j in runnable
        ]
        now = int(time.time() * 1000)
        return json.dumps({"frontOfQueue": {"jobs": jobs, "lastUpdatedAt": now}})

    urls.url_paths["{0}/v1/getjobqueuesnapshot$"] = BatchResponse.dispatch
    BatchResponse.getjobqueuesnapshot = snapshot  # type: ignore[attr-defined]


@contextlib.contextmanager
def batch_as_shipped() -> Iterator[None]:
    """moto's Batch routes without the bulk calls while the block runs: a server that makes
    its Batch routes inside it (moto makes a service's routes at its first request for that
    service) answers them with moto's own 404, over the same emulated account."""
    from moto.batch import urls

    paths = [f"{{0}}/v1/{action}$" for action in _BULK_JOB_CALLS]
    added = {path: urls.url_paths.pop(path) for path in paths if path in urls.url_paths}
    try:
        yield
    finally:
        urls.url_paths.update(added)


def patch_moto_models() -> None:
    """Fix moto model gaps in-process (ThreadedMotoServer runs in this interpreter); mypy is
    told each assignment is a patch of moto's classes (method-assign)."""
    from moto.batch.models import BatchBackend, Job
    from moto.batch.responses import BatchResponse
    from moto.batch_simple.models import BatchSimpleBackend
    from moto.efs.models import AccessPoint

    # Gap: Ref on AWS::EFS::AccessPoint yields the model object's repr instead of its id.
    AccessPoint.physical_resource_id = property(lambda self: self.access_point_id)  # type: ignore[attr-defined]

    fsx_file_systems()
    iam_role_managed_policies()
    get_template_as_deployed()
    batch_bulk_job_calls()
    batch_job_queue_snapshot()
    event_pattern_arrays()
    events_test_event_pattern()
    ec2_capacity_reservations()
    ec2_service_quotas()
    ecs_al2023_parameters()
    autoscaling_activities()
    ec2_console_output()
    batch_environment_status()
    ec2_withdrawn_offerings()
    batch_tag_resource_limits()
    ec2_instance_lifecycle()

    # Gap: moto's Docker-less Batch finishes every job inside SubmitJob; a real queue that
    # scales from zero holds it RUNNABLE. Jobs wait here until the caller runs them (run_job).
    def hold(self: BatchSimpleBackend, include_start_attempt: bool, job: Job) -> None:
        self.backend._jobs[job.job_id] = job
        job.status = "RUNNABLE"

    BatchSimpleBackend._mark_job_as_finished = hold  # type: ignore[method-assign]

    # Gap: moto's TerminateJob only flags a job thread that Docker-less Batch never starts;
    # Batch fails the job with the given reason.
    def terminate(self: Job, reason: str) -> None:
        if not self.job_stopped:
            self.job_stopped_reason = reason
            self._mark_stopped(success=False)

    Job.terminate = terminate  # type: ignore[method-assign]

    # Gap: moto knows no node-level job ids (JOB_ID#N) of multi-node jobs; Batch answers them
    # with the node's own record (its own ARN, JOB_ARN#N), whose container names its log stream.
    original_describe = BatchBackend.describe_jobs

    def describe_jobs(self: BatchBackend, jobs: list[str] | None) -> list[dict[str, Any]]:
        plain = [j for j in jobs or [] if "#" not in j]
        found = original_describe(self, plain) if plain or not jobs else []
        for node_id in (j for j in jobs or [] if "#" in j):
            parent_id, index = node_id.split("#", 1)
            parent = self._jobs.get(parent_id)
            if parent is not None:
                found.append(_node_record(parent, int(index)))
        for record in found:
            share = _SHARES.get(str(record.get("jobId", "")).split("#")[0])
            if share is not None:
                record["shareIdentifier"] = share
        return found

    BatchBackend.describe_jobs = describe_jobs  # type: ignore[method-assign]

    # Gap: moto's DescribeJobs gives a single-container job's container without its
    # logConfiguration, image and resourceRequirements; Batch's ContainerDetail carries them
    # (the launcher finds the job's log group there, torchx describe the role's image and
    # resources).
    original_details = Job._container_details

    def container_details(self: Job) -> dict[str, Any]:
        details = original_details(self)
        container = _single_container(self)
        for key in ("logConfiguration", "image", "resourceRequirements"):
            if container.get(key) is not None:
                details[key] = container[key]
        return details

    Job._container_details = container_details  # type: ignore[method-assign]

    # Gap: moto's ListJobs ignores maxResults/nextToken and returns everything in one page;
    # Batch pages (100 by default), which is what the launcher's call count depends on. Its
    # summaries also lack a multi-node job's nodeProperties (JobSummary.nodeProperties:
    # numNodes), where `launcher list` reads the NODES column.
    def listjobs(self: BatchResponse) -> str:
        jobs = self.batch_backend.list_jobs(
            job_queue_name=self._get_param("jobQueue"),
            array_job_id=self._get_param("arrayJobId"),
            job_status=self._get_param("jobStatus"),
            filters=self._get_param("filters"),
        )
        start = int(self._get_param("nextToken") or 0)
        size = int(self._get_param("maxResults") or 100)
        page: dict[str, Any] = {"jobSummaryList": [_summary(j) for j in jobs[start : start + size]]}
        if start + size < len(jobs):
            page["nextToken"] = str(start + size)
        return json.dumps(page)

    BatchResponse.listjobs = listjobs  # type: ignore[method-assign]

    # Gap: moto's SubmitJob drops nodeOverrides (Batch applies them to the nodes' containers);
    # keep what was sent on the job, so tests can see what a node would have got. It drops
    # shareIdentifier too, which Batch's DescribeJobs (JobDetail) and ListJobs (JobSummary)
    # give back: kept here and answered by both.
    original_submit = BatchResponse.submitjob

    def submitjob(self: BatchResponse) -> str:
        body = original_submit(self)
        job_id = json.loads(body)["jobId"]
        _NODE_OVERRIDES[job_id] = self._get_param("nodeOverrides")
        if self._get_param("shareIdentifier"):
            _SHARES[job_id] = self._get_param("shareIdentifier")
        return body

    BatchResponse.submitjob = submitjob  # type: ignore[method-assign]


# Reservation id -> its DescribeCapacityReservations entry (see ec2_capacity_reservations).
_CAPACITY_BLOCKS: dict[str, dict[str, Any]] = {}


def capacity_block(
    reservation_id: str, start: float, end: float, state: str = "active", instances: int = 16
) -> None:
    """Play EC2's part: the account holds a Capacity Block of ``instances`` p5.48xlarge with
    this window (seconds since the epoch), as DescribeCapacityReservations shows it."""
    import datetime

    def moment(epoch: float) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)

    _CAPACITY_BLOCKS[reservation_id] = {
        "CapacityReservationId": reservation_id,
        "InstanceType": "p5.48xlarge",
        "StartDate": moment(start),
        "EndDate": moment(end),
        "EndDateType": "limited",
        "State": state,
        "ReservationType": "capacity-block",
        "TotalInstanceCount": instances,
        "AvailableInstanceCount": instances,
    }


def ec2_capacity_reservations() -> None:
    # Gap: moto 5.2.5 has no Capacity Reservations at all: DescribeCapacityReservations is not
    # an action of its EC2, and a Capacity Block is bought (PurchaseCapacityBlock), not
    # created, so no call could make one. Answer it from the blocks ``capacity_block`` declares,
    # with the members botocore's model gives CapacityReservation (StartDate, EndDate, State,
    # ReservationType "capacity-block"); an id not declared is refused as EC2 refuses an
    # unknown reservation (InvalidCapacityReservationId.NotFound).
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses import EC2Response

    def describe(self: Any) -> ActionResult:  # a moto EC2Response
        ids = self._get_param("CapacityReservationIds", []) or list(_CAPACITY_BLOCKS)
        unknown = [i for i in ids if i not in _CAPACITY_BLOCKS]
        if unknown:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{unknown[0]}' does not exist",
            )
        return ActionResult({"CapacityReservations": [_CAPACITY_BLOCKS[i] for i in ids]})

    EC2Response.describe_capacity_reservations = describe  # type: ignore[attr-defined]


# EC2 quota code -> its value in vCPUs, as the emulated account has it (see ec2_service_quotas).
_EC2_QUOTAS: dict[str, float] = {}
# What an EC2 quota is where a test set none: an account whose quotas were raised for the
# stacks it runs, so a healthy emulated stack passes the preflight.
RAISED_EC2_QUOTA = 100_000.0


def ec2_quota(code: str, vcpus: float | None) -> None:
    """Play Service Quotas' part: the account's EC2 quota ``code`` is ``vcpus`` (None: back to
    RAISED_EC2_QUOTA)."""
    if vcpus is None:
        _EC2_QUOTAS.pop(code, None)
    else:
        _EC2_QUOTAS[code] = vcpus


def ec2_service_quotas() -> None:
    # Gap: moto 5.2.5's Service Quotas knows the vpc service only: GetServiceQuota raises
    # NoSuchResourceException for every EC2 quota code, and GetAWSDefaultServiceQuota is not
    # an action of it. Answer EC2's codes from ``ec2_quota`` (RAISED_EC2_QUOTA where none was
    # set), in the Quota shape botocore's model gives (ServiceCode, QuotaCode, Value, Unit).
    from moto.servicequotas.models import ServiceQuotasBackend
    from moto.servicequotas.responses import ServiceQuotasResponse

    original = ServiceQuotasBackend.get_service_quota

    def get_service_quota(
        self: ServiceQuotasBackend, service_code: str, quota_code: str
    ) -> dict[str, Any]:
        if service_code != "ec2":
            return original(self, service_code, quota_code)
        return {
            "ServiceCode": "ec2",
            "QuotaCode": quota_code,
            "Value": _EC2_QUOTAS.get(quota_code, RAISED_EC2_QUOTA),
            "Unit": "None",
            "Adjustable": True,
        }

    ServiceQuotasBackend.get_service_quota = get_service_quota  # type: ignore[method-assign]

    def get_aws_default_service_quota(self: ServiceQuotasResponse) -> str:
        return self.get_service_quota()

    ServiceQuotasResponse.get_aws_default_service_quota = get_aws_default_service_quota  # type: ignore[attr-defined]


# Regions whose Amazon Linux 2023 ECS AMIs a test withdrew (see ecs_al2023_parameters).
_WITHOUT_AL2023: set[str] = set()
AL2023_PARAMETERS = (
    "/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id",
    "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id",
)


def without_al2023(region: str, withdrawn: bool = True) -> None:
    """Play a Region that does not publish the Amazon Linux 2023 ECS AMIs."""
    (_WITHOUT_AL2023.add if withdrawn else _WITHOUT_AL2023.discard)(region)


def ecs_al2023_parameters() -> None:
    # Gap: moto 5.2.5's copy of the ECS-optimized AMI parameters (ssm/resources/ecs) has
    # Amazon Linux 2 and older only; AWS publishes the AL2023 ones that Batch's ECS_AL2023 and
    # ECS_AL2023_NVIDIA image types launch (ECS developer guide, ecs-optimized_AMI.html).
    # Answer them, with an image id moto's EC2 does not need to know, in every Region but the
    # ones ``without_al2023`` withdrew.
    import datetime

    from moto.ssm.models import Parameter, ParameterDict

    original = ParameterDict._check_loading_status

    def check_loading_status(self: ParameterDict, key: str) -> None:
        original(self, key)
        wanted = str(key or "")
        for name in AL2023_PARAMETERS:
            if not name.startswith(wanted):
                continue
            present = dict.__contains__(self, name) and dict.__getitem__(self, name)
            if self.region_name in _WITHOUT_AL2023:
                if present:
                    dict.__delitem__(self, name)
            elif not present:
                dict.__getitem__(self, name).append(
                    Parameter(  # type: ignore[abstract]
                        account_id=self.account_id,
                        name=name,
                        value="ami-0a2023ec5000000" + ("1" if "gpu" in name else "0"),
                        parameter_type="String",
                        description=None,
                        allowed_pattern=None,
                        keyid=None,
                        last_modified_date=datetime.datetime(2026, 1, 1),
                        version=1,
                        data_type="text",
                    )
                )

    ParameterDict._check_loading_status = check_loading_status  # type: ignore[method-assign]


# Auto Scaling group -> its scaling activities, newest first (see failed_launch).
_ACTIVITIES: dict[str, list[dict[str, Any]]] = {}
# Instance id -> what its serial console last showed (see console_says).
_CONSOLES: dict[str, str] = {}


def scaling_group(session: Any, endpoint_url: str, environment: str, instances: int = 0) -> str:
    """Play Batch's part: the Auto Scaling group a managed EC2 compute environment scales
    through, named after it (``NAME-asg-UUID``), from its launch template and subnets, with
    ``instances`` launched (they never register with the ECS cluster: no agent runs here).

    Gap: moto's Batch makes no Auto Scaling group and launches no instance for a compute
    environment."""
    import uuid

    batch = session.client("batch", endpoint_url=endpoint_url)
    (found,) = batch.describe_compute_environments(computeEnvironments=[environment])[
        "computeEnvironments"
    ]
    resources = found["computeResources"]
    template = resources["launchTemplate"]
    autoscaling = session.client("autoscaling", endpoint_url=endpoint_url)
    prefix = f"{found['computeEnvironmentName']}-asg-"
    for group in autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]:
        if group["AutoScalingGroupName"].startswith(prefix):  # one a compute environment
            name = group["AutoScalingGroupName"]
            autoscaling.update_auto_scaling_group(
                AutoScalingGroupName=name, MaxSize=max(instances, 1), DesiredCapacity=instances
            )
            return str(name)
    name = f"{prefix}{uuid.uuid4()}"
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={
            "LaunchTemplateId": template["launchTemplateId"],
            "Version": str(template.get("version") or "$Default"),
        },
        MinSize=0,
        MaxSize=max(instances, 1),
        DesiredCapacity=instances,
        VPCZoneIdentifier=",".join(resources["subnets"]),
    )
    return name


def failed_launch(group: str, message: str, start: float, status: str = "Failed") -> None:
    """Play Auto Scaling's part: the group's newest activity is a launch that EC2 refused with
    ``message`` (as the group's activity history shows it)."""
    import datetime

    moment = datetime.datetime.fromtimestamp(start, datetime.timezone.utc)
    _ACTIVITIES.setdefault(group, []).insert(
        0,
        {
            "ActivityId": f"act-{len(_ACTIVITIES[group])}",
            "AutoScalingGroupName": group,
            "Description": "Launching a new EC2 instance.  Status Reason: " + message,
            "Cause": "At an instance was started in response to a difference between desired "
            "and actual capacity, increasing the capacity from 0 to 2.",
            "StartTime": moment,
            "EndTime": moment,
            "StatusCode": status,
            "StatusMessage": message,
            "Progress": 100,
        },
    )


def forget_activities() -> None:
    """Every group's activity history empty again (as a new emulator has it)."""
    _ACTIVITIES.clear()


def autoscaling_activities() -> None:
    # Gap: moto 5.2.5's DescribeScalingActivities always answers an empty list. Answer the
    # group's activities that ``failed_launch`` declared, newest first, in the Activity shape
    # botocore's model gives (StatusCode, StatusMessage, StartTime, ...).
    from moto.autoscaling.responses import AutoScalingResponse
    from moto.core.responses import ActionResult

    def describe_scaling_activities(self: AutoScalingResponse) -> ActionResult:
        group = self._get_param("AutoScalingGroupName")
        found = _ACTIVITIES.get(group, []) if group else sum(_ACTIVITIES.values(), [])
        limit = int(self._get_param("MaxRecords") or 100)
        return ActionResult({"Activities": found[:limit]})

    AutoScalingResponse.describe_scaling_activities = describe_scaling_activities  # type: ignore[method-assign]


def aged(account: str, region: str, instance_id: str, seconds: float) -> None:
    """Play time: the instance has been up ``seconds`` (its LaunchTime)."""
    import datetime

    from moto.core.utils import utcnow
    from moto.ec2.models import ec2_backends

    instance = ec2_backends[account][region].get_instance(instance_id)
    instance.launch_time = utcnow() - datetime.timedelta(seconds=seconds)


def console_says(instance_id: str, text: str) -> None:
    """Play the instance's serial console: what GetConsoleOutput answers for it."""
    _CONSOLES[instance_id] = text


def ec2_console_output() -> None:
    # Gap: moto's GetConsoleOutput answers the same sample boot for every instance. Answer
    # what ``console_says`` declared for it (base64, as EC2 sends Output), the sample otherwise.
    from moto.ec2.responses.general import General
    from moto.ec2.utils import Base64EncodedString  # type: ignore[attr-defined]

    original = General.get_console_output

    def get_console_output(self: General) -> Any:
        instance_id = self._get_param("InstanceId")
        if instance_id not in _CONSOLES:
            return original(self)
        from moto.core.responses import ActionResult

        output = Base64EncodedString.from_raw_string(_CONSOLES[instance_id])
        return ActionResult({"InstanceId": instance_id, "Output": output})

    General.get_console_output = get_console_output  # type: ignore[method-assign]


# Compute environment name -> the statusReason Batch gave it when it marked it INVALID.
_INVALID_ENVIRONMENTS: dict[str, str] = {}
# (Region, instance type, zone) triples EC2 does not offer (see withdraw_offering).
_WITHDRAWN_OFFERINGS: set[tuple[str, str, str]] = set()


def environment_invalid(name: str, reason: str | None) -> None:
    """Play Batch's part: it marked the compute environment INVALID for ``reason`` (None: VALID
    again), as when EC2 refuses its launch template or the AMI is missing."""
    if reason is None:
        _INVALID_ENVIRONMENTS.pop(name, None)
    else:
        _INVALID_ENVIRONMENTS[name] = reason


def batch_environment_status() -> None:
    # Gap: moto's DescribeComputeEnvironments answers every environment "VALID", "Compute
    # environment is available"; Batch marks one INVALID with a statusReason when it cannot
    # use it (Batch user guide, invalid_compute_environment.html). Answer what
    # ``environment_invalid`` declared.
    from moto.batch.models import BatchBackend

    original = BatchBackend.describe_compute_environments

    def describe(self: BatchBackend, environments: list[str] | None = None) -> list[dict[str, Any]]:
        found = original(self, environments)
        for environment in found:
            reason = _INVALID_ENVIRONMENTS.get(environment["computeEnvironmentName"])
            if reason is not None:
                environment.update(status="INVALID", statusReason=reason)
        return found

    BatchBackend.describe_compute_environments = describe  # type: ignore[method-assign]


def withdraw_offering(region: str, instance_type: str, zone: str, withdrawn: bool = True) -> None:
    """Play EC2's part: ``zone`` does not offer ``instance_type``."""
    triple = (region, instance_type, zone)
    (_WITHDRAWN_OFFERINGS.add if withdrawn else _WITHDRAWN_OFFERINGS.discard)(triple)


def ec2_withdrawn_offerings() -> None:
    # Not a gap in moto but the emulator's lever: moto's offerings are a fixed copy of EC2's
    # (ec2/resources/instance_type_offerings), so a zone that lacks a type is played by
    # leaving it out of DescribeInstanceTypeOfferings' answer.
    from moto.ec2.models import EC2Backend

    original = EC2Backend.describe_instance_type_offerings

    def describe(self: EC2Backend, *args: Any, **kwargs: Any) -> Any:
        found = original(self, *args, **kwargs)
        return [
            o
            for o in found
            if (self.region_name, o.get("InstanceType"), o.get("Location"))
            not in _WITHDRAWN_OFFERINGS
        ]

    EC2Backend.describe_instance_type_offerings = describe  # type: ignore[method-assign,assignment]


def _summary(job: Job) -> dict[str, Any]:
    summary: dict[str, Any] = job.describe_short()
    if job.job_id in _SHARES:
        summary["shareIdentifier"] = _SHARES[job.job_id]
    nodes = job.job_definition.node_properties
    if nodes is not None:
        numbers = (_NODE_OVERRIDES.get(job.job_id) or {}).get("numNodes") or nodes["numNodes"]
        summary["nodeProperties"] = {"numNodes": int(numbers)}
    return summary


def _job(account: str, region: str, job_id: str) -> Job:
    from moto.batch.models import batch_backends

    return batch_backends[account][region]._jobs[job_id]


def _single_container(job: Job) -> dict[str, Any]:
    container = job.job_definition.container_properties
    if container is None:
        raise ValueError(f"{job.job_id} is not a single-container job")
    return container


def _nodes(job: Job) -> dict[str, Any]:
    nodes = job.job_definition.node_properties
    if nodes is None:
        raise ValueError(f"{job.job_id} is not a multi-node job")
    return nodes


def _node_container(job: Job) -> dict[str, Any]:
    """The container of a multi-node job's (only) node range."""
    container: dict[str, Any] = _nodes(job)["nodeRangeProperties"][0]["container"]
    return container


def _log_group(container: dict[str, Any], account: str, region: str) -> tuple[str, Any]:
    """The container's awslogs group, created in moto's CloudWatch Logs if missing, and the
    Logs backend (ECS creates neither; the job role or the stack does)."""
    from moto.logs.models import logs_backends

    group: str = container["logConfiguration"]["options"]["awslogs-group"]
    logs = logs_backends[account][region]
    if group not in logs.groups:
        logs.create_log_group(group, {})
    return group, logs


def node_stream(job: Job, index: int, attempt: int | None = None) -> str:
    """The awslogs stream a node writes to: PREFIX/CONTAINER/TASK_ID, as ECS names it; each
    attempt is a new task, so a new stream."""
    options = _node_container(job)["logConfiguration"]["options"]
    attempt = attempt if attempt is not None else max(1, len(job.attempts))
    return f"{options['awslogs-stream-prefix']}/default/{job.job_id}-{attempt}-{index}"


def _node_record(parent: Job, index: int) -> dict[str, Any]:
    record: dict[str, Any] = parent.describe_short()
    record["jobId"] = f"{parent.job_id}#{index}"
    record["jobArn"] = f"{parent.arn}#{index}"
    record["jobQueue"] = parent.job_queue.arn  # JobDetail requires it (botocore's model)
    record["nodeDetails"] = {"nodeIndex": index, "isMainNode": index == 0}
    if parent.status not in ("SUBMITTED", "PENDING", "RUNNABLE") or parent.attempts:
        latest = _PLACED.get((parent.job_id, len(parent.attempts), index), {})
        record["container"] = {"logStreamName": node_stream(parent, index), **latest}
        record["attempts"] = [
            {
                "container": {
                    "logStreamName": node_stream(parent, index, n + 1),
                    **_PLACED.get((parent.job_id, n + 1, index), {}),
                },
                **_NODE_ENDS.get((parent.job_id, n + 1, index), {}),
            }
            for n in range(len(parent.attempts))
        ]
        record.update(_NODE_ENDS.get((parent.job_id, len(parent.attempts), index), {}))
    return record


# (job id, attempt, node) -> the node's containerInstanceArn and exitCode in that attempt.
_PLACED: dict[tuple[str, int, int], dict[str, Any]] = {}
# (job id, attempt, node) -> the statusReason Batch gave the node's attempt (and the node).
_NODE_ENDS: dict[tuple[str, int, int], dict[str, Any]] = {}


def end_attempt_on_hosts(
    account: str,
    region: str,
    job_id: str,
    hosts: dict[int, str],
    exit_codes: dict[int, int],
    *,
    retry: bool,
    reasons: dict[int, str] | None = None,
) -> None:
    """Play the cluster's part for a started multi-node job: its attempt ran node N on the
    container instance ``hosts[N]`` and each node ended with ``exit_codes[N]`` (and the status
    reason ``reasons[N]``, such as ECS's "Host EC2 (instance ...) terminated."); the job goes
    back to RUNNABLE (a retry) or FAILS.

    Gap: moto's attempts carry ``containerInstanceArn: "TBD"`` and no exit code, and its nodes
    run nowhere, so none ever loses its host. Batch's AttemptContainerDetail has both, and
    AttemptDetail a statusReason, for the job (the main node's) and for each node's own record
    (JOB#N, see describe_jobs above).
    """
    import datetime

    job = _job(account, region, job_id)
    attempt = len(job.attempts)
    for index, arn in hosts.items():
        placed: dict[str, Any] = {"containerInstanceArn": arn}
        if index in exit_codes:
            placed["exitCode"] = exit_codes[index]
        _PLACED[(job_id, attempt, index)] = placed
    for index, reason in (reasons or {}).items():
        _NODE_ENDS[(job_id, attempt, index)] = {"statusReason": reason}
    latest = job.attempts[-1]
    latest["container"].update(_PLACED.get((job_id, attempt, 0), {}))
    job.job_stopped_at = datetime.datetime.now()
    latest["stoppedAt"] = int(job.job_stopped_at.timestamp() * 1000)
    if retry:
        job.status = "RUNNABLE"
    else:
        job._mark_stopped(success=False)


def lose_agent(account: str, region: str, cluster: str, container_instance_arn: str) -> None:
    """Play a host whose ECS agent ECS no longer hears (the host hung or cut off).

    Gap: moto runs no agent: every container instance it registers stays ``agentConnected``;
    ECS says false for "an instance with an agent that may be unhealthy or stopped"
    (ContainerInstance)."""
    from moto.ecs.models import ecs_backends

    name = cluster.rsplit("/", 1)[-1]
    instance_id = container_instance_arn.rsplit("/", 1)[-1]
    ecs_backends[account][region].container_instances[name][instance_id].agent_connected = False


def launch_node(
    clients: dict[str, Any], compute_environment: str, market_type: str | None = None
) -> tuple[str, str]:
    """One node of ``launch_nodes``: (instance id, container instance ARN)."""
    (node,) = launch_nodes(clients, compute_environment, 1, market_type)
    return node


def launch_nodes(
    clients: dict[str, Any], compute_environment: str, count: int, market_type: str | None = None
) -> list[tuple[str, str]]:
    """Play Batch's part: ``count`` nodes of a managed EC2 compute environment, EC2 instances
    with the environment's tags registered with its ECS cluster; (instance id, container
    instance ARN) of each. ``market_type``: the launch template's InstanceMarketOptions
    (``capacity-block`` for a Capacity Block pool's nodes).

    Gap: moto's managed compute environment starts its minimum of instances without the
    environment's ``computeResources.tags`` and registers none with its ECS cluster; Batch
    tags every instance it launches with them and the ECS agent registers it. ``clients``:
    boto3's batch, ec2 and ecs clients.
    """
    batch, ec2, ecs = clients["batch"], clients["ec2"], clients["ecs"]
    (ce,) = batch.describe_compute_environments(computeEnvironments=[compute_environment])[
        "computeEnvironments"
    ]
    resources = ce["computeResources"]
    tags = [{"Key": k, "Value": v} for k, v in (resources.get("tags") or {}).items()]
    instances = ec2.run_instances(
        ImageId="ami-12c6146b",
        InstanceType=resources["instanceTypes"][0],
        MinCount=count,
        MaxCount=count,
        SubnetId=resources["subnets"][0],
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}] if tags else [],
        **({"InstanceMarketOptions": {"MarketType": market_type}} if market_type else {}),
    )["Instances"]
    nodes = []
    for instance in instances:
        document = json.dumps({"instanceId": instance["InstanceId"]})
        registered = ecs.register_container_instance(
            cluster=ce["ecsClusterArn"], instanceIdentityDocument=document
        )["containerInstance"]
        nodes.append((instance["InstanceId"], registered["containerInstanceArn"]))
    return nodes


def batch_tag_resource_limits() -> None:
    # Gap: moto's Batch TagResource takes any ARN and any number of tags. Batch refuses a child
    # job's ARN ("ARNs for child jobs of array and multi-node parallel (MNP) jobs aren't
    # supported", TagResource resourceArn) and more than 50 tags on a resource ("Maximum number
    # of tags per resource - 50"; tags starting with aws: do not count; user guide,
    # tag-restrictions.html), both with a ClientException.
    from moto.batch.exceptions import ClientException
    from moto.batch.models import BatchBackend

    original = BatchBackend.tag_resource

    def tag_resource(self: BatchBackend, resource_arn: str, tags: dict[str, str]) -> None:
        name = resource_arn.rsplit("/", 1)[-1]
        if ":job/" in resource_arn and ("#" in name or ":" in name):
            raise ClientException(
                f"{resource_arn}: child jobs of array and MNP jobs aren't supported"
            )
        keys = set(self.list_tags_for_resource(resource_arn)) | set(tags or {})
        if len([k for k in keys if not k.lower().startswith("aws:")]) > 50:
            raise ClientException(f"{resource_arn}: more than 50 tags")
        original(self, resource_arn, tags)

    BatchBackend.tag_resource = tag_resource  # type: ignore[method-assign]


def ec2_instance_lifecycle() -> None:
    # Gap: moto's RunInstances marks every instance launched with InstanceMarketOptions as
    # "spot"; EC2 reports the market it runs in, and an instance of a Capacity Block has
    # InstanceLifecycle "capacity-block" (botocore ec2 InstanceLifecycleType).
    from moto.ec2.models.instances import InstanceBackend

    original = InstanceBackend.run_instances

    def run_instances(self: Any, *args: Any, **kwargs: Any) -> Any:
        reservation = original(self, *args, **kwargs)
        market = kwargs.get("instance_market_options")
        if isinstance(market, str) and market:
            for instance in reservation.instances:
                instance.lifecycle = market
        return reservation

    InstanceBackend.run_instances = run_instances  # type: ignore[method-assign]


def event_pattern_arrays() -> None:
    # Gap: moto's EventBridge matcher does not descend into arrays of objects, so a pattern
    # on `detail.attempts.container.exitCode` never matches; EventBridge matches such a path
    # against every element's value ("If the value in the event is an array, then the event
    # pattern matches if the intersection of the event pattern array and the event array is
    # non-empty", EventBridge user guide, eb-event-patterns-arrays.html).
    from moto.events.models import EventPattern

    def flatten(node: Any, prefix: str = "", result: dict[str, Any] | None = None) -> Any:
        result = {} if result is None else result
        for key, value in node.items() if isinstance(node, dict) else ():
            path = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict) and value:
                flatten(value, path, result)
            elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
                for item in value:
                    for inner, leaf in flatten(item, path).items():
                        found = result.setdefault(inner, [])
                        found.extend(leaf if isinstance(leaf, list) else [leaf])
            else:
                result[path] = value
        return result

    EventPattern._flatten_dict = staticmethod(flatten)  # type: ignore[method-assign]


def events_test_event_pattern() -> None:
    # Gap: moto 5.2.5 routes TestEventPattern but answers nothing (its model raises
    # NotImplementedError). Answer {"Result": bool} with moto's own matcher, as EventBridge's
    # TestEventPattern does; a malformed pattern is moto's InvalidEventPatternException.
    from moto.events.models import EventPattern, EventPatternParser
    from moto.events.responses import EventsHandler

    def test_event_pattern(self: EventsHandler) -> str:
        raw = self._get_param("EventPattern")
        pattern = EventPattern(raw, EventPatternParser(raw).parse())
        return json.dumps({"Result": pattern.matches_event(json.loads(self._get_param("Event")))})

    EventsHandler.test_event_pattern = test_event_pattern  # type: ignore[method-assign,assignment]


def node_overrides(account: str, region: str, job_id: str) -> dict[str, Any] | None:
    """The nodeOverrides a job was submitted with (see the SubmitJob gap above)."""
    return _NODE_OVERRIDES.get(_job(account, region, job_id).job_id)


def node_container(account: str, region: str, job_id: str) -> dict[str, Any]:
    """The container a multi-node job's nodes run. Gap: moto's DescribeJobDefinitions leaves
    out a multi-node definition's nodeProperties (it keeps them: its Job has them)."""
    return _node_container(_job(account, region, job_id))


def start_job(account: str, region: str, job_id: str) -> None:
    """Play the cluster's part: the held job's nodes start (a new attempt)."""
    import datetime

    job = _job(account, region, job_id)
    group, logs = _log_group(_node_container(job), account, region)
    job.job_started_at = datetime.datetime.now()
    job.status = "RUNNING"
    job._start_attempt()
    for index in range(_nodes(job)["numNodes"]):
        logs.create_log_stream(group, node_stream(job, index))


def start_container_attempt(account: str, region: str, job_id: str) -> None:
    """Play the cluster's part: a held single-node job (an array's child included) starts a
    new attempt; end it with ``end_attempt_on_hosts`` (its one node is node 0)."""
    import datetime

    job = _job(account, region, job_id)
    job.job_started_at = datetime.datetime.now()
    job.status = "RUNNING"
    job._start_attempt()


def finish_job(account: str, region: str, job_id: str, *, success: bool) -> None:
    _job(account, region, job_id)._mark_stopped(success=success)


def put_node_lines(account: str, region: str, job_id: str, node_logs: dict[int, list[str]]) -> None:
    """Play a running job's nodes: append lines to each node's stream of the current attempt."""
    import time

    job = _job(account, region, job_id)
    group, logs = _log_group(_node_container(job), account, region)
    now = int(time.time() * 1000)
    for index, lines in node_logs.items():
        events = [{"timestamp": now + i, "message": line} for i, line in enumerate(lines)]
        logs.put_log_events(group, node_stream(job, index), events)


def run_job(
    account: str,
    region: str,
    job_id: str,
    *,
    success: bool,
    node_logs: dict[int, list[str]] | None = None,
) -> None:
    """Play the cluster's part for a held job: start it, write each node's log, end it."""
    start_job(account, region, job_id)
    put_node_lines(account, region, job_id, node_logs or {})
    finish_job(account, region, job_id, success=success)


def run_container_job(
    account: str,
    region: str,
    job_id: str,
    program: Callable[[list[str]], tuple[int, list[str]]],
) -> None:
    """Play Fargate's part for a held single-container job (a copy job): start a task, run
    ``program`` on the job's command with its ``Ref::`` parameters filled in (as Batch does),
    write the lines it printed to the task's awslogs stream (PREFIX/default/TASK), and end the
    job with its exit code."""
    import datetime
    import time

    job = _job(account, region, job_id)
    container = _single_container(job)
    group, logs = _log_group(container, account, region)
    task = f"{job_id}-{len(job.attempts) + 1}"  # each attempt is a new task
    prefix = container["logConfiguration"]["options"]["awslogs-stream-prefix"]
    job.log_stream_name = f"{prefix}/default/{task}"
    logs.create_log_stream(group, job.log_stream_name)
    job.job_started_at = datetime.datetime.now()
    job.status = "RUNNING"
    job._start_attempt()
    values = {**job.job_definition.parameters, **job.parameters}
    command = [values.get(w[5:], w) if w.startswith("Ref::") else w for w in container["command"]]
    code, lines = program(command)
    now = int(time.time() * 1000)
    events = [{"timestamp": now + i, "message": line} for i, line in enumerate(lines)]
    if events:
        logs.put_log_events(group, job.log_stream_name, events)
    job.exit_code = code
    job._mark_stopped(success=code == 0)


def run_job_commands(
    account: str, region: str, job_id: str, env: dict[str, str], timeout: float = 120
) -> int:
    """Play the cluster's part for a held job by running it here: moto's Batch starts no
    container (see batch_without_docker), so each node's user command (what follows the
    prelude's script: launcher.node.prelude.user_command) runs as a process on this machine,
    one node after another and node 0 last (its command may wait for the workers', as a Python
    function's main node does), with the job definition's environment, the submit's overrides,
    the node's rank and size (what the prelude exports) and ``env`` (where the emulator is, its
    keys). Each node's output is its log; the job ends with node 0's exit code, returned."""
    import subprocess

    from launcher.node.prelude import user_command

    job = _job(account, region, job_id)

    def node(
        command: list[str], index: int, nodes: int, base: dict[str, str]
    ) -> tuple[int, list[str]]:
        rank = {"LAUNCHER_NODE_RANK": str(index), "LAUNCHER_NNODES": str(nodes)}
        done = subprocess.run(
            user_command(command),
            env={"PATH": os.environ["PATH"], **base, **rank, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return done.returncode, (done.stdout + done.stderr).splitlines()

    def environment(container: dict[str, Any], overrides: list[dict[str, str]]) -> dict[str, str]:
        return {e["name"]: e["value"] for e in [*container.get("environment", []), *overrides]}

    if job.job_definition.node_properties is None:
        base = environment(_single_container(job), job.container_overrides.get("environment", []))
        run_container_job(account, region, job_id, lambda command: node(command, 0, 1, base))
        return int(job.exit_code or 0)
    container, nodes = _node_container(job), int(_nodes(job)["numNodes"])
    ranges = (_NODE_OVERRIDES.get(job.job_id) or {}).get("nodePropertyOverrides", [])
    overrides = [e for r in ranges for e in r.get("containerOverrides", {}).get("environment", [])]
    base = environment(container, overrides)
    start_job(account, region, job_id)
    code = 0
    for index in [*range(1, nodes), 0]:
        code, lines = node(container["command"], index, nodes, base)
        put_node_lines(account, region, job_id, {index: lines})
    job.exit_code = code
    finish_job(account, region, job_id, success=code == 0)
    return code


def held_jobs(account: str, region: str, queue_arn: str) -> list[str]:
    """Ids of the jobs a queue holds RUNNABLE (see the SubmitJob gap above)."""
    from moto.batch.models import batch_backends

    jobs = batch_backends[account][region]._jobs.values()
    return [j.job_id for j in jobs if j.job_queue.arn == queue_arn and j.status == "RUNNABLE"]


def default_security_groups(session: Any, endpoint_url: str) -> None:
    # Gap: moto gives a VPC's default group only the egress rule; AWS also gives it "Inbound:
    # all traffic from the same security group" (VPC user guide, default-security-group.html).
    ec2 = session.client("ec2", endpoint_url=endpoint_url)
    groups = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["default"]}])
    for group in groups["SecurityGroups"]:
        own = [p for p in group["IpPermissions"] if p.get("UserIdGroupPairs")]
        if not own:
            ec2.authorize_security_group_ingress(
                GroupId=group["GroupId"],
                IpPermissions=[
                    {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group["GroupId"]}]}
                ],
            )


def prepare_account(session: Any, endpoint_url: str) -> None:
    """Account state that exists in a real account before `cdk deploy`, created in moto.

    Not a gap: `cdk bootstrap` writes the bootstrap version parameter, and AWS creates Batch's
    service-linked role on first use.
    """
    session.client("ssm", endpoint_url=endpoint_url).put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String", Overwrite=True
    )
    iam = session.client("iam", endpoint_url=endpoint_url)
    # Gap: moto's create_service_linked_role names it AWSServiceRoleForbatch (lower case b);
    # create the role under the name and path AWS gives it.
    with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
        iam.create_role(
            RoleName="AWSServiceRoleForBatch",
            Path="/aws-service-role/batch.amazonaws.com/",
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": "sts:AssumeRole",
                            "Principal": {"Service": "batch.amazonaws.com"},
                        }
                    ],
                }
            ),
        )


def block_job(account: str, region: str, job_id: str, reason: str) -> None:
    """Play Batch's part for a job that cannot be placed.

    Gap: moto never says why a RUNNABLE job waits; Batch puts the reason a blocked queue's head
    job waits in its statusReason (Batch user guide, job_stuck_in_runnable.html).
    """
    job = _job(account, region, job_id)
    job.status = "RUNNABLE"
    job.job_stopped_reason = reason


def submitted_ago(account: str, region: str, job_id: str, seconds: float) -> None:
    """Play time: the job was submitted ``seconds`` ago (its createdAt)."""
    import datetime

    job = _job(account, region, job_id)
    job.job_created_at = datetime.datetime.now() - datetime.timedelta(seconds=seconds)
