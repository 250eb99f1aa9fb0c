from django.contrib import admin
from django.urls import include, path
from django.views.i18n import set_language

from portal import views

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
]
