"""A local stand-in for the Hugging Face Hub: the part of its HTTP API that huggingface_hub (2.4) and this pipeline
use, served on 127.0.0.1 from a folder, with failures injected by configuration, never at random.

    python -m shape_of_learning.rehearsal.local_hub HUB_FOLDER --port 8088 [--faults faults.json]
    HF_ENDPOINT=http://127.0.0.1:8088 snakemake ...          # pins and downloads reach it; HF_TOKEN as on the Hub

    with LocalHub(folder, faults=[Fault("*/model.safetensors", drop_after=1000)]) as hub:   # in a test
        os.environ["HF_ENDPOINT"] = hub.endpoint

The hub folder holds one folder per repository, `<owner>/<name>/`, with one folder per branch under `revisions/`
(its files, subfolders allowed) and, for a gated repository, an empty file `gated`:

    <root>/EleutherAI/pythia-70m/revisions/step1000/config.json
    <root>/EleutherAI/pythia-70m/revisions/step1000/model.safetensors
    <root>/meta-llama/Llama-2-7b-hf/gated

A branch's commit sha is the sha1 of its name and its files' (path, sha256) list: the same files on the same branch
give the same sha on every machine. A file is stored with Git LFS where the Hub's default .gitattributes puts it
(`LFS_PATTERNS`: weights, archives, sentencepiece models): its sha256 is listed and is its ETag, as on the Hub.

Endpoints, as huggingface_hub calls them (hf_api.py, file_download.py):

    GET  /api/models/{repo}/refs                       list_repo_refs: the branches
    GET  /api/models/{repo}[/revision/{rev}]           model_info: sha and siblings; with ?blobs=true
                                                       (files_metadata=True) each file's size, blobId and lfs
                                                       {sha256, size, pointerSize}
    HEAD /{repo}/resolve/{rev}/{path}                  hf_hub_download's metadata: X-Repo-Commit, ETag (an LFS
                                                       file's sha256, else its git blob id), X-Linked-Etag and
                                                       X-Linked-Size of an LFS file, Content-Length
    GET  /{repo}/resolve/{rev}/{path}                  the file; `Range: bytes=N-` resumes it (206, Content-Range)
    GET  /api/agent-harnesses                          the registry huggingface_hub reads once a day: empty

Errors carry the Hub's X-Error-Code, which huggingface_hub turns into its exceptions: 404 RepoNotFound,
RevisionNotFound or EntryNotFound; 401 GatedRepo for a gated repository's files without an `Authorization: Bearer`
token (403 with a token other than the one the server was given); its model info and refs stay public, as on the Hub.
`Fault`s add a dropped connection mid-file or an error status, each for a set number of requests.
"""

import argparse
import fnmatch
import hashlib
import json
import re
import shutil
import threading
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

# The .gitattributes the Hub writes into a new model repository: what it stores with Git LFS
LFS_PATTERNS = (
    "*.7z",
    "*.arrow",
    "*.bin",
    "*.bz2",
    "*.ckpt",
    "*.ftz",
    "*.gz",
    "*.h5",
    "*.joblib",
    "*.lfs.*",
    "*.mlmodel",
    "*.model",
    "*.msgpack",
    "*.npy",
    "*.npz",
    "*.onnx",
    "*.ot",
    "*.parquet",
    "*.pb",
    "*.pickle",
    "*.pkl",
    "*.pt",
    "*.pth",
    "*.rar",
    "*.safetensors",
    "saved_model/*",
    "*.tar.*",
    "*.tar",
    "*.tflite",
    "*.tgz",
    "*.wasm",
    "*.xz",
    "*.zip",
    "*.zst",
    "*tfevents*",
)
CHUNK = 1 << 20
_RESOLVE = re.compile(r"/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<path>.+)")
_API = re.compile(r"/api/models/(?P<repo>[^/]+/[^/]+)(?:/(?P<refs>refs)|/revision/(?P<revision>[^/]+))?/?")
AGENT_HARNESSES = "/api/agent-harnesses"  # huggingface_hub reads this registry once a day: none here


