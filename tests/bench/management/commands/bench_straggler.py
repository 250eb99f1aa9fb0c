"""``manage.py bench_straggler``: does the 메트릭 tab name the straggler only when there is
one? ``--runs`` seeded simulator runs (default 100) with a 20 % slowdown (``--slowdown``) on one
random GPU of one random member, and as many with none. Each run is a RUNNING cluster of 2–8
members (8 GPUs and 8 ports each) sending the simulator's samples every 10 s for 12 minutes,
ending at a random instant of the week before ``BASE`` (so checkpoints fall anywhere; the
simulator is deterministic in VM and time, so a seed gives the same figures); the straggler is
then read as the page reads it (``straggler.device_view`` with the cluster's criteria, the
defaults of 검증 기준). Printed: the detection rate (the member and the GPU both right) and
the false-naming rate (any member, GPU or port, named with no slowdown), against the goals
(≥ 95 % and ≤ 5 %).

PostgreSQL only, on a scratch database of its own (``tests.bench.command``).
"""

import random
from datetime import UTC, datetime, timedelta

from tests.bench.command import BenchCommand

SLOWDOWN = 0.2
SECONDS = 12 * 60  # two judged windows and a little more
DETECTED_GOAL, FALSE_GOAL = 0.95, 0.05
BASE = datetime(2026, 12, 1, tzinfo=UTC)


class Command(BenchCommand):
    help = "Measure how often the straggler rule names an injected slow GPU, and a healthy one."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--runs", type=int, default=100, help="runs of each kind (≥ 100)")
        parser.add_argument("--seed", type=int, default=1, help="the first run's seed")
        parser.add_argument(
            "--slowdown", type=float, default=SLOWDOWN, help="the injected share (0.2: 20 %%)"
        )

    def refusal(self, opts) -> str:
        if opts["runs"] < 1:
            return "--runs must be at least 1"
        return "" if 0 < opts["slowdown"] < 1 else "--slowdown must be between 0 and 1"

    def run_bench(self):
        from clusters.models import ClusterStatus
        from metrics.storage import straggler
        from portal.models import Project
        from tests.bench.worlds import bench_catalog, clusters_with_members
        from vms.models import VmStatus

        zone, itype, _capacity = bench_catalog()
        project = Project.objects.create(slug="bench", name="bench")
        runs, first = self.opts["runs"], self.opts["seed"]
        results = {"slow": [], "healthy": []}
        for kind in results:
            for seed in range(first, first + runs):
                rng = random.Random(f"{kind}:{seed}")
                size = rng.randint(2, 8)
                (cluster,) = clusters_with_members(
                    project, zone, itype, 1, lambda _i, size=size: size,
                    name=f"{kind}-{seed}", status=lambda _i: ClusterStatus.RUNNING,
                    member=lambda _i, j: {"status": VmStatus.RUNNING},
                )  # fmt: skip
                members = list(cluster.members.order_by("name").values_list("pk", "name"))
                end = BASE - timedelta(seconds=rng.randrange(0, 7 * 86400))
                slow_vm, slow_gpu = rng.choice(members)[0], rng.randrange(itype.gpu_count)
                share = 1 - self.opts["slowdown"]
                slow = {slow_vm: {slow_gpu: share}} if kind == "slow" else {}
                started = end - timedelta(seconds=SECONDS + rng.randrange(60, 3600))
                self._write(cluster, members, end, started, itype.gpu_count, slow, rng)
                view = straggler.device_view(
                    members, 3600, now=end, criteria=straggler.criteria_for(cluster)
                )
                named = view.straggler
                names = dict(members)
                if kind == "slow":
                    right = named is not None and (named.node, named.device) == (
                        names[slow_vm],
                        slow_gpu,
                    )
                    results[kind].append(right)
                else:
                    results[kind].append(named is not None or view.straggler_port is not None)
            self.say(f"  {kind}: {runs} runs done")
        detected = sum(results["slow"]) / runs
        false = sum(results["healthy"]) / runs
        criteria = straggler.Criteria()
        self.say(
            f"slowdown {self.opts['slowdown']:.0%}; criteria: GPU {criteria.gpu_points} %p, "
            f"port {criteria.port_percent} %, {criteria.minutes} min"
        )
        self.say(
            f"detected (member and GPU) {sum(results['slow'])}/{runs} = {detected:.1%} "
            f"(goal ≥ {DETECTED_GOAL:.0%}: {'met' if detected >= DETECTED_GOAL else 'MISSED'})"
        )
        self.say(
            f"named with no slowdown {sum(results['healthy'])}/{runs} = {false:.1%} "
            f"(goal ≤ {FALSE_GOAL:.0%}: {'met' if false <= FALSE_GOAL else 'MISSED'})"
        )

    def _write(self, cluster, members, end, started, gpus, slow, rng):
        """The simulator's samples of every member every 10 s over the SECONDS before
        ``end``, each member a few seconds off the tick, as agents are."""
        from clusters.models import ClusterStatus
        from metrics import simulate, storage

        rows, devices = [], {"gpu": [], "port": []}
        offsets = {vm_id: rng.uniform(0, 9) for vm_id, _name in members}
        for tick in range(SECONDS // 10):
            at = end - timedelta(seconds=SECONDS - 10 * tick)
            for vm_id, name in members:
                vm = [(vm_id, started, ClusterStatus.RUNNING, gpus, name)]
                moment = at + timedelta(seconds=offsets[vm_id])
                more, more_devices = simulate.sample_rows(vm, moment, slow)
                rows += more
                for table in devices:
                    devices[table] += more_devices[table]
        storage.write_samples(rows, devices=devices)
