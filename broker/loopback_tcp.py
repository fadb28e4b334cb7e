"""The TCP congestion control of connections from this host (`ebb.socket.loopback.congestion.control`).

Where the system's default is BBR, the kernel paces every socket's sending at BBR's estimate of the path's
bandwidth. On loopback there is no path: the estimate is how fast the client drained the last answer, and
the pacing timer spreads the next answer over that time (a 6 MB Fetch answer left in 2.6-3.7 ms, against
1.8-2.3 ms with Reno) and runs late when the CPUs are busy. A loopback connection cannot congest
anything, so by default Ebb gives its accepted loopback sockets Reno, which sends as fast as the
receiver's window allows (any process may choose Reno). Connections from other hosts keep the system's
choice. docs/performance.md ("Findings behind the design") has the measurements.

A listener bound to a loopback address gets the algorithm itself, so that its connections are born with
it: a socket that starts under BBR keeps the kernel's pacing after a switch to Reno (BBR's init asks for
pacing, and changing the algorithm does not undo that), so every send still arms a pacing timer: in the
floor measurement a sender switched after accept sent 2,500-3,000 MB/s where one born Reno sent
5,300-6,200, at 0.06-0.09 against 0.05 CPU-s/GB. Connections accepted on a wildcard listener are switched
one by one, as before.
"""

from __future__ import annotations

import ipaddress
import socket

from broker.property_table import ConfigError

PROPERTY = "ebb.socket.loopback.congestion.control"
DEFAULT = "reno"


def congestion_control(value: str) -> str:
    """The property's value checked: an algorithm this kernel lets this process set, or "" (leave the
    system's default). A name it refuses is a ConfigError at start, not a warning per connection."""
    name = value.strip()
    if not name:
        return ""
    option = getattr(socket, "TCP_CONGESTION", None)
    if option is None:
        raise ConfigError(f"{PROPERTY}: this platform cannot choose a TCP congestion control; set it empty")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.IPPROTO_TCP, option, name.encode())
    except OSError as exc:
        raise ConfigError(f"{PROPERTY}: the kernel refuses {name!r} ({exc.strerror}); see "
                          "net.ipv4.tcp_allowed_congestion_control, or set it empty") from None
    return name


def is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 from a dual-stack listener
    return (mapped or address).is_loopback


def apply(sock: socket.socket, peer_host: str, name: str) -> bool:
    """Set `name` on a connection from this host; True when set. A socket that is not TCP is left alone."""
    if not name or sock.type != socket.SOCK_STREAM or not is_loopback(peer_host):
        return False
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
    return True


def apply_to_listener(sock: socket.socket, name: str) -> bool:
    """Set `name` on a TCP listener bound to a loopback address; True when set. Its connections inherit it."""
    if not name or sock.type != socket.SOCK_STREAM or not is_loopback(str(sock.getsockname()[0])):
        return False
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
    return True