@dataclass
class Fault:
    """A failure answered to the requests whose URL path matches `path` (fnmatch: "*/resolve/*/model.safetensors"),
    for the first `times` of them; later ones are answered normally. Exactly one of:

    status:      this HTTP status instead of the answer (500: a server error that a retry survives)
    drop_after:  the answer's headers and this many bytes of its body, then the connection closed (a download cut
                 short, which `Range` resumes)
    """

    path: str
    method: str = "GET"
    status: int | None = None
    drop_after: int | None = None
    times: int = 1

    def __post_init__(self):
        if (self.status is None) == (self.drop_after is None):
            raise ValueError(f"fault {self.path!r}: give exactly one of status and drop_after")


@dataclass(frozen=True)
class Entry:
    """One file of a branch as the Hub lists it."""

    path: str
    file: Path
    size: int
    sha256: str
    lfs: bool

    @property
    def blob_id(self) -> str:
        """Git's id of the blob the repository holds: the file, or for an LFS file its pointer."""
        data = self.pointer() if self.lfs else self.file.read_bytes()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def pointer(self) -> bytes:
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {self.size}\n".encode()


class HubFolder:
    """The repositories of a hub folder (module docstring), read from disk at each request: a test may add files
    between requests. Digests are cached by (file, size, mtime)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._digests: dict[tuple, str] = {}

    def repository(self, repo: str) -> Path | None:
        folder = self.root / repo / "revisions"
        return folder.parent if folder.is_dir() else None

    def gated(self, repo: str) -> bool:
        return (self.root / repo / "gated").is_file()

    def branches(self, repo: str) -> dict[str, str]:
        """{branch: commit sha}."""
        folder = self.root / repo / "revisions"
        return {branch.name: self.commit(repo, branch.name) for branch in sorted(folder.iterdir()) if branch.is_dir()}

    def entries(self, repo: str, branch: str) -> list[Entry]:
        folder = self.root / repo / "revisions" / branch
        found = []
        for file in sorted(path for path in folder.rglob("*") if path.is_file()):
            path = file.relative_to(folder).as_posix()
            found.append(
                Entry(
                    path,
                    file,
                    file.stat().st_size,
                    self._sha256(file),
                    any(fnmatch.fnmatch(path, pattern) for pattern in LFS_PATTERNS),
                )
            )
        return found

    def commit(self, repo: str, branch: str) -> str:
        listing = [[entry.path, entry.sha256] for entry in self.entries(repo, branch)]
        return hashlib.sha1(json.dumps([branch, listing]).encode()).hexdigest()

    def branch_of(self, repo: str, revision: str) -> str | None:
        """The branch a revision names: a branch name, or the commit sha of one."""
        branches = self.branches(repo)
        if revision in branches:
            return revision
        return next((branch for branch, sha in branches.items() if sha == revision), None)

    def _sha256(self, file: Path) -> str:
        stat = file.stat()
        key = (str(file), stat.st_size, stat.st_mtime_ns)
        if key not in self._digests:
            digest = hashlib.sha256()
            with open(file, "rb") as handle:
                while chunk := handle.read(CHUNK):
                    digest.update(chunk)
            self._digests[key] = digest.hexdigest()
        return self._digests[key]


class HubError(Exception):
    """An error answer: status, the Hub's X-Error-Code and message, and the commit it concerns where known."""

    def __init__(self, status: int, code: str, message: str, commit: str | None = None):
        super().__init__(message)
        self.status, self.code, self.commit = status, code, commit


@dataclass
class LocalHub:
    """The server, as a context manager: started on entering (on 127.0.0.1, `port` 0 picks a free one), stopped on
    leaving. `token` is the one token a gated repository accepts (None: any). `requests` records every request as
    (method, path, Range header or None, status)."""

    root: Path
    port: int = 0
    faults: list[Fault] = field(default_factory=list)
    token: str | None = None
    requests: list[tuple] = field(default_factory=list, init=False)

    def __post_init__(self):
        self.folder = HubFolder(self.root)
        self._lock = threading.Lock()
        self._left = [fault.times for fault in self.faults]
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "LocalHub":
        threading.Thread(target=self._server.serve_forever, name="local-hub", daemon=True).start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.shutdown()
        self._server.server_close()

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def fault(self, method: str, path: str) -> Fault | None:
        """The next fault this request meets, counted as used."""
        with self._lock:
            for index, fault in enumerate(self.faults):
                if self._left[index] > 0 and fault.method == method and fnmatch.fnmatch(path, fault.path):
                    self._left[index] -= 1
                    return fault
        return None

    def unmet(self) -> list[Fault]:
        """The faults not yet answered as many times as configured."""
        with self._lock:
            return [fault for fault, left in zip(self.faults, self._left) if left]

    def record(self, request: tuple) -> None:
        with self._lock:
            self.requests.append(request)


