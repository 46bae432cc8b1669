"""Test-only: every Python process started with this folder on PYTHONPATH imports this module at start-up (`site`
imports the first sitecustomize on the path). With NETWORK_GUARD_LOG set, a connection or a name lookup for any
address other than loopback fails, as on a machine without network, and every connection a process attempts is
appended to that file as one JSON line: {pid, argv, job, address, allowed}; `job`, the job a pipeline worker runs
(shape_of_learning.worker.JOB_VARIABLE), whose argv names no job."""

import json
import os
import socket
import sys

LOG = os.environ.get("NETWORK_GUARD_LOG")
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def _loopback(host) -> bool:
    return str(host) in LOOPBACK_NAMES or str(host).startswith("127.")


def _record(address, allowed: bool) -> None:
    with open(LOG, "a") as log:
        log.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "argv": sys.argv,
                    "job": os.environ.get("SHAPE_OF_LEARNING_JOB", ""),
                    "address": list(address) if isinstance(address, tuple) else str(address),
                    "allowed": allowed,
                }
            )
            + "\n"
        )


if LOG:
    _connect, _connect_ex, _getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def _checked(self, address):
        if self.family not in (socket.AF_INET, socket.AF_INET6):
            return True  # a Unix socket: no network
        allowed = _loopback(address[0])
        _record(address, allowed)
        if not allowed:
            raise OSError(101, f"network guard: no connection to {address[0]} (loopback only)")
        return allowed

    def connect(self, address):
        _checked(self, address)
        return _connect(self, address)

    def connect_ex(self, address):
        _checked(self, address)
        return _connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if host is not None and not _loopback(host):
            _record((host, "lookup"), False)
            raise socket.gaierror(socket.EAI_NONAME, f"network guard: no name lookup of {host} (loopback only)")
        return _getaddrinfo(host, *args, **kwargs)

    socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = connect, connect_ex, getaddrinfo
