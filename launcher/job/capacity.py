"""A Capacity Block's window, and what a job in a pool that runs in one must respect.

A Capacity Block for ML is capacity for a fixed window (its StartDate to its EndDate), and EC2
ends its instances before the end: "Forty minutes before your Capacity Block reservation
ends, you receive another EventBridge event that tells you that any instances running in the
reservation will begin to terminate in 10 minutes" (EC2 user guide, capacity-blocks-monitor
.html). So, for a job in such a pool:

- its ``--timeout`` may not reach past that moment (``check_timeout``): a job killed by EC2
  is not one Batch timed out, and a timeout that cannot be kept is a promise the launcher
  should not accept. Refused, not capped: a capped timeout would change the job in silence.
- every node learns the window's end and when to checkpoint (``environment``), per submit
  (``jobdef.with_submit_environment``): job definitions are named by their content and
  reused (``launcher.job.jobdef``), so a date in one would register a new definition with
  every submit. The prelude's timer
  (``launcher.node.prelude.CHECKPOINT_TIMER``) sends the job's signal at LAUNCHER_CHECKPOINT_AT,
  to an attempt in the block's own compute environment that started before that moment.
  The overrides belong to the SubmitJob, and its retries are attempts of the same job ("The
  retry strategy to use for failed jobs from this SubmitJob operation", botocore's batch
  model, SubmitJob.retryStrategy), so every attempt gets them: a retry on the fallback pool,
  or one that starts after the moment, must not be signalled too.
- the local backend places each attempt as Batch would (``placement``): in the block's
  compute environment while the block can take it, else in the fallback's.

Pure functions. The one call that reads a block (DescribeCapacityReservations) is
``launcher.api.capacity_block.read_block``: its refusal (no ``ec2:DescribeCapacityReservations``,
a throttle) is a note, never a failure of the command.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from launcher.errors import UsageError
from launcher.job.jobspec import MIN_TIMEOUT_SECONDS, JobSpec
from launcher.job.waiting import duration_text

# EC2 starts ending a block's instances this long before its EndDate (see above).
EC2_LEAD_SECONDS = 30 * 60
# States in which the block holds no capacity, now or later (botocore ec2
# CapacityReservationState and CapacityReservation.State: "no longer available for your use",
# "will not be delivered", "Capacity has been released"); tests/aws/test_capacity.py classes every
# state of the model, so a new one cannot pass unnoticed.
ENDED_STATES = frozenset(
    {
        "expired",
        "cancelled",
        "cancelling",
        "failed",
        "payment-failed",
        "unsupported",
        "unavailable",
    }
)
# What each node gets, in its submit's overrides (read by launcher.node.prelude).
BLOCK_ENV = "LAUNCHER_CAPACITY_BLOCK"
WINDOW_START_ENV = "LAUNCHER_WINDOW_START"  # seconds since the epoch
WINDOW_END_ENV = "LAUNCHER_WINDOW_END"  # seconds since the epoch
SIGNAL_ENV = "LAUNCHER_CHECKPOINT_SIGNAL"
CHECKPOINT_AT_ENV = "LAUNCHER_CHECKPOINT_AT"  # seconds since the epoch
# The compute environments of the pool's queue, by name (AWS_BATCH_CE_NAME, which Batch sets
# in every job container to "the name of the compute environment where your job is placed",
# Batch user guide, job_env_vars.html): the block's, where the timer arms, and the fallback's.
BLOCK_CE_ENV = "LAUNCHER_CAPACITY_BLOCK_CE"
FALLBACK_CE_ENV = "LAUNCHER_FALLBACK_CE"
PERMISSION = "ec2:DescribeCapacityReservations"


def is_group(block_id: str) -> bool:
    """A group of Capacity Blocks is named by its ARN; a single block by its ``cr-`` id."""
    return block_id.startswith("arn:")


def clock(epoch: float) -> str:
    """``2026-11-27 18:00 UTC``: a moment as people across time zones read it alike."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


