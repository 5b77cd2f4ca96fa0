// The stop condition's grammar (docs/api.md "stop_when"), checked in the browser as the server
// checks it: a port of core/stop_condition.cc's lexer, recursive-descent parser and canonical
// printing, with the same messages and 1-based byte columns, so the create form can show the
// server's own error while the user types, and the form the server will store. Only syntax:
// evaluation stays on the server.

const kMaxLength = 1024;
const kMaxDepth = 32;
const kMaxNameLength = 64;

type Tok = "end" | "name" | "number" | "op" | "not" | "and" | "or" | "open" | "close";
interface Token {
  kind: Tok;
  text: string;
  column: number;
}

/** The parsed condition; and/or nodes are flattened (no child of their own kind). */
type Node =
  | { kind: "compare"; name: string; op: string; number: number }
  | { kind: "not"; child: Node }
  | { kind: "and" | "or"; children: Node[] };

class ParseError extends Error {}

/** The shortest text that parses back to `v`, as C++'s std::to_chars writes it ("1e-07"). */
export function formatConditionNumber(v: number): string {
  const [mantissa, exp] = v.toExponential().split("e");
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace(/^-/, "").replace(".", "");
  const e = Number(exp);
  const sci = `${digits[0]}${digits.length > 1 ? "." + digits.slice(1) : ""}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  let fixed: string;
  if (e < 0) fixed = "0." + "0".repeat(-e - 1) + digits;
  else if (digits.length - 1 <= e) fixed = digits + "0".repeat(e - (digits.length - 1));
  else fixed = digits.slice(0, e + 1) + "." + digits.slice(e + 1);
  return (negative ? "-" : "") + (fixed.length <= sci.length ? fixed : sci);
}

function print(n: Node): string {
  switch (n.kind) {
    case "compare":
      return `${n.name} ${n.op} ${formatConditionNumber(n.number)}`;
    case "not":
      return `!(${print(n.child)})`;
    default:
      return n.children
        .map((c) => (n.kind === "and" && c.kind === "or" ? `(${print(c)})` : print(c)))
        .join(n.kind === "and" ? " && " : " || ");
  }
}

const isDigit = (c: number) => c >= 48 && c <= 57;
const isNameStart = (c: number) => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95;
const isNameChar = (c: number) => isNameStart(c) || isDigit(c) || c === 46;
const isBlank = (c: number) => c === 32 || c === 9 || c === 10 || c === 13;
const ch = (s: string) => s.charCodeAt(0);

const describe = (t: Token) => (t.kind === "end" ? "the end" : `'${t.text}'`);

/** [+-]? (digits ['.' digits*] | '.' digits) [eE [+-]? digits] */
const numberText = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

class Parser {
  private pos = 0;
  private peeked: Token | null = null;
  constructor(private readonly bytes: Uint8Array) {}

  parse(): Node {
    const root = this.parseGroup("or", 0);
    const t = this.next();
    if (t.kind === "close") this.fail(t, "')' without a matching '('");
    if (t.kind !== "end") this.fail(t, `expected '&&', '||' or the end, got ${describe(t)}`);
    return root;
  }

  private fail(t: Token, what: string): never {
    throw new ParseError(`stop_when: at column ${t.column}: ${what}`);
  }
  private failAt(pos: number, what: string): never {
    return this.fail({ kind: "end", text: "", column: pos + 1 }, what);
  }
  private text(start: number, end: number): string {
    return String.fromCharCode(...this.bytes.subarray(start, end));
  }
  private peek(): Token {
    if (!this.peeked) this.peeked = this.lex();
    return this.peeked;
  }
  private next(): Token {
    const t = this.peek();
    this.peeked = null;
    return t;
  }

  private lex(): Token {
    const b = this.bytes;
    while (this.pos < b.length && isBlank(b[this.pos])) this.pos++;
    const start = this.pos;
    if (start === b.length) return { kind: "end", text: "", column: start + 1 };
    const c = b[start];
    const next = start + 1 < b.length ? b[start + 1] : 0;
    const take = (kind: Tok, length: number): Token => {
      this.pos = start + length;
      return { kind, text: this.text(start, start + length), column: start + 1 };
    };
    if (isNameStart(c)) {
      let end = start;
      while (end < b.length && isNameChar(b[end])) end++;
      const word = this.text(start, end);
      if (word === "and") return take("and", end - start);
      if (word === "or") return take("or", end - start);
      if (word === "not") return take("not", end - start);
      return take("name", end - start);
    }
    if (isDigit(c) || c === ch(".") || c === ch("+") || c === ch("-")) {
      let end = start + 1;
      while (
        end < b.length &&
        (isNameChar(b[end]) || ((b[end] === ch("+") || b[end] === ch("-")) && (b[end - 1] === ch("e") || b[end - 1] === ch("E"))))
      ) {
        end++;
      }
      const t = take("number", end - start);
      if (!numberText.test(t.text)) this.fail(t, `invalid number ${describe(t)}`);
      return t;
    }
    switch (String.fromCharCode(c)) {
      case "(":
        return take("open", 1);
      case ")":
        return take("close", 1);
      case ">":
      case "<":
        return take("op", next === ch("=") ? 2 : 1);
      case "!":
        return next === ch("=") ? take("op", 2) : take("not", 1);
      case "=":
        if (next === ch("=")) return take("op", 2);
        return this.failAt(start, "'=' is not an operator; use '==' to compare");
      case "&":
        if (next === ch("&")) return take("and", 2);
        return this.failAt(start, "'&' is not an operator; use '&&' (or 'and')");
      case "|":
        if (next === ch("|")) return take("or", 2);
        return this.failAt(start, "'|' is not an operator; use '||' (or 'or')");
    }
    if (c > 32 && c < 0x7f) return this.failAt(start, `unexpected character '${String.fromCharCode(c)}'`);
    return this.failAt(start, `unexpected byte 0x${c.toString(16).padStart(2, "0")}`);
  }

  // or := and ('||' and)*;  and := unary ('&&' unary)*.
  private parseGroup(kind: "or" | "and", depth: number): Node {
    const operand = () => (kind === "or" ? this.parseGroup("and", depth) : this.parseUnary(depth));
    const children: Node[] = [];
    // A parenthesised group of the same kind is spliced in, so equal conditions have one form.
    const add = (n: Node) => (n.kind === kind ? children.push(...(n as { children: Node[] }).children) : children.push(n));
    add(operand());
    while (this.peek().kind === kind) {
      this.next();
      add(operand());
    }
    return children.length === 1 ? children[0] : { kind, children };
  }

  // unary := '!' unary | '(' expr ')' | comparison.
  private parseUnary(depth: number): Node {
    const t = this.next();
    if (t.kind === "not") {
      if (++depth > kMaxDepth) this.tooDeep(t);
      const open = this.peek();
      if (open.kind === "open") {
        this.next();
        return { kind: "not", child: this.parseParenthesised(open, depth) };
      }
      return { kind: "not", child: this.parseUnary(depth) };
    }
    if (t.kind === "open") {
      if (++depth > kMaxDepth) this.tooDeep(t);
      return this.parseParenthesised(t, depth);
    }
    return this.parseComparison(t);
  }

  private tooDeep(t: Token): never {
    return this.fail(t, `nested deeper than ${kMaxDepth} levels of '(' and '!'`);
  }

  private parseParenthesised(open: Token, depth: number): Node {
    const inner = this.parseGroup("or", depth);
    const close = this.next();
    if (close.kind !== "close") {
      this.fail(close, `expected '&&', '||' or ')' to close the '(' at column ${open.column}, got ${describe(close)}`);
    }
    return inner;
  }

  // comparison := name op number.
  private parseComparison(name: Token): Node {
    if (name.kind !== "name") this.fail(name, `expected a metric name, '!' or '(', got ${describe(name)}`);
    if (name.text.length > kMaxNameLength) {
      this.fail(name, `metric name ${describe(name)} is longer than ${kMaxNameLength} characters`);
    }
    const op = this.next();
    if (op.kind !== "op") {
      this.fail(op, `expected a comparison operator (> >= < <= == !=) after ${describe(name)}, got ${describe(op)}`);
    }
    const number = this.next();
    if (number.kind !== "number") this.fail(number, `expected a number after ${describe(op)}, got ${describe(number)}`);
    const value = Number(number.text);
    if (!Number.isFinite(value)) this.fail(number, `number ${describe(number)} is out of range`);
    return { kind: "compare", name: name.text, op: op.text, number: value };
  }
}

/**
 * A condition as the server reads it: its canonical text ("val_acc>0.95" → "val_acc > 0.95"),
 * or the server's message for one it would refuse ("stop_when: at column 9: expected a number
 * after '>', got 'abc'").
 */
export function parseStopCondition(text: string): { canonical: string; error?: undefined } | { canonical?: undefined; error: string } {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length > kMaxLength) return { error: `stop_when: longer than ${kMaxLength} characters (${bytes.length})` };
  let root: Node;
  try {
    root = new Parser(bytes).parse();
  } catch (e) {
    if (e instanceof ParseError) return { error: e.message };
    throw e;
  }
  const canonical = print(root);
  if (canonical.length > kMaxLength) {
    return { error: `stop_when: longer than ${kMaxLength} characters once written as ${canonical.length} in canonical form` };
  }
  return { canonical };
}

/** The server's message for a condition it would refuse, or null; "" means no condition. */
export function checkStopCondition(text: string): string | null {
  return text === "" ? null : (parseStopCondition(text).error ?? null);
}
