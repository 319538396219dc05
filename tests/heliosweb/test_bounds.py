"""`parse_json`: the fast path (json's C scanner alone, when no number can be out of range) and the
careful one must agree on every document: bad numbers and deep nesting named, strings ignored."""

from __future__ import annotations

import json
import random

import pytest

from heliosweb.common.bounds import MAX_JSON_DEPTH, BadJSON, _may_hold_bad_numbers, parse_json


def nested(depth: int) -> list:
    """`depth` lists, each inside the one before: `[[...]]`."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "text, value",
    [
        (
            '{"a": 1.5, "b": "1e400 NaN Infinity 12345678901234567890"}',
            {"a": 1.5, "b": "1e400 NaN Infinity 12345678901234567890"},
        ),
        (
            '{"s": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"]]]"}',
            {"s": '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]]]'},
        ),
        ('{"s": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "n": 1}', {"s": "[" * 40, "n": 1}),
        ('{"é": "ü]]]]1234567890123456789012", "n": [1.5]}', {"é": "ü]]]]1234567890123456789012", "n": [1.5]}),
        ('{"x": -9223372036854775807, "y": 1e308}', {"x": -9223372036854775807, "y": 1e308}),
        ('{"tiny": 1e-400, "s": "\\n"}', {"tiny": 0.0, "s": "\n"}),
        ("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, nested(MAX_JSON_DEPTH)),
        ('["[", "", "]", {"a": [1]}]', ["[", "", "]", {"a": [1]}]),  # brackets inside strings, no escapes
        ('{"s": "\\ud83d\\ude00", "a": 1, "a": 2}', {"s": "\U0001f600", "a": 2}),  # an escaped pair is one character
        ('{"s": "\\\\u0000 \\\\udfff"}', {"s": "\\u0000 \\udfff"}),  # escaped backslashes: no NUL, no surrogate
    ],
)
def test_documents_within_bounds_read_as_json_reads_them(text, value):
    assert parse_json(text) == value
    assert parse_json(text.encode(errors="surrogatepass")) == value


def test_numbers_read_as_json_reads_them_digit_for_digit():
    """The common case is read by orjson: every number must come out as json's, type included."""
    rng = random.Random(7)
    numbers = [
        "0", "-0", "0.1e1", "1E2", "-1.5e-7", "5e-32", "1.00000000000000001", "123456789012345678",
        "0.30000000000000004", "2.2250738585072014e-30",
    ]  # fmt: skip
    numbers += [repr(rng.uniform(-1e6, 1e6)) for _ in range(300)] + [
        str(rng.randint(-(10**17), 10**17)) for _ in range(300)
    ]
    text = "[" + ", ".join(numbers) + "]"
    assert not _may_hold_bad_numbers(text.encode())  # so orjson reads it
    read = parse_json(text.encode())
    assert read == json.loads(text) and list(map(type, read)) == list(map(type, json.loads(text)))


@pytest.mark.parametrize(
    "text, field, says",
    [
        ('{"a": {"b": [1, 1e400]}}', "a.b[1]", "finite"),
        ('{"a": [1E+400]}', "a[0]", "finite"),
        ('{"s": "\\"", "a": [-1e400]}', "a[0]", "finite"),
        ('{"a": [0, 123456789012345678901]}', "a[1]", "123456789012345678901"),
        ('{"a": 9223372036854775808}', "a", "9223372036854775808"),
        ('{"n": NaN}', "n", "NaN"),
        ('{"n": -Infinity}', "n", "Infinity"),
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "body", "nested deeper"),
        ("[" * 100_000, "body", "nested deeper"),
        ('["]]]]", ' + "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH + "]", "body", "nested deeper"),  # ] in a string
        ('{"a": 1,}', "body", "not JSON"),
        ('{"a": {"b": ["ok", "x\\u0000y"]}}', "a.b[1]", "NUL"),
        ('{"a": "\\udfff"}', "a", "lone surrogate"),
        ('{"a": "x\\uD800y", "n": 1e400}', "n", "finite"),  # numbers first, then text
        ('{"k\\u0000": 1}', "k\\x00", "NUL"),  # a bad key, named with its escape
        ('"' + "[" * 100_000, "body", "not JSON"),  # all inside one (unterminated) string
    ],
)
def test_out_of_bounds_documents_are_refused_naming_the_place(text, field, says):
    with pytest.raises(BadJSON) as refused:
        parse_json(text)
    assert refused.value.field == field
    assert says in refused.value.message
