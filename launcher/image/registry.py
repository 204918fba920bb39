"""A small OCI distribution client: only the calls a patch needs, with auth and retries.

Basic and Bearer (token with pull/push scopes) auth, plain HTTP for loopback registries only,
retries with backoff on 429/5xx and connection errors, one re-authentication on 401. Blob
uploads go in resumable chunks (``launcher.image.upload``); a blob download cut midway goes
on from where it stopped (an HTTP Range request).

The login (and the token it buys) goes only where ``auth.destination`` says: the registry's
own origin and the token service it challenges with. An upload ``Location`` on another host is
followed without it, or refused when that would be plain HTTP; redirects keep requests' own
rule (``Authorization`` dropped on a redirect to another host).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlencode, urlsplit

import requests
import requests.auth
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from launcher.errors import RemoteError
from launcher.image import auth
from launcher.image.manifest import ACCEPT, digest_of, media_type
from launcher.image.reference import is_loopback

RETRIES = 4
RETRIED_STATUSES = (429, 500, 502, 503, 504)
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_STREAM_ERRORS = (
    requests.RequestException,
    urllib3.exceptions.HTTPError,  # a body cut while it is read
)


class RegistryError(RemoteError):
    """A registry call that failed; ``status`` is its HTTP status, None when no answer came."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def transient(self) -> bool:
        """Worth another try: no answer, a throttle, a server error."""
        return self.status is None or self.status in RETRIED_STATUSES


class BearerAuth(requests.auth.AuthBase):
    """A registry token (the distribution spec's token flow) on every request."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.token}"
        return request


class _Anonymous(requests.auth.AuthBase):
    """No login at all: also keeps requests from filling one in from ~/.netrc."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers.pop("Authorization", None)
        return request


ANONYMOUS = _Anonymous()


