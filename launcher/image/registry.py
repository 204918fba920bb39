"""A small OCI distribution client: only the calls a patch needs, with auth and retries.

Basic and Bearer (token with pull/push scopes) auth, plain HTTP for loopback registries only,
retries with backoff on 429/5xx and connection errors, one re-authentication on 401. Blob
uploads are monolithic: POST, one streamed PATCH, PUT ?digest= (ECR mishandles multi-chunk).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from urllib.parse import urlencode, urljoin

import requests

from launcher.errors import RemoteError
from launcher.image.manifest import ACCEPT, digest_of, media_type
from launcher.image.reference import is_loopback

RETRIES = 4
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


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
        self.http = requests.Session()
        self.http.headers["User-Agent"] = "efa-batch-launcher"
        self._credentials = credentials
        self._scopes = list(scopes)
        self._auth: str | None = None
        self._backoff = backoff
        self.requests = 0
        self.uploaded = 0

    # --- transport --------------------------------------------------------------------------

    def _send(self, method: str, url: str, **kwargs) -> requests.Response:
        headers = dict(kwargs.pop("headers", {}))
        if self._auth:
            headers["Authorization"] = self._auth
        self.requests += 1
        try:
            return self.http.request(method, url, headers=headers, timeout=(10, 300), **kwargs)
        except requests.RequestException as exc:
            reason = exc.__class__.__name__
            raise RemoteError(f"registry {self.host} unreachable: {reason}") from exc

    def request(
        self,
        method: str,
        path_or_url: str,
        *,
        ok: tuple[int, ...] = (200,),
        retry: bool = True,
        **kwargs,
    ) -> requests.Response:
        url = path_or_url if "://" in path_or_url else self.base + path_or_url
        reauthed = False
        attempt = 0
        while True:
            try:
                response = self._send(method, url, **kwargs)
            except RemoteError:
                if not retry or attempt >= RETRIES:
                    raise
                attempt += 1
                time.sleep(self._backoff * 2**attempt)
                continue
            if response.status_code == 401 and not reauthed:
                reauthed = True
                self._authenticate(response.headers.get("WWW-Authenticate", ""))
                if retry:
                    continue
            if response.status_code in ok:
                return response
            if (
                retry
                and (response.status_code == 429 or response.status_code >= 500)
                and (attempt < RETRIES)
            ):
                attempt += 1
                time.sleep(self._backoff * 2**attempt)
                continue
            raise self._error(method, url, response)

    def _error(self, method: str, url: str, response: requests.Response) -> RemoteError:
        detail = ""
        try:
            errors = response.json().get("errors") or []
            detail = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors)
        except ValueError:
            pass
        path = url.split(self.host, 1)[-1].split("?", 1)[0]
        if response.status_code in (401, 403):
            return RemoteError(
                f"registry {self.host}: no access for {method} {path} "
                f"(HTTP {response.status_code}{': ' + detail if detail else ''})"
            )
        return RemoteError(
            f"registry {self.host}: {method} {path} failed: HTTP "
            f"{response.status_code}{': ' + detail if detail else ''}"
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
            self._auth = requests.auth._basic_auth_str(*creds)
            return
        if scheme != "bearer":
            raise RemoteError(f"registry {self.host}: unsupported auth challenge {challenge!r}")
        params = dict(_CHALLENGE.findall(challenge))
        query = [("service", params.get("service", ""))]
        query += [("scope", s) for s in self._scopes] or [("scope", params.get("scope", ""))]
        self.requests += 1
        try:
            response = self.http.get(
                f"{params['realm']}?{urlencode(query)}", auth=creds or None, timeout=(10, 60)
            )
        except (requests.RequestException, KeyError) as exc:
            raise RemoteError(f"registry {self.host}: token request failed: {exc}") from exc
        if response.status_code != 200:
            raise RemoteError(
                f"registry {self.host}: token request refused (HTTP {response.status_code})"
            )
        body = response.json()
        self._auth = f"Bearer {body.get('token') or body.get('access_token')}"

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

    def stream_blob(self, repo: str, digest: str) -> Iterator[bytes]:
        response = self.request("GET", f"/v2/{repo}/blobs/{digest}", stream=True)
        yield from response.iter_content(1 << 20)

    def has_blob(self, repo: str, digest: str) -> bool:
        return self.request("HEAD", f"/v2/{repo}/blobs/{digest}", ok=(200, 404)).status_code == 200

    def mount_blob(self, repo: str, digest: str, source_repo: str) -> str | None:
        """Cross-repository mount; None when mounted, else the upload location it opened."""
        query = urlencode({"mount": digest, "from": source_repo})
        response = self.request("POST", f"/v2/{repo}/blobs/uploads/?{query}", ok=(201, 202))
        return None if response.status_code == 201 else self._location(response)

    def cancel_upload(self, location: str) -> None:
        """Give up an upload session (DELETE, OCI distribution spec); gone already is fine."""
        self.request("DELETE", location, ok=(202, 204, 404))

    def start_upload(self, repo: str) -> str:
        return self._location(self.request("POST", f"/v2/{repo}/blobs/uploads/", ok=(202,)))

    def upload(
        self,
        location: str,
        chunks: Iterable[bytes],
        digest: Callable[[], str],
        on_chunk: Callable[[int], None] = lambda n: None,
    ) -> str:
        """One streamed PATCH, then PUT ?digest= (known only once the stream is consumed)."""

        def counted() -> Iterator[bytes]:
            for chunk in chunks:
                self.uploaded += len(chunk)
                on_chunk(len(chunk))
                yield chunk

        response = self.request(
            "PATCH",
            location,
            ok=(202,),
            retry=False,
            data=counted(),
            headers={"Content-Type": "application/octet-stream"},
        )
        return self.finish_upload(self._location(response), digest())

    def finish_upload(self, location: str, digest: str, data: bytes = b"") -> str:
        sep = "&" if "?" in location else "?"
        self.uploaded += len(data)
        self.request(
            "PUT",
            f"{location}{sep}{urlencode({'digest': digest})}",
            ok=(201,),
            data=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        return digest

    def put_blob(self, repo: str, data: bytes) -> str:
        """Small blobs (configs) in one monolithic POST + PUT."""
        return self.finish_upload(self.start_upload(repo), digest_of(data), data)

    def _location(self, response: requests.Response) -> str:
        location = response.headers.get("Location")
        if not location:
            raise RemoteError(f"registry {self.host}: upload answered without a Location")
        return urljoin(self.base + "/", location)
