"""A real S3 API on 127.0.0.1 for the store tests: moto's server, and a TCP proxy in
front of it that can go down (its process ended, then started again on the same port)
or be throttled to a known rate, the way a real store goes away or is slow. moto keeps
its objects in memory, so the proxy is what goes down; moto lives for the fixture. The
live proxy's rate can also change in place, its port never closed (`S3Server.change`):
a store that turns slow, or a black hole (rate 0: connections accepted, every byte held,
nothing answered), without the refused connections a restart would cause.

Every process here is started by the fixture and ended by its pid in a `finally`.
Run as `python tests/storekit.py proxy LISTEN_PORT TARGET_PORT [BYTES_PER_S|none [CONTROL]]`
(CONTROL: a file holding the new rate, read at SIGUSR1 and acknowledged in CONTROL.applied;
at SIGUSR2 it writes the bytes it has forwarded each way to CONTROL.moved).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()
SECRET = "itera-test-secret-Zq8VhT3w"  # the AWS secret the tests grep for everywhere
KEY_ID = "itera-test-key-id"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, up: bool, timeout: float = 30.0) -> None:
    from enginekit import wait_for  # here: the proxy's own process never loads it

    def answers() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    wait_for(lambda: answers() == up, timeout, what=f"port {port} {'up' if up else 'down'}")


def _end(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def aws_env() -> dict[str, str]:
    """Dummy credentials where botocore looks for them (never in campaign.toml)."""
    return {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


@dataclass
class S3Server:
    """moto's server on one port, reached through a proxy on another."""

    root: Path
    moto_port: int = field(default_factory=free_port)
    port: int = field(default_factory=free_port)  # what clients use (the proxy)
    rate: int | None = None  # bytes/s through the proxy, each way; None: unthrottled
    moto: subprocess.Popen | None = None
    proxy: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "S3Server":
        log = open(self.root / "moto.log", "wb")
        self.moto = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                      "-p", str(self.moto_port)], stdout=log, stderr=log,
                                     env=dict(os.environ, **aws_env()))
        _wait_port(self.moto_port, up=True)
        self.up()
        return self

    @property
    def direct(self) -> str:
        """moto's own endpoint, past the proxy: what the store holds, read however the
        proxy behaves."""
        return f"http://127.0.0.1:{self.moto_port}"

    @property
    def _control(self) -> Path:
        return self.root / "proxy.rate"

    def up(self) -> None:
        args = [sys.executable, str(HERE), "proxy", str(self.port), str(self.moto_port),
                "none" if self.rate is None else str(self.rate), str(self._control)]
        self.proxy = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
        _wait_port(self.port, up=True)

    def change(self, rate: int | None, timeout: float = 30.0) -> None:
        """The live proxy's rate changed in place (its port stays open, its connections
        live): None full speed, 0 a black hole that holds every byte. Returns once the
        proxy says it applies it."""
        assert self.proxy is not None and self.proxy.poll() is None, "the proxy is not up"
        said = "none" if rate is None else str(rate)
        applied = self._control.with_name(self._control.name + ".applied")
        applied.unlink(missing_ok=True)
        self._control.write_text(said)
        os.kill(self.proxy.pid, signal.SIGUSR1)  # our own child (its Popen)
        from enginekit import wait_for  # the tests' one wait (not in the proxy's process)

        wait_for(lambda: applied.exists() and applied.read_text() == said, timeout,
                 "the proxy to take its new rate")
        self.rate = rate

    def moved(self, timeout: float = 30.0) -> dict[str, int]:
        """The bytes the live proxy has forwarded so far: {"up": to the store, "down": from
        it}, headers included. What a transfer moved, counted without a clock."""
        assert self.proxy is not None and self.proxy.poll() is None, "the proxy is not up"
        said = self._control.with_name(self._control.name + ".moved")
        said.unlink(missing_ok=True)
        os.kill(self.proxy.pid, signal.SIGUSR2)  # our own child (its Popen)
        from enginekit import wait_for  # the tests' one wait (not in the proxy's process)

        wait_for(said.exists, timeout, "the proxy to say what it moved")
        return json.loads(said.read_text())

    def down(self) -> None:
        """The store goes away: the proxy's process ended, its port refuses."""
        _end(self.proxy)
        self.proxy = None
        _wait_port(self.port, up=False)

    def throttle(self, rate: int | None) -> None:
        self.down()
        self.rate = rate
        self.up()

    def stop(self) -> None:
        _end(self.proxy)
        _end(self.moto)

    def options(self) -> dict:
        return {"endpoint_url": self.endpoint}

    def fs(self):
        import s3fs

        return s3fs.S3FileSystem(endpoint_url=self.endpoint, key=KEY_ID, secret=SECRET,
                                 skip_instance_cache=True)

    def make_bucket(self, name: str) -> str:
        self.fs().mkdir(name)
        return f"s3://{name}"


