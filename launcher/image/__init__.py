"""Workspace images: values (references, manifests), a layer builder, a registry client, and
the two builders (patch in the registry, or the Docker SDK) composed in ``build``."""
