# The hosts' and the simulator's models move to the compute app (portal.compute, whose 0001
# takes them over), the catalog's to the catalog app: state only, the tables stay.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0001_catalog_from_vms'),
        ('clusters', '0015_live_cluster_tally_project_deleted'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='gpuhost',
                    name='zone',
                ),
                migrations.RemoveField(
                    model_name='placement',
                    name='host',
                ),
                migrations.RemoveField(
                    model_name='placement',
                    name='domain_host',
                ),
                migrations.RemoveField(
                    model_name='hostdevice',
                    name='host',
                ),
                migrations.RemoveField(
                    model_name='hostdevice',
                    name='placement',
                ),
                migrations.RemoveField(
                    model_name='placement',
                    name='cluster',
                ),
                migrations.RemoveField(
                    model_name='placement',
                    name='vm',
                ),
                migrations.RemoveField(
                    model_name='simulatorallocation',
                    name='capacity',
                ),
                migrations.RemoveField(
                    model_name='simulatorallocation',
                    name='cluster',
                ),
                migrations.RemoveField(
                    model_name='simulatorcapacity',
                    name='instance_type',
                ),
                migrations.RemoveField(
                    model_name='simulatorcapacity',
                    name='zone',
                ),
                migrations.AlterField(
                    model_name='validationthreshold',
                    name='instance_type',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='catalog.instancetype', verbose_name='인스턴스 유형'),
                ),
                migrations.AlterField(
                    model_name='virtualcluster',
                    name='instance_type',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to='catalog.instancetype', verbose_name='인스턴스 유형'),
                ),
                migrations.AlterField(
                    model_name='virtualcluster',
                    name='zone',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to='catalog.zone', verbose_name='가용 영역'),
                ),
                migrations.DeleteModel(
                    name='FabricPartition',
                ),
                migrations.DeleteModel(
                    name='GpuHost',
                ),
                migrations.DeleteModel(
                    name='HostDevice',
                ),
                migrations.DeleteModel(
                    name='Placement',
                ),
                migrations.DeleteModel(
                    name='SimulatorAllocation',
                ),
                migrations.DeleteModel(
                    name='SimulatorCapacity',
                ),
            ],
        ),
    ]
