# The catalog's models leave the vms app for their own; their tables stay as they are.

import django.db.models.deletion
from django.db import migrations, models


MODELS = ('zone', 'instancetype', 'fabricoffering', 'catalogversion')


def catalog_content_types(apps, schema_editor):
    """The admin's permissions and log entries follow the models: their content types move
    from the app that made the tables to this one (none exist yet on a new database)."""
    _relabel(apps, schema_editor, "vms", "catalog")


def catalog_content_types_back(apps, schema_editor):
    _relabel(apps, schema_editor, "catalog", "vms")


def _relabel(apps, schema_editor, old, new):
    content_types = apps.get_model("contenttypes", "ContentType").objects.db_manager(
        schema_editor.connection.alias
    )
    taken = set(content_types.filter(app_label=new).values_list("model", flat=True))
    content_types.filter(app_label=old, model__in=set(MODELS) - taken).update(app_label=new)


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('vms', '0006_catalog_version_triggers'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='CatalogVersion',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('value', models.BigIntegerField(default=0)),
                    ],
                    options={
                        'verbose_name': '카탈로그 버전',
                        'verbose_name_plural': '카탈로그 버전',
                        'db_table': 'vms_catalogversion',
                    },
                ),
                migrations.CreateModel(
                    name='InstanceType',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('code', models.CharField(max_length=60, unique=True, verbose_name='코드')),
                        ('gpu_model', models.CharField(max_length=60, verbose_name='GPU 모델')),
                        ('gpu_count', models.PositiveSmallIntegerField(verbose_name='GPU 수')),
                        ('gpu_memory_gib', models.PositiveIntegerField(default=80, verbose_name='GPU 메모리(GiB)')),
                        ('vcpu', models.PositiveSmallIntegerField(verbose_name='vCPU 수')),
                        ('memory_gib', models.PositiveIntegerField(verbose_name='메모리(GiB)')),
                    ],
                    options={
                        'verbose_name': '인스턴스 유형',
                        'verbose_name_plural': '인스턴스 유형',
                        'db_table': 'vms_instancetype',
                        'ordering': ['code'],
                    },
                ),
                migrations.CreateModel(
                    name='Zone',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('code', models.SlugField(max_length=40, unique=True, verbose_name='코드')),
                        ('name', models.CharField(max_length=100, verbose_name='이름')),
                    ],
                    options={
                        'verbose_name': '가용 영역',
                        'verbose_name_plural': '가용 영역',
                        'db_table': 'vms_zone',
                        'ordering': ['code'],
                    },
                ),
                migrations.CreateModel(
                    name='FabricOffering',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('fabric', models.CharField(choices=[('INFINIBAND', 'InfiniBand'), ('ROCE_V2', 'Ethernet (RoCEv2)')], max_length=20, verbose_name='패브릭 타입')),
                        ('instance_type', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='offerings', to='catalog.instancetype', verbose_name='인스턴스 유형')),
                        ('zone', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='offerings', to='catalog.zone', verbose_name='가용 영역')),
                    ],
                    options={
                        'verbose_name': '패브릭 제공',
                        'verbose_name_plural': '패브릭 제공',
                        'db_table': 'vms_fabricoffering',
                    },
                ),
                migrations.AddField(
                    model_name='instancetype',
                    name='zones',
                    field=models.ManyToManyField(related_name='instance_types', through='catalog.FabricOffering', to='catalog.zone'),
                ),
                migrations.AddConstraint(
                    model_name='fabricoffering',
                    constraint=models.UniqueConstraint(fields=('zone', 'instance_type', 'fabric'), name='one_offering_per_triple'),
                ),
            ],
        ),
        migrations.RunPython(catalog_content_types, catalog_content_types_back),
    ]
