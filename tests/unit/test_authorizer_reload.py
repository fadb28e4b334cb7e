"""ACL reloads that overlap (broker/security/authorizer.py): one that read the store before a change
and finishes after the reload the change started installs nothing, so the newest set stays."""

import asyncio

from broker.cluster.layout import AclResourceZNode
from broker.cluster.store import EmbeddedStore
from broker.security.acls import Acl
from broker.security.authorizer import Authorizer
from protocol.enums import Operation, PatternType, Permission, ResourceType

READ_T = Acl(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW)


def _may_read(authorizer: Authorizer) -> bool:
    return authorizer.authorize("User:alice", "127.0.0.1", Operation.READ, ResourceType.TOPIC, "t")


async def test_an_older_reload_finishing_last_does_not_install_its_set(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    authorizer = Authorizer(store, frozenset(), allow_if_no_acl=False)
    await authorizer.start()
    await authorizer.stop()  # no watch: the only reloads are the ones this test starts or awaits
    await authorizer.add([READ_T])
    assert _may_read(authorizer)

    resource = AclResourceZNode.path(PatternType.LITERAL, ResourceType.TOPIC, "t")
    real_get = store.get
    read, release = asyncio.Event(), asyncio.Event()

    async def held_get(path):
        answer = await real_get(path)
        if path == resource and not read.is_set():  # the first reload's read: the ACL still there
            read.set()
            await release.wait()
        return answer

    store.get = held_get  # type: ignore[method-assign]
    older = asyncio.create_task(authorizer.reload())
    await read.wait()
    await authorizer.remove([READ_T])  # its own reload installs the set without the ACL
    assert not _may_read(authorizer)
    release.set()
    await older
    assert not _may_read(authorizer)
