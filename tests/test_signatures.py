"""Error-signature normalization: real messages, value-only variations, properties.

The signature hash is the strongest retrieval signal, so two occurrences of one error that
differ only in values (quoted names, paths, line numbers, versions, addresses, ports, users,
timestamps, ids) must normalize alike, and different errors must stay different. The inputs
below are copied from what the tools print, including their odd spacing.
"""

from __future__ import annotations

import re
import string
import uuid
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowmesh_mcp.core.normalize import (
    NORMALIZER_VERSION,
    normalize_signature,
    quoted_values,
    signature_hash,
)

ESC = "\x1b"

# ----------------------------------------------------------------------------------------
# Real messages, one per tool, with their pinned normalized form.

PY_MODULE_NOT_FOUND = """\
Traceback (most recent call last):
  File "/home/bob/proj/app.py", line 3, in <module>
    import requests
ModuleNotFoundError: No module named 'requests'"""

NODE_CANNOT_FIND_MODULE = """\
node:internal/modules/cjs/loader:1145
  throw err;
  ^

Error: Cannot find module 'express'
Require stack:
- /app/server.js
    at Module._resolveFilename (node:internal/modules/cjs/loader:1142:15)
    at Object.<anonymous> (/app/server.js:3:17)
    at node:internal/main/run_main_module:28:49 {
  code: 'MODULE_NOT_FOUND',
  requireStack: [ '/app/server.js' ]
}

Node.js v20.11.1"""

GO_PANIC = """\
panic: runtime error: index out of range [5] with length 3

goroutine 1 [running]:
main.main()
\t/tmp/x/main.go:8 +0x1d
exit status 2"""

RUST_BORROW = """\
error[E0382]: borrow of moved value: `v`
 --> src/main.rs:4:20
  |
2 |     let v = vec![1, 2, 3];
  |         - move occurs because `v` has type `Vec<i32>`, which does not implement the `Copy` trait
3 |     let w = v;
  |             - value moved here
4 |     println!("{:?}", v);
  |                      ^ value borrowed here after move"""

