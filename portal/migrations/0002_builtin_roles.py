from django.db import migrations

# Frozen copy of portal.permissions.BUILTIN_ROLES as of this migration.
READ = ["Resource.VirtualCluster.READ", "Resource.VirtualMachine.READ"]
ROLES = {
    "viewer": ("모든 리소스 조회", READ),
    "operator": (
        "조회와 시작·중지·연결",
        READ + ["Resource.VirtualCluster.UPDATE", "Resource.VirtualMachine.UPDATE"],
    ),
    "admin": (
        "모든 권한",
        [
            f"Resource.{kind}.{verb}"
            for kind in ("VirtualCluster", "VirtualMachine")
            for verb in ("READ", "CREATE", "UPDATE", "DELETE")
        ],
    ),
}


def create_roles(apps, schema_editor):
    Role = apps.get_model("portal", "Role")
    for name, (description, permissions) in ROLES.items():
        Role.objects.get_or_create(
            name=name, defaults={"description": description, "permissions": permissions}
        )


class Migration(migrations.Migration):
    dependencies = [("portal", "0001_initial")]
    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
