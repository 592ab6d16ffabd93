"""Environment strings, answer scopes and version-range overlap.

An agent describes its machine as a comma-separated env string such as
``macos-15,python-3.12,pip,arm64`` (or as the feedback object
``{"os": "macos-15", "runtime": "python-3.12", "pkg_manager": "pip"}``). Tokens are
recognised by kind, not by position: an OS folded to its family, runtimes, one package
manager, and labels for everything else. Parsing never raises: whatever is not understood
becomes a label.

A solution's answer *scope* is the set of machines it is written for: its OS families and
its runtime version constraints. Only those two partition environments; package managers
and labels (``uv``, ``venv``, ``gnu-sed``) describe a machine without creating a separate
scope, so two answers that differ only by them overlap. Overlap uses interval arithmetic on
PEP 440 versions rather than `SpecifierSet` probing, so ``python>=3.8,<3.12`` and
``python>=3.11`` are known to overlap without guessing sample versions.

Version ranges are `versions.Constraint`; this module depends on nothing else in the package.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, NamedTuple

from knowmesh_mcp.core.versions import Constraint

MAX_INPUT_LENGTH = 4096
MAX_TOKENS = 32
MAX_TOKEN_LENGTH = 64

# --- vocabulary -------------------------------------------------------------------------

# name -> (family, distro label). The distro is kept as a label because the family alone
# partitions scopes, while "ubuntu" is still useful for label matching.
_OS_NAMES: dict[str, tuple[str, str | None]] = {
    **{name: ("macos", None) for name in ("macos", "macosx", "mac", "osx", "darwin")},
    **{name: ("windows", None) for name in ("windows", "win", "win32", "win64")},
    **{name: ("windows", name) for name in ("cygwin", "msys", "msys2", "mingw", "mingw64")},
    **{name: (name, None) for name in ("freebsd", "openbsd", "netbsd")},
    "linux": ("linux", None),
    **{
        name: ("linux", distro)
        for distro, names in {
            "ubuntu": ("ubuntu",),
            "debian": ("debian",),
            "fedora": ("fedora",),
            "alpine": ("alpine",),
            "arch": ("arch", "archlinux"),
            "centos": ("centos",),
            "rhel": ("rhel", "redhat"),
            "amazonlinux": ("amazonlinux", "amzn", "al2", "al2023"),
            "wsl": ("wsl",),
            "opensuse": ("opensuse", "suse", "sles"),
            "rocky": ("rocky", "rockylinux"),
            "alma": ("alma", "almalinux"),
            "mint": ("mint", "linuxmint"),
            "manjaro": ("manjaro",),
            "gentoo": ("gentoo",),
            "nixos": ("nixos",),
            "raspbian": ("raspbian",),
        }.items()
        for name in names
    },
}

RUNTIME_ALIASES: dict[str, str] = {
    "py": "python",
    "cpython": "python",
    "nodejs": "node",
    "node.js": "node",
    "js": "node",
    "javascript": "node",
    "golang": "go",
    "rustc": "rust",
    "jdk": "java",
    "openjdk": "java",
    "jre": "java",
    "pg": "postgres",
    "postgresql": "postgres",
    ".net": "dotnet",
    "ts": "typescript",
}

RUNTIMES = frozenset(
    {
        "python",
        "pypy",
        "node",
        "deno",
        "bun",
        "typescript",
        "go",
        "rust",
        "java",
        "kotlin",
        "scala",
        "ruby",
        "php",
        "perl",
        "lua",
        "dotnet",
        "swift",
        "dart",
        "elixir",
        "erlang",
        "ghc",
        "julia",
        "gcc",
        "clang",
        "bash",
        "zsh",
        "postgres",
        "mysql",
    }
)

PKG_MANAGER_ALIASES: dict[str, str] = {
    "pip3": "pip",
    "homebrew": "brew",
    "apt-get": "apt",
    "mvn": "maven",
    "bundle": "bundler",
    "gomod": "go-modules",
    "go-mod": "go-modules",
    "chocolatey": "choco",
}

PKG_MANAGERS = frozenset(
    {
        "pip",
        "uv",
        "poetry",
        "pipenv",
        "pdm",
        "conda",
        "mamba",
        "micromamba",
        "npm",
        "yarn",
        "pnpm",
        "bun",
        "cargo",
        "apt",
        "brew",
        "apk",
        "dnf",
        "yum",
        "pacman",
        "zypper",
        "nix",
        "choco",
        "winget",
        "scoop",
        "nuget",
        "maven",
        "gradle",
        "sbt",
        "composer",
        "gem",
        "bundler",
        "go-modules",
        "cabal",
        "mix",
        "cpan",
        "luarocks",
    }
)

LABEL_ALIASES: dict[str, str] = {
    "aarch64": "arm64",
    "amd64": "x86_64",
    "x64": "x86_64",
    "x86-64": "x86_64",
}

# --- tokens -----------------------------------------------------------------------------

# "python-3.12", "python3.12", "py 3.11", "node-v20", "ubuntu-24.04". Names hold no digits,
# so "arm64" splits into an unknown name and stays a label.
_NAME_VERSION = re.compile(r"^(?P<name>[a-z.][a-z.+#_-]*?)[-_@ ]?v?(?P<version>\d[0-9a-z.+-]*)$")
_WHITESPACE = re.compile(r"\s+")

Kind = Literal["os", "runtime", "pkg_manager", "label"]


@dataclass(frozen=True)
class _Token:
    kind: Kind
    name: str
    version: str | None = None
    distro: str | None = None


@lru_cache(maxsize=4096)  # tags repeat across every document of a corpus
def _clean(text: str) -> str:
    """Fold one token: NFKC, drop control characters, collapse whitespace, lowercase, cap."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return _WHITESPACE.sub(" ", text).strip().lower()[:MAX_TOKEN_LENGTH].strip()


