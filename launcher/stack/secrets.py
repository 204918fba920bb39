"""Secrets for jobs: what ``--secret NAME=SECRET`` names, and which ones a stack allows.

A job never sees a secret's value in its job definition, its environment or a log: Batch's
``secrets`` (``{"name": ENV, "valueFrom": REFERENCE}``) makes the ECS agent read the value
with the execution role and hand it to the container at start. The stack decides what may be
read (``job_secrets``: name prefixes or ARNs, ``infra/data_access.py`` grants exactly those),
and the launcher refuses any other reference before anything is uploaded. Pure: no I/O.

References (``SECRET`` in ``--secret NAME=SECRET``):

- ``NAME`` or ``NAME#KEY``: a Secrets Manager secret of the stack's account and Region by
  name (``#KEY``: one key of its JSON value);
- ``arn:...:secretsmanager:...:secret:NAME-AbCdEf[#KEY]``, or with Batch's own
  ``:json-key:version-stage:version-id`` suffix;
- ``ssm:NAME``: a Systems Manager parameter (``ssm:/team/token``), or its ARN.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass

# Secrets Manager secret names: 1-512 of letters, digits and /_+=.@- (CreateSecret Name).
_SECRET_NAME = re.compile(r"^[A-Za-z0-9/_+=.@-]{1,512}$")
# Secrets Manager appends "-" and six random characters to a name to make its ARN
# ("Secrets Manager automatically adds a hyphen and six random characters after the secret
# name at the end of the ARN", CreateSecret).
_SUFFIX = re.compile(r"-[A-Za-z0-9]{6}$")
# Parameter Store names: letters, digits and ._-/ , up to 1011 characters (PutParameter Name).
_PARAMETER_NAME = re.compile(r"^/?[A-Za-z0-9_.\-/]{1,1011}$")
_JSON_KEY = re.compile(r"^[^:#\s]{1,256}$")
_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):(?P<service>secretsmanager|ssm):(?P<region>[a-z0-9-]+):"
    r"(?P<account>\d{12}):(?P<resource>.+)$"
)
SSM_PREFIX = "ssm:"
FORMAT = "NAME[#KEY], a Secrets Manager ARN, ssm:PARAMETER or a parameter ARN"


class SecretError(ValueError):
    """A malformed reference or grant; the message says what is allowed."""


class Store(str, enum.Enum):
    SECRETS_MANAGER = "secretsmanager"
    PARAMETER_STORE = "ssm"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Place:
    """Where references without an ARN live: the stack's partition, Region and account."""

    partition: str
    region: str
    account: str


@dataclass(frozen=True)
class SecretRef:
    """One secret a job reads, as ``--secret`` gave it."""

    store: Store
    name: str  # a secret's name (suffix and all, when given by ARN) or a parameter's name
    arn: str | None = None  # as given, without a JSON key or version fields
    json_key: str | None = None
    version: str = "::"  # Batch's ":version-stage:version-id" (empty: the current version)
    region: str | None = None  # from the ARN; None: the stack's
    account: str | None = None

    @classmethod
    def parse(cls, text: str) -> SecretRef:
        text, _, key = text.partition("#")
        if key and not _JSON_KEY.match(key):
            raise SecretError(f"{text}#{key}: #KEY must be a JSON key without ':' or spaces")
        found = _ARN.match(text)
        if found:
            return cls._from_arn(text, found, key or None)
        if text.startswith(SSM_PREFIX):
            name = text.removeprefix(SSM_PREFIX)
            if not _PARAMETER_NAME.match(name) or key:
                raise SecretError(f"{text!r}: not a parameter name ({FORMAT})")
            return cls(Store.PARAMETER_STORE, name)
        if not _SECRET_NAME.match(text):
            raise SecretError(f"{text!r}: not a secret name or ARN ({FORMAT})")
        if _SUFFIX.search(text):
            # A name that looks like an ARN's suffix cannot be told from a partial ARN.
            raise SecretError(
                f"{text!r}: a name ending in '-' and six characters is ambiguous to Secrets "
                "Manager; give the secret's full ARN"
            )
        return cls(Store.SECRETS_MANAGER, text, json_key=key or None)

    @classmethod
    def _from_arn(cls, text: str, found: re.Match[str], key: str | None) -> SecretRef:
        store = Store(found["service"])
        where = {"region": found["region"], "account": found["account"]}
        resource = found["resource"]
        if store is Store.PARAMETER_STORE:
            if not resource.startswith("parameter/") or key:
                raise SecretError(f"{text!r}: an SSM ARN names a parameter/... ({FORMAT})")
            name = resource.removeprefix("parameter/")
            return cls(store, name, arn=text, **where)
        if not resource.startswith("secret:"):
            raise SecretError(f"{text!r}: a Secrets Manager ARN names a secret:... ({FORMAT})")
        # Batch's form: secret:NAME[:json-key:version-stage:version-id] (two or five fields;
        # "you must include the colons", Batch user guide, specifying-sensitive-data-secrets).
        fields = resource.split(":")
        if len(fields) not in (2, 5):
            raise SecretError(
                f"{text!r}: after secret:NAME give all three of :json-key:version-stage:"
                "version-id (empty ones too) or none"
            )
        if len(fields) == 5 and key:
            raise SecretError(f"{text!r}: give the JSON key once (#KEY or :json-key:)")
        if len(fields) == 5 and fields[3] and fields[4]:
            raise SecretError(f"{text!r}: a version stage or a version id, not both")
        name = fields[1]
        if not _SECRET_NAME.match(name):
            raise SecretError(f"{text!r}: not a secret name ({FORMAT})")
        arn = text.rsplit(":", 3)[0] if len(fields) == 5 else text
        json_key = (fields[2] or None) if len(fields) == 5 else key
        version = f":{fields[3]}:{fields[4]}" if len(fields) == 5 else "::"
        return cls(store, name, arn=arn, json_key=json_key, version=version, **where)

    @property
    def secret_name(self) -> str:
        """The name grants match: a secret's without its ARN suffix, a parameter's without
        its leading '/'."""
        if self.store is Store.PARAMETER_STORE:
            return self.name.lstrip("/")
        return _SUFFIX.sub("", self.name) if self.arn else self.name

    def value_from(self, place: Place) -> str:
        """Batch's ``valueFrom``: always an ARN (a name becomes the partial ARN Secrets Manager
        resolves; a Secrets Manager reference must be an ARN: "the full Amazon Resource Name
        (ARN) of the Secrets Manager secret", Batch API, Secret)."""
        base = self.arn or self._arn_in(place)
        if self.store is Store.PARAMETER_STORE:
            return base
        if self.json_key is None and self.version == "::":
            return base
        return f"{base}:{self.json_key or ''}{self.version}"

    def _arn_in(self, place: Place) -> str:
        head = f"arn:{place.partition}:{self.store.value}:{place.region}:{place.account}"
        if self.store is Store.PARAMETER_STORE:
            return f"{head}:parameter/{self.name.lstrip('/')}"
        return f"{head}:secret:{self.name}"

    def where(self, place: Place) -> tuple[str, str]:
        return (self.region or place.region, self.account or place.account)


