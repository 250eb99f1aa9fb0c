app_name = "metrics"
urlpatterns = []
