"""RocketMQ's SQL92 message filter, with the grammar and typing rules of the 4.9.8 broker.

Apache RocketMQ compiles an SQL92 subscription with a JavaCC parser (``SelectorParser.jj``) into a
tree of ActiveMQ-derived expression objects and evaluates that tree over the message's
properties, which are always *strings*. The typing rules that follow from this are surprising
(``a > 5`` throws for ``a='5.5'``; ``a > 0.0`` does not even parse; ``NOT a = 1`` never
matches) and a drop-in must reproduce them, so this module mirrors the Java classes'
behaviour rule by rule:

* ``compile_sql92(text)`` parses once (the broker caches the last 100 expressions, errors
  included, as ``SelectorParser.PARSE_CACHE`` does) and returns a :class:`CompiledFilter`
  whose ``evaluate(props)`` is a tree of Python closures built once per subscription.
* A bad expression raises :class:`SQL92ParseError`; its ``remark`` is what RocketMQ puts in
  the CHECK_CLIENT_CONFIG answer (``e.getMessage()`` of the ``MQFilterException``, i.e. the
  cause's ``toString()``), the broker maps it to SUBSCRIPTION_PARSE_FAILED.
* Evaluation errors (a property that is not a number compared with a number) raise
  :class:`SQL92EvalError`; ``matches`` turns them into "not matched", exactly as
  ``ExpressionMessageFilter.isMatchedByCommitLog`` catches ``Throwable``.

Java values are modelled as: ``None`` (null), ``bool`` (Boolean), ``int`` (Integer),
:class:`JLong` (Long), ``float`` (Double), ``str`` (String). Byte/Short/Float never occur in
the broker (literals are Integer/Long/Double, properties are String), so their conversion
branches are not modelled.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "JLong",
    "SQL92ParseError",
    "SQL92EvalError",
    "CompiledFilter",
    "compile_sql92",
    "parse",
    "SQL92",
    "TAG",
    "is_tag_type",
]

SQL92 = "SQL92"
TAG = "TAG"

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308
DOUBLE_MIN = 5e-324  # Double.MIN_VALUE, the smallest positive double


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: null, "" and "TAG" all mean tag filtering."""
    return expression_type is None or expression_type == "" or expression_type == TAG


