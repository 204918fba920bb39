"""Base images made offline (Docker Hub is out of reach): a busybox root file system imported
into Docker and pushed, the same with this machine's Debian Python (the demo's base: a
newcomer's first job is a Python script), and a large base of random layers written straight
into a registry."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    import docker

BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static
APPLETS = (
    "sh",
    "echo",
    "cat",
    "ls",
    "hostname",
    "cut",
    "sleep",
    "sha256sum",
    "stat",
    "env",
    "nc",
    "wc",
    "head",
    "true",
    "false",
    "kill",
    "ps",
    "grep",
)


def busybox_rootfs(extra: Callable[[tarfile.TarFile], None] | None = None) -> bytes:
    buffer = io.BytesIO()
    write_rootfs(buffer, extra)
    return buffer.getvalue()


def write_rootfs(out: BinaryIO, extra: Callable[[tarfile.TarFile], None] | None = None) -> None:
    """The busybox root file system, and what ``extra`` adds, as a tar written to ``out``."""
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name in ("bin", "tmp", "etc"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        tar.add(BUSYBOX, "bin/busybox")
        for applet in APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, "busybox", 0o777
            tar.addfile(info)
        if extra is not None:
            extra(tar)


def import_and_push(
    client: docker.DockerClient,
    rootfs: bytes | Path,
    repository: str,
    tag: str,
    changes: list[str],
) -> None:
    """``docker import`` of the rootfs (bytes, or a tar file), then ``docker push`` (the
    registry is on loopback)."""
    if isinstance(rootfs, Path):
        client.api.import_image_from_file(str(rootfs), repository, tag, changes)
    else:
        client.api.import_image_from_data(rootfs, repository=repository, tag=tag, changes=changes)
    for event in client.api.push(repository, tag=tag, stream=True, decode=True):
        if "error" in event:
            raise RuntimeError(event["error"])


def push_busybox_base(client: docker.DockerClient, repository: str, tag: str = "1") -> None:
    import_and_push(client, busybox_rootfs(), repository, tag, ['CMD ["/bin/sh"]', "ENV PATH=/bin"])


# Debian's Python, as installed on this machine (the Makefile's DEMO_DEBIAN_PACKAGES): the
# interpreter and its standard library, without what a job never imports.
PYTHON = "3.11"
PYTHON_PACKAGES = (
    f"python{PYTHON}-minimal",
    f"libpython{PYTHON}-minimal",
    f"libpython{PYTHON}-stdlib",
)
PYTHON_ROOTS = ("/usr/bin/", f"/usr/lib/python{PYTHON}/", f"/etc/python{PYTHON}/")
# Directories for tests, IDLE, Tk and pip's bootstrap (absent from these packages today, left out
# should a release ship them), and extension modules for CPython's own tests and for NIS, which
# is deprecated and alone pulls in Kerberos (2 MB).
PYTHON_LEFT_OUT = re.compile(
    r"/(test|tests|idlelib|tkinter|turtledemo|ensurepip|__pycache__)/"
    r"|/lib-dynload/(_test\w*|_ctypes_test|_xxtestfuzz|xxlimited\w*|nis)\.cpython"
)


def python_files(packages: tuple[str, ...] = PYTHON_PACKAGES) -> dict[str, str]:
    """What the image takes from the installed ``packages`` (``dpkg -L``): its path there (as
    the package has it) -> this machine's path, files and symlinks only (directories follow)."""
    listed = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        raise RuntimeError(
            f"Debian's Python {PYTHON} is not installed ({listed.stderr.strip()}): "
            f"apt-get install {' '.join(packages)} (make demo does it)"
        )
    files: dict[str, str] = {}
    for path in listed.stdout.splitlines():
        if not path.startswith(PYTHON_ROOTS) or PYTHON_LEFT_OUT.search(path):
            continue
        if os.path.islink(path) or os.path.isfile(path):
            files[path.lstrip("/")] = path
    return files


def shared_libraries(programs: list[str]) -> dict[str, str]:
    """The shared libraries and the dynamic loader that ``programs`` load, as ``ldd`` lists
    them: the path the loader asks for -> the file it resolves to on this machine."""
    listed = subprocess.run(["ldd", *programs], capture_output=True, text=True, check=True)
    found = set(re.findall(r"(?:=> |^\s+)(/\S+\.so[\w.]*)", listed.stdout, re.M))
    return {path.lstrip("/"): os.path.realpath(path) for path in found}


