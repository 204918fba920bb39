"""ClusterInfo values for pure tests, derived from the same catalog the infra uses."""

from __future__ import annotations

from launcher import catalog
from launcher.cluster import ClusterInfo


def cluster_info(
    instance_type: str = "p4d.24xlarge",
    *,
    max_nodes: int = 4,
    efa: bool = True,
    fair_share: bool = False,
    internet_egress: str = "none",
    pull_through_cache: dict[str, str] | None = None,
    registry_secrets: dict[str, str] | None = None,
) -> ClusterInfo:
    it = catalog.CATALOG[instance_type]
    account, region = "123456789012", "us-east-1"
    return ClusterInfo(
        stack_name="EfaBatch",
        region=region,
        job_queue_name="EfaBatch-jobs",
        job_queue_arn=f"arn:aws:batch:{region}:{account}:job-queue/EfaBatch-jobs",
        repository_uri=f"{account}.dkr.ecr.{region}.amazonaws.com/workspace",
        file_system_id="fs-0123456789abcdef0",
        access_point_id="fsap-0123456789abcdef0",
        job_role_arn=f"arn:aws:iam::{account}:role/job",
        execution_role_arn=f"arn:aws:iam::{account}:role/execution",
        log_group_name="/aws/batch/EfaBatch/jobs",
        instance_type=instance_type,
        max_nodes=max_nodes,
        efa_interfaces=it.efa_interfaces if efa else 0,
        gpus_per_node=it.gpus,
        vcpus_per_node=it.vcpus,
        memory_mib_per_node=it.usable_memory_mib,
        scheduling_policy_arn=(
            f"arn:aws:batch:{region}:{account}:scheduling-policy/fs" if fair_share else None
        ),
        copy_queue_arn=f"arn:aws:batch:{region}:{account}:job-queue/EfaBatch-copy",
        copy_image=f"{account}.dkr.ecr.{region}.amazonaws.com/cdk-assets:copier",
        copy_job_role_arn=f"arn:aws:iam::{account}:role/copy",
        copy_execution_role_arn=f"arn:aws:iam::{account}:role/copy-execution",
        internet_egress=internet_egress,
        pull_through_cache=(
            {"ecr-public": "public.ecr.aws"} if pull_through_cache is None else pull_through_cache
        ),
        registry_secrets=registry_secrets or {},
        task_security_group_id="sg-0123456789abcdef0",
    )
