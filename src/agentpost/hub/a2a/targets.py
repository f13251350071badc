"""Where a push may go (docs/a2a.md "Push targets", docs/architecture.md#a2a): a member
names the URL, so the hub refuses any address that reaches inward (loopback, link-local, private,
unique-local, unspecified, and whatever else is not globally routable), in any spelling,
unless the operator allows it (`AGENTPOST_PUSH_ALLOW`). The host is resolved once per
connection and the address checked is the address connected to (`CheckedTransport`), so a
name cannot answer one address to the check and another to the connect."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import httpcore
import httpx

ALLOW_ENV = "AGENTPOST_PUSH_ALLOW"
REFUSED = "push_target_refused"
UNRESOLVED = "push_target_unresolved"
RESOLVE_SECONDS = 5.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# NAT64's well-known prefix carries an IPv4 address in its last 32 bits: judged by that one.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

log = logging.getLogger("agentpost.hub.a2a.targets")


class TargetRefused(Exception):
    """A push target the hub will not reach; `reason` is REFUSED or UNRESOLVED."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class PushAllow:
    """The operator's allow-list: networks (CIDRs or single addresses) whose addresses a push
    may reach, and host names whose every address it may reach."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()

    def allows(self, host: str, address: IPAddress) -> bool:
        seen = {address, _embedded(address)}
        return _name(host) in self.hosts or any(a in n for a in seen for n in self.networks)


@lru_cache(maxsize=8)
def allow_list(raw: str) -> PushAllow:
    """`AGENTPOST_PUSH_ALLOW` parsed: comma-separated CIDRs, addresses and host names. An
    entry that looks like a network but is not one is left out with a warning (fail closed:
    a typo allows less, never more)."""
    networks: list[IPNetwork] = []
    hosts: set[str] = set()
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        bare = entry[1:-1] if entry.startswith("[") and entry.endswith("]") else entry
        try:
            networks.append(ipaddress.ip_network(bare, strict=False))
            continue
        except ValueError:
            pass
        if "/" in entry or ":" in entry:
            log.warning("%s entry %r is not a network or a host name: ignored", ALLOW_ENV, entry)
            continue
        hosts.add(_name(entry))
    return PushAllow(tuple(networks), frozenset(hosts))


def _name(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


def _embedded(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries (IPv4-mapped, NAT64), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def kind(address: IPAddress) -> str | None:
    """Why an address is not a push target by default, or None when it is public."""
    address = _embedded(address)
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if isinstance(address, ipaddress.IPv6Address) and address in _UNIQUE_LOCAL:
        return "unique-local"
    if address.is_private:
        return "private"
    if address.is_multicast:
        return "multicast"
    if not address.is_global:
        return "not globally routable"
    return None


_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")


def judge(host: str, addresses: Iterable[IPAddress], allow: PushAllow) -> IPAddress:
    """The address to connect to: the first of `addresses` when every one of them is a
    push target (public, or allowed by the operator); else TargetRefused naming the first
    that is not. Every address is judged, so a name cannot mix a public one in."""
    found = list(addresses)
    if not found:
        raise TargetRefused(UNRESOLVED, f"the host {host!r} has no address")
    for address in found:
        why = kind(address)
        if why is not None and not allow.allows(host, address):
            shown = host if _name(host) == str(address) else f"{host} ({address})"
            raise TargetRefused(
                REFUSED,
                f"the push url's host {shown} is a {why} address: push targets must be "
                f"public unless the hub's operator allows them ({ALLOW_ENV})",
            )
    return found[0]


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` names, as the system resolver reads it: a numeric spelling
    (`2130706433`, `0x7f.1`, `[::1]`) comes back as the address it means."""
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM), RESOLVE_SECONDS
        )
    except (OSError, TimeoutError, UnicodeError) as exc:
        raise TargetRefused(UNRESOLVED, f"the push url's host {host!r} does not resolve") from exc
    out: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in out:
            out.append(address)
    return out


async def checked(host: str, port: int, allow: PushAllow) -> IPAddress:
    """Resolve once and judge: the address a push to `host` may connect to."""
    return judge(host, await resolve(host, port), allow)


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the judge in front: each new connection resolves
    its host once, judges every address, and connects to the address judged."""

    def __init__(self, allow: PushAllow) -> None:
        self._allow = allow
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        address = await checked(host, port, self._allow)
        return await self._inner.connect_tcp(
            str(address),
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise TargetRefused(REFUSED, "a push never goes to a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class CheckedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport that never proxies and connects only to judged addresses; the
    URL, the Host header and TLS (SNI, certificate name) stay the URL's own."""

    def __init__(self, allow: PushAllow, limits: httpx.Limits) -> None:
        super().__init__(limits=limits, trust_env=False)
        # httpx takes no network backend of its own: its pool is made again with ours.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_CheckedBackend(allow),
        )
