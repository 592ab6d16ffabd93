"""A deterministic synthetic corpus of failure patterns, and search queries against it.

    from synthetic import Corpus
    corpus = Corpus(seed=7)
    for index, document, meta in corpus.generate(100_000): ...
    queries = make_queries(metas, seed=7, count=1000)

Each node is a valid `knowmesh_mcp.core.model.validate_node` document whose `signature.error` is
rendered from a *family* (an error template of one ecosystem, such as
`ModuleNotFoundError: No module named '{pymod}'`) with values drawn from shared vocabularies
(module names, identifiers, tables, paths, versions). Popular words recur (a Zipf-like draw),
so signatures share realistic terms while staying distinct. Slots are of two kinds:

- *identity* slots (module, identifier, table, ...): what makes one node's error its own;
- *volatile* slots (paths, line numbers, versions, ports, hex ids): what differs between two
  occurrences of the same error, and what the normalizer removes.

Uniqueness is checked with the project's own `signature_hash` and `quoted_values`, exactly as
the import does, so an import of `generate(n)` creates n nodes. A family whose identity space
runs out (a handful of distinct errors, e.g. "fatal: refusing to merge unrelated histories")
is retired after a few collisions in a row. Everything depends only on the seed.

Queries re-render a node's error with fresh volatile values (the same error seen again),
with a changed name (a sibling), inside a multi-line traceback or log, as natural-language
phrases, as short phrases, or as text that matches nothing.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from knowmesh_mcp.core.normalize import quoted_values, signature_hash

# Bump when the output of `generate` changes: it is part of the cache key of built databases.
GENERATOR_VERSION = 1


# --- vocabularies ------------------------------------------------------------------------


class Pool:
    """Words drawn with a Zipf-like skew: the first entries are the common ones."""

    def __init__(self, words: str | list[str], skew: float = 0.9):
        self.words = words.split() if isinstance(words, str) else list(words)
        self.cum = list(accumulate(1.0 / (rank + 1) ** skew for rank in range(len(self.words))))

    def __call__(self, rng: random.Random) -> str:
        return rng.choices(self.words, cum_weights=self.cum)[0]

    def uniform(self, rng: random.Random) -> str:
        return rng.choice(self.words)


NOUNS = Pool(
    "user account order invoice payment session token cache config settings profile report billing auth "
    "search index queue worker job task event message notification email upload storage media image video "
    "file document catalog product cart checkout inventory shipment customer tenant team project workspace "
    "ledger metrics analytics log audit schema model record entity graph node route router api client "
    "gateway proxy scheduler cron webhook plugin extension theme layout widget form field query filter page "
    "cursor batch stream pipeline feature flag experiment rate limit policy role permission group member "
    "comment post thread chat room channel device sensor geo location address currency price tax discount "
    "coupon subscription plan trial license vendor supplier warehouse station ticket incident alert rule "
    "backup snapshot volume cluster region zone shard replica lease lock mutex pool socket packet frame "
    "tensor dataset feature_store embedding vector prompt agent tool skill memory",
    skew=0.7,
)
VERBS = Pool(
    "get set load save fetch parse build create update delete find list read write send handle process "
    "validate render compute resolve init start stop run sync merge apply register format convert encode "
    "decode serialize normalize refresh upload download export check emit dispatch track publish consume "
    "schedule retry flush reset migrate seed compile bundle",
    skew=0.8,
)
SUFFIXES = Pool(
    "service client handler manager utils helpers store repo controller provider factory adapter loader "
    "parser builder worker api core common models schemas views tasks types config sdk lib tools cli plugin "
    "backend server db",
    skew=0.8,
)
FIELDS = Pool(
    "id name email status created_at updated_at slug title type kind value amount total count owner_id "
    "user_id parent_id key url path version state code label description price currency timezone locale "
    "token expires_at deleted_at tenant_id order_id sku quantity",
    skew=0.8,
)
ORGS = Pool(
    "acme globex initech umbrella hooli piedpiper contoso northwind wayne stark tyrell cyberdyne soylent "
    "vandelay wonka aperture blackmesa oscorp massive dunder pinnacle zenith orbit lumen quanta nimbus "
    "helix vertex atlas",
    skew=0.6,
)
USERS = Pool("alice bob carol dave erin frank grace heidi ivan judy mallory oscar peggy runner ubuntu ec2-user dev ci", skew=0.5)
PY_REAL = Pool(
    "requests numpy pandas django flask fastapi pydantic sqlalchemy celery redis boto3 yaml cv2 PIL sklearn "
    "torch tensorflow matplotlib scipy pytest httpx aiohttp jwt dotenv psycopg2 attr click rich typer uvicorn "
    "jinja2 lxml bs4 google.protobuf grpc kafka pymongo openai transformers langchain starlette marshmallow "
    "alembic werkzeug gunicorn paramiko cryptography tqdm seaborn polars pyarrow duckdb streamlit",
    skew=1.0,
)
NODE_REAL = Pool(
    "express react lodash axios next vue webpack typescript jest dotenv chalk commander mongoose pg sequelize "
    "prisma @babel/core @types/node eslint prettier vite esbuild node-fetch uuid moment dayjs ws socket.io "
    "redis jsonwebtoken bcrypt sharp puppeteer zod tailwindcss postcss @nestjs/core @angular/core rxjs "
    "react-dom react-router-dom styled-components graphql @apollo/client firebase aws-sdk nodemon ts-node",
    skew=1.0,
)
GO_REAL = Pool(
    "github.com/gin-gonic/gin github.com/spf13/cobra github.com/stretchr/testify github.com/sirupsen/logrus "
    "go.uber.org/zap github.com/gorilla/mux github.com/jackc/pgx/v5 gorm.io/gorm github.com/redis/go-redis/v9 "
    "google.golang.org/grpc golang.org/x/sync github.com/google/uuid github.com/aws/aws-sdk-go-v2 "
    "github.com/prometheus/client_golang k8s.io/client-go github.com/labstack/echo/v4",
    skew=1.0,
)
CRATES = Pool(
    "serde tokio anyhow clap reqwest thiserror rand log tracing hyper axum sqlx diesel regex chrono "
    "serde_json futures async_trait itertools once_cell uuid bytes rayon tonic prost",
    skew=1.0,
)
CLI_REAL = Pool(
    "node npm npx python python3 pip docker-compose kubectl terraform aws gcloud az jq yq make cmake gcc "
    "rg fd helm poetry uv pnpm yarn nvm pyenv rustup cargo go java mvn gradle psql redis-cli ffmpeg gh code "
    "conda brew pre-commit black ruff mypy tsc deno bun protoc kustomize minikube kind",
    skew=0.9,
)
IMAGES_REAL = Pool(
    "postgres redis node python nginx ubuntu alpine debian golang rust mysql mongo rabbitmq elasticsearch "
    "grafana/grafana prom/prometheus bitnami/kafka minio/minio traefik httpd openjdk eclipse-temurin",
    skew=1.0,
)
JAVA_REAL = Pool(
    "org.slf4j.LoggerFactory com.fasterxml.jackson.databind.ObjectMapper org.springframework.boot.SpringApplication "
    "org.apache.commons.lang3.StringUtils com.google.common.collect.ImmutableList javax.servlet.http.HttpServlet "
    "jakarta.persistence.Entity org.junit.jupiter.api.Test io.netty.channel.Channel org.hibernate.Session "
    "com.zaxxer.hikari.HikariDataSource org.apache.kafka.clients.producer.KafkaProducer",
    skew=1.0,
)
BUILTIN_TYPES = Pool("NoneType str int list dict float tuple bytes set bool", skew=0.9)
TS_TYPES = Pool("string number undefined null unknown never boolean 'any[]' 'string[]' object", skew=0.9)
RUST_TYPES = Pool("String &str i32 u64 usize Vec<String> Option<String> &String Box<dyn Error> () f64 Vec<u8>", skew=0.9)
RUST_TRAITS = Pool("Send Sync Clone Debug Serialize Deserialize Display Default Copy Eq Hash FromStr", skew=0.9)
GO_TYPES = Pool("string int int64 error []byte []string interface{} float64 bool context.Context *http.Request", skew=0.9)
CONFS = Pool("compileClasspath runtimeClasspath debugRuntimeClasspath releaseRuntimeClasspath kapt testCompileClasspath annotationProcessor", skew=0.8)
SHELL_TOKENS = Pool("fi done then else ) ( do esac in ;; {", skew=0.8)
CODECS = Pool("utf-8 ascii charmap latin-1 cp1252 utf-16", skew=0.9)
RUNTIME_HEADERS = Pool("openssl/ssl.h Python.h zlib.h ffi.h libpq-fe.h sqlite3.h curl/curl.h yaml.h", skew=0.8)
SYSPKG = {
    "python": Pool("python3-dev python3-venv build-essential libpq-dev libffi-dev libssl-dev pkg-config", 0.7),
    "node": Pool("build-essential python3 g++ make libvips-dev", 0.7),
    "cpp": Pool("build-essential libssl-dev zlib1g-dev libcurl4-openssl-dev cmake pkg-config", 0.7),
}
SYSPKG_DEFAULT = Pool("ca-certificates curl git build-essential pkg-config", 0.7)


def _camel(*parts: str) -> str:
    words = [w for p in parts for w in p.split("_")]
    return words[0] + "".join(w.title() for w in words[1:])


def _pascal(*parts: str) -> str:
    return "".join(w.title() for p in parts for w in p.split("_"))


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


# --- slot generators ---------------------------------------------------------------------
# Each takes (rng, slots) and returns one value; `slots` holds the values already drawn for
# the same node, so related slots agree (the pip package of a module, the file of a class).


def _pymod(r, s):
    k = r.random()
    if k < 0.35:
        return PY_REAL(r)
    if k < 0.55:
        return f"{NOUNS(r)}_{SUFFIXES(r)}"
    if k < 0.7:
        return f"{ORGS(r)}_{NOUNS(r)}"
    if k < 0.85:
        return f"{ORGS(r)}.{NOUNS(r)}.{SUFFIXES(r)}"
    return f"{NOUNS(r)}.{SUFFIXES(r)}"


def _pypkg(r, s):
    if "pymod" in s:
        root = s["pymod"].split(".")[0]
        return {"cv2": "opencv-python", "PIL": "Pillow", "sklearn": "scikit-learn", "yaml": "PyYAML",
                "bs4": "beautifulsoup4", "jwt": "PyJWT", "dotenv": "python-dotenv", "attr": "attrs"}.get(root, root.replace("_", "-"))
    return PY_REAL(r).split(".")[0] if r.random() < 0.4 else f"{ORGS(r)}-{NOUNS(r)}-{SUFFIXES(r)}"


def _nodemod(r, s):
    k = r.random()
    if k < 0.4:
        return NODE_REAL(r)
    if k < 0.6:
        return f"@{ORGS(r)}/{NOUNS(r)}-{SUFFIXES(r)}"
    if k < 0.8:
        return f"./{NOUNS(r)}/{_camel(VERBS(r), NOUNS(r))}"
    if k < 0.9:
        return f"../{SUFFIXES(r)}/{NOUNS(r)}"
    return f"{NOUNS(r)}-{SUFFIXES(r)}"


def _nodepkg(r, s):
    mod = s.get("nodemod", ".")
    if not mod.startswith("."):  # the package that provides the module
        return "/".join(mod.split("/")[:2]) if mod.startswith("@") else mod.split("/")[0]
    k = r.random()
    if k < 0.5:
        return NODE_REAL(r)
    if k < 0.8:
        return f"@{ORGS(r)}/{NOUNS(r)}-{SUFFIXES(r)}"
    return f"{NOUNS(r)}-{SUFFIXES(r)}"


def _gomod(r, s):
    if r.random() < 0.3:
        return GO_REAL(r)
    tail = f"/{r.choice(['internal', 'pkg', 'cmd'])}/{NOUNS(r)}" if r.random() < 0.5 else ""
    return f"github.com/{ORGS(r)}/{NOUNS(r)}-{SUFFIXES(r)}{tail}"


def _javaclass(r, s):
    if r.random() < 0.25:
        return JAVA_REAL(r)
    return f"com.{ORGS(r)}.{NOUNS(r)}.{_pascal(NOUNS(r), SUFFIXES(r))}"


def _cmd(r, s):
    k = r.random()
    if k < 0.6:
        return CLI_REAL(r)
    if k < 0.8:
        return f"{NOUNS(r)}-{SUFFIXES(r)}"
    return f"{ORGS(r)}ctl"


def _image(r, s):
    k = r.random()
    if k < 0.35:
        return IMAGES_REAL(r)
    if k < 0.8:
        return f"{ORGS(r)}/{NOUNS(r)}-{SUFFIXES(r)}"
    return f"ghcr.io/{ORGS(r)}/{NOUNS(r)}"


def _branch(r, s):
    k = r.random()
    if k < 0.2:
        return r.choice(["main", "master", "develop", "gh-pages", "staging"])
    return f"{r.choice(['feature', 'fix', 'chore', 'hotfix', 'refactor'])}/{NOUNS(r)}-{VERBS(r)}"


def _table(r, s):
    k = r.random()
    if k < 0.5:
        return f"{NOUNS(r)}s"
    if k < 0.8:
        return f"{NOUNS(r)}_{NOUNS(r)}s"
    return f"{r.choice(['public', 'app', 'billing', 'auth', 'analytics'])}.{NOUNS(r)}s"


def _col(r, s):
    return FIELDS(r) if r.random() < 0.6 else f"{NOUNS(r)}_{FIELDS(r)}"


def _pyfile(r, s):
    root = r.choice([f"/home/{USERS(r)}/{NOUNS(r)}-{SUFFIXES(r)}", f"/Users/{USERS(r)}/code/{NOUNS(r)}", "/app", "/srv/app", "/workspace"])
    return f"{root}/{r.choice(['src/', ''])}{NOUNS(r)}/{VERBS(r)}_{NOUNS(r)}.py"


def _jsfile(r, s):
    root = r.choice(["/app", f"/home/{USERS(r)}/{NOUNS(r)}-web", f"/Users/{USERS(r)}/dev/{NOUNS(r)}", "/usr/src/app"])
    return f"{root}/{r.choice(['src', 'lib', 'dist', 'server'])}/{NOUNS(r)}/{_camel(VERBS(r), NOUNS(r))}.{r.choice(['js', 'mjs', 'cjs'])}"


def _tsfile(r, s):
    return f"src/{NOUNS(r)}/{_pascal(NOUNS(r), SUFFIXES(r))}.{r.choice(['ts', 'tsx'])}"


def _gofile(r, s):
    return f"{r.choice(['./', 'internal/', 'pkg/', 'cmd/'])}{NOUNS(r)}/{NOUNS(r)}.go"


def _rsfile(r, s):
    return f"src/{r.choice(['', 'bin/', NOUNS(r) + '/'])}{NOUNS(r)}.rs"


def _path(r, s):
    return f"/{r.choice(['home/' + USERS(r), 'opt', 'var/lib', 'usr/local', 'tmp'])}/{NOUNS(r)}/{NOUNS(r)}.{r.choice(['txt', 'json', 'yaml', 'cfg', 'lock', 'toml'])}"


def _ver(r, s):
    return f"{r.randint(0, 9)}.{r.randint(0, 30)}.{r.randint(0, 20)}"


GENERATORS: dict[str, Callable[[random.Random, dict[str, str]], str]] = {
    # identity
    "pymod": _pymod,
    "pypkg": _pypkg,
    "pyname": lambda r, s: _pascal(VERBS(r), NOUNS(r)) if r.random() < 0.5 else f"{VERBS(r)}_{NOUNS(r)}",
    "func": lambda r, s: f"{VERBS(r)}_{NOUNS(r)}" if r.random() < 0.7 else f"{_pascal(NOUNS(r), SUFFIXES(r))}.__init__",
    "attr": lambda r, s: r.choice([NOUNS(r), f"{NOUNS(r)}_{FIELDS(r)}", f"{VERBS(r)}_{NOUNS(r)}", f"{VERBS(r)}"]),
    "key": lambda r, s: r.choice([FIELDS(r), f"{NOUNS(r)}_{FIELDS(r)}", f"{NOUNS(r).upper()}_{r.choice(['URL', 'KEY', 'TOKEN', 'HOST', 'PORT', 'SECRET'])}"]),
    "arg": lambda r, s: r.choice([FIELDS(r), f"{NOUNS(r)}_{FIELDS(r)}", NOUNS(r)]),
    "pytype": lambda r, s: BUILTIN_TYPES(r) if r.random() < 0.5 else _pascal(NOUNS(r), SUFFIXES(r)),
    "btype": lambda r, s: BUILTIN_TYPES(r),
    "word": lambda r, s: r.choice([NOUNS(r), "", "N/A", "null", "abc", "1.5", "true", f"{NOUNS(r)}-{VERBS(r)}"]),
    "codec": lambda r, s: CODECS(r),
    "nodemod": _nodemod,
    "nodepkg": _nodepkg,
    "prop": lambda r, s: r.choice(["map", "length", "then", "data", "id"]) if r.random() < 0.15 else r.choice([NOUNS(r), _camel(NOUNS(r), FIELDS(r))]),
    "ident": lambda r, s: _camel(VERBS(r), NOUNS(r)) if r.random() < 0.7 else NOUNS(r),
    "obj": lambda r, s: r.choice([NOUNS(r), f"this.{NOUNS(r)}", _camel(NOUNS(r), SUFFIXES(r))]),
    "method": lambda r, s: _camel(VERBS(r), NOUNS(r)),
    "script": lambda r, s: r.choice([f"{VERBS(r)} {NOUNS(r)}", f"tsc && node dist/{NOUNS(r)}.js", f"vite build --mode {NOUNS(r)}", f"next build", f"webpack --config {NOUNS(r)}.config.js"]),
    "tstype": lambda r, s: TS_TYPES(r) if r.random() < 0.3 else _pascal(NOUNS(r), SUFFIXES(r)),
    "goident": lambda r, s: _pascal(VERBS(r), NOUNS(r)) if r.random() < 0.6 else _camel(NOUNS(r), SUFFIXES(r)),
    "gopkg": lambda r, s: NOUNS(r).replace("_", ""),
    "gotype": lambda r, s: GO_TYPES(r) if r.random() < 0.4 else f"{r.choice(['*', '', '[]'])}{NOUNS(r).replace('_', '')}.{_pascal(NOUNS(r), SUFFIXES(r))}",
    "gomod": _gomod,
    "crate": lambda r, s: CRATES(r) if r.random() < 0.5 else f"{NOUNS(r)}_{SUFFIXES(r)}",
    "rident": lambda r, s: f"{NOUNS(r)}_{FIELDS(r)}" if r.random() < 0.5 else NOUNS(r),
    "rtype": lambda r, s: RUST_TYPES(r) if r.random() < 0.4 else _pascal(NOUNS(r), SUFFIXES(r)),
    "trait": lambda r, s: RUST_TRAITS(r),
    "cmd": _cmd,
    "shscript": lambda r, s: f"{VERBS(r)}_{NOUNS(r)}",
    "tok": lambda r, s: SHELL_TOKENS(r),
    "interp": lambda r, s: r.choice(["bash", "python3", "node", "sh", "env", "ruby", "perl"]),
    "target": lambda r, s: r.choice([f"{NOUNS(r)}.o", f"build/{NOUNS(r)}", f"{VERBS(r)}-{NOUNS(r)}", f"lib{NOUNS(r)}.a", f"{NOUNS(r)}/{NOUNS(r)}.c"]),
    "branch": _branch,
    "repo": lambda r, s: f"{ORGS(r)}/{NOUNS(r)}-{SUFFIXES(r)}",
    "host": lambda r, s: r.choice([f"{NOUNS(r)}.{ORGS(r)}.internal", "github.com", "gitlab.com", f"git.{ORGS(r)}.com", "registry.npmjs.org", "pypi.org"]),
    "image": _image,
    "tag": lambda r, s: r.choice(["latest", f"{r.randint(1, 22)}-alpine", f"{r.randint(3, 3)}.{r.randint(8, 13)}-slim", "bookworm", f"v{_ver(r, s)}", "nightly", "lts"]),
    "cname": lambda r, s: f"{NOUNS(r)}-{SUFFIXES(r)}-{r.randint(1, 3)}" if r.random() < 0.5 else f"{ORGS(r)}_{NOUNS(r)}",
    "entry": lambda r, s: r.choice(["docker-entrypoint.sh", "entrypoint.sh", f"{NOUNS(r)}-server", f"start-{NOUNS(r)}.sh", "app"]),
    "table": _table,
    "col": _col,
    "pguser": lambda r, s: r.choice(["postgres", USERS(r), f"{NOUNS(r)}_app", f"{ORGS(r)}_ro"]),
    "dbname": lambda r, s: r.choice([f"{NOUNS(r)}_{r.choice(['dev', 'test', 'prod', 'db'])}", f"{ORGS(r)}", NOUNS(r)]),
    "javaclass": _javaclass,
    "jclass": lambda r, s: _pascal(NOUNS(r), SUFFIXES(r)),
    "var": lambda r, s: _camel(NOUNS(r), SUFFIXES(r)) if r.random() < 0.5 else NOUNS(r),
    "group": lambda r, s: f"com.{ORGS(r)}" if r.random() < 0.6 else r.choice(["org.springframework.boot", "io.ktor", "androidx.core", "com.squareup.okhttp3"]),
    "artifact": lambda r, s: f"{NOUNS(r)}-{SUFFIXES(r)}",
    "proj": lambda r, s: f"{NOUNS(r)}-{SUFFIXES(r)}",
    "conf": lambda r, s: CONFS(r),
    "kttype": lambda r, s: r.choice(["String", "Int", "String?", "Long", "Unit", f"List<{_pascal(NOUNS(r))}>", _pascal(NOUNS(r), SUFFIXES(r))]),
    "rubylib": lambda r, s: r.choice([f"{NOUNS(r)}/{SUFFIXES(r)}", NOUNS(r), f"{ORGS(r)}_{NOUNS(r)}", "bundler/setup", "nokogiri", "pg", "mysql2"]),
    "rconst": lambda r, s: _pascal(NOUNS(r), SUFFIXES(r)) if r.random() < 0.6 else f"{_pascal(ORGS(r))}::{_pascal(NOUNS(r))}",
    "gem": lambda r, s: r.choice(["rails", "nokogiri", "pg", "puma", "sidekiq", "devise", f"{NOUNS(r)}-{SUFFIXES(r)}"]),
    "cstype": lambda r, s: _pascal(NOUNS(r), SUFFIXES(r)),
    "member": lambda r, s: _pascal(VERBS(r), NOUNS(r)),
    "nupkg": lambda r, s: f"{_pascal(ORGS(r))}.{_pascal(NOUNS(r))}" if r.random() < 0.7 else r.choice(["Newtonsoft.Json", "Serilog", "Dapper", "AutoMapper", "Polly"]),
    "header": lambda r, s: RUNTIME_HEADERS(r) if r.random() < 0.4 else f"{NOUNS(r)}/{NOUNS(r)}.h",
    "cppident": lambda r, s: r.choice([f"{NOUNS(r)}::{_pascal(NOUNS(r), SUFFIXES(r))}::{_camel(VERBS(r), NOUNS(r))}()", f"{VERBS(r)}_{NOUNS(r)}", f"{NOUNS(r)}_{VERBS(r)}_init"]),
    "syspkg": lambda r, s: SYSPKG_DEFAULT(r),
    "user": lambda r, s: USERS(r),
    # volatile
    "pyfile": _pyfile,
    "jsfile": _jsfile,
    "tsfile": _tsfile,
    "gofile": _gofile,
    "rsfile": _rsfile,
    "path": _path,
    "ktfile": lambda r, s: f"/home/{USERS(r)}/{NOUNS(r)}/src/main/kotlin/{_pascal(NOUNS(r), SUFFIXES(r))}.kt",
    "line": lambda r, s: str(r.randint(1, 1800)),
    "colno": lambda r, s: str(r.randint(1, 90)),
    "n": lambda r, s: str(r.randint(0, 300)),
    "port": lambda r, s: str(r.choice([3000, 5432, 8000, 8080, 5000, 6379, 27017, 9000, 4200, 5173, r.randint(1024, 65000)])),
    "ver": _ver,
    "hex": lambda r, s: _hex(r, 12),
    "sha": lambda r, s: _hex(r, 64),
    "addr": lambda r, s: "0x" + _hex(r, 6),
    "ip": lambda r, s: f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}",
    "val": lambda r, s: r.choice([f"{USERS(r)}@example.com", str(r.randint(1, 99999)), f"{NOUNS(r)}-{r.randint(1, 999)}"]),
    "byte": lambda r, s: _hex(r, 2),
    "cfv": lambda r, s: str(r.randint(52, 67)),
}
VOLATILE = frozenset("pyfile jsfile tsfile gofile rsfile path ktfile line colno n port ver hex sha addr ip val byte cfv".split())


class Slots(dict):
    """Slot values, drawn on first use; `{name2}` draws a second value of kind `name`."""

    def __init__(self, rng: random.Random, given: dict[str, str] | None = None):
        super().__init__(given or {})
        self.rng = rng

    def __missing__(self, key: str) -> str:
        kind = key.rstrip("0123456789")
        value = GENERATORS[kind](self.rng, self)
        self[key] = value
        return value


_FORMATTER = string.Formatter()


def fields_of(template: str) -> list[str]:
    return [name for _, name, _, _ in _FORMATTER.parse(template) if name]


# --- families ----------------------------------------------------------------------------


@dataclass
class Family:
    ecosystem: str
    key: str
    error: str
    title: str
    cause: str
    fixes: list[str]
    verify: str
    phrases: list[str]
    short: list[str]
    trace: str = "plain"
    aliases: list[str] = field(default_factory=list)
    weight: float = 1.0
    identity: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.identity = [f for f in dict.fromkeys(fields_of(self.error)) if f.rstrip("0123456789") not in VOLATILE]


F = Family
FAMILIES: list[Family] = [
    # -- python -----------------------------------------------------------------------
    F("python", "module-not-found", "ModuleNotFoundError: No module named '{pymod}'",
      "ModuleNotFoundError for '{pymod}' although it is installed",
      "pip installed {pypkg} into a different interpreter than the one that runs the code, or '{pymod}' is a local package missing from sys.path.",
      ["python -c 'import sys; print(sys.executable)'", "python -m pip install {pypkg}", "Run the code with the same interpreter: python -m {proj}"],
      "python -c 'import {pymod}'",
      ["no module named {pymod} after pip install", "pip installed {pypkg} but import fails", "module not found inside virtualenv", "python cannot find installed package"],
      ["ModuleNotFoundError", "No module named", "{pymod}"], trace="python",
      aliases=["ImportError: No module named {pymod}"], weight=3.0),
    F("python", "cannot-import-name", "ImportError: cannot import name '{pyname}' from '{pymod}' ({pyfile})",
      "ImportError: cannot import name '{pyname}' from '{pymod}'",
      "'{pyname}' was renamed or removed in a newer release of {pypkg}, or a circular import left '{pymod}' partially initialized.",
      ["python -m pip show {pypkg}", "python -m pip install '{pypkg}<{ver}'", "Move the import inside the function to break the import cycle"],
      "python -c 'from {pymod} import {pyname}'",
      ["cannot import name {pyname} from {pymod}", "import error after upgrading {pypkg}", "circular import partially initialized module"],
      ["cannot import name", "ImportError {pyname}"], trace="python", weight=2.0),
    F("python", "keyerror", "KeyError: '{key}'",
      "KeyError '{key}' when reading configuration or a dict",
      "The mapping does not contain '{key}': the environment variable or JSON field is missing in this environment.",
      ["Print the available keys: print(sorted(data))", "Use data.get('{key}') with a default", "export {key}=... before starting the process"],
      "python -c \"import os; print(os.environ['{key}'])\"",
      ["keyerror {key} missing from dict", "environment variable missing keyerror", "python dict key not found"],
      ["KeyError", "KeyError {key}"], trace="python", weight=1.5),
    F("python", "unexpected-keyword", "TypeError: {func}() got an unexpected keyword argument '{arg}'",
      "TypeError: {func}() got an unexpected keyword argument '{arg}'",
      "The installed version of the library has a different signature for {func}(): '{arg}' was added in a later release or removed in this one.",
      ["python -m pip show {pypkg}", "Check the changelog for '{arg}'", "Pin a compatible version in requirements.txt"],
      "python -m pytest -x -q", ["unexpected keyword argument {arg}", "got an unexpected keyword argument after upgrade", "function signature changed typeerror"],
      ["unexpected keyword argument", "TypeError {func}"], trace="python", weight=1.5),
    F("python", "missing-positional", "TypeError: {func}() missing 1 required positional argument: '{arg}'",
      "TypeError: {func}() missing required positional argument '{arg}'",
      "{func}() is called without '{arg}', often because a method is called on the class instead of an instance.",
      ["Instantiate the class before calling the method", "Pass {arg}= explicitly"],
      "python -m pytest -x -q", ["missing required positional argument {arg}", "method called on class missing self", "typeerror missing 1 required positional argument"],
      ["missing 1 required positional argument"], trace="python"),
    F("python", "module-no-attribute", "AttributeError: module '{pymod}' has no attribute '{attr}'",
      "AttributeError: module '{pymod}' has no attribute '{attr}'",
      "A local file named like the package shadows '{pymod}', or '{attr}' moved in a newer release.",
      ["python -c 'import {pymod}; print({pymod}.__file__)'", "Rename the local file that shadows {pymod}", "python -m pip install -U {pypkg}"],
      "python -c 'import {pymod}; {pymod}.{attr}'",
      ["module {pymod} has no attribute {attr}", "local file shadows installed module", "attribute error after package upgrade"],
      ["has no attribute", "AttributeError module"], trace="python", weight=2.0),
    F("python", "object-no-attribute", "AttributeError: '{pytype}' object has no attribute '{attr}'",
      "AttributeError: '{pytype}' object has no attribute '{attr}'",
      "The value is a {pytype}, not the object the code expects: a function returned early, or an API now returns a different type.",
      ["Log type(value) just before the failing line", "Handle the {pytype} case explicitly"],
      "python -m pytest -x -q", ["{pytype} object has no attribute {attr}", "none type has no attribute", "object attribute error python"],
      ["'NoneType' object has no attribute", "AttributeError"], trace="python", weight=2.0),
    F("python", "unsupported-operand", "TypeError: unsupported operand type(s) for {op}: '{btype}' and '{btype2}'",
      "TypeError: unsupported operand types '{btype}' and '{btype2}'",
      "One operand is a {btype} where a {btype2} was expected, usually a value read from input or a missing return.",
      ["Convert explicitly before the operation", "Check for None before using the value"],
      "python -m pytest -x -q", ["unsupported operand type for +", "cannot add string and int python"], ["unsupported operand type(s)"], trace="python", weight=0.3),
    F("python", "invalid-literal", "ValueError: invalid literal for int() with base 10: '{word}'",
      "ValueError: invalid literal for int() with base 10",
      "A string that is not a base-10 integer reaches int(): an empty field, a float or a header line.",
      ["Strip and validate the field before int()", "Skip the header row"], "python -m pytest -x -q",
      ["invalid literal for int with base 10", "convert string to int fails"], ["invalid literal for int()"], trace="python", weight=0.2),
    F("python", "unicode-decode", "UnicodeDecodeError: '{codec}' codec can't decode byte 0x{byte} in position {n}: invalid {what} byte",
      "UnicodeDecodeError: '{codec}' codec can't decode byte",
      "The file is not in {codec}; open() uses the locale encoding unless encoding= is given.",
      ["open(path, encoding='utf-8', errors='replace')", "Detect the encoding with file -i"], "python -c 'open(\"data.csv\", encoding=\"utf-8\").read()'",
      ["codec can't decode byte", "unicode decode error reading csv"], ["UnicodeDecodeError"], trace="python", weight=0.2),
    F("python", "pip-no-matching", "ERROR: Could not find a version that satisfies the requirement {pypkg}=={ver} (from versions: none)\nERROR: No matching distribution found for {pypkg}=={ver}",
      "pip: no matching distribution found for {pypkg}",
      "No wheel of {pypkg} matches this Python version or platform, or the package name is wrong or only on a private index.",
      ["python -m pip index versions {pypkg}", "Use a Python version the package supports", "pip install --extra-index-url https://pypi.{org}.internal/simple {pypkg}"],
      "python -m pip install {pypkg}", ["no matching distribution found for {pypkg}", "pip could not find a version that satisfies requirement", "pip install fails private index"],
      ["No matching distribution found", "pip install {pypkg}"], weight=1.5),
    F("python", "django-no-such-table", "django.db.utils.OperationalError: no such table: {table}",
      "Django OperationalError: no such table {table}",
      "Migrations were not applied to this database, or the app with the model is missing from INSTALLED_APPS.",
      ["python manage.py makemigrations", "python manage.py migrate"], "python manage.py showmigrations",
      ["django no such table {table}", "django migrations not applied operationalerror", "no such table after adding model"],
      ["OperationalError no such table"], trace="python"),
    # -- node ---------------------------------------------------------------------------
    F("node", "cannot-find-module", "Error: Cannot find module '{nodemod}'\nRequire stack:\n- {jsfile}",
      "Error: Cannot find module '{nodemod}'",
      "'{nodemod}' is not installed in node_modules of this project, or the relative path or extension is wrong after a build step.",
      ["npm ls {nodepkg}", "npm install", "rm -rf node_modules package-lock.json && npm install"], "node -e \"require.resolve('{nodemod}')\"",
      ["cannot find module {nodemod}", "node require cannot find module after install", "module not found node_modules missing"],
      ["Cannot find module", "MODULE_NOT_FOUND"], trace="node", aliases=["code: 'MODULE_NOT_FOUND'"], weight=3.0),
    F("node", "err-require-esm", "Error [ERR_REQUIRE_ESM]: require() of ES Module {jsfile} from {jsfile2} not supported.\nInstead change the require of {nodepkg} to a dynamic import() which is available in all CommonJS modules.",
      "ERR_REQUIRE_ESM when requiring {nodepkg}",
      "{nodepkg} is published as ESM only since a major release; CommonJS code cannot require() it.",
      ["Use await import('{nodepkg}')", "Or pin the last CommonJS major in package.json", "Or set \"type\": \"module\""], "node -e \"import('{nodepkg}')\"",
      ["require of es module not supported", "ERR_REQUIRE_ESM {nodepkg} esm only", "commonjs require esm package"],
      ["ERR_REQUIRE_ESM"], trace="node", weight=1.2),
    F("node", "package-path-not-exported", "Error [ERR_PACKAGE_PATH_NOT_EXPORTED]: Package subpath './{attr}' is not defined by \"exports\" in {jsfile}",
      "ERR_PACKAGE_PATH_NOT_EXPORTED for subpath './{attr}'",
      "The package's \"exports\" map does not expose './{attr}'; deep imports stopped working after an upgrade.",
      ["Import from the public entry point instead", "Pin the previous major version"], "node -e \"require('{nodepkg}')\"",
      ["package subpath not defined by exports", "ERR_PACKAGE_PATH_NOT_EXPORTED deep import"], ["ERR_PACKAGE_PATH_NOT_EXPORTED"], trace="node"),
    F("node", "npm-eresolve", "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\nnpm ERR! Found: {nodepkg}@{ver}\nnpm ERR! Could not resolve dependency:\nnpm ERR! peer {nodepkg}@\"^{major}.0.0\" from {nodepkg2}@{ver2}",
      "npm ERESOLVE: {nodepkg2} needs peer {nodepkg}@^{major}",
      "{nodepkg2} declares a peer dependency on {nodepkg} ^{major} and npm 7+ refuses the conflicting tree.",
      ["npm install {nodepkg}@^{major}", "Or upgrade {nodepkg2}", "As a last resort: npm install --legacy-peer-deps"], "npm ls {nodepkg}",
      ["npm unable to resolve dependency tree", "eresolve peer dependency conflict {nodepkg}", "npm install fails peer deps"],
      ["ERESOLVE", "npm ERR! code ERESOLVE"], weight=2.0),
    F("node", "npm-e404", "npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/{nodepkg} - Not found\nnpm ERR! 404  '{nodepkg}@{ver}' is not in this registry.",
      "npm E404: '{nodepkg}' is not in this registry",
      "The package is private or scoped to another registry, or its name is misspelled; npm asks the public registry.",
      ["Check the name on the registry", "npm config set @{org}:registry https://npm.{org}.internal", "npm login --registry https://npm.{org}.internal"],
      "npm view {nodepkg} version", ["npm 404 not found package not in this registry", "private scoped package npm e404"], ["E404", "not in this registry"], weight=1.2),
    F("node", "cannot-read-properties", "TypeError: Cannot read properties of undefined (reading '{prop}')",
      "TypeError: Cannot read properties of undefined (reading '{prop}')",
      "The object holding '{prop}' is undefined: data not loaded yet, a wrong response shape, or a missing await.",
      ["Log the object before the access", "Use optional chaining: obj?.{prop}", "await the promise that fills it"], "npm test",
      ["cannot read properties of undefined reading {prop}", "undefined property access react state", "missing await undefined property"],
      ["Cannot read properties of undefined"], trace="node", weight=2.0),
    F("node", "not-defined", "ReferenceError: {ident} is not defined",
      "ReferenceError: {ident} is not defined",
      "{ident} is used in a scope where it is not declared: a missing import, a browser global under Node, or an ESM file without __dirname.",
      ["Import or declare {ident}", "In ESM use import.meta.url instead of __dirname"], "node --check {jsfile}",
      ["{ident} is not defined", "referenceerror not defined esm", "require is not defined in es module scope"], ["ReferenceError", "is not defined"], trace="node", weight=1.5),
    F("node", "not-a-function", "TypeError: {obj}.{method} is not a function",
      "TypeError: {obj}.{method} is not a function",
      "{obj} is not the object the code expects: a default vs named export mix-up or an API removed in a new major.",
      ["console.log(typeof {obj}.{method})", "Switch between default and named import"], "npm test",
      ["{method} is not a function", "typeerror is not a function default export"], ["is not a function"], trace="node", weight=1.5),
    F("node", "eaddrinuse", "Error: listen EADDRINUSE: address already in use :::{port}",
      "EADDRINUSE: address already in use",
      "Another process (often a previous dev server) already listens on the port.",
      ["lsof -i :{port}", "kill the stale process", "Or start on another port: PORT=3001 npm start"], "lsof -i :{port}",
      ["address already in use port", "eaddrinuse dev server port busy"], ["EADDRINUSE"], trace="node", weight=0.2),
    F("node", "npm-elifecycle", "npm ERR! code ELIFECYCLE\nnpm ERR! errno 1\nnpm ERR! {proj}@{ver} build: `{script}`\nnpm ERR! Exit status 1",
      "npm ELIFECYCLE: the build script `{script}` failed",
      "The script itself failed; the real error is printed above the npm ERR! lines.",
      ["Scroll up to the first error above npm ERR!", "Run the script directly: npx {script}"], "npm run build",
      ["npm err elifecycle build script failed", "npm run build exit status 1"], ["ELIFECYCLE"], weight=1.0),
    # -- typescript ---------------------------------------------------------------------
    F("typescript", "ts2307", "{tsfile}({line},{colno}): error TS2307: Cannot find module '{nodemod}' or its corresponding type declarations.",
      "TS2307: Cannot find module '{nodemod}' or its type declarations",
      "TypeScript cannot resolve '{nodemod}': the package lacks types, or paths/moduleResolution in tsconfig.json do not match the bundler.",
      ["npm install -D @types/{nodepkg}", "Set \"moduleResolution\": \"bundler\" in tsconfig.json", "Add a paths entry for the alias"], "npx tsc --noEmit",
      ["cannot find module or its corresponding type declarations", "ts2307 {nodemod} types missing", "typescript path alias not resolved"],
      ["TS2307"], weight=2.0),
    F("typescript", "ts2339", "{tsfile}({line},{colno}): error TS2339: Property '{prop}' does not exist on type '{tstype}'.",
      "TS2339: Property '{prop}' does not exist on type '{tstype}'",
      "The declared type of the value does not include '{prop}'; the type is too narrow or the property is optional on a union.",
      ["Extend the interface with {prop}", "Narrow the union with a type guard"], "npx tsc --noEmit",
      ["property {prop} does not exist on type", "ts2339 property does not exist"], ["TS2339"], weight=2.0),
    F("typescript", "ts2345", "{tsfile}({line},{colno}): error TS2345: Argument of type '{tstype}' is not assignable to parameter of type '{tstype2}'.",
      "TS2345: Argument of type '{tstype}' is not assignable to '{tstype2}'",
      "The argument's type is wider than the parameter accepts, typically string | undefined passed where string is required.",
      ["Check for undefined before the call", "Fix the declared type of the argument"], "npx tsc --noEmit",
      ["argument of type is not assignable to parameter", "ts2345 string undefined not assignable"], ["TS2345"], weight=1.5),
    F("typescript", "ts7016", "{tsfile}({line},{colno}): error TS7016: Could not find a declaration file for module '{nodepkg}'.",
      "TS7016: Could not find a declaration file for module '{nodepkg}'",
      "'{nodepkg}' ships no .d.ts and noImplicitAny is on.",
      ["npm install -D @types/{nodepkg}", "Or add declare module '{nodepkg}'; in a .d.ts file"], "npx tsc --noEmit",
      ["could not find a declaration file for module", "ts7016 implicitly has an any type"], ["TS7016"], weight=1.0),
    # -- go -----------------------------------------------------------------------------
    F("go", "undefined", "{gofile}:{line}:{colno}: undefined: {goident}",
      "go build: undefined: {goident}",
      "{goident} is declared in a file excluded by build tags, in another package, or it is unexported.",
      ["go vet ./...", "Check the //go:build constraints of the file declaring {goident}", "Qualify it with its package name"], "go build ./...",
      ["go build undefined {goident}", "undefined function build tags go", "go undefined identifier in other package"],
      ["undefined:", "go undefined"], trace="go", weight=2.5),
    F("go", "cannot-use-as", "{gofile}:{line}:{colno}: cannot use {var} (variable of type {gotype}) as {gotype2} value in argument to {gopkg}.{goident}",
      "cannot use {var} (type {gotype}) as {gotype2}",
      "The argument's type is {gotype} but {gopkg}.{goident} takes {gotype2}; Go does not convert implicitly.",
      ["Convert explicitly", "Dereference or take the address as needed"], "go build ./...",
      ["cannot use variable of type as value in argument", "go type mismatch cannot use as"], ["cannot use", "as value in argument"], trace="go", weight=2.0),
    F("go", "no-required-module", "no required module provides package {gomod}; to add it:\n\tgo get {gomod}",
      "no required module provides package {gomod}",
      "go.mod does not require the module that provides {gomod}.",
      ["go get {gomod}", "go mod tidy"], "go build ./...",
      ["no required module provides package", "go get missing module go.mod"], ["no required module provides package"], weight=1.5),
    F("go", "imported-not-used", "{gofile}:{line}:{colno}: \"{gomod}\" imported and not used",
      "\"{gomod}\" imported and not used",
      "Go refuses unused imports; the code using {gomod} was removed or commented out.",
      ["goimports -w .", "Remove the import"], "go vet ./...",
      ["imported and not used go", "unused import compile error go"], ["imported and not used"], trace="go", weight=1.0),
    F("go", "declared-not-used", "{gofile}:{line}:{colno}: declared and not used: {var}",
      "declared and not used: {var}",
      "A local variable is assigned but never read; Go treats it as a compile error.",
      ["Use the variable or assign to _"], "go vet ./...",
      ["declared and not used go variable", "go compile error unused variable"], ["declared and not used"], trace="go", weight=1.0),
    F("go", "nil-pointer", "panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc={addr}]\n\ngoroutine 1 [running]:\n{gopkg}.(*{goident}).{method}(...)",
      "nil pointer dereference in {gopkg}.(*{goident}).{method}",
      "A *{goident} is nil when {method} runs: a constructor error was ignored or a map lookup missed.",
      ["Check the error returned with the pointer", "Guard with if x == nil"], "go test ./...",
      ["invalid memory address or nil pointer dereference", "go panic nil pointer sigsegv"], ["nil pointer dereference", "SIGSEGV"], trace="go", weight=1.5),
    F("go", "index-out-of-range", "panic: runtime error: index out of range [{n}] with length {n2}\n\ngoroutine {n3} [running]:\n{gopkg}.{goident}(...)",
      "index out of range in {gopkg}.{goident}",
      "{gopkg}.{goident} indexes a slice without checking its length.",
      ["Check len() before indexing"], "go test ./...",
      ["go panic index out of range with length", "slice bounds out of range go"], ["index out of range"], trace="go", weight=1.0),
    F("go", "deadlock", "fatal error: all goroutines are asleep - deadlock!\n\ngoroutine 1 [{state}]:\nmain.{goident}()",
      "all goroutines are asleep - deadlock! in {goident}",
      "Every goroutine is blocked: an unbuffered channel has no receiver, or a WaitGroup is never done.",
      ["Close the channel after the last send", "Call wg.Done() in a defer"], "go run -race .",
      ["all goroutines are asleep deadlock", "go channel deadlock fatal error"], ["deadlock!"], trace="go", weight=0.5),
    # -- rust ---------------------------------------------------------------------------
    F("rust", "e0432", "error[E0432]: unresolved import `{crate}::{rident}`",
      "error[E0432]: unresolved import `{crate}::{rident}`",
      "`{rident}` is not public in {crate}, moved, or behind a cargo feature that is not enabled.",
      ["cargo tree -e features -i {crate}", "Enable the feature in Cargo.toml", "Import it from its new module"], "cargo check",
      ["unresolved import {crate}", "rust e0432 feature not enabled"], ["E0432", "unresolved import"], trace="rust", weight=2.0),
    F("rust", "e0425", "error[E0425]: cannot find value `{rident}` in this scope",
      "error[E0425]: cannot find value `{rident}` in this scope",
      "`{rident}` is out of scope: declared in an inner block, misspelled, or missing a `use`.",
      ["Declare it before use or add the use statement"], "cargo check",
      ["cannot find value in this scope rust", "e0425 rust variable not found"], ["E0425"], trace="rust", weight=1.5),
    F("rust", "e0382", "error[E0382]: borrow of moved value: `{rident}`",
      "error[E0382]: borrow of moved value: `{rident}`",
      "`{rident}` was moved into a call or closure and then used again.",
      ["Borrow instead of moving: pass &{rident}", "Clone before the move when cheap"], "cargo check",
      ["borrow of moved value rust", "value used after move e0382"], ["E0382", "borrow of moved value"], trace="rust", weight=2.0),
    F("rust", "e0308", "error[E0308]: mismatched types\n expected `{rtype}`, found `{rtype2}`",
      "error[E0308]: mismatched types, expected `{rtype}` found `{rtype2}`",
      "The expression's type is {rtype2} where {rtype} is required.",
      ["Convert with .into(), .to_string() or as_str()"], "cargo check",
      ["mismatched types expected found rust", "e0308 expected string found str"], ["E0308", "mismatched types"], trace="rust", weight=1.5),
    F("rust", "e0599", "error[E0599]: no method named `{method}` found for struct `{rtype}` in the current scope",
      "error[E0599]: no method named `{method}` for `{rtype}`",
      "The method comes from a trait that is not in scope, or the type does not implement it.",
      ["Bring the trait into scope with use", "Check the docs of {rtype}"], "cargo check",
      ["no method named found for struct", "rust trait not in scope method"], ["E0599"], trace="rust", weight=1.5),
    F("rust", "e0277", "error[E0277]: the trait bound `{rtype}: {trait}` is not satisfied",
      "error[E0277]: `{rtype}: {trait}` is not satisfied",
      "{rtype} does not implement {trait}, which a generic bound requires.",
      ["#[derive({trait})] on {rtype}", "Enable the serde feature of the crate that defines it"], "cargo check",
      ["trait bound is not satisfied rust", "e0277 {trait} not implemented"], ["E0277", "trait bound"], trace="rust", weight=1.5),
    F("rust", "failed-select-version", "error: failed to select a version for the requirement `{crate} = \"^{ver}\"`",
      "cargo: failed to select a version for `{crate}`",
      "No published version of {crate} matches, or the lockfile pins an incompatible one.",
      ["cargo update -p {crate}", "cargo search {crate}"], "cargo build",
      ["failed to select a version for the requirement", "cargo dependency version not found"], ["failed to select a version"], weight=0.8),
    # -- shell --------------------------------------------------------------------------
    F("shell", "command-not-found", "bash: {cmd}: command not found",
      "bash: {cmd}: command not found",
      "{cmd} is not installed, or its directory is not on PATH in this shell (non-login shells skip ~/.profile).",
      ["command -v {cmd}", "Install {cmd}", "export PATH=\"$HOME/.local/bin:$PATH\""], "command -v {cmd}",
      ["{cmd} command not found", "command not found after install path", "bash command not found in ci"],
      ["command not found", "{cmd} not found"], aliases=["zsh: command not found: {cmd}"], weight=2.5),
    F("shell", "bad-interpreter", "bash: ./{shscript}.sh: /bin/{interp}^M: bad interpreter: No such file or directory",
      "bad interpreter ^M in {shscript}.sh (CRLF line endings)",
      "The script has Windows CRLF line endings, so the kernel looks for an interpreter named '{interp}\\r'.",
      ["sed -i 's/\\r$//' {shscript}.sh", "git config core.autocrlf input"], "file {shscript}.sh",
      ["bad interpreter no such file or directory", "script crlf line endings ^M"], ["bad interpreter"], weight=1.0),
    F("shell", "permission-denied", "sh: 1: ./{shscript}.sh: Permission denied",
      "Permission denied running ./{shscript}.sh",
      "The script lacks the executable bit, or the filesystem is mounted noexec.",
      ["chmod +x {shscript}.sh", "Or run it with bash {shscript}.sh"], "test -x {shscript}.sh",
      ["permission denied running script", "sh permission denied chmod"], ["Permission denied"], weight=1.0),
    F("shell", "syntax-error-token", "./{shscript}.sh: line {line}: syntax error near unexpected token `{tok}'",
      "syntax error near unexpected token `{tok}' in {shscript}.sh",
      "A bash-only construct runs under sh, or a missing then/do leaves `{tok}' unexpected.",
      ["shellcheck {shscript}.sh", "Run with bash, not sh"], "bash -n {shscript}.sh",
      ["syntax error near unexpected token", "bash script syntax error fi"], ["syntax error near unexpected token"], weight=0.8),
    F("shell", "make-no-rule", "make: *** No rule to make target '{target}', needed by '{target2}'.  Stop.",
      "make: No rule to make target '{target}'",
      "'{target}' is neither a file nor a rule: a renamed source file or a stale dependency file.",
      ["make clean", "Check the path of '{target}' in the Makefile"], "make -n",
      ["make no rule to make target", "makefile missing target needed by"], ["No rule to make target"], weight=1.0),
    F("shell", "env-no-such-file", "/usr/bin/env: ‘{interp}’: No such file or directory",
      "/usr/bin/env: '{interp}': No such file or directory",
      "The shebang names {interp}, which is not installed or not on PATH.",
      ["command -v {interp}", "Install {interp} or fix the shebang"], "command -v {interp}",
      ["usr bin env no such file or directory", "shebang interpreter not found"], ["/usr/bin/env"], weight=0.3),
    # -- git ----------------------------------------------------------------------------
    F("git", "push-rejected", "error: failed to push some refs to '{host}:{repo}.git'\nhint: Updates were rejected because the tip of your current branch is behind",
      "git push rejected: failed to push some refs to {repo}",
      "The remote branch has commits that the local branch does not.",
      ["git pull --rebase origin {branch}", "git push origin {branch}"], "git status -sb",
      ["failed to push some refs", "git push rejected behind remote"], ["failed to push some refs"], weight=1.5),
    F("git", "pathspec", "error: pathspec '{branch}' did not match any file(s) known to git",
      "error: pathspec '{branch}' did not match any file(s) known to git",
      "The branch exists only on the remote and was not fetched, or the name is misspelled.",
      ["git fetch origin", "git switch {branch}"], "git branch -a",
      ["pathspec did not match any files known to git", "git checkout branch not found"], ["pathspec", "did not match any file"], weight=1.5),
    F("git", "couldnt-find-remote-ref", "fatal: couldn't find remote ref {branch}",
      "fatal: couldn't find remote ref {branch}",
      "The branch does not exist on the remote (deleted, renamed or never pushed).",
      ["git ls-remote --heads origin", "Pull the right branch"], "git ls-remote --heads origin {branch}",
      ["couldn't find remote ref", "git pull remote branch missing"], ["couldn't find remote ref"], weight=1.2),
    F("git", "could-not-resolve-host", "fatal: unable to access 'https://{host}/{repo}.git/': Could not resolve host: {host}",
      "git: Could not resolve host {host}",
      "DNS does not resolve {host} from this network: a VPN, proxy or container DNS problem.",
      ["getent hosts {host}", "git config --global http.proxy http://proxy.{org}.internal:3128"], "git ls-remote https://{host}/{repo}.git",
      ["could not resolve host git clone", "git unable to access proxy dns"], ["Could not resolve host"], weight=1.2),
    F("git", "src-refspec", "error: src refspec {branch} does not match any",
      "error: src refspec {branch} does not match any",
      "No local branch {branch} exists yet, usually because nothing was committed.",
      ["git commit -m 'initial'", "git push -u origin HEAD"], "git show-ref",
      ["src refspec does not match any", "git push new repo refspec error"], ["src refspec"], weight=1.0),
    F("git", "unrelated-histories", "fatal: refusing to merge unrelated histories",
      "fatal: refusing to merge unrelated histories",
      "The two branches share no commit (a repo initialized separately on each side).",
      ["git pull origin main --allow-unrelated-histories"], "git log --oneline --graph -5",
      ["refusing to merge unrelated histories"], ["unrelated histories"], weight=0.1),
    # -- docker -------------------------------------------------------------------------
    F("docker", "pull-access-denied", "docker: Error response from daemon: pull access denied for {image}, repository does not exist or may require 'docker login'",
      "pull access denied for {image}",
      "The image name is wrong, private, or the registry session expired.",
      ["docker login {host}", "Check the image name and tag"], "docker pull {image}",
      ["pull access denied repository does not exist", "docker pull requires docker login"], ["pull access denied"], trace="docker", weight=1.5),
    F("docker", "checksum-not-found", "ERROR: failed to solve: failed to compute cache key: failed to calculate checksum of ref {hex}::{hex2}: \"/{target}\": not found",
      "COPY failed: \"/{target}\" not found in the build context",
      "'{target}' is outside the build context or excluded by .dockerignore.",
      ["Check .dockerignore for {target}", "Run docker build from the directory containing it"], "docker build .",
      ["failed to compute cache key not found", "docker copy file not found build context dockerignore"], ["failed to compute cache key"], trace="docker", weight=1.5),
    F("docker", "name-in-use", "docker: Error response from daemon: Conflict. The container name \"/{cname}\" is already in use by container \"{sha}\". You have to remove (or rename) that container to be able to reuse that name.",
      "container name \"/{cname}\" is already in use",
      "A stopped container with the same name still exists.",
      ["docker rm {cname}", "Or run with --rm next time"], "docker ps -a --filter name={cname}",
      ["container name already in use", "docker conflict remove container name"], ["already in use by container"], trace="docker", weight=1.2),
    F("docker", "manifest-not-found", "Error response from daemon: manifest for {image}:{tag} not found: manifest unknown: manifest unknown",
      "manifest for {image}:{tag} not found",
      "The tag {tag} does not exist for {image} (or not for this architecture).",
      ["List the tags on the registry", "Use an existing tag"], "docker pull {image}:{tag}",
      ["manifest unknown docker pull tag", "docker image tag not found"], ["manifest unknown"], trace="docker", weight=1.5),
    F("docker", "exec-not-found", "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"{cmd}\": executable file not found in $PATH: unknown",
      "OCI runtime: exec \"{cmd}\": executable file not found in $PATH",
      "The image does not contain {cmd}, or CMD uses shell syntax in exec form.",
      ["docker run --rm --entrypoint sh {image} -c 'command -v {cmd}'", "Install {cmd} in the Dockerfile"], "docker run --rm {image} {cmd} --version",
      ["executable file not found in path docker", "oci runtime create failed exec"], ["executable file not found in $PATH"], trace="docker", weight=1.2),
    F("docker", "port-allocated", "docker: Error response from daemon: driver failed programming external connectivity on endpoint {cname} ({hex}): Bind for 0.0.0.0:{port} failed: port is already allocated.",
      "Bind for 0.0.0.0 failed: port is already allocated ({cname})",
      "Another container or host process already publishes the port.",
      ["docker ps --filter publish={port}", "Stop the other container or publish another port"], "docker ps",
      ["port is already allocated docker", "bind failed port already allocated"], ["port is already allocated"], trace="docker", weight=0.8),
    # -- postgres -----------------------------------------------------------------------
    F("postgres", "relation-does-not-exist", "ERROR:  relation \"{table}\" does not exist\nLINE {n}: SELECT * FROM {table}",
      "relation \"{table}\" does not exist",
      "The table is in another schema not on search_path, the migration did not run, or it was created with quoted mixed case.",
      ["\\dt *.{table}", "SET search_path TO app, public;", "Run the pending migrations"], "psql -c '\\d {table}'",
      ["relation does not exist postgres", "table does not exist search path schema", "postgres relation {table} missing"],
      ["relation does not exist"], trace="sql", weight=2.5),
    F("postgres", "duplicate-key", "ERROR:  duplicate key value violates unique constraint \"{table}_{col}_key\"\nDETAIL:  Key ({col})=({val}) already exists.",
      "duplicate key value violates unique constraint \"{table}_{col}_key\"",
      "A row with the same {col} exists; after a bulk import the serial sequence can also lag behind max(id).",
      ["INSERT ... ON CONFLICT ({col}) DO NOTHING", "SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table};"], "psql -c 'SELECT count(*) FROM {table}'",
      ["duplicate key value violates unique constraint", "postgres sequence out of sync after import", "unique constraint violation insert"],
      ["duplicate key value", "unique constraint"], trace="sql", weight=2.5),
    F("postgres", "column-does-not-exist", "ERROR:  column \"{col}\" of relation \"{table}\" does not exist",
      "column \"{col}\" of relation \"{table}\" does not exist",
      "The column was renamed or the migration adding it was not applied; quoted identifiers are case-sensitive.",
      ["\\d {table}", "Apply the migration that adds {col}"], "psql -c '\\d {table}'",
      ["column does not exist postgres", "postgres column of relation missing"], ["column does not exist"], trace="sql", weight=2.0),
    F("postgres", "password-auth-failed", "FATAL:  password authentication failed for user \"{pguser}\"",
      "password authentication failed for user \"{pguser}\"",
      "The password is wrong, or pg_hba.conf requires scram-sha-256 while the password was stored as md5.",
      ["ALTER USER {pguser} WITH PASSWORD '...';", "Check pg_hba.conf and reload"], "psql -U {pguser} -c 'select 1'",
      ["password authentication failed for user", "postgres login fails docker password"], ["password authentication failed"], weight=1.0),
    F("postgres", "database-does-not-exist", "FATAL:  database \"{dbname}\" does not exist",
      "database \"{dbname}\" does not exist",
      "The database was never created on this server (the container initializes only POSTGRES_DB).",
      ["createdb {dbname}", "Set POSTGRES_DB={dbname}"], "psql -l",
      ["database does not exist postgres", "fatal database does not exist docker"], ["database does not exist"], weight=1.0),
    F("postgres", "fk-violation", "ERROR:  insert or update on table \"{table}\" violates foreign key constraint \"{table}_{col}_fkey\"\nDETAIL:  Key ({col})=({val}) is not present in table \"{table2}\".",
      "insert violates foreign key constraint \"{table}_{col}_fkey\"",
      "The referenced row in {table2} does not exist yet; the insert order is wrong.",
      ["Insert the parent row first", "Load both tables in one transaction with DEFERRABLE constraints"], "psql -c 'SELECT 1'",
      ["violates foreign key constraint", "postgres insert foreign key not present"], ["foreign key constraint"], trace="sql", weight=1.5),
    F("postgres", "not-null", "ERROR:  null value in column \"{col}\" of relation \"{table}\" violates not-null constraint",
      "null value in column \"{col}\" violates not-null constraint",
      "The insert does not set {col} and the column has no default.",
      ["Set a DEFAULT on {col}", "Pass the value in the insert"], "psql -c '\\d {table}'",
      ["null value violates not-null constraint", "postgres not null column insert"], ["not-null constraint"], trace="sql", weight=1.5),
    F("postgres", "permission-denied-table", "ERROR:  permission denied for table {table}",
      "permission denied for table {table}",
      "The role lacks privileges on {table}; tables created later are not covered by earlier GRANTs.",
      ["GRANT SELECT, INSERT, UPDATE ON {table} TO app;", "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ..."], "psql -c '\\dp {table}'",
      ["permission denied for table postgres", "grant privileges new tables"], ["permission denied for table"], trace="sql", weight=1.5),
    # -- java ---------------------------------------------------------------------------
    F("java", "class-not-found", "java.lang.ClassNotFoundException: {javaclass}",
      "ClassNotFoundException: {javaclass}",
      "The jar containing {javaclass} is not on the runtime classpath (a provided or test scope dependency).",
      ["mvn dependency:tree -Dincludes={group}", "Change the dependency scope to compile"], "mvn -q package",
      ["classnotfoundexception at runtime", "java class not found classpath jar"], ["ClassNotFoundException"], trace="java", weight=2.0),
    F("java", "no-class-def", "Exception in thread \"main\" java.lang.NoClassDefFoundError: {javapath}",
      "NoClassDefFoundError: {javapath}",
      "The class was present at compile time but not at run time: a missing jar or a failed static initializer.",
      ["Check the runtime classpath", "Look for an earlier ExceptionInInitializerError"], "java -cp target/classes Main",
      ["noclassdeffounderror java runtime", "class present at compile time missing at run time"], ["NoClassDefFoundError"], trace="java", weight=1.5),
    F("java", "npe-cannot-invoke", "java.lang.NullPointerException: Cannot invoke \"{javaclass}.{method}()\" because \"{var}\" is null",
      "NullPointerException: Cannot invoke {method}() because \"{var}\" is null",
      "{var} is null when {method}() is called: an injection that did not happen or a missing map entry.",
      ["Check where {var} is assigned", "Use Objects.requireNonNull early"], "mvn -q test",
      ["cannot invoke because is null", "java nullpointerexception helpful message"], ["NullPointerException"], trace="java", weight=2.0),
    F("java", "cannot-find-symbol", "[ERROR] {jclass}.java:[{line},{colno}] cannot find symbol\n  symbol:   class {jclass2}\n  location: class {jclass}",
      "cannot find symbol: class {jclass2}",
      "{jclass2} is not imported, or its module is missing from the dependencies.",
      ["Add the import for {jclass2}", "Add the dependency that provides it"], "mvn -q compile",
      ["cannot find symbol class maven compile", "java symbol not found import"], ["cannot find symbol"], trace="java", weight=1.5),
    F("java", "unsupported-class-version", "java.lang.UnsupportedClassVersionError: {javaclass} has been compiled by a more recent version of the Java Runtime (class file version {cfv}.0), this version of the Java Runtime only recognizes class file versions up to {cfv2}.0",
      "UnsupportedClassVersionError for {javaclass}",
      "The class was compiled for a newer Java than the runtime.",
      ["java -version", "Set maven.compiler.release to the runtime's version"], "java -version",
      ["compiled by a more recent version of the java runtime", "class file version java mismatch"], ["UnsupportedClassVersionError"], trace="java", weight=0.8),
    F("java", "gradle-could-not-find", "Could not resolve all files for configuration ':{conf}'.\n> Could not find {group}:{artifact}:{ver}.",
      "Gradle: Could not find {group}:{artifact}",
      "The artifact is not in any declared repository (a private repository missing, or a typo in the coordinates).",
      ["Add the repository to settings.gradle", "./gradlew --refresh-dependencies"], "./gradlew dependencies --configuration {conf}",
      ["gradle could not resolve all files for configuration", "gradle could not find dependency repository"], ["Could not resolve all files"], weight=1.5),
    # -- kotlin -------------------------------------------------------------------------
    F("kotlin", "unresolved-reference", "e: file://{ktfile}:{line}:{colno} Unresolved reference: {ident}",
      "Kotlin: Unresolved reference: {ident}",
      "{ident} is not imported, or it comes from a plugin (kapt/ksp, synthetic views) that is not applied.",
      ["Add the import", "Apply the plugin that generates {ident}"], "./gradlew compileKotlin",
      ["kotlin unresolved reference", "unresolved reference after gradle sync"], ["Unresolved reference"], weight=2.0),
    F("kotlin", "lateinit", "kotlin.UninitializedPropertyAccessException: lateinit property {var} has not been initialized",
      "lateinit property {var} has not been initialized",
      "{var} is read before it is assigned (lifecycle order).",
      ["Initialize {var} in init or onCreate", "Check ::{var}.isInitialized"], "./gradlew test",
      ["lateinit property has not been initialized", "kotlin uninitialized property access"], ["lateinit"], trace="java", weight=1.5),
    F("kotlin", "type-mismatch", "e: {ktfile}: ({line}, {colno}): Type mismatch: inferred type is {kttype} but {kttype2} was expected",
      "Kotlin type mismatch: inferred type is {kttype} but {kttype2} was expected",
      "The expression's type is {kttype} where {kttype2} is expected (often nullability).",
      ["Handle null with ?: or !!", "Convert the value"], "./gradlew compileKotlin",
      ["type mismatch inferred type but was expected", "kotlin nullable type mismatch"], ["Type mismatch"], weight=1.0),
    # -- ruby, dotnet, cpp --------------------------------------------------------------
    F("ruby", "cannot-load-such-file", "cannot load such file -- {rubylib} (LoadError)",
      "LoadError: cannot load such file -- {rubylib}",
      "The gem providing {rubylib} is not in the bundle, or the code runs without bundle exec.",
      ["bundle add {gem}", "bundle exec ruby app.rb"], "bundle exec ruby -e 'require \"{rubylib}\"'",
      ["cannot load such file ruby", "ruby loaderror bundle exec"], ["LoadError"], weight=1.0),
    F("ruby", "undefined-method-nil", "undefined method `{method}' for nil:NilClass (NoMethodError)",
      "NoMethodError: undefined method `{method}' for nil",
      "The receiver is nil: a find_by returned nil or a missing param.",
      ["Use &. or check presence", "Raise early with find_by!"], "bundle exec rspec",
      ["undefined method for nil nilclass", "ruby nomethoderror nil"], ["NoMethodError"], weight=1.0),
    F("ruby", "uninitialized-constant", "uninitialized constant {rconst} (NameError)",
      "NameError: uninitialized constant {rconst}",
      "Zeitwerk cannot map the file name to {rconst}, or the gem is not required.",
      ["bin/rails zeitwerk:check", "Rename the file to match the constant"], "bin/rails zeitwerk:check",
      ["uninitialized constant nameerror rails", "zeitwerk constant not found"], ["uninitialized constant"], weight=1.0),
    F("dotnet", "cs0246", "error CS0246: The type or namespace name '{cstype}' could not be found (are you missing a using directive or an assembly reference?)",
      "CS0246: The type or namespace name '{cstype}' could not be found",
      "The project lacks the package or project reference that defines {cstype}, or a using directive.",
      ["dotnet add package {nupkg}", "Add the using directive"], "dotnet build",
      ["type or namespace name could not be found", "cs0246 missing using directive"], ["CS0246"], weight=1.0),
    F("dotnet", "nu1101", "error NU1101: Unable to find package {nupkg}. No packages exist with this id in source(s): nuget.org",
      "NU1101: Unable to find package {nupkg}",
      "{nupkg} is on a private feed missing from nuget.config.",
      ["dotnet nuget add source https://nuget.{org}.internal/v3/index.json -n {org}"], "dotnet restore",
      ["unable to find package nuget", "nu1101 private feed"], ["NU1101"], weight=0.8),
    F("cpp", "no-such-header", "fatal error: {header}: No such file or directory\n compilation terminated.",
      "fatal error: {header}: No such file or directory",
      "The development package providing {header} is not installed, or the include path is missing.",
      ["Install the -dev package that ships {header}", "pkg-config --cflags {proj}"], "echo '#include <{header}>' | cc -E -x c - >/dev/null",
      ["fatal error no such file or directory header", "missing header file compile"], ["No such file or directory"], weight=1.0),
    F("cpp", "undefined-reference", "/usr/bin/ld: {target}: in function `main':\nundefined reference to `{cppident}'\ncollect2: error: ld returned 1 exit status",
      "undefined reference to `{cppident}'",
      "The object or library defining {cppident} is not linked, or the link order is wrong.",
      ["Add the library with -l", "Put libraries after the objects that use them"], "make",
      ["undefined reference to linker error", "ld returned 1 exit status"], ["undefined reference", "collect2"], weight=1.0),
]

# Extra slots some templates use that are neither volatile nor worth a vocabulary of their own.
GENERATORS.update({
    "op": lambda r, s: r.choice(["+", "-", "*", "/", "+=", "%"]),
    "what": lambda r, s: r.choice(["start", "continuation"]),
    "major": lambda r, s: str(r.choice([16, 17, 18, 19, 4, 5, 7, 8, 14, 15])),
    "state": lambda r, s: r.choice(["chan receive", "chan send", "semacquire", "select"]),
    "javapath": lambda r, s: s["javaclass"].replace(".", "/") if "javaclass" in s else _javaclass(r, s).replace(".", "/"),
    "org": lambda r, s: ORGS(r),
})


# --- article text ------------------------------------------------------------------------

SYMPTOM_LEADS = {
    "python": ["Running the script stops with", "pytest fails during collection with", "The Django app crashes at start-up with",
               "A Jupyter cell raises", "The Celery worker dies with"],
    "node": ["npm start prints", "The Next.js build fails with", "Jest fails the suite with", "The Express server crashes with"],
    "typescript": ["tsc reports", "The IDE shows no error but the CI type check fails with", "vite build fails with"],
    "go": ["go build fails with", "go test stops with", "The service panics in production with"],
    "rust": ["cargo build fails with", "cargo test does not compile:", "rust-analyzer and cargo both report"],
    "shell": ["The CI step exits 127 with", "Running the script prints", "A cron job mails"],
    "git": ["The push from CI fails with", "git prints", "Checking out the branch fails with"],
    "docker": ["docker run fails with", "docker compose up stops with", "The image build fails with"],
    "postgres": ["The migration fails with", "The application logs", "psql prints"],
    "java": ["The Spring Boot app fails to start with", "mvn package fails with", "The job crashes with"],
    "kotlin": ["The Android build fails with", "./gradlew build prints", "The app crashes with"],
    "ruby": ["bundle exec rails s fails with", "The rspec run fails with"],
    "dotnet": ["dotnet build fails with", "The pipeline restore step fails with"],
    "cpp": ["The build fails at link time with", "make stops with"],
}
SYMPTOM_TAILS = [
    "It worked yesterday and nothing obvious changed.", "It fails only in CI; locally it passes.",
    "It happens on a fresh clone, not on the machine that set the project up.", "Retrying gives the same error.",
    "It started right after a dependency upgrade.", "Only one developer's machine is affected.",
    "It happens inside the container but not on the host.", "The error appears intermittently under load.",
]
CONTEXTS = {
    "python": ["python 3.12 with a venv created by uv", "poetry-managed project on python 3.11", "conda environment on an M2 Mac",
               "Docker image based on python:3.12-slim", "pyenv with several interpreters installed", "GitHub Actions with actions/setup-python"],
    "node": ["node 20 with npm 10", "pnpm workspace monorepo", "node 18 on Alpine in Docker", "Next.js 14 app built on Vercel", "yarn berry with PnP"],
    "typescript": ["TypeScript 5.4 with moduleResolution node16", "a Vite React app", "a monorepo with project references"],
    "go": ["go 1.22 with modules", "a multi-module repository using go.work", "cross-compiling with GOOS=linux"],
    "rust": ["rust 1.78 stable", "a cargo workspace with several crates", "a tokio-based service"],
    "shell": ["bash 5 on Ubuntu 24.04", "GitHub Actions ubuntu-latest runner", "a script copied from a Windows machine", "macOS with zsh as login shell"],
    "git": ["a fresh clone in CI", "a fork with an upstream remote", "git 2.43 behind a corporate proxy"],
    "docker": ["Docker Desktop on macOS", "docker compose v2 on a Linux VM", "BuildKit with a multi-stage Dockerfile", "a GitLab CI runner with docker-in-docker"],
    "postgres": ["PostgreSQL 16 in Docker", "a managed Postgres on RDS", "Django migrations against Postgres 15", "a bulk import with COPY"],
    "java": ["Spring Boot 3 on Java 21", "a Maven multi-module build", "Gradle 8 with the Kotlin DSL", "a fat jar built with the shade plugin"],
    "kotlin": ["Android Gradle Plugin 8", "Kotlin 2.0 with K2", "a Ktor server"],
    "ruby": ["Rails 7.1 on Ruby 3.3", "a Sinatra app with bundler"],
    "dotnet": [".NET 8 SDK on Linux", "an Azure DevOps pipeline"],
    "cpp": ["gcc 13 with CMake", "a Makefile build on Debian"],
}
FAILED = [
    "Reinstalling every dependency from scratch", "Restarting the IDE and clearing its caches", "Upgrading the tool to the latest version",
    "Running the command with sudo", "Deleting the lockfile", "Rebuilding the container without cache", "Rebooting the machine",
    "Copying the configuration from a colleague's machine",
]
BOUNDARIES = [
    "Not for Windows-native shells; WSL behaves like Linux here.", "Does not apply when the same error comes from a network timeout.",
    "Only for projects that manage dependencies with a lockfile.", "Not the cause when the error appears only under high load.",
    "Applies to self-hosted runners as well as hosted ones.",
]
NODE_ENV = {
    "python": ["python>=3.8", "pip", "python>=3.10", "uv", "poetry"], "node": ["node>=18", "npm", "pnpm", "yarn"],
    "typescript": ["typescript>=5", "npm"], "go": ["go>=1.21", "go-modules"], "rust": ["rust>=1.70", "cargo"],
    "java": ["java>=17", "maven", "gradle"], "kotlin": ["kotlin>=1.9", "gradle"], "ruby": ["ruby>=3.0", "bundler"],
    "dotnet": ["dotnet>=8", "nuget"], "postgres": ["postgres>=13"], "docker": ["docker"], "shell": ["bash"], "git": ["git"], "cpp": ["gcc"],
}

_SLUG_BAD = re.compile(r"[^a-z0-9._-]+")


def slugify(text: str) -> str:
    return _SLUG_BAD.sub("-", text.lower()).strip("-._")


def render(template: str, slots: Slots) -> str:
    return template.format_map(slots)


@dataclass
class Meta:
    """What a query needs to know about a generated node."""

    index: int
    id: str
    ecosystem: str
    family: int
    slots: dict[str, str]  # identity slots of the error
    error: str

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id, "ecosystem": self.ecosystem, "family": self.family,
                "slots": self.slots, "error": self.error}


class Corpus:
    """Generates node documents deterministically from a seed."""

    MAX_MISSES = 25  # collisions in a row before a family is retired

    def __init__(self, seed: int = 7):
        self.seed = seed

    def generate(self, count: int) -> Iterator[tuple[int, dict[str, Any], Meta]]:
        rng = random.Random(f"corpus:{self.seed}")
        active = list(range(len(FAMILIES)))
        misses = [0] * len(FAMILIES)
        seen_errors: set[tuple[str, tuple[str, ...]]] = set()
        seen_ids: set[str] = set()
        next_suffix: dict[str, int] = {}  # per id base: every suffix below it is taken
        cum = list(accumulate(FAMILIES[i].weight for i in active))
        index = 0
        while index < count:
            if not active:
                raise RuntimeError(f"every family is exhausted after {index} nodes")
            family_index = rng.choices(active, cum_weights=cum)[0]
            family = FAMILIES[family_index]
            slots = Slots(rng)
            error = render(family.error, slots)
            key = (signature_hash(error), tuple(quoted_values(error)))
            if key in seen_errors:
                misses[family_index] += 1
                if misses[family_index] >= self.MAX_MISSES:
                    active.remove(family_index)
                    cum = list(accumulate(FAMILIES[i].weight for i in active))
                continue
            misses[family_index] = 0
            seen_errors.add(key)
            document = self._document(rng, family, slots, error, index, seen_ids, next_suffix)
            meta = Meta(index=index, id=document["id"], ecosystem=family.ecosystem, family=family_index,
                        slots={k: slots[k] for k in family.identity}, error=error)
            yield index, document, meta
            index += 1

    def _document(self, rng: random.Random, family: Family, slots: Slots, error: str, index: int,
                  seen_ids: set[str], next_suffix: dict[str, int]) -> dict[str, Any]:
        eco = family.ecosystem
        name = "-".join(slugify(slots[k]) for k in family.identity[:2] if slugify(slots[k]))
        base = f"{family.key}-{name}"[:90].strip("-._") if name else family.key
        node_id = f"{eco}/{base}"
        if node_id in seen_ids:  # the first free suffix, as a scan from 2 finds it, without rescanning (quadratic at 1M)
            suffix = next_suffix.get(node_id, 2)
            while f"{node_id}-{suffix}" in seen_ids:
                suffix += 1
            next_suffix[node_id] = suffix + 1
            node_id = f"{node_id}-{suffix}"
        seen_ids.add(node_id)
        first_line = error.splitlines()[0]
        symptom = f"{rng.choice(SYMPTOM_LEADS[eco])} `{first_line[:300]}`. {rng.choice(SYMPTOM_TAILS)}"
        context = f"Seen with {rng.choice(CONTEXTS[eco])}; {rng.choice(CONTEXTS[eco])} behaves the same."
        fixes = [render(step, slots) for step in family.fixes]
        verify = {"command": render(family.verify, slots), "expected": "exit 0"}
        roll = rng.random()
        if roll < 0.10:
            solutions: list[dict[str, Any]] = []
        elif roll < 0.30:
            syspkg = SYSPKG.get(eco, SYSPKG_DEFAULT)(rng)
            solutions = [
                {"id": "linux", "title": "Fix on Linux (apt)", "env": ["linux"],
                 "fix": [f"sudo apt-get update && sudo apt-get install -y {syspkg}", *fixes], "verify": verify},
                {"id": "macos", "title": "Fix on macOS (Homebrew)", "env": ["macos"],
                 "fix": [f"brew install {syspkg.replace('-dev', '')}", *fixes], "verify": verify},
            ]
        else:
            env = [rng.choice(NODE_ENV[eco])] if rng.random() < 0.3 else []
            solutions = [{"id": "fix", "title": render(family.title, slots)[:200], "env": env, "fix": fixes, "verify": verify}]
        signature: dict[str, Any] = {"error": error}
        if rng.random() < 0.6:
            signature["environment"] = [rng.choice(NODE_ENV[eco])]
        if family.aliases and rng.random() < 0.4:
            signature["aliases"] = [render(a, slots) for a in family.aliases]
        content: dict[str, Any] = {
            "symptom": symptom,
            "context": context,
            "root_cause": render(family.cause, slots),
            "solutions": solutions,
            "failed_attempts": rng.sample(FAILED, rng.choice([0, 0, 1, 2])),
        }
        if rng.random() < 0.4:
            content["boundaries"] = [rng.choice(BOUNDARIES)]
        return {"id": node_id, "ecosystem": eco, "title": render(family.title, slots)[:400],
                "signature": signature, "content": content}


# --- queries -----------------------------------------------------------------------------

OSES = ["macos-15", "macos-14", "ubuntu-24.04", "ubuntu-22.04", "debian-12", "alpine-3.20", "fedora-40", "windows-11", "wsl"]
RUNTIMES = {
    "python": ["python-3.9", "python-3.11", "python-3.12", "python-3.13"], "node": ["node-18", "node-20", "node-22"],
    "typescript": ["node-20", "typescript-5.4"], "go": ["go-1.21", "go-1.22", "go-1.23"], "rust": ["rust-1.78", "rust-1.81"],
    "java": ["java-17", "java-21"], "kotlin": ["kotlin-2.0", "java-17"], "ruby": ["ruby-3.3"], "dotnet": ["dotnet-8"],
    "postgres": ["postgres-16", "postgres-15"], "docker": ["docker-27"], "shell": ["bash-5.2", "zsh-5.9"], "git": ["git-2.43"], "cpp": ["gcc-13"],
}
PKG = {"python": ["pip", "uv", "poetry"], "node": ["npm", "pnpm", "yarn"], "typescript": ["npm"], "go": ["go-modules"],
       "rust": ["cargo"], "java": ["maven", "gradle"], "kotlin": ["gradle"], "ruby": ["bundler"], "dotnet": ["nuget"], "cpp": ["apt"]}
LOG_PREFIXES = ["##[error]", "E   ", "remote: ", "[ERROR] ", "{ts} ERROR ", "{ts} [main] ERROR ", "\x1b[31m", "stderr: ", "#12 0.532 "]
PROMPTS = {
    "python": ["pip install -r requirements.txt", "python manage.py migrate", "pytest -q"],
    "node": ["npm ci", "npm run build", "pnpm install --frozen-lockfile"], "typescript": ["npx tsc --noEmit", "npm run typecheck"],
    "go": ["go build ./...", "go test ./..."], "rust": ["cargo build --release", "cargo test"],
    "shell": ["make build", "./scripts/ci.sh", "bash deploy.sh"], "git": ["git push origin HEAD", "git pull", "git clone --depth 1 $REPO"],
    "java": ["./gradlew build", "mvn -B package"], "kotlin": ["./gradlew assembleDebug"], "ruby": ["bundle install", "bin/rails db:migrate"],
    "dotnet": ["dotnet restore", "dotnet build -c Release"], "cpp": ["make -j4", "cmake --build build"],
    "postgres": ["psql -f migrate.sql"], "docker": ["docker compose up -d", "docker run --rm app"],
}
NONSENSE = "zu qua vex plo nix tarb gliv morp snee krad fump yolt wib drax quor blen thox vrim zelk fnop".split()
NONMATCH_FIXED = [
    "@@@ ### %%%", "???", "--- ---", "エラー 接続 失敗 再試行", "ошибка подключения к серверу", "🙂🙃",
]


def _ts(rng: random.Random) -> str:
    return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z"


def env_for(rng: random.Random, ecosystem: str) -> str:
    parts = [rng.choice(OSES)]
    if ecosystem in RUNTIMES:
        parts.append(rng.choice(RUNTIMES[ecosystem]))
    if ecosystem in PKG and rng.random() < 0.7:
        parts.append(rng.choice(PKG[ecosystem]))
    if rng.random() < 0.2:
        parts.append(rng.choice(["arm64", "x86_64", "docker", "ci"]))
    return ",".join(parts)


def _traceback(rng: random.Random, kind: str, ecosystem: str, slots: Slots, error: str) -> str:
    """`error` as it appears in a real multi-line log, with fresh frames around it."""
    if kind == "python":
        frames = []
        for _ in range(rng.randint(2, 5)):
            file = _pyfile(rng, slots)
            frames.append(f'  File "{file}", line {rng.randint(1, 900)}, in {rng.choice(["<module>", VERBS(rng) + "_" + NOUNS(rng), "wrapper", "__call__", "main"])}\n'
                          f"    {rng.choice(['return func(*args, **kwargs)', 'import ' + slots.get('pymod', NOUNS(rng)), 'result = ' + VERBS(rng) + '_' + NOUNS(rng) + '(data)', 'self.' + NOUNS(rng) + ' = ' + NOUNS(rng) + '[key]'])}")
        return "Traceback (most recent call last):\n" + "\n".join(frames) + "\n" + error
    if kind == "node":
        frames = [f"    at {rng.choice(['Object.<anonymous>', 'Module._compile', _camel(VERBS(rng), NOUNS(rng)), 'processTicksAndRejections', 'async Promise.all'])} ({_jsfile(rng, slots)}:{rng.randint(1, 500)}:{rng.randint(1, 80)})"
                  for _ in range(rng.randint(3, 7))]
        node_line = f"\n\nNode.js v{rng.choice(['18.19.0', '20.11.1', '22.3.0'])}" if rng.random() < 0.5 else ""
        return f"{_jsfile(rng, slots)}:{rng.randint(1, 400)}\n{error}\n" + "\n".join(frames) + node_line
    if kind == "go":
        frames = [f"{NOUNS(rng).replace('_', '')}.{_pascal(VERBS(rng), NOUNS(rng))}(...)\n\t/home/{USERS(rng)}/go/src/{_gofile(rng, slots)}:{rng.randint(1, 600)} +0x{_hex(rng, 3)}"
                  for _ in range(rng.randint(2, 4))]
        return f"# {slots.get('gomod', 'example.com/' + NOUNS(rng))}\n{error}\n" + "\n".join(frames) + "\nexit status 2"
    if kind == "rust":
        line = rng.randint(2, 300)
        return (f"   Compiling {slots.get('crate', NOUNS(rng))} v{_ver(rng, slots)} (/home/{USERS(rng)}/{NOUNS(rng)})\n{error}\n"
                f"  --> {_rsfile(rng, slots)}:{line}:{rng.randint(1, 60)}\n   |\n{line} |     let {NOUNS(rng)} = {VERBS(rng)}_{NOUNS(rng)}(&ctx)?;\n   |         ^^^^^^\n\n"
                f"error: could not compile `{NOUNS(rng)}` (bin \"{NOUNS(rng)}\") due to {rng.randint(1, 4)} previous errors")
    if kind == "java":
        frames = [f"\tat com.{ORGS(rng)}.{NOUNS(rng)}.{_pascal(NOUNS(rng), SUFFIXES(rng))}.{_camel(VERBS(rng), NOUNS(rng))}({_pascal(NOUNS(rng))}.java:{rng.randint(1, 900)})"
                  for _ in range(rng.randint(3, 8))]
        return error + "\n" + "\n".join(frames) + f"\n\t... {rng.randint(5, 60)} more"
    if kind == "sql":
        return (f"{_ts(rng)} [{rng.randint(100, 9999)}] {rng.choice(['app', 'postgres', 'worker'])}@{NOUNS(rng)} {error}\n"
                f"{_ts(rng)} [{rng.randint(100, 9999)}] STATEMENT:  {rng.choice(['INSERT INTO', 'UPDATE', 'SELECT * FROM'])} {slots.get('table', NOUNS(rng) + 's')} ...")
    if kind == "docker":
        step = rng.randint(2, 12)
        return (f"#{step} [{rng.randint(1, 5)}/{rng.randint(6, 9)}] RUN {rng.choice(['npm ci', 'pip install -r requirements.txt', 'go build ./...', 'make'])}\n"
                f"#{step} {rng.random():.3f} ...\n{error}\n------\nDockerfile:{rng.randint(3, 40)}\n------")
    prompt = f"$ {rng.choice(PROMPTS.get(ecosystem, PROMPTS['shell']))}"
    return f"{prompt}\n{rng.choice(['Running...', '+ set -euo pipefail', 'Step 4/9', ''])}\n{error}\nError: Process completed with exit code {rng.choice([1, 2, 127, 128])}."


def _log_prefix(rng: random.Random, text: str) -> str:
    prefix = rng.choice(LOG_PREFIXES).replace("{ts}", _ts(rng))
    suffix = "\x1b[0m" if prefix.startswith("\x1b") else ""
    return prefix + text + suffix


def _limit_words(text: str, low: int, high: int, rng: random.Random) -> str:
    words = text.split()
    if len(words) > high:
        start = rng.randint(0, len(words) - high)
        words = words[start:start + high]
    return " ".join(words) if len(words) >= low else text


KIND_SHARES = [  # (kind, share of the queries)
    ("error_new_values", 0.24),
    ("error_new_name", 0.10),
    ("traceback", 0.18),
    ("natural", 0.20),
    ("short", 0.16),
    ("nomatch", 0.12),
]


def make_queries(metas: list[Meta], *, seed: int, count: int, tag: str = "queries") -> list[dict[str, Any]]:
    """`count` queries, spread over KIND_SHARES, drawn from the nodes in `metas` (shuffled, deterministic).

    Each query: kind, q, env (or None), ecosystem (or None) and, when one node is the
    right answer, `expect` (its id).
    """
    rng = random.Random(f"{tag}:{seed}:{count}")
    kinds: list[str] = []
    for kind, share in KIND_SHARES:
        kinds += [kind] * round(share * count)
    while len(kinds) < count:
        kinds.append("natural")
    kinds = kinds[:count]
    rng.shuffle(kinds)
    queries = []
    for position, kind in enumerate(kinds):
        meta = metas[position % len(metas)]
        family = FAMILIES[meta.family]
        slots = Slots(rng, dict(meta.slots))
        expect = None
        if kind == "error_new_values":
            q = render(family.error, slots)
            expect = meta.id
            if rng.random() < 0.35:
                q = _log_prefix(rng, q)
        elif kind == "error_new_name":
            changed = rng.choice(family.identity) if family.identity else None
            if changed:
                old = slots.pop(changed)
                for _ in range(5):
                    slots.pop(changed, None)
                    if slots[changed] != old:
                        break
            q = render(family.error, slots)
        elif kind == "traceback":
            q = _traceback(rng, family.trace, family.ecosystem, slots, render(family.error, slots))
            expect = meta.id
        elif kind == "natural":
            q = _limit_words(render(rng.choice(family.phrases), slots), 3, 8, rng)
        elif kind == "short":
            q = _limit_words(render(rng.choice(family.short), slots), 1, 3, rng)
        else:
            q = (rng.choice(NONMATCH_FIXED) if rng.random() < 0.2 else
                 " ".join("".join(rng.sample(NONSENSE, 2)) for _ in range(rng.randint(2, 5))))
        env = env_for(rng, meta.ecosystem) if rng.random() < 0.4 else None
        ecosystem = None
        if rng.random() < 0.25:
            ecosystem = meta.ecosystem if rng.random() < 0.8 else rng.choice([f.ecosystem for f in FAMILIES])
        queries.append({"kind": kind, "q": q, "env": env, "ecosystem": ecosystem, "expect": expect,
                        "source": meta.id})
    return queries
