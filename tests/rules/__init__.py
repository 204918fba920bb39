"""AWS runtime semantics as executable rules, each citing the AWS page that governs it.

cfn-lint, cdk-nag, the botocore model and moto check syntax and deployment; these rules check
what AWS does with the templates and job definitions at run time.
"""
