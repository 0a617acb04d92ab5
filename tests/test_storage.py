"""loaderbench/storage without the runner: which worker reads which shard, shards written and read back (and caught
when truncated wherever they are cut, told apart from a server gone mid-answer), the exactly-once count per
pass, the delaying proxy's latency and bandwidth (lower bounds on time only: load can slow a request, never
speed it up), the missing-tool error and the study rules."""

from __future__ import annotations

import http.server
import itertools
import json
import socket
import subprocess
import sys
import tarfile
import threading
import time

import pytest

from loaderbench.errors import StudyError, ToolMissing
from loaderbench.schema.cell import CellConfig
from loaderbench.storage import host_tools as tools
from loaderbench.storage.exactly_once import ShardPasses
from loaderbench.storage.tar_shards import (
    TRUNCATED_SHARD,
    ShardTruncated,
    assigned,
    ensure_shards,
    key_of,
    load,
    read_samples,
)
from tests.conftest import REPO


@pytest.fixture(scope="module")
def prepared():
    from loaderbench.datasets import DatasetSpec, ensure_dataset

    return ensure_dataset(DatasetSpec(kind="synthetic-jpeg", images=16))


# --- which loader process reads which shard -------------------------------------------------------------------


@pytest.mark.parametrize("shards,ranks,workers", list(itertools.product([1, 3, 7, 16], [1, 2, 3], [1, 2, 4, 5])))
def test_split_gives_every_shard_to_exactly_one_worker_of_one_rank(shards, ranks, workers):
    owners = {}
    for r, w in itertools.product(range(ranks), range(workers)):
        for i in assigned(shards, r, ranks, w, workers, "split"):
            assert i not in owners, f"shard {i} read by {owners[i]} and {(r, w)}"
            owners[i] = (r, w)
    assert sorted(owners) == list(range(shards))
    for i, (r, w) in owners.items():  # WebDataset's rule: by node first, then by worker
        assert r == i % ranks and w == (i // ranks) % workers


def test_one_rank_gives_shard_i_to_worker_i_mod_workers():
    assert [assigned(10, 0, 1, w, 4, "split") for w in range(4)] == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]


def test_no_sharding_gives_every_worker_every_shard():
    assert all(assigned(5, r, 2, w, 3, "none") == [0, 1, 2, 3, 4] for r in range(2) for w in range(3))


# --- shards on disk ------------------------------------------------------------------------------------------


def test_shards_hold_every_sample_in_webdataset_layout(prepared, tmp_path):
    s = ensure_shards(prepared, 3, 5, cache=tmp_path)  # 15 samples of 16 images
    assert s.count == 3 and s.samples == (5, 5, 5) and s.first_key == (0, 5, 10)
    seen = []
    for i, name in enumerate(s.names):
        with tarfile.open(s.root / name) as tar:  # any tar reader sees <key>.jpg, <key>.cls pairs
            names = tar.getnames()
        keys = [key_of(j) for j in range(5 * i, 5 * i + 5)]
        assert names == [f"{k}.{ext}" for k in keys for ext in ("jpg", "cls")]
        with open(s.root / name, "rb") as fh:
            for key, jpg, label in read_samples(fh, fh.read, name, s.sizes[i], s.samples[i], "here"):
                j = int(key)
                assert jpg == prepared.paths()[j % len(prepared)].read_bytes()
                assert label == prepared.labels[j % len(prepared)]
                seen.append(j)
    assert seen == list(range(15))
    assert ensure_shards(prepared, 3, 5, cache=tmp_path).root == s.root  # cached: not written again


@pytest.mark.parametrize("cut", ["header", "member", "padding", "half"])
def test_a_truncated_shard_is_caught_wherever_it_is_cut(prepared, tmp_path, cut):
    s = ensure_shards(prepared, 1, 4, cache=tmp_path)
    data = (s.root / s.names[0]).read_bytes()
    with tarfile.open(s.root / s.names[0]) as tar:
        second = tar.getmembers()[2]  # the second sample's .jpg: its header starts a 512-byte block
    at = {
        "header": second.offset,
        "member": second.offset_data + 100,
        "padding": len(data) - 512,
        "half": len(data) // 2,
    }[cut]
    cut_file = tmp_path / "cut.tar"
    cut_file.write_bytes(data[:at])
    with open(cut_file, "rb") as fh, pytest.raises(ShardTruncated, match=r"is truncated: it ended after \d+ of its"):
        list(read_samples(fh, fh.read, s.names[0], s.sizes[0], s.samples[0], str(tmp_path)))


