import pytest
from hypothesis import given
from hypothesis import strategies as st

from csi_mock.model.quantity import INT64_MAX, QuantityError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("1024", 1024),
        ("10Gi", 10 * 2**30),
        ("500M", 500 * 10**6),
        ("1.5Ki", 1536),
        ("1e3", 1000),
        ("1k", 1000),
        ("0.5", 1),  # rounded up to whole bytes, as Kubernetes does
        ("150e-2", 2),
        ("1e-999999999", 1),  # without computing 10**999999999
        ("0.0e-999999999", 0),
        (4096, 4096),
    ],
)
def test_parse_quantity_accepts_kubernetes_notation(text: str | int, expected: int) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["-1", "-5Gi", "10Xi", "Gi", "", "1.2.3", "ten", "1e40", "9Ei"])
def test_parse_quantity_refuses_malformed_negative_or_overflowing(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_parse_quantity_refuses_int64_overflow_as_int() -> None:
    with pytest.raises(QuantityError, match="int64"):
        parse_quantity(INT64_MAX + 1)


def test_format_quantity_uses_the_largest_exact_binary_unit() -> None:
    assert format_quantity(10 * 2**30) == "10Gi"
    assert format_quantity(1536) == "1536"
    assert format_quantity(3 * 2**20) == "3Mi"


@given(st.integers(min_value=2**53 - 2**20, max_value=INT64_MAX))
def test_parse_quantity_is_exact_for_byte_counts_past_2_to_the_53(size: int) -> None:
    assert parse_quantity(str(size)) == size
    assert parse_quantity(f"{size // 1024}Ki") == size // 1024 * 1024


@given(st.integers(min_value=2**53 // 10**9, max_value=INT64_MAX // 10**9 - 1))
def test_parse_quantity_is_exact_for_fractional_units_past_2_to_the_53(gigabytes: int) -> None:
    # "1.5G"-style quantities: a float would lose the low bits of the 2^62 range.
    assert parse_quantity(f"{gigabytes}.5G") == gigabytes * 10**9 + 5 * 10**8
