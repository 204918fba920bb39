"""AWS runtime semantics as executable rules, each citing the AWS text that governs it.

cfn-lint, cdk-nag, the botocore model and moto check syntax and deployment; these rules check
what AWS does with the templates and job definitions at run time. Importing the package
registers every rule in ``tests.rules.registry.RULES``.
"""

from tests.rules import (  # noqa: F401
    compute_rules,
    copy_job_rules,
    copy_rules,
    data_rules,
    job_rules,
    network_rules,
    payload_rules,
    replacer_rules,
    storage_rules,
    update_rules,
)
