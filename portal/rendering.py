"""Rendering shared by the apps' HTMX views."""

from django.shortcuts import render


def render_form(request, page, partial, context, status=200):
    """A form page, or for HTMX only its partial; a 422 re-renders the form in place."""
    template = f"{page}#{partial}" if request.htmx else page
    response = render(request, template, context, status=status)
    if status == 422 and request.htmx:
        response["HX-Retarget"] = f"#{partial}"
        response["HX-Reswap"] = "outerHTML"
    return response