EXACT = [
    # Python
    ("ModuleNotFoundError: No module named 'requests'", "modulenotfounderror: no module named '<*>'"),
    (
        PY_MODULE_NOT_FOUND,
        "traceback (most recent call last):\n"
        'file "<*>", line <n>, in <module>\n'
        "import requests\n"
        "modulenotfounderror: no module named '<*>'",
    ),
    (
        'Traceback (most recent call last):\n  File "/app/main.py", line 12, in <module>\n'
        '    print(d["missing"])\n          ~^^^^^^^^^^^\nKeyError: \'missing\'',
        'traceback (most recent call last):\nfile "<*>", line <n>, in <module>\nprint(d["<*>"])\n^\n'
        "keyerror: '<*>'",
    ),
    (
        "ImportError: cannot import name 'foo' from partially initialized module 'bar' "
        "(most likely due to a circular import) (/app/bar.py)",
        "importerror: cannot import name '<*>' from partially initialized module '<*>' "
        "(most likely due to a circular import) (<path>)",
    ),
    (
        "error: externally-managed-environment\n\n× This environment is externally managed\n"
        "╰─> To install Python packages system-wide, try apt install\n"
        "    See /usr/share/doc/python3.12/README.venv for more information.\n"
        "hint: See PEP 668 for the detailed specification.",
        "error: externally-managed-environment\n× this environment is externally managed\n"
        "╰─> to install python packages system-wide, try apt install\n"
        "see <path> for more information.\nhint: see pep <n> for the detailed specification.",
    ),
    (
        "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
        "unable to get local issuer certificate (_ssl.c:1006)",
        "ssl.sslcertverificationerror: [ssl: certificate_verify_failed] certificate verify failed: "
        "unable to get local issuer certificate (<path>:<n>)",
    ),
    (
        "requests.exceptions.SSLError: HTTPSConnectionPool(host='pypi.org', port=443): Max retries "
        "exceeded with url: /simple/requests/ (Caused by SSLError(SSLCertVerificationError(1, "
        "'[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer "
        "certificate (_ssl.c:1006)')))",
        "requests.exceptions.sslerror: httpsconnectionpool(host='<*>', port=<n>): max retries "
        "exceeded with url: <path> (caused by sslerror(sslcertverificationerror(<n>, '<*>')))",
    ),
    (
        "python: can't open file '/app/x.py': [Errno 2] No such file or directory",
        "python: can't open file '<*>': [errno <n>] no such file or directory",
    ),
    (
        "ValueError: invalid literal for int() with base 10: b'abc'",
        "valueerror: invalid literal for int() with base <n>: b'<*>'",
    ),
    # node / npm
    (
        NODE_CANNOT_FIND_MODULE,
        "node:internal/modules/cjs/loader:<n>\nthrow err;\n^\nerror: cannot find module '<*>'\n"
        "require stack:\n- <path>\nat module._resolvefilename (node:internal/modules/cjs/loader:<n>:<n>)\n"
        "at object.<anonymous> (<path>:<n>:<n>)\nat node:internal/main/run_main_module:<n>:<n> {\n"
        "code: '<*>',\nrequirestack: [ '<*>' ]\n}\nnode.js <ver>",
    ),
    (
        "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\nnpm ERR!\n"
        "npm ERR! While resolving: my-app@0.1.0\nnpm ERR! Found: react@18.2.0\n"
        'npm ERR! peer react@"^17.0.0" from react-dom@17.0.2\n'
        "npm ERR! A complete log of this run can be found in: "
        "/home/bob/.npm/_logs/2024-05-01T10_11_12_123Z-debug-0.log",
        "npm err! code eresolve\nnpm err! eresolve unable to resolve dependency tree\nnpm err!\n"
        "npm err! while resolving: my-app@<ver>\nnpm err! found: react@<ver>\n"
        'npm err! peer react@"<*>" from react-dom@<ver>\n'
        "npm err! a complete log of this run can be found in: <path>",
    ),
    (
        "Error [ERR_REQUIRE_ESM]: require() of ES Module /app/node_modules/node-fetch/src/index.js "
        "from /app/x.js not supported.",
        "error [err_require_esm]: require() of es module <path> from <path> not supported.",
    ),
    (
        "Error: listen EADDRINUSE: address already in use :::3000",
        "error: listen eaddrinuse: address already in use :::<n>",
    ),
    ("connect ECONNREFUSED 127.0.0.1:5432", "connect econnrefused <ip>:<n>"),
    ("AxiosError: Request failed with status code 404", "axioserror: request failed with status code 404"),
    # Go
    (
        "go: cannot find main module, but found .git/config in /home/bob/proj\n"
        "\tto create a module there, run:\n\tgo mod init",
        "go: cannot find main module, but found .git/config in <path>\n"
        "to create a module there, run:\ngo mod init",
    ),
    (
        GO_PANIC,
        "panic: runtime error: index out of range [<n>] with length <n>\ngoroutine <n> [running]:\n"
        "main.main()\n<path>:<n> +<addr>\nexit status 2",
    ),
    ("./main.go:8:2: undefined: foo", "<path>:<n>:<n>: undefined: '<*>'"),
    ('./main.go:4:2: imported and not used: "fmt"', '<path>:<n>:<n>: imported and not used: "<*>"'),
    # Rust
    (
        RUST_BORROW,
        "error[e0382]: borrow of moved value: `<*>`\n--> <path>:<n>:<n>\n|\n"
        "<n> | let v = vec![<n>, <n>, <n>];\n"
        "| - move occurs because `<*>` has type `<*>`, which does not implement the `<*>` trait\n"
        "<n> | let w = v;\n| - value moved here\n<n> | println!(\"<*>\", v);\n"
        "| ^ value borrowed here after move",
    ),
    (
        "thread 'main' panicked at src/main.rs:2:5:\nindex out of bounds: the len is 3 but the index is 5",
        "thread '<*>' panicked at <path>:<n>:<n>:\nindex out of bounds: the len is <n> but the index is <n>",
    ),
    # shell and git
    ("/usr/bin/env: ‘bash\r’: No such file or directory", "<path>: ‘<*>’: no such file or directory"),
    ("bash: ./x.sh: Permission denied", "bash: <path>: permission denied"),
    ('sed: 1: "file.txt": invalid command code f', 'sed: <n>: "<*>": invalid command code <*>'),
    (
        "bash: -c: line 1: syntax error near unexpected token `fi'",
        "bash: -c: line <n>: syntax error near unexpected token `<*>'",
    ),
    (
        "fatal: not a git repository (or any of the parent directories): .git",
        "fatal: not a git repository (or any of the parent directories): .git",
    ),
    ("HEAD is now at 1a2b3c4 Fix the build", "head is now at <hex> fix the build"),
    # Postgres (psql prints two spaces after the severity)
    (
        'ERROR:  relation "users" does not exist at character 15',
        'error: relation "<*>" does not exist at character <n>',
    ),
    ('FATAL:  password authentication failed for user "bob"', 'fatal: password authentication failed for user "<*>"'),
    (
        'psql: error: connection to server at "localhost" (127.0.0.1), port 5432 failed: Connection refused\n'
        "\tIs the server running on that host and accepting TCP/IP connections?",
        'psql: error: connection to server at "<*>" (<ip>), port <n> failed: connection refused\n'
        "is the server running on that host and accepting tcp/ip connections?",
    ),
    # Docker
    (
        "docker: Error response from daemon: driver failed programming external connectivity on "
        "endpoint web (3f4e5d6c7b8a): Bind for 0.0.0.0:8080 failed: port is already allocated.",
        "docker: error response from daemon: driver failed programming external connectivity on "
        "endpoint '<*>' (<hex>): bind for <ip>:<n> failed: port is already allocated.",
    ),
    (
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
        "cannot connect to the docker daemon at <url>. is the docker daemon running?",
    ),
    (
        'ERROR: failed to solve: process "/bin/sh -c pip install -r requirements.txt" did not complete '
        "successfully: exit code: 1",
        'error: failed to solve: process "<*>" did not complete successfully: exit code: 1',
    ),
    # Windows
    (
        r"FileNotFoundError: [Errno 2] No such file or directory: C:\Users\bob\proj\main.py",
        "filenotfounderror: [errno <n>] no such file or directory: <path>",
    ),
    (
        r"C:\Program Files\dotnet\sdk\8.0.100\Microsoft.Common.targets(1234,5): error MSB3073: exited",
        "<path>(<n>,<n>): error msb3073: exited",
    ),
    (r"    at Object.<anonymous> (C:\Users\bob\app\x.js:3:9)", "at object.<anonymous> (<path>:<n>:<n>)"),
    (r"ls: cannot access \\server\share\x: No such file", "ls: cannot access <path>: no such file"),
    # logs, colours, ids
    (f"{ESC}[31merror{ESC}[0m: build failed", "error: build failed"),
    ("2024-05-01T10:11:12.123Z ERROR worker crashed", "<ts> error worker crashed"),
    ("[10:11:12] ERROR worker crashed", "[<ts>] error worker crashed"),
    (
        "May  1 10:11:12 web sshd[1234]: error: kex_exchange_identification: Connection closed",
        "<ts> web sshd[<n>]: error: kex_exchange_identification: connection closed",
    ),
    ("job 123e4567-e89b-12d3-a456-426614174000 failed", "job <uuid> failed"),
    ("Segmentation fault at 0x7ffd5b2c (core dumped)", "segmentation fault at <addr> (core dumped)"),
    ("See https://docs.example.com/errors/E42.", "see <url>."),
]


@pytest.mark.parametrize(("raw", "expected"), EXACT, ids=[raw.splitlines()[0][:40] for raw, _ in EXACT])
def test_exact_output(raw: str, expected: str) -> None:
    assert normalize_signature(raw) == expected


# ----------------------------------------------------------------------------------------
# The same error with different values normalizes alike.