def test_the_truncated_variant_cuts_one_shard_and_keeps_the_intact_index(prepared, tmp_path):
    intact = ensure_shards(prepared, 3, 2, cache=tmp_path)
    cut = ensure_shards(prepared, 3, 2, truncated=True, cache=tmp_path)
    assert cut.truncated and cut.sizes == intact.sizes
    for i, name in enumerate(cut.names):
        size = (cut.root / name).stat().st_size
        assert (size < intact.sizes[i]) == (i == TRUNCATED_SHARD)
    assert load(intact.root) == intact


# --- exactly once, per pass ------------------------------------------------------------------------------------


def batch(keys, passes, workers):
    import torch

    return {"__key__": [key_of(k) for k in keys], "__pass__": torch.tensor(passes), "__worker__": torch.tensor(workers)}


def test_passes_split_across_workers_count_no_duplicate_and_nothing_missing():
    obs = ShardPasses(expected={0, 1, 2, 3}, readers={0, 1}, sharding="split")
    obs.see(batch([0, 1], [0, 0], [0, 0]), 0)  # worker 0 holds keys 0, 1; worker 1 keys 2, 3
    obs.see(batch([2, 3], [0, 0], [1, 1]), 1)
    obs.see(batch([0, 1], [1, 1], [0, 0]), 2)
    obs.see(batch([2, 3], [1, 1], [1, 1]), 3)
    m = obs.metrics()["shard_passes"]
    passes = m["epochs"][0]
    assert [p["complete"] for p in passes] == [True, False]  # pass 1: nobody has gone past it yet
    assert passes[0] | {"pass": 0} == {
        "pass": 0,
        "complete": True,
        "seen": 4,
        "distinct": 4,
        "duplicates": 0,
        "missing": 0,
        "unexpected": 0,
    }
    assert (m["passes_complete"], m["duplicates"], m["missing"]) == (1, 0, 0)
    assert obs.warnings() == []


def test_unsplit_workers_show_their_duplicates_and_a_lost_sample_shows_as_missing():
    obs = ShardPasses(expected={0, 1, 2}, readers={0, 1}, sharding="none")
    for w in (0, 1):
        obs.see(batch([0, 1, 2], [0, 0, 0], [w] * 3), w)
        obs.see(batch([0], [1], [w]), 2 + w)
    assert obs.metrics()["shard_passes"]["epochs"][0][0]["duplicates"] == 3  # each key read by both workers
    lost = ShardPasses(expected={0, 1, 2}, readers={0}, sharding="split")
    lost.see(batch([0, 2, 0], [0, 0, 1], [0, 0, 0]), 0)
    m = lost.metrics()["shard_passes"]
    assert m["missing"] == 1 and any("missing" in w for w in lost.warnings())


# --- the delaying proxy ----------------------------------------------------------------------------------------

BODY = bytes(range(256)) * 2048  # 512 KiB


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept-alive connections, as nginx's

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


@pytest.fixture
def upstream():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def start_proxy(upstream_port: int, **opts) -> tuple[subprocess.Popen, int]:
    args = [f"--{k.replace('_', '-')}={v}" for k, v in opts.items()]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loaderbench.storage.proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            f"127.0.0.1:{upstream_port}",
            *args,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
    )
    line = proc.stdout.readline().decode()
    assert line.startswith("ready "), line
    return proc, int(line.split()[1])


def timed_get(conn) -> float:
    t0 = time.perf_counter()
    conn.request("GET", "/x")
    body = conn.getresponse().read()
    assert body == BODY
    return time.perf_counter() - t0


def test_proxy_adds_a_round_trip_per_request_and_one_more_per_connection(upstream):
    import http.client

    proc, port = start_proxy(upstream, latency_ms=60)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        first = timed_get(conn)  # new connection: the handshake's round trip, then the request's
        again = timed_get(conn)  # kept alive: the request's round trip only
        conn.close()
    finally:
        proc.kill()
        proc.wait()
    assert first >= 0.120 and again >= 0.060, (first, again)


def test_proxy_caps_the_bandwidth_of_all_connections_together(upstream):
    import http.client
    from concurrent.futures import ThreadPoolExecutor

    proc, port = start_proxy(upstream, bandwidth_mbit=40)
    try:

        def fetch(_):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            timed_get(conn)
            conn.close()

        t0 = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(fetch, range(4)))
        took = time.perf_counter() - t0
    finally:
        proc.kill()
        proc.wait()
    assert took >= 4 * len(BODY) * 8 / 40e6, took  # 4 x 512 KiB through one 40 Mbit/s link: at least 0.42 s


