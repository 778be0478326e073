"""The shape of the code, computed from the source (docs/architecture.md says why).

- **No import cycle** between the modules of `src/nixx`. The graph is read with `ast`
  from every ``import`` and ``from ... import`` statement, at module level and inside
  functions alike (a lazy import is still a dependency: it only moves the cycle to run
  time); statements inside an ``if TYPE_CHECKING:`` block are left out (annotations only,
  never run). Relative imports are resolved; ``from pkg import name`` is an edge to
  ``pkg.name`` when that is a module, else to ``pkg``. An edge goes to the module named,
  not to the packages above it. `importlib.import_module` with a computed name (the route
  and reader registries, the sync transports) is not read: those load plugins downward.
- **No HTTP call to an LLM outside `nixx.llm`** (chat) **and `nixx.embed.openai`**
  (embeddings). The rule, precisely: a string literal in code (docstrings and the route
  decorators a server uses to *serve* a path are not code that calls) whose text holds
  the OpenAI path ``/chat/completions`` or ends in ``/embeddings`` — plain, or a constant
  part of an f-string — appears only in those two places. Exempt: `nixx.testing` (the
  fake LLM server serves those paths), and `nixx.tui.client`, which calls `nixx serve`'s
  own ``/v1/chat/completions`` (the memory server, never the LLM behind it).
- **The service is the one door, kept by the language.** What `NixxService.__init__`
  assigns on ``self`` — its collaborators (the store, the embedder, the LLM client, the
  jobs, recall, ...) and its state — is private (``self._store``), except `PUBLIC_STATE`
  (``settings``: configuration, read by the routes). A shell, or any other module, that
  reads ``service._store`` is then caught by the private-name rule below, whatever it
  calls the service; it calls a method named for its use case instead.
- **No module over 800 lines, no function over 80** in `src/nixx`. A function's length
  is the lines of its own code: its docstring, the functions and classes defined inside
  it (each measured on its own) and the continuation lines of a multi-line string
  (SQL, a prompt: data, such as the migrations' DDL) are not counted. Exempt by name
  only, until their owners finish: `BIG_MODULES` and `LONG_FUNCTIONS` (issue 29).
- **Shapes are annotations only.** The modules of named shapes that nxc's start-up must
  not pay for (`nixx.nxc.shapes`, `nixx.nxc.delivery.shapes`, `nixx.log.shapes`: ``typing``) are imported
  only under ``if TYPE_CHECKING:``.
- **No module reads another module's private names.** A name that starts with one
  underscore belongs to the module that defines it; another module asks for a public
  name instead. The rule, precisely: in a module M of `src/nixx`, an attribute ``X._name``
  (read or written; ``getattr(X, "_name")`` too) or an import ``from nixx... import
  _name``, where `_name` is defined in another module of `src/nixx` and not in M (defined
  = a ``def``/``class`` name, an assignment target — ``_name = ...``, ``X._name = ...`` —
  or a parameter). Own attributes are M's business: ``self._name``, ``cls._name`` and
  ``super()._name`` (a subclass uses its base's) are not counted; nor are names nixx does
  not define (``os._exit``, a namedtuple's ``_replace``). Read by name, not by type: a
  private name M defines itself hides a read of another module's namesake.
- **A name means one thing.** A type's name — a CamelCase name a module defines at its
  top level (``class X``, or an alias ``X = ...``), in its body or under an ``if`` — is
  defined by one module of `src/nixx` only: two `Engine`s, or three `Progress`es, make a
  reader ask which one a line means. Importing a name is not defining it.
- **A turn is answered in one place.** Only `nixx.server.dialects.adapter` runs a turn
  for a wire dialect (calls ``.turn(...)``), walks its events (``__anext__()``,
  ``aclose()``: `Adapter.wire` is the one streaming path) and streams it
  (``StreamingResponse(...)``); the routes build a dialect's adapter and call
  `answer_turn`. And every dialect adapter — a class of `nixx.server.dialects` whose
  ``__init__`` sets ``self.given`` — defines the same parts itself
  (`nixx.server.dialects.adapter.PARTS`: ``given``, ``streams``, ``opening``, ``delta``,
  ``finished``, ``failed``, ``answer``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from textwrap import dedent

import nixx

SRC = Path(nixx.__file__).parent

LLM_PATH = re.compile(r"/chat/completions|/embeddings/?(?:$|\?)")
LLM_CALLERS = ("nixx.llm", "nixx.embed.openai")
SHELLS = ("nixx.server", "nixx.cli", "nixx.mcp", "nixx.web", "nixx.tui")
PUBLIC_STATE = {"settings"}  # what NixxService may hold in public
LLM_EXEMPT = {
    "nixx.testing": "the fake LLM server serves these paths",
    "nixx.tui.client": "calls nixx serve's own /v1/chat/completions, not an LLM",
}

MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80
# exemptions (an exemption no longer needed fails the test): none since issue 29's store
BIG_MODULES: dict[str, str] = {}
LONG_FUNCTIONS: dict[tuple[str, str], str] = {}
ANNOTATION_ONLY = ("nixx.nxc.shapes", "nixx.nxc.delivery.shapes", "nixx.log.shapes")


# -- reading the source ----------------------------------------------------------------


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name → (file, is a package) for every module under the package `root`."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts.pop()
        out[".".join(parts)] = (path, package)
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: anywhere but the body of `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for stmt in child.orelse:
                    walk_one(stmt)
            else:
                walk_one(child)

    def walk_one(node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        else:
            walk(node)

    walk(tree)
    return found


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """module → {module it imports: line of the first such import}."""
    known = modules(root)

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, (path, package) in known.items():
        here = name if package else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for stmt in _run_imports(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str | None] = []
            if isinstance(stmt, ast.Import):
                targets = [owner(alias.name) for alias in stmt.names]
            else:
                if stmt.level:
                    base_parts = here.split(".")[: len(here.split(".")) - (stmt.level - 1)]
                    base = ".".join(base_parts + ([stmt.module] if stmt.module else []))
                else:
                    base = stmt.module or ""
                for alias in stmt.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in known else owner(base))
            for target in targets:
                if target is not None and target != name:
                    edges.setdefault(target, stmt.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _describe(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    inside = set(component)
    arrows = [
        f"    {a} -> {b} (line {line})"
        for a in component
        for b, line in sorted(graph[a].items())
        if b in inside
    ]
    return f"  cycle of {len(component)}: {', '.join(component)}\n" + "\n".join(arrows)


def llm_paths(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each string literal in code that names an LLM endpoint path."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skipped.add(id(body[0].value))  # a docstring
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:  # a route the server serves
                for inner in ast.walk(decorator):
                    skipped.add(id(inner))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skipped
            and LLM_PATH.search(node.value)
        ):
            found.append((node.lineno, node.value))
    return sorted(found)


def held_by_service(path: Path, cls: str = "NixxService") -> set[str]:
    """The attributes `cls.__init__` assigns on ``self`` (its collaborators and state)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    return {
                        target.attr
                        for stmt in ast.walk(item)
                        if isinstance(stmt, (ast.Assign, ast.AnnAssign))
                        for target in (
                            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                        )
                        if isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    }
    raise AssertionError(f"no {cls}.__init__ in {path}")


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def own_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines of a function's own code (the rule in the module's docstring)."""
    lines = set(range(fn.lineno, (fn.end_lineno or fn.lineno) + 1))
    body = fn.body
    if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        lines -= set(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    for node in ast.walk(fn):
        if node is fn:
            continue
        end = getattr(node, "end_lineno", None) or getattr(node, "lineno", 0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines -= set(range(node.lineno, end + 1))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and end > node.lineno:
            lines -= set(range(node.lineno + 1, end + 1))
    return len(lines)


def sizes(root: Path) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """(module → its lines, (module, function) → its own lines) under `root`."""
    module_lines: dict[str, int] = {}
    function_lines: dict[tuple[str, str], int] = {}
    for name, (path, _package) in modules(root).items():
        text = path.read_text(encoding="utf-8")
        module_lines[name] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = (name, node.name)
                function_lines[key] = max(function_lines.get(key, 0), own_lines(node))
    return module_lines, function_lines


# -- the rules -------------------------------------------------------------------------


def test_no_import_cycle_between_modules():
    graph = import_graph(SRC)
    assert len(graph) > 100  # the whole package was read
    found = cycles(graph)
    assert not found, "import cycles in src/nixx (docs/architecture.md: which way arrows go):\n" + (
        "\n".join(_describe(graph, c) for c in found)
    )


def test_no_llm_http_call_outside_the_llm_clients():
    offenders = []
    for name, (path, _) in modules(SRC).items():
        if _within(name, LLM_CALLERS) or _within(name, LLM_EXEMPT):
            continue
        offenders += [f"  {name}:{line}: {text!r}" for line, text in llm_paths(path)]
    assert not offenders, (
        "LLM endpoints named outside nixx.llm / nixx.embed.openai (call the client there):\n"
        + "\n".join(offenders)
    )


def test_the_llm_clients_are_where_the_rule_says():
    # The rule would pass vacuously if the clients moved: they name their paths.
    known = modules(SRC)
    assert llm_paths(known["nixx.llm.client"][0])
    assert llm_paths(known["nixx.embed.openai"][0])
    for prefix in LLM_EXEMPT:
        assert any(_within(name, [prefix]) for name in known), prefix


def test_the_services_collaborators_are_private():
    held = held_by_service(SRC / "memory" / "service.py")
    assert {"_store", "_episodic", "_embedder", "_llm", "_jobs"} <= held  # the rule reads them
    public = sorted(held - PUBLIC_STATE - {a for a in held if a.startswith("_")})
    assert not public, (
        "NixxService holds these in public (make them private and add a method named for "
        f"the use case): {public}"
    )


# -- the checks themselves, on a package made for them ---------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text), encoding="utf-8")
    return root


def test_the_cycle_finder_reads_lazy_relative_and_from_imports(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "def f():\n    from pkg.sub import b\n",  # lazy: still an edge
        "sub/__init__.py": "",
        "sub/b.py": "from .. import c\n",  # relative, `from pkg import module`
        "c.py": "import pkg.a.thing\n",  # the longest module prefix
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\n",
        "e.py": "from pkg.d import x\n",  # d -> e only for the type checker: no cycle
        "f.py": "from pkg.sub import name\n",  # a name in the package's __init__
    })
    graph = import_graph(root)
    assert graph["pkg.a"] == {"pkg.sub.b": 2}
    assert graph["pkg.sub.b"] == {"pkg.c": 1}
    assert graph["pkg.c"] == {"pkg.a": 1}
    assert graph["pkg.d"] == {}
    assert graph["pkg.f"] == {"pkg.sub": 1}
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    assert "pkg.a -> pkg.sub.b (line 2)" in _describe(graph, cycles(graph)[0])


def test_the_llm_rule_sees_calls_not_docs_or_served_routes(tmp_path):
    root = _package(tmp_path, {
        "caller.py": '''
            """Talks to /v1/chat/completions."""
            def post(base):
                """POST {base}/embeddings."""
                return base + "/chat/completions", f"{base}/embeddings"
        ''',
        "route.py": '''
            @router.post("/v1/chat/completions")
            def chat():
                return "bert embeddings.word"
        ''',
    })
    assert [line for line, _ in llm_paths(root / "caller.py")] == [5, 5]
    assert llm_paths(root / "route.py") == []


def test_the_door_rule_reads_what_init_assigns_on_self(tmp_path):
    root = _package(tmp_path, {
        "service.py": """
            class NixxService:
                def __init__(self, store):
                    self._store = store
                    self.episodic: object = None
                    self.settings = 1
                    local = 1

                @property
                def threshold(self):
                    return 0.3
        """,
    })
    held = held_by_service(root / "service.py")
    assert held == {"_store", "episodic", "settings"}
    assert sorted(held - PUBLIC_STATE - {a for a in held if a.startswith("_")}) == ["episodic"]


def test_no_module_over_800_lines_and_no_function_over_80():
    module_lines, function_lines = sizes(SRC)
    big = {m: n for m, n in module_lines.items() if n > MAX_MODULE_LINES and m not in BIG_MODULES}
    long = {f"{m}.{f}": n for (m, f), n in function_lines.items()
            if n > MAX_FUNCTION_LINES and (m, f) not in LONG_FUNCTIONS}
    assert big == {}, f"modules over {MAX_MODULE_LINES} lines: {big}"
    assert long == {}, f"functions over {MAX_FUNCTION_LINES} lines of their own: {long}"
    # an exemption that is no longer needed goes from the list
    stale = [m for m in BIG_MODULES if module_lines.get(m, 0) <= MAX_MODULE_LINES]
    stale += [f"{m}.{f}" for (m, f) in LONG_FUNCTIONS
              if function_lines.get((m, f), 0) <= MAX_FUNCTION_LINES]
    assert stale == [], f"exempt but within the limits now (remove them): {stale}"


def test_the_size_rule_counts_own_code_not_docs_nested_defs_or_sql(tmp_path):
    source = dedent('''
        def f():
            """A docstring
            of three lines
            """
            sql = """
            SELECT 1
            """
            def inner():
                return 1
            return inner
        ''')
    fn = ast.parse(source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    # def f, sql = """ (its first line), return inner
    assert own_lines(fn) == 3


