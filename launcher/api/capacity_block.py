"""A run in a Capacity Block's pool, as the API tells its caller: the block's window while the
job may still run in it (``open_window``: a timeout past its end is refused), and what every
node gets to checkpoint before EC2 ends the block's instances (``checkpoint_environment``),
each with a warning line where the user would otherwise expect what will not happen.

The rules are ``launcher.job.capacity``'s; here they meet the clock, the caller's ``progress``
and the one call that reads a block (``read_block``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from launcher.errors import RemoteError, is_denied
from launcher.job import capacity
from launcher.job.jobspec import JobSpec
from launcher.progress import ProgressFn, say
from launcher.stack.cluster import ClusterInfo

if TYPE_CHECKING:
    from launcher.aws.client import Aws


def read_block(aws: Aws, block_id: str) -> capacity.Lookup:
    """The block's window (one call); a note instead where it cannot be read."""
    if capacity.is_group(block_id):
        return capacity.Lookup(
            block_id,
            note="a group of Capacity Blocks; a job lands in whichever block has room when it "
            "starts, so no one end applies to it before then",
        )
    try:
        return capacity.Lookup(block_id, capacity.Window.of(aws.capacity_reservation(block_id)))
    except RemoteError as exc:
        if is_denied(exc):
            denied = f"this AWS identity may not call {capacity.PERMISSION}"
            return capacity.Lookup(block_id, note=denied)
        return capacity.Lookup(block_id, note=str(exc))


def open_window(
    found: capacity.Lookup | None,
    spec: JobSpec,
    pool_name: str,
    progress: ProgressFn | None = None,
) -> capacity.Window | None:
    """The window of the Capacity Block ``found`` while it has not ended (None: no block, or
    its window could not be read: a warning says so); UsageError when the spec's timeout
    reaches past it."""
    if found is None:
        return None
    if found.window is None:
        say(progress)(
            f"warning: Capacity Block {found.block_id}: {found.note}; the job's timeout is "
            "not checked against its end and no checkpoint signal is set"
        )
        return None
    now = time.time()
    capacity.check_timeout(spec, found.window, now, pool_name)
    return None if found.window.ended(now) else found.window


def checkpoint_environment(
    info: ClusterInfo,
    spec: JobSpec,
    window: capacity.Window,
    progress: ProgressFn | None = None,
) -> dict[str, str]:
    """What every node of a job in the block of ``info``'s pool gets
    (``capacity.environment``), with the names of the queue's compute environments, which the
    prelude's timer compares with the attempt's own; a line where the signal will not come as
    the user may expect."""
    pool = info.current_pool
    fallback = info.pool(pool.fallback).current_pool if pool.fallback else None
    at = capacity.checkpoint_at(spec, window)
    if time.time() >= at:
        say(progress)(
            f"warning: Capacity Block {window.block_id}: the checkpoint time "
            f"({capacity.clock(at)}, --checkpoint-lead before EC2 starts ending the block's "
            f"instances at {capacity.clock(window.stop)}) has passed, so this job gets no "
            "checkpoint signal: in the block it runs until EC2 ends its instances"
        )
    elif pool.compute_environment_name is None:
        say(progress)(
            f"warning: stack {info.stack_name} does not name pool "
            f"{info.pool_name}'s compute environment (it was deployed by an older "
            "version), so the checkpoint signal also reaches an attempt that runs on the "
            "fallback pool before the checkpoint time; deploy the stack again to fix that"
        )
    return capacity.environment(
        spec,
        window,
        pool.compute_environment_name,
        fallback.compute_environment_name if fallback else None,
    )
