"""What CloudFormation does when deployed stacks get new templates: which resources it updates
in place, which it replaces, and which changes it (or the service behind it) refuses.

No emulator shows this: moto creates stacks, it does not replay the second ``cdk deploy``. The
rules come from the sources that govern an update:

- a resource is replaced when a property in its type's ``createOnlyProperties`` changes
  (the CloudFormation resource provider schemas, as cfn-lint bundles them); a Batch compute
  environment also "is replaced if an update is made that requires replacing the instances"
  unless ``ReplaceComputeEnvironment`` is false or it is a Fargate one ("Fargate compute
  environments are always updated without interruption", CloudFormation reference,
  aws-resource-batch-computeenvironment.html);
- a replaced resource gets a new physical id, so every ``Ref``/``GetAtt`` to it changes, and a
  create-only property that holds one replaces its owner in turn;
- "After another stack imports an output value, you can't delete the stack that is exporting
  the output value or modify the exported output value" (CloudFormation user guide,
  walkthrough-crossstackref.html): such a change fails the update, which rolls back;
- a replacement of a resource with a name of its own that keeps its name fails ("CloudFormation
  can't update a stack when a custom-named resource requires replacing", the
  AWS::Batch::JobQueue ``JobQueueName`` documentation);
- the reference's "Update requires: Replacement" where the schema is silent
  (``_REPLACED_BY_REFERENCE``);
- Batch refuses to add a fair-share policy to a queue or to remove one
  (``CreateJobQueue.schedulingPolicyArn``), although CloudFormation would try it in place;
- FSx refuses a smaller storage capacity (``storage_shrink``), although CloudFormation would
  try it in place;
- FSx refuses a replacement data repository association that overlaps the one it replaces:
  CloudFormation creates the new one while the old one still exists, and "Two data repository
  associations cannot have overlapping file system paths", "/" only "for the first data
  repository associated with a file system", and each "must have a unique ... S3 bucket or
  prefix" (FSx API, CreateDataRepositoryAssociation).

``plan`` is pure: templates in, changes out. ``python -m infra.predeploy`` runs it against the
deployed stacks before a deploy; ``tests/infra/test_updates.py`` holds docs/operating.md's
update table to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

Templates = dict[str, dict]  # stack name -> template

# The ComputeResources members that replace a compute environment unless
# ReplaceComputeEnvironment is false (CloudFormation reference, ReplaceComputeEnvironment).
_REPLACED_UNLESS_IN_PLACE = (
    "AllocationStrategy",
    "BidPercentage",
    "Ec2Configuration",
    "Ec2KeyPair",
    "ImageId",
    "InstanceRole",
    "InstanceTypes",
    "LaunchTemplate",
    "MaxvCpus",
    "MinvCpus",
    "PlacementGroup",
    "SecurityGroupIds",
    "Subnets",
    "Tags",
    "Type",
    "UpdateToLatestImageVersion",
)
# Properties that give a resource its physical name: replacing it under the same name fails.
_NAME_PROPERTIES = {
    "AWS::Batch::JobQueue": "JobQueueName",
    "AWS::Batch::ComputeEnvironment": "ComputeEnvironmentName",
    "AWS::Batch::SchedulingPolicy": "Name",
    "AWS::ECR::Repository": "RepositoryName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::EC2::LaunchTemplate": "LaunchTemplateName",
    "AWS::EC2::PlacementGroup": "GroupName",
}
# Properties whose change the CloudFormation reference documents as "Update requires:
# Replacement" although the provider schema does not list them as create-only: FSx for Lustre's
# deployment type (aws-properties-fsx-filesystem-lustreconfiguration.html; FSx cannot turn a
# scratch file system into a persistent one).
_REPLACED_BY_REFERENCE = {
    "AWS::FSx::FileSystem": (("LustreConfiguration", "DeploymentType"),),
}
_SUB_NAME = re.compile(r"\$\{([A-Za-z0-9]+)(?:\.[A-Za-z0-9.]+)?\}")


@dataclass(frozen=True)
class Change:
    stack: str
    logical_id: str
    type: str
    action: str  # add | remove | update | replace | refuse
    reasons: tuple[str, ...] = ()
    # The old resource stays: its DeletionPolicy (removed) or UpdateReplacePolicy (replaced) is
    # Retain in the deployed template (the policy in force when the update starts).
    retained: bool = False

    @property
    def path(self) -> str:
        return f"{self.stack}/{self.logical_id}"

    def __str__(self) -> str:
        kept = " (old one retained)" if self.retained else ""
        why = f": {'; '.join(self.reasons)}" if self.reasons else ""
        return f"{self.action} {self.type} {self.path}{kept}{why}"


@cache
def create_only(type_: str) -> tuple[tuple[str, ...], ...]:
    """The type's createOnlyProperties as property paths (``('ComputeResources', 'Tags')``)."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER  # type: ignore[import-untyped]

    try:
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", type_).schema
    except Exception:  # a type cfn-lint does not know: nothing is known to be create-only
        return _REPLACED_BY_REFERENCE.get(type_, ())
    return tuple(
        tuple(p.removeprefix("/properties/").split("/"))
        for p in schema.get("createOnlyProperties", [])
    ) + _REPLACED_BY_REFERENCE.get(type_, ())