def test_shape_modules_are_imported_for_annotations_only():
    graph = import_graph(SRC)
    found = sorted(f"{importer} (line {line}) -> {target}"
                   for importer, edges in graph.items()
                   for target, line in edges.items() if target in ANNOTATION_ONLY)
    assert found == [], "imported at run time: " + "; ".join(found)


# -- private names stay in their module -------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def defined_private(tree: ast.AST) -> set[str]:
    """The private names a module defines (see the module's docstring)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = node.name
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            name = node.id
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            name = node.attr
        elif isinstance(node, ast.arg):
            name = node.arg
        else:
            continue
        if _private(name):
            out.add(name)
    return out


def _own(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object's own attributes."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "super")


def _private_uses(tree: ast.AST, package: str) -> list[tuple[int, str, str]]:
    """(line, private name, how it is spelled) for every use of a private name off
    something that is not the object's own, and every private name imported from
    `package`."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and not _own(node.value):
            out.append((node.lineno, node.attr, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "getattr" and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value) and not _own(node.args[0])):
            out.append((node.lineno, node.args[1].value, ast.unparse(node)))
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and node.module.split(".")[0] == package):
            out += [(node.lineno, alias.name, f"from {node.module} import {alias.name}")
                    for alias in node.names if _private(alias.name)]
    return out


