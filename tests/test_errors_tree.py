"""One exception tree: every exception lionagi defines is in it, drawn in the errors module's
docstring, and derives from LionError (StopStream deliberately not)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import lionagi
from lionagi import errors
from lionagi.service import errors as service_errors

ERROR_MODULES = ("lionagi.errors", "lionagi.service.errors")


def _defined_exceptions() -> dict[str, type[BaseException]]:
    """Every public exception class defined anywhere in the package, by where it is defined."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(lionagi.__path__, "lionagi."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_exception_is_defined_in_the_error_modules() -> None:
    elsewhere = sorted(
        where for where, cls in _defined_exceptions().items() if cls.__module__ not in ERROR_MODULES
    )
    assert elsewhere == []


@pytest.mark.parametrize("module", [errors, service_errors])
def test_the_docstring_draws_every_exception(module: object) -> None:
    doc = errors.__doc__ or ""
    for name in module.__all__:  # type: ignore[attr-defined]
        assert f" {name}" in doc, f"{name} is missing from the tree in lionagi.errors"


@pytest.mark.parametrize(
    "cls",
    [getattr(errors, n) for n in errors.__all__]
    + [getattr(service_errors, n) for n in service_errors.__all__],
    ids=lambda cls: cls.__name__,
)
def test_every_error_is_a_lion_error_except_the_clean_stop(cls: type[BaseException]) -> None:
    if cls is errors.StopStream:
        assert not issubclass(cls, errors.LionError)  # a CANCEL is not a failure
        assert issubclass(cls, Exception)
    else:
        assert issubclass(cls, errors.LionError)


def test_same_class_is_exported_everywhere() -> None:
    from lionagi.protocols import context_providers
    from lionagi.session import control

    assert control.LoopBreak is errors.LoopBreak is lionagi.LoopBreak
    assert control.StopStream is errors.StopStream is lionagi.StopStream
    assert context_providers.DuplicateProviderError is errors.DuplicateProviderError
    assert context_providers.ProviderNotFoundError is errors.ProviderNotFoundError


def _instances() -> list[BaseException]:
    """One instance of every exception of the tree, made as the library makes it."""
    from uuid import uuid4

    from lionagi.session.control import LoopControl, LoopDirective

    control = LoopControl(LoopDirective.BREAK, uuid4(), reason="enough")
    made: dict[type[BaseException], BaseException] = {
        errors.UnknownParameterError: errors.UnknownParameterError(
            "chat() got an unexpected keyword 'x'", operation="chat", name="x"
        ),
        errors.ToolArgumentError: errors.ToolArgumentError("add", "a", "must be an integer"),
        errors.ParseError: errors.ParseError("Answer", "missing field", text="{}"),
        errors.GraphCycleError: errors.GraphCycleError(["a", "b", "a"]),
        errors.UsageLimitExceeded: errors.UsageLimitExceeded("request_limit", 1, 1),
        errors.LoopBreak: errors.LoopBreak(control),
        errors.StopStream: errors.StopStream(control),
        service_errors.RateLimitError: service_errors.RateLimitError(
            "slow down", provider="openai", model="gpt", retry_after=2.0
        ),
    }
    for module in (errors, service_errors):
        for name in module.__all__:
            cls = getattr(module, name)
            if cls in made:
                continue
            if issubclass(cls, service_errors.ProviderError):
                made[cls] = cls("failed", provider="openai", model="gpt", status=500)
            else:
                made[cls] = cls("failed")
    return list(made.values())


@pytest.mark.parametrize("error", _instances(), ids=lambda error: type(error).__name__)
def test_every_error_pickles_and_copies_with_its_message_and_attributes(
    error: BaseException,
) -> None:
    import copy
    import pickle

    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(again) is type(error)
        assert again.args == error.args
        assert str(again) == str(error)
        assert vars(again) == vars(error)
