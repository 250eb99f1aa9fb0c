"""Rendering and the frame shared by the apps' HTMX views."""

from collections.abc import Callable
from functools import wraps

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django_htmx.http import HttpResponseClientRedirect

from portal.foundation.kernel import check_perm


def missing_permission(permission: object) -> str:
    """What a control shown disabled to who lacks ``permission`` says ("권한 없음:
    Resource.VirtualCluster.UPDATE"): the action exists, and it is not theirs."""
    return gettext("권한 없음: %(permission)s") % {"permission": permission}


def create_offer(user, project, permission) -> dict:
    """A list's create button: ``can_create``, or ``create_reason`` (a project without the
    permission); without a project, neither (the empty list says why)."""
    can_create = project is not None and user.has_perm(permission, project)
    reason = missing_permission(permission) if project is not None and not can_create else ""
    return {"can_create": can_create, "create_reason": reason}


def render_form(request, page, partial, context, status=200):
    """A form page, or for HTMX only its partial; a 422 re-renders the form in place."""
    template = f"{page}#{partial}" if request.htmx else page
    response = render(request, template, context, status=status)
    if status == 422 and request.htmx:
        response["HX-Retarget"] = f"#{partial}"
        response["HX-Reswap"] = "outerHTML"
    return response


def go_to(request, url):
    """After a change, the page at ``url``: for HTMX the whole page (HX-Redirect), not a swap."""
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def delete_and_list(request, obj, delete, done, list_name):
    """A delete asked on ``obj``'s page: ``delete(obj.pk, actor=…)``, the notice ``done``
    (``%(name)s``: the object's name), then the list named ``list_name`` as a whole page."""
    delete(obj.pk, actor=request.user)
    messages.success(request, done % {"name": obj.name})
    return go_to(request, reverse(list_name))


def create_view(perm, list_url: str, require: Callable[..., None]):
    """A view that creates in the current project: with no project chosen, the list
    (``list_url``); a GET (the form) needs ``perm`` there; a POST is refused, and audited, by
    ``require(actor, project, name)`` before the form is read, whatever it says."""

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            project = request.project
            if project is None:
                return redirect(list_url)
            if request.method == "GET":
                check_perm(request.user, perm, project)
            else:
                require(request.user, project, request.POST.get("name", ""))
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
