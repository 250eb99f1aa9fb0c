"""ssh-keys: a project's SSH public keys — list, read, register, delete.

Reads go through ``restrict()`` / ``readable()`` (another project's key is a 404); a change is
one call of ``portal.iam.ssh_keys``, audited there. A key is data of the project, not
infrastructure: registering one answers 201 with the key, deleting one 204, with no Operation.
"""

from django.http import HttpResponse
from ninja import Query, Router, Status

from portal.api import pagination
from portal.api.common import actor, api_headers, path_id, project
from portal.api.inputs import SshKeyCreateIn
from portal.api.schemas import SshKeyOut, SshKeyPage, read
from portal.foundation.errors.ssh_keys import SshKeyNotFound
from portal.iam import ssh_keys
from portal.iam.permissions import Perm
from portal.models import SshKey, readable

router = Router(tags=["ssh-keys"])
ORDERS = pagination.orders("name", "created_at")


class SshKeyFilters(pagination.PageRequest):
    order_by: str = "name"


@router.get("/ssh-keys", response=SshKeyPage, summary="SSH 키 목록")
def list_ssh_keys(request, filters: Query[SshKeyFilters]):
    keys = SshKey.objects.restrict(actor(request), Perm.SSH_KEY_READ)
    return read(SshKeyPage, pagination.page(keys, ORDERS, filters))


@router.get("/ssh-keys/{int:key_id}", response=SshKeyOut, summary="SSH 키")
def get_ssh_key(request, key_id: int):
    return read(SshKeyOut, readable(actor(request), Perm.SSH_KEY_READ, SshKey).get_or_404(key_id))


@router.post("/ssh-keys", response={201: SshKeyOut}, summary="SSH 키 등록")
def create_ssh_key(request, payload: SshKeyCreateIn):
    """Register one public key (``ssh-ed25519``, or ``ssh-rsa`` of 2048 bits or more; one
    line of an OpenSSH ``.pub`` file, up to 16 KB) in the token's project. A key refused
    (options, a second key, a line break, another type …) is not saved: 422 with its code."""
    key = ssh_keys.create_ssh_key(
        actor=actor(request),
        project=project(request),
        name=payload.name,
        public_key=payload.public_key,
    )
    return Status(201, read(SshKeyOut, key))


@router.delete("/ssh-keys/{int:key_id}", response={204: None}, summary="SSH 키 삭제")
def delete_ssh_key(request, key_id: int):
    """The VMs that carried the key no longer get it in their seed from their next start."""
    ssh_keys.delete_ssh_key(path_id(key_id, SshKeyNotFound), actor=actor(request))
    done = HttpResponse(status=204)
    del done["Content-Type"]  # no content, of no type
    return api_headers(done)
