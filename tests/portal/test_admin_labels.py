"""Issue 11 item 9 (admin): the Korean admin has no English labels left. Every column,
filter, form field and model name of every registered admin, and the site's header."""

import re

from django.contrib import admin
from django.contrib.admin.utils import get_fields_from_path, label_for_field
from django.contrib.auth import get_user_model
from django.test import RequestFactory
from django.urls import reverse
from django.utils import translation

# Names of things, not words to translate.
PROPER = {"lid", "id", "ip", "guid", "gpu"}
# Raw field names of clusters/models.py and vms/models.py: their verbose names come with the
# lead's migration (listed in the report of this change). Remove a label here when it lands:
# the test insists the set is exactly what is still English, so it cannot go stale.
PENDING: dict = {}


def english(label) -> bool:
    text = str(label)
    return not re.search(r"[가-힣]", text) and text.lower() not in PROPER


def labels_of(model_admin, request):
    model = model_admin.model
    yield model._meta.verbose_name_plural
    names = [*model_admin.get_list_display(request), *model_admin.get_readonly_fields(request)]
    names += model_admin.get_fields(request)
    for name in names:
        if name != "__str__":
            yield label_for_field(name, model, model_admin)
    for entry in model_admin.get_list_filter(request):
        path = entry[0] if isinstance(entry, tuple) else entry
        if isinstance(path, str):
            yield get_fields_from_path(model, path)[-1].verbose_name


def test_no_admin_label_is_english(db):
    request = RequestFactory().get("/admin/")
    request.user = get_user_model().objects.create_superuser("root", password="x")
    found = {}
    with translation.override("ko"):
        for model, model_admin in admin.site._registry.items():
            if model._meta.app_label == "auth":  # Django's own, translated by Django
                continue
            left = {str(label).lower() for label in labels_of(model_admin, request)}
            left = {label for label in left if english(label)}
            if left:
                found[model._meta.label] = left
    assert found == PENDING


def test_the_site_is_named_after_the_product(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    page = client.get(reverse("admin:index"), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "GPU 클라우드 콘솔" in page and "Django" not in page
