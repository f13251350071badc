"""docs/deploy.md, run as written: two hub processes on one PostgreSQL database behind a real
nginx, the "Try it" block in the shell that started them (its `kill -9 %2` is that shell's
job 2).

What the test changes, and only that: the ports 8500-8502 become free ones and /srv/agentpost a
temp dir (tests run side by side); `AGENTPOST_DB` names a fresh schema. Of step 1 only
`agentpost db migrate` runs: making a role with `createuser --pwprompt` asks for a password.
nginx gets the page's two blocks inside the `http { }` of a config of its own (its own pid file
and logs, as `conf.d/` would place them in the stock config), is checked with `nginx -t`, started,
and reloaded with `nginx -s reload` while the hubs serve.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deploy.md"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)

pytestmark = pytest.mark.skipif(
    NGINX is None and os.environ.get("AGENTPOST_REQUIRE_POSTGRES") != "1",
    reason="no nginx (Debian: apt-get install nginx-light)",
)

WAIT_FOR_HUBS = """
for port in {ports}; do
  for _ in $(seq 1 200); do curl -sf http://127.0.0.1:$port/v1/capabilities >/dev/null && break; sleep 0.05; done
done
{reload}
"""


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
def test_docs_deploy_md_runs_as_written(engine: str, tmp_path: Path) -> None:
    assert NGINX is not None, "CI installs nginx (.ci/run)"
    doc = DOC.read_text(encoding="utf-8")
    database, hubs, try_it = re.findall(r"```sh\n(.*?)```", doc, re.S)
    (proxy,) = re.findall(r"```nginx\n(.*?)```", doc, re.S)
    proxy_port, port1, port2 = _free_ports(3)
    srv = tmp_path / "srv"

    def local(text: str) -> str:
        text = text.replace("/srv/agentpost", str(srv))
        for doc_port, port in (("8500", proxy_port), ("8501", port1), ("8502", port2)):
            text = text.replace(doc_port, str(port))
        return text

    bindir = Path(sys.executable).parent  # `agentpost` of this install, as `pip install` puts it
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    env |= {"AGENTPOST_DB": engine, "PATH": f"{bindir}:{env['PATH']}"}

    migrate = [line for line in database.splitlines() if line.startswith("agentpost ")]
    assert [m.split("#")[0].strip() for m in migrate] == ["agentpost db migrate"]
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", migrate[0]],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr

    prefix = tmp_path / "nginx"
    prefix.mkdir()
    (prefix / "agentpost.conf").write_text(local(proxy))
    conf = prefix / "nginx.conf"
    conf.write_text(
        f"pid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\n"
        + ("user www-data;\n" if os.geteuid() == 0 else "")
        + "events {}\n"
        f"http {{\n  access_log off;\n  include {prefix}/agentpost.conf;\n}}\n"
    )
    nginx = [NGINX, "-p", str(prefix), "-c", str(conf)]
    checked = subprocess.run([*nginx, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    subprocess.run(nginx, check=True, timeout=30)
    try:
        glue = WAIT_FOR_HUBS.format(
            ports=f"{port1} {port2}", reload=" ".join([*nginx, "-s", "reload"])
        )
        script = local(hubs) + glue + local(try_it) + "\nkill $(jobs -p) 2>/dev/null; wait\n"
        p = subprocess.run(
            ["bash", "-uo", "pipefail", "-c", script],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )
    finally:
        subprocess.run([*nginx, "-s", "quit"], timeout=30)
    out = p.stdout
    assert out.count("agentpost hub listening on http://127.0.0.1:") == 2, out + p.stderr
    statuses = re.findall(r"(?im)^idempotency-status: (\w+)", out)
    assert statuses == ["created", "replayed"], out + p.stderr
    # `agentpost tail general`: each message once, seq gap-free, the second through the survivor.
    room = re.findall(r"(?m)^(\d+)\t\S+\thana:\t(.*)$", out)  # piped: tab-separated
    assert room == [("1", "hello"), ("2", "still served")], out + p.stderr
    killed = re.search(r"Killed\s+agentpost serve --port (\d+)", p.stderr)
    assert killed is not None and killed.group(1) == str(port2), p.stderr  # job 2: 8502's