SAME = [
    # quoted module / key / name
    ("ModuleNotFoundError: No module named 'requests'", "ModuleNotFoundError: No module named 'numpy.linalg'"),
    ("KeyError: 'user_id'", "KeyError: 'Content-Type'"),
    (
        "ImportError: cannot import name 'foo' from partially initialized module 'bar' "
        "(most likely due to a circular import) (/app/bar.py)",
        "ImportError: cannot import name 'Session' from partially initialized module 'db.models' "
        "(most likely due to a circular import) (/srv/app/db/models.py)",
    ),
    ("Error: Cannot find module 'express'", "Error: Cannot find module '@babel/core'"),
    ('FATAL:  password authentication failed for user "bob"', 'FATAL:  password authentication failed for user "alice"'),
    ('ERROR:  relation "users" does not exist at character 15', 'ERROR:  relation "public.orders" does not exist at character 122'),
    ("error[E0382]: borrow of moved value: `v`", "error[E0382]: borrow of moved value: `config.items`"),
    ('imported and not used: "fmt"', 'imported and not used: "net/http"'),
    ("/usr/bin/env: ‘bash\r’: No such file or directory", "/usr/bin/env: ‘python3’: No such file or directory"),
    ('sed: 1: "file.txt": invalid command code f', 'sed: 1: "app.js": invalid command code a'),
    ("bash: -c: line 1: syntax error near unexpected token `fi'", "bash: -c: line 7: syntax error near unexpected token `done'"),
    # Python tracebacks: path, line number
    (
        PY_MODULE_NOT_FOUND,
        PY_MODULE_NOT_FOUND.replace("/home/bob/proj/app.py", "/srv/other/main.py").replace("line 3", "line 41"),
    ),
    (
        "python: can't open file '/app/x.py': [Errno 2] No such file or directory",
        "python: can't open file '/home/bob/my project/run.py': [Errno 2] No such file or directory",
    ),
    # versions
    ("Node.js v20.11.1", "Node.js v18.19.0"),
    ("npm ERR! While resolving: my-app@0.1.0", "npm ERR! While resolving: my-app@2.10.3-beta.1"),
    (
        "ERROR: Package 'foo' requires a different Python: 3.8.10 not in '>=3.9'",
        "ERROR: Package 'bar' requires a different Python: 3.11 not in '>=3.12'",
    ),
    ("See /usr/share/doc/python3.12/README.venv", "See /usr/share/doc/python3.11/README.venv"),
    # node: ports, stack frames, hosts
    ("Error: listen EADDRINUSE: address already in use :::3000", "Error: listen EADDRINUSE: address already in use :::8080"),
    ("Error: listen EADDRINUSE: address already in use 127.0.0.1:3000", "Error: listen EADDRINUSE: address already in use 0.0.0.0:80"),
    ("    at Object.<anonymous> (/app/x.js:3:9)", "    at Object.<anonymous> (/home/bob/src/index.js:120:33)"),
    (
        "Error [ERR_REQUIRE_ESM]: require() of ES Module /app/node_modules/node-fetch/src/index.js from /app/x.js not supported.",
        "Error [ERR_REQUIRE_ESM]: require() of ES Module /w/node_modules/chalk/source/index.js from /w/cli.js not supported.",
    ),
    # Go: addresses, offsets, paths, numbers
    (GO_PANIC, GO_PANIC.replace("[5]", "[12]").replace("length 3", "length 7").replace("/tmp/x/main.go:8 +0x1d", "/home/bob/go/src/app/main.go:113 +0x2c4")),
    ("./main.go:8:2: undefined: foo", "internal/server/server.go:120:14: undefined: foo"),
    ("go: cannot find main module, but found .git/config in /home/bob/proj", "go: cannot find main module, but found .git/config in /srv/x"),
    # Rust
    ("thread 'main' panicked at src/main.rs:2:5:", "thread 'worker-3' panicked at crates/core/src/lib.rs:88:17:"),
    (" --> src/main.rs:4:20", " --> src/bin/tool.rs:123:9"),
    (RUST_BORROW, RUST_BORROW.replace("src/main.rs:4:20", "src/lib.rs:40:2").replace("^ value", "^^^^^^^ value")),
    # shell
    ("bash: ./x.sh: Permission denied", "bash: /usr/local/bin/deploy.sh: Permission denied"),
    ("bash: ./x.sh: Permission denied", "bash: ../scripts/run-all.sh: Permission denied"),
    # Postgres
    (
        'psql: error: connection to server at "localhost" (127.0.0.1), port 5432 failed: Connection refused',
        'psql: error: connection to server at "db.internal" (10.0.12.7), port 6543 failed: Connection refused',
    ),
    # Docker: container ids, ports
    (
        'docker: Error response from daemon: Conflict. The container name "/web" is already in use by container "3f4e5d6c7b8a".',
        'docker: Error response from daemon: Conflict. The container name "/api-1" is already in use by container "9c1d2e3f4a5b".',
    ),
    (
        "Bind for 0.0.0.0:8080 failed: port is already allocated (endpoint web (3f4e5d6c7b8a9f0e))",
        "Bind for 127.0.0.1:5432 failed: port is already allocated (endpoint web (0a1b2c3d4e5f6a7b))",
    ),
    ("fatal: reference is not a tree: 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b", "fatal: reference is not a tree: 0f1e2d3"),
    # Windows paths, with spaces, UNC, forward slashes
    (r"No such file or directory: C:\Users\bob\proj\main.py", r"No such file or directory: D:\work\x.py"),
    (r"No such file or directory: C:\Users\bob\proj\main.py", r"No such file or directory: C:\Program Files\My App\main.py"),
    (r"No such file or directory: C:\Users\bob\proj\main.py", r"No such file or directory: \\server\share\x"),
    (r"No such file or directory: C:\Users\bob\proj\main.py", "No such file or directory: C:/Users/bob/main.py"),
    (r"No such file or directory: C:\Users\bob\proj\main.py", "No such file or directory: /home/bob/main.py"),
    (r'  File "C:\Users\bob\proj\main.py", line 3, in <module>', r'  File "C:\Program Files\Python 3.12\x.py", line 90, in <module>'),
    (r"    at Object.<anonymous> (C:\Users\bob\app\x.js:3:9)", "    at Object.<anonymous> (/app/x.js:30:19)"),
    # URLs
    ("404 Client Error: Not Found for url: https://api.example.com/v1/users/42", "404 Client Error: Not Found for url: http://localhost:8000/x?y=1"),
    # timestamps, UUIDs, hex addresses, IPs, numbers
    ("2024-05-01T10:11:12.123Z ERROR worker crashed", "2023-12-31T23:59:59Z ERROR worker crashed"),
    ("2024-05-01 10:11:12,123 - ERROR - worker crashed", "2019-01-02 03:04:05,999 - ERROR - worker crashed"),
    ("2024/05/01 10:11:12 http: panic serving 127.0.0.1:5678: boom", "2021/11/30 00:00:01 http: panic serving 10.1.2.3:44321: boom"),
    ("[10:11:12] ERROR worker crashed", "[23:00:59.250] ERROR worker crashed"),
    ("May  1 10:11:12 web sshd[1234]: error: connection closed", "Dec 24 23:59:01 web sshd[98]: error: connection closed"),
    ("Date: Wed, 01 May 2024 10:11:12 GMT: upstream timed out", "Date: Sun, 17 Nov 2019 08:00:00 GMT: upstream timed out"),
    ("job 123e4567-e89b-12d3-a456-426614174000 failed", "job 6F9619FF-8B86-D011-B42D-00C04FC964FF failed"),
    ("<function handler at 0x7f3a2b1c4d50>", "<function handler at 0x10b2c3d40>"),
    ("fatal error: out of memory allocating 1048576 bytes after 12ms", "fatal error: out of memory allocating 12 bytes after 3ms"),
    # exit and status codes are identity, not values: the same code stays the same
    ("error: failed to solve: process \"/bin/sh -c npm ci\" did not complete successfully: exit code: 1",
     "error: failed to solve: process \"/bin/sh -c make\" did not complete successfully: exit code: 1"),
    # formatting noise: colours, CRLF, tabs, indentation
    (f"{ESC}[1;31mERROR{ESC}[0m: build failed", "ERROR: build failed"),
    (f"{ESC}[38;5;196mERROR{ESC}[39m:\t build failed{ESC}[K", "error: build failed"),
    ("[31m[1mERROR[22m[39m: build failed", "ERROR: build failed"),
    (f"{ESC}]8;;https://x.dev/e{ESC}\\ERROR{ESC}]8;;{ESC}\\: build failed", "ERROR: build failed"),
    (PY_MODULE_NOT_FOUND.replace("\n", "\r\n"), PY_MODULE_NOT_FOUND),
    (PY_MODULE_NOT_FOUND.replace("    ", "\t"), PY_MODULE_NOT_FOUND + "\n\n"),
    ("\ufeffKeyError: 'a'\u00a0", "KeyError:   'b'"),
]


