"""Source code, recognised by extension: chunked on top-level definitions and blank lines;
each chunk's heading is the first definition it holds."""

from __future__ import annotations

from nixx.ingest.document import Document, Section, decode_text, require_text
from nixx.ingest.readers import Reader

LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".cs": "csharp",
    ".fs": "fsharp",
    ".swift": "swift",
    ".m": "objective-c",
    ".rb": "ruby",
    ".php": "php",
    ".pl": "perl",
    ".pm": "perl",
    ".lua": "lua",
    ".r": "r",
    ".jl": "julia",
    ".hs": "haskell",
    ".ml": "ocaml",
    ".ex": "elixir",
    ".exs": "elixir",
    ".erl": "erlang",
    ".clj": "clojure",
    ".dart": "dart",
    ".zig": "zig",
    ".nim": "nim",
    ".sh": "shell",
    ".bash": "shell",
    ".zsh": "shell",
    ".fish": "shell",
    ".ps1": "powershell",
    ".sql": "sql",
    ".vue": "vue",
    ".svelte": "svelte",
    ".css": "css",
    ".scss": "scss",
    ".less": "less",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".ini": "ini",
    ".cfg": "ini",
    ".xml": "xml",
    ".proto": "protobuf",
    ".graphql": "graphql",
    ".tf": "terraform",
    ".nix": "nix",
    ".cmake": "cmake",
    ".gradle": "gradle",
}
FILENAMES: dict[str, str] = {
    "Makefile": "make",
    "makefile": "make",
    "GNUmakefile": "make",
    "Dockerfile": "docker",
    "Containerfile": "docker",
    "Justfile": "just",
    "Rakefile": "ruby",
    "Gemfile": "ruby",
    "CMakeLists.txt": "cmake",
    "Vagrantfile": "ruby",
    "Jenkinsfile": "groovy",
}


def read(data: bytes, name: str) -> Document:
    text = decode_text(data, name)
    base = name.rsplit("/", 1)[-1]
    suffix = "." + base.rsplit(".", 1)[-1].lower() if "." in base else ""
    language = FILENAMES.get(base) or LANGUAGES.get(suffix, "text")
    document = Document("code", (Section(text, "code"),), meta={"language": language})
    return require_text(document, name)


READER = Reader(
    name="code",
    read=read,
    extensions=tuple(LANGUAGES),
    filenames=tuple(FILENAMES),
)
