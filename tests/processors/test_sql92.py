"""SQL92 filter: RocketMQ 4.9.8's own filter tests (ExpressionTest, ParserTest) as tables, the
typing rules that follow from the Java classes, and property tests."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.processors import sql92
from rmqd.processors.sql92 import (
    JLong,
    SQL92EvalError,
    SQL92ParseError,
    compile_sql92,
    parse,
)

# --- ExpressionTest.java (filter/src/test) -------------------------------------------------
AND = "a=3 and b<>4 And c>5 AND d<=4"
OR = "a=3 or b<>4 Or c>5 OR d<=4"

EXPRESSION_TEST = [
    ("TAGS is not null and TAGS='''''tag'''''", {"TAGS": "''tag''"}, True),
    ("a > 3.1E10", {"a": str(3.1415 * 10**10)}, True),
    ("a > 3.14", {"a": "3.1415"}, True),
    ("a > b", {"a": "10", "b": "20"}, False),
    ("a > b", {"a": "20", "b": "10"}, True),
    ("a is null OR a='hello'", {}, True),
    ("a is null OR a='hello'", {"a": "hello"}, True),
    ("a is null OR a='hello'", {"a": "abc"}, False),
    ("a=TRUE OR b=FALSE", {"a": "true", "b": "false"}, True),
    ("a=TRUE OR b=FALSE", {"a": "false", "b": "true"}, False),
    ("a is not null and a='hello'", {"a": "hello"}, True),
    ("a is not null and a='hello'", {}, False),
    (AND, {"a": "3", "b": "5", "c": "6", "d": "1"}, True),
    (AND, {"a": "4", "b": "5", "c": "6", "d": "1"}, False),
    (OR, {"a": "3"}, True),
    (OR, {"a": "4", "b": "5"}, True),
    (OR, {"a": "4", "b": "4", "c": "6"}, True),
    (OR, {"a": "4", "b": "4", "c": "3", "d": "2"}, True),
    (OR, {"a": "4", "b": "4", "c": "3", "d": "10"}, False),
    ("a in ('3', '4', '5')", {"a": "3"}, True),
    ("a in ('3', '4', '5')", {"a": "5"}, True),
    ("a in ('3', '4', '5')", {"a": "8"}, False),
    ("a not in ('3', '4', '5')", {"a": "8"}, True),
    ("a not in ('3', '4', '5')", {"a": "4"}, False),
    ("a between 2 and 10", {"a": "2"}, True),
    ("a between 2 and 10", {"a": "10"}, True),
    ("a between 2 and 10", {"a": "3"}, True),
    ("a between 2 and 10", {"a": "1"}, False),
    ("a between 2 and 10", {"a": "11"}, False),
    ("a not between 2 and 10", {"a": "1"}, True),
    ("a not between 2 and 10", {"a": "11"}, True),
    ("a not between 2 and 10", {"a": "3"}, False),
    ("a is null", {"abc": "2"}, True),
    ("a is null", {"a": "2"}, False),
    ("a is not null", {"a": "2"}, True),
    ("a is not null", {"abc": "2"}, False),
    ("a=b", {"a": "3.14", "b": "3.14"}, True),
    ("a<>b", {"a": "3.14", "b": "3.14"}, False),
    ("a<>b", {"a": "3.14", "b": "3.141"}, True),
    ("a <= now", {"a": "1", "now": "2"}, True),  # `now` is just a property name
]


@pytest.mark.parametrize("expr,props,expected", EXPRESSION_TEST)
def test_expression_test_cases(expr: str, props: dict, expected: bool) -> None:
    assert compile_sql92(expr).matches(props) is expected


def test_string_compare_throws_like_java() -> None:
    # ExpressionTest.testEvaluate_stringCompare expects a RuntimeException here.
    f = compile_sql92("a between up and low")
    assert f.evaluate({"a": "3.14"}) is None
    with pytest.raises(SQL92EvalError):
        f.evaluate({"a": "3.14", "up": "up", "low": "low"})
    assert f.matches({"a": "3.14", "up": "up", "low": "low"}) is False
    with pytest.raises(SQL92EvalError):
        compile_sql92("key is not null and key between 0 and 100").evaluate({"key": "con"})


# --- ParserTest.java -------------------------------------------------------------------------
VALID = [
    AND, "a=3  and    b<>4 And c>5 AND d<=4", OR, "a in ('3', '4', '5')",
    "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))", "(a between 2 and 10) AND (b not between 6 and 9)",
    "a is null", "a is not null", "a <= now",
    "TRUE", "FALSE", "NULL", "a", "NOT a", "-a = 1", "+a = 1", "a > -1", "a > 1L", "a > 9223372036854775807",
    "a > .5", "a > 5.", "a > 5E3", "a > 5.5e-3", "a = 'it''s'", "a = 1 -- comment\n", "a /* c */ = 1",
    "a = 1 b", "a = 1 )",  # JmsSelector does not demand <EOF>: trailing text is ignored
    "1 = TRUE", "a between -5 and -10",  # negated literals are not constants: no order check
    "_x = 1 AND $y = 2 AND A1 = 3", "a = 'x' OR (b = 1 AND (c IS NULL))", "(a)", "(a) IN ('x')",
]

INVALID = [
    ("a and between 2 and 10", "ParseException"),
    (" a between 10 and 0", "must less than or equal"),
    ("a > 100000000000000000000000", "NumberFormatException"),
    ("a > " + "1" * 400 + "." + "1" * 400, "greater than"),
    ("a > 9223372036854775808", "NumberFormatException"),
    ("a > 0.0", "is less than"),  # createFloat rejects anything below Double.MIN_VALUE, even 0.0
    ("a > 1e-400", "is less than"),
    ("a = NULL", "'NULL' cannot be compared."),
    ("NULL = a", "'NULL' cannot be compared."),
    ("TRUE = 1", "cannot be compared with"),
    ("a > 'x'", "cannot be compared."),
    ("a > TRUE", "cannot be compared."),
    ("(a = 1) > 2", "cannot be compared."),
    ("NOT a BETWEEN 1 AND 2", "cannot be compared."),
    ("a BETWEEN NULL AND 1", "can not be null"),
    ("a BETWEEN 'x' AND 'y'", "cannot be compared."),
    ("'x' IN ('x')", "Expected a property for In expression"),
    ("a IN (1, 2)", "ParseException"),
    ("a IN ()", "ParseException"),
    ("1", "will not result in a boolean value"),
    ("'abc'", "will not result in a boolean value"),
    ("-a", "will not result in a boolean value"),
    ("NOT 1", "will not result in a boolean value"),
    ("a = 1 AND 2", "will not result in a boolean value"),
    ("a IS", "ParseException"),
    ("a IS NOT", "ParseException"),
    ("a NOT", "ParseException"),
    ("a NOT LIKE 'x'", "ParseException"),
    ("a = 1 #", "TokenMgrError"),
    ("a != 1", "TokenMgrError"),
    ("a = 'unterminated", "TokenMgrError"),
    ("a = 1 /* open", "TokenMgrError"),
    ("", "ParseException"),
    ("(a = 1", "ParseException"),
    ("a = ", "ParseException"),
    ("é = 1", "TokenMgrError"),
]


@pytest.mark.parametrize("expr", VALID)
def test_valid_expressions_parse(expr: str) -> None:
    assert compile_sql92(expr) is not None


@pytest.mark.parametrize("expr,fragment", INVALID)
def test_invalid_expressions_fail_with_java_cause(expr: str, fragment: str) -> None:
    with pytest.raises(SQL92ParseError) as info:
        compile_sql92(expr)
    assert fragment in info.value.remark
    assert info.value.remark.split(":")[0].startswith(("java.", "org.apache.rocketmq.filter.parser."))


def test_parse_errors_are_cached_like_parse_cache() -> None:
    with pytest.raises(SQL92ParseError) as first:
        compile_sql92("a ==")
    with pytest.raises(SQL92ParseError) as second:
        compile_sql92("a ==")
    assert first.value is second.value
    assert compile_sql92("x = 1") is compile_sql92("x = 1")


def test_tree_string_matches_java_to_string() -> None:
    assert str(parse(AND)) == "((((a == 3) && (NOT (b == 4))) && (c > 5)) && (d <= 4))"
    assert str(parse("a in ('x', 'y')")) == "a IN ( x, y )"
    assert str(parse("a between 1 and 2.5")) == "((a >= 1) && (a <= 2.5))"
    assert str(parse("a is not null")) == "(NOT (a == NULL))"


# --- typing rules that follow from ComparisonExpression / UnaryExpression -------------------
TYPING = [
    # numbers: the property string is converted to the literal's type (Integer.valueOf etc.)
    ("a > 5", {"a": "6"}, True),
    ("a > 5", {"a": "5.5"}, "error"),  # Integer.valueOf("5.5") throws
    ("a > 5.0", {"a": "5.5"}, True),
    ("a > 5.0", {"a": " 6 "}, True),  # Double.valueOf trims
    ("a > 5", {"a": " 6"}, "error"),  # Integer.valueOf does not
    ("a > 5", {"a": "+6"}, True),
    ("a > 5", {"a": "3000000000"}, "error"),  # not an Integer
    ("a > 2147483648", {"a": "3000000000"}, True),  # Long literal: Long.valueOf
    ("a = 1", {"a": "1"}, True),
    ("a = 1", {"a": "01"}, True),
    ("a = 1", {"a": "1.0"}, "error"),
    ("a = 1.0", {"a": "1"}, True),
    ("a = 1", {"a": "abc"}, "error"),
    ("a = 1 OR b = 'x'", {"a": "abc", "b": "x"}, "error"),  # the throw aborts the whole filter
    ("b = 'x' OR a = 1", {"a": "abc", "b": "x"}, True),  # ... unless OR already short-circuited
    ("a > 1.5", {"a": "NaN"}, True),  # Double.compare puts NaN above everything
    ("a < 1.5", {"a": "-Infinity"}, True),
    ("a > 1.5", {"a": "1e400"}, True),
    ("a > 1.5", {"a": "0x1.8p1"}, True),  # Java hex float literal = 3.0
    ("a > 1.5", {"a": "2d"}, True),
    ("a > 1.5", {"a": "2_0"}, "error"),  # Python float() would take it, Java does not
    ("a > 1.5", {"a": "inf"}, "error"),
    ("a > b", {"a": "2", "b": "x"}, "error"),
    ("a = b", {"a": "x", "b": "x"}, True),
    ("a = b", {}, True),  # null = null is TRUE in the Java equality
    ("a = b", {"a": "x"}, False),
    ("a = b", {"b": "x"}, None),
    ("a <> b", {}, False),
    # booleans: 'true' compared with TRUE goes through Boolean.valueOf
    ("a = TRUE", {"a": "TRUE"}, True),
    ("a = TRUE", {"a": "yes"}, False),
    ("a = FALSE", {"a": "no"}, True),
    ("TRUE = a", {"a": "true"}, "error"),  # ClassCastException in the Java conversion
    ("a", {"a": "true"}, False),  # a String is never a Boolean: the cast gives FALSE
    ("a", {}, None),
    ("NOT a = 1", {"a": "1"}, False),  # NOT binds first: (NOT a) = 1 compares a Boolean with 1
    ("NOT (a = 1)", {"a": "2"}, True),
    ("(a = 1) = TRUE", {"a": "1"}, True),
    ("(a = 1) = 1", {"a": "1"}, False),
    ("1 = TRUE", {}, False),
    ("TRUE", {}, True),
    ("NULL", {}, None),
    ("NOT NULL", {}, None),
    ("a IS NULL AND b IS NULL", {}, True),
    # negation: numbers only; strings negate to null
    ("-a = 1", {"a": "-1"}, None),
    ("a = -1", {"a": "-1"}, True),
    ("a = --1", {"a": "1"}, True),
    ("a = -'x'", {}, True),  # -'x' is null and so is a
    ("a > -2147483648", {"a": "0"}, True),
    ("a = -9223372036854775807", {"a": "-9223372036854775807"}, True),
    # three-valued logic
    ("a = 1 AND b = 2", {"a": "1"}, None),
    ("a = 1 AND b = 2", {"a": "2"}, False),
    ("a = 1 OR b = 2", {"b": "2"}, True),
    ("a = 1 OR b = 2", {"a": "2"}, None),
    ("a IN ('x')", {}, None),
    ("a NOT IN ('x')", {}, None),
    ("a NOT IN ('x')", {"a": "y"}, True),
    ("a BETWEEN 1 AND 3", {"a": "2"}, True),
    ("a BETWEEN 1 AND 3.5", {"a": "3.4"}, "error"),  # a >= 1 uses Integer.valueOf first
    ("a BETWEEN 1.0 AND 3.5", {"a": "3.4"}, True),
    ("a NOT BETWEEN 1 AND 3", {}, None),
    ("a = 'x''y'", {"a": "x'y"}, True),
    ("a = '中文'", {"a": "中文"}, True),
    ("a > 1", {"a": "٣"}, True),  # Integer.parseInt takes any Unicode decimal digit
]


@pytest.mark.parametrize("expr,props,expected", TYPING)
def test_typing_rules(expr: str, props: dict, expected: object) -> None:
    f = compile_sql92(expr)
    if expected == "error":
        with pytest.raises(SQL92EvalError):
            f.evaluate(props)
        assert f.matches(props) is False
    else:
        assert f.evaluate(props) is expected
        assert f.matches(props) is (expected is True)


def test_long_or_chain_does_not_hit_the_stack() -> None:
    expr = " OR ".join(f"a = '{i}'" for i in range(5000))
    f = compile_sql92(expr)
    assert f.matches({"a": "4999"}) and not f.matches({"a": "x"})


def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    with pytest.raises(SQL92ParseError):
        compile_sql92("(" * 5000 + "a = 1" + ")" * 5000)


def test_none_properties() -> None:
    assert compile_sql92("a IS NULL").matches(None)


# --- property tests --------------------------------------------------------------------------
ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@given(ints, ints)
def test_int_comparisons_agree_with_python(value: int, literal: int) -> None:
    lit = str(literal) if literal >= 0 else f"-{-literal}"
    props = {"a": str(value)}
    assert compile_sql92(f"a > {lit}").matches(props) is (value > literal)
    assert compile_sql92(f"a >= {lit}").matches(props) is (value >= literal)
    assert compile_sql92(f"a < {lit}").matches(props) is (value < literal)
    assert compile_sql92(f"a <= {lit}").matches(props) is (value <= literal)
    assert compile_sql92(f"a = {lit}").matches(props) is (value == literal)
    assert compile_sql92(f"a <> {lit}").matches(props) is (value != literal)


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(min_value=1e-300, max_value=1e300))
def test_double_comparisons_agree_with_python(value: float, literal: float) -> None:
    props = {"a": repr(value)}
    assert compile_sql92(f"a > {literal!r}").matches(props) is (value > literal)
    assert compile_sql92(f"a <= {literal!r}").matches(props) is (value <= literal)


@given(ints, ints, ints)
def test_between_is_two_comparisons(value: int, low: int, high: int) -> None:
    low, high = min(low, high), max(low, high)
    props = {"a": str(value)}
    lo = str(low) if low >= 0 else f"-{-low}"
    hi = str(high) if high >= 0 else f"-{-high}"
    assert compile_sql92(f"a BETWEEN {lo} AND {hi}").matches(props) is (low <= value <= high)
    assert compile_sql92(f"a NOT BETWEEN {lo} AND {hi}").matches(props) is not (low <= value <= high)


words = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)


@given(words, st.lists(words, min_size=1, max_size=8))
def test_in_is_string_membership(value: str, options: list[str]) -> None:
    lits = ", ".join("'" + o.replace("'", "''") + "'" for o in options)
    assert compile_sql92(f"a IN ({lits})").matches({"a": value}) is (value in options)
    assert compile_sql92(f"a NOT IN ({lits})").matches({"a": value}) is (value not in options)
    eq = " OR ".join("a = '" + o.replace("'", "''") + "'" for o in options)
    assert compile_sql92(eq).matches({"a": value}) is (value in options)


# A random expression generator over the grammar, checked against a naive interpreter of the
# parsed tree (no flattening, no specialised closures).
names = st.sampled_from(["a", "b", "c"])
numbers = st.one_of(st.integers(0, 10).map(str), st.sampled_from(["1.5", "2.5", "10L", "3000000000"]))
operand = st.one_of(names, numbers, st.sampled_from(["'x'", "'1'", "TRUE", "FALSE"]))


@st.composite
def predicates(draw: st.DrawFn, depth: int = 0) -> str:
    choice = draw(st.integers(0, 9 if depth < 3 else 5))
    a, b = draw(names), draw(operand)
    if choice == 0:
        return f"{a} {draw(st.sampled_from(['=', '<>', '>', '>=', '<', '<=']))} {b}"
    if choice == 1:
        return f"{a} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if choice == 2:
        return f"{a} {draw(st.sampled_from(['', 'NOT ']))}IN ('x', '1', '2')"
    if choice == 3:
        return f"{a} {draw(st.sampled_from(['', 'NOT ']))}BETWEEN 1 AND {draw(st.integers(1, 9))}"
    if choice == 4:
        return f"{a} = {draw(names)}"
    if choice == 5:
        return draw(st.sampled_from(["TRUE", "FALSE", "NULL", a]))
    if choice == 6:
        return f"NOT ({draw(predicates(depth + 1))})"
    op = draw(st.sampled_from(["AND", "OR"]))
    return f"({draw(predicates(depth + 1))}) {op} {draw(predicates(depth + 1))}"


def _naive(node: sql92.Expr, props: dict) -> object:
    if isinstance(node, sql92.Constant):
        return node.value
    if isinstance(node, sql92.Property):
        return props.get(node.name)
    if isinstance(node, sql92.Negate):
        return sql92._negate_value(_naive(node.operand, props))
    if isinstance(node, sql92.BooleanCast):
        v = _naive(node.operand, props)
        return None if v is None else (v if type(v) is bool else False)
    if isinstance(node, sql92.Not):
        v = _naive(node.operand, props)
        return None if v is None else not v
    if isinstance(node, sql92.In):
        v = props.get(node.prop.name)
        return None if v is None else ((v in node.values) != node.negated)
    if isinstance(node, sql92.Logic):
        lv = _naive(node.left, props)
        if node.op == "||":
            if lv is True:
                return True
            rv = _naive(node.right, props)
            if rv is True:
                return True
            return None if lv is None or rv is None else False
        if lv is False:
            return False
        rv = _naive(node.right, props)
        if rv is False:
            return False
        return None if lv is None or rv is None else True
    assert isinstance(node, sql92.Compare)
    lv = _naive(node.left, props)
    if node.op == "==":
        rv = _naive(node.right, props)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None:
            return True
        return sql92._jcompare(lv, rv) == 0
    if lv is None:
        return None
    rv = _naive(node.right, props)
    if rv is None:
        return None
    if type(lv) is str and type(rv) is str:
        c = sql92._double_compare(sql92._parse_double(lv), sql92._parse_double(rv))
    else:
        c = sql92._jcompare(lv, rv)
    return {">": c > 0, ">=": c >= 0, "<": c < 0, "<=": c <= 0}[node.op]


prop_values = st.dictionaries(names, st.sampled_from(["1", "2", "5", "x", "1.5", "true", "NaN", "", "3000000000"]))


@settings(max_examples=300, deadline=None)
@given(predicates(), prop_values)
def test_compiled_closures_agree_with_naive_tree_walk(expr: str, props: dict) -> None:
    try:
        f = compile_sql92(expr)
    except SQL92ParseError:
        return
    try:
        expected = _naive(f.tree, props)
    except SQL92EvalError:
        expected = "error"
    if expected == "error":
        with pytest.raises(SQL92EvalError):
            f.evaluate(props)
    else:
        assert f.evaluate(props) is expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab1.'()=<>-+ NOTANDORISNULLINBETWEEN,eE$_/*\n#")), max_size=30))
def test_any_text_either_compiles_or_gives_parse_error(text: str) -> None:
    try:
        f = compile_sql92(text)
    except SQL92ParseError as exc:
        assert exc.remark
        return
    result = None
    try:
        result = f.evaluate({"a": "1", "b": "x"})
    except SQL92EvalError:
        pass
    assert result in (None, True, False)


def test_jlong_and_double_helpers() -> None:
    assert type(sql92._parse_long("5")) is JLong
    assert sql92._double_compare(-0.0, 0.0) == -1
    assert sql92._double_compare(math.nan, math.nan) == 0
    assert sql92._string_compare("\uffff", "\U00010000") == 1  # UTF-16 order, unlike code points
