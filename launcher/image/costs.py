"""Whether a build looks before it uploads: what hashing and uploading cost on this machine.

A build whose local index cannot vouch for every file (a fresh checkout, a CI runner, files
inside the racy window) has two ways to go (``launcher.image.patch.lookup``). It can hash the
files it does not know first, work out the content tag and look it up (a HEAD), building only
when the image is absent: when it is absent, the hashing was spent for nothing. Or it can
build the layer and upload it as it is made, and look once the key is known at the end: when
the image was there, the upload was spent for nothing (and the registry was written to). It
hashes first when hashing costs less than that upload would: the worse waste is then the
smaller one, whether or not the image is there, with no guess at how likely it is.

    hashing = (unknown bytes + FILE_COST x unknown files) / hashing rate
    upload  = tar bytes x compression ratio / upload rate

The rates are this machine's own, measured and kept in the user's cache (``costs.json``):

- the upload rate to each registry host: the bytes of the last ``KEEP`` uploads of at least
  ``MIN_UPLOAD`` bytes over the seconds their requests took (the chunks' PATCHes and the
  closing PUT, each from its first byte to the registry's answer: the link, not the time the
  layer took to make); ``UPLOAD_RATE_ENV`` (``LAUNCHER_UPLOAD_RATE=10MB/s``) overrides it;
- the hashing rate: the work of the last hash-first passes over their seconds, a file counted
  as ``FILE_COST`` bytes more (opening, reading and closing a file cost about what hashing
  10 KiB does: here 256 MiB in one file hashed in 0.24 s, 50,000 files of 4 KiB in 0.62 s).

The choice asks for what it needs in order, each only if it still hangs on it: hashing that
costs less than reading the samples below is done at once (one file changed); hashing that
costs more than uploading the layer uncompressed is not; where hashing first would take
``ASK_SECONDS`` or more, the registry is asked whether the repository holds any image at
all (one GET of its tag list: a new repository cannot hold this one, and the build goes
straight on, as a cold build always did); last, the compression ratio, the workspace's own:
the first ``SAMPLE_BYTES`` of its ``SAMPLES`` largest unknown files through zlib at level 1
(a little less tight than gzip -6 or zstd -3, so the upload is if anything overestimated),
weighted by their sizes.

Until a rate is measured, the defaults stand: an uplink of ``DEFAULT_UPLOAD`` (100 Mbit/s)
and hashing at ``DEFAULT_HASHING`` (half of this machine's, for one without SHA
instructions). With them a fresh machine hashes first unless the files are very many and
compress well, which is the CI runner's case: its cache is new every run, and the image it
builds is usually there already. Losing the file costs the defaults.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import operator
import os
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from launcher import cache
from launcher.errors import UsageError
from launcher.image.workspace import Entry

UPLOAD_RATE_ENV = "LAUNCHER_UPLOAD_RATE"
DEFAULT_UPLOAD = 12.5e6  # bytes a second: a 100 Mbit/s uplink
DEFAULT_HASHING = 500e6  # bytes a second: sha256 with SHA-NI, files in the page cache
FILE_COST = 10 << 10  # bytes of hashing that opening, reading and closing a file costs
TAR_HEADER = 512  # tar bytes an entry adds besides its content
SAMPLES = 16  # files sampled for the compression ratio, the largest
SAMPLE_BYTES = 64 << 10  # read from each
MIN_UPLOAD = 1 << 20  # smaller uploads are mostly round trips: no measure of the link
MIN_HASHING = 4 << 20  # less hashing work than this is timed too coarsely to keep
KEEP = 8  # samples kept of each kind (per registry host for uploads)
# Hashing first that takes longer than this is worth a question first: does the repository
# hold any image at all (one GET; a repository that holds none cannot hold this one)?
ASK_SECONDS = 0.05
VERSION = 1
_RATE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmg]?)(b|bit|)(?:/s|ps)?", re.IGNORECASE)
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}
Sample = tuple[float, float]  # (an amount, the seconds it took)


def upload_rate_setting(environ: Mapping[str, str] = os.environ) -> float | None:
    """The upload rate the user set (bytes a second), None when unset; UsageError when it is
    not a rate. Decimal prefixes; ``B`` bytes, ``bit`` or ``b`` bits: ``12500000``,
    ``12.5M``, ``12.5MB/s``, ``100Mbit/s`` are one rate."""
    text = environ.get(UPLOAD_RATE_ENV, "").strip()
    if not text:
        return None
    found = _RATE.fullmatch(text)
    rate = 0.0
    if found is not None:
        number, prefix, unit = found.groups()
        bits = unit.lower() == "bit" or unit == "b"
        rate = float(number) * _PREFIX[prefix.lower()] / (8 if bits else 1)
    if rate <= 0:
        raise UsageError(
            f"{UPLOAD_RATE_ENV}={text!r}: not an upload rate; say bytes a second "
            "(12500000, 12.5MB/s) or bits (100Mbit/s)"
        )
    return rate


@dataclass(frozen=True)
class Rates:
    upload: float  # bytes a second to the registry
    hashing: float  # bytes a second, a file counted as FILE_COST bytes more


def hashing_seconds(files: int, size: int, rates: Rates) -> float:
    return (size + FILE_COST * files) / rates.hashing


def hash_first(
    unknown_files: int,
    unknown_bytes: int,
    tar_bytes: Callable[[], int],
    rates: Rates,
    ratio: Callable[[], float],
    holds_images: Callable[[], bool] = lambda: True,
) -> bool:
    """Whether to hash the unknown files and look the image up before building: when that
    costs no more than uploading the workspace's full layer of about ``tar_bytes()``
    compressed by ``ratio()``, and, where hashing takes ``ASK_SECONDS`` or more, the
    repository ``holds_images()`` at all. Each is asked only when the choice hangs on it."""
    hashing = hashing_seconds(unknown_files, unknown_bytes, rates)
    if hashing <= hashing_seconds(SAMPLES, SAMPLES * SAMPLE_BYTES, rates):
        return True  # cheaper than finding out what the upload would cost
    uncompressed = tar_bytes() / rates.upload
    if hashing > uncompressed:
        return False  # dearer than the upload even of a layer that does not compress
    if hashing >= ASK_SECONDS and not holds_images():
        return False  # a repository that holds no image cannot hold this one
    return hashing <= uncompressed * ratio()


def tar_bytes(entries: Sequence[Entry]) -> int:
    """About the size of a layer's tar of ``entries``."""
    return sum(e.size for e in entries) + TAR_HEADER * len(entries)


