// Program text's lexer and its errors (program_text_lexer.h).
#include "engines/api/program_text_lexer.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "engines/api/error.h"
#include "engines/api/program_text_syntax.h"

namespace remat {
namespace program_text {

std::string Describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kWord: return "'" + t.text + "'";
    case TokenKind::kString: return "the string " + Quote(t.text.substr(0, 40));
    case TokenKind::kValue: return "'%" + t.text + "'";
    case TokenKind::kPunct: return "'" + t.text + "'";
    case TokenKind::kEol: return "the end of the line";
    case TokenKind::kEof: return "the end of the file";
  }
  return "?";
}

void SourceErrors::Fail(int line, int column, const std::string& message) const {
  ErrorFacts facts;
  facts.kind = ErrorKind::kParse;
  facts.file = filename_;
  facts.line = line;
  facts.column = column;
  throw Error(StrCat(filename_, ":", line, ":", column, ": ", message), facts);
}
void SourceErrors::Fail(const Token& at, const std::string& message) const {
  Fail(at.line, at.column, message);
}

std::vector<Token> Lex(const std::string& text, const SourceErrors& errors) {
  std::vector<Token> tokens;
  int line = 1;
  size_t line_start = 0;
  size_t i = 0;
  const size_t n = text.size();
  auto token = [&](TokenKind kind, std::string s, size_t at) {
    Token t;
    t.kind = kind;
    t.text = std::move(s);
    t.line = line;
    t.column = static_cast<int>(at - line_start) + 1;
    tokens.push_back(std::move(t));
  };
  while (i < n) {
    const char c = text[i];
    if (c == '\n') {
      token(TokenKind::kEol, "", i);
      ++i;
      ++line;
      line_start = i;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '#') {
      while (i < n && text[i] != '\n') ++i;
    } else if (IsIdChar(c) || c == '-' || c == '+') {
      const size_t start = i;
      while (i < n && (IsIdChar(text[i]) || text[i] == '-' || text[i] == '+')) ++i;
      token(TokenKind::kWord, text.substr(start, i - start), start);
    } else if (c == '%') {
      const size_t start = i++;
      while (i < n && IsIdChar(text[i])) ++i;
      if (i == start + 1) {
        errors.Fail(line, static_cast<int>(start - line_start) + 1,
                    "expected a value name after '%' (letters, digits, '_' or '.')");
      }
      token(TokenKind::kValue, text.substr(start + 1, i - start - 1), start);
    } else if (c == '"') {
      const size_t start = i++;
      std::string s;
      while (true) {
        if (i >= n || text[i] == '\n') {
          errors.Fail(line, static_cast<int>(start - line_start) + 1,
                      "unterminated string; expected a closing '\"' on the same line");
        }
        const unsigned char d = static_cast<unsigned char>(text[i]);
        if (d == '"') break;
        if (d == '\\') {
          const int col = static_cast<int>(i - line_start) + 1;
          const char e = i + 1 < n ? text[i + 1] : '\0';
          if (e == '"' || e == '\\') {
            s += e;
            i += 2;
          } else if (e == 'n') {
            s += '\n';
            i += 2;
          } else if (e == 't') {
            s += '\t';
            i += 2;
          } else if (e == 'x' && i + 3 < n &&
                     std::isxdigit(static_cast<unsigned char>(text[i + 2])) &&
                     std::isxdigit(static_cast<unsigned char>(text[i + 3]))) {
            s += static_cast<char>(std::strtol(text.substr(i + 2, 2).c_str(), nullptr, 16));
            i += 4;
          } else {
            errors.Fail(line, col, "bad escape in a string; expected \\\" \\\\ \\n \\t or \\xHH");
          }
          continue;
        }
        if (d < 0x20 && d != '\t') {
          errors.Fail(line, static_cast<int>(i - line_start) + 1,
                      "a control character in a string; expected it escaped as \\xHH");
        }
        s += static_cast<char>(d);
        ++i;
      }
      ++i;
      token(TokenKind::kString, std::move(s), start);
    } else if (std::strchr("(){}[],:=@", c) != nullptr) {
      token(TokenKind::kPunct, std::string(1, c), i);
      ++i;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      const bool printable = c > 0x20 && c < 0x7f;
      errors.Fail(line, static_cast<int>(i - line_start) + 1,
                  StrCat("unexpected character '", printable ? std::string(1, c) : std::string(buf),
                         "'; expected a statement, a value, a name or punctuation"));
    }
  }
  token(TokenKind::kEof, "", i);
  return tokens;
}

}  // namespace program_text
}  // namespace remat