def test_proxy_jitter_spreads_delays_around_the_latency_within_its_bounds():
    from loaderbench.storage.proxy import DelayingProxy, Link

    proxy = DelayingProxy(("127.0.0.1", 1), latency_s=0.040, jitter_s=0.015, link=Link(0), seed=3)
    delays = [proxy.delay() for _ in range(2000)]
    assert 0.025 <= min(delays) and max(delays) <= 0.055
    assert sum(d < 0.035 for d in delays) > 400 and sum(d > 0.045 for d in delays) > 400  # both tails, uniform
    assert abs(sum(delays) / len(delays) - 0.040) < 0.001
    clamped = DelayingProxy(("127.0.0.1", 1), latency_s=0.005, jitter_s=0.020, link=Link(0), seed=3)
    assert min(clamped.delay() for _ in range(500)) == 0.0  # never a negative delay


def test_proxy_closes_the_client_when_the_server_is_gone():
    import http.client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens there once closed
    proc, port = start_proxy(dead)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            timed_get(conn)
    finally:
        proc.kill()
        proc.wait()


# --- the client ------------------------------------------------------------------------------------------------


def _shard_bytes() -> bytes:
    """A two-sample shard in webdataset layout, in memory."""
    import io

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for key in ("a", "b"):
            for ext, data in (("jpg", BODY[:4000]), ("cls", b"1")):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _cut_server(body: bytes, sent: int) -> tuple[socket.socket, threading.Thread]:
    """A server that promises `body`, sends `sent` bytes of it and closes: a server killed mid-answer."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body[:sent])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_a_server_gone_mid_shard_is_unreachable_not_a_truncated_shard():
    """http.client ends a sized read quietly when the connection closes early; the tar reader would then call the
    shard truncated. The client must name the fault that happened: the server stopped answering."""
    import torch

    from loaderbench.storage.client import Endpoint, HttpClient, StorageUnreachable

    shard, name = _shard_bytes(), "shard-000000.tar"
    for cut in (3_000, 5_000):  # inside the first sample; after it, inside the second
        listener, thread = _cut_server(shard, sent=cut)
        with listener:
            port = listener.getsockname()[1]
            counters = torch.zeros((1, 4), dtype=torch.int64)
            client = HttpClient(Endpoint(f"http://127.0.0.1:{port}/", "pooled", 10.0, counters, 1))
            resp = client.open(name)
            samples = read_samples(
                resp,
                lambda size=-1, client=client, resp=resp: client.read(resp, name, size),
                name,
                len(shard),
                2,
                client.url(name),
            )
            with pytest.raises(StorageUnreachable, match="stopped answering"):
                list(samples)
            thread.join(10)


def test_a_complete_answer_reads_to_its_end_without_a_fault():
    import torch

    from loaderbench.storage.client import Endpoint, HttpClient

    shard = _shard_bytes()
    listener, thread = _cut_server(shard, sent=len(shard))
    with listener:
        port = listener.getsockname()[1]
        counters = torch.zeros((1, 4), dtype=torch.int64)
        client = HttpClient(Endpoint(f"http://127.0.0.1:{port}/", "pooled", 10.0, counters, 1))
        resp = client.open("x")
        got = b"".join(iter(lambda: client.read(resp, "x", 1024), b""))
        assert got == shard
        thread.join(10)


# --- what is missing, what is allowed --------------------------------------------------------------------------


def http_cell(**axes) -> CellConfig:
    return CellConfig(workload="jpeg", storage="http", warmup_batches=0, measure_batches=1, seed=0, **axes)


def hide(monkeypatch, *names):
    real = tools.find_program
    monkeypatch.setattr(tools, "find_program", lambda n: None if n in names else real(n))


def test_missing_nginx_is_one_error_naming_it_and_how_to_install_it(monkeypatch, tmp_path, capsys):
    hide(monkeypatch, "nginx")
    with pytest.raises(ToolMissing, match=r"nginx not found .* install it with tools/install-storage-tools\.sh"):
        tools.check_tools([http_cell(storage_url=None)])
    tools.check_tools([http_cell(storage_url="http://10.1.2.3:8080/data/")])  # the user's own server

    from loaderbench.cli import main

    study = tmp_path / "s.toml"
    study.write_text(
        '[study]\nname = "s"\nrepetitions = 1\n[dataset]\nimages = 16\n[matrix]\nworkload = "jpeg"\nstorage = "http"\n'
    )
    assert main(["run", str(study), "--results", str(tmp_path / "results")]) == 2
    errors = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln.startswith("error")]
    assert len(errors) == 1 and errors[0].startswith("error: nginx not found"), errors
    assert not (tmp_path / "results" / "s").exists() or not any((tmp_path / "results" / "s").glob("*.json"))


def test_missing_ip_and_tc_refuse_kernel_shaping(monkeypatch):
    hide(monkeypatch, "ip", "tc")
    tools.kernel_shaping.cache_clear()
    try:
        with pytest.raises(ToolMissing, match=r"shaping = \"kernel\" cannot be used here: ip or tc not found"):
            tools.check_tools([http_cell(shaping="kernel")])
        assert tools.path_plan(http_cell(latency_ms=5.0, shaping="auto")).latency == "proxy"
    finally:
        tools.kernel_shaping.cache_clear()


def test_study_rules_and_http_only_axes(tmp_path):
    from loaderbench.study.study_file import load_study

    base = '[study]\nname = "s"\n[dataset]\nimages = 16\n[matrix]\n'
    path = tmp_path / "s.toml"
    path.write_text(
        base + 'workload = "jpeg"\nstorage = "local"\nlatency_ms = [0, 10]\nhttp_client = ["pooled", "per_request"]\n'
    )
    (cell,) = load_study(path).cells  # nothing of a network path describes local storage
    assert cell["latency_ms"] is None and cell["http_client"] is None and cell["storage"] == "local"
    path.write_text(
        base + 'workload = "jpeg"\nstorage = ["local", "http"]\nstorage_fault = ["server_stop", "truncated_shard"]\n'
    )
    with pytest.raises(StudyError) as exc:
        load_study(path)
    text = str(exc.value)
    assert 'storage_fault = "server_stop"' in text and 'storage_fault = "truncated_shard"' in text
    path.write_text(base + 'workload = "jpeg"\nstorage = "http"\nstorage_url = "ftp://x/"\n')
    with pytest.raises(StudyError, match="storage_url"):
        load_study(path)


def test_the_storage_study_is_valid():
    from loaderbench.study.study_file import load_study

    study = load_study(REPO / "loaderbench" / "studies" / "storage.toml", max_cores=2)
    kinds = {(c["workload"], c["storage"], c["http_client"], c["sharding"]) for c in study.cells}
    assert ("jpeg", "http", "per_request", None) in kinds and ("shards", "http", "pooled", "none") in kinds
    assert json.dumps([c.config for c in study.cells])  # records can hold every config


def test_make_test_and_the_image_install_the_storage_tools():
    makefile = (REPO / "Makefile").read_text()
    assert "test: setup storage-tools" in makefile and "bash tools/install-storage-tools.sh" in makefile
    dockerfile = (REPO / "containers" / "Dockerfile").read_text()
    runtime = next(line for line in dockerfile.splitlines() if "libjpeg62-turbo=" in line and "install" not in line)
    assert " nginx " in f" {runtime} " and " iproute2 " in f" {runtime} "
    script = (REPO / "tools" / "install-storage-tools.sh").read_text()
    assert "pkgs=(nginx iproute2)" in script and "tools/apt-ensure.sh" in script
    assert "policy-rc.d" in (REPO / "tools" / "apt-ensure.sh").read_text()  # no system-wide nginx started


def test_a_failed_nginx_start_leaves_neither_workers_nor_its_folder(monkeypatch, tmp_path):
    """nginx's workers outlive a killed master (re-parented); the start's failure path must end them too."""
    import os
    import tempfile

    from loaderbench.storage import nginx

    exe = tools.find_program("nginx")
    if exe is None:
        pytest.skip("nginx is not installed (tools/install-storage-tools.sh)")
    seen: list[int] = []

    def fail_once_forked(proc, pidfile, log_fd, timeout_s=nginx.READY_TIMEOUT_S):
        deadline = time.monotonic() + 60
        while not seen and time.monotonic() < deadline:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as fh:
                seen.extend(int(c) for c in fh.read().split())
            time.sleep(0.01)
        raise RuntimeError("injected: start-up failed after the worker was forked")

    monkeypatch.setattr(nginx, "wait_started", fail_once_forked)
    before = {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(nginx.WORKDIR_PREFIX)}
    with pytest.raises(RuntimeError, match="injected"):
        nginx.start(exe, tmp_path, "127.0.0.1", nginx.free_port())
    assert seen, "nginx never forked a worker"
    for pid in seen:
        gone = not os.path.exists(f"/proc/{pid}")
        assert gone or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z", f"worker {pid} alive"
    after = {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(nginx.WORKDIR_PREFIX)}
    assert after <= before
