"""The local engine's network: a namespace of its own, from which only the allowed endpoints can be reached.

Why: the guard reads every query before the engine does, but two readers of one text can differ, and a
difference must not be able to make the engine call out (SERVICE to any host). So on Linux the engine runs in
a network namespace of its own, which has nothing but a loopback interface: it has no route anywhere. This
module is the launcher that sets that up, run as `python -m sparqlnav.graph.netjail` (stdlib only, so it
starts quickly), in three processes:

- the *door* stays in the outer namespace and opens sockets there, handing them in (SCM_RIGHTS): the engine's
  outer listening socket, and connections to the allowed endpoints' (host, port) pairs, and nothing else;
- the *launcher* enters the new namespace, brings its loopback up, starts the engine inside on the same port,
  relays the outer listening socket to it, and listens for each allowed endpoint on an inner address (its own
  loopback address, or one given to its host name in a private /etc/hosts), relaying each connection through
  the door (TLS passes through unchanged: the engine still speaks to the real host);
- the *engine* (the command after `--`), with a memory ceiling (RLIMIT_DATA), dying with the launcher.

When the kernel refuses a namespace (no user namespaces, a locked-down container, not Linux), the launcher
says so on stderr and runs the engine directly: the guard is then the only barrier.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import ipaddress
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from sparqlnav.urls import shown_url

__all__ = ["ISOLATION_UNAVAILABLE", "PEAK_MEMORY_MARK", "jail_command", "main"]

ISOLATION_UNAVAILABLE = "sparqlnav: engine network isolation unavailable"
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _SIOCSIFADDR, _IFF_UP = 0x8913, 0x8914, 0x8916, 0x1
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_PR_SET_PDEATHSIG = 1
_HOSTS_BASE = ipaddress.IPv4Address("127.53.0.1")  # inner addresses given to allowed host names


def jail_command(
    engine: Sequence[str], *, port: int, allowed: Sequence[str], memory_bytes: int | None, socket_path: str
) -> list[str]:
    """The command that runs `engine` (listening on 127.0.0.1:`port` inside its namespace) jailed, reaching only
    `allowed` URLs, and reachable from outside only through the Unix socket `socket_path` (in a folder only its
    owner may enter: no other local user can send it a query, or take its place, issue 39)."""
    cmd = [sys.executable, "-m", "sparqlnav.graph.netjail", "--port", str(port), "--socket", socket_path]
    if memory_bytes:
        cmd += ["--memory", str(memory_bytes)]
    for url in allowed:
        cmd += ["--allow", shown_url(url)]  # only (host, port) counts here; a password must not show in `ps`
    return [*cmd, "--", *engine]


def _targets(urls: Sequence[str], own_port: int) -> list[tuple[str, int]]:
    """(host, port) pairs of the allowed endpoint URLs (default ports filled in; our own engine left out)."""
    found: list[tuple[str, int]] = []
    for url in urls:
        try:
            parts = urlsplit(url)
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
        except ValueError:
            continue  # a malformed entry allows nothing
        host = (parts.hostname or "").lower()
        if not host or port is None or parts.username is not None or parts.password is not None:
            continue
        if host == "localhost":
            host = "127.0.0.1"
        if (host, port) != ("127.0.0.1", own_port) and (host, port) not in found:
            found.append((host, port))
    return found


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL("libc.so.6", use_errno=True)


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


# -- the door: outer sockets on request, for allowed targets only ----------------------------------------------


def _door(channel: socket.socket, socket_path: str, allowed: set[tuple[str, int]]) -> None:
    """Serve requests 'listen' and 'connect HOST PORT' until the launcher goes."""
    _die_with_parent()
    while True:
        try:
            request = channel.recv(512).decode()
        except OSError:
            os._exit(0)
        if not request:
            os._exit(0)
        words = request.split()
        opened: socket.socket | None = None
        try:
            if words == ["listen"]:
                opened = _unix_listener(socket_path)
            elif len(words) == 3 and words[0] == "connect" and (words[1], int(words[2])) in allowed:
                opened = socket.create_connection((words[1], int(words[2])), timeout=10)
                opened.settimeout(None)
        except (OSError, ValueError):
            opened = None
        if opened is None:
            channel.send(b"0")
        else:
            socket.send_fds(channel, [b"1"], [opened.fileno()])
            opened.close()


class _DoorClient:
    """The launcher's side of the door: one request at a time."""

    def __init__(self, channel: socket.socket) -> None:
        self._channel = channel
        self._lock = threading.Lock()

    def ask(self, request: str) -> socket.socket | None:
        with self._lock:
            self._channel.send(request.encode())
            msg, fds, _flags, _addr = socket.recv_fds(self._channel, 8, 1)
        if msg != b"1" or not fds:
            return None
        return socket.socket(fileno=fds[0])