def _handler(hub: LocalHub) -> type:
    class Handler(_HubHandler):
        pass

    Handler.hub = hub
    return Handler


class _HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hub: every answer gives its Content-Length
    hub: LocalHub

    def do_GET(self):
        self._answer(body=True)

    def do_HEAD(self):
        self._answer(body=False)

    def log_message(self, *args):  # the record of `hub.requests` instead of stderr lines
        pass

    def _answer(self, body: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        fault = self.hub.fault(self.command, path)
        try:
            if fault and fault.status:
                raise HubError(fault.status, "", f"injected fault: {fault.status} for {path}")
            if path == AGENT_HARNESSES:
                status = self._json({"standardEnvVars": [], "harnesses": {}})
            elif match := _API.fullmatch(path):
                status = self._api(match, urlsplit(self.path).query)
            elif match := _RESOLVE.fullmatch(path):
                status = self._resolve(match, body, fault.drop_after if fault else None)
            else:
                raise HubError(404, "", f"no such endpoint: {path}")
        except HubError as error:
            status = error.status
            self._error(error)
        self.hub.record((self.command, path, self.headers.get("Range"), int(status)))

    def _api(self, match: re.Match, query: str) -> int:
        repo = match["repo"]
        folder = self.hub.folder
        if folder.repository(repo) is None:
            raise HubError(404, "RepoNotFound", f"Repository not found: {repo}")
        if match["refs"]:
            branches = [
                {"name": name, "ref": f"refs/heads/{name}", "targetCommit": sha}
                for name, sha in folder.branches(repo).items()
            ]
            return self._json({"branches": branches, "converts": [], "tags": [], "pullRequests": []})
        revision = unquote(match["revision"] or "main")
        branch = folder.branch_of(repo, revision)
        if branch is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        metadata = "blobs=true" in query.lower()
        siblings = [
            {"rfilename": entry.path} | (_file_metadata(entry) if metadata else {})
            for entry in folder.entries(repo, branch)
        ]
        return self._json(
            {
                "_id": repo,
                "id": repo,
                "modelId": repo,
                "sha": folder.commit(repo, branch),
                "private": False,
                "gated": "manual" if folder.gated(repo) else False,
                "disabled": False,
                "siblings": siblings,
                "tags": [],
                "downloads": 0,
                "likes": 0,
            }
        )

    def _resolve(self, match: re.Match, body: bool, drop_after: int | None) -> int:
        repo, revision = match["repo"], unquote(match["revision"])
        folder = self.hub.folder
        if folder.repository(repo) is None:
            raise HubError(404, "RepoNotFound", f"Repository not found: {repo}")
        branch = folder.branch_of(repo, revision)
        if branch is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        commit = folder.commit(repo, branch)
        self._check_access(repo, commit)
        entry = next((e for e in folder.entries(repo, branch) if e.path == match["path"]), None)
        if entry is None:
            raise HubError(404, "EntryNotFound", f"{match['path']} does not exist on {revision}", commit)
        start, end = _byte_range(self.headers.get("Range"), entry.size)
        status = HTTPStatus.PARTIAL_CONTENT if self.headers.get("Range") else HTTPStatus.OK
        etag = entry.sha256 if entry.lfs else entry.blob_id
        headers = {
            "X-Repo-Commit": commit,
            "ETag": f'"{etag}"',
            "Accept-Ranges": "bytes",
            "Content-Length": str(end - start),
            "Content-Type": "application/octet-stream",
        }
        if entry.lfs:
            headers |= {"X-Linked-Etag": f'"{entry.sha256}"', "X-Linked-Size": str(entry.size)}
        if status == HTTPStatus.PARTIAL_CONTENT:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{entry.size}"
        self._head(status, headers)
        if body:
            self._send_file(entry.file, start, end, drop_after)
        return status

    def _check_access(self, repo: str, commit: str) -> None:
        if not self.hub.folder.gated(repo):
            return
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        if not token:
            raise HubError(
                401,
                "GatedRepo",
                f"Access to model {repo} is restricted. You must have access to it and "
                "be authenticated to access it. Please log in.",
                commit,
            )
        if self.hub.token is not None and token != self.hub.token:
            raise HubError(
                403,
                "GatedRepo",
                f"Access to model {repo} is restricted and you are not in the authorized list.",
                commit,
            )

    def _send_file(self, file: Path, start: int, end: int, drop_after: int | None) -> None:
        stop = end if drop_after is None else min(end, start + drop_after)
        with open(file, "rb") as handle:
            handle.seek(start)
            left = stop - start
            while left > 0 and (chunk := handle.read(min(CHUNK, left))):
                self.wfile.write(chunk)
                left -= len(chunk)
        if stop < end:  # the fault: the body cut short, the connection closed
            self.wfile.flush()
            self.close_connection = True

    def _json(self, value) -> int:
        data = json.dumps(value).encode()
        self._head(HTTPStatus.OK, {"Content-Type": "application/json", "Content-Length": str(len(data))})
        if self.command != "HEAD":
            self.wfile.write(data)
        return HTTPStatus.OK

    def _error(self, error: HubError) -> None:
        data = json.dumps({"error": str(error)}).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(data)), "X-Error-Message": str(error)}
        headers |= {"X-Error-Code": error.code} if error.code else {}
        headers |= {"X-Repo-Commit": error.commit} if error.commit else {}
        self._head(error.status, headers)
        if self.command != "HEAD":
            self.wfile.write(data)

    def _head(self, status: int, headers: dict) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()


