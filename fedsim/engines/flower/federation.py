"""A SuperLink on 127.0.0.1 and fedsim's app run on it with ``flwr run``: ``fedsim flower deploy`` and ``simulate``.

`LocalFederation` starts ``flower-superlink`` bound to the loopback interface, with Flower's
home in a new short temporary folder (its ``config.toml`` names this SuperLink). For ``deploy``
it then starts one ``flower-supernode`` per partition (its ``--node-config`` names the
partition). For ``simulate`` the SuperLink runs Flower's simulation runtime instead, the one
``flwr run`` starts for a local federation (``flower-superlink --simulation``): each run's
virtual SuperNodes are Ray actors of a ``flwr-simulation`` process, as many as the run's
federation config says. `run` submits fedsim's app folder with ``flwr run --stream``, the run's
settings as a run-config file.
With ``authenticate`` the SuperLink admits only SuperNodes whose keys it has registered: each
SuperNode gets a new key in that temporary folder, registered with ``flwr supernode register``
before the node starts. Every process it started, and every process those started, is stopped
on the way out, after an error or Ctrl-C too. Nothing is installed at run time and nothing
checks for updates.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ...interrupts import raise_terminated
from ...processes import LOOPBACK, free_port, stop_all
from ...references import child_environment
from .app_files import APP_FOLDER, toml_entries, toml_value
from .certificates import Certificates, NodeKey, write_node_key

#: Seconds the SuperLink has to start listening.
START_TIMEOUT_S = 60.0
#: The name of the SuperLink connection in Flower's ``config.toml``.
CONNECTION = "fedsim"
#: Seconds ``flwr supernode register`` has to answer.
REGISTER_TIMEOUT_S = 60.0
#: Seconds between two calls of `LocalFederation.run`'s ``watch``.
WATCH_INTERVAL_S = 0.5


class LocalFederation:
    """A SuperLink and ``num_supernodes`` SuperNodes on 127.0.0.1, for ``with`` (stopped on exit).

    Parameters
    ----------
    num_supernodes : int
        SuperNode i serves partition i of ``num_supernodes``.
    superlink_port : int, optional
        The SuperLink's port (its one HTTP port serves the nodes, ``flwr`` and the ServerApp);
        a free one when omitted.
    certificates : Certificates, optional
        Serve TLS with these (`fedsim.engines.flower.certificates.write_certificates`);
        without them the connections are plain (``--insecure``).
    authenticate : bool, default False
        SuperNode authentication (``--enable-supernode-auth``): only SuperNodes with a
        registered key may join. Needs ``certificates``: Flower authenticates over TLS only.
    simulation : bool, default False
        Run Flower's simulation runtime: no SuperNode processes; `run` asks for
        ``num_supernodes`` virtual ones, each a Ray actor with one CPU and one torch thread.
    num_cpus : int, optional
        Under ``simulation``, the CPUs Ray may use, so the actors that run at once (default: all).

    Ray's temporary folder is in the federation's home, whose short path keeps Ray's socket
    paths within their 107 bytes. Each process's output goes to a file in the federation's temporary folder, whose last
    lines an error quotes.
    """

    def __init__(self, num_supernodes: int, *, superlink_port: int | None = None,
                 certificates: Certificates | None = None, authenticate: bool = False, simulation: bool = False,
                 num_cpus: int | None = None):
        check_authentication(authenticate, certificates is not None)
        self.num_supernodes = num_supernodes
        self.simulation, self.num_cpus = simulation, num_cpus
        self.certificates = certificates
        self.authenticate = authenticate
        self.superlink_port = superlink_port
        self.processes: list[subprocess.Popen] = []
        self.home: Path | None = None

    def __enter__(self) -> LocalFederation:
        self.home = Path(tempfile.mkdtemp(prefix="fedsim-flower-", dir="/tmp"))
        # SIGTERM (a scheduler's stop, `kill`) ends the ``with`` block as Ctrl-C does, so the processes are stopped
        self._previous_handler = signal.signal(signal.SIGTERM, raise_terminated)
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every process started here, and remove Flower's temporary home."""
        stop_all(self.processes)
        self.processes = []
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None
            signal.signal(signal.SIGTERM, self._previous_handler)

    def environment(self) -> dict:
        """The environment of every Flower process: this Python's tools first, no network, one thread each.

        Ray's sessions go under the federation's home (``RAY_TMPDIR``), removed with it. The
        folder the run started in stays importable, so that a user's code named by module reference
        (``--model my_pkg.nets:make``) reaches every node (`fedsim.references.child_environment`).
        """
        env = child_environment(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env.update(FLWR_HOME=str(self.home), FLWR_DISABLE_UPDATE_CHECK="1", FLWR_TELEMETRY_ENABLED="0",
                   FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1", OMP_NUM_THREADS="1", RAY_TMPDIR=str(self.home))
        return env

    def start(self) -> None:
        """Start the SuperLink, wait until it listens, then start the SuperNodes (registering their keys).

        Under ``simulation`` the SuperLink alone: its runtime makes the virtual SuperNodes of each run.
        """
        port = self.superlink_port if self.superlink_port is not None else free_port()
        check_port_free(port, "--superlink-port")
        self.superlink_port = port
        security = (["--insecure"] if self.certificates is None else
                    ["--ssl-ca-certfile", str(self.certificates.ca),
                     "--ssl-certfile", str(self.certificates.certificate),
                     "--ssl-keyfile", str(self.certificates.key)])
        if self.authenticate:
            security.append("--enable-supernode-auth")
        runtime = ["--simulation"] if self.simulation else []
        superlink = self._spawn("superlink", ["flower-superlink", *security, *runtime, "--host", LOOPBACK,
                                              "--port", str(port), "--disable-runtime-dependency-installation"])
        wait_listening(port, superlink, self.log_path("superlink"))
        self.write_connection()
        if self.simulation:
            return
        for partition_id in range(self.num_supernodes):
            name = f"supernode-{partition_id}"
            key = self.register(write_node_key(self.home / "keys", name)) if self.authenticate else None
            self.start_supernode(name, partition_id, key)

    def write_connection(self) -> None:
        """Name this SuperLink in Flower's ``config.toml``, for ``flwr`` (the connection `CONNECTION`)."""
        security = ({"insecure": True} if self.certificates is None
                    else {"root-certificates": str(self.certificates.ca)})
        connection = {"address": f"{LOOPBACK}:{self.superlink_port}", **security}
        (self.home / "config.toml").write_text(f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
                                               + toml_entries(connection))

    def register(self, key: NodeKey) -> NodeKey:
        """Register ``key``'s public half with the SuperLink (``flwr supernode register``); return ``key``."""
        command = ["flwr", "supernode", "register", str(key.public), CONNECTION]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=self.environment(), cwd=self.home, timeout=REGISTER_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"flwr supernode register {key.public.name} exited with status {done.returncode}:\n"
                               f"{done.stdout.strip()}")
        return key

    def start_supernode(self, name: str, partition_id: int, key: NodeKey | None = None) -> subprocess.Popen:
        """Start a SuperNode serving ``partition_id``, signing with ``key`` when given; its log is ``name``'s."""
        security = (["--insecure"] if self.certificates is None else
                    ["--root-certificates", str(self.certificates.ca)])
        if key is not None:
            security += ["--auth-supernode-private-key", str(key.private)]
        return self._spawn(name, [
            "flower-supernode", *security, "--superlink", f"{LOOPBACK}:{self.superlink_port}",
            "--node-config", f"partition-id={partition_id} num-partitions={self.num_supernodes}",
            "--host", LOOPBACK, "--port", str(free_port()),
        ])

    def run(self, entries: dict, *, stream=None, app_folder: Path = APP_FOLDER, watch=None) -> int:
        """Submit an app with run-config ``entries`` and stream its log; return ``flwr run``'s exit status.

        Parameters
        ----------
        entries : dict
            The run config (`fedsim.engines.flower.records.to_run_config` and the app's entries).
        stream : file, optional
            Receives Flower's log of the run (default: this process's standard output).
        app_folder : Path, default fedsim's app
        watch : callable, optional
            Called about twice a second while the run goes on (a progress bar's update).
        """
        settings = self.home / "settings.toml"
        settings.write_text(toml_entries(entries))
        command = ["flwr", "run", str(app_folder), CONNECTION, "--stream", "--run-config", str(settings)]
        if self.simulation:
            command += ["--federation-config", federation_config_words(self.federation_config())]
        process = self._spawn("flwr-run", command, output=stream if stream is not None else sys.stdout)
        while True:
            try:
                return process.wait(timeout=WATCH_INTERVAL_S)
            except subprocess.TimeoutExpired:
                if watch is not None:
                    watch()

    def federation_config(self) -> dict:
        """Return the simulation runtime's settings: the virtual SuperNodes, one CPU each, Ray's CPUs."""
        config = {"num-supernodes": self.num_supernodes, "client-resources-num-cpus": 1,
                  "client-resources-num-gpus": 0.0}
        if self.num_cpus is not None:
            config["init-args-num-cpus"] = self.num_cpus
        return config

    def log_path(self, name: str) -> Path:
        """The file that holds process ``name``'s output."""
        return self.home / f"{name}.log"

    def _spawn(self, name: str, command: list[str], output=None) -> subprocess.Popen:
        log = output if output is not None else self.log_path(name).open("w")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.environment(),
                                   cwd=self.home, start_new_session=True)
        self.processes.append(process)
        return process


