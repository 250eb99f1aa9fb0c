# GPU hosts, their devices, placements, fabric partitions and the simulator's capacity leave
# the clusters app for the compute app; their tables stay as they are.

import django.db.models.deletion
from django.db import migrations, models


MODELS = ('gpuhost', 'hostdevice', 'placement', 'fabricpartition', 'simulatorcapacity', 'simulatorallocation')


def compute_content_types(apps, schema_editor):
    """The admin's permissions and log entries follow the models: their content types move
    from the app that made the tables to this one (none exist yet on a new database)."""
    _relabel(apps, schema_editor, "clusters", "compute")


def compute_content_types_back(apps, schema_editor):
    _relabel(apps, schema_editor, "compute", "clusters")


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
        ('catalog', '0001_catalog_from_vms'),
        ('clusters', '0016_hosts_and_simulator_to_compute'),
        ('vms', '0006_catalog_version_triggers'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='FabricPartition',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('fabric', models.CharField(choices=[('INFINIBAND', 'InfiniBand'), ('ROCE_V2', 'Ethernet (RoCEv2)')], max_length=20, verbose_name='패브릭 타입')),
                        ('block', models.PositiveIntegerField(unique=True, verbose_name='주소 블록')),
                        ('pkey', models.PositiveIntegerField(blank=True, null=True, verbose_name='파티션 키(PKey)')),
                        ('vlan', models.PositiveIntegerField(blank=True, null=True, verbose_name='VLAN 번호')),
                        ('configured', models.BooleanField(default=False, verbose_name='패브릭 구성됨')),
                        ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='생성일')),
                        ('cluster', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='fabric_partition', to='clusters.virtualcluster', verbose_name='클러스터')),
                    ],
                    options={
                        'verbose_name': '패브릭 파티션',
                        'verbose_name_plural': '패브릭 파티션',
                        'db_table': 'clusters_fabricpartition',
                    },
                ),
                migrations.CreateModel(
                    name='GpuHost',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=63, unique=True, verbose_name='이름')),
                        ('uri', models.CharField(help_text='qemu:///system, qemu+ssh://…/system, qemu+tls://…/system 또는 test:///…', max_length=255, verbose_name='libvirt 접속 URI')),
                        ('domain_type', models.CharField(blank=True, choices=[('kvm', 'kvm'), ('qemu', 'qemu (TCG)')], help_text='비워 두면 LIBVIRT_DOMAIN_TYPE 설정을 따릅니다.', max_length=8, verbose_name='도메인 유형')),
                        ('state', models.CharField(choices=[('ENABLED', '사용'), ('DRAINING', '비우는 중')], default='ENABLED', max_length=10, verbose_name='상태')),
                        ('fabric', models.CharField(choices=[('INFINIBAND', 'InfiniBand'), ('ROCE_V2', 'Ethernet (RoCEv2)')], max_length=20, verbose_name='패브릭 타입')),
                        ('block', models.CharField(blank=True, max_length=40, verbose_name='블록')),
                        ('leaf', models.CharField(blank=True, max_length=40, verbose_name='리프')),
                        ('rack', models.CharField(blank=True, max_length=40, verbose_name='랙')),
                        ('storage_pool', models.CharField(default='vc-pool', max_length=63, verbose_name='스토리지 풀')),
                        ('emulated_gpus', models.PositiveSmallIntegerField(default=0, verbose_name='에뮬레이트 GPU 수')),
                        ('emulated_gpu_model', models.CharField(blank=True, max_length=60, verbose_name='에뮬레이트 GPU 모델')),
                        ('emulated_vfs', models.PositiveSmallIntegerField(default=0, verbose_name='에뮬레이트 VF 수')),
                        ('emulated_numa_nodes', models.PositiveSmallIntegerField(default=1, verbose_name='에뮬레이트 NUMA 노드 수')),
                        ('cpus_by_node', models.JSONField(blank=True, default=dict, verbose_name='NUMA 노드별 CPU')),
                        ('synced_at', models.DateTimeField(blank=True, null=True, verbose_name='마지막 동기화')),
                        ('sync_error', models.CharField(blank=True, max_length=500, verbose_name='동기화 오류')),
                        ('zone', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='gpu_hosts', to='catalog.zone', verbose_name='가용 영역')),
                    ],
                    options={
                        'verbose_name': 'GPU 호스트',
                        'verbose_name_plural': 'GPU 호스트',
                        'db_table': 'clusters_gpuhost',
                        'ordering': ['zone', 'block', 'leaf', 'name'],
                    },
                ),
                migrations.CreateModel(
                    name='Placement',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('numa_node', models.PositiveSmallIntegerField(blank=True, null=True, verbose_name='NUMA 노드')),
                        ('held', models.BooleanField(default=True, verbose_name='자원 보유')),
                        ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='생성일')),
                        ('cluster', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='clusters.virtualcluster', verbose_name='클러스터')),
                        ('domain_host', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='compute.gpuhost', verbose_name='도메인 호스트')),
                        ('host', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='placements', to='compute.gpuhost', verbose_name='GPU 호스트')),
                        ('vm', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='placement', to='vms.virtualmachine', verbose_name='가상머신')),
                    ],
                    options={
                        'verbose_name': '배치',
                        'verbose_name_plural': '배치',
                        'db_table': 'clusters_placement',
                    },
                ),
                migrations.CreateModel(
                    name='SimulatorCapacity',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('fabric', models.CharField(choices=[('INFINIBAND', 'InfiniBand'), ('ROCE_V2', 'Ethernet (RoCEv2)')], max_length=20, verbose_name='패브릭 타입')),
                        ('total_nodes', models.PositiveIntegerField(default=64, verbose_name='전체 노드 수')),
                        ('instance_type', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='catalog.instancetype', verbose_name='인스턴스 유형')),
                        ('zone', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='catalog.zone', verbose_name='가용 영역')),
                    ],
                    options={
                        'verbose_name': '시뮬레이터 용량',
                        'verbose_name_plural': '시뮬레이터 용량',
                        'db_table': 'clusters_simulatorcapacity',
                    },
                ),
                migrations.CreateModel(
                    name='SimulatorAllocation',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('nodes', models.PositiveIntegerField(verbose_name='노드 수')),
                        ('configured', models.BooleanField(default=False, verbose_name='패브릭 구성됨')),
                        ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='생성일')),
                        ('cluster', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='clusters.virtualcluster', verbose_name='클러스터')),
                        ('capacity', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='compute.simulatorcapacity', verbose_name='시뮬레이터 용량')),
                    ],
                    options={
                        'verbose_name': '시뮬레이터 할당',
                        'verbose_name_plural': '시뮬레이터 할당',
                        'db_table': 'clusters_simulatorallocation',
                    },
                ),
                migrations.CreateModel(
                    name='HostDevice',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('GPU', 'GPU'), ('VF', 'VF')], max_length=3, verbose_name='종류')),
                        ('address', models.CharField(max_length=16, verbose_name='PCI 주소')),
                        ('vendor', models.CharField(blank=True, max_length=8, verbose_name='벤더')),
                        ('model', models.CharField(blank=True, max_length=100, verbose_name='모델')),
                        ('parent', models.CharField(blank=True, max_length=16, verbose_name='부모 PF')),
                        ('numa_node', models.PositiveSmallIntegerField(default=0, verbose_name='NUMA 노드')),
                        ('emulated', models.BooleanField(default=False, verbose_name='에뮬레이트')),
                        ('missing', models.BooleanField(default=False, verbose_name='사라짐')),
                        ('host', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='devices', to='compute.gpuhost', verbose_name='GPU 호스트')),
                        ('placement', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='devices', to='compute.placement', verbose_name='배치')),
                    ],
                    options={
                        'verbose_name': '호스트 장치',
                        'verbose_name_plural': '호스트 장치',
                        'db_table': 'clusters_hostdevice',
                        'ordering': ['host', 'kind', 'address'],
                        'indexes': [models.Index(fields=['host', 'placement'], name='clusters_ho_host_id_4ca0f1_idx')],
                        'constraints': [models.UniqueConstraint(fields=('host', 'address'), name='one_device_per_address')],
                    },
                ),
                migrations.AddConstraint(
                    model_name='simulatorcapacity',
                    constraint=models.UniqueConstraint(fields=('zone', 'instance_type', 'fabric'), name='one_capacity_per_triple'),
                ),
            ],
        ),
        migrations.RunPython(compute_content_types, compute_content_types_back),
    ]
