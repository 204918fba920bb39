"""Workspace images: values (references, manifests), a layer builder, a registry client, and
the two builders (patch in the registry, or the Docker SDK) composed in ``build``.

May import ``launcher.stack`` (the tag prefixes the repository's lifecycle rules expect) and the
shared modules (errors, progress, cache, docker_client); nothing of jobs or backends: an image
knows nothing of what will run it (an AWS client is passed in, named only as a type)."""