def sampled_ratio(root: str, files: Sequence[Entry]) -> float:
    """Compressed bytes per byte of the ``SAMPLES`` largest of ``files``, from their first
    ``SAMPLE_BYTES`` each through zlib at level 1, weighted by the files' sizes; 1.0 when
    none could be read (a file that went is the build's to report)."""
    weighted = total = 0.0
    for e in heapq.nlargest(SAMPLES, files, key=_SIZE):
        try:
            fd = os.open(os.path.join(root, e.path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                data = os.read(fd, SAMPLE_BYTES)
            finally:
                os.close(fd)
        except OSError:
            continue
        if data:
            weighted += e.size * len(zlib.compress(data, 1)) / len(data)
            total += e.size
    return min(weighted / total, 1.0) if total else 1.0


_SIZE = operator.attrgetter("size")


def _rate(samples: Iterable[Sample], default: float) -> float:
    """Sum of the amounts over sum of the durations, ``default`` without any."""
    amount = duration = 0.0
    for a, d in samples:
        amount, duration = amount + a, duration + d
    return amount / duration if amount > 0 and duration > 0 else default


def _samples(value: object) -> list[Sample]:
    """Pairs of positive numbers from JSON, the last ``KEEP``; anything else dropped."""
    if not isinstance(value, list):
        return []
    found = []
    for item in value:
        if (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) and x > 0 for x in item)
        ):
            found.append((float(item[0]), float(item[1])))
    return found[-KEEP:]


def _kept(samples: list[Sample], sample: Sample) -> list[Sample]:
    return [*samples, sample][-KEEP:]


@dataclass
class Measured:
    """What this machine measured: (bytes, seconds) of uploads per registry host, and
    (work, seconds) of hash-first passes."""

    uploads: dict[str, list[Sample]] = field(default_factory=dict)
    hashing: list[Sample] = field(default_factory=list)

    @staticmethod
    def path() -> Path:
        return cache.directory() / "costs.json"

    @classmethod
    def load(cls) -> Measured:
        """The kept measurements; none when the file is missing, damaged or of another
        version (a cache: the defaults stand until the next measurement)."""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            data = json.loads(cls.path().read_bytes())
            if data.get("version") == VERSION:
                uploads = data.get("uploads")
                return cls(
                    {
                        str(host): kept
                        for host, samples in (uploads if isinstance(uploads, dict) else {}).items()
                        if (kept := _samples(samples))
                    },
                    _samples(data.get("hashing")),
                )
        return cls()

    def save(self) -> None:
        data = {"version": VERSION, "uploads": self.uploads, "hashing": self.hashing}
        cache.write_atomically(self.path(), json.dumps(data).encode())

    def rates(self, host: str, upload: float | None = None) -> Rates:
        """The rates for a build to ``host``; ``upload``, when given, is the user's setting."""
        measured = _rate(self.uploads.get(host, ()), DEFAULT_UPLOAD)
        return Rates(
            upload if upload is not None else measured, _rate(self.hashing, DEFAULT_HASHING)
        )


def record_hashing(files: int, size: int, seconds: float) -> None:
    """A hash-first pass over ``files`` holding ``size`` bytes took ``seconds``."""
    work = size + FILE_COST * files
    if work < MIN_HASHING or seconds <= 0:
        return
    measured = Measured.load()
    measured.hashing = _kept(measured.hashing, (work, seconds))
    measured.save()


@dataclass
class Sent:
    """Bytes sent and seconds the requests that carried them took, as an upload goes."""

    bytes: int = 0
    seconds: float = 0.0

    def add(self, n: int, seconds: float) -> None:
        self.bytes += n
        self.seconds += seconds


def record_upload(host: str, sent: Sent) -> None:
    """An upload to ``host`` went as ``sent`` says (kept when it is big enough to tell)."""
    if sent.bytes < MIN_UPLOAD or sent.seconds <= 0:
        return
    measured = Measured.load()
    measured.uploads[host] = _kept(measured.uploads.get(host, []), (sent.bytes, sent.seconds))
    measured.save()