def _macos_version(name: str, version: str | None) -> str | None:
    """Darwin kernel majors map to macOS releases (darwin-23 is macOS 14, darwin-19 is 10.15)."""
    if name != "darwin" or version is None:
        return version
    major = re.match(r"\d+", version)
    if not major:
        return None
    number = int(major.group())
    if number >= 20:
        return str(number - 9)
    return f"10.{number - 4}" if number >= 5 else None


def _classify(token: str) -> _Token:
    """Recognise a cleaned token by kind. Bare names are tried before the name-version split."""
    if token in _OS_NAMES:
        family, distro = _OS_NAMES[token]
        return _Token("os", family, None, distro)
    bare_pkg = PKG_MANAGER_ALIASES.get(token, token)
    if bare_pkg in PKG_MANAGERS:
        return _Token("pkg_manager", bare_pkg)
    bare_runtime = RUNTIME_ALIASES.get(token, token)
    if bare_runtime in RUNTIMES:
        return _Token("runtime", bare_runtime)
    match = _NAME_VERSION.match(token)
    if match:
        name, version = match.group("name"), match.group("version")
        if name in _OS_NAMES:
            family, distro = _OS_NAMES[name]
            return _Token("os", family, _macos_version(name, version), distro)
        runtime = RUNTIME_ALIASES.get(name, name)
        if runtime in RUNTIMES:
            return _Token("runtime", runtime, version)
        pkg = PKG_MANAGER_ALIASES.get(name, name)
        if pkg in PKG_MANAGERS:
            return _Token("pkg_manager", pkg, version)
    return _Token("label", LABEL_ALIASES.get(token, token))


def _split(texts: Iterable[str]) -> list[str]:
    """Cleaned, non-empty tokens from comma-separated texts, capped in size and number."""
    tokens: list[str] = []
    for text in texts:
        for part in text[:MAX_INPUT_LENGTH].split(","):
            cleaned = _clean(part)
            if cleaned:
                tokens.append(cleaned)
            if len(tokens) >= MAX_TOKENS:
                return tokens
    return tokens


# --- environment ------------------------------------------------------------------------


