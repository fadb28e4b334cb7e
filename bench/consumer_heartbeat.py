"""A steady KIP-848 heartbeat's cost in the coordinator (nothing changed: no epoch, no assignment move),
with --members members in one group: `python -m bench.consumer_heartbeat [SOURCE_DIR] [--members N]`.

The group is built and converged, then every member heartbeats --rounds times in turn through the
path the ConsumerGroupHeartbeat handler takes (computation, undo snapshot, write check; the append
itself is a no-op), and the median and minimum µs per heartbeat over the rounds are printed.
SOURCE_DIR runs another checkout's broker code (e.g. `git archive <rev> broker protocol` unpacked), so
that before/after runs can alternate on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source", nargs="?", default=None)
    parser.add_argument("--members", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    if args.source:
        sys.path.insert(0, args.source)
    from broker.group.consumer_groups import ConsumerGroups, ConsumerHeartbeat
    from broker.group.consumer_type_changes import ClassicIds
    from broker.group_configs import MemberTimeouts
    try:
        timeouts = MemberTimeouts(45000, 5000, 0)  # targets at once: the group converges before the rounds
    except TypeError:  # a checkout from before the assignment interval (KIP-1263)
        timeouts = MemberTimeouts(45000, 5000)  # type: ignore[call-arg]

    async def append(group_id, entries) -> int:
        return 0

    def request(member: str, epoch: int, owned, subscribed=None) -> ConsumerHeartbeat:
        return ConsumerHeartbeat("g", member, epoch, None, None, 30000 if epoch == 0 else -1, subscribed, None,
                                 None, owned, "c", "/h")

    async def run() -> None:
        topics = {"t": (uuid.UUID(int=1), 2 * args.members)}
        groups = ConsumerGroups(args.members, ["uniform"], lambda: topics,
                                ClassicIds(lambda g: False, lambda g: False, lambda g: None),
                                is_share=lambda g: False, append=append,
                                spawn=lambda coro: asyncio.get_running_loop().create_task(coro))
        written = getattr(groups, "heartbeat_written", None)

        async def beat(req: ConsumerHeartbeat) -> None:
            if written is not None:
                await written(req, timeouts)
            else:  # before undo existed: the handler's heartbeat then its write
                answer = groups.heartbeat(req, timeouts)
                await groups.persist("g", answer.member_id)

        def steady(member: str) -> ConsumerHeartbeat:
            m = groups.groups["g"].members[member]
            return request(member, m.epoch, {t: set(p) for t, p in m.assigned.items()})

        names = [f"m{i}" for i in range(args.members)]
        for name in names:
            await beat(request(name, 0, {}, ["t"]))
        for _ in range(4):  # revocations and epochs settle
            for name in names:
                await beat(steady(name))
        requests = [steady(name) for name in names]
        per_round = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            for req in requests:
                await beat(req)
            per_round.append((time.perf_counter() - started) / len(requests) * 1e6)
        per_round.sort()
        print(f"{args.members} members: median {per_round[len(per_round) // 2]:.1f} µs, min {per_round[0]:.1f} µs "
              "per steady heartbeat")
        groups.stop()

    asyncio.run(run())


if __name__ == "__main__":
    main()