# -- the namespace ---------------------------------------------------------------------------------------------


def _enter_namespace(uid: int, gid: int, mount: bool) -> None:
    """Unshare the network (and mount) namespace; as a non-root user inside a new user namespace."""
    libc = _libc()
    flags = _CLONE_NEWNET | (_CLONE_NEWNS if mount else 0)
    if os.geteuid() != 0:
        flags |= _CLONE_NEWUSER
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    if flags & _CLONE_NEWUSER:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"0 {gid} 1")


def _ifreq(name: str, rest: bytes = b"") -> bytes:
    return struct.pack("16s16s", name.encode(), rest)


def _loopback_up(extra: Sequence[ipaddress.IPv4Address]) -> None:
    """Bring `lo` up, with any extra IPv4 addresses as aliases (an allowed endpoint named by a non-loopback IP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, _SIOCGIFFLAGS, _ifreq("lo")))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, b""))
        for n, address in enumerate(extra, start=1):
            sockaddr = struct.pack("HH4s8s", socket.AF_INET, 0, address.packed, b"")
            fcntl.ioctl(s, _SIOCSIFADDR, _ifreq(f"lo:{n}", sockaddr))


def _private_hosts(names: dict[str, str]) -> None:
    """Give host names inner addresses through a private /etc/hosts (bind-mounted in our mount namespace)."""
    libc = _libc()
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making mounts private")
    with open("/etc/hosts", encoding="utf-8", errors="replace") as f:
        kept = f.read()
    fd, path = tempfile.mkstemp(prefix="sparqlnav-hosts-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(f"{address} {name}\n" for name, address in names.items()) + kept)
    try:
        if libc.mount(path.encode(), b"/etc/hosts", None, _MS_BIND, None) != 0:
            raise OSError(ctypes.get_errno(), "mounting a private /etc/hosts")
    finally:
        os.unlink(path)  # the mount holds the file itself: nothing is left in /tmp (issue 39, item 10)


# -- relaying --------------------------------------------------------------------------------------------------


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until both sides are done, then close both."""
    back = threading.Thread(target=_pipe, args=(b, a), daemon=True)
    back.start()
    _pipe(a, b)
    back.join()
    a.close()
    b.close()


def _serve(listener: socket.socket, connect: object) -> None:
    """Accept forever; relay each connection to what `connect()` opens (closed at once when it opens nothing)."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        target = connect()  # type: ignore[operator]
        if target is None:
            client.close()
            continue
        threading.Thread(target=_relay, args=(client, target), daemon=True).start()


def _unix_listener(path: str) -> socket.socket:
    """A listening Unix socket at `path`, readable and writable by its owner only (its folder is private too)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # one left by an engine of ours that died: its folder is ours alone
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    listener.listen(128)
    return listener


def _remove_socket(path: str) -> None:
    """The socket file and its folder, when the engine is done (nothing of it stays in /tmp)."""
    with contextlib.suppress(OSError):
        os.unlink(path)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(path))


def _inner_connection(port: int) -> socket.socket | None:
    with contextlib.suppress(OSError):
        return socket.create_connection(("127.0.0.1", port), timeout=5)
    return None


def _memory_ceiling(limit: int | None) -> None:
    _die_with_parent()
    if limit:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _run_unjailed(engine: list[str], memory: int | None, why: str, port: int, socket_path: str) -> int:
    """The engine in this namespace: its clients still come through the private socket, but its own port on
    127.0.0.1 is one any local user can reach."""
    print(f"{ISOLATION_UNAVAILABLE} ({why}); the query guard is the only barrier", file=sys.stderr, flush=True)
    proc = subprocess.Popen(engine, preexec_fn=lambda: _memory_ceiling(memory))
    return _served(proc, port, socket_path, _unix_listener)


