"""What jobs may reach, as settings: the data buckets, the FSx for Lustre file system, the job
role's managed policies and the secrets jobs read; and their checks.

infra/config.py holds the settings (``data_buckets``, ``fsx_lustre``, ``job_role_policies``,
``job_secrets``) and calls these; infra/data_access.py grants what they name to the roles.
"""

from __future__ import annotations

import dataclasses
import re

from infra.config_values import ConfigError, check
from infra.lustre import FsxLustre, LustreError
from launcher.stack import buckets, secrets
from launcher.stack.outputs import Egress

# An IAM managed policy's ARN: the account's own or AWS's ("aws" in place of the account).
_POLICY_ARN = re.compile(r"^arn:aws(-[a-z]+)*:iam::(\d{12}|aws):policy/[\w+=,.@/-]{1,1024}$")
# "Managed policies attached to an IAM role: 10" by default, adjustable to 20 (IAM user guide,
# reference_iam-quotas.html).
MAX_MANAGED_POLICIES_PER_ROLE = 20


def link_exports(data_buckets: tuple[str, ...], fsx_lustre: FsxLustre | None) -> bool:
    """Whether the FSx S3 link writes back to its location: fsx_lustre.export where set; else
    yes, unless data_buckets lists the location read-only and nowhere read-write. A platform
    team that wrote ``:ro`` meant it: an export (which also turns a file's deletion into the
    object's) would make it writable through the file system."""
    linked = fsx_lustre.repository if fsx_lustre else None
    if fsx_lustre is None or linked is None:
        return False
    if fsx_lustre.export is not None:
        return fsx_lustre.export
    configured = buckets.parse_all(data_buckets)
    read = dataclasses.replace(linked, writable=False)
    read_only = any(b.covers(read) for b in configured) and not any(
        b.covers(linked) for b in configured
    )
    return not read_only


def widened_by_link(
    data_buckets: tuple[str, ...], fsx_lustre: FsxLustre | None
) -> buckets.DataBucket | None:
    """The ``:ro`` data bucket an exporting link makes writable (fsx_lustre.export: true over
    a location data_buckets lists read-only), or None."""
    linked = fsx_lustre.repository if fsx_lustre else None
    if linked is None or not link_exports(data_buckets, fsx_lustre):
        return None
    configured = buckets.parse_all(data_buckets)
    if any(b.covers(linked) for b in configured):
        return None
    read = dataclasses.replace(linked, writable=False)
    return next((b for b in configured if b.covers(read)), None)


def data_locations(
    data_buckets: tuple[str, ...], fsx_lustre: FsxLustre | None
) -> tuple[buckets.DataBucket, ...]:
    """The data buckets, and the FSx file system's linked location: read and write where the
    link exports (``link_exports``), read-only where it does not."""
    configured = buckets.parse_all(data_buckets)
    linked = fsx_lustre.repository if fsx_lustre else None
    if linked is None:
        return configured
    if not link_exports(data_buckets, fsx_lustre):
        linked = dataclasses.replace(linked, writable=False)
    if any(b.covers(linked) for b in configured):
        return configured
    return (*configured, linked)


def validate_data(
    *,
    data_buckets: tuple[str, ...],
    fsx_lustre: FsxLustre | None,
    job_role_policies: tuple[str, ...],
    job_secrets: tuple[str, ...],
    place: secrets.Place,
    egress: Egress,
) -> None:
    """The data settings; ``place`` is the cluster's (its region is the one the VPC's
    endpoints reach) and ``egress`` its way out (secrets elsewhere need one)."""
    if fsx_lustre is not None:  # first: its link joins data_locations below
        try:
            fsx_lustre.validate()
        except LustreError as exc:
            raise ConfigError(f"fsx_lustre.{exc}") from None
    try:
        data_locations(data_buckets, fsx_lustre)
    except buckets.BucketError as exc:
        raise ConfigError(f"data_buckets: {exc}") from None
    if len(job_role_policies) > MAX_MANAGED_POLICIES_PER_ROLE:
        raise ConfigError(
            f"job_role_policies: {len(job_role_policies)} policies; IAM attaches at "
            f"most {MAX_MANAGED_POLICIES_PER_ROLE} managed policies to a role (IAM quotas)"
        )
    for arn in job_role_policies:
        check(
            _POLICY_ARN,
            "job_role_policies",
            arn,
            "managed policy ARNs (arn:aws:iam::ACCOUNT:policy/NAME or "
            "arn:aws:iam::aws:policy/NAME)",
        )
    try:
        grants = secrets.parse_grants(job_secrets)
    except secrets.SecretError as exc:
        raise ConfigError(f"job_secrets: {exc}") from None
    elsewhere = [str(g) for g in grants if g.region(place) != place.region]
    if elsewhere and egress is Egress.NONE:
        raise ConfigError(
            f"job_secrets: {elsewhere[0]} is in another Region; the VPC's endpoints reach "
            f"{place.region} only: set nat_gateway=true, or copy the secret to {place.region}"
        )
