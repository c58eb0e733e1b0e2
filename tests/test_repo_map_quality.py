"""Map quality: small repositories shaped like real ones, each with a request and what an expert would open first.

The repositories copy the shape that misled the map before (flask: config-named fixtures, docs and a
`.github/ISSUE_TEMPLATE/config.yml` beside the `cli.py` that holds `--reload/--no-reload`; express: public methods
defined as `res.sendFile = function …` next to a private `sendfile` helper); each test asserts the expert's files and
definitions are in the map and in its top N.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agents.chat.symbol_hints import SymbolHints
from agents.core.text import estimate_tokens
from agents.repo_map.maps import RepoMap
from agents.repo_map.outline import SYMBOL_LANGUAGES
from agents.store.database import Store
from agents.workspaces.folders import Workspaces
from tests.conftest import make_repo

FLASK_LIKE = {
    "src/flask/__init__.py": "from .app import Flask as Flask\nfrom .config import Config as Config\n",
    "src/flask/app.py": '''\
        """The Flask application object."""
        import os
        from .config import Config
        from .helpers import get_debug_flag


        class Flask:
            config_class = Config

            def __init__(self, import_name: str) -> None:
                self.import_name = import_name
                self.config = self.make_config()

            def make_config(self) -> Config:
                return self.config_class({"DEBUG": get_debug_flag()})

            @property
            def debug(self) -> bool:
                return self.config["DEBUG"]

            def run(self, host=None, port=None, debug=None, load_dotenv=True, **options) -> None:
                from werkzeug.serving import run_simple
                options.setdefault("use_reloader", self.debug)
                options.setdefault("use_debugger", self.debug)
                run_simple(host, port, self, **options)

            def test_client(self):
                return None
        ''',
    "src/flask/config.py": '''\
        """The configuration object."""
        import json


        class Config(dict):
            def from_pyfile(self, filename: str, silent: bool = False) -> bool:
                return True

            def from_object(self, obj) -> None:
                for key in dir(obj):
                    self[key] = getattr(obj, key)

            def from_file(self, filename: str, load=json.load) -> bool:
                return True

            def get_namespace(self, namespace: str) -> dict:
                return {}
        ''',
    "src/flask/cli.py": '''\
        """Command line interface of flask."""
        import click
        from .helpers import get_debug_flag


        class ScriptInfo:
            def load_app(self):
                return None


        class FlaskGroup(click.Group):
            def make_context(self, info_name, args, parent=None, **extra):
                return None


        def load_dotenv(path=None) -> bool:
            return False


        @click.command("run", short_help="Run a development server.")
        @click.option("--host", "-h", default="127.0.0.1", help="The interface to bind to.")
        @click.option("--port", "-p", default=5000, help="The port to bind to.")
        @click.option("--reload/--no-reload", default=None,
                      help="Enable or disable the reloader. By default the reloader is active if debug is enabled.")
        @click.option("--debugger/--no-debugger", default=None,
                      help="Enable or disable the debugger. By default the debugger is active if debug is enabled.")
        @click.option("--extra-files", default=None, help="Extra files that trigger a reload on change.")
        def run_command(info, host, port, reload, debugger, extra_files):
            debug = get_debug_flag()
            if reload is None:
                reload = debug
            if debugger is None:
                debugger = debug
            from werkzeug.serving import run_simple
            run_simple(host, port, info.load_app(), use_reloader=reload, use_debugger=debugger,
                       extra_files=extra_files)
        ''',
    "src/flask/helpers.py": """\
        import os


        def get_debug_flag() -> bool:
            val = os.environ.get("FLASK_DEBUG")
            return bool(val and val.lower() not in ("0", "false", "no"))


        def send_file(path, mimetype=None):
            return path
        """,
    "src/flask/debughelpers.py": '''\
        class DebugFilesKeyError(KeyError, AssertionError):
            """Raised from request.files during debugging."""
        ''',
    "src/flask/sessions.py": "class SessionInterface:\n    def open_session(self, app, request):\n        return None\n",
    "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef app():\n    return None\n",
    "tests/test_config.py": """\
        import flask


        def test_config_from_pyfile():
            app = flask.Flask(__name__)
            app.config.from_pyfile("static/config.toml")


        def test_config_from_object():
            app = flask.Flask(__name__)
            app.config.from_object(object())


        def test_config_missing_option_debug():
            app = flask.Flask(__name__)
            assert app.config["DEBUG"] is False
        """,
    "tests/test_cli.py": """\
        from flask.cli import FlaskGroup, ScriptInfo, run_command


        def test_run_cert_path():
            run_command.make_context("run", ["--cert", "x"])


        def test_run_reload_option():
            run_command.make_context("run", ["--no-reload"])
        """,
    "tests/static/config.json": '{"TEST_KEY": "foo", "SECRET_KEY": "config", "DEBUG": true}\n',
    "tests/static/config.toml": 'TEST_KEY = "foo"\nSECRET_KEY = "config"\nDEBUG = true\n',
    ".github/ISSUE_TEMPLATE/config.yml": "blank_issues_enabled: false\ncontact_links:\n  - name: config option questions\n",
    ".github/workflows/tests.yaml": "name: Tests\non: [push]\njobs:\n  tests:\n    runs-on: ubuntu-latest\n",
    "docs/config.rst": "Configuration Handling\n======================\n\nThe debug option enables the reloader.\n",
    "docs/cli.rst": "Command Line Interface\n======================\n\nUse --no-reload to disable the reloader.\n",
    "docs/debugging.rst": "Debugging Application Errors\n============================\n\nThe debugger and the reloader.\n",
    "examples/tutorial/flaskr/__init__.py": "from flask import Flask\n\n\ndef create_app(test_config=None):\n"
    "    app = Flask(__name__)\n    app.config.from_pyfile('config.py')\n"
    "    return app\n",
    "CHANGES.rst": "Version 3.1\n-----------\n\n-   The reloader can be disabled with a config option.\n",
}

EXPRESS_LIKE = {
    "lib/express.js": """\
        /*!
         * express
         */
        var proto = require('./application');
        var req = require('./request');
        var res = require('./response');

        exports = module.exports = createApplication;

        function createApplication() {
          var app = function(req, res, next) { app.handle(req, res, next); };
          return app;
        }

        exports.application = proto;
        exports.request = req;
        exports.response = res;
        """,
    "lib/response.js": """\
        /*!
         * express
         */
        var http = require('node:http');
        var send = require('send');
        var res = Object.create(http.ServerResponse.prototype);

        module.exports = res;

        res.status = function status(code) {
          this.statusCode = code;
          return this;
        };

        res.send = function send(body) {
          this.end(body);
          return this;
        };

        res.json = function json(obj) {
          return this.send(JSON.stringify(obj));
        };

        res.sendStatus = function sendStatus(statusCode) {
          return this.status(statusCode).send(String(statusCode));
        };

        res.sendFile = function sendFile(path, options, callback) {
          var opts = options || {};
          var file = send(this.req, path, opts);
          sendfile(this, file, opts, callback);
        };

        res.download = function download(path, filename, options, callback) {
          return this.sendFile(path, options, callback);
        };

        res.redirect = function redirect(url) {
          this.location(url).status(302).end();
        };

        res.render = function render(view, options, callback) {
          this.req.app.render(view, options, callback);
        };

        function sendfile(res, file, options, callback) {
          file.pipe(res);
        }

        function stringify(value, replacer, spaces, escape) {
          return JSON.stringify(value, replacer, spaces);
        }
        """,
    "lib/request.js": """\
        var http = require('node:http');
        var req = Object.create(http.IncomingMessage.prototype);
        module.exports = req;

        req.get = req.header = function header(name) {
          return this.headers[name.toLowerCase()];
        };

        req.accepts = function() {
          return true;
        };
        """,
    "lib/application.js": """\
        var app = exports = module.exports = {};

        app.init = function init() {
          this.settings = {};
        };

        app.use = function use(fn) {
          return this;
        };

        app.render = function render(name, options, callback) {
          callback(null, name);
        };

        app.listen = function listen() {
          return null;
        };
        """,
    "lib/utils.js": """\
        exports.etag = createETagGenerator({ weak: false });

        exports.normalizeType = function(type) {
          return type;
        };

        function createETagGenerator(options) {
          return function generateETag(body, encoding) { return ''; };
        }
        """,
    "test/res.sendFile.js": """\
        var express = require('../');
        var request = require('supertest');

        describe('res', function () {
          describe('.sendFile(path, options)', function () {
            it('should pass maxAge through', function (done) {
              var app = express();
              app.use(function (req, res) {
                res.sendFile('/tmp/name.txt', { maxAge: 1000 });
              });
              request(app).get('/').expect(200, done);
            });
          });
        });
        """,
    "test/res.send.js": "var express = require('../');\n\ndescribe('res.send()', function () {\n"
    "  it('should send', function () { express(); });\n});\n",
    "test/app.render.js": "var express = require('../');\n\nfunction createApp() {\n  return express();\n}\n",
    "examples/downloads/index.js": "var express = require('../../');\nvar app = module.exports = express();\n\n"
    "app.get('/files/:file', function (req, res) {\n"
    "  res.download(req.params.file, { maxAge: 0 });\n});\n",
    "examples/static-files/index.js": "var express = require('../..');\nvar app = express();\n"
    "app.use(express.static('public', { maxAge: 0 }));\n",
    "History.md": "5.0.0\n=====\n\n  * res.sendFile: pass maxAge option to send\n",
    "Readme.md": "# Express\n\nFast, unopinionated, minimalist web framework: res.sendFile and more.\n",
    "package.json": '{"name": "express", "version": "5.0.0", "main": "index.js"}\n',
    "index.js": "module.exports = require('./lib/express');\n",
}


def map_files(rendered: str) -> list[str]:
    """The file header lines of a map, in order."""
    return [
        line.split(" — ")[0]
        for line in rendered.split("\n")
        if line and not line.startswith((" ", "…", "Repository map of "))
    ]


def symbols_under(rendered: str, path: str) -> str:
    """The symbol lines shown under one file of a map."""
    lines = rendered.split("\n")
    start = next(i for i, line in enumerate(lines) if line.split(" — ")[0] == path)
    block = []
    for line in lines[start + 1 :]:
        if not line.startswith(" "):
            break
        block.append(line)
    return "\n".join(block)


def build(root: Path, files: dict[str, str]) -> Path:
    return make_repo(root, {name: textwrap.dedent(text) for name, text in files.items()})


async def test_flask_reloader_option_puts_cli_and_run_command_in_the_top_files(
    repo_map: RepoMap, tmp_path: Path
) -> None:
    root = build(tmp_path / "flask", FLASK_LIKE)
    rendered = await repo_map.render("flask", root, "add a config option to disable the debug reloader", 2000)
    files = map_files(rendered)
    assert "src/flask/cli.py" in files[:3], files
    assert "src/flask/app.py" in files[:5] and "src/flask/config.py" in files[:5], files
    assert "def run_command(info, host, port, reload, debugger, extra_files)" in symbols_under(
        rendered, "src/flask/cli.py"
    )
    assert "def run(self" in symbols_under(rendered, "src/flask/app.py")
    # what misled the map before: config-named fixtures, docs and CI files ahead of the code
    for noise in (
        ".github/ISSUE_TEMPLATE/config.yml",
        "tests/static/config.json",
        "tests/static/config.toml",
        "docs/config.rst",
    ):
        assert noise not in files or files.index(noise) > files.index("src/flask/cli.py") + 3, files
    assert estimate_tokens(rendered) <= 2000


async def test_a_request_about_tests_ranks_the_paired_test_file_first(repo_map: RepoMap, tmp_path: Path) -> None:
    root = build(tmp_path / "flask", FLASK_LIKE)
    rendered = await repo_map.render("flask", root, "the test for the --no-reload option of run_command is flaky", 2000)
    files = map_files(rendered)
    assert files[:2] == ["src/flask/cli.py", "tests/test_cli.py"], files


async def test_a_test_file_follows_its_module(repo_map: RepoMap, tmp_path: Path) -> None:
    root = build(tmp_path / "flask", FLASK_LIKE)
    files = map_files(await repo_map.render("flask", root, "Config.from_object skips lower-case keys", 2000))
    assert files[0] == "src/flask/config.py"
    assert files.index("tests/test_config.py") < files.index("src/flask/sessions.py"), files


@pytest.mark.skipif("javascript" not in SYMBOL_LANGUAGES, reason="tree-sitter grammars not installed")
async def test_express_send_file_request_opens_response_js_with_its_public_methods(
    repo_map: RepoMap, tmp_path: Path
) -> None:
    root = build(tmp_path / "express", EXPRESS_LIKE)
    rendered = await repo_map.render("express", root, "res.sendFile should pass the maxAge option through", 2000)
    files = map_files(rendered)
    assert files[0] == "lib/response.js", files
    assert "test/res.sendFile.js" in files[:5], files
    shown = symbols_under(rendered, "lib/response.js")
    assert "res.sendFile = function sendFile(path, options, callback)" in shown
    for public in ("res.status", "res.send ", "res.json", "res.download", "res.redirect"):
        assert public in shown, (public, shown)
    # a dotted name is a member, not a path: no file named res/sendFile is looked for, and the request's own
    # definition comes before the private helper of a similar name
    assert shown.index("res.sendFile") < shown.index("function sendfile") if "function sendfile" in shown else True
    assert files.index("History.md") > files.index("lib/application.js")


@pytest.mark.skipif("javascript" not in SYMBOL_LANGUAGES, reason="tree-sitter grammars not installed")
async def test_express_methods_are_symbols_and_hints_find_the_exact_case(
    store: Store, repo_map: RepoMap, tmp_path: Path
) -> None:
    root = build(tmp_path / "ws" / "express", EXPRESS_LIKE)
    await repo_map.refresh("express", root)
    assert (await repo_map.find_symbols_by_name("express", "res.sendFile")).split("\n") == [
        "lib/response.js:28 method res.sendFile = function sendFile(path, options, callback)  (in res)"
    ]
    exported = await repo_map.find_symbols_by_name("express", "normalizeType")
    assert exported.startswith("lib/utils.js:3 function exports.normalizeType = function(type)")
    hints = SymbolHints(repo_map, store, Workspaces(tmp_path / "ws", None))
    lines = await hints.hints("why does res.sendFile drop the maxAge?")
    await hints.close()
    assert lines == ["express: lib/response.js:28 method res.sendFile = function sendFile(path, options, callback)"]