@pytest.mark.parametrize(("a", "b"), SAME, ids=[f"same-{i}" for i in range(len(SAME))])
def test_same_error_different_values(a: str, b: str) -> None:
    assert normalize_signature(a) == normalize_signature(b)
    assert signature_hash(a) == signature_hash(b)


DIFFERENT = [
    ("ModuleNotFoundError: No module named 'requests'", "KeyError: 'requests'"),
    ("Error: listen EADDRINUSE: address already in use :::3000", "Error: connect ECONNREFUSED 127.0.0.1:3000"),
    ("error[E0382]: borrow of moved value: `v`", "error[E0499]: cannot borrow `v` as mutable more than once at a time"),
    ("error[E0382]: use of moved value: `v`", "error[E0505]: use of moved value: `v`"),
    ("bash: ./x.sh: Permission denied", "bash: ./x.sh: No such file or directory"),
    ('ERROR:  relation "users" does not exist', 'ERROR:  column "users" does not exist'),
    ("panic: runtime error: index out of range [5] with length 3",
     "panic: runtime error: invalid memory address or nil pointer dereference"),
    ("AxiosError: Request failed with status code 404", "AxiosError: Request failed with status code 500"),
    ('process "/bin/sh -c npm ci" did not complete successfully: exit code: 137',
     'process "/bin/sh -c npm ci" did not complete successfully: exit code: 1'),
    ("npm ERR! code ERESOLVE", "npm ERR! code E404"),
    ("/usr/bin/env: ‘bash\r’: No such file or directory", "/usr/bin/env: ‘bash\r’: Permission denied"),
    # the quoted value goes, the text around it stays
    ("ModuleNotFoundError: No module named 'x'", "ImportError: No module named x"),
    # multi-line: an extra line is a different signature
    (PY_MODULE_NOT_FOUND, PY_MODULE_NOT_FOUND.splitlines()[-1]),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT, ids=[f"different-{i}" for i in range(len(DIFFERENT))])
def test_different_errors_stay_different(a: str, b: str) -> None:
    assert normalize_signature(a) != normalize_signature(b)
    assert signature_hash(a) != signature_hash(b)


# ----------------------------------------------------------------------------------------
# Specific rules and regressions.


def test_cr_inside_a_quoted_value_does_not_split_the_line() -> None:
    # Regression: the CR of a CRLF script (`‘bash\r’`) used to become a line break before the
    # quote was matched, leaving `‘bash` and `’: no such file...` on two lines.
    raw = "/usr/bin/env: ‘bash\r’: No such file or directory"
    assert normalize_signature(raw) == "<path>: ‘<*>’: no such file or directory"
    assert "\n" not in normalize_signature(raw)
    assert quoted_values(raw) == ["bash\r"]


def test_line_endings_crlf_lone_cr_and_blank_lines() -> None:
    assert normalize_signature("a: 1\r\nb: 2\r\n\r\n\r\nc") == "a: <n>\nb: <n>\nc"
    # a lone CR (progress bars, old Mac files) outside quotes is a line break
    assert normalize_signature("downloading 10%\rdownloading 20%\rerror: boom") == (
        "downloading <n>%\ndownloading <n>%\nerror: boom"
    )