@pytest.fixture
def s3(tmp_path, monkeypatch):
    """A started S3Server with the dummy credentials in this process's environment."""
    for key, value in aws_env().items():
        monkeypatch.setenv(key, value)
    server = S3Server(tmp_path)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def file_store_plan(tmp_path: Path):
    """The plan of a one-run campaign in `tmp_path/camp` whose store is the folder
    `tmp_path/store` (file://): a mirror's tests with nothing but files."""
    from enginekit import control_only, printer_cmd, write_plan
    from tui.campaign import load_plan

    root = tmp_path / "camp"
    root.mkdir()
    return load_plan(write_plan(root, control_only(printer_cmd()),
                                extra=f'\n[store]\nurl = "file://{tmp_path}/store"\n'))


def stored_view(url: str, part: str, options: dict | None = None):
    """(index, state of the stored ledger) of the store's `part` as a new box would read
    them; None while the live mirror rewrites what we read (a changed object is read
    again later) or before its first index."""
    import tempfile

    from tui.engine import replay
    from tui.engine.ledger.file import read_ledger_report
    from tui.store import StoreError, open_store, read_index, read_ledger as stored_ledger

    store = open_store(url, options or {})
    try:
        index = read_index(store, part)
        ledger = stored_ledger(store, part, index) if index is not None else b""
    except (OSError, StoreError):
        return None
    if index is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ledger.jsonl").write_bytes(ledger)
        return index, replay(read_ledger_report(Path(tmp) / "ledger.jsonl").events)


def resumable_runs(view, part: str) -> set[str]:
    """Runs with a checkpoint the store holds AND its stored ledger names as verified:
    what a resume elsewhere can continue from (the ledger is pushed about every second,
    so an object may be stored a moment before the lines that name it)."""
    if view is None:
        return set()
    index, state = view
    keys = {o.key for o in index.of_kind("checkpoint")}
    return {r.id for r in state.runs for v in r.verified
            if v.ok and f"{part}/checkpoints/{r.id}/{v.path}" in keys}


# -- the proxy (its own process: ended by pid to take the store down) ----------------------
def _proxy(listen: int, target: int, rate: int | None, control: Path | None = None) -> None:
    import asyncio

    now = {"rate": rate}  # changed in place at SIGUSR1 (S3Server.change)
    moved = {"up": 0, "down": 0}  # bytes forwarded each way, said at SIGUSR2 (S3Server.moved)

    def tell() -> None:
        said = control.with_name(control.name + ".moved")
        said.with_suffix(".part").write_text(json.dumps(moved))
        os.replace(said.with_suffix(".part"), said)

    def apply() -> None:
        said = control.read_text().strip()
        now["rate"] = None if said == "none" else int(said)
        control.with_name(control.name + ".applied").write_text(said)

    async def pipe(reader, writer, way):
        try:
            while True:
                r = now["rate"]
                data = await reader.read(65536 if r is None else min(65536, r // 20 + 1))
                if not data:
                    break
                while now["rate"] == 0:  # a black hole: held, never forwarded
                    await asyncio.sleep(0.05)
                writer.write(data)
                await writer.drain()
                moved[way] += len(data)
                if now["rate"]:
                    await asyncio.sleep(len(data) / now["rate"])
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def handle(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer, "up"), pipe(up_reader, writer, "down"))

    async def main():
        if control is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, apply)
            asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, tell)
        server = await asyncio.start_server(handle, "127.0.0.1", listen, reuse_address=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


if __name__ == "__main__" and len(sys.argv) >= 4 and sys.argv[1] == "proxy":
    _proxy(int(sys.argv[2]), int(sys.argv[3]),
           int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] != "none" else None,
           Path(sys.argv[5]) if len(sys.argv) > 5 else None)
