"""The `ebb` command.

`ebb broker` runs a broker; `ebb apis` lists what the codec covers; `ebb decode` turns a captured
frame into JSON. The admin commands (`delete-records`, `topics`, `configs`, `offsets`, `users`, `acls`) live in
client/cli/ and are registered here.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path


def _plain(value):
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return {"bytes": len(value), "hex": bytes(value[:64]).hex()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def cmd_apis(args) -> int:
    from protocol.messages import APIS

    for key, api in sorted(APIS.items()):
        print(f"{key:>3}  {api.name:<24} versions {str(api.versions):<6} flexible {api.flexible_versions}")
    return 0


def cmd_decode(args) -> int:
    from protocol import framing
    from protocol.errors import ProtocolError

    try:
        data = Path(args.file).read_bytes()
    except OSError as exc:
        print(f"ebb decode: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    if args.hex:
        try:
            data = bytes.fromhex(data.decode("ascii").strip())
        except ValueError as exc:
            print(f"ebb decode: {args.file} is not hex: {exc}", file=sys.stderr)
            return 2
    if args.framed:
        data = data[4:]
    try:
        if args.response:
            if args.api_key is None or args.api_version is None:
                print("ebb decode: a response needs --api-key and --api-version", file=sys.stderr)
                return 2
            correlation_id, body = framing.decode_response(data, args.api_key, args.api_version)
            out = {"correlation_id": correlation_id, "body": body.to_dict()}
        else:
            request = framing.decode_request(data)
            out = {"header": request.header.to_dict(),
                   "body": request.body.to_dict() if request.body is not None else None}
    except ProtocolError as exc:
        print(f"ebb decode: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(_plain(out), indent=2))
    return 0


def cmd_broker(args) -> int:
    import uvloop

    from broker import log_output
    from broker.allocator import keep_freed_memory
    from broker.app import run
    from broker.cluster.store import StoreError
    from broker.config import ConfigError, load_config
    from broker.features import UnservableLevels
    from broker.log.open_files import OpenFilesExhausted

    try:
        config = load_config(args.config, args.override or ())
    except ConfigError as exc:
        print(f"ebb broker: bad configuration: {exc}", file=sys.stderr)
        return 2
    log_output.configure(config.log_level)
    keep_freed_memory()  # warm pages for the per-request buffers (broker/allocator.py)
    try:
        uvloop.run(run(config))
    except ConfigError as exc:
        print(f"ebb broker: bad configuration: {exc}", file=sys.stderr)
        return 2
    except (OSError, StoreError, OpenFilesExhausted) as exc:  # a port in use, ZooKeeper unreachable, ...
        print(f"ebb broker: cannot start: {exc}", file=sys.stderr)
        return 1
    except UnservableLevels as exc:  # at start, or finalized later by another broker
        print(f"ebb broker: stopped: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser for these arguments: of the admin commands, only the one named in argv is built whole."""
    parser = argparse.ArgumentParser(prog="ebb", description="Ebb, a Kafka-protocol broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    broker = sub.add_parser("broker", help="run a broker (Kafka property names; see docs/features.md)")
    broker.add_argument("--config", help="a server.properties file")
    broker.add_argument("--override", action="append", metavar="KEY=VALUE", help="set one property (repeatable)")
    broker.set_defaults(func=cmd_broker)
    sub.add_parser("apis", help="list the APIs and versions the codec covers").set_defaults(func=cmd_apis)
    decode = sub.add_parser("decode", help="decode one Kafka frame (header + body) and print it as JSON")
    decode.add_argument("file", help="the frame, raw bytes (or hex with --hex)")
    decode.add_argument("--hex", action="store_true", help="the file holds hex text")
    decode.add_argument("--framed", action="store_true", help="the frame starts with its int32 size")
    decode.add_argument("--response", action="store_true", help="a response frame (needs --api-key/--api-version)")
    decode.add_argument("--api-key", type=int)
    decode.add_argument("--api-version", type=int)
    decode.set_defaults(func=cmd_decode)
    from client.cli import register as register_admin_commands

    register_admin_commands(sub, argv[0] if argv else None)  # delete-records, topics, ... (client/cli/)
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    args = build_parser(argv).parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
