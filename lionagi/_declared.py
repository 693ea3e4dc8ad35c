"""One declared signature for two callables: :func:`same_parameters` and :func:`declared_as`.

Where two methods take the same arguments (``Branch.stream`` takes ``Branch.run``'s,
``iModel.stream`` takes ``iModel.invoke``'s), the second is declared with the first's
parameters instead of repeating them, so the two cannot drift apart. Where two callables share
only some keyword options (``run_in_turn`` and ``stream_in_turn``), the options are one
``TypedDict`` both take as ``**options``; :func:`unexpected_keywords` is the ``TypeError`` for a
keyword such a declaration does not name.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

__all__ = ["declared_as", "same_parameters", "unexpected_keywords"]

R = TypeVar("R")
PS = ParamSpec("PS")


def same_parameters(
    of: Callable[Concatenate[Any, PS], Any],
) -> Callable[[Callable[[Any, dict[str, Any]], R]], Callable[Concatenate[Any, PS], R]]:
    """Give a method ``of``'s parameters: the one declared signature serves both
    (``Branch.stream`` takes ``Branch.run``'s).

    The decorated function receives the call's arguments bound to ``of``'s signature with its
    defaults applied, shaped as ``of``'s ``locals()`` (``self`` and ``**`` keywords included),
    which is what :func:`lionagi.operations.params.bind` takes. :func:`inspect.signature` and
    type checkers see ``of``'s parameters; a call that does not fit them raises ``TypeError``
    at once.
    """
    signature = inspect.signature(of)
    bind = _Arguments(signature, of.__qualname__).bind

    def decorate(fn: Callable[[Any, dict[str, Any]], R]) -> Callable[Concatenate[Any, PS], R]:
        @functools.wraps(fn)
        def method(self: Any, /, *args: PS.args, **kwargs: PS.kwargs) -> R:
            return fn(self, bind(self, *args, **kwargs))

        returns = inspect.signature(fn).return_annotation
        method.__signature__ = signature.replace(  # type: ignore[attr-defined]
            return_annotation=returns
        )
        return method

    return decorate


def declared_as(
    of: Callable[Concatenate[Any, PS], Any],
) -> Callable[[Callable[..., R]], Callable[Concatenate[Any, PS], R]]:
    """Declare a method with ``of``'s parameters when its own take the same calls in fewer
    words: ``iModel.stream(self, messages, *, on_retry=None, **asked)`` passes ``asked`` to
    ``request``, which is ``invoke``'s call.

    :func:`inspect.signature` and type checkers see ``of``'s parameters; the method itself is
    returned unwrapped, so a call costs nothing more (unlike :func:`same_parameters`, which
    binds each call to ``of``'s signature). The method must accept every call ``of`` accepts.
    """

    def decorate(fn: Callable[..., R]) -> Callable[Concatenate[Any, PS], R]:
        returns = inspect.signature(fn).return_annotation
        fn.__signature__ = inspect.signature(of).replace(  # type: ignore[attr-defined]
            return_annotation=returns
        )
        return cast(Callable[Concatenate[Any, PS], R], fn)

    return decorate


def unexpected_keywords(
    where: str, given: Mapping[str, object], declared: frozenset[str]
) -> TypeError:
    """The ``TypeError`` Python raises for an unexpected keyword argument, for a call whose
    ``**options`` are a ``TypedDict`` with the keys ``declared``. The caller tests
    ``declared.issuperset(given)`` first (the cheapest test, about 850 instructions for two
    keywords), and raises this only when it fails."""
    unknown = ", ".join(repr(name) for name in sorted(given.keys() - declared))
    return TypeError(
        f"{where}(): got an unexpected keyword argument {unknown} "
        f"(it takes {', '.join(sorted(declared))})"
    )


_BINDABLE = (
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
    inspect.Parameter.VAR_KEYWORD,
)


class _Arguments:
    """What ``Signature.bind(...)`` then ``apply_defaults()`` gives, for the shapes these methods
    have (``self``, positional-or-keyword, keyword-only, ``**options``), as a dict, refusing the
    same calls with ``TypeError``.

    The binding is done by the interpreter itself: a function with the same parameters and
    defaults whose body is ``return locals()``, compiled once from the parameter names. ``inspect``
    costs tens of microseconds a call, and binding by hand in Python several; a one-turn
    operation would pay either on every call.
    """

    __slots__ = ("bind",)

    def __init__(self, signature: inspect.Signature, name: str) -> None:
        parameters = list(signature.parameters.values())
        assert parameters, name
        assert parameters[0].name == "self", name
        self.bind: Callable[..., dict[str, Any]] = _binder(parameters, name)

    def __call__(self, owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        return self.bind(owner, *args, **kwargs)


def _binder(parameters: Sequence[inspect.Parameter], name: str) -> Callable[..., dict[str, Any]]:
    """A function taking exactly ``parameters`` (with their defaults) that returns its
    ``locals()``; its errors name ``name``."""
    words: list[str] = []
    for parameter in parameters:
        kind = parameter.kind
        assert kind in _BINDABLE, f"{name}: {kind} parameters are not bindable"
        assert parameter.name.isidentifier(), name
        if kind is inspect.Parameter.KEYWORD_ONLY and "*" not in words:
            words.append("*")
        words.append(("**" if kind is inspect.Parameter.VAR_KEYWORD else "") + parameter.name)
    namespace: dict[str, Any] = {}
    exec(f"def bind({', '.join(words)}):\n    return locals()\n", {}, namespace)
    bind = namespace["bind"]
    bind.__defaults__ = tuple(
        p.default
        for p in parameters
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default is not p.empty
    )
    bind.__kwdefaults__ = {
        p.name: p.default
        for p in parameters
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not p.empty
    } or None
    bind.__qualname__ = name
    return cast(Callable[..., dict[str, Any]], bind)
