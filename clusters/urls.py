app_name = "clusters"
urlpatterns = []
