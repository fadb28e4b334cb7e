"""The cold-path file work (broker/log/cold_files.py): atomic replacement, removal that tolerates what
a stop already removed, and every step in the executor it is given, never on the event loop."""

import stat
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from broker.log import cold_files


class CountingPool(ThreadPoolExecutor):
    """A real pool that remembers which threads ran its work."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="cold-files-test")
        self.threads: set[str] = set()

    def submit(self, fn, /, *args, **kwargs):
        def tracked():
            self.threads.add(threading.current_thread().name)
            return fn(*args, **kwargs)

        return super().submit(tracked)


@pytest.fixture
def pool():
    with CountingPool() as executor:
        yield executor


async def test_a_write_replaces_the_file_and_leaves_no_temporary(tmp_path, pool):
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_bytes(b"old content that is longer than the new one\n")
    await cold_files.write_atomically(path, b"0\n0\n", executor=pool)
    assert path.read_bytes() == b"0\n0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log-start-offset-checkpoint"]
    assert pool.threads and all(name.startswith("cold-files-test") for name in pool.threads)


async def test_a_private_file_gets_its_mode(tmp_path, pool):
    path = tmp_path / "zookeeper-session"
    await cold_files.write_atomically(path, b"{}", executor=pool, mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_write_into_a_missing_directory_fails_and_creates_nothing(tmp_path, pool):
    path = tmp_path / "missing-dir" / "checkpoint"
    with pytest.raises(FileNotFoundError):
        await cold_files.write_atomically(path, b"x", executor=pool)
    assert not path.parent.exists()


async def test_removals_tolerate_what_is_already_gone(tmp_path, pool):
    kept, doomed = tmp_path / "kept", tmp_path / "00000000000000000000.log.deleted"
    kept.write_bytes(b"k")
    doomed.write_bytes(b"d")
    await cold_files.remove_files([doomed, tmp_path / "never-there"], executor=pool)
    assert not doomed.exists() and kept.exists()

    tree = tmp_path / "topic-0.abc-delete"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "file").write_bytes(b"f")
    await cold_files.remove_tree(tree, executor=pool)
    await cold_files.remove_tree(tree, executor=pool)  # the second time finds nothing: no error
    assert not tree.exists() and kept.exists()
