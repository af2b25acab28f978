"""Open a page in headless Chromium and inspect it over the DevTools protocol, with a tiny stdlib websocket client
(no new dependency): load events, console errors, JavaScript evaluation, a full-page screenshot."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

INSTALL = "make chromium   (as root: apt-get install -y chromium)"


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


class WebSocket:
    """A minimal RFC 6455 client: text frames out (masked), text frames in (fragmented or not)."""

    def __init__(self, url: str, timeout: float = 30.0):
        host, port, path = re.match(r"ws://([^:/]+):(\d+)(/.*)", url).groups()
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError(head.decode(errors="replace"))

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("websocket closed")
            buf += chunk
        return buf

    def send(self, text: str) -> None:
        data, mask = text.encode(), os.urandom(4)
        n = len(data)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            if b0 & 0x0F in (0x1, 0x0):
                message += payload
                if b0 & 0x80:
                    return message.decode()

    def close(self) -> None:
        self.sock.close()


class Page:
    """One Chromium tab driven over the DevTools protocol; collects console errors and exceptions."""

    def __init__(self, tmp: Path):
        self.proc = subprocess.Popen([chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
                                      "--remote-debugging-port=0", f"--user-data-dir={tmp / 'chromium-profile'}",
                                      "--window-size=1280,900", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.time() + 60
        while port is None and time.time() < deadline:
            line = self.proc.stderr.readline()
            if m := re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line):
                port = int(m.group(1))
        if port is None:
            self.proc.kill()
            raise RuntimeError("chromium did not start its DevTools endpoint")
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30).read())
        url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        self.ws, self.next_id, self.errors, self.events = WebSocket(url), 0, [], []
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def _event(self, msg: dict) -> None:
        self.events.append(msg["method"])
        p = msg.get("params", {})
        if msg["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
        elif msg["method"] == "Runtime.exceptionThrown":
            self.errors.append(p["exceptionDetails"].get("text", "exception"))
        elif msg["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
            self.errors.append(p["entry"]["text"])

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self._event(msg)

    def open(self, url: str, timeout: float = 60) -> None:
        self.call("Page.navigate", url=url)
        deadline = time.time() + timeout
        while "Page.loadEventFired" not in self.events and time.time() < deadline:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self._event(msg)

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return res["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        png = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(png))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (OSError, ConnectionError, RuntimeError):
            pass
        self.ws.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
