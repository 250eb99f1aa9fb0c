"""An all-reduce benchmark over MPI, for members without GPUs: what 클러스터 검증 runs across
the cluster there, and what a user can run the same way.

    mpirun -np <nodes> --hostfile /etc/vc/hostfile --map-by ppr:1:node \\
        --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include <fabric subnet> \\
        python3 -m vc_metrics_agent.allreduce -b 1M -e 64M -f 4

Each rank sums float32 buffers of each size with ``MPI_Allreduce`` (out of place, then in
place), ``-w`` warm-up and ``-n`` timed iterations, and rank 0 prints a row per size in the
columns of nccl-tests' ``all_reduce_perf``: the time of one all-reduce (the slowest rank's
average, in microseconds), ``algbw`` = bytes / time and ``busbw`` = ``algbw`` × 2(n-1)/n, the figure
nccl-tests defines to compare with the hardware's bandwidth whatever the rank count, and
``#wrong``, the checked elements (every ``CHECK_STRIDE``-th and the last) that do not hold
the sum every rank contributed. ``toolparse.parse_allreduce`` reads it.

Standard library only until run: ``mpi4py`` is imported by ``main`` (a missing one is exit
127, as a missing tool), so the module imports on the agent's Python 3.9 without it.
"""

import argparse
import array
import os
import re
import socket
import sys
import time
from typing import Optional

BANNER = "# vc_metrics_agent.allreduce"
DTYPE_BYTES = 4  # float32
CHECK_STRIDE = 4099  # a prime: checked elements fall at every offset of a cache line
NOT_FOUND = 127
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``64M`` → 67108864 (K, M, G are binary, as in nccl-tests)."""
    match = re.fullmatch(r"([0-9]{1,12})([KMG]?)B?", text.strip().upper())
    if match is None:
        raise ValueError(f"not a size: {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def sizes(minimum: int, maximum: int, factor: int) -> list[int]:
    """Message sizes from ``minimum`` to ``maximum`` bytes, each ``factor`` times the one
    before, rounded down to whole elements (at least one)."""
    if factor < 2 or minimum <= 0 or maximum < minimum:
        raise ValueError("sizes need 0 < minimum <= maximum and a factor of 2 or more")
    found, size = [], minimum
    while size <= maximum:
        found.append(max(size // DTYPE_BYTES, 1) * DTYPE_BYTES)
        size *= factor
    return found


def bus_factor(ranks: int) -> float:
    """nccl-tests' bus bandwidth factor of an all-reduce: 2(n-1)/n."""
    return 2.0 * (ranks - 1) / ranks if ranks > 0 else 0.0


def bandwidths(size: int, seconds: float, ranks: int) -> tuple:
    """(algbw, busbw) in GB/s (10^9 bytes) for one all-reduce of ``size`` bytes."""
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return algbw, algbw * bus_factor(ranks)


def expected_sum(ranks: int) -> float:
    """Rank r contributes r + 1 in every element: the sum is n(n+1)/2."""
    return ranks * (ranks + 1) / 2.0


def checked_positions(count: int) -> list[int]:
    return sorted({*range(0, count, CHECK_STRIDE), count - 1})


def wrong_count(values, ranks: int) -> int:
    """The checked elements of a result that do not hold ``expected_sum(ranks)``."""
    want = expected_sum(ranks)
    return sum(1 for i in checked_positions(len(values)) if values[i] != want)


HEADER = [
    "#",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
    "     (us)  (GB/s)  (GB/s)       ",
]


def row(size: int, ranks: int, out_place: tuple, in_place: tuple) -> str:
    """One data row: ``out_place`` and ``in_place`` are (seconds, wrong)."""
    cells = []
    for seconds, wrong in (out_place, in_place):
        algbw, busbw = bandwidths(size, seconds, ranks)
        cells.append(f"{seconds * 1e6:8.1f}  {algbw:6.3f}  {busbw:6.3f}  {wrong:5d}")
    count = size // DTYPE_BYTES
    return f"{size:12d}  {count:12d}     float     sum      -1  {cells[0]}  {cells[1]}"