@dataclass(frozen=True)
class Window:
    """One Capacity Block: its id, StartDate and EndDate (seconds since the epoch), State."""

    block_id: str
    start: float
    end: float
    state: str

    @classmethod
    def of(cls, reservation: dict[str, Any]) -> Window:
        """From a DescribeCapacityReservations entry (boto3 gives its dates as datetimes)."""

        def epoch(value: datetime | str) -> float:
            if isinstance(value, str):
                value = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return value.timestamp()

        return cls(
            reservation["CapacityReservationId"],
            epoch(reservation["StartDate"]),
            epoch(reservation["EndDate"]),
            reservation.get("State", ""),
        )

    @property
    def stop(self) -> float:
        """When EC2 starts ending the block's instances."""
        return self.end - EC2_LEAD_SECONDS

    def ended(self, now: float) -> bool:
        return self.state in ENDED_STATES or now >= self.end

    def text(self, now: float) -> str:
        """The window in words: ``active, 5h12m left``, ``starts in 3h00m``, ``ended``."""
        if self.ended(now):
            return f"ended ({clock(self.end)})"
        if now < self.start:
            return f"starts in {duration_text(self.start - now)} ({clock(self.start)})"
        return f"active, {duration_text(self.end - now)} left (ends {clock(self.end)})"

    def longest_timeout(self, now: float) -> int:
        """The longest ``--timeout`` a job submitted now can keep: from now, or from the
        block's start while it has not started, to when EC2 starts ending its instances."""
        return int(self.stop - max(now, self.start))


@dataclass(frozen=True)
class Lookup:
    """A pool's block as read: its window, or a note saying why there is none to show."""

    block_id: str
    window: Window | None = None
    note: str | None = None

    def text(self, now: float) -> str:
        """``Capacity Block cr-...: active, 5h12m left (ends ...)``, or why it is not shown."""
        window = self.window.text(now) if self.window else f"window not shown: {self.note}"
        return f"Capacity Block {self.block_id}: {window}"


def check_timeout(spec: JobSpec, window: Window, now: float, pool: str) -> None:
    """UsageError when the job's timeout reaches past the moment EC2 starts ending the block's
    instances (counted from now, or from the block's start if it has not started)."""
    if spec.timeout_seconds is None or window.ended(now):
        return
    longest = window.longest_timeout(now)
    if spec.timeout_seconds <= longest:
        return
    since = "from now" if now >= window.start else "from the block's start"
    allowed = (
        f"the longest timeout {since} is {duration_text(longest)}"
        if longest >= MIN_TIMEOUT_SECONDS
        else "too little is left of it for any timeout (AWS Batch needs 60s)"
    )
    raise UsageError(
        f"--timeout {duration_text(spec.timeout_seconds)}: pool {pool} "
        f"runs in Capacity Block {window.block_id}, which ends {clock(window.end)}; EC2 ends "
        f"its instances from {clock(window.stop)}, so {allowed}"
    )


def checkpoint_at(spec: JobSpec, window: Window) -> int:
    """When the job's nodes get the checkpoint signal: ``--checkpoint-lead`` before EC2 starts
    ending the block's instances."""
    return int(window.stop) - spec.checkpoint_lead_seconds


def environment(
    spec: JobSpec,
    window: Window,
    block_ce: str | None = None,
    fallback_ce: str | None = None,
) -> dict[str, str]:
    """What every node of a job in the block gets (launcher.node.prelude's timer reads it):
    ``block_ce`` and ``fallback_ce`` name the compute environments of the pool's queue (None:
    a stack too old to name them, or a pool without a fallback)."""
    env = {
        BLOCK_ENV: window.block_id,
        WINDOW_START_ENV: str(int(window.start)),
        WINDOW_END_ENV: str(int(window.end)),
        SIGNAL_ENV: spec.checkpoint_signal,
        CHECKPOINT_AT_ENV: str(checkpoint_at(spec, window)),
    }
    if block_ce:
        env[BLOCK_CE_ENV] = block_ce
    if fallback_ce:
        env[FALLBACK_CE_ENV] = fallback_ce
    return env


def placement(env: Mapping[str, str], now: float) -> str | None:
    """The compute environment Batch places an attempt of a job in the block in when it starts
    at ``now``, from the job's ``environment``: the block's from its start until EC2 starts
    ending its instances, the fallback's (the queue's next, infra.compute_pool ``add_queue``) before
    and after; None for a job outside a block, or when the stack names no compute environment.
    What the local backend gives an attempt as AWS_BATCH_CE_NAME."""
    block = env.get(BLOCK_CE_ENV)
    if not block:
        return None
    window = Window(
        env.get(BLOCK_ENV, ""),
        float(env.get(WINDOW_START_ENV, "0")),
        float(env.get(WINDOW_END_ENV, "0")),
        "active",
    )
    if window.start <= now < window.stop:
        return block
    return env.get(FALLBACK_CE_ENV) or block
