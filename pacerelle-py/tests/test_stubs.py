"""The stubs of the native module (`python/pacerelle/_native.pyi`, written by hand) against the module as built:
every class, method, property, function and constant of `pacerelle._native` is in the stubs and nothing else
is; each callable takes the same parameters (names, order, kinds, which have a default, and the default where
pyo3 states it); each class has the same bases, is final exactly when it cannot be subclassed, and has a
constructor exactly when it can be built. mypy checks code against the stubs; this checks the stubs against
the module, so that the two cannot drift apart."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from pacerelle import _native

STUB = Path(__file__).resolve().parents[1] / "python" / "pacerelle" / "_native.pyi"

# Dunder methods that change what a type checker allows (`len(x)`, `for … in x`, `with x`…). The others
# (`__repr__`, `__eq__`…) every object has, and the stubs leave them out.
PROTOCOL_DUNDERS = frozenset({
    "__len__", "__iter__", "__next__", "__getitem__", "__setitem__", "__contains__", "__bool__", "__call__",
    "__enter__", "__exit__", "__aenter__", "__aexit__", "__aiter__", "__anext__", "__await__",
})
# Names of the typing machinery a stub class may derive from, which the runtime class does not.
TYPING_BASES = frozenset({"Generic", "Protocol"})
# `Py_TPFLAGS_BASETYPE`: the class can be subclassed.
BASETYPE = 1 << 10

Kind = inspect.Parameter


@dataclass(frozen=True)
class Param:
    name: str
    kind: inspect._ParameterKind
    has_default: bool
    # The default as a Python value, when the stub or the text signature gives a literal; else `...`.
    default: Any = ...


@dataclass
class Member:
    """What a stub or the module says about one name: `kind` is one of "function", "method", "staticmethod",
    "classmethod", "property", "attribute", "class"; a callable has one parameter list per overload."""

    kind: str
    signatures: list[list[Param]] = field(default_factory=list)


@dataclass
class Class:
    bases: list[str]
    final: bool
    # The constructor's parameters, or None when the class cannot be built from Python.
    constructor: list[Param] | None
    # Its members, its bases' within the module included.
    members: dict[str, Member]
    is_exception: bool = False


# ---------------------------------------------------------------- the stubs


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return ...
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ...


def _params(args: ast.arguments, drop_first: bool) -> list[Param]:
    positional: list[tuple[ast.arg, inspect._ParameterKind]] = [(a, Kind.POSITIONAL_ONLY) for a in args.posonlyargs]
    positional += [(a, Kind.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = [
        Param(a.arg, kind, d is not None, _literal(d)) for (a, kind), d in zip(positional, defaults, strict=True)
    ]
    if drop_first:
        params = params[1:]
    if args.vararg is not None:
        params.append(Param(args.vararg.arg, Kind.VAR_POSITIONAL, False))
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append(Param(a.arg, Kind.KEYWORD_ONLY, d is not None, _literal(d)))
    if args.kwarg is not None:
        params.append(Param(args.kwarg.arg, Kind.VAR_KEYWORD, False))
    return params


def _decorators(node: ast.FunctionDef) -> set[str]:
    names = set()
    for d in node.decorator_list:
        if isinstance(d, ast.Name):
            names.add(d.id)
        elif isinstance(d, ast.Attribute):
            names.add(d.attr)
    return names


def _stub_members(body: list[ast.stmt], in_class: bool) -> dict[str, Member]:
    members: dict[str, Member] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef):
            decorators = _decorators(node)
            if "property" in decorators:
                members[node.name] = Member("property")
                continue
            if not in_class:
                kind = "function"
            elif "staticmethod" in decorators:
                kind = "staticmethod"
            else:
                kind = "classmethod" if "classmethod" in decorators else "method"
            member = members.setdefault(node.name, Member(kind))
            assert member.kind == kind, f"{node.name}: overloads of different kinds"
            member.signatures.append(_params(node.args, drop_first=kind in ("method", "classmethod")))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            members[node.target.id] = Member("attribute")
        elif isinstance(node, ast.ClassDef):
            members[node.name] = Member("class")
    return members


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ast.unparse(node)


@cache
def stub() -> tuple[dict[str, Member], dict[str, Class], set[str]]:
    """The stubs' module-level names, their classes, and their type aliases (stub-only names)."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    names = _stub_members(tree.body, in_class=False)
    aliases = {
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    defs = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def members_of(name: str) -> dict[str, Member]:
        node = defs[name]
        out: dict[str, Member] = {}
        for base in reversed([_base_name(b) for b in node.bases]):
            if base in defs:
                out.update(members_of(base))
        out.update(_stub_members(node.body, in_class=True))
        return out

    def is_exception(name: str) -> bool:
        bases = [_base_name(b) for b in defs[name].bases]
        return "Exception" in bases or any(b in defs and is_exception(b) for b in bases)

    classes = {}
    for name, node in defs.items():
        members = members_of(name)
        init = members.pop("__init__", None) or members.pop("__new__", None)
        classes[name] = Class(
            bases=[b for b in map(_base_name, node.bases) if b not in TYPING_BASES],
            final="final" in {_base_name(d) for d in node.decorator_list},
            constructor=init.signatures[0] if init is not None else None,
            members={n: m for n, m in members.items() if _public(n)},
            is_exception=is_exception(name),
        )
    return names, classes, aliases


def _public(name: str) -> bool:
    return not name.startswith("_") or name in PROTOCOL_DUNDERS


# ---------------------------------------------------------------- the module


def _signature(obj: Any, drop_first: bool) -> list[Param] | None:
    """The parameters pyo3 states in `__text_signature__`; None when it states none."""
    try:
        sig = inspect.signature(obj)
    except (ValueError, TypeError):
        return None
    params = [
        Param(
            p.name,
            p.kind,
            p.default is not inspect.Parameter.empty,
            p.default if p.default is not inspect.Parameter.empty else ...,
        )
        for p in sig.parameters.values()
    ]
    return params[1:] if drop_first else params


def _runtime_member(cls: type, name: str, value: Any) -> Member:
    if isinstance(value, staticmethod):
        return Member("staticmethod", _signatures(getattr(cls, name), drop_first=False))
    if isinstance(value, classmethod) or type(value).__name__ == "classmethod_descriptor":
        return Member("classmethod", _signatures(getattr(cls, name), drop_first=False))
    if inspect.isdatadescriptor(value):
        return Member("property")
    if callable(value):
        return Member("method", _signatures(value, drop_first=True))
    return Member("attribute")


def _signatures(obj: Any, drop_first: bool) -> list[list[Param]]:
    sig = _signature(obj, drop_first)
    return [] if sig is None else [sig]


def _runtime_class(cls: type, module_classes: set[type]) -> Class:
    members: dict[str, Member] = {}
    for klass in cls.__mro__:
        if klass not in module_classes:
            continue
        for name, value in vars(klass).items():
            if _public(name) and name not in members:
                members[name] = _runtime_member(cls, name, value)
    is_exception = issubclass(cls, BaseException)
    constructor = None
    if not is_exception and getattr(cls, "__text_signature__", None) is not None:
        constructor = _signature(cls, drop_first=False)
    return Class(
        bases=[b.__name__ for b in cls.__bases__ if b is not object],
        final=not cls.__flags__ & BASETYPE,
        constructor=constructor,
        members=members,
        is_exception=is_exception,
    )


@cache
def runtime() -> tuple[dict[str, Member], dict[str, Class]]:
    module: ModuleType = _native
    values = {n: v for n, v in vars(module).items() if not n.startswith("_") or n == "__version__"}
    module_classes = {v for v in values.values() if isinstance(v, type)}
    names: dict[str, Member] = {}
    classes: dict[str, Class] = {}
    for name, value in values.items():
        if isinstance(value, type):
            names[name] = Member("class")
            classes[name] = _runtime_class(value, module_classes)
        elif callable(value):
            names[name] = Member("function", _signatures(value, drop_first=False))
        else:
            names[name] = Member("attribute")
    return names, classes


# ---------------------------------------------------------------- comparing


def _show(params: list[Param]) -> str:
    """`(a, b=…, /, c, *, d=…)`: names, which have a default, and the kinds, as Python writes a signature."""
    parts = []
    for i, p in enumerate(params):
        earlier = {q.kind for q in params[:i]}
        if p.kind is Kind.KEYWORD_ONLY and not earlier & {Kind.KEYWORD_ONLY, Kind.VAR_POSITIONAL}:
            parts.append("*")
        prefix = "*" if p.kind is Kind.VAR_POSITIONAL else "**" if p.kind is Kind.VAR_KEYWORD else ""
        parts.append(prefix + p.name + ("=…" if p.has_default else ""))
        if p.kind is Kind.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind is not Kind.POSITIONAL_ONLY):
            parts.append("/")
    return "(" + ", ".join(parts) + ")"


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _compare_params(where: str, stubbed: list[Param], actual: list[Param], overload: bool) -> list[str]:
    """Differences between one stub signature and the module's; `overload`: one of several stubbed
    signatures, which may leave out parameters that have a default and give none where the module has one."""
    if not overload and [(p.name, p.kind, p.has_default) for p in stubbed] != [
        (p.name, p.kind, p.has_default) for p in actual
    ]:
        return [f"{where}: the stub says {_show(stubbed)}, the module {_show(actual)}"]
    problems = []
    by_name = {p.name: p for p in actual}
    order = [p.name for p in actual]
    if overload:
        missing = [p.name for p in actual if not p.has_default and p.name not in {s.name for s in stubbed}]
        unknown = [p.name for p in stubbed if p.name not in by_name]
        in_order = [p.name for p in stubbed if p.name in by_name] == [
            n for n in order if n in {s.name for s in stubbed}
        ]
        if missing or unknown or not in_order:
            problems.append(f"{where}: the overload {_show(stubbed)} does not fit the module's {_show(actual)}")
    for p in stubbed:
        real = by_name.get(p.name)
        if real is None:
            continue
        if overload and (p.kind != real.kind or (p.has_default and not real.has_default)):
            problems.append(f"{where}: `{p.name}` of the overload {_show(stubbed)} is not the module's {_show(actual)}")
        if p.has_default and real.has_default and p.default is not ... and real.default is not ...:
            # 600 and 600.0 are one default; True and 1 are not.
            if p.default != real.default or isinstance(p.default, bool) != isinstance(real.default, bool):
                problems.append(
                    f"{where}: `{p.name}` defaults to {p.default!r} in the stub, {real.default!r} in the module"
                )
    return problems


