# The catalog's models move to the catalog app (portal.catalog): state only, the tables stay.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0001_catalog_from_vms'),
        ('clusters', '0016_hosts_and_simulator_to_compute'),
        ('vms', '0006_catalog_version_triggers'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name='CatalogVersion',
                ),
                migrations.RemoveField(
                    model_name='instancetype',
                    name='zones',
                ),
                migrations.AlterField(
                    model_name='virtualmachine',
                    name='instance_type',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to='catalog.instancetype', verbose_name='인스턴스 유형'),
                ),
                migrations.AlterField(
                    model_name='virtualmachine',
                    name='zone',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to='catalog.zone', verbose_name='가용 영역'),
                ),
                migrations.DeleteModel(
                    name='FabricOffering',
                ),
                migrations.DeleteModel(
                    name='InstanceType',
                ),
                migrations.DeleteModel(
                    name='Zone',
                ),
            ],
        ),
    ]