def _served(proc: subprocess.Popen[bytes], port: int, socket_path: str, listen: object) -> int:
    """Once the engine listens on its port, relay the private socket to it; wait for the engine; tidy up."""
    try:
        while _inner_connection(port) is None:  # the socket opens only once the engine listens
            if proc.poll() is not None:
                return _wait(proc)
            time.sleep(0.02)
        listener = listen(socket_path)  # type: ignore[operator]
        if listener is None:
            proc.kill()
            print(f"sparqlnav: cannot listen on {socket_path}", file=sys.stderr, flush=True)
            return 3
        threading.Thread(target=_serve, args=(listener, lambda: _inner_connection(port)), daemon=True).start()
        return _wait(proc)
    finally:
        _remove_socket(socket_path)


PEAK_MEMORY_MARK = "sparqlnav: engine peak memory "


def _wait(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the engine; say its peak memory on stderr (the log its owner reads); return its exit status."""
    _, status, usage = os.wait4(proc.pid, 0)
    print(f"{PEAK_MEMORY_MARK}{usage.ru_maxrss * 1024} bytes", file=sys.stderr, flush=True)
    return os.waitstatus_to_exitcode(status) % 256  # killed by a signal N: 256 - N


def main(argv: Sequence[str] | None = None) -> int:
    """Run the engine command jailed; exit with its status."""
    args = sys.argv[1:] if argv is None else list(argv)
    split = args.index("--") if "--" in args else len(args)
    parser = argparse.ArgumentParser(prog="python -m sparqlnav.graph.netjail")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--memory", type=int, default=None)
    parser.add_argument("--allow", action="append", default=[])
    opts = parser.parse_args(args[:split])
    engine = args[split + 1 :]
    if not engine:
        parser.error("no engine command after --")
    _die_with_parent()
    if not sys.platform.startswith("linux"):
        return _run_unjailed(engine, opts.memory, "not Linux", opts.port, opts.socket)

    targets = _targets(opts.allow, opts.port)
    outer, inner = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    door = os.fork()  # before any thread: unshare(CLONE_NEWUSER) needs a single-threaded process
    if door == 0:
        inner.close()
        _door(outer, opts.socket, set(targets))
    outer.close()
    named = {h: h for h, _ in targets if _is_ip(h)}
    hostnames = sorted({h for h, _ in targets if not _is_ip(h)})
    for n, host in enumerate(hostnames):
        named[host] = str(_HOSTS_BASE + n)
    try:
        _enter_namespace(os.getuid(), os.getgid(), mount=bool(hostnames))
        aliases = [ipaddress.IPv4Address(a) for a in named.values() if _needs_alias(a)]
        _loopback_up(aliases)
        if hostnames:
            _private_hosts({h: named[h] for h in hostnames})
    except OSError as exc:
        os.kill(door, signal.SIGKILL)
        return _run_unjailed(engine, opts.memory, exc.strerror or str(exc), opts.port, opts.socket)

    door_client = _DoorClient(inner)
    proc = subprocess.Popen(engine, preexec_fn=lambda: _memory_ceiling(opts.memory))
    for host, port in targets:
        _listen_for(named[host], host, port, door_client)
    # The door opens the private socket in the outer namespace; the engine's port is inside this one, out of reach.
    return _served(proc, opts.port, opts.socket, lambda _path: door_client.ask("listen"))


def _listen_for(address: str, host: str, port: int, door: _DoorClient) -> None:
    """An inner listener for one allowed endpoint, relayed through the door to the real one."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.socket(family)
    try:
        listener.bind((address, port))
        listener.listen(64)
    except OSError as exc:
        print(f"sparqlnav: cannot reach {host}:{port} from the engine ({exc.strerror})", file=sys.stderr, flush=True)
        listener.close()
        return
    threading.Thread(target=_serve, args=(listener, lambda: door.ask(f"connect {host} {port}")), daemon=True).start()


def _is_ip(host: str) -> bool:
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host)
        return True
    return False


def _needs_alias(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return isinstance(ip, ipaddress.IPv4Address) and not ip.is_loopback


if __name__ == "__main__":
    sys.exit(main())
