"""Run every benchmark and print the Markdown tables the README shows."""

from __future__ import annotations

import sys

from bench import base_copy, images, launcher_calls, logs, synth

BENCHES = {
    "synth": synth.run,
    "launcher": launcher_calls.run,
    "logs": logs.run,
    "images": images.run,
    "base_copy": base_copy.run,
}


def main() -> None:
    chosen = sys.argv[1:] or list(BENCHES)
    for name in chosen:
        print(f"## {name}\n\n{BENCHES[name]()}\n", flush=True)


if __name__ == "__main__":
    main()
