"""``records.Record`` behaves like ``@dataclass`` for what lomtree's records use: each check runs
the same operation on a ``Record`` class and on a ``@dataclass`` twin and compares the outcomes
(values, repr, equality, hash, the kind of exception)."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lomtree_cli import records
from lomtree_cli.batch import ExampleBatch
from lomtree_cli.config import InputConfig, LearnerConfig, ReductionConfig
from lomtree_cli.driver import RunOptions
from lomtree_cli.records import Record, factory


class R(Record):
    a: int
    b: str
    c: float = 0.5
    d: list = factory(list)
    e: object = None


@dataclasses.dataclass
class D:
    a: int
    b: str
    c: float = 0.5
    d: list = dataclasses.field(default_factory=list)
    e: object = None


class RF(Record, frozen=True):
    a: int = 1
    b: str = "x"
    c: float = 0.5


@dataclasses.dataclass(frozen=True)
class DF:
    a: int = 1
    b: str = "x"
    c: float = 0.5


def _outcome(make, cls_name_from, cls_name_to):
    """(repr with the class name normalised, values) of ``make()``, or the exception type."""
    try:
        obj = make()
    except TypeError:
        return "TypeError"
    return repr(obj).replace(cls_name_from, cls_name_to), dataclasses.astuple(obj) if dataclasses.is_dataclass(obj) \
        else obj._values()


values = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.floats(allow_nan=False), st.none(),
                   st.lists(st.integers(0, 3), max_size=2))
names = st.sampled_from(["a", "b", "c", "d", "e", "zz"])


@settings(max_examples=300, deadline=None)
@given(args=st.lists(values, max_size=6), kwargs=st.dictionaries(names, values, max_size=4))
def test_construction_matches_dataclass(args, kwargs):
    got = _outcome(lambda: R(*args, **kwargs), "R(", "X(")
    want = _outcome(lambda: D(*copy.deepcopy(args), **copy.deepcopy(kwargs)), "D(", "X(")
    assert got == want


@settings(max_examples=300, deadline=None)
@given(x=st.tuples(st.integers(-3, 3), st.sampled_from(["x", "y"]), st.sampled_from([0.5, 1.0, -0.0])),
       y=st.tuples(st.integers(-3, 3), st.sampled_from(["x", "y"]), st.sampled_from([0.5, 1.0, 0.0])))
def test_equality_hash_repr_match_dataclass(x, y):
    rx, ry, dx, dy = RF(*x), RF(*y), DF(*x), DF(*y)
    assert (rx == ry) == (dx == dy)
    assert (rx != ry) == (dx != dy)
    assert hash(rx) == hash(dx)  # both hash the field tuple
    assert repr(rx).replace("RF(", "DF(") == repr(dx)
    assert (rx == dx) is False and (R(1, "x") == rx) is False  # other classes never compare equal
    assert records.replace(rx, b="z") == RF(x[0], "z", x[2])
    assert records.asdict(rx) == dataclasses.asdict(dx)
    assert records.fields(rx) == records.fields(RF) == tuple(f.name for f in dataclasses.fields(dx))


def test_frozen_and_mutable_behaviour():
    f = RF()
    with pytest.raises(AttributeError):
        f.a = 2
    with pytest.raises(records.FrozenError):
        del f.b
    assert f.a == 1 and f.__dict__ == {"a": 1, "b": "x", "c": 0.5}
    m = R(1, "s")
    m.a = 7  # a non-frozen record is mutable, and unhashable like a dataclass with eq
    assert m.a == 7
    with pytest.raises(TypeError):
        hash(m)
    assert R(1, "s").d is not R(1, "s").d  # a factory default is made per instance
    assert "d" not in vars(R) and vars(R)["c"] == 0.5  # class attributes as a dataclass leaves them
    with pytest.raises(TypeError, match="non-default argument"):
        class Bad(Record):  # noqa: F841
            a: int = 1
            b: int


@pytest.mark.parametrize("cls", [InputConfig, LearnerConfig, ReductionConfig, RunOptions, ExampleBatch])
def test_lomtree_records_match_their_dataclass_twins(cls):
    """Each lomtree record against a ``@dataclass`` with the same fields and defaults."""
    frozen = cls._frozen
    spec = []
    for name in records.fields(cls):
        d = cls._defaults.get(name, records._MISSING)
        if d is records._MISSING:
            spec.append((name, object))
        elif isinstance(d, records._Factory):
            spec.append((name, object, dataclasses.field(default_factory=d.make)))
        else:
            spec.append((name, object, dataclasses.field(default=d)))
    twin = dataclasses.make_dataclass(cls.__name__, spec, frozen=frozen)
    required = {n: 1 for n in records.fields(cls) if n not in cls._defaults}
    kw = {"k": 5} if cls is ReductionConfig else {}
    a, b = cls(**required, **kw), twin(**required, **kw)
    assert records.asdict(a) == dataclasses.asdict(b)
    assert repr(a) == repr(b).replace(twin.__qualname__, cls.__qualname__)
    if frozen:
        assert hash(a) == hash(b)
        assert a == cls(**required, **kw) and a.__dict__ == b.__dict__
        assert records.replace(a) == a


def test_configs_still_validate_on_replace():
    from lomtree_cli.errors import ConfigError

    c = LearnerConfig()
    with pytest.raises(ConfigError):
        records.replace(c, power_t=-1.0)
    assert records.replace(c, power_t=0.75).power_t == 0.75 and c.power_t == 0.5
