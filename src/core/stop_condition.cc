// Stop conditions: the lexer and recursive-descent parser of the grammar in stop_condition.h,
// three-valued evaluation, canonical printing and the explanation of why a condition holds.
#include "core/stop_condition.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <system_error>
#include <utility>

#include "core/hex.h"

namespace gpupool {

enum class NodeKind { kCompare, kNot, kAnd, kOr };
enum class CompareOp { kGt, kGe, kLt, kLe, kEq, kNe };

struct StopConditionNode {
  NodeKind kind = NodeKind::kCompare;
  // kCompare: `name op number`.
  CompareOp op = CompareOp::kGt;
  std::string name;
  double number = 0;
  // kNot: one child; kAnd, kOr: two or more, none of the node's own kind (flattened).
  std::vector<StopConditionNode> children;
};

namespace {

using Node = StopConditionNode;

constexpr std::array<std::string_view, 6> kOpText = {">", ">=", "<", "<=", "==", "!="};
constexpr std::string_view kField = "stop_when";

std::string_view OpText(CompareOp op) { return kOpText[static_cast<size_t>(op)]; }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c) || c == '.'; }
bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The shortest text that parses back to exactly `v` ("0.95", "1800", "1e-07").
std::string FormatNumber(double v) {
  std::array<char, 32> buf;
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), end);
}

// Appends `child` to the kAnd / kOr node `group`, splicing in a group of the same kind (one
// that was parenthesised) so that equal conditions have one form.
void Append(Node* group, Node child) {
  if (child.kind != group->kind) {
    group->children.push_back(std::move(child));
    return;
  }
  for (Node& grandchild : child.children) group->children.push_back(std::move(grandchild));
}

// ------------------------------------------------------------------------------------------
// Lexer

enum class Tok { kEnd, kName, kNumber, kOp, kNot, kAnd, kOr, kOpen, kClose };

struct Token {
  Tok kind = Tok::kEnd;
  std::string_view text;          // as written ("and", "&&", "0.5"); empty at the end
  size_t column = 0;              // 1-based byte column
  CompareOp op = CompareOp::kGt;  // kOp
};

// How a token is named in "got …".
std::string Describe(const Token& t) {
  if (t.kind == Tok::kEnd) return "the end";
  return "'" + std::string(t.text) + "'";
}

