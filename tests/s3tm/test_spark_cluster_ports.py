"""The standalone cluster takes its master's ports from the master's own log: a port picked
free before the JVM starts can be taken by then, and Spark binds the next one."""

from __future__ import annotations

from pathlib import Path

from tests.support.spark_cluster import StandaloneCluster

MASTER_LOG = """\
26/11/27 16:58:19 INFO Utils: Successfully started service 'sparkMaster' on port 34460.
26/11/27 16:58:20 INFO Master: Starting Spark master at spark://127.0.0.1:34460
26/11/27 16:58:20 INFO Utils: Successfully started service 'MasterUI' on port 33210.
26/11/27 16:58:21 INFO MasterWebUI: Bound MasterWebUI to 127.0.0.1, and started at http://localhost:33210
"""


def test_the_master_ports_are_the_ones_its_log_says_it_bound(tmp_path: Path) -> None:
    cluster = StandaloneCluster(tmp_path, port=34459, ui_port=33209)
    assert cluster._bound_ports() is None  # no log yet
    (tmp_path / "master.log").write_text(MASTER_LOG.splitlines(keepends=True)[0])
    assert cluster._bound_ports() is None  # bound the RPC port, not yet said where
    (tmp_path / "master.log").write_text(MASTER_LOG)
    assert cluster._bound_ports() == (34460, 33210)


def test_a_page_that_is_not_the_masters_json_reads_as_not_up(tmp_path: Path) -> None:
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<!DOCTYPE html><html></html>")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cluster = StandaloneCluster(tmp_path, ui_port=server.server_address[1])
        assert cluster.state() == {} and cluster.alive_workers() == 0
    finally:
        server.shutdown()