def federation_config_words(entries: dict) -> str:
    """Return ``entries`` as the space-separated ``key=value`` words of ``flwr run --federation-config``.

    Examples
    --------
    >>> federation_config_words({"num-supernodes": 3, "client-resources-num-cpus": 1})
    'num-supernodes=3 client-resources-num-cpus=1'
    """
    return " ".join(f"{name}={toml_value(value)}" for name, value in entries.items())


def check_authentication(authenticate: bool, tls: bool) -> None:
    """Refuse SuperNode authentication without TLS, which Flower does not offer."""
    if authenticate and not tls:
        raise ValueError("`--auth` needs `--tls DIR`: Flower authenticates SuperNodes over TLS only")


def check_port_free(port: int, flag: str) -> None:
    """Refuse a port outside 1..65535 or one that something on 127.0.0.1 already uses, naming ``flag``."""
    if not 0 < port < 65536:
        raise ValueError(f"`{flag}` must be a TCP port in 1..65535, got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            raise ValueError(f"`{flag}` {port} is in use on {LOOPBACK}; give a free port or leave the flag out "
                             "for one chosen for you") from None


def wait_listening(port: int, process: subprocess.Popen, log: Path, timeout_s: float = START_TIMEOUT_S) -> None:
    """Wait until ``process`` accepts connections on ``port``; raise with its log's end if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"flower-superlink exited with status {process.returncode}:\n{tail(log)}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            if probe.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"flower-superlink did not listen on {LOOPBACK}:{port} within {timeout_s:g} s:\n{tail(log)}")


def tail(path: Path, lines: int = 20) -> str:
    """Return the last ``lines`` lines of a log file ("" when there is none)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
