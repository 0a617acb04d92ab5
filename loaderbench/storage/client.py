"""The HTTP client a cell's dataset reads with, in each loader process (a worker, or the cell process itself with
num_workers = 0), and the counters every such process keeps.

Two ways to use HTTP, the `http_client` axis:
- "pooled": one kept-alive connection per process, opened on its first request in that process (a connection
  object cannot cross a fork, so it is never made in the parent for the workers);
- "per_request": a new connection for every GET, announced with `Connection: close` (as urllib's one-shot
  urlopen does): the common mistake, paying a connection set-up, one more round trip, per sample.

A kept-alive connection the server closed while idle fails on its next request without an answer; that request
is retried once on a new connection, as every pooling client does. Anything else is a typed fault whose message
says what happened and what to do: StorageUnreachable (refused, reset, closed mid-answer), StorageTimeout (no
answer within http_timeout_s). The fault classifier (loaderbench.measure.failures) finds them by name, also inside a
worker's
traceback.

Counters live in one int64 tensor in shared memory, a row per loader process (rank r, worker w: row
r * (num_workers + 1) + w + 1; the rank's own process: row r * (num_workers + 1)), columns COLUMNS; each
process writes its own row only.
"""

from __future__ import annotations

import http.client
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

COLUMNS = ("requests", "bytes", "connections", "samples")
REQUESTS, BYTES, CONNECTIONS, SAMPLES = range(len(COLUMNS))


class StorageUnreachable(RuntimeError):
    """The server refused, reset or dropped a connection."""


class StorageTimeout(RuntimeError):
    """A request got no answer within http_timeout_s."""


class StorageHttpError(RuntimeError):
    """The server answered with a status other than 200."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how a cell's loader processes read (picklable: it travels to spawned workers)."""

    url: str  # base URL, ending in "/": paths are relative to it
    client: str  # "pooled" | "per_request"
    timeout_s: float
    counters: Any  # torch int64 tensor [ranks * rows_per_rank, len(COLUMNS)] in shared memory
    rows_per_rank: int  # num_workers + 1


def totals(counters) -> dict[str, int]:
    """Sum of every process's row, by column name."""
    sums = counters.sum(dim=0).tolist()
    return dict(zip(COLUMNS, (int(x) for x in sums)))


class _CountingConnection(http.client.HTTPConnection):
    def __init__(self, *args, on_connect, **kwargs):
        super().__init__(*args, **kwargs)
        self._on_connect = on_connect

    def connect(self) -> None:
        super().connect()
        self._on_connect()


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class HttpClient:
    """GETs relative to an endpoint's URL, counted in this process's row of the endpoint's counters."""

    def __init__(self, endpoint: Endpoint, rank: int = 0):
        self.endpoint, self.rank = endpoint, rank
        parts = urlsplit(endpoint.url)
        self.host, self.port = parts.hostname, parts.port or 80
        self.prefix = parts.path if parts.path.endswith("/") else parts.path + "/"
        self.headers = {"Connection": "close"} if endpoint.client == "per_request" else {}
        self._conn: _CountingConnection | None = None
        self._pid: int | None = None
        self._row = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.update(_conn=None, _pid=None, _row=None)
        return state

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{self.prefix}{quote(path)}"

    def row(self):
        """This process's counters (found on first use in each process)."""
        if self._pid != os.getpid():
            from torch.utils.data import get_worker_info

            info = get_worker_info()
            index = self.rank * self.endpoint.rows_per_rank + (info.id + 1 if info is not None else 0)
            self._row = self.endpoint.counters[index].numpy()
            self._conn, self._pid = None, os.getpid()
        return self._row

    def _connected(self) -> None:
        self.row()[CONNECTIONS] += 1

    def _connection(self) -> _CountingConnection:
        self.row()
        if self._conn is None or self.endpoint.client == "per_request":
            self._conn = _CountingConnection(
                self.host, self.port, timeout=self.endpoint.timeout_s, on_connect=self._connected
            )
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def open(self, path: str) -> http.client.HTTPResponse:
        """Send GET `path` and return the response with its body unread; read it with `read`, then `finish`."""
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None  # a kept-alive connection the server may have closed meanwhile
            try:
                conn.request("GET", self.prefix + quote(path), headers=self.headers)
                resp = conn.getresponse()
                break
            except TimeoutError as exc:
                self._drop()
                raise self.timeout(path) from exc
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                self._drop()
                if reused and attempt == 0:
                    continue
                raise self.unreachable(path, exc) from exc
        if resp.status != 200:
            resp.read()
            self._drop()
            raise StorageHttpError(
                f"GET {self.url(path)}: HTTP {resp.status} {resp.reason}: the server does not "
                f"have it (storage_url must serve the same relative paths as the [dataset])"
            )
        return resp

    def read(self, resp: http.client.HTTPResponse, path: str, size: int = -1) -> bytes:
        """Read from a response, turning a connection lost mid-answer or a stall into a typed fault."""
        owed = resp.length  # bytes the Content-Length still promises (None: unknown)
        try:
            data = resp.read(size) if size >= 0 else resp.read()
            if size and not data and owed:  # http.client reads a connection closed mid-body as a quiet end
                raise http.client.IncompleteRead(b"", owed)
            return data
        except TimeoutError as exc:
            self._drop()
            raise self.timeout(path) from exc
        except (http.client.IncompleteRead, ConnectionError, http.client.HTTPException, OSError) as exc:
            self._drop()
            raise self.unreachable(path, exc) from exc

    def finish(self, resp: http.client.HTTPResponse, path: str, nbytes: int, samples: int) -> None:
        """Count a finished GET; drain what is left of its body so a kept-alive connection can be reused."""
        rest = self.read(resp, path)
        row = self.row()
        row[REQUESTS] += 1
        row[BYTES] += nbytes + len(rest)
        row[SAMPLES] += samples
        if self.endpoint.client == "per_request" or resp.will_close:
            self._drop()

    def get(self, path: str) -> bytes:
        """The whole object at `path` (one sample)."""
        resp = self.open(path)
        data = self.read(resp, path)
        self.finish(resp, path, len(data), 1)
        return data

    def timeout(self, path: str) -> StorageTimeout:
        return StorageTimeout(
            f"GET {self.url(path)} got no answer within http_timeout_s = "
            f"{self.endpoint.timeout_s:g} s: the server or the network path stalls; if it is "
            f"only slow, raise http_timeout_s"
        )

    def unreachable(self, path: str, exc: BaseException) -> StorageUnreachable:
        return StorageUnreachable(
            f"GET {self.url(path)} failed ({_reason(exc)}): the HTTP server stopped "
            f"answering (down, or it refused or dropped the connection); check that it runs "
            f"(the record's storage block names the suite's own server), then run the cell "
            f"again"
        )