def _add_files(
    tar: tarfile.TarFile,
    files: dict[str, str],
    programs: list[str],
    links: dict[str, str],
    replaced: dict[str, bytes] | None = None,
) -> None:
    """``files`` (image path -> this machine's path), the shared libraries that ``programs``
    and the files' own libraries load, and ``links`` (image path -> link target), sorted, with
    the directories they need; ``replaced``: files' contents to write instead of theirs. A
    package's symlink to a library that the loader also finds by
    its own name (torch/lib/libtorch.so -> libtorch.so.1.13) points there: one copy; one to a
    file of no package listed becomes that file."""
    extensions = sorted(src for src in files.values() if re.search(r"\.so[\w.]*$", src))
    loaded = shared_libraries([*programs, *extensions])
    by_file = {os.path.realpath(src): f"/{name}" for name, src in loaded.items()}
    kept = {os.path.realpath(src) for src in files.values() if not os.path.islink(src)}
    links, files = dict(links), dict(files)
    for name, src in files.items():
        target = os.path.realpath(src)
        if not os.path.islink(src) or name in links or target in kept:
            continue
        if target in by_file:
            links[name] = by_file[target]
        else:  # a library only ever opened by this path (torch's libtorch_global_deps.so)
            files[name] = target
    entries = {**loaded, **files}
    dirs = {str(parent) for name in [*entries, *links] for parent in Path(name).parents}
    for name in sorted(dirs - {".", "bin", "tmp", "etc"}):  # busybox_rootfs made those three
        info = tarfile.TarInfo(name)
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
    for name in sorted({*entries, *links}):
        info = tarfile.TarInfo(name)
        info.mode = 0o777
        if name in links or os.path.islink(entries[name]):
            info.type = tarfile.SYMTYPE
            info.linkname = links.get(name) or os.readlink(entries[name])
            tar.addfile(info)
            continue
        source = entries[name]
        info.size, info.mode = os.path.getsize(source), os.stat(source).st_mode & 0o7777
        if replaced is not None and name in replaced:
            info.size = len(replaced[name])
            tar.addfile(info, io.BytesIO(replaced[name]))
            continue
        with open(source, "rb") as f:
            tar.addfile(info, f)


def _add_python(tar: tarfile.TarFile) -> None:
    links = {"usr/bin/python3": f"python{PYTHON}"}
    _add_files(tar, python_files(), [f"/usr/bin/python{PYTHON}"], links)


def python_rootfs() -> bytes:
    """The busybox root file system plus ``/usr/bin/python3`` (Debian's, from this machine's
    packages) with its standard library and the shared libraries it loads. Sorted, owned by
    root, every time 0: the same machine gives the same bytes, so the same layer digest."""
    return busybox_rootfs(_add_python)


def push_python_base(client: docker.DockerClient, repository: str, tag: str = "1") -> None:
    changes = ['CMD ["/bin/sh"]', "ENV PATH=/usr/bin:/bin"]
    import_and_push(client, python_rootfs(), repository, tag, changes)


# Debian's PyTorch (python3-torch 1.13, CPU, with Gloo: the Makefile's TORCH_BASE_PACKAGES), for
# jobs that run torchrun (TorchX's dist.ddp) on the local engine; bash, which dist.ddp's command
# is run by. Only what ``import torch`` and ``torchrun`` load: the modules of these packages
# and, through ldd, libtorch and its libraries (OpenCV, FFmpeg and more: Debian's libtorch links
# them, so the loader needs them, about 500 MB).
TORCH_PACKAGES = (
    "python3-torch",
    "python3-numpy",
    "python3-typing-extensions",
    "python3-astunparse",  # torch.jit.frontend
    "python3-six",  # astunparse
    "bash",
)
TORCH_SHM_MANAGER = "usr/lib/python3/dist-packages/torch/bin/torch_shm_manager"
TORCH_ROOTS = ("/usr/lib/python3/dist-packages/", "/usr/bin/torchrun", "/bin/bash")
# Compiled tests and headers (torch/bin is 29 MB of C++ test programs besides the shared memory
# manager that ``import torch`` looks for), code generators (torchgen, numpy.f2py,
# numpy.distutils) and type stubs; numpy's own test modules stay (numpy.core imports one).
TORCH_LEFT_OUT = re.compile(
    r"/(test|tests|__pycache__|include|torchgen|f2py|distutils)/|/torch/(share|testing/_internal)/"
    r"|/torch/bin/(?!torch_shm_manager$)"
    r"|\.(pyi|h)$"
)


class NotInstalled(RuntimeError):
    """The Debian packages a base is made from are not installed on this machine."""