def private_reads(root: Path) -> list[str]:
    """Every use, in a module under `root`, of a private name another module defines."""
    trees = {name: ast.parse(path.read_text(encoding="utf-8"))
             for name, (path, _) in modules(root).items()}
    defined = {name: defined_private(tree) for name, tree in trees.items()}
    owners: dict[str, set[str]] = {}
    for name, names in defined.items():
        for private in names:
            owners.setdefault(private, set()).add(name)
    found = []
    for name, tree in trees.items():
        for line, private, spelled in _private_uses(tree, root.name):
            if private in defined[name] or private not in owners:
                continue
            found.append(f"{name}:{line}: {spelled} (defined in "
                         f"{', '.join(sorted(owners[private]))})")
    return sorted(found)


def test_no_module_reads_another_modules_private_names():
    found = private_reads(SRC)
    assert found == [], ("private names read outside their module (give them a public "
                         "name, or move the code that needs them):\n" + "\n".join(found))


def test_the_private_rule_sees_attributes_imports_and_getattr_not_own_names(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "owner.py": """
            import os
            _COLUMNS = "a, b"
            def _helper():
                return 1
            class Deliverer:
                def __init__(self, local=None):
                    self._local = local
                def _run_spec(self):
                    return self._local
            class Base:
                def _hook(self):
                    return 0
        """,
        "reader.py": """
            import os
            from pkg.owner import _COLUMNS, Base, _helper  # 3, 3
            from pkg import owner
            def f(d):
                if d._local is None:  # 6
                    return d._run_spec(), getattr(d, "_local")  # 7, 7
                return owner._helper(), os._exit, d._unknown  # 8 (nixx's own only)
            class Child(Base):
                def _hook(self):
                    return super()._hook() + self._hook_more()
                def _hook_more(self):
                    return 1
        """,
        "same.py": """
            class Holder:
                def __init__(self):
                    self._local = None
            def peek(h):
                return h._local  # defined here too: the module's own
        """,
    })
    found = private_reads(root)
    assert [f.split(" (")[0] for f in found] == [
        "pkg.reader:3: from pkg.owner import _COLUMNS",
        "pkg.reader:3: from pkg.owner import _helper",
        "pkg.reader:6: d._local",
        "pkg.reader:7: d._run_spec",
        'pkg.reader:7: getattr(d, \'_local\')',
        "pkg.reader:8: owner._helper",
    ]
    assert found[2].endswith("(defined in pkg.owner, pkg.same)")