class JLong(int):
    """A Java ``Long`` (a plain ``int`` stands for ``Integer``); the type decides conversions."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}L"


class SQL92ParseError(ValueError):
    """A subscription expression RocketMQ would refuse (``MQFilterException``).

    ``remark`` is the Java ``toString()`` of the underlying cause, which is what the 4.9.8
    broker sends back as the remark of SUBSCRIPTION_PARSE_FAILED.
    """

    def __init__(self, remark: str, expression: str | None = None) -> None:
        self.remark = remark
        self.expression = expression
        where = f" in {expression!r}" if expression is not None else ""
        super().__init__(f"Invalid MessageSelector{where}: {remark}")


class SQL92EvalError(ValueError):
    """A runtime exception the Java expression tree would throw while evaluating a message."""


class _JavaRuntime(Exception):
    """Internal: a RuntimeException raised while building the tree (becomes a parse error)."""

    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(message)
        self.java_class = java_class
        self.message = message

    def java_string(self) -> str:
        return f"{self.java_class}: {self.message}" if self.message is not None else self.java_class


def _runtime(message: str) -> _JavaRuntime:
    return _JavaRuntime("java.lang.RuntimeException", message)


def _nfe(text: str) -> _JavaRuntime:
    return _JavaRuntime("java.lang.NumberFormatException", f'For input string: "{text}"')


# ---------------------------------------------------------------------------------------------
# Java number parsing (Integer.valueOf / Long.valueOf / Double.valueOf / Boolean.valueOf)
# ---------------------------------------------------------------------------------------------

def _parse_integral(text: str, lo: int, hi: int) -> int:
    # Integer.parseInt/Long.parseLong: optional sign, then Character.digit(c, 10) digits, which
    # accepts any BMP Unicode decimal digit but no blanks or underscores.
    body = text
    if body[:1] in ("+", "-"):
        body = body[1:]
    if not body or not body.isdecimal() or any(ord(c) > 0xFFFF for c in body):
        raise SQL92EvalError(f'NumberFormatException: For input string: "{text}"')
    value = int(text)
    if value < lo or value > hi:
        raise SQL92EvalError(f'NumberFormatException: For input string: "{text}"')
    return value


def _parse_int(text: str) -> int:
    return _parse_integral(text, INT_MIN, INT_MAX)


def _parse_long(text: str) -> JLong:
    return JLong(_parse_integral(text, LONG_MIN, LONG_MAX))


_JAVA_DOUBLE = re.compile(
    r"""[+-]?(?:
          (?P<special>NaN|Infinity)
        | (?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?
        | (?P<hex>0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?
        )""",
    re.VERBOSE,
)


def _java_trim(text: str) -> str:
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _parse_double(text: str) -> float:
    """``Double.valueOf(String)``: Java's literal syntax (trimmed), not Python's ``float()``."""
    s = _java_trim(text)
    m = _JAVA_DOUBLE.fullmatch(s)
    if m is None:
        raise SQL92EvalError(f'NumberFormatException: For input string: "{text}"')
    negative = s.startswith("-")
    if m.group("special") is not None:
        value = math.nan if m.group("special") == "NaN" else math.inf
    elif m.group("dec") is not None:
        value = float(m.group("dec"))
    else:
        value = float.fromhex(m.group("hex"))
    return -value if negative else value


def _java_bool(text: str) -> bool:
    return len(text) == 4 and text.lower() == "true"


def _double_compare(a: float, b: float) -> int:
    """``Double.compare``: NaN is above everything and equal to itself; -0.0 < 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return 0 if a_nan and b_nan else (1 if a_nan else -1)
    if a == 0.0:  # both zero: order by sign bit
        sa, sb = math.copysign(1.0, a), math.copysign(1.0, b)
        return 0 if sa == sb else (-1 if sa < sb else 1)
    return 0


def _string_compare(a: str, b: str) -> int:
    """``String.compareTo`` orders by UTF-16 code units, not code points."""
    if a == b:
        return 0
    ea, eb = a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass")
    return -1 if ea < eb else 1


def _compare_same(lv: Any, rv: Any) -> int:
    t = type(lv)
    if t is float:
        return _double_compare(lv, rv)
    if t is str:
        return _string_compare(lv, rv)
    return (lv > rv) - (lv < rv)


# (type of left, type of right) -> (convert left, convert right): the branches of
# ComparisonExpression.__compare that the broker can reach (Boolean/String/Integer/Long/Double).
_CONVERSIONS: dict[tuple[type, type], tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None]] = {
    (int, JLong): (None, None),
    (int, float): (float, None),
    (int, str): (None, _parse_int),
    (JLong, int): (None, None),
    (JLong, float): (float, None),
    (JLong, str): (None, _parse_long),
    (float, int): (None, float),
    (float, JLong): (None, float),
    (float, str): (None, _parse_double),
    (str, bool): (_java_bool, None),
    (str, int): (_parse_int, None),
    (str, JLong): (_parse_long, None),
    (str, float): (_parse_double, None),
}


def _jcompare(lv: Any, rv: Any) -> int:
    """``ComparisonExpression.__compare`` with convertStringExpressions on (as the parser sets it)."""
    lc, rc = type(lv), type(rv)
    if lc is rc:
        return _compare_same(lv, rv)
    if lc is bool and rc is str:
        # The Java code casts the Boolean to String here: ClassCastException.
        raise SQL92EvalError("ClassCastException: java.lang.Boolean cannot be cast to java.lang.String")
    conversion = _CONVERSIONS.get((lc, rc))
    if conversion is None:
        return -1  # incomparable types compare as "less" in the Java code
    to_left, to_right = conversion
    if to_left is not None:
        lv = to_left(lv)
    if to_right is not None:
        rv = to_right(rv)
    if type(lv) is float or type(rv) is float:
        return _double_compare(float(lv), float(rv))
    if type(lv) is str:
        return _string_compare(lv, rv)
    return (lv > rv) - (lv < rv)


def _is_number(value: Any) -> bool:
    t = type(value)
    return t is int or t is JLong or t is float


def _java_double_str(value: float) -> str:
    """Close to ``Double.toString`` (used only in error messages and ``str()`` of a tree)."""
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    mag = abs(value)
    if mag == DOUBLE_MIN:
        return ("-" if value < 0 else "") + "4.9E-324"
    if 1e-3 <= mag < 1e7:
        text = repr(value)
        return text if "." in text or "e" in text else text + ".0"
    sign = "-" if value < 0 else ""
    shortest = repr(mag)
    if "e" in shortest:
        m, e = shortest.split("e")
    else:
        m, e = f"{mag:e}".split("e")
        m = m.rstrip("0")
    if "." not in m:
        m += ".0"
    if m.endswith("."):
        m += "0"
    return f"{sign}{m}E{int(e)}"


def _java_str(value: Any) -> str:
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        return _java_double_str(value)
    return str(int(value)) if isinstance(value, int) else str(value)


# ---------------------------------------------------------------------------------------------
# Expression tree (mirrors org.apache.rocketmq.filter.expression.*)
# ---------------------------------------------------------------------------------------------

class Expr:
    """Base of the tree. ``is_boolean`` marks Java's ``BooleanExpression`` interface."""

    is_boolean = False


class Constant(Expr):
    def __init__(self, value: Any) -> None:
        self.value = value

    def __str__(self) -> str:
        v = self.value
        if v is None:
            return "NULL"
        if type(v) is bool:
            return "TRUE" if v else "FALSE"
        if type(v) is str:
            return "'" + v.replace("'", "''") + "'"
        return _java_str(v)


class BooleanConstant(Constant):
    is_boolean = True


NULL = BooleanConstant(None)
TRUE = BooleanConstant(True)
FALSE = BooleanConstant(False)


class Property(Expr):
    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


class _Unary(Expr):
    """UnaryExpression: one operand, printed "(<symbol> <operand>)"."""

    symbol = ""

    def __init__(self, operand: Expr) -> None:
        self.operand = operand

    def __str__(self) -> str:
        return f"({self.symbol} {self.operand})"


class Negate(_Unary):
    symbol = "-"


class Not(_Unary):
    is_boolean = True
    symbol = "NOT"


class BooleanCast(_Unary):
    is_boolean = True

    def __str__(self) -> str:
        return str(self.operand)


class In(Expr):
    is_boolean = True

    def __init__(self, prop: Property, values: list[str], negated: bool) -> None:
        self.prop = prop
        self.values = values
        self.negated = negated

    def __str__(self) -> str:
        op = "NOT IN" if self.negated else "IN"
        return f"{self.prop} {op} ( {', '.join(self.values)} )"


class Compare(Expr):
    """A ComparisonExpression: ``==`` (equality incl. IS NULL) or one of ``> >= < <=``."""

    is_boolean = True

    def __init__(self, op: str, left: Expr, right: Expr) -> None:
        self.op = op
        self.left = left
        self.right = right

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


class Logic(Expr):
    is_boolean = True

    def __init__(self, op: str, left: Expr, right: Expr) -> None:
        self.op = op  # "&&" or "||"
        self.left = left
        self.right = right

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


# --- the static checks and factories of ComparisonExpression / UnaryExpression -------------

def _check_less_than_operand(expr: Expr) -> None:
    if isinstance(expr, Constant):
        if _is_number(expr.value):
            return
        raise _runtime(f"Value '{expr}' cannot be compared.")
    if expr.is_boolean:
        raise _runtime(f"Value '{expr}' cannot be compared.")


def _check_equal_operand(expr: Expr) -> None:
    if isinstance(expr, Constant) and expr.value is None:
        raise _runtime(f"'{expr}' cannot be compared.")


def _create_equal(left: Expr, right: Expr) -> Expr:
    _check_equal_operand(left)
    _check_equal_operand(right)
    if isinstance(left, Constant) and isinstance(right, Constant):
        if left.is_boolean and not right.is_boolean:
            raise _runtime(f"'{left}' cannot be compared with '{right}'")
    return Compare("==", left, right)


def _create_ordering(op: str, left: Expr, right: Expr) -> Expr:
    _check_less_than_operand(left)
    _check_less_than_operand(right)
    return Compare(op, left, right)


def _create_between(value: Expr, low: Expr, high: Expr) -> Expr:
    if isinstance(low, Constant) and isinstance(high, Constant):
        lv, rv = low.value, high.value
        if lv is None or rv is None:
            raise _runtime("Illegal values of between, values can not be null!")
        try:
            ret = _jcompare(rv, lv)
        except SQL92EvalError as exc:
            raise _runtime(str(exc)) from None
        if ret < 0:
            raise _runtime(
                f"Illegal values of between, left value({_java_str(lv)}) must less than or equal "
                f"to right value({_java_str(rv)})"
            )
    return Logic("&&", _create_ordering(">=", value, low), _create_ordering("<=", value, high))


def _create_not_between(value: Expr, low: Expr, high: Expr) -> Expr:
    return Logic("||", _create_ordering("<", value, low), _create_ordering(">", value, high))


def _create_in(left: Expr, values: list[str], negated: bool) -> Expr:
    if not isinstance(left, Property):
        raise _runtime(f"Expected a property for In expression, got: {left}")
    return In(left, values, negated)


def _decimal_constant(image: str) -> Constant:
    text = image[:-1] if image[-1] in "lL" else image
    value = int(text)
    if value > LONG_MAX:
        raise _nfe(text)
    return Constant(value if INT_MIN <= value <= INT_MAX else JLong(value))


def _float_constant(image: str) -> Constant:
    value = float(image)
    if value > DOUBLE_MAX:
        raise _runtime(f"{image} is greater than {_java_double_str(DOUBLE_MAX)}")
    if value < DOUBLE_MIN:  # includes 0.0, exactly as ConstantExpression.createFloat
        raise _runtime(f"{image} is less than {_java_double_str(DOUBLE_MIN)}")
    return Constant(value)


# ---------------------------------------------------------------------------------------------
# Lexer (SelectorParserTokenManager) — lazy, so trailing text is only lexed as far as the
# parser looks at it, as with JavaCC.
# ---------------------------------------------------------------------------------------------

EOF, ID, DECIMAL, FLOAT, STRING = "<EOF>", "<ID>", "<DECIMAL_LITERAL>", "<FLOATING_POINT_LITERAL>", "<STRING_LITERAL>"
_KEYWORDS = {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"}

_WS = " \t\n\r\f"
_RE_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_RE_BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")
_RE_STRING = re.compile(r"'(?:''|[^'])*'", re.DOTALL)
_RE_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_RE_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
_RE_ID = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_PUNCT2 = (">=", "<=", "<>")
_PUNCT1 = "=><(),+-"


class _Token:
    __slots__ = ("kind", "image", "line", "column")

    def __init__(self, kind: str, image: str, line: int, column: int) -> None:
        self.kind = kind
        self.image = image
        self.line = line
        self.column = column


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.col = 1

    def _advance(self, upto: int) -> None:
        text = self.text
        i = self.pos
        while i < upto:
            c = text[i]
            if c == "\n" or (c == "\r" and (i + 1 >= len(text) or text[i + 1] != "\n")):
                self.line += 1
                self.col = 1
            else:
                self.col += 1
            i += 1
        self.pos = upto

    def _lexical_error(self) -> _JavaRuntime:
        c = self.text[self.pos]
        return _JavaRuntime(
            "org.apache.rocketmq.filter.parser.TokenMgrError",
            f'Lexical error at line {self.line}, column {self.col}.  Encountered: "{c}" ({ord(c)}), after : ""',
        )

    def next(self) -> _Token:
        text, n = self.text, len(self.text)
        while True:
            i = self.pos
            if i >= n:
                return _Token(EOF, "", self.line, self.col)
            c = text[i]
            if c in _WS:
                self._advance(i + 1)
                continue
            if c == "-" and text.startswith("--", i):
                m = _RE_LINE_COMMENT.match(text, i)
                if m:
                    self._advance(m.end())
                    continue
            if c == "/" and text.startswith("/*", i):
                m = _RE_BLOCK_COMMENT.match(text, i)
                if m:
                    self._advance(m.end())
                    continue
            break
        line, col = self.line, self.col
        if c == "'":
            m = _RE_STRING.match(text, i)
            if m is None:
                raise self._lexical_error()
            kind, end = STRING, m.end()
        elif c.isascii() and (c.isdigit() or c == "."):
            mf = _RE_FLOAT.match(text, i)
            md = _RE_DECIMAL.match(text, i)
            fe = mf.end() if mf else -1
            de = md.end() if md else -1
            if fe < 0 and de < 0:
                raise self._lexical_error()
            kind, end = (FLOAT, fe) if fe > de else (DECIMAL, de)
        elif c.isascii() and (c.isalpha() or c in "_$"):
            m = _RE_ID.match(text, i)
            end = m.end()  # type: ignore[union-attr]
            upper = text[i:end].upper()
            kind = upper if upper in _KEYWORDS else ID
        elif text.startswith(_PUNCT2, i):
            kind, end = text[i : i + 2], i + 2
        elif c in _PUNCT1:
            kind, end = c, i + 1
        else:
            raise self._lexical_error()
        image = text[i:end]
        self._advance(end)
        return _Token(kind, image, line, col)


# ---------------------------------------------------------------------------------------------
# Parser (the generated SelectorParser.java, production by production)
# ---------------------------------------------------------------------------------------------

class _Parser:
    def __init__(self, text: str) -> None:
        self.lexer = _Lexer(text)
        self.buf: list[_Token] = []

    def peek(self, k: int = 0) -> _Token:
        while len(self.buf) <= k:
            if self.buf and self.buf[-1].kind == EOF:
                self.buf.append(self.buf[-1])
            else:
                self.buf.append(self.lexer.next())
        return self.buf[k]

    def consume(self, kind: str, expecting: str | None = None) -> _Token:
        tok = self.peek()
        if tok.kind != kind:
            raise self.error(tok, expecting or _describe(kind))
        self.buf.pop(0)
        return tok

    def error(self, tok: _Token, expecting: str) -> _JavaRuntime:
        seen = "<EOF>" if tok.kind == EOF else tok.image
        return _JavaRuntime(
            "org.apache.rocketmq.filter.parser.ParseException",
            f'Encountered "{seen}" at line {tok.line}, column {tok.column}.\nWas expecting one of:\n    {expecting}',
        )

    @staticmethod
    def as_boolean(expr: Expr) -> Expr:
        if expr.is_boolean:
            return expr
        if isinstance(expr, Property):
            return BooleanCast(expr)
        raise _JavaRuntime(
            "org.apache.rocketmq.filter.parser.ParseException",
            f"Expression will not result in a boolean value: {expr}",
        )

    def selector(self) -> Expr:
        # JmsSelector() does not require <EOF>: text after a complete expression is ignored.
        return self.as_boolean(self.or_expression())

    def or_expression(self) -> Expr:
        left = self.and_expression()
        while self.peek().kind == "OR":
            self.buf.pop(0)
            right = self.and_expression()
            left = Logic("||", self.as_boolean(left), self.as_boolean(right))
        return left

    def and_expression(self) -> Expr:
        left = self.equality_expression()
        while self.peek().kind == "AND":
            self.buf.pop(0)
            right = self.equality_expression()
            left = Logic("&&", self.as_boolean(left), self.as_boolean(right))
        return left

    def equality_expression(self) -> Expr:
        left = self.comparison_expression()
        while True:
            kind = self.peek().kind
            if kind == "=":
                self.buf.pop(0)
                left = _create_equal(left, self.comparison_expression())
            elif kind == "<>":
                self.buf.pop(0)
                left = Not(_create_equal(left, self.comparison_expression()))
            elif kind == "IS":
                if self.peek(1).kind == "NULL":
                    del self.buf[:2]
                    left = Compare("==", left, NULL)
                else:
                    self.buf.pop(0)
                    self.consume("NOT", '"NOT" or "NULL"')
                    self.consume("NULL")
                    left = Not(Compare("==", left, NULL))
            else:
                return left

    def comparison_expression(self) -> Expr:
        left = self.unary_expr()
        while True:
            kind = self.peek().kind
            if kind in (">", ">=", "<", "<="):
                self.buf.pop(0)
                left = _create_ordering(kind, left, self.unary_expr())
            elif kind == "BETWEEN":
                self.buf.pop(0)
                low = self.unary_expr()
                self.consume("AND")
                high = self.unary_expr()
                left = _create_between(left, low, high)
            elif kind == "IN":
                self.buf.pop(0)
                left = _create_in(left, self.string_list(), False)
            elif kind == "NOT":
                nxt = self.peek(1).kind
                if nxt == "BETWEEN":
                    del self.buf[:2]
                    low = self.unary_expr()
                    self.consume("AND")
                    high = self.unary_expr()
                    left = _create_not_between(left, low, high)
                elif nxt == "IN":
                    del self.buf[:2]
                    left = _create_in(left, self.string_list(), True)
                else:
                    raise self.error(self.peek(1), '"BETWEEN" or "IN" after "NOT"')
            else:
                return left

    def string_list(self) -> list[str]:
        self.consume("(")
        values = [self.string_literal()]
        while self.peek().kind == ",":
            self.buf.pop(0)
            values.append(self.string_literal())
        self.consume(")")
        return values

    def string_literal(self) -> str:
        image = self.consume(STRING).image
        return image[1:-1].replace("''", "'")

    def unary_expr(self) -> Expr:
        kind = self.peek().kind
        if kind == "+":
            self.buf.pop(0)
            return self.unary_expr()
        if kind == "-":
            self.buf.pop(0)
            return Negate(self.unary_expr())
        if kind == "NOT":
            self.buf.pop(0)
            return Not(self.as_boolean(self.unary_expr()))
        return self.primary_expr()

    def primary_expr(self) -> Expr:
        tok = self.peek()
        kind = tok.kind
        if kind == STRING:
            return Constant(self.string_literal())
        self_pop = self.buf.pop
        if kind == DECIMAL:
            self_pop(0)
            return _decimal_constant(tok.image)
        if kind == FLOAT:
            self_pop(0)
            return _float_constant(tok.image)
        if kind == "TRUE":
            self_pop(0)
            return TRUE
        if kind == "FALSE":
            self_pop(0)
            return FALSE
        if kind == "NULL":
            self_pop(0)
            return NULL
        if kind == ID:
            self_pop(0)
            return Property(tok.image)
        if kind == "(":
            self_pop(0)
            inner = self.or_expression()
            self.consume(")")
            return inner
        raise self.error(tok, '"+" "-" "NOT" "(" <literal> <ID>')


def _describe(kind: str) -> str:
    return kind if kind.startswith("<") else f'"{kind}"'


# ---------------------------------------------------------------------------------------------
# Compiling the tree into closures
# ---------------------------------------------------------------------------------------------

Props = Mapping[str, str]
Fn = Callable[[Props], Any]


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _wrap64(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def _negate_value(v: Any) -> Any:
    t = type(v)
    if t is int:
        return _wrap32(-v)
    if t is JLong:
        return JLong(_wrap64(-v))
    if t is float:
        return -v
    return None  # null, strings and booleans negate to null


def _ordering_test(op: str) -> Callable[[int], bool]:
    return {
        ">": lambda c: c > 0,
        ">=": lambda c: c >= 0,
        "<": lambda c: c < 0,
        "<=": lambda c: c <= 0,
    }[op]


def _compile(expr: Expr) -> Fn:
    if isinstance(expr, Constant):
        value = expr.value
        return lambda p: value
    if isinstance(expr, Property):
        name = expr.name
        return lambda p: p.get(name)
    if isinstance(expr, Negate):
        operand = _compile(expr.operand)
        if isinstance(expr.operand, Constant):
            folded = _negate_value(expr.operand.value)
            return lambda p: folded
        return lambda p: _negate_value(operand(p))
    if isinstance(expr, BooleanCast):
        operand = _compile(expr.operand)

        def boolean_cast(p: Props) -> Any:
            v = operand(p)
            if v is None:
                return None
            return v if type(v) is bool else False

        return boolean_cast
    if isinstance(expr, Not):
        operand = _compile(expr.operand)

        def negation(p: Props) -> Any:
            v = operand(p)
            return None if v is None else not v

        return negation
    if isinstance(expr, In):
        name = expr.prop.name
        values = frozenset(expr.values)
        negated = expr.negated

        def in_list(p: Props) -> Any:
            v = p.get(name)
            if v is None or type(v) is not str:
                return None
            return (v in values) != negated

        return in_list
    if isinstance(expr, Logic):
        return _compile_logic(expr)
    if isinstance(expr, Compare):
        if expr.op == "==":
            return _compile_equal(expr)
        return _compile_ordering(expr)
    raise TypeError(f"unknown expression node {expr!r}")


def _flatten(expr: Expr, op: str) -> list[Expr]:
    # Left-deep chains (a OR b OR c ...) evaluate left to right with the same short-circuit and
    # null rules whether nested or flat; flattening keeps long selectors off the Python stack.
    items: list[Expr] = []
    while isinstance(expr, Logic) and expr.op == op:
        items.append(expr.right)
        expr = expr.left
    items.append(expr)
    items.reverse()
    return items


def _compile_logic(expr: Logic) -> Fn:
    parts = [_compile(e) for e in _flatten(expr, expr.op)]
    if expr.op == "||":

        def any_true(p: Props) -> Any:
            saw_null = False
            for f in parts:
                v = f(p)
                if v is None:
                    saw_null = True
                elif v:
                    return True
            return None if saw_null else False

        return any_true

    def all_true(p: Props) -> Any:
        saw_null = False
        for f in parts:
            v = f(p)
            if v is None:
                saw_null = True
            elif not v:
                return False
        return None if saw_null else True

    return all_true


def _compile_equal(expr: Compare) -> Fn:
    left, right = expr.left, expr.right
    if right is NULL:  # IS NULL
        lf = _compile(left)
        return lambda p: lf(p) is None
    if isinstance(left, Property) and isinstance(right, Constant) and right.value is not None:
        return _equal_property_constant(left.name, right.value)
    lf, rf = _compile(left), _compile(right)

    def equal(p: Props) -> Any:
        lv = lf(p)
        rv = rf(p)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        return _jcompare(lv, rv) == 0

    return equal


def _equal_property_constant(name: str, c: Any) -> Fn:
    t = type(c)
    if t is str:

        def eq_str(p: Props) -> Any:
            v = p.get(name)
            return None if v is None else v == c

        return eq_str
    if t is int:

        def eq_int(p: Props) -> Any:
            v = p.get(name)
            if v is None:
                return None
            return _parse_int(v) == c if type(v) is str else _jcompare(v, c) == 0

        return eq_int

    def eq_any(p: Props) -> Any:
        v = p.get(name)
        return None if v is None else _jcompare(v, c) == 0

    return eq_any


def _compile_ordering(expr: Compare) -> Fn:
    test = _ordering_test(expr.op)
    left, right = expr.left, expr.right
    if isinstance(left, Property) and isinstance(right, Constant) and type(right.value) is int:
        name, c = left.name, right.value

        def prop_vs_int(p: Props) -> Any:
            v = p.get(name)
            if v is None:
                return None
            if type(v) is str:
                iv = _parse_int(v)
                return test((iv > c) - (iv < c))
            return test(_jcompare(v, c))

        return prop_vs_int
    lf, rf = _compile(left), _compile(right)

    def ordering(p: Props) -> Any:
        lv = lf(p)
        if lv is None:
            return None
        rv = rf(p)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            # "It's illegal to compare string": both sides go through Double.valueOf.
            return test(_double_compare(_parse_double(lv), _parse_double(rv)))
        return test(_jcompare(lv, rv))

    return ordering


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------

class CompiledFilter:
    """One compiled SQL92 subscription; build once, call per message."""

    __slots__ = ("expression", "tree", "_fn")

    def __init__(self, expression: str, tree: Expr) -> None:
        self.expression = expression
        self.tree = tree
        self._fn = _compile(tree)

    def evaluate(self, properties: Props | None) -> bool | None:
        """The Java ``evaluate``: True/False/None, or SQL92EvalError where Java would throw."""
        try:
            return self._fn(properties if properties is not None else {})
        except RecursionError as exc:
            raise SQL92EvalError("StackOverflowError") from exc

    def matches(self, properties: Props | None) -> bool:
        """``ExpressionMessageFilter.isMatchedByCommitLog``: only a Boolean TRUE matches."""
        try:
            return self._fn(properties if properties is not None else {}) is True
        except Exception:  # a throwing expression never matches (the broker logs and skips)
            return False

    def __str__(self) -> str:
        return str(self.tree)

    def __repr__(self) -> str:
        return f"CompiledFilter({self.expression!r})"


def parse(text: str) -> Expr:
    """Parse an expression into the (Java-shaped) tree; raises SQL92ParseError."""
    if text is None:
        raise SQL92ParseError("java.lang.NullPointerException", None)
    try:
        return _Parser(text).selector()
    except _JavaRuntime as exc:
        raise SQL92ParseError(exc.java_string(), text) from None
    except RecursionError:
        raise SQL92ParseError("java.lang.StackOverflowError", text) from None


_CACHE_SIZE = 100
_cache: OrderedDict[str, CompiledFilter | SQL92ParseError] = OrderedDict()


def compile_sql92(text: str) -> CompiledFilter:
    """Compile (or fetch from the 100-entry cache, errors included) an SQL92 expression."""
    hit = _cache.get(text)
    if hit is None:
        try:
            hit = CompiledFilter(text, parse(text))
        except SQL92ParseError as exc:
            hit = exc
        except RecursionError:
            hit = SQL92ParseError("java.lang.StackOverflowError", text)
        _cache[text] = hit
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(text)
    if isinstance(hit, SQL92ParseError):
        raise hit
    return hit