def _compare_member(where: str, stubbed: Member, actual: Member) -> list[str]:
    if stubbed.kind != actual.kind:
        return [f"{where}: {_a(stubbed.kind)} in the stub, {_a(actual.kind)} in the module"]
    if not actual.signatures:
        return []
    real = actual.signatures[0]
    if not stubbed.signatures:
        return [f"{where}: no signature in the stub"]
    overloaded = len(stubbed.signatures) > 1
    problems = []
    for sig in stubbed.signatures:
        problems += _compare_params(where, sig, real, overloaded)
    if overloaded:
        named = {p.name for sig in stubbed.signatures for p in sig}
        if named != {p.name for p in real}:
            problems.append(f"{where}: the overloads name {sorted(named)}, the module {_show(real)}")
    return problems


def _compare_names(where: str, stubbed: set[str], actual: set[str]) -> list[str]:
    problems = []
    if actual - stubbed:
        problems.append(f"{where}: in the module, not in the stub: {sorted(actual - stubbed)}")
    if stubbed - actual:
        problems.append(f"{where}: in the stub, not in the module: {sorted(stubbed - actual)}")
    return problems


def _report(problems: list[str]) -> str:
    return f"{STUB.name} and pacerelle._native differ:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------- tests


def test_every_name_of_the_module_is_in_the_stubs_and_nothing_else() -> None:
    stub_names, _, aliases = stub()
    names, _ = runtime()
    problems = _compare_names("module", set(stub_names), set(names))
    # A type alias of the stubs (`Time`) is a name for type checkers only: it must not shadow a real one.
    problems += [f"`{a}` is a type alias in the stub and a name of the module" for a in aliases & set(names)]
    for name in sorted(set(stub_names) & set(names)):
        problems += _compare_member(name, stub_names[name], names[name])
    assert not problems, _report(problems)