@dataclass(frozen=True)
class Environment:
    """One agent's machine as parsed from an env string or feedback object."""

    os: str | None = None
    os_version: str | None = None
    runtimes: dict[str, str | None] = field(default_factory=dict)
    pkg_manager: str | None = None
    labels: tuple[str, ...] = ()

    def __hash__(self) -> int:
        return hash((self.os, self.os_version, tuple(self.runtimes.items()), self.pkg_manager, self.labels))

    def to_dict(self) -> dict[str, Any]:
        return {
            "os": self.os,
            "os_version": self.os_version,
            "runtimes": dict(self.runtimes),
            "pkg_manager": self.pkg_manager,
            "labels": list(self.labels),
        }

    def runtime_major(self) -> str:
        """``python-3`` for the first runtime; the bare name when its version is unknown."""
        if not self.runtimes:
            return ""
        name, version = next(iter(self.runtimes.items()))
        major = re.match(r"\d+", version or "")
        return f"{name}-{major.group()}" if major else name

    def cluster(self) -> str:
        """The feedback cluster key ``os|runtime_major|pkg_manager`` (missing parts empty)."""
        return f"{self.os or ''}|{self.runtime_major()}|{self.pkg_manager or ''}"


def _build(tokens: list[str]) -> Environment:
    """Assemble an Environment; the first OS family and package manager win, extras are labels."""
    os_family: str | None = None
    os_version: str | None = None
    runtimes: dict[str, str | None] = {}
    pkg_manager: str | None = None
    labels: list[str] = []
    for raw in tokens:
        token = _classify(raw)
        if token.kind == "os":
            if os_family is None:
                os_family, os_version = token.name, token.version
            elif token.name != os_family or (os_version and token.version and os_version != token.version):
                labels.append(raw)
                continue
            else:  # same family again, e.g. "linux,ubuntu-24.04": fill in what is missing
                os_version = os_version or token.version
            if token.distro:
                labels.append(token.distro)
        elif token.kind == "runtime":
            known = runtimes.get(token.name)
            if token.name not in runtimes or known is None:
                runtimes[token.name] = token.version or known
            elif token.version and token.version != known:
                labels.append(raw)
        elif token.kind == "pkg_manager":
            if pkg_manager is None:
                pkg_manager = token.name
            elif pkg_manager != token.name:
                labels.append(raw)
            if token.version:  # "yarn-4": cluster by name, keep the version matchable
                labels.append(raw)
        else:
            labels.append(token.name)
    return Environment(os_family, os_version, runtimes, pkg_manager, tuple(dict.fromkeys(labels)))


@lru_cache(maxsize=4096)  # Environment is immutable; the same tags are parsed for every read
def parse_env(text: str | None) -> Environment:
    """Parse a comma-separated env string such as ``macos-15,python-3.12,pip,arm64``."""
    if not isinstance(text, str):
        return Environment()
    return _build(_split([text]))


MAPPING_KEYS = ("os", "runtime", "pkg_manager", "arch", "labels")


def env_from_mapping(mapping: Mapping[str, Any] | None) -> Environment:
    """Parse the feedback form ``{"os": ..., "runtime": ..., "pkg_manager": ...}``.

    Each value goes through the same token parser as an env string, so values are still
    recognised by kind. Keys outside MAPPING_KEYS and non-string values are ignored.
    """
    if not isinstance(mapping, Mapping):
        return Environment()
    values = [mapping.get(key) for key in MAPPING_KEYS]
    return _build(_split(value for value in values if isinstance(value, str)))


_CONSTRAINT_TAG = re.compile(r"^(?P<name>[a-z.][a-z0-9.+#_-]*?)\s*(?P<spec>(?:===|==|!=|~=|>=|<=|<|>).*)$")


class RuntimeConstraint(NamedTuple):
    """A runtime constraint tag as read: the runtime's canonical name and its version range."""

    name: str
    constraint: Constraint