@dataclass(frozen=True)
class SecretGrant:
    """One ``job_secrets`` entry: a name prefix (``team/``, ``ssm:/team/``) or an exact ARN."""

    store: Store
    prefix: str | None = None  # a name prefix in the stack's account and Region
    arn: str | None = None  # one secret or parameter, anywhere

    @classmethod
    def parse(cls, text: str) -> SecretGrant:
        found = _ARN.match(text)
        if found:
            ref = SecretRef.parse(text)
            if ref.json_key or ref.version != "::":
                raise SecretError(f"{text!r}: grant the secret's ARN, without key or version")
            if ref.store is Store.SECRETS_MANAGER and not _SUFFIX.search(ref.name):
                raise SecretError(
                    f"{text!r}: a complete secret ARN ends in '-' and the six characters "
                    "Secrets Manager appends; or grant the name as a prefix"
                )
            return cls(ref.store, arn=text)
        store = Store.SECRETS_MANAGER
        if text.startswith(SSM_PREFIX):
            store, text = Store.PARAMETER_STORE, text.removeprefix(SSM_PREFIX)
        pattern = _PARAMETER_NAME if store is Store.PARAMETER_STORE else _SECRET_NAME
        if not text or not pattern.match(text):
            raise SecretError(
                f"{text!r}: allowed: a Secrets Manager name prefix, ssm:PARAMETER_PREFIX, or a "
                "secret's or parameter's ARN"
            )
        return cls(store, prefix=text)

    def __str__(self) -> str:
        if self.arn:
            return self.arn
        return (SSM_PREFIX if self.store is Store.PARAMETER_STORE else "") + (self.prefix or "")

    def iam_resource(self, place: Place) -> str:
        """The IAM resource this grant covers (a prefix: every name that starts with it)."""
        if self.arn:
            return self.arn
        head = f"arn:{place.partition}:{self.store.value}:{place.region}:{place.account}"
        if self.store is Store.PARAMETER_STORE:
            return f"{head}:parameter/{self.name_prefix}*"
        return f"{head}:secret:{self.name_prefix}*"

    def region(self, place: Place) -> str:
        found = _ARN.match(self.arn) if self.arn else None
        return found["region"] if found else place.region

    def allows(self, ref: SecretRef, place: Place) -> bool:
        if ref.store is not self.store:
            return False
        if self.arn:  # the one secret, by its ARN or (where it lives) by its name
            granted = SecretRef.parse(self.arn)
            return ref.where(place) == granted.where(place) and (
                ref.arn == granted.arn or ref.secret_name == granted.secret_name
            )
        return ref.where(place) == (place.region, place.account) and (
            ref.secret_name.startswith(self.name_prefix)
        )

    @property
    def name_prefix(self) -> str:
        """The prefix as names are compared and ARNs spelled (a parameter's without its '/')."""
        prefix = self.prefix or ""
        return prefix.lstrip("/") if self.store is Store.PARAMETER_STORE else prefix


def parse_grants(entries: Iterable[str]) -> tuple[SecretGrant, ...]:
    return tuple(SecretGrant.parse(e) for e in entries)


def allowed(ref: SecretRef, grants: Iterable[SecretGrant], place: Place) -> bool:
    return any(g.allows(ref, place) for g in grants)