def torch_files() -> dict[str, str]:
    """What the torch base adds to the Python base (``python_files``), as that function gives
    it: image path -> this machine's path; symlinks whose target is missing (a package's link
    to a library of a package not installed, such as libtorch-test) are left out."""
    listed = subprocess.run(
        ["dpkg", "-L", *TORCH_PACKAGES], capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        raise NotInstalled(
            f"Debian's PyTorch is not installed ({listed.stderr.strip()}): "
            f"apt-get install --no-install-recommends {' '.join(TORCH_PACKAGES)} "
            "(make test does it)"
        )
    files: dict[str, str] = {}
    for path in listed.stdout.splitlines():
        if not path.startswith(TORCH_ROOTS) or TORCH_LEFT_OUT.search(path):
            continue
        if os.path.exists(path) and not os.path.isdir(path):
            files[path.lstrip("/")] = path
    return files


# Debian's torch 1.13 predates Python 3.11, whose Flag iteration skips the multi-bit and zero
# members: torchrun's Std.from_str then gives None for 0 and 3 (torchrun's --redirects default
# and TorchX's --tee), and every torchrun fails in to_map ("'NoneType' object has no attribute
# 'get'"). PyTorch 2.0 fixed it upstream the same way (``Std(int(v))``).
TORCH_STD = "usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py"
TORCH_STD_BUG = (
    "            for s in Std:\n                if s == v:\n                    return s\n"
)
TORCH_STD_FIX = "            return Std(v)\n"


def _torch_fixes(files: dict[str, str]) -> dict[str, bytes]:
    text = Path(files[TORCH_STD]).read_text()
    if TORCH_STD_BUG not in text:  # another torch: fixed, or changed, and to be looked at
        raise RuntimeError(f"/{TORCH_STD}: Std.from_str is not the one torch 1.13 has")
    return {TORCH_STD: text.replace(TORCH_STD_BUG, TORCH_STD_FIX).encode()}


def _add_torch(tar: tarfile.TarFile) -> None:
    files = {**python_files(), **torch_files()}
    programs = [f"/usr/bin/python{PYTHON}", "/bin/bash", f"/{TORCH_SHM_MANAGER}"]
    links = {"usr/bin/python3": f"python{PYTHON}"}
    _add_files(tar, files, programs, links, _torch_fixes(files))


def torch_rootfs(path: Path) -> None:
    """The Python base's root file system plus Debian's torch, written to ``path`` (over 500
    MB: not held in memory). The same machine gives the same bytes, as for ``python_rootfs``."""
    with open(path, "wb") as f:
        write_rootfs(f, _add_torch)


def push_torch_base(
    client: docker.DockerClient, repository: str, workdir: Path, tag: str = "1"
) -> None:
    """REPOSITORY:TAG, the torch base, by way of a tar in ``workdir`` (deleted once imported)."""
    rootfs = workdir / "torch-rootfs.tar"
    torch_rootfs(rootfs)
    try:
        import_and_push(
            client, rootfs, repository, tag, ['CMD ["/bin/sh"]', "ENV PATH=/usr/bin:/bin"]
        )
    finally:
        rootfs.unlink()


def push_random_base(
    host: str, repository: str, tag: str, layer_mib: list[int], workdir: Path
) -> None:
    """A large base of incompressible layers, written as blobs straight into the registry.

    Each layer is a tar of one random file, gzip'd at level 1 (random data does not shrink),
    spooled to disk so memory stays flat. Pushed with plain HTTP requests, so the launcher's
    own client plays no part in making its benchmark input.
    """
    import gzip
    import hashlib

    import requests

    base = f"http://{host}/v2/{repository}"

    def sha256(path: Path) -> str:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        return f"sha256:{digest.hexdigest()}"

    def put_blob(path: Path) -> tuple[str, int]:
        digest = sha256(path)
        if requests.head(f"{base}/blobs/{digest}", timeout=30).status_code == 200:
            return digest, path.stat().st_size
        location = requests.post(f"{base}/blobs/uploads/", timeout=30).headers["Location"]
        sep = "&" if "?" in location else "?"
        with open(path, "rb") as f:
            requests.put(
                f"{location}{sep}digest={digest}",
                data=f,
                timeout=600,
                headers={"Content-Length": str(path.stat().st_size)},
            ).raise_for_status()
        return digest, path.stat().st_size

    layers: list[dict[str, Any]] = []
    diff_ids: list[str] = []
    rootfs = workdir / "busybox.tar"
    rootfs.write_bytes(busybox_rootfs())
    sources = [rootfs]
    for index, mib in enumerate(layer_mib):
        raw = workdir / f"random{index}.tar"
        data = workdir / f"random{index}.bin"
        with open(data, "wb") as f:
            for _ in range(mib):
                f.write(os.urandom(1 << 20))
        with tarfile.open(raw, "w") as tar:
            tar.add(data, f"data/random{index}.bin")
        data.unlink()
        sources.append(raw)
    for raw in sources:
        diff_ids.append(sha256(raw))
        packed = raw.with_suffix(".tar.gz")
        with open(raw, "rb") as src, gzip.GzipFile(packed, "wb", compresslevel=1, mtime=0) as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        raw.unlink()
        digest, size = put_blob(packed)
        packed.unlink()
        layers.append(
            {
                "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "digest": digest,
                "size": size,
            }
        )
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created_by": "benchmark base"} for _ in diff_ids],
        }
    ).encode()
    config_path = workdir / "config.json"
    config_path.write_bytes(config)
    config_digest, _ = put_blob(config_path)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "digest": config_digest,
                "size": len(config),
            },
            "layers": layers,
        }
    ).encode()
    requests.put(
        f"{base}/manifests/{tag}",
        data=manifest,
        timeout=60,
        headers={"Content-Type": "application/vnd.docker.distribution.manifest.v2+json"},
    ).raise_for_status()