def rank_line(rank: int, host: str, pid: int, nic: str) -> str:
    return f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host} device  0 [cpu] MPI over {nic}"


def report(ranks: list[tuple], rows: list[str], busbws: list[float], nic: str) -> str:
    """What rank 0 prints: the banner, the ranks (host, pid), the rows, the average busbw."""
    lines = [
        f"{BANNER} ranks {len(ranks)} dtype float32 op sum",
        "#",
        "# Using devices",
        *(rank_line(r, host, pid, nic) for r, (host, pid) in enumerate(ranks)),
        *HEADER,
        *rows,
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {sum(busbws) / len(busbws) if busbws else 0.0:.3f} ",
        "#",
    ]
    return "\n".join(lines) + "\n"


def _arguments(argv):
    parser = argparse.ArgumentParser(
        prog="python3 -m vc_metrics_agent.allreduce",
        description="MPI all-reduce bus bandwidth, in nccl-tests' columns (run under mpirun)",
    )
    parser.add_argument("-b", "--minbytes", default="1M", type=parse_size)
    parser.add_argument("-e", "--maxbytes", default="64M", type=parse_size)
    parser.add_argument("-f", "--stepfactor", default=4, type=int)
    parser.add_argument("-n", "--iters", default=5, type=int)
    parser.add_argument("-w", "--warmup_iters", default=1, type=int)
    parser.add_argument("--nic", default="", help="the network it runs over, for the report")
    return parser.parse_args(argv)


def _timed(comm, mpi, send, receive, iters: int) -> float:
    """The slowest rank's average seconds of one all-reduce."""
    comm.Barrier()
    started = time.perf_counter()
    for _ in range(iters):
        comm.Allreduce(send, receive, op=mpi.SUM)
    elapsed = (time.perf_counter() - started) / iters
    return comm.allreduce(elapsed, op=mpi.MAX)


def _measure(comm, mpi, size: int, args) -> tuple:
    """((seconds, wrong) out of place, (seconds, wrong) in place) for ``size`` bytes."""
    ranks, count = comm.Get_size(), size // DTYPE_BYTES
    mine = float(comm.Get_rank() + 1)
    send, receive = array.array("f", [mine]) * count, array.array("f", [0.0]) * count
    for _ in range(args.warmup_iters):
        comm.Allreduce(send, receive, op=mpi.SUM)
    out_place = _timed(comm, mpi, send, receive, args.iters)
    out_wrong = comm.allreduce(wrong_count(receive, ranks), op=mpi.SUM)
    # In place: each iteration sums the previous result, so time first, then start over
    # from the rank's own values for the one checked all-reduce.
    buffer = array.array("f", [mine]) * count
    in_place = _timed(comm, mpi, mpi.IN_PLACE, buffer, args.iters)
    buffer = array.array("f", [mine]) * count
    comm.Allreduce(mpi.IN_PLACE, buffer, op=mpi.SUM)
    in_wrong = comm.allreduce(wrong_count(buffer, ranks), op=mpi.SUM)
    return (out_place, out_wrong), (in_place, in_wrong)


def main(argv: Optional[list[str]] = None) -> int:
    args = _arguments(argv)
    try:
        from mpi4py import MPI  # only when run: the module imports without it
    except ImportError:
        print(f"{BANNER}: mpi4py is not installed (python3-mpi4py)", file=sys.stderr)
        return NOT_FOUND
    comm = MPI.COMM_WORLD
    ranks = comm.gather((socket.gethostname(), os.getpid()), root=0)
    rows, busbws = [], []
    for size in sizes(args.minbytes, args.maxbytes, args.stepfactor):
        out_place, in_place = _measure(comm, MPI, size, args)
        rows.append(row(size, comm.Get_size(), out_place, in_place))
        busbws.append(bandwidths(size, out_place[0], comm.Get_size())[1])
    if comm.Get_rank() == 0:
        sys.stdout.write(report(ranks, rows, busbws, args.nic or "tcp"))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