@lru_cache(maxsize=4096)  # tags repeat across a corpus; Constraint is immutable
def parse_constraint(tag: str) -> RuntimeConstraint | None:
    """Read a runtime constraint tag: ``python>=3.8``, ``node>=18,<21`` or ``python-3.12``.

    A versioned runtime tag means its prefix (``python-3.12`` is ``==3.12.*``). Returns
    None for anything else (OS, package manager, label, invalid specifier): never raises.
    """
    if not isinstance(tag, str):
        return None
    cleaned = _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", tag)).strip().lower()
    match = _CONSTRAINT_TAG.match(cleaned)
    if match:
        name = match.group("name")
        bare = name.rstrip("0123456789")  # "python3>=3.8" and "py3>=3.8" name python
        if bare and RUNTIME_ALIASES.get(bare, bare) in RUNTIMES:
            name = bare
        name = RUNTIME_ALIASES.get(name, name)
        if name in _OS_NAMES or (name in PKG_MANAGERS and name not in RUNTIMES):
            return None  # "pip>=23" describes tooling, which never splits a scope
        constraint = Constraint.parse(match.group("spec"))
        return RuntimeConstraint(name, constraint) if constraint else None
    token = _classify(_clean(cleaned))
    if token.kind == "runtime" and token.version:
        constraint = Constraint.parse(f"=={token.version}.*")
        return RuntimeConstraint(token.name, constraint) if constraint else None
    return None


# --- answer scopes ----------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """The machines an answer is written for. Empty OS set = every OS; absent runtime = every version."""

    os_families: frozenset[str] = frozenset()
    runtimes: dict[str, Constraint] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.os_families, frozenset(self.runtimes.items())))


def _scope_from_tags(tags: Iterable[Any]) -> Scope:
    families: set[str] = set()
    runtimes: dict[str, Constraint] = {}
    for tag in tags:
        if not isinstance(tag, str):
            continue
        parsed = parse_constraint(tag)
        if parsed:
            name, constraint = parsed
            runtimes[name] = runtimes[name] & constraint if name in runtimes else constraint
            continue
        token = _classify(_clean(tag))
        if token.kind == "os":
            families.add(token.name)
    return Scope(frozenset(families), runtimes)


def solution_scope(solution_env: Iterable[str] | None, node_environment: Iterable[str] | None) -> Scope:
    """The scope of one solution from its ``env`` tags.

    When the solution names neither an OS nor a runtime constraint, the node's
    ``signature.environment`` supplies both instead (all or nothing, not per dimension).
    """
    own = _scope_from_tags(solution_env or ())
    if own.os_families or own.runtimes:
        return own
    return _scope_from_tags(node_environment or ())


def scopes_overlap(a: Scope, b: Scope) -> bool:
    """True when one machine could be in both scopes: the answers would compete.

    OS sets must intersect (an empty set is every OS), and every runtime named by both must
    have intersecting version ranges. Different runtimes constrain different things.
    """
    if a.os_families and b.os_families and not a.os_families & b.os_families:
        return False
    shared = a.runtimes.keys() & b.runtimes.keys()
    return all(a.runtimes[name].intersects(b.runtimes[name]) for name in shared)


def scope_matches(scope: Scope, env: Environment) -> bool:
    """True when the scope covers the machine; whatever the env leaves unknown matches."""
    if scope.os_families and env.os is not None and env.os not in scope.os_families:
        return False
    return all(c.allows(env.runtimes.get(name)) is not False for name, c in scope.runtimes.items())


class MatchRank(NamedTuple):
    """How well an answer's scope fits an env, compared as a tuple: higher is better."""

    matches: int  # 1: the scope covers the env
    names_env_os: int  # 1: it names the env's OS (not every OS)
    satisfied_runtimes: int  # its runtime constraints a known env version satisfies


def match_rank(scope: Scope, env: Environment) -> MatchRank:
    """Sort key for choosing one answer per env: higher is better; compare with `max`.

    ``(matches, names_env_os, satisfied_runtimes)``: a matching scope beats any other; among
    matching ones, a scope naming the env's OS explicitly beats an every-OS scope, then more
    runtime constraints satisfied by a known env version beat fewer. Equal ranks keep
    document order (`max` returns the first).
    """
    if not scope_matches(scope, env):
        return MatchRank(0, 0, 0)
    names_os = int(env.os is not None and env.os in scope.os_families)
    satisfied = sum(1 for name, c in scope.runtimes.items() if c.allows(env.runtimes.get(name)) is True)
    return MatchRank(1, names_os, satisfied)


def describe_scope(scope: Scope) -> dict[str, Any]:
    """JSON-friendly form for error bodies: ``{"os": ["linux"], "runtimes": {"python": ">=3.8"}}``."""
    return {
        "os": sorted(scope.os_families),
        "runtimes": {name: scope.runtimes[name].text for name in sorted(scope.runtimes)},
    }
