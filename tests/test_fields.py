"""The one test of a number and its range that every numeric field uses (clustermgr_lab.domain.fields)."""

import pytest

from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.fields import check_number, is_number

INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize(
    ("value", "number", "integer", "any_float"),
    [
        (3, True, True, True),
        (10**400, True, True, True),  # an int is finite however large (no float is made of it)
        (3.0, True, False, True),
        (-0.5, True, False, True),
        (INF, False, False, True),
        (NAN, False, False, True),
        (True, False, False, False),
        (False, False, False, False),
        ("3", False, False, False),
        (None, False, False, False),
        ([3], False, False, False),
    ],
)
def test_a_number_is_an_int_or_float_and_never_a_bool(value, number, integer, any_float):
    # Given a value as JSON or a config file gives it, When it is tested, Then only real numbers count
    assert is_number(value) is number
    assert is_number(value, integer=True) is integer
    assert is_number(value, finite=False) is any_float


@pytest.mark.parametrize(
    ("value", "rules", "accepted"),
    [
        (1, {"minimum": 1, "maximum": 3}, True),
        (3, {"minimum": 1, "maximum": 3}, True),
        (0, {"minimum": 1, "maximum": 3}, False),
        (4, {"minimum": 1, "maximum": 3}, False),
        (0, {"minimum": 0, "exclusive_minimum": True}, False),
        (1e-9, {"minimum": 0, "exclusive_minimum": True}, True),
        (2.0, {"integer": True, "minimum": 1}, False),
        (True, {"minimum": 0}, False),
        (INF, {}, False),
        (NAN, {"minimum": 0, "maximum": 1}, False),
        (10**400, {"maximum": 1e308}, False),
    ],
)
def test_a_checked_number_must_lie_in_its_range(value, rules, accepted):
    # Given a field's range, When a value is checked against it
    if accepted:
        # Then a value within it comes back as sent
        assert check_number(value, "f", "no", **rules) is value
    else:
        # Then any other is refused with the field's own message and name
        with pytest.raises(InvalidRequest) as refused:
            check_number(value, "spec.f", "must be from 1 to 3, not 0", **rules)
        assert (refused.value.message, refused.value.field) == ("must be from 1 to 3, not 0", "spec.f")