def test_whitespace_collapses_inside_lines_only() -> None:
    assert normalize_signature("  ERROR:\t\t relation   \"x\"  \n\n\t  LINE 1:  select") == (
        'error: relation "<*>"\nline <n>: select'
    )


def test_ansi_escapes_are_removed_before_anything_else() -> None:
    raw = f"{ESC}[2K{ESC}[1A{ESC}[31;1mModuleNotFoundError{ESC}[0m: No module named {ESC}[33m'x'{ESC}[0m"
    assert normalize_signature(raw) == "modulenotfounderror: no module named '<*>'"
    assert quoted_values(raw) == ["x"]


def test_apostrophes_are_not_quotes() -> None:
    assert normalize_signature("Error: can't open 'a.txt', it's locked") == "error: can't open '<*>', it's locked"
    assert quoted_values("Error: can't open 'a.txt', it's locked") == ["a.txt"]
    assert quoted_values("doesn't exist: 'x' isn't 'y'") == ["x", "y"]


def test_quote_kinds_nest_predictably() -> None:
    # A value stops at the first quote character it meets; an apostrophe may sit inside any
    # kind but '...' itself. This keeps matching linear and a second pass identical.
    assert normalize_signature('KeyError: "can\'t"') == 'keyerror: "<*>"'
    assert normalize_signature("argument requires that `x` is borrowed for `'static`") == (
        "argument requires that `<*>` is borrowed for `<*>`"
    )
    assert quoted_values("lifetime `'a` defined here") == ["'a"]
    assert normalize_signature("‘don't’") == "‘<*>’"
    assert normalize_signature("ValueError: 'say \"hi\"'") == "valueerror: 'say \"<*>\"'"
    assert normalize_signature("SyntaxError: Unexpected token '<', \"<!DOCTYPE \"... is not valid JSON") == (
        "syntaxerror: unexpected token '<*>', \"<*>\"... is not valid json"
    )


def test_placeholder_shapes() -> None:
    out = normalize_signature(
        "'a' \"b\" `c` ‘d’ “e” /x/y C:\\x 1 1.2.3 0xff 3f4e5d6c7b8a "
        "123e4567-e89b-12d3-a456-426614174000 2024-05-01T10:11:12Z https://x.y/z 10.0.0.1"
    )
    assert out == "'<*>' \"<*>\" `<*>` ‘<*>’ “<*>” <path> <path> <n> <ver> <addr> <hex> <uuid> <ts> <url> <ip>"


def test_error_codes_and_names_with_digits_survive() -> None:
    assert normalize_signature("error[E0382] TS2307 E11000 ORA-00942 x86_64 sha256 utf8") == (
        "error[e0382] ts2307 e11000 ora-<n> x86_64 sha256 utf8"
    )


def test_location_after_a_bare_file_name_is_a_path() -> None:
    assert normalize_signature("main.rs:4:20") == normalize_signature("lib.rs:1:1") == "<path>:<n>:<n>"
    assert normalize_signature(r"main.cpp(12): error C2065") == "<path>(<n>): error c2065"


def test_version_is_not_an_ip_and_ip_is_not_a_version() -> None:
    assert normalize_signature("python 3.12.1 at 192.168.0.10") == "python <ver> at <ip>"
    assert normalize_signature("requires python3.11") == "requires python<ver>"


def test_empty_and_blank_input() -> None:
    assert normalize_signature("") == ""
    assert normalize_signature(" \n\t\r\n ") == ""
    assert normalize_signature(f"{ESC}[0m") == ""


def test_normalizer_version_is_three() -> None:
    # 2: bare values and one form of "command not found"; 3: docker's endpoint names. Bump it on any
    # output change; the service recomputes stored hashes when it opens a database normalized by
    # another version.
    assert NORMALIZER_VERSION == 3


BARE = [
    # (one wording, another wording of the same error, the value both name)
    ("bash: nvm: command not found", "zsh: command not found: nvm", "nvm"),
    ("./deploy.sh: line 12: python: command not found", "sh: 1: python: not found", "python"),
    ("fish: Unknown command: brew", "-bash: brew: command not found", "brew"),
    ("./main.go:8:2: undefined: parseConfig", "internal/x.go:120:14: undefined: loadUsers", None),
    ("./x.go:3:2: declared and not used: count", "./y.go:9:6: declared and not used: total", None),
    ("Error: Could not find or load main class com.example.App", "Error: Could not find or load main class Main", None),
    ("docker: Error response from daemon: driver failed programming external connectivity on endpoint web (3c9e1f0a2b4d): "
     "Bind for 0.0.0.0:8080 failed: port is already allocated.",
     "docker: Error response from daemon: driver failed programming external connectivity on endpoint redis-dev "
     "(9b1f4e2a7c3d): Bind for 0.0.0.0:6379 failed: port is already allocated.", None),
]


@pytest.mark.parametrize(("a", "b", "value"), BARE, ids=[a[:30] for a, _, _ in BARE])
def test_bare_values_are_values(a: str, b: str, value: str | None) -> None:
    """Unquoted names tools print where others quote them normalize away and are reported as values."""
    assert normalize_signature(a) == normalize_signature(b)
    assert "'<*>'" in normalize_signature(a)
    if value:
        assert quoted_values(a) == quoted_values(b) == [value]
    else:
        assert quoted_values(a) != quoted_values(b) and len(quoted_values(a)) == 1


def test_a_quoted_value_is_never_a_bare_one() -> None:
    # The CR of a CRLF script is a different error from a missing command.
    crlf = "./build.sh: line 2: $'\\r': command not found"
    assert normalize_signature(crlf) != normalize_signature("bash: nvm: command not found")
    assert quoted_values(crlf) == ["\\r"]


def test_signature_hash_is_sha256_hex_of_the_normalized_form() -> None:
    import hashlib

    raw = "ModuleNotFoundError: No module named 'requests'"
    assert signature_hash(raw) == hashlib.sha256(b"modulenotfounderror: no module named '<*>'").hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", signature_hash(raw))


# ----------------------------------------------------------------------------------------
# quoted_values: the values the hash ignores.