def _session(retries: int, backoff: float) -> requests.Session:
    """A session whose adapter retries connection errors, 429 and 5xx answers (honouring
    Retry-After) with exponential backoff, on every method: urllib3's ``Retry``."""
    session = requests.Session()
    session.headers["User-Agent"] = "efa-batch-launcher"
    retry = Retry(
        total=retries,
        backoff_factor=backoff,
        status_forcelist=RETRIED_STATUSES,
        allowed_methods=None,  # every call here is safe to repeat (an upload session at worst)
        raise_on_status=False,  # the last answer is returned, and reported with its errors
    )
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class Registry:
    def __init__(
        self,
        host: str,
        credentials: Callable[[], tuple[str, str] | None],
        scopes: Iterable[str] = (),
        backoff: float = 0.5,
    ) -> None:
        self.host = host
        self.base = f"{'http' if is_loopback(host) else 'https'}://{host}"
        self.backoff = backoff
        self.http = _session(RETRIES, backoff)
        # A streamed body cannot be sent twice: uploads go through a session that never retries.
        self.once = _session(0, backoff)
        self._credentials = credentials
        self._scopes = list(scopes)
        self._auth: requests.auth.AuthBase | None = None

    def login(self) -> tuple[str, str] | None:
        """The user's login for this registry, for a program that speaks to it on the user's
        behalf (the Docker engine pulling a base); None without one."""
        return self._credentials()

    # --- transport --------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path_or_url: str,
        *,
        ok: tuple[int, ...] = (200,),
        retry: bool = True,
        **kwargs: Any,
    ) -> requests.Response:
        """One call (retried by the session unless ``retry`` is False); on 401 from the
        registry itself, one authentication and the call again. The login goes only where
        ``auth.destination`` allows."""
        where = auth.destination(self.base, path_or_url)
        url, login = where.url, (self._auth if where.credentials else ANONYMOUS)
        session = self.http if retry else self.once
        for first in (True, False):
            try:
                response = session.request(method, url, auth=login, timeout=(10, 300), **kwargs)
            except requests.RequestException as exc:
                reason = exc.__class__.__name__
                raise RegistryError(f"registry {self.host} unreachable: {reason}") from exc
            if response.status_code == 401 and first and where.credentials:
                self._authenticate(response.headers.get("WWW-Authenticate", ""))
                login = self._auth
                if retry:
                    continue
            break
        if response.status_code not in ok:
            raise self._error(method, url, response)
        return response

    def _error(self, method: str, url: str, response: requests.Response) -> RegistryError:
        detail = ""
        try:
            errors = response.json().get("errors") or []
            detail = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors)
        except ValueError:
            pass
        parts = urlsplit(url)
        path = parts.path if parts.netloc == self.host else f"{parts.netloc}{parts.path}"
        status = response.status_code
        if status in (401, 403):
            return RegistryError(
                f"registry {self.host}: no access for {method} {path} "
                f"(HTTP {status}{': ' + detail if detail else ''})",
                status,
            )
        return RegistryError(
            f"registry {self.host}: {method} {path} failed: HTTP "
            f"{status}{': ' + detail if detail else ''}",
            status,
        )

    def _authenticate(self, challenge: str) -> None:
        scheme = challenge.split(" ", 1)[0].lower()
        creds = self._credentials()
        if scheme == "basic":
            if not creds:
                raise RemoteError(
                    f"registry {self.host} needs credentials (docker login, or "
                    "ECR access through AWS credentials)"
                )
            self._auth = requests.auth.HTTPBasicAuth(*creds)
            return
        if scheme != "bearer":
            raise RemoteError(f"registry {self.host}: unsupported auth challenge {challenge!r}")
        params = dict(_CHALLENGE.findall(challenge))
        if "realm" not in params:
            raise RemoteError(f"registry {self.host}: token challenge without a realm")
        # The realm gets the login because the registry challenged with it (the token spec),
        # over HTTPS only (plain HTTP between loopback hosts): ``auth.destination``.
        realm = auth.destination(self.base, params["realm"], realm=True).url
        query = [("service", params.get("service", ""))]
        query += [("scope", s) for s in self._scopes] or [("scope", params.get("scope", ""))]
        sep = "&" if "?" in realm else "?"
        try:
            response = self.http.get(
                f"{realm}{sep}{urlencode(query)}",
                auth=requests.auth.HTTPBasicAuth(*creds) if creds else ANONYMOUS,
                timeout=(10, 60),
            )
        except requests.RequestException as exc:
            raise RemoteError(f"registry {self.host}: token request failed: {exc}") from exc
        if response.status_code != 200:
            raise RemoteError(
                f"registry {self.host}: token request refused (HTTP {response.status_code})"
            )
        body = response.json()
        self._auth = BearerAuth(body.get("token") or body.get("access_token"))

    # --- manifests --------------------------------------------------------------------------

    def get_manifest(
        self, repo: str, ref: str, accept: str = ACCEPT
    ) -> tuple[bytes, str, str] | None:
        """(raw manifest, its media type, its digest), or None where there is none."""
        response = self.request(
            "GET", f"/v2/{repo}/manifests/{ref}", ok=(200, 404), headers={"Accept": accept}
        )
        if response.status_code == 404:
            return None
        raw = response.content
        digest = digest_of(raw)
        if ref.startswith("sha256:") and digest != ref:
            raise RemoteError(f"registry {self.host}: manifest {ref} arrived with digest {digest}")
        return raw, media_type(raw, response.headers.get("Content-Type")), digest

    def head_manifest(self, repo: str, ref: str, accept: str) -> str | None:
        response = self.request(
            "HEAD", f"/v2/{repo}/manifests/{ref}", ok=(200, 404), headers={"Accept": accept}
        )
        if response.status_code == 404:
            return None
        digest = response.headers.get("Docker-Content-Digest")
        if not digest:  # some registries omit it on HEAD; the body then decides
            found = self.get_manifest(repo, ref, accept)
            return found[2] if found else None
        return digest

    def put_manifest(self, repo: str, ref: str, raw: bytes, media_type: str) -> str:
        response = self.request(
            "PUT",
            f"/v2/{repo}/manifests/{ref}",
            ok=(200, 201),
            data=raw,
            headers={"Content-Type": media_type},
        )
        return response.headers.get("Docker-Content-Digest") or digest_of(raw)

    # --- blobs ------------------------------------------------------------------------------

    def get_blob(self, repo: str, digest: str) -> bytes:
        data = self.request("GET", f"/v2/{repo}/blobs/{digest}").content
        if digest_of(data) != digest:
            raise RemoteError(f"registry {self.host}: blob {digest} arrived corrupted")
        return data

    def stream_blob(self, repo: str, digest: str, attempts: int = RETRIES + 1) -> Iterator[bytes]:
        """The blob's bytes; a download cut midway goes on where it stopped (``Range``)."""
        done, failure = 0, ""
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                headers = {"Range": f"bytes={done}-"} if done else {}
                response = self.request(
                    "GET",
                    f"/v2/{repo}/blobs/{digest}",
                    ok=(200, 206),
                    stream=True,
                    headers=headers,
                )
                skip = done if response.status_code == 200 else 0  # Range not honoured
                for piece in response.iter_content(1 << 20):
                    if skip:
                        dropped = min(skip, len(piece))
                        piece, skip = piece[dropped:], skip - dropped
                    done += len(piece)
                    if piece:
                        yield piece
                return
            except RegistryError as exc:
                if not exc.transient:
                    raise
                failure = str(exc)
            except _STREAM_ERRORS as exc:
                failure = f"registry {self.host}: download cut ({exc.__class__.__name__})"
        raise RegistryError(f"{failure}; gave up on blob {digest} after {attempts} attempts")

    def has_blob(self, repo: str, digest: str) -> bool:
        return self.request("HEAD", f"/v2/{repo}/blobs/{digest}", ok=(200, 404)).status_code == 200

    def mount_blob(self, repo: str, digest: str, source_repo: str) -> str | None:
        """Cross-repository mount; None when mounted, else the upload location it opened."""
        query = urlencode({"mount": digest, "from": source_repo})
        response = self.request("POST", f"/v2/{repo}/blobs/uploads/?{query}", ok=(201, 202))
        return None if response.status_code == 201 else self.location_of(response)

    def cancel_upload(self, location: str) -> None:
        """Give up an upload session (DELETE, OCI distribution spec); gone already is fine."""
        self.request("DELETE", location, ok=(202, 204, 404))

    def start_upload(self, repo: str) -> str:
        return self.location_of(self.request("POST", f"/v2/{repo}/blobs/uploads/", ok=(202,)))

    def location_of(self, response: requests.Response) -> str:
        """The upload's next URL, resolved against the registry; RemoteError now, before a
        byte goes there, when it would be plain HTTP off loopback (``auth.destination``)."""
        location = response.headers.get("Location")
        if not location:
            raise RemoteError(f"registry {self.host}: upload answered without a Location")
        return auth.destination(self.base, location).url
