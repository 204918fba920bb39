"""The development environment: the services the demo, the benchmarks and the tests run
against, all real programs on 127.0.0.1, and the tools around them; none of it is part of
what the project ships.

- ``emulator``: an emulated AWS, moto in server mode reached over HTTP; the launcher talks to
  it through ``AWS_ENDPOINT_URL`` exactly as to AWS. ``deploy`` creates synthesized stacks in
  it through CloudFormation. ``python -m devenv.emulator PORT`` serves one until killed.
- ``moto_gaps``: where moto differs from AWS and the smallest change that lets the real
  templates deploy, one function and one comment per gap; and the parts a real cluster plays
  (starting, logging and ending held Batch jobs).
- ``registry_server``: the reference distribution registry (Debian's ``docker-registry``),
  with its access log read back as requests.
- ``docker_engine``: the Docker engine ``DOCKER_HOST`` names, or a private ``dockerd``.
- ``images``: base images made offline (Docker Hub is out of reach): a busybox root file
  system imported and pushed, and a large base of random layers written into a registry.
- ``synth``: the CDK app synthesized in this process, its cloud assembly on disk.
- ``clusters``: ``ClusterInfo`` values with no stack behind them (the outputs' examples).
- ``host_python``, ``local_run``, ``traffic``: a launcher run on the local backend with this
  machine's Python mounted into the copier, its TCP bytes counted by strace.
- ``processes``: free ports on 127.0.0.1, waiting for readiness, stopping by pid, and
  ``DEVENV_SERVICES``: what (``moto``, ``registry``, ``docker``, ``cdk``) a process and its
  children may start; unset, everything.

The launcher distribution does not include this package (pyproject's ``packages.find`` names
only what ships); the demo, ``bench/`` and ``tests/`` run it from the source tree. It never
imports ``tests``: test-only helpers live in ``tests/support`` and import from here.
"""