def test_quoted_values_tell_siblings_apart() -> None:
    a = "ModuleNotFoundError: No module named 'requests'"
    b = "ModuleNotFoundError: No module named 'numpy'"
    assert signature_hash(a) == signature_hash(b)
    assert quoted_values(a) == ["requests"]
    assert quoted_values(b) == ["numpy"]
    assert quoted_values(a) != quoted_values(b)


def test_quoted_values_are_raw_lowercased_and_in_order() -> None:
    raw = (
        'psql: error: connection to server at "LocalHost" (127.0.0.1), port 5432 failed\n'
        "KeyError: 'User_ID'\nerror[E0382]: borrow of moved value: `v`\n"
        "/usr/bin/env: ‘bash\r’: x “Smart Quote” `fi' b'Bytes'"
    )
    assert quoted_values(raw) == ["localhost", "user_id", "v", "bash\r", "smart quote", "fi", "bytes"]
    # the values are kept as printed: paths, versions and numbers inside are not replaced
    assert quoted_values('File "/app/x.py", line 3') == ["/app/x.py"]
    assert quoted_values("requires '>=3.9'") == [">=3.9"]


def test_quoted_values_match_what_the_normalizer_replaced() -> None:
    for raw, _ in EXACT:
        assert normalize_signature(raw).count("<*>") >= len(quoted_values(raw))
        assert len(quoted_values(raw)) == len(
            re.findall(r"'<\*>'|\"<\*>\"|`<\*>`|`<\*>'|‘<\*>’|“<\*>”", normalize_signature(raw))
        )


def test_quoted_values_without_quotes() -> None:
    assert quoted_values("panic: runtime error: index out of range [5] with length 3") == []
    assert quoted_values("unterminated 'quote") == []


# ----------------------------------------------------------------------------------------
# Pathological input: no catastrophic backtracking. Timing is not asserted (the CI machine
# decides), but each input is 10,000 characters and finishes in milliseconds today.

PATHOLOGICAL = {
    "slashes": "/" * 10_000,
    "colon-digits": "a" + ":1" * 5_000,
    "unclosed-single-quote": "'" + "a" * 9_999,
    "backslashes": "\\" * 10_000,
    "apostrophe-words": "'a " * 3_334,
    "unclosed-smart-quotes": "‘" * 5_000 + "“" * 5_000,
    "unclosed-double-quote": '"' + "x " * 4_999 + "y",
    "dotted-words": "a." * 5_000,
    "dotted-digits": "1." * 5_000,
    "relative-dirs": "a/" * 5_000,
    "windows-words-with-spaces": "c:\\" + "ab " * 3_332 + "x",
    "unc-segments": "\\\\" + "a\\" * 4_999,
    "escape-starts": "\x1b[" * 3_000 + "\x1b]" * 2_000,
    "unterminated-osc": "\x1b]" + "a" * 9_998,
    "hex-prefixes": "0x" * 5_000,
    "clock-like": "11:" * 3_333,
    "dates": "2024-05-01 " * 909,
    "months": "may 1 " * 1_666,
    "long-word": "a" * 10_000,
    "long-hex": "ab12" * 2_500,
    "dashes-and-carets": "-" * 5_000 + "^~" * 2_500,
    "backticks": "`'" * 5_000,
    "file-locations": "x.py:" * 2_000,
    "byte-prefixes": " b'" * 3_333,
    "carriage-returns": "\r" * 5_000 + "\r\n" * 2_500,
    "colour-remnants": "[31m" * 2_500,
    "url-schemes": "http://" * 1_428,
    "mixed": ("C:\\x y\\z /a/b 'q' \"r\" 1.2.3 0xff " * 300)[:10_000],
}


@pytest.mark.parametrize("raw", PATHOLOGICAL.values(), ids=PATHOLOGICAL.keys())
def test_pathological_inputs_complete_and_are_idempotent(raw: str) -> None:
    once = normalize_signature(raw)
    assert normalize_signature(once) == once
    quoted_values(raw)
    signature_hash(raw)


# ----------------------------------------------------------------------------------------
# Properties.

UPPER_ASCII = re.compile("[A-Z]")
# characters every rule reacts to, so that generated text exercises them
TRICKY = st.text(
    alphabet=st.sampled_from(
        list("'\"`‘’“”abufx:/\\.-_ 0123456789ABCDEF<>*\r\n\t\x1b[];m^~@+()?,v")
        + ["\x00", "\x85", "\u00a0", "\ufeff", "İ", "ß"]
    ),
    max_size=80,
)


# fragments every rule reacts to, glued at random: neighbours that start, end or block a match
RULE_FRAGMENTS = st.lists(
    st.sampled_from([
        "may", " may 1 ", "2024-05-01", "t", "z", "10:11:12", ".123", "+02:00", " utc", "0x", "ff",
        "http://", "unix:///", "c:\\", "c:/", "\\\\", "\\", "/", "./", "~/", "~", "exit code ",
        "exit status", "status code: ", "invalid command code ", "v1.2", "1.2.3.4", "1.2", ":", "::",
        "[31m", "^[[0m", ESC + "[", ESC + "]", ESC, "\x07", "b'", "u'", "'", '"', "`", "‘", "’", "“", "”",
        "--", "-", "^^", "~~", "deadbeef12", "3f2a1b4c-1234-5678-9abc-def012345678", "a", "B", "_",
        "x.py", "main.rs", ":12", "(3)", " ", "\t", "\n", "\r", "\r\n", "\u00a0", "\x85", "\ufeff", "0",
        "42", ".", ",", "(", ")", "[", "]", "<", ">", "*", "<n>", "<path>", "'<*>'", "@", "+", "İ",
        "e0382", "python3", "wed,", " 2024",
    ]),
    max_size=14,
).map("".join)


def _check_output(out: str) -> None:
    assert ESC not in out
    assert "\r" not in out
    assert not UPPER_ASCII.search(out)
    assert all(line and line == line.strip() for line in out.split("\n")) or out == ""


@given(st.text())
def test_idempotent_on_arbitrary_text(text: str) -> None:
    once = normalize_signature(text)
    assert normalize_signature(once) == once
    _check_output(once)


