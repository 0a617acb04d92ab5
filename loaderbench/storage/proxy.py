"""A delaying TCP proxy: the network path's latency (and its bandwidth cap where no kernel qdisc applies it),
for kernels without netem and for servers the suite does not own.

It behaves as netem would on the server's outgoing side of a link with round-trip time `latency`:
- a new connection: the client's first bytes are held until `latency` after it connected (a real network
  charges the handshake's round trip before the request can leave);
- every chunk the server sends is released `latency` (plus a uniform draw in [-jitter, +jitter]) after it
  arrived, never before an earlier chunk of the same connection;
- bandwidth: released chunks cross one link shared by every connection, in pieces of PIECE_BYTES, each sent
  once the link has carried the pieces before it.
So a request on a kept-alive connection costs one round trip plus the server's time; a request on a new
connection costs two. A server that refuses the proxy's connection gets the client's connection closed at once.

Run as `python -m loaderbench.storage.proxy --listen HOST:PORT --upstream HOST:PORT ...`; it prints "ready PORT"
once it listens, and runs until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import sys

READ_BYTES = 256 * 1024
PIECE_BYTES = 16 * 1024  # pacing granularity: a piece takes 0.66 ms at 200 Mbit/s


class Link:
    """One link every connection shares: `reserve(n)` is when n more bytes have crossed it."""

    def __init__(self, mbit: float):
        self.bytes_per_s = mbit * 1e6 / 8 if mbit > 0 else 0.0
        self.free_at = 0.0

    def reserve(self, nbytes: int, now: float) -> float:
        if not self.bytes_per_s:
            return now
        self.free_at = max(now, self.free_at) + nbytes / self.bytes_per_s
        return self.free_at


class DelayingProxy:
    def __init__(self, upstream: tuple[str, int], latency_s: float, jitter_s: float, link: Link, seed: int):
        self.upstream, self.latency_s, self.jitter_s, self.link = upstream, latency_s, jitter_s, link
        self.rng = random.Random(seed)

    def delay(self) -> float:
        if not self.jitter_s:
            return self.latency_s
        return max(0.0, self.latency_s + self.rng.uniform(-self.jitter_s, self.jitter_s))

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        connected = loop.time()
        try:
            server_r, server_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()
            return
        for w in (client_w, server_w):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tasks = [
            asyncio.create_task(self.requests(client_r, server_w, connected)),
            asyncio.create_task(self.responses(server_r, client_w)),
        ]
        try:
            done, _pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if tasks[1] not in done:  # the client is gone: nothing it asked for still needs delivering
                tasks[1].cancel()
            else:
                tasks[0].cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for w in (client_w, server_w):
                w.close()

    async def requests(self, client_r, server_w, connected: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, connected + self.latency_s - loop.time()))  # the handshake's round trip
        try:
            while data := await client_r.read(READ_BYTES):
                server_w.write(data)
                await server_w.drain()
        except (ConnectionError, OSError):
            pass

    async def responses(self, server_r, client_w) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        sender = asyncio.create_task(self.send(queue, client_w))
        last = 0.0
        try:
            while data := await server_r.read(READ_BYTES):
                last = max(last, loop.time() + self.delay())
                queue.put_nowait((last, data))
        except (ConnectionError, OSError):
            pass
        queue.put_nowait(None)
        await sender

    async def send(self, queue: asyncio.Queue, client_w) -> None:
        loop = asyncio.get_running_loop()
        try:
            while (item := await queue.get()) is not None:
                release, data = item
                if release > loop.time():
                    await asyncio.sleep(release - loop.time())
                if not self.link.bytes_per_s:
                    client_w.write(data)
                    await client_w.drain()
                    continue
                for i in range(0, len(data), PIECE_BYTES):
                    piece = data[i : i + PIECE_BYTES]
                    done = self.link.reserve(len(piece), loop.time())
                    if done > loop.time():
                        await asyncio.sleep(done - loop.time())
                    client_w.write(piece)
                    await client_w.drain()
        except (ConnectionError, OSError):
            pass


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


async def serve(args) -> None:
    proxy = DelayingProxy(
        _address(args.upstream), args.latency_ms / 1000, args.jitter_ms / 1000, Link(args.bandwidth_mbit), args.seed
    )
    host, port = _address(args.listen)
    server = await asyncio.start_server(proxy.handle, host, port, backlog=4096, reuse_address=True)
    bound = server.sockets[0].getsockname()[1]
    print(f"ready {bound}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loaderbench.storage.proxy", description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", required=True, help="HOST:PORT to listen on (PORT 0: any free port)")
    p.add_argument("--upstream", required=True, help="HOST:PORT of the server")
    p.add_argument("--latency-ms", type=float, default=0.0, help="round-trip time added to the path")
    p.add_argument("--jitter-ms", type=float, default=0.0, help="uniform jitter on each chunk's delay")
    p.add_argument("--bandwidth-mbit", type=float, default=0.0, help="cap shared by all connections (0: none)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        asyncio.run(serve(args))
    except OSError as exc:
        print(f"proxy: cannot listen on {args.listen}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