// A number as the grammar writes it: [+-]? (digits ['.' digits*] | '.' digits) [eE [+-]? digits].
bool IsNumberText(std::string_view s) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    return i - start;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t mantissa = digits();
  if (i < s.size() && s[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<Node> Parse() {
    Result<Node> root = ParseOr(0);
    if (!root) return root;
    Result<Token> t = Next();
    if (!t) return tl::unexpected(t.error());
    if (t->kind == Tok::kClose) return Fail(*t, "')' without a matching '('");
    if (t->kind != Tok::kEnd) {
      return Fail(*t, "expected '&&', '||' or the end, got " + Describe(*t));
    }
    return root;
  }

 private:
  // The value of a number token (validated by the lexer).
  Result<double> Number(const Token& t) const {
    std::string_view s = t.text;
    if (s.front() == '+') s.remove_prefix(1);  // from_chars takes no '+'
    double v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) {
      return Fail(t, "number " + Describe(t) + " is out of range");
    }
    return v;
  }

  tl::unexpected<Error> Fail(const Token& t, const std::string& what) const {
    return InvalidArgument(std::string(kField) + ": at column " + std::to_string(t.column) + ": " +
                           what);
  }
  tl::unexpected<Error> FailAt(size_t pos, const std::string& what) const {
    return Fail(Token{Tok::kEnd, {}, pos + 1}, what);
  }

  Result<Token> Peek() {
    if (!peeked_) {
      Result<Token> t = Lex();
      if (!t) return t;
      peeked_ = *t;
    }
    return *peeked_;
  }
  Result<Token> Next() {
    Result<Token> t = Peek();
    Skip();
    return t;
  }
  // Takes the token a successful Peek() returned: it is lexed already, so nothing can fail.
  void Skip() { peeked_.reset(); }

  Result<Token> Lex() {
    while (pos_ < text_.size() && IsBlank(text_[pos_])) ++pos_;
    const size_t start = pos_;
    Token t{Tok::kEnd, {}, start + 1};
    if (start == text_.size()) return t;
    const char c = text_[start];
    const char next = start + 1 < text_.size() ? text_[start + 1] : '\0';
    const auto take = [&](Tok kind, size_t length) {
      pos_ = start + length;
      t.kind = kind;
      t.text = text_.substr(start, length);
      return t;
    };
    const auto op = [&](CompareOp o, size_t length) {
      t.op = o;
      return take(Tok::kOp, length);
    };
    if (IsNameStart(c)) {
      size_t end = start;
      while (end < text_.size() && IsNameChar(text_[end])) ++end;
      const std::string_view word = text_.substr(start, end - start);
      if (word == "and") return take(Tok::kAnd, end - start);
      if (word == "or") return take(Tok::kOr, end - start);
      if (word == "not") return take(Tok::kNot, end - start);
      return take(Tok::kName, end - start);
    }
    if (IsDigit(c) || c == '.' || c == '+' || c == '-') {
      // The number and anything glued to it, so that "5abc" or "1.2.3" is reported whole.
      size_t end = start + 1;
      while (end < text_.size() &&
             (IsNameChar(text_[end]) || ((text_[end] == '+' || text_[end] == '-') &&
                                         (text_[end - 1] == 'e' || text_[end - 1] == 'E')))) {
        ++end;
      }
      take(Tok::kNumber, end - start);
      if (!IsNumberText(t.text)) return Fail(t, "invalid number " + Describe(t));
      return t;
    }
    switch (c) {
      case '(':
        return take(Tok::kOpen, 1);
      case ')':
        return take(Tok::kClose, 1);
      case '>':
        return next == '=' ? op(CompareOp::kGe, 2) : op(CompareOp::kGt, 1);
      case '<':
        return next == '=' ? op(CompareOp::kLe, 2) : op(CompareOp::kLt, 1);
      case '!':
        return next == '=' ? op(CompareOp::kNe, 2) : take(Tok::kNot, 1);
      case '=':
        if (next == '=') return op(CompareOp::kEq, 2);
        return FailAt(start, "'=' is not an operator; use '==' to compare");
      case '&':
        if (next == '&') return take(Tok::kAnd, 2);
        return FailAt(start, "'&' is not an operator; use '&&' (or 'and')");
      case '|':
        if (next == '|') return take(Tok::kOr, 2);
        return FailAt(start, "'|' is not an operator; use '||' (or 'or')");
      default:
        break;
    }
    const bool printable = c > ' ' && c < 0x7f;
    if (printable) return FailAt(start, "unexpected character '" + std::string(1, c) + "'");
    return FailAt(start, "unexpected byte 0x" + HexEncode(std::string_view(&c, 1)));
  }

  // or := and ('||' and)*;  and := unary ('&&' unary)*.
  Result<Node> ParseOr(int depth) { return ParseGroup(NodeKind::kOr, Tok::kOr, depth); }
  Result<Node> ParseAnd(int depth) { return ParseGroup(NodeKind::kAnd, Tok::kAnd, depth); }

  Result<Node> ParseGroup(NodeKind kind, Tok separator, int depth) {
    const auto operand = [&] {
      return kind == NodeKind::kOr ? ParseAnd(depth) : ParseUnary(depth);
    };
    Result<Node> first = operand();
    if (!first) return first;
    Node group;
    group.kind = kind;
    Append(&group, std::move(*first));
    while (true) {
      Result<Token> t = Peek();
      if (!t) return tl::unexpected(t.error());
      if (t->kind != separator) break;
      Skip();
      Result<Node> more = operand();
      if (!more) return more;
      Append(&group, std::move(*more));
    }
    if (group.children.size() == 1) return std::move(group.children.front());
    return group;
  }

  // unary := '!' unary | '(' expr ')' | comparison.
  Result<Node> ParseUnary(int depth) {
    Result<Token> t = Next();
    if (!t) return tl::unexpected(t.error());
    if (t->kind == Tok::kNot) {
      if (++depth > kMaxStopWhenDepth) return TooDeep(*t);
      Result<Token> open = Peek();
      if (!open) return tl::unexpected(open.error());
      Result<Node> child;
      if (open->kind == Tok::kOpen) {
        Skip();
        child = ParseParenthesised(*open, depth);
      } else {
        child = ParseUnary(depth);
      }
      if (!child) return child;
      Node n;
      n.kind = NodeKind::kNot;
      n.children.push_back(std::move(*child));
      return n;
    }
    if (t->kind == Tok::kOpen) {
      if (++depth > kMaxStopWhenDepth) return TooDeep(*t);
      return ParseParenthesised(*t, depth);
    }
    return ParseComparison(*t);
  }

  tl::unexpected<Error> TooDeep(const Token& t) const {
    return Fail(
        t, "nested deeper than " + std::to_string(kMaxStopWhenDepth) + " levels of '(' and '!'");
  }

  // The rest of '(' expr ')', the '(' (`open`) taken.
  Result<Node> ParseParenthesised(const Token& open, int depth) {
    Result<Node> inner = ParseOr(depth);
    if (!inner) return inner;
    Result<Token> close = Next();
    if (!close) return tl::unexpected(close.error());
    if (close->kind != Tok::kClose) {
      return Fail(*close, "expected '&&', '||' or ')' to close the '(' at column " +
                              std::to_string(open.column) + ", got " + Describe(*close));
    }
    return inner;
  }

  // comparison := name op number, the name (`name`) taken.
  Result<Node> ParseComparison(const Token& name) {
    if (name.kind != Tok::kName) {
      return Fail(name, "expected a metric name, '!' or '(', got " + Describe(name));
    }
    if (name.text.size() > kMaxMetricNameLength) {
      return Fail(name, "metric name " + Describe(name) + " is longer than " +
                            std::to_string(kMaxMetricNameLength) + " characters");
    }
    Result<Token> op = Next();
    if (!op) return tl::unexpected(op.error());
    if (op->kind != Tok::kOp) {
      return Fail(*op, "expected a comparison operator (> >= < <= == !=) after " + Describe(name) +
                           ", got " + Describe(*op));
    }
    Result<Token> number = Next();
    if (!number) return tl::unexpected(number.error());
    if (number->kind != Tok::kNumber) {
      return Fail(*number,
                  "expected a number after " + Describe(*op) + ", got " + Describe(*number));
    }
    Result<double> value = Number(*number);
    if (!value) return tl::unexpected(value.error());
    Node n;
    n.kind = NodeKind::kCompare;
    n.op = op->op;
    n.name = std::string(name.text);
    n.number = *value;
    return n;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::optional<Token> peeked_;
};

// ------------------------------------------------------------------------------------------
// Evaluation, printing, explanation

enum class Truth { kFalse, kUnknown, kTrue };

Truth Eval(const Node& n, const MetricValues& latest) {
  switch (n.kind) {
    case NodeKind::kCompare: {
      const auto it = latest.find(n.name);
      if (it == latest.end() || std::isnan(it->second)) return Truth::kUnknown;
      const double v = it->second;
      bool holds = false;
      switch (n.op) {
        case CompareOp::kGt:
          holds = v > n.number;
          break;
        case CompareOp::kGe:
          holds = v >= n.number;
          break;
        case CompareOp::kLt:
          holds = v < n.number;
          break;
        case CompareOp::kLe:
          holds = v <= n.number;
          break;
        case CompareOp::kEq:
          holds = v == n.number;
          break;
        case CompareOp::kNe:
          holds = v != n.number;
          break;
      }
      return holds ? Truth::kTrue : Truth::kFalse;
    }
    case NodeKind::kNot: {
      const Truth t = Eval(n.children.front(), latest);
      if (t == Truth::kUnknown) return t;
      return t == Truth::kTrue ? Truth::kFalse : Truth::kTrue;
    }
    case NodeKind::kAnd:
    case NodeKind::kOr: {
      // && is decided by a false operand, || by a true one; otherwise unknown wins over the rest.
      const Truth decisive = n.kind == NodeKind::kAnd ? Truth::kFalse : Truth::kTrue;
      Truth result = n.kind == NodeKind::kAnd ? Truth::kTrue : Truth::kFalse;
      for (const Node& c : n.children) {
        const Truth t = Eval(c, latest);
        if (t == decisive) return t;
        if (t == Truth::kUnknown) result = t;
      }
      return result;
    }
  }
  return Truth::kUnknown;
}

void Print(const Node& n, std::string* out) {
  switch (n.kind) {
    case NodeKind::kCompare:
      *out += n.name;
      *out += ' ';
      *out += OpText(n.op);
      *out += ' ';
      *out += FormatNumber(n.number);
      return;
    case NodeKind::kNot:
      *out += "!(";
      Print(n.children.front(), out);
      *out += ')';
      return;
    case NodeKind::kAnd:
    case NodeKind::kOr:
      for (size_t i = 0; i < n.children.size(); ++i) {
        if (i > 0) *out += n.kind == NodeKind::kAnd ? " && " : " || ";
        // Only an || inside an && needs parentheses (&& binds tighter; groups are flattened).
        const bool parens = n.kind == NodeKind::kAnd && n.children[i].kind == NodeKind::kOr;
        if (parens) *out += '(';
        Print(n.children[i], out);
        if (parens) *out += ')';
      }
      return;
  }
}

std::string Print(const Node& n) {
  std::string out;
  Print(n, &out);
  return out;
}

void CollectNames(const Node& n, std::vector<std::string>* names) {
  if (n.kind == NodeKind::kCompare) {
    if (std::find(names->begin(), names->end(), n.name) == names->end()) {
      names->push_back(n.name);
    }
    return;
  }
  for (const Node& c : n.children) CollectNames(c, names);
}

std::vector<std::string> NamesOf(const Node& n) {
  std::vector<std::string> names;
  CollectNames(n, &names);
  return names;
}

// The part of a true `n` that makes it true: the first true operand of an ||, every operand of
// an && (each reduced the same way), a comparison or a !(...) whole.
Node TruePart(const Node& n, const MetricValues& latest) {
  switch (n.kind) {
    case NodeKind::kCompare:
    case NodeKind::kNot:
      return n;
    case NodeKind::kOr:
      for (const Node& c : n.children) {
        if (Eval(c, latest) == Truth::kTrue) return TruePart(c, latest);
      }
      return n;  // not reached for a true ||
    case NodeKind::kAnd: {
      Node part;
      part.kind = NodeKind::kAnd;
      for (const Node& c : n.children) Append(&part, TruePart(c, latest));
      return part;
    }
  }
  return n;
}

}  // namespace