def _differences(old, new, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Property paths whose values differ (dict keys walked; lists and scalars compared)."""
    if isinstance(old, dict) and isinstance(new, dict) and not _intrinsic(old) | _intrinsic(new):
        for key in sorted(set(old) | set(new)):
            if key not in old or key not in new:
                yield (*path, key)
            else:
                yield from _differences(old[key], new[key], (*path, key))
    elif old != new:
        yield path


def _intrinsic(value: dict) -> set[str]:
    return {k for k in value if k == "Ref" or k.startswith("Fn::")}


def references(value) -> Iterator[tuple[str, str]]:
    """("local", logical id) for Ref/GetAtt/Sub references, ("import", name) for imports."""
    if isinstance(value, dict):
        for key, arg in value.items():
            if key == "Ref" and isinstance(arg, str) and not arg.startswith("AWS::"):
                yield "local", arg
            elif key == "Fn::GetAtt":
                yield "local", arg[0] if isinstance(arg, list) else arg.split(".")[0]
            elif key == "Fn::Sub":
                text = arg[0] if isinstance(arg, list) else arg
                for name in _SUB_NAME.findall(text):
                    if not name.startswith("AWS"):
                        yield "local", name
                if isinstance(arg, list):
                    yield from references(arg[1])
                continue
            elif key == "Fn::ImportValue" and isinstance(arg, str):
                yield "import", arg
                continue
            yield from references(arg)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


def _at(value, path: tuple[str, ...]):
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _leaves(value, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    """(path, value) of every value that is not a plain mapping (``_differences``' unit)."""
    if isinstance(value, dict) and not _intrinsic(value):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    else:
        yield path, value


def _exports(templates: Templates) -> dict[str, tuple[str, object]]:
    return {
        out["Export"]["Name"]: (stack, out["Value"])
        for stack, t in templates.items()
        for out in t.get("Outputs", {}).values()
        if isinstance(out.get("Export", {}).get("Name"), str)
    }


def _imports(templates: Templates) -> dict[str, list[str]]:
    """Export name -> the stacks importing it."""
    found: dict[str, list[str]] = {}
    for stack, t in templates.items():
        for kind, name in references(t):
            if kind == "import":
                found.setdefault(name, []).append(stack)
    return found


def _retained(body: dict, policy: str) -> bool:
    return body.get(policy) == "Retain"


class _Planner:
    def __init__(self, old: Templates, new: Templates) -> None:
        self.old, self.new = old, new
        self.old_exports, self.new_exports = _exports(old), _exports(new)
        self.replaced: dict[tuple[str, str], list[str]] = {}

    def resources(self, templates: Templates, stack: str) -> dict[str, dict]:
        return templates.get(stack, {}).get("Resources", {})

    def export_changed(self, name: str) -> bool:
        if name not in self.new_exports or name not in self.old_exports:
            return True
        (_, old), (stack, new) = self.old_exports[name], self.new_exports[name]
        return old != new or self.moved(stack, new)

    def moved(self, stack: str, value) -> bool:
        """Whether a value names a replaced resource (its physical id changes with it)."""
        for kind, target in references(value):
            if kind == "local" and (stack, target) in self.replaced:
                return True
            if kind == "import" and self.export_changed(target):
                return True
        return False

    def changed_paths(self, stack: str, old: dict, new: dict) -> list[tuple[str, ...]]:
        paths = set(_differences(old.get("Properties", {}), new.get("Properties", {})))
        for path, value in _leaves(new.get("Properties", {})):
            if self.moved(stack, value):
                paths.add(path)
        return sorted(paths)

    def replacement_reasons(self, stack: str, logical_id: str) -> list[str]:
        old = self.resources(self.old, stack)[logical_id]
        new = self.resources(self.new, stack)[logical_id]
        type_ = new["Type"]
        if old["Type"] != type_:
            return [f"type {old['Type']} -> {type_}"]
        reasons = []
        props = new.get("Properties", {})
        # "ReplaceComputeEnvironment is not applicable for Fargate compute environments.
        # Fargate compute environments are always updated without interruption."
        in_place = props.get("ReplaceComputeEnvironment", True) is False or props.get(
            "ComputeResources", {}
        ).get("Type") in ("FARGATE", "FARGATE_SPOT")
        changed = self.changed_paths(stack, old, new)
        for fixed in create_only(type_):
            hit = [p for p in changed if p[: len(fixed)] == fixed]
            if not hit and any(fixed[: len(p)] == p for p in changed):
                # A whole parent was added or dropped: the create-only member itself decides.
                before = _at(old.get("Properties", {}), fixed)
                after = _at(new.get("Properties", {}), fixed)
                hit = [fixed] if before != after or self.moved(stack, after) else []
            reasons += [f"{'.'.join(p)} is create-only" for p in hit]
        for path in changed:
            if any(path[: len(f)] == f for f in create_only(type_)):
                continue
            if (
                type_ == "AWS::Batch::ComputeEnvironment"
                and not in_place
                and path[:1] == ("ComputeResources",)
                and len(path) > 1
                and path[1] in _REPLACED_UNLESS_IN_PLACE
            ):
                reasons.append(f"{'.'.join(path)} with ReplaceComputeEnvironment true")
        return reasons

    def run(self) -> list[Change]:
        stacks = sorted(set(self.old) | set(self.new))
        grew = True
        while grew:  # replacements cascade through references until nothing new is replaced
            grew = False
            for stack in stacks:
                old, new = self.resources(self.old, stack), self.resources(self.new, stack)
                for logical_id in sorted(set(old) & set(new)):
                    if (stack, logical_id) in self.replaced:
                        continue
                    reasons = self.replacement_reasons(stack, logical_id)
                    if reasons:
                        self.replaced[(stack, logical_id)] = reasons
                        grew = True
        return self.changes(stacks)

    def changes(self, stacks: list[str]) -> list[Change]:
        changes = []
        importers = _imports(self.old)
        for stack in stacks:
            old, new = self.resources(self.old, stack), self.resources(self.new, stack)
            for logical_id in sorted(set(old) | set(new)):
                body = new.get(logical_id) or old[logical_id]
                type_ = body["Type"]
                if logical_id not in old:
                    changes.append(Change(stack, logical_id, type_, "add"))
                elif logical_id not in new:
                    retained = _retained(old[logical_id], "DeletionPolicy")
                    changes.append(Change(stack, logical_id, type_, "remove", retained=retained))
                elif (stack, logical_id) in self.replaced:
                    changes.append(self.replacement(stack, logical_id))
                elif paths := self.changed_paths(stack, old[logical_id], new[logical_id]):
                    changes.append(self.update(stack, logical_id, paths))
            for name, (_, _value) in self.old_exports.items():
                if self.old_exports[name][0] != stack or not self.export_changed(name):
                    continue
                users = sorted(set(importers.get(name, [])) - {stack})
                if users:
                    changes.append(
                        Change(
                            stack,
                            name,
                            "Export",
                            "refuse",
                            (f"export {name} changes or goes while {', '.join(users)} imports it",),
                        )
                    )
        return changes

    def replacement(self, stack: str, logical_id: str) -> Change:
        old = self.resources(self.old, stack)[logical_id]
        new = self.resources(self.new, stack)[logical_id]
        type_ = new["Type"]
        reasons = tuple(self.replaced[(stack, logical_id)])
        if type_ == ASSOCIATION and not self.moved(stack, new["Properties"].get("FileSystemId")):
            collision = association_collision(old["Properties"], new["Properties"])
            if collision:
                return Change(stack, logical_id, type_, "refuse", (*reasons, collision))
        name = _NAME_PROPERTIES.get(type_)
        old_name = old.get("Properties", {}).get(name) if name else None
        if old_name is not None and old_name == new.get("Properties", {}).get(name):
            return Change(
                stack,
                logical_id,
                type_,
                "refuse",
                (*reasons, f"keeps its custom name {name}, so it cannot be replaced"),
            )
        return Change(
            stack, logical_id, type_, "replace", reasons, _retained(old, "UpdateReplacePolicy")
        )

    def update(self, stack: str, logical_id: str, paths: list[tuple[str, ...]]) -> Change:
        old = self.resources(self.old, stack)[logical_id]
        new = self.resources(self.new, stack)[logical_id]
        type_ = new["Type"]
        reasons = tuple(".".join(p) for p in paths)
        if type_ == "AWS::Batch::JobQueue":
            had = bool(old.get("Properties", {}).get("SchedulingPolicyArn"))
            has = bool(new.get("Properties", {}).get("SchedulingPolicyArn"))
            if had != has:
                why = (
                    "a queue without a fair-share policy cannot get one"
                    if has
                    else "a queue's fair-share policy cannot be removed"
                )
                return Change(stack, logical_id, type_, "refuse", (*reasons, why))
        if type_ == FILE_SYSTEM:
            shrink = storage_shrink(old.get("Properties", {}), new.get("Properties", {}))
            if shrink:
                return Change(stack, logical_id, type_, "refuse", (*reasons, shrink))
        return Change(stack, logical_id, type_, "update", reasons)


FILE_SYSTEM = "AWS::FSx::FileSystem"


def storage_shrink(old: dict, new: dict) -> str | None:
    """Why FSx refuses a smaller StorageCapacity, if the new template asks for one.

    CloudFormation does not replace the file system for it: StorageCapacity is not among
    AWS::FSx::FileSystem's createOnlyProperties (its resource provider schema, as cfn-lint
    ships it), so its update handler changes the file system in place (UpdateFileSystem).
    FSx only grows one: for Lustre's SSD deployment types "valid values are in multiples of
    2400 GiB. The value must be greater than the current storage capacity" (FSx API,
    UpdateFileSystem StorageCapacity); "You can only increase the amount of storage capacity
    for a file system; you cannot decrease storage capacity" (FSx for Lustre user guide,
    managing-storage-capacity.html). So the update fails half way through the deploy and
    CloudFormation rolls the stack back: the file system and its data stay, nothing of the
    deploy happens. The usual cause is a
    ``-c fsx_lustre='{...}'`` that leaves out storage_gib: -c replaces the whole object, so
    storage_gib falls back to its default.
    """
    before, after = old.get("StorageCapacity"), new.get("StorageCapacity")
    if not (isinstance(before, int) and isinstance(after, int)) or after >= before:
        return None
    return (
        f"FSx cannot shrink a file system ({before} GiB deployed, {after} GiB asked): "
        f"set fsx_lustre.storage_gib to {before} or more (a -c fsx_lustre object replaces "
        "the whole setting: give every key of it again, or keep the settings in cdk.json)"
    )


ASSOCIATION = "AWS::FSx::DataRepositoryAssociation"


def _overlap(a: str, b: str, sep: str) -> bool:
    """Whether one path is the other or lies under it (``/`` under every path)."""
    a, b = a.rstrip(sep) + sep, b.rstrip(sep) + sep
    return a.startswith(b) or b.startswith(a)


def association_collision(old: dict, new: dict) -> str | None:
    """Why FSx refuses ``new`` while ``old`` still links the same file system, if it does.

    CloudFormation creates a replacement before it deletes the old resource, so for a moment
    both associations exist: their file system paths must not overlap ("/" overlaps every
    path, and is only for the first association of a file system), nor their S3 locations.
    """
    paths = (old.get("FileSystemPath"), new.get("FileSystemPath"))
    repositories = (old.get("DataRepositoryPath"), new.get("DataRepositoryPath"))
    twice = "deploy once without fsx_lustre.s3, then with the new link"
    if (
        isinstance(paths[0], str)
        and isinstance(paths[1], str)
        and _overlap(paths[0], paths[1], "/")
    ):
        advice = (
            f"{twice} at a link_path other than /"
            if "/" in paths
            else f"give the new link a link_path that overlaps neither, or {twice}"
        )
        return (
            f"FSx refuses an S3 link at {paths[1]} while the one at {paths[0]} exists (their "
            f"file system paths overlap): {advice}"
        )
    if (
        isinstance(repositories[0], str)
        and isinstance(repositories[1], str)
        and _overlap(repositories[0], repositories[1], "/")
    ):
        return (
            f"FSx refuses a link to {repositories[1]} while {repositories[0]} is linked (their "
            f"S3 locations overlap): {twice}"
        )
    return None


def plan(old: Templates, new: Templates) -> list[Change]:
    """What deploying ``new`` over the deployed ``old`` does, resource by resource."""
    return _Planner(old, new).run()


def of(changes: list[Change], *actions: str) -> list[Change]:
    return [c for c in changes if c.action in actions]
