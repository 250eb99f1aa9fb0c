"""The guest the libvirt backend boots: its image built from Debian's packages (``image``, its
kernel ``kernel``, the build's steps ``steps``), put into a host's storage pool (``install``),
and what each domain is handed — how it boots and its NoCloud seed (``boot``)."""
