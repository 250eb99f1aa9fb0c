from django.urls import path

from vms import views

app_name = "vms"
urlpatterns = [
    path("", views.vm_list, name="vm_list"),
    path("new/", views.vm_create, name="vm_create"),
    path("<int:pk>/", views.vm_edit, name="vm_edit"),
    path("<int:pk>/cluster/", views.vm_cluster, name="vm_cluster"),
    path("<int:pk>/status/", views.vm_status, name="vm_status"),
    path("<int:pk>/start/", views.vm_start, name="vm_start"),
    path("<int:pk>/stop/", views.vm_stop, name="vm_stop"),
    path("<int:pk>/delete/", views.vm_delete, name="vm_delete"),
]
