"""Environment parsing, answer scopes, overlap and matching (knowmesh_mcp.core.environment)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowmesh_mcp.core.environment import (
    MAX_TOKEN_LENGTH,
    MAX_TOKENS,
    Constraint,
    Environment,
    Scope,
    describe_scope,
    env_from_mapping,
    match_rank,
    parse_constraint,
    parse_env,
    scope_matches,
    scopes_overlap,
    solution_scope,
)

# --- env strings ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "os", "os_version", "distro"),
    [
        ("macos", "macos", None, None),
        ("macos-15", "macos", "15", None),
        ("MacOS 14.5", "macos", "14.5", None),
        ("osx", "macos", None, None),
        ("mac", "macos", None, None),
        ("darwin", "macos", None, None),
        ("darwin-23", "macos", "14", None),
        ("darwin-24.1.0", "macos", "15", None),
        ("darwin-19", "macos", "10.15", None),
        ("linux", "linux", None, None),
        ("ubuntu-24.04", "linux", "24.04", "ubuntu"),
        ("Debian-12", "linux", "12", "debian"),
        ("fedora", "linux", None, "fedora"),
        ("alpine3.19", "linux", "3.19", "alpine"),
        ("archlinux", "linux", None, "arch"),
        ("amzn", "linux", None, "amazonlinux"),
        ("wsl", "linux", None, "wsl"),
        ("windows", "windows", None, None),
        ("Windows-11", "windows", "11", None),
        ("win", "windows", None, None),
        ("win32", "windows", None, None),
        ("win64", "windows", None, None),
        ("freebsd-14", "freebsd", "14", None),
        ("openbsd", "openbsd", None, None),
        ("netbsd", "netbsd", None, None),
    ],
)
def test_os_tokens_fold_to_a_family_and_keep_version(text, os, os_version, distro):
    env = parse_env(text)
    assert (env.os, env.os_version) == (os, os_version)
    assert env.labels == ((distro,) if distro else ())
    assert env.runtimes == {} and env.pkg_manager is None


@pytest.mark.parametrize(
    ("text", "runtimes"),
    [
        ("python-3.12", {"python": "3.12"}),
        ("python3.12", {"python": "3.12"}),
        ("Python 3.12", {"python": "3.12"}),
        ("py3.11", {"python": "3.11"}),
        ("python3", {"python": "3"}),
        ("python", {"python": None}),
        ("node-20", {"node": "20"}),
        ("node20.11", {"node": "20.11"}),
        ("nodejs-v18.19.0", {"node": "18.19.0"}),
        ("js", {"node": None}),
        ("go-1.22", {"go": "1.22"}),
        ("golang-1.21", {"go": "1.21"}),
        ("rustc-1.78", {"rust": "1.78"}),
        ("java-17", {"java": "17"}),
        ("openjdk-21", {"java": "21"}),
        ("ruby-3.3", {"ruby": "3.3"}),
        ("php-8.2", {"php": "8.2"}),
        ("dotnet-8", {"dotnet": "8"}),
        ("deno-1.40", {"deno": "1.40"}),
        ("postgres-16", {"postgres": "16"}),
        ("pg-15", {"postgres": "15"}),
        ("postgresql", {"postgres": None}),
        ("bun-1.1", {"bun": "1.1"}),
        ("bash-5", {"bash": "5"}),
        ("python-3.12,node-20", {"python": "3.12", "node": "20"}),
        ("python,python-3.11", {"python": "3.11"}),
    ],
)
def test_runtimes_and_aliases(text, runtimes):
    env = parse_env(text)
    assert env.runtimes == runtimes
    assert env.os is None and env.pkg_manager is None


@pytest.mark.parametrize(
    ("text", "pkg_manager", "labels"),
    [
        ("pip", "pip", ()),
        ("pip3", "pip", ()),
        ("uv", "uv", ()),
        ("Poetry", "poetry", ()),
        ("homebrew", "brew", ()),
        ("apt-get", "apt", ()),
        ("mvn", "maven", ()),
        ("go-modules", "go-modules", ()),
        ("bun", "bun", ()),  # bare bun is the package manager; bun-1.1 is the runtime
        ("yarn-4", "yarn", ("yarn-4",)),  # the version stays matchable as a label
        ("pip,npm", "pip", ("npm",)),  # first one wins
    ],
)
def test_package_managers(text, pkg_manager, labels):
    env = parse_env(text)
    assert env.pkg_manager == pkg_manager
    assert env.labels == labels
    assert env.runtimes == {}


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("arm64", ("arm64",)),
        ("aarch64", ("arm64",)),
        ("amd64", ("x86_64",)),
        ("esm,gnu-sed,venv,docker", ("esm", "gnu-sed", "venv", "docker")),
        ("GNU-Sed , gnu-sed", ("gnu-sed",)),
        ("python>=3.8", ("python>=3.8",)),  # a constraint describes answers, not a machine
        ("linux,macos-15", ("macos-15",)),  # first OS family wins
        ("macos-14,macos-15", ("macos-15",)),
    ],
)
def test_labels(text, labels):
    assert parse_env(text).labels == labels


def test_same_family_fills_in_missing_version():
    env = parse_env("linux, ubuntu-24.04")
    assert (env.os, env.os_version, env.labels) == ("linux", "24.04", ("ubuntu",))


@pytest.mark.parametrize(
    "text",
    [
        "macos-15,python-3.12,pip,arm64",
        "arm64,pip,python-3.12,macos-15",
        "  PIP , Python3.12,ARM64,Darwin-24 ",
        "python-3.12,arm64,macos-15,pip,,",
    ],
)
def test_tokens_in_any_order_and_case(text):
    env = parse_env(text)
    assert env.os == "macos" and env.os_version == "15"
    assert env.runtimes == {"python": "3.12"}
    assert env.pkg_manager == "pip"
    assert env.labels == ("arm64",)


def test_to_dict_is_json_friendly():
    env = parse_env("ubuntu-24.04,node-20,pnpm,esm")
    assert json.loads(json.dumps(env.to_dict())) == {
        "os": "linux",
        "os_version": "24.04",
        "runtimes": {"node": "20"},
        "pkg_manager": "pnpm",
        "labels": ["ubuntu", "esm"],
    }


@pytest.mark.parametrize(
    ("text", "cluster"),
    [
        ("macos-15,python-3.12,pip", "macos|python-3|pip"),
        ("ubuntu-24.04,node-20.11,npm", "linux|node-20|npm"),
        ("go-1.22,linux", "linux|go-1|"),
        ("python", "|python|"),
        ("pip", "||pip"),
        ("python-3.12,node-20", "|python-3|"),
        ("", "||"),
        (None, "||"),
    ],
)
def test_cluster(text, cluster):
    assert parse_env(text).cluster() == cluster


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        (
            {"os": "macos-15", "runtime": "python-3.12", "pkg_manager": "pip"},
            parse_env("macos-15,python-3.12,pip"),
        ),
        # recognised by kind, not by key
        ({"os": "python-3.12", "runtime": "Darwin-24"}, parse_env("macos-15,python-3.12")),
        ({"os": "linux", "color": "pip", "runtime": 3.12, "pkg_manager": None}, parse_env("linux")),
        ({"os": "linux", "arch": "aarch64", "labels": "docker,esm"}, parse_env("linux,arm64,docker,esm")),
        ({}, Environment()),
        (None, Environment()),
        (["macos"], Environment()),
    ],
)
def test_env_from_mapping(mapping, expected):
    assert env_from_mapping(mapping) == expected


def test_mapping_and_string_share_a_cluster():
    form = env_from_mapping({"os": "darwin-24", "runtime": "py3.12", "pkg_manager": "PIP"})
    assert form.cluster() == parse_env("macos-15,python-3.12,pip").cluster() == "macos|python-3|pip"


def test_environment_is_hashable():
    assert hash(parse_env("macos,python-3.12")) == hash(parse_env("python-3.12,macos"))


def test_caps_on_token_count_and_length():
    env = parse_env(",".join(f"label{i}" for i in range(100)))
    assert len(env.labels) == MAX_TOKENS
    assert env.labels[0] == "label0"
    assert parse_env("x" * 10_000).labels == ("x" * MAX_TOKEN_LENGTH,)


@pytest.mark.parametrize(
    "text",
    [
        "", ",,,", " , ", "\x00\x1b[31m\x7f", "💥,python-∞", "python-", "-3.12", "v", "\u200b",
        "a" * 10_000, 42,
    ],
)
def test_malformed_input_never_raises(text):
    env = parse_env(text)
    assert all(label and len(label) <= MAX_TOKEN_LENGTH and label.isprintable() for label in env.labels)


@given(st.text())
def test_parse_env_never_raises(text):
    env = parse_env(text)
    assert len(env.labels) + len(env.runtimes) <= MAX_TOKENS
    assert all(0 < len(label) <= MAX_TOKEN_LENGTH for label in env.labels)
    assert env.cluster().count("|") == 2
    json.dumps(env.to_dict())


@given(st.dictionaries(st.text(), st.one_of(st.text(), st.integers(), st.none())))
def test_env_from_mapping_never_raises(mapping):
    env_from_mapping(mapping).to_dict()


# --- constraints ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("python>=3.8", ("python", ">=3.8")),
        ("Python >= 3.8", ("python", ">=3.8")),
        ("python3>=3.8", ("python", ">=3.8")),
        ("go>=1.18", ("go", ">=1.18")),
        ("node>=18,<21", ("node", ">=18,<21")),
        ("python==3.12.*", ("python", "==3.12.*")),
        ("python~=3.10", ("python", "~=3.10")),
        ("python!=3.9.0", ("python", "!=3.9.0")),
        ("node<18", ("node", "<18")),
        ("golang>=1.21", ("go", ">=1.21")),
        ("python-3.12", ("python", "==3.12.*")),
        ("python-3", ("python", "==3.*")),
        ("py3.11", ("python", "==3.11.*")),
        ("glibc>=2.28", ("glibc", ">=2.28")),
        ("python", None),  # every version
        ("linux", None),
        ("macos-15", None),
        ("pip", None),
        ("pip>=23", None),  # tooling never splits a scope
        ("gnu-sed", None),
        ("python>=foo", None),
        ("python~=3", None),
        ("python<3.8.*", None),
        ("python>=", None),
        ("python===foo", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_constraint(tag, expected):
    parsed = parse_constraint(tag)
    assert (None if parsed is None else (parsed[0], parsed[1].text)) == expected


@given(st.text())
def test_parse_constraint_never_raises(tag):
    parsed = parse_constraint(tag)
    if parsed:
        parsed[1].allows("3.12")


@pytest.mark.parametrize(
    ("constraint", "version", "allowed"),
    [
        (">=3.8", "3.12", True),
        (">=3.8", "3.7", False),
        (">=3.8", "3.7.9", False),
        (">=3.12.4", "3.12", True),  # "3.12" is some 3.12.x
        (">=3.12.4", "3.12.1", False),  # three parts are exact
        ("!=3.9.0", "3.9.0", False),
        ("!=3.9.0", "3.9", True),
        ("==3.12.*", "3.12.3", True),
        ("==3.12.*", "3.13", False),
        ("~=3.10", "3.99", True),
        ("~=3.10", "4.0", False),
        ("<18", "20", False),
        (">=18,<21", "20", True),
        (">=3.8", None, None),
        (">=3.8", "not-a-version", None),
    ],
)
def test_constraint_allows(constraint, version, allowed):
    parsed = Constraint.parse(constraint)
    assert parsed is not None
    assert parsed.allows(version) is allowed


# --- scopes ---------------------------------------------------------------------------


def scope(*tags: str) -> Scope:
    return solution_scope(list(tags), [])


def test_solution_scope_reads_os_and_runtimes_only():
    result = scope("macos-15", "darwin", "python>=3.8", "python<3.13", "gnu-sed", "pip", "uv")
    assert result.os_families == frozenset({"macos"})
    assert describe_scope(result) == {"os": ["macos"], "runtimes": {"python": ">=3.8,<3.13"}}


def test_solution_without_os_or_runtime_takes_the_node_environment():
    node = ["linux", "python>=3.8", "pip"]
    assert solution_scope(["gnu-sed", "venv"], node) == solution_scope(["linux", "python>=3.8"], [])
    assert solution_scope([], node).os_families == frozenset({"linux"})
    # naming either one is enough to ignore the node's tags
    assert describe_scope(solution_scope(["macos"], node)) == {"os": ["macos"], "runtimes": {}}
    assert describe_scope(solution_scope(["python<3.8"], node)) == {"os": [], "runtimes": {"python": "<3.8"}}
    assert solution_scope(None, None) == Scope()


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        (["linux"], ["macos"], False),
        (["linux", "gnu-sed"], ["macos-15", "bsd-sed"], False),
        (["ubuntu-24.04"], ["debian"], True),  # same family
        (["darwin"], ["macos-14"], True),
        ([], ["linux"], True),  # no OS = every OS
        (["linux", "macos"], ["macos"], True),
        (["uv"], ["pip"], True),  # labels and package managers never split a scope
        (["venv"], ["uv", "gnu-sed"], True),
        (["python>=3.8"], ["python<3.8"], False),
        (["python>=3.8,<3.12"], ["python>=3.11"], True),
        (["python>=3.8", "python<3.12"], ["python>=3.12"], False),
        (["python==3.12.*"], ["python>=3.13"], False),
        (["python==3.12.*"], ["python>=3.12.5"], True),
        (["python-3.12"], ["python<3.12"], False),
        (["python-3.12"], ["python-3"], True),
        (["python-3.11"], ["python-3.12"], False),
        (["python~=3.10"], ["python>=4"], False),
        (["python~=3.10"], ["python>=3.99"], True),
        (["python~=3.10.2"], ["python>=3.11"], False),
        (["python~=3.10.2"], ["python<3.10.2"], False),
        (["python<=3.8"], ["python>=3.8"], True),  # touch at one point
        (["python<=3.8"], ["python>3.8"], False),
        (["python<=3.8"], ["python>=3.8,!=3.8"], False),  # the only shared point is excluded
        (["python==3.9.*"], ["python!=3.9.0"], True),  # a point does not empty a range
        (["python==3.9.*"], ["python!=3.9.*"], False),
        (["python<3.8"], ["node>=18"], True),  # different runtimes
        (["linux", "python<3.8"], ["macos", "python<3.8"], False),
        (["linux", "python<3.8"], ["python>=3.8"], False),
        (["python>=3.12", "python<3.8"], [], True),  # an empty range vs. no constraint on it
    ],
)
def test_scopes_overlap(a, b, overlap):
    assert scopes_overlap(scope(*a), scope(*b)) is overlap
    assert scopes_overlap(scope(*b), scope(*a)) is overlap


@pytest.mark.parametrize(
    ("tags", "env", "matches"),
    [
        (["macos"], "macos-15,python-3.12", True),
        (["macos"], "ubuntu-24.04", False),
        (["linux"], "ubuntu-24.04,python-3.12", True),
        (["linux"], "python-3.12", True),  # no OS in env: any OS scope matches
        ([], "windows-11", True),
        (["python>=3.8"], "linux,python-3.12", True),
        (["python>=3.8"], "linux,python-3.7", False),
        (["python>=3.8"], "linux,python", True),  # unknown version matches
        (["python>=3.8"], "linux,node-20", True),
        (["python>=3.8"], "linux,python-3.7,node-20", False),
        (["node>=18,<21"], "node-20.11", True),
        (["node>=18,<21"], "node-22", False),
        (["macos", "python<3.8"], "darwin,py3.7", True),
        (["macos", "python<3.8"], "darwin,py3.12", False),
        (["gnu-sed"], "macos", True),  # labels never narrow a scope
    ],
)
def test_scope_matches(tags, env, matches):
    assert scope_matches(scope(*tags), parse_env(env)) is matches


def choose(slots: dict[str, Scope], env: str) -> str | None:
    """The selection rule readers use: the best-ranked matching slot, document order on ties."""
    parsed = parse_env(env)
    best = max(slots, key=lambda name: match_rank(slots[name], parsed))
    return best if scope_matches(slots[best], parsed) else None


SED_SLOTS = {"gnu": scope("linux", "gnu-sed"), "bsd": scope("macos", "bsd-sed")}
PY_SLOTS = {
    "generic": scope("pip"),
    "old": scope("python<3.8"),
    "mac": scope("macos"),
}


@pytest.mark.parametrize(
    ("slots", "env", "chosen"),
    [
        (SED_SLOTS, "macos-15,python-3.12,pip", "bsd"),
        (SED_SLOTS, "darwin-23", "bsd"),
        (SED_SLOTS, "ubuntu-24.04", "gnu"),
        (SED_SLOTS, "windows-11", None),
        (SED_SLOTS, "python-3.12", "gnu"),  # no OS: every slot matches, document order decides
        (PY_SLOTS, "macos-15,python-3.12", "mac"),  # names the OS beats generic
        (PY_SLOTS, "linux,python-3.7", "old"),  # satisfied constraint beats generic
        (PY_SLOTS, "linux,python-3.12", "generic"),
        (PY_SLOTS, "linux,python", "generic"),  # unknown version satisfies nothing explicitly
        (PY_SLOTS, "macos,python-3.7", "mac"),  # OS ranks before runtime
    ],
)
def test_match_rank_picks_one_slot(slots, env, chosen):
    assert choose(slots, env) == chosen


def test_match_rank_orders_non_matching_last():
    env = parse_env("ubuntu-24.04,python-3.12")
    assert match_rank(scope("macos"), env) == (0, 0, 0)
    assert match_rank(scope(), env) == (1, 0, 0)
    assert match_rank(scope("linux", "python>=3.8"), env) == (1, 1, 1)


def test_describe_scope_is_json_friendly():
    described = describe_scope(scope("linux", "windows-11", "python>=3.8", "node-20", "uv"))
    assert json.loads(json.dumps(described)) == {
        "os": ["linux", "windows"],
        "runtimes": {"node": "==20.*", "python": ">=3.8"},
    }
    assert describe_scope(Scope()) == {"os": [], "runtimes": {}}


def test_scope_is_hashable_and_comparable():
    assert scope("linux", "python>=3.8") == scope("python>=3.8", "ubuntu")
    assert len({scope("linux"), scope("ubuntu"), scope("macos")}) == 2
