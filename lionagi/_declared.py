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
    arguments = _Arguments(signature, of.__qualname__)

    def decorate(fn: Callable[[Any, dict[str, Any]], R]) -> Callable[Concatenate[Any, PS], R]:
        @functools.wraps(fn)
        def method(self: Any, /, *args: PS.args, **kwargs: PS.kwargs) -> R:
            return fn(self, arguments(self, args, kwargs))

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


def _names_by_kind(parameters: Sequence[inspect.Parameter], owner: str) -> dict[Any, list[str]]:
    names: dict[Any, list[str]] = {kind: [] for kind in _BINDABLE}
    for parameter in parameters:
        assert parameter.kind in names, f"{owner}: {parameter.kind} parameters are not bindable"
        names[parameter.kind].append(parameter.name)
    return names


class _Arguments:
    """What ``Signature.bind(...)`` then ``apply_defaults()`` gives, for the shapes these methods
    have (``self``, positional-or-keyword, keyword-only, ``**options``), as a dict, with the same
    ``TypeError`` for a call that does not fit. ``inspect`` costs tens of microseconds a call,
    which a one-turn operation would pay on every call."""

    __slots__ = ("_defaults", "_name", "_named", "_positional", "_required", "_var_keyword")

    def __init__(self, signature: inspect.Signature, name: str) -> None:
        parameters = list(signature.parameters.values())[1:]
        assert next(iter(signature.parameters), None) == "self", name
        names = _names_by_kind(parameters, name)
        positional, keyword_only, var_keyword = (names[kind] for kind in _BINDABLE)
        self._name = name
        self._positional = tuple(positional)
        self._named = frozenset(("self", *positional, *keyword_only))
        self._var_keyword = var_keyword[0] if var_keyword else None
        self._defaults = {p.name: p.default for p in parameters if p.default is not p.empty}
        self._required = tuple(n for n in (*positional, *keyword_only) if n not in self._defaults)

    def __call__(self, owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(self._positional):
            raise TypeError(f"{self._name}(): too many positional arguments")
        bound: dict[str, Any] = {"self": owner, **self._defaults}
        bound.update(zip(self._positional, args, strict=False))
        extra = self._keywords(bound, kwargs, self._positional[: len(args)])
        if self._var_keyword is not None:
            bound[self._var_keyword] = extra
        elif extra:
            raise TypeError(
                f"{self._name}(): got an unexpected keyword argument {next(iter(extra))!r}"
            )
        missing = [n for n in self._required if n not in bound]
        if missing:
            raise TypeError(f"{self._name}(): missing a required argument: {missing[0]!r}")
        return bound

    def _keywords(
        self, bound: dict[str, Any], kwargs: dict[str, Any], given: tuple[str, ...]
    ) -> dict[str, Any]:
        """Put the named keywords into ``bound``; return the others (for ``**options``)."""
        extra: dict[str, Any] = {}
        for key, value in kwargs.items():
            if key not in self._named:
                extra[key] = value
            elif key == "self" or key in given:
                raise TypeError(f"{self._name}(): multiple values for argument {key!r}")
            else:
                bound[key] = value
        return extra
