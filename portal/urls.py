from django.contrib import admin
from django.urls import include, path
from django.views.i18n import set_language

from portal.api import pages as api_pages
from portal.api.main import api, api_not_found, swagger_asset
from portal.web import views
from portal.webhooks import views as webhook_views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("project/", views.switch_project, name="switch_project"),
    path("i18n/setlang/", set_language, name="set_language"),
    path("healthz", views.healthz, name="healthz"),
    path("clusters/", include("clusters.urls")),
    path("vms/", include("vms.urls")),
    path("", include("metrics.urls")),
    path("admin/", admin.site.urls),
    path("account/api-tokens/", api_pages.token_list, name="api_tokens"),
    path("account/api-tokens/<int:pk>/revoke/", api_pages.token_revoke, name="api_token_revoke"),
    path("ssh-keys/", api_pages.ssh_key_list, name="ssh_keys"),
    path("ssh-keys/<int:pk>/delete/", api_pages.ssh_key_delete, name="ssh_key_delete"),
    path("webhooks/", webhook_views.webhook_list, name="webhooks"),
    path("webhooks/<int:pk>/", webhook_views.webhook_log, name="webhook_log"),
    path("webhooks/<int:pk>/test/", webhook_views.webhook_test, name="webhook_test"),
    path("webhooks/<int:pk>/delete/", webhook_views.webhook_delete, name="webhook_delete"),
    path("api/v1/docs/assets/<str:name>", swagger_asset, name="api_docs_asset"),
    path("api/v1/", api.urls),
    # Anything else under the API is a problem+json 404, not the console's HTML page.
    path("api/v1/<path:rest>", api_not_found),
]
