app_name = "vms"
urlpatterns = []