def _file_metadata(entry: Entry) -> dict:
    """A sibling's metadata as model_info(files_metadata=True) reads it."""
    found = {"size": entry.size, "blobId": entry.blob_id}
    if entry.lfs:
        found["lfs"] = {"sha256": entry.sha256, "size": entry.size, "pointerSize": len(entry.pointer())}
    return found


def _byte_range(header: str | None, size: int) -> tuple[int, int]:
    """[start, end) of `Range: bytes=N-` or `bytes=N-M`; the whole file without one."""
    if not header:
        return 0, size
    match = re.fullmatch(r"bytes=(\d+)-(\d*)", header.strip())
    if match is None or int(match[1]) >= max(size, 1):
        raise HubError(416, "", f"unsatisfiable range {header!r} of {size} bytes")
    return int(match[1]), min(int(match[2]) + 1, size) if match[2] else size


def read_faults(path: Path) -> list[Fault]:
    """Faults from a JSON file: a list of objects with Fault's fields, e.g.
    [{"path": "*/resolve/*/model.safetensors", "drop_after": 1000}, {"path": "*/refs", "status": 500}]."""
    return [Fault(**item) for item in json.loads(Path(path).read_text())]


def add_branch(root: Path, repo: str, branch: str, files: dict[str, bytes | Path]) -> Path:
    """Write one branch of a repository into the hub folder `root` (its files' bytes, or files to copy); returns the
    branch's folder."""
    folder = Path(root) / repo / "revisions" / branch
    for name, content in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        else:
            target.write_bytes(content)
    return folder


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shape_of_learning.rehearsal.local_hub", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("root", type=Path, help="the hub folder: <owner>/<name>/revisions/<branch>/<files>")
    parser.add_argument("--port", type=int, default=8088, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--faults", type=Path, help="a JSON list of faults to inject (see Fault)")
    parser.add_argument("--token", help="the one token gated repositories accept (default: any)")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"{args.root} is not a folder")
    hub = LocalHub(args.root, args.port, read_faults(args.faults) if args.faults else [], args.token)
    print(
        f"serving {args.root} at {hub.endpoint}: export HF_ENDPOINT={hub.endpoint}"
        + (f" ({len(hub.faults)} faults: {[asdict(f) for f in hub.faults]})" if hub.faults else ""),
        flush=True,
    )
    try:
        hub.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
