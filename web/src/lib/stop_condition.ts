// The stop condition's grammar (docs/api.md "stop_when"), checked in the browser as the server
// checks it: a port of core/stop_condition.cc's lexer and recursive-descent parser with the same
// messages and 1-based byte columns, so the create form can show the server's own error while
// the user types. Only syntax: evaluation stays on the server.

const kMaxLength = 1024;
const kMaxDepth = 32;
const kMaxNameLength = 64;

type Tok = "end" | "name" | "number" | "op" | "not" | "and" | "or" | "open" | "close";
interface Token {
  kind: Tok;
  text: string;
  column: number;
}

class ParseError extends Error {}

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

  parse(): void {
    this.parseGroup("or", 0);
    const t = this.next();
    if (t.kind === "close") this.fail(t, "')' without a matching '('");
    if (t.kind !== "end") this.fail(t, `expected '&&', '||' or the end, got ${describe(t)}`);
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
  private parseGroup(kind: "or" | "and", depth: number): void {
    const operand = () => (kind === "or" ? this.parseGroup("and", depth) : this.parseUnary(depth));
    operand();
    while (this.peek().kind === kind) {
      this.next();
      operand();
    }
  }

  // unary := '!' unary | '(' expr ')' | comparison.
  private parseUnary(depth: number): void {
    const t = this.next();
    if (t.kind === "not") {
      if (++depth > kMaxDepth) this.tooDeep(t);
      const open = this.peek();
      if (open.kind === "open") {
        this.next();
        this.parseParenthesised(open, depth);
      } else {
        this.parseUnary(depth);
      }
      return;
    }
    if (t.kind === "open") {
      if (++depth > kMaxDepth) this.tooDeep(t);
      this.parseParenthesised(t, depth);
      return;
    }
    this.parseComparison(t);
  }

  private tooDeep(t: Token): never {
    return this.fail(t, `nested deeper than ${kMaxDepth} levels of '(' and '!'`);
  }

  private parseParenthesised(open: Token, depth: number): void {
    this.parseGroup("or", depth);
    const close = this.next();
    if (close.kind !== "close") {
      this.fail(close, `expected '&&', '||' or ')' to close the '(' at column ${open.column}, got ${describe(close)}`);
    }
  }

  // comparison := name op number.
  private parseComparison(name: Token): void {
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
    if (!Number.isFinite(Number(number.text))) this.fail(number, `number ${describe(number)} is out of range`);
  }
}

/**
 * The server's message for a condition it would refuse ("stop_when: at column 9: expected a
 * number after '>', got 'abc'"), or null when it parses. The empty text means no condition.
 */
export function checkStopCondition(text: string): string | null {
  if (text === "") return null;
  const bytes = new TextEncoder().encode(text);
  if (bytes.length > kMaxLength) return `stop_when: longer than ${kMaxLength} characters (${bytes.length})`;
  try {
    new Parser(bytes).parse();
    return null;
  } catch (e) {
    if (e instanceof ParseError) return e.message;
    throw e;
  }
}
