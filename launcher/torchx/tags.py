"""The tags a TorchX app's job carries: TorchX's own ``aws_batch`` keys, so what read them there
(``torchx list``, a team's cost reports, a tracker) finds the same here."""

from __future__ import annotations

# torchx/schedulers/aws_batch_scheduler.py (TorchX 0.7.0): TAG_TORCHX_VER, _APPNAME, _USER.
VERSION = "torchx.pytorch.org/version"
APP_NAME = "torchx.pytorch.org/app-name"
USER = "torchx.pytorch.org/user"