# -- a turn is answered in one place ------------------------------------------------------
TURN_HOME = "nixx.server.dialects.adapter"
ADAPTER_PARTS = {"given", "streams", "opening", "delta", "finished", "failed", "answer"}
# what walks a turn's events, or answers them: only the turn's home may
TURN_CALLS = ("turn", "__anext__", "aclose", "StreamingResponse")


def turns_answered_outside(path: Path) -> list[str]:
    """Where a module runs a turn (``X.turn(...)``), walks events (``__anext__``,
    ``aclose``) or streams (``StreamingResponse(...)``), by line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in TURN_CALLS:
                found.append((node.lineno, f"{node.lineno}: {name}(...)"))
    return [where for _, where in sorted(found)]


def adapters_missing_parts(path: Path) -> list[str]:
    """Each class whose ``__init__`` sets ``self.given`` and lacks one of the parts."""
    out = []
    for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(cls, ast.ClassDef):
            continue
        has: set[str] = set()
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                has.add(item.name)
                for sub in ast.walk(item):
                    if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                            and isinstance(sub.value, ast.Name) and sub.value.id == "self"):
                        has.add(sub.attr)
        if "given" in has and not has >= ADAPTER_PARTS:
            out.append(f"{cls.name}: no {', '.join(sorted(ADAPTER_PARTS - has))}")
    return out


def test_a_turn_is_answered_in_one_place():
    known = modules(SRC)
    outside = [
        f"  {name}:{where}"
        for name, (path, _) in known.items()
        if _within(name, ("nixx.server", "nixx.web")) and name != TURN_HOME
        for where in turns_answered_outside(path)
    ]
    assert not outside, ("a turn run, walked or streamed outside nixx.server.dialects.adapter "
                         "(build the dialect's adapter, call answer_turn):\n"
                         + "\n".join(outside))
    adapters = {name: adapters_missing_parts(path) for name, (path, _) in known.items()
                if _within(name, ("nixx.server.dialects",))}
    assert not any(adapters.values()), adapters
    named = {cls for name, (path, _) in known.items() if _within(name, ("nixx.server.dialects",))
             for cls in _classes_setting_given(path)}
    assert {"ChatCompletions", "Responses", "Messages"} <= named
    from nixx.server.dialects.adapter import PARTS

    assert set(PARTS) == ADAPTER_PARTS


def _classes_setting_given(path: Path) -> set[str]:
    return {c.name for c in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(c, ast.ClassDef) and "given" in ast.dump(c)}


def test_the_turn_rule_sees_runs_streams_and_missing_parts(tmp_path):
    root = _package(tmp_path, {
        "route.py": """
            async def r(service, body):
                events = service.turn(body)  # 3 (dedent keeps the first blank line)
                first = await events.__anext__()  # 4: its own stream loop
                await events.aclose()  # 5
                return StreamingResponse(events)  # 6
            def fine(x):
                return x.turns(), returning(1)
        """,
        "dialect.py": """
            class Whole:
                def __init__(self, body):
                    self.given, self.streams = body, True
                def opening(self, info): ...
                def delta(self, event): ...
                async def finished(self, done): ...
                def failed(self, exc): ...
                async def answer(self, done): ...
            class Half:
                def __init__(self, body):
                    self.given = body
                def stream(self, events, first, info): ...
                def delta(self, event): ...
            class NotOne:
                def answer(self): ...
        """,
    })
    assert turns_answered_outside(root / "route.py") == [
        "3: turn(...)", "4: __anext__(...)", "5: aclose(...)", "6: StreamingResponse(...)"]
    assert adapters_missing_parts(root / "dialect.py") == [
        "Half: no answer, failed, finished, opening, streams"]


# -- a name means one thing ---------------------------------------------------------------
TYPE_NAME = re.compile(r"^[A-Z][a-z0-9]")  # CamelCase; CONSTANTS are values, not types


def type_names(path: Path) -> set[str]:
    """The CamelCase names `path` defines at its top level (in its body, or in the body
    of a top-level ``if``): classes and aliases."""
    out: set[str] = set()
    body = list(ast.parse(path.read_text(encoding="utf-8")).body)
    for node in list(body):
        if isinstance(node, ast.If):
            body += node.body + node.orelse
    for node in body:
        if isinstance(node, ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return {n for n in out if TYPE_NAME.match(n)}


def names_defined_twice(root: Path) -> dict[str, list[str]]:
    """Each type name defined by more than one module under `root` → those modules."""
    where: dict[str, list[str]] = {}
    for name, (path, _) in modules(root).items():
        for defined in type_names(path):
            where.setdefault(defined, []).append(name)
    return {n: sorted(m) for n, m in sorted(where.items()) if len(m) > 1}


def test_a_type_name_is_defined_in_one_module():
    twice = names_defined_twice(SRC)
    assert twice == {}, ("type names defined in more than one module (name each for what it "
                         "means, or import the one):\n"
                         + "\n".join(f"  {n}: {', '.join(m)}" for n, m in twice.items()))


def test_the_name_rule_sees_classes_and_aliases_not_imports_or_constants(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "store.py": """
            from typing import Literal
            class Engine: ...
            Section = Literal["a", "b"]
            LIMIT = 3
        """,
        "chat.py": """
            TYPE_CHECKING = False
            if TYPE_CHECKING:
                from pkg.store import Section
            class Engine: ...
            LIMIT = 4
            def f():
                class Section: ...  # local: not the module's name
        """,
        "widgets.py": """
            import typing
            if typing.TYPE_CHECKING:
                Section = str
        """,
    })
    assert type_names(root / "store.py") == {"Engine", "Section"}
    assert type_names(root / "chat.py") == {"Engine"}
    assert names_defined_twice(root) == {"Engine": ["pkg.chat", "pkg.store"],
                                         "Section": ["pkg.store", "pkg.widgets"]}