@given(TRICKY)
def test_idempotent_on_rule_heavy_text(text: str) -> None:
    once = normalize_signature(text)
    assert normalize_signature(once) == once
    _check_output(once)
    quoted_values(text)


@given(RULE_FRAGMENTS)
def test_idempotent_on_glued_rule_fragments(text: str) -> None:
    once = normalize_signature(text)
    assert normalize_signature(once) == once
    _check_output(once)


@given(st.text(), st.text())
def test_never_raises_and_output_is_clean(prefix: str, suffix: str) -> None:
    out = normalize_signature(f"{prefix}{ESC}[1;31mERROR{ESC}[0m {suffix}")
    _check_output(out)
    assert isinstance(signature_hash(prefix), str)
    assert all(isinstance(v, str) for v in quoted_values(suffix))


# Value strategies: what real tools put into their messages.
_seg = st.text(alphabet=string.ascii_letters + string.digits + "_.-@+", min_size=1, max_size=12)
_posix_path = st.builds(
    lambda segs, base: base + "/".join(segs),
    st.lists(_seg, min_size=1, max_size=6),
    st.sampled_from(["/", "./", "../", "~/"]),
)
_win_word = st.text(alphabet=string.ascii_letters + string.digits + "_.-", min_size=1, max_size=8)
_win_folder = st.lists(_win_word, min_size=1, max_size=3).map(" ".join)  # "Program Files"
_win_path = st.builds(
    lambda root, folders, name: root + "".join(f + "\\" for f in folders) + name,
    st.one_of(st.sampled_from(string.ascii_letters).map(lambda d: d + ":\\"),
              _win_word.map(lambda s: "\\\\" + s + "\\")),
    st.lists(_win_folder, max_size=4),
    _win_word,
)
_rel_file = st.builds(
    lambda dirs, name, ext: "".join(d + "/" for d in dirs) + name + "." + ext,
    st.lists(st.from_regex(r"[a-z_][a-z0-9_-]{0,8}", fullmatch=True), max_size=3),
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
    st.sampled_from(["rs", "go", "py", "js", "ts", "c", "cpp", "java"]),
)
_number = st.integers(min_value=0, max_value=10**12).map(str)
_port = st.integers(min_value=0, max_value=65_535).map(str)
_ip = st.lists(st.integers(0, 255), min_size=4, max_size=4).map(lambda p: ".".join(map(str, p)))
# 2 or 3 parts: a 4-part version is indistinguishable from an IPv4 address and becomes <ip>
_version = st.builds(
    lambda parts, suffix: ".".join(map(str, parts)) + suffix,
    st.lists(st.integers(0, 999), min_size=2, max_size=3),
    st.sampled_from(["", "rc1", "-beta.2", "+local", ".dev0", "a1", "-rc.1"]),
)
_addr = st.from_regex(r"0[xX][0-9a-fA-F]{1,16}", fullmatch=True)
_uuid = st.uuids().map(str) | st.uuids().map(lambda u: str(u).upper())
# git SHAs and container ids; an all-digit id is a number and an all-letter one a word, as
# for any token, so generated ids have both (a real 12-digit id is all digits 0.4% of the time)
_hex_id = st.sampled_from([7, 12, 40, 64]).flatmap(
    lambda n: st.text(alphabet="0123456789abcdef", min_size=n, max_size=n)
).filter(lambda s: re.search(r"\d", s) and re.search(r"[a-f]", s))
# anything but a quote character or a line break (a CR is fine: ‘bash\r’)
_quoted = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="'\"`‘’“”\n\x1b\x85\u2028\u2029"),
    max_size=30,
)
_ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,20}", fullmatch=True)
_datetime = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2099, 12, 31))
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_timestamp = st.one_of(
    _datetime.map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"),
    _datetime.map(lambda d: d.strftime("%Y-%m-%d %H:%M:%S,") + f"{d.microsecond // 1000:03d}"),
    _datetime.map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S+02:00")),
    _datetime.map(lambda d: d.strftime("%Y/%m/%d %H:%M:%S")),
    _datetime.map(lambda d: d.strftime("%H:%M:%S.%f")),
    _datetime.map(lambda d: f"{_MONTHS[d.month - 1]} {d.day:>2} {d:%H:%M:%S}"),
)

VALUES = {
    "path": _posix_path, "win": _win_path, "rel": _rel_file, "n": _number, "port": _port, "ip": _ip,
    "ver": _version, "addr": _addr, "uuid": _uuid, "hex": _hex_id, "q": _quoted, "id": _ident,
    "ts": _timestamp, "ch": st.sampled_from(string.ascii_letters + string.digits + "._-"),
}

