// Program text's tokens (program_text.h's grammar: words, strings, values,
// punctuation, ends of lines) and the errors that point at them:
// "FILE:LINE:COLUMN: what was wrong; what was expected". Internal to
// program_text's parser.
#ifndef REMAT_ENGINES_API_PROGRAM_TEXT_LEXER_H_
#define REMAT_ENGINES_API_PROGRAM_TEXT_LEXER_H_

#include <string>
#include <vector>

namespace remat {
namespace program_text {

enum class TokenKind { kWord, kString, kValue, kPunct, kEol, kEof };

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;  // a word, a string's contents, a value's ID, a punctuation character
  int line = 1;
  int column = 1;
};

// How a token reads in an error message: "'matmul'", "the end of the line".
std::string Describe(const Token& t);

// The errors of one source file: each throws remat::Error "FILE:LINE:COLUMN:
// message" (LINE and COLUMN from 1, COLUMN in bytes), its facts those of a
// parse error at that place.
class SourceErrors {
 public:
  // `filename` must outlive this.
  explicit SourceErrors(const std::string& filename) : filename_(filename) {}

  [[noreturn]] void Fail(int line, int column, const std::string& message) const;
  [[noreturn]] void Fail(const Token& at, const std::string& message) const;

 private:
  const std::string& filename_;
};

// The tokens of `text`, ending with one kEof; comments and blanks dropped.
// A character no token begins with, a bad string or escape, or a '%'
// without a name is an error through `errors`.
std::vector<Token> Lex(const std::string& text, const SourceErrors& errors);

}  // namespace program_text
}  // namespace remat

#endif  // REMAT_ENGINES_API_PROGRAM_TEXT_LEXER_H_
