"""The cluster stack as values: its outputs (the contract with ``infra``), the cluster they
describe, the secrets and buckets it grants, the instance types it offers, and what its VPC's
default security group lacks.

Pure: no I/O and no imports beyond the standard library and ``launcher.errors``. The CDK app
(``infra``) imports this package, so it stays light.
"""
