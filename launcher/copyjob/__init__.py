"""Copy jobs: a base image copied into the cluster's repository next to the registries.

``plan`` (pure: where the job reads the base, its requests), ``run`` (the job on a backend) and
``program`` (what runs in the job, the copier image's command).

May import the backends' floor's AWS client (the copier logs in to ECR), the backend protocol,
images, the job, the stack and the shared modules; the target and the API import it.
"""