# (template, normalized form). Fields are {kind} or {kind<digit>}; every field is drawn anew.
TEMPLATES = [
    (
        'Traceback (most recent call last):\n  File "{path}", line {n}, in <module>\n    import app\n'
        "ModuleNotFoundError: No module named '{id}'",
        "traceback (most recent call last):\nfile \"<*>\", line <n>, in <module>\nimport app\n"
        "modulenotfounderror: no module named '<*>'",
    ),
    ("KeyError: '{q}'", "keyerror: '<*>'"),
    (
        "ImportError: cannot import name '{id}' from partially initialized module '{id2}' "
        "(most likely due to a circular import) ({path})",
        "importerror: cannot import name '<*>' from partially initialized module '<*>' "
        "(most likely due to a circular import) (<path>)",
    ),
    (
        "requests.exceptions.SSLError: HTTPSConnectionPool(host='{q}', port={port}): Max retries exceeded "
        "with url: {path} (Caused by SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] "
        "certificate verify failed: unable to get local issuer certificate (_ssl.c:{n})')))",
        "requests.exceptions.sslerror: httpsconnectionpool(host='<*>', port=<n>): max retries exceeded "
        "with url: <path> (caused by sslerror(sslcertverificationerror(<n>, '<*>')))",
    ),
    (
        "python: can't open file '{q}': [Errno {n}] No such file or directory",
        "python: can't open file '<*>': [errno <n>] no such file or directory",
    ),
    (
        "Error: Cannot find module '{q}'\nRequire stack:\n- {path}\n"
        "    at Module._resolveFilename (node:internal/modules/cjs/loader:{n1}:{n2})\n"
        "    at Object.<anonymous> ({path2}:{n3}:{n4})\n\nNode.js v{ver}",
        "error: cannot find module '<*>'\nrequire stack:\n- <path>\n"
        "at module._resolvefilename (node:internal/modules/cjs/loader:<n>:<n>)\n"
        "at object.<anonymous> (<path>:<n>:<n>)\nnode.js <ver>",
    ),
    (
        "npm ERR! code ERESOLVE\nnpm ERR! While resolving: my-app@{ver}\nnpm ERR! Found: react@{ver2}\n"
        'npm ERR! peer react@"^{ver3}" from react-dom@{ver4}\n'
        "npm ERR! A complete log of this run can be found in: {path}",
        "npm err! code eresolve\nnpm err! while resolving: my-app@<ver>\nnpm err! found: react@<ver>\n"
        'npm err! peer react@"<*>" from react-dom@<ver>\n'
        "npm err! a complete log of this run can be found in: <path>",
    ),
    (
        "Error [ERR_REQUIRE_ESM]: require() of ES Module {path} from {path2} not supported.",
        "error [err_require_esm]: require() of es module <path> from <path> not supported.",
    ),
    ("Error: listen EADDRINUSE: address already in use :::{port}", "error: listen eaddrinuse: address already in use :::<n>"),
    ("Error: listen EADDRINUSE: address already in use {ip}:{port}", "error: listen eaddrinuse: address already in use <ip>:<n>"),
    (
        "panic: runtime error: index out of range [{n}] with length {n2}\n\ngoroutine {n3} [running]:\n"
        "main.main()\n\t{path}:{n4} +{addr}\nexit status 2",
        "panic: runtime error: index out of range [<n>] with length <n>\ngoroutine <n> [running]:\n"
        "main.main()\n<path>:<n> +<addr>\nexit status 2",
    ),
    ('{rel}:{n}:{n2}: "{q}" imported and not used', '<path>:<n>:<n>: "<*>" imported and not used'),
    (
        "error[E0382]: borrow of moved value: `{q}`\n --> {rel}:{n}:{n2}",
        "error[e0382]: borrow of moved value: `<*>`\n--> <path>:<n>:<n>",
    ),
    (
        "thread '{q}' panicked at {rel}:{n}:{n2}:\nindex out of bounds: the len is {n3} but the index is {n4}",
        "thread '<*>' panicked at <path>:<n>:<n>:\nindex out of bounds: the len is <n> but the index is <n>",
    ),
    ("{path}: ‘{q}’: No such file or directory", "<path>: ‘<*>’: no such file or directory"),
    ("bash: {path}: Permission denied", "bash: <path>: permission denied"),
    ('sed: {n}: "{q}": invalid command code {ch}', 'sed: <n>: "<*>": invalid command code <*>'),
    (
        'ERROR:  relation "{q}" does not exist at character {n}\nLINE {n2}: select * from x;',
        'error: relation "<*>" does not exist at character <n>\nline <n>: select * from x;',
    ),
    (
        'psql: error: connection to server at "{q}" ({ip}), port {port} failed: Connection refused',
        'psql: error: connection to server at "<*>" (<ip>), port <n> failed: connection refused',
    ),
    (
        'docker: Error response from daemon: Conflict. The container name "/{id}" is already in use by '
        'container "{hex}".',
        'docker: error response from daemon: conflict. the container name "<*>" is already in use by '
        'container "<*>".',
    ),
    (
        "driver failed programming external connectivity on endpoint web ({hex}): "
        "Bind for {ip}:{port} failed: port is already allocated",
        "driver failed programming external connectivity on endpoint '<*>' (<hex>): "
        "bind for <ip>:<n> failed: port is already allocated",
    ),
    ("fatal: reference is not a tree: {hex}", "fatal: reference is not a tree: <hex>"),
    ("FileNotFoundError: [Errno 2] No such file or directory: {win}", "filenotfounderror: [errno <n>] no such file or directory: <path>"),
    ('  File "{win}", line {n}, in main', 'file "<*>", line <n>, in main'),
    ("    at Object.<anonymous> ({win}:{n}:{n2})", "at object.<anonymous> (<path>:<n>:<n>)"),
    ("{ts} ERROR job {uuid} failed on {ip}:{port}", "<ts> error job <uuid> failed on <ip>:<n>"),
    (
        ESC + "[2m{ts}" + ESC + "[0m " + ESC + "[31mERROR" + ESC + "[0m worker {n} crashed at {addr}\r\n",
        "<ts> error worker <n> crashed at <addr>",
    ),
]


def _fill(template: str, data: st.DataObject) -> str:
    values = {}
    for _, field, _, _ in string.Formatter().parse(template):
        if field and field not in values:
            values[field] = data.draw(VALUES[field.rstrip(string.digits)], label=field)
    return template.format(**values)


@given(st.sampled_from(TEMPLATES), st.data())
def test_fillings_of_a_real_error_shape_normalize_alike(case: tuple[str, str], data: st.DataObject) -> None:
    template, expected = case
    first, second = _fill(template, data), _fill(template, data)
    assert normalize_signature(first) == expected
    assert normalize_signature(second) == expected
    assert signature_hash(first) == signature_hash(second)


def test_every_template_is_exercised() -> None:
    # each template, filled with fixed values, gives its pinned form (guards the list itself)
    fixed = {
        "path": "/app/x.py", "win": "C:\\x\\y.py", "rel": "src/main.rs", "n": "1", "port": "80",
        "ip": "10.0.0.1", "ver": "1.2.3", "addr": "0x1f", "uuid": str(uuid.UUID(int=1)),
        "hex": "1a2b3c4", "q": "v", "id": "name", "ts": "2024-05-01T10:11:12Z", "ch": "f",
    }
    for template, expected in TEMPLATES:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
        filled = template.format(**{f: fixed[f.rstrip(string.digits)] for f in fields})
        assert normalize_signature(filled) == expected, template
