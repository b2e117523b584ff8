"""Records: classes whose fields, defaults, equality and repr come from their annotations.

What ``@dataclass`` gives lomtree's five record classes (the three configs, ``RunOptions``,
``ExampleBatch``), without its cost at start-up: ``@dataclass`` writes each class's
``__init__``, ``__repr__``, ``__eq__`` (and, frozen, ``__setattr__``, ``__delattr__``,
``__hash__``) as source text and compiles it with ``exec`` while the class is made, 1.5-2 ms per
class, 7-8 ms of every ``lomtree`` command's start (10 runs: importing ``config``, ``batch`` and
``driver`` took 20-26 ms with ``@dataclass`` and 13-17 ms without). A ``Record`` subclass reads
its field list once, when the class is made, and shares generic methods; making an instance
costs a few microseconds more, and records are made a few times per command or per chunk.

Behaviour (``tests/test_records.py`` checks it against ``@dataclass`` twins):

* Fields are the class's own annotations, in order; a class attribute of the same name is the
  default, ``factory(f)`` a default made by calling ``f()`` per instance. A field without a
  default after one with a default is a ``TypeError`` when the class is made.
* ``Cls(*args, **kwargs)``: positional arguments in field order, then keywords; a missing,
  unknown or doubly given argument is a ``TypeError``. ``__post_init__`` runs last if defined.
* ``==``: same class and equal field tuples (else ``NotImplemented``); ``repr``:
  ``Cls(a=1, b='x')``. ``class C(Record, frozen=True)``: assigning or deleting an attribute raises
  ``FrozenError`` (an ``AttributeError``, as dataclasses' ``FrozenInstanceError``), and instances
  hash by their field tuple; non-frozen records are unhashable, as dataclasses with ``eq``.
* ``fields(obj_or_cls)``: the field names; ``asdict(obj)``: {name: value} (values as they are:
  lomtree's records hold scalars, arrays and flat lists); ``replace(obj, **changes)``: a new
  instance through ``__init__`` (so ``__post_init__`` validates it again).
* Instances keep their values in ``__dict__``, as dataclass instances do.
"""

from __future__ import annotations

_MISSING = object()


class FrozenError(AttributeError):
    """Assignment to a field of a frozen record."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


def factory(make):
    """A field default made by calling ``make()`` for each instance (``field(default_factory=...)``)."""
    return _Factory(make)


class Record:
    """Base class; see the module docstring."""

    _fields: tuple = ()
    _defaults: dict = {}
    _frozen = False

    def __init_subclass__(cls, frozen: bool = False, **kw):
        super().__init_subclass__(**kw)
        names = tuple(cls.__dict__.get("__annotations__", {}))
        defaults = {}
        for name in names:
            v = cls.__dict__.get(name, _MISSING)
            if v is not _MISSING:
                defaults[name] = v
                if isinstance(v, _Factory):
                    delattr(cls, name)
            elif defaults:
                raise TypeError(f"non-default argument {name!r} follows default argument")
        cls._fields = names
        cls._defaults = defaults
        cls._frozen = bool(frozen)
        if frozen:
            cls.__setattr__ = _frozen_setattr
            cls.__delattr__ = _frozen_delattr
            cls.__hash__ = _hash
        else:
            cls.__hash__ = None

    def __init__(self, *args, **kwargs):
        cls = type(self)
        names = cls._fields
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}() takes {len(names)} positional arguments but {len(args)} were given")
        d = self.__dict__
        for name, v in zip(names, args):
            if name in kwargs:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
            d[name] = v
        defaults = cls._defaults
        for name in names[len(args):]:
            v = kwargs.pop(name, _MISSING)
            if v is _MISSING:
                v = defaults.get(name, _MISSING)
                if v is _MISSING:
                    raise TypeError(f"{cls.__name__}() missing required argument: {name!r}")
                if type(v) is _Factory:
                    v = v.make()
            d[name] = v
        if kwargs:
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {next(iter(kwargs))!r}")
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()

    def _values(self) -> tuple:
        d = self.__dict__
        return tuple(d[n] for n in type(self)._fields)

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def __repr__(self) -> str:
        d = self.__dict__
        inner = ", ".join(f"{n}={d[n]!r}" for n in type(self)._fields)
        return f"{type(self).__qualname__}({inner})"


def _frozen_setattr(self, name, value):
    raise FrozenError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name):
    raise FrozenError(f"cannot delete field {name!r}")


def _hash(self):
    return hash(self._values())


def fields(obj_or_cls) -> tuple:
    """The field names of a record or record class, in order."""
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    return cls._fields


def asdict(obj) -> dict:
    """{field: value} of a record."""
    return dict(zip(type(obj)._fields, obj._values()))


def replace(obj, **changes):
    """A copy of ``obj`` with ``changes``, made (and validated) by the class's ``__init__``."""
    return type(obj)(**{**asdict(obj), **changes})


__all__ = ["Record", "FrozenError", "factory", "fields", "asdict", "replace"]