def test_every_class_has_the_stubs_members_bases_and_constructor() -> None:
    _, stub_classes, _ = stub()
    _, classes = runtime()
    problems = []
    for name in sorted(set(stub_classes) & set(classes)):
        stubbed, actual = stub_classes[name], classes[name]
        if stubbed.bases != actual.bases:
            problems.append(f"{name}: bases {stubbed.bases} in the stub, {actual.bases} in the module")
        if stubbed.final != actual.final:
            problems.append(
                f"{name}: {'@final' if stubbed.final else 'not @final'} in the stub, but the module's class "
                f"{'cannot' if actual.final else 'can'} be subclassed"
            )
        if not actual.is_exception:
            if (stubbed.constructor is None) != (actual.constructor is None):
                problems.append(
                    f"{name}: the stub {'has no' if stubbed.constructor is None else 'has a'} constructor, "
                    f"the module's class {'has one' if actual.constructor is not None else 'has none'}"
                )
            elif stubbed.constructor is not None and actual.constructor is not None:
                problems += _compare_params(f"{name}()", stubbed.constructor, actual.constructor, overload=False)
        problems += _compare_names(name, set(stubbed.members), set(actual.members))
        for member in sorted(set(stubbed.members) & set(actual.members)):
            problems += _compare_member(f"{name}.{member}", stubbed.members[member], actual.members[member])
    assert not problems, _report(problems)


def test_the_module_states_the_signatures_the_check_reads() -> None:
    """The comparison reads pyo3's text signatures: a callable without one would be compared with nothing."""
    names, classes = runtime()
    unsigned = [n for n, m in names.items() if m.kind == "function" and not m.signatures]
    for cls_name, cls in classes.items():
        unsigned += [
            f"{cls_name}.{n}"
            for n, m in cls.members.items()
            if m.kind in ("method", "staticmethod", "classmethod") and not m.signatures
        ]
    assert not unsigned, f"no __text_signature__: {sorted(unsigned)}"


def test_the_installed_wheel_carries_these_stubs() -> None:
    installed = Path(_native.__file__).with_name("_native.pyi")
    assert installed.exists(), f"the wheel has no {installed.name}"
    assert installed.read_text(encoding="utf-8") == STUB.read_text(encoding="utf-8"), (
        "the installed stubs are not this tree's: install the wheel again (cargo xtask test --only py)"
    )
