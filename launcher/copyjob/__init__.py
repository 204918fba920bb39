"""Copy jobs: a base image copied into the cluster's repository next to the registries.

``plan`` (pure: where the job reads the base, its requests), ``run`` (the job on a backend) and
``program`` (what runs in the job, the copier image's command).
"""