bool IsMetricName(std::string_view name) {
  if (name.empty() || name.size() > kMaxMetricNameLength || !IsNameStart(name.front())) {
    return false;
  }
  if (name == "and" || name == "or" || name == "not") return false;
  return std::all_of(name.begin(), name.end(), IsNameChar);
}

StopCondition::StopCondition(std::shared_ptr<const StopConditionNode> root)
    : root_(std::move(root)), names_(NamesOf(*root_)) {}

bool StopCondition::Evaluate(const MetricValues& latest) const {
  return Eval(*root_, latest) == Truth::kTrue;
}

std::string StopCondition::ToString() const { return Print(*root_); }

std::string StopCondition::Explain(const MetricValues& latest) const {
  const Node part = Evaluate(latest) ? TruePart(*root_, latest) : *root_;
  std::string out = Print(part) + " (";
  const std::vector<std::string> names = NamesOf(part);
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ", ";
    out += names[i];
    const auto it = latest.find(names[i]);
    out += it == latest.end() ? " not reported" : " = " + FormatNumber(it->second);
  }
  return out + ")";
}

Result<StopCondition> ParseStopCondition(std::string_view text) {
  if (text.size() > kMaxStopWhenLength) {
    return InvalidArgument(std::string(kField) + ": longer than " +
                           std::to_string(kMaxStopWhenLength) + " characters (" +
                           std::to_string(text.size()) + ")");
  }
  Result<Node> root = Parser(text).Parse();
  if (!root) return tl::unexpected(root.error());
  StopCondition condition(std::make_shared<const Node>(std::move(*root)));
  // The canonical text must fit too, so that it always parses back.
  const size_t canonical = condition.ToString().size();
  if (canonical > kMaxStopWhenLength) {
    return InvalidArgument(std::string(kField) + ": longer than " +
                           std::to_string(kMaxStopWhenLength) + " characters once written as " +
                           std::to_string(canonical) + " in canonical form");
  }
  return condition;
}

Result<std::string> StopWhenOrIdle(std::string_view stop_when, int64_t idle_ms) {
  if (idle_ms <= 0) {
    return InvalidArgument("idle time must be longer than 0, got " + std::to_string(idle_ms) +
                           " ms");
  }
  Node idle;
  idle.kind = NodeKind::kCompare;
  idle.op = CompareOp::kGe;
  idle.name = std::string(kIdleMetric);
  idle.number = static_cast<double>(idle_ms) / 1000.0;
  if (stop_when.empty()) return Print(idle);
  Result<StopCondition> own = ParseStopCondition(stop_when);
  if (!own) return tl::unexpected(own.error());
  Node either;
  either.kind = NodeKind::kOr;
  Append(&either, *own->root_);
  Append(&either, std::move(idle));
  std::string text = Print(either);
  if (text.size() > kMaxStopWhenLength) {
    return InvalidArgument(
        std::string(kField) + ": longer than " + std::to_string(kMaxStopWhenLength) +
        " characters with the idle condition added (" + std::to_string(text.size()) + ")");
  }
  return text;
}

}  // namespace gpupool
